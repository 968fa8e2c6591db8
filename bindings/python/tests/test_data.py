"""deft.data: datasets, samplers, DataLoader (workers, shuffle seeds, last batches),
transforms; the progress bar and the training log."""
import io
import json
import threading

import numpy as np
import pytest

import deft
from deft import data
from deft.data import transforms as T
from deft.progress import TextProgress


def _xy(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int32)
    return x, y


# ---- datasets ----

def test_array_dataset_zips_arrays_and_checks_lengths():
    x, y = _xy()
    ds = data.ArrayDataset(x, deft.array(y))
    assert len(ds) == 10
    xi, yi = ds[3]
    np.testing.assert_array_equal(xi, x[3])
    assert yi == 3
    np.testing.assert_array_equal(data.ArrayDataset(x)[2], x[2])
    with pytest.raises(ValueError, match="array 1 has length 4, array 0 has 10"):
        data.ArrayDataset(x, y[:4])


def test_transform_and_transform_first():
    x, y = _xy()
    ds = data.ArrayDataset(x, y)
    doubled = ds.transform(lambda a, b: (a * 2, b + 100))
    a, b = doubled[1]
    np.testing.assert_array_equal(a, x[1] * 2)
    assert b == 101
    first = ds.transform_first(lambda a: a.sum())
    assert first[2] == (x[2].sum(), 2)
    calls = []
    eager = data.SimpleDataset([1, 2, 3]).transform(lambda v: calls.append(v) or v * 10,
                                                     lazy=False)
    assert calls == [1, 2, 3] and eager[2] == 30
    assert len(calls) == 3  # not applied again on read


def test_filter_take_shard():
    ds = data.SimpleDataset(list(range(10)))
    assert [ds.filter(lambda v: v % 3 == 0)[i] for i in range(4)] == [0, 3, 6, 9]
    assert len(ds.take(4)) == 4 and len(ds.take(40)) == 10
    shards = [ds.shard(3, i) for i in range(3)]
    assert [len(s) for s in shards] == [4, 3, 3]
    assert [v for s in shards for v in (s[i] for i in range(len(s)))] == list(range(10))


# ---- samplers ----

def test_samplers():
    assert list(data.SequentialSampler(4)) == [0, 1, 2, 3]
    a, b = data.RandomSampler(20, seed=5), data.RandomSampler(20, seed=5)
    first, second = list(a), list(a)
    assert sorted(first) == list(range(20)) and first != second  # a new order each pass
    assert list(b) == first and list(b) == second  # the same passes for the same seed


@pytest.mark.parametrize("last_batch,expected,length", [
    ("keep", [[0, 1, 2], [3, 4, 5], [6]], 3),
    ("discard", [[0, 1, 2], [3, 4, 5]], 2)])
def test_batch_sampler_last_batch(last_batch, expected, length):
    bs = data.BatchSampler(data.SequentialSampler(7), 3, last_batch)
    assert list(bs) == expected and len(bs) == length


def test_batch_sampler_rollover_carries_the_rest_into_the_next_pass():
    bs = data.BatchSampler(data.SequentialSampler(7), 3, "rollover")
    assert list(bs) == [[0, 1, 2], [3, 4, 5]]
    assert len(bs) == 2  # 1 left + 7 = 8: two full batches
    assert list(bs) == [[6, 0, 1], [2, 3, 4]]
    assert list(bs) == [[5, 6, 0], [1, 2, 3], [4, 5, 6]]
    with pytest.raises(ValueError, match="last_batch is 'drop'"):
        data.BatchSampler(data.SequentialSampler(7), 3, "drop")


# ---- DataLoader ----

def test_dataloader_batches_in_order_with_labels():
    x, y = _xy()
    loader = data.DataLoader(data.ArrayDataset(x, y), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    xb, yb = batches[0]
    assert isinstance(xb, deft.NDArray) and xb.shape == (4, 3) and xb.dtype == np.float32
    assert yb.dtype == np.int32
    np.testing.assert_array_equal(batches[2][0].asnumpy(), x[8:])
    np.testing.assert_array_equal(np.concatenate([b[1].asnumpy() for b in batches]), y)


def test_dataloader_drop_last_and_last_batch():
    x, y = _xy()
    ds = data.ArrayDataset(x, y)
    assert [b[0].shape[0] for b in data.DataLoader(ds, 4, drop_last=True)] == [4, 4]
    assert [b[0].shape[0] for b in data.DataLoader(ds, 4, last_batch="discard")] == [4, 4]
    roll = data.DataLoader(ds, 4, last_batch="rollover")
    assert [b[0].shape[0] for b in roll] == [4, 4]
    assert [b[1].asnumpy().tolist() for b in roll][0] == [8, 9, 0, 1]
    with pytest.raises(ValueError, match="contradicts"):
        data.DataLoader(ds, 4, drop_last=True, last_batch="keep")


def test_dataloader_shuffle_is_reproducible_with_a_seed():
    x, y = _xy(32)
    ds = data.ArrayDataset(x, y)

    def epochs(loader, n=2):
        return [np.concatenate([b[1].asnumpy() for b in loader]).tolist() for _ in range(n)]

    a = epochs(data.DataLoader(ds, 8, shuffle=True, seed=7))
    b = epochs(data.DataLoader(ds, 8, shuffle=True, seed=7, num_workers=2))
    assert a == b and a[0] != a[1] and sorted(a[0]) == list(range(32))
    assert a[0] != list(range(32))
    assert epochs(data.DataLoader(ds, 8, shuffle=True, seed=8))[0] != a[0]


def test_dataloader_sampler_batch_sampler_and_errors():
    x, y = _xy(6)
    ds = data.ArrayDataset(x, y)
    rev = data.DataLoader(ds, 2, sampler=[5, 4, 3, 2, 1, 0])  # any sized iterable
    assert [b[1].asnumpy().tolist() for b in rev] == [[5, 4], [3, 2], [1, 0]]
    bs = data.BatchSampler(data.SequentialSampler(6), 3)
    assert [b[1].asnumpy().tolist() for b in data.DataLoader(ds, batch_sampler=bs)] == [
        [0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="must not be given with batch_sampler"):
        data.DataLoader(ds, 2, batch_sampler=bs)
    with pytest.raises(ValueError, match="batch_size is needed"):
        data.DataLoader(ds)
    with pytest.raises(ValueError, match="shuffle must not be given with a sampler"):
        data.DataLoader(ds, 2, shuffle=True, sampler=data.SequentialSampler(6))
    with pytest.raises(ValueError, match="num_workers is -1"):
        data.DataLoader(ds, 2, num_workers=-1)


def test_collate_fn_and_batchify_fn():
    ds = data.SimpleDataset([np.ones(2, np.float32) * i for i in range(4)])
    seen = []

    def collate(samples):
        seen.append(len(samples))
        return np.stack(samples).sum()

    assert [float(b) for b in data.DataLoader(ds, 2, collate_fn=collate)] == [2.0, 10.0]
    assert [float(b) for b in data.DataLoader(ds, 2, batchify_fn=collate)] == [2.0, 10.0]
    assert seen == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="not both"):
        data.DataLoader(ds, 2, collate_fn=collate, batchify_fn=collate)


def test_default_batchify_fn_stacks_ndarrays_numbers_and_dicts():
    nd = data.default_batchify_fn([deft.ones((2,)), deft.zeros((2,))])
    np.testing.assert_array_equal(nd.asnumpy(), [[1, 1], [0, 0]])
    nums = data.default_batchify_fn([0.5, 1.5])
    assert nums.dtype == np.float32
    d = data.default_batchify_fn([{"a": 1, "b": np.zeros(2)}, {"a": 2, "b": np.ones(2)}])
    assert d["a"].asnumpy().tolist() == [1, 2] and d["b"].shape == (2, 2)
    with pytest.raises(TypeError, match="do not stack"):
        data.default_batchify_fn(["a", "b"])


class _Recording(data.Dataset):
    """Notes which samples were read, and by which threads."""

    def __init__(self, n):
        self.n, self.threads, self.reads = n, set(), []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.threads.add(threading.get_ident())
        self.reads.append(i)
        return np.full(3, i, np.float32)


def test_workers_prefetch_on_threads_in_order():
    ds = _Recording(40)
    loader = data.DataLoader(ds, 4, num_workers=3, prefetch=5)
    got = [b.asnumpy()[:, 0].tolist() for b in loader]
    assert got == [[float(i) for i in range(k, k + 4)] for k in range(0, 40, 4)]
    assert threading.get_ident() not in ds.threads  # read by the workers
    assert len(list(loader)) == 10  # a second epoch on the same workers
    loader.close()


def test_a_worker_error_reaches_the_loop():
    class Bad(data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            if i == 5:
                raise KeyError("sample 5 is broken")
            return np.zeros(2, np.float32)

    with pytest.raises(KeyError, match="sample 5 is broken"):
        list(data.DataLoader(Bad(), 2, num_workers=2))


def test_leaving_a_loop_early_stops_the_workers_cleanly():
    loader = data.DataLoader(_Recording(400), 4, num_workers=2, prefetch=4)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert len(list(loader)) == 100


# ---- transforms ----

def test_to_tensor_normalize_cast_compose_on_numpy_and_ndarray():
    img = np.random.default_rng(0).integers(0, 256, (4, 5, 3)).astype(np.uint8)
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.5]
    chain = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    expected = ((img.transpose(2, 0, 1) / 255.0 - np.reshape(mean, (3, 1, 1)))
                / np.reshape(std, (3, 1, 1)))
    got_np = chain(img)
    assert isinstance(got_np, np.ndarray) and got_np.shape == (3, 4, 5)
    np.testing.assert_allclose(got_np, expected, rtol=1e-5, atol=1e-6)
    got_nd = chain(deft.array(img))
    assert isinstance(got_nd, deft.NDArray)
    np.testing.assert_allclose(got_nd.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    batch = T.ToTensor()(np.stack([img, img]))
    assert batch.shape == (2, 3, 4, 5)
    assert T.ToTensor()(img[:, :, 0]).shape == (1, 4, 5)
    assert T.Cast("float16")(deft.array(img)).dtype == np.float16
    assert T.Cast(np.int32)(img).dtype == np.int32
    with pytest.raises(ValueError, match="2 mean values for 3 channels"):
        T.Normalize([0.1, 0.2])(got_np)


def test_transforms_in_a_loader():
    imgs = np.zeros((6, 2, 2, 1), np.uint8) + 255
    ds = data.ArrayDataset(imgs, np.arange(6)).transform_first(
        T.Compose([T.ToTensor(), T.Normalize(0.5, 0.5)]))
    xb, yb = next(iter(data.DataLoader(ds, 3, num_workers=2)))
    assert xb.shape == (3, 1, 2, 2)
    np.testing.assert_allclose(xb.asnumpy(), 1.0)


# ---- progress and log ----

def test_text_progress_bar_counts_and_shows_postfix():
    out = io.StringIO()
    bar = deft.progress(range(5), desc="epoch 1", backend="text", file=out)
    seen = []
    for i in bar:
        seen.append(i)
        bar.set_postfix(loss=0.25)
    assert seen == [0, 1, 2, 3, 4]
    text = out.getvalue()
    assert text.count("\n") == 1  # not a terminal: one final line
    assert text.startswith("epoch 1: 100%|##########| 5/5 [") and "loss=0.25" in text
    with pytest.raises(ValueError, match="backend is 'fancy'"):
        deft.progress(range(2), backend="fancy")


def test_progress_uses_tqdm_when_installed():
    try:
        import tqdm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs the tqdm package"):
            deft.progress(range(2), backend="tqdm")
        assert isinstance(deft.progress(range(2)), TextProgress)
    else:
        bar = deft.progress(range(2), file=io.StringIO())
        assert type(bar).__module__.startswith("tqdm")
        assert list(bar) == [0, 1]


def test_progress_over_a_loader_knows_its_length():
    x, y = _xy(12)
    out = io.StringIO()
    bar = deft.progress(data.DataLoader(data.ArrayDataset(x, y), 5), backend="text", file=out)
    assert len(bar) == 3
    assert sum(1 for _ in bar) == 3
    assert "3/3" in out.getvalue()


def test_training_log_prints_keeps_and_reloads(tmp_path):
    path = str(tmp_path / "log.jsonl")
    out = io.StringIO()
    log = deft.TrainingLog(path, file=out)
    line = log.log(epoch=1, loss=deft.array([0.5]), accuracy=np.float32(0.75))
    assert line == "epoch 1  loss 0.5000  accuracy 0.7500"
    log.log(epoch=2, loss=0.25, accuracy=0.875)
    assert out.getvalue().splitlines() == [line, "epoch 2  loss 0.2500  accuracy 0.8750"]
    assert log.history == {"epoch": [1, 2], "loss": [0.5, 0.25], "accuracy": [0.75, 0.875]}
    assert json.loads(open(path).readline()) == {"epoch": 1, "loss": 0.5, "accuracy": 0.75}
    resumed = deft.TrainingLog.load(path, file=io.StringIO())
    resumed.log(epoch=3, loss=0.125, accuracy=0.9)
    assert resumed.history["loss"] == [0.5, 0.25, 0.125]


def test_training_log_plots_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="TrainingLog.plot needs matplotlib")
    log = deft.TrainingLog(file=io.StringIO())
    for e in range(3):
        log.log(epoch=e, loss=1.0 / (e + 1))
    path = log.plot(str(tmp_path / "curves.png"))
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_prefetch_bounds_the_batches_made_ahead():
    ds = _Recording(40)
    reads = ds.reads
    loader = data.DataLoader(ds, 2, num_workers=2, prefetch=3)
    batches = iter(loader)
    next(batches)
    # Occupy both workers: every batch submitted before is then finished (the pool
    # takes work in order), so `reads` holds all the loader asked for so far.
    barrier = threading.Barrier(3)
    sentinels = [loader._pool.submit(barrier.wait) for _ in range(2)]
    barrier.wait(timeout=60)
    for s in sentinels:
        s.result()
    assert sorted(reads) == list(range(6))  # 3 batches of 2: the one taken and 2 ahead
    next(batches)
    barrier = threading.Barrier(3)
    sentinels = [loader._pool.submit(barrier.wait) for _ in range(2)]
    barrier.wait(timeout=60)
    assert sorted(reads) == list(range(8))  # one more made ahead for the one taken
    batches.close()
    loader.close()


def test_text_progress_redraws_one_line_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    bar = deft.progress(total=3, backend="text", file=out, mininterval=0.0, unit="batch")
    for _ in range(3):
        bar.update()
    bar.write("a message")
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 5 and text.count("\n") == 2  # 3 redraws, the write, the end
    assert "1/3" in text and "3/3" in text and "\ra message\n" in text and "batch/s" in text


def test_pin_memory_pins_batches_for_a_gpu_and_warns_without_one():
    ds = data.ArrayDataset(np.arange(12, dtype=np.float32).reshape(6, 2),
                           np.arange(6, dtype=np.float32))
    if deft.num_gpus() == 0:
        with pytest.warns(UserWarning, match="found no GPU"):
            loader = data.DataLoader(ds, 2, pin_memory=True)
        batches = list(loader)
        assert not batches[0][0].is_pinned()
        with pytest.raises(deft.DeftNotImplementedError, match="needs a GPU"):
            deft.array([1.0]).pin_memory()
    else:  # pinned on the workers, from the cache of page-locked blocks
        batches = list(data.DataLoader(ds, 2, pin_memory=True, num_workers=2))
        assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
        np.testing.assert_array_equal(batches[2][0].copyto(deft.gpu(0)).asnumpy(),
                                      [[8, 9], [10, 11]])
    np.testing.assert_array_equal(batches[1][0].asnumpy(), [[4, 5], [6, 7]])
    np.testing.assert_array_equal(batches[1][1].asnumpy(), [2, 3])
