"""DataLoader: a dataset's samples in batches, optionally prefetched by worker threads.

Worker threads suffice: deft releases the GIL inside its calls and NumPy in
its copies, so workers read samples and stack batches while the training loop
runs the model. Batches come out in the sampler's order whatever the workers'.
"""
import collections
import concurrent.futures
import warnings
from typing import Any, Callable, Iterator, List, Optional, Sequence

import numpy as _np

from .._lib import lib
from ..ndarray import NDArray, array, invoke
from .dataset import Dataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


def default_batchify_fn(data: Sequence[Any]) -> Any:
    """Samples stacked into a batch along a new first axis, as an NDArray: tuples (data,
    label) field by field, dicts key by key, NumPy arrays and numbers through NumPy."""
    first = data[0]
    if isinstance(first, NDArray):
        return invoke("stack", list(data), {"axis": 0, "num_args": len(data)})
    if isinstance(first, tuple):
        return tuple(default_batchify_fn(field) for field in zip(*data))
    if isinstance(first, list) and not _is_number(first[0] if first else 0):
        return [default_batchify_fn(field) for field in zip(*data)]
    if isinstance(first, dict):
        return {k: default_batchify_fn([d[k] for d in data]) for k in first}
    values = _np.asarray(data)
    if values.dtype == _np.float64:  # Python floats: float32, as deft.array makes them
        values = values.astype(_np.float32)
    if values.dtype.kind not in "biuf":
        raise TypeError(f"default_batchify_fn: samples of {type(first).__name__} "
                        f"({values.dtype}) do not stack into an array; give a batchify_fn")
    return array(values)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, _np.number, _np.bool_))


class DataLoader:
    """Batches of a dataset, as MXNet Gluon's DataLoader (PyTorch's names are aliases).

    batch_size with shuffle (a RandomSampler, reproducible with `seed`) or a
    `sampler`; or a whole `batch_sampler`. last_batch "keep" (default),
    "discard" (drop_last=True) or "rollover" (the rest starts the next epoch).
    batchify_fn (collate_fn) stacks a list of samples (default_batchify_fn).
    num_workers > 0 makes that many threads prepare batches, keeping
    `prefetch` (default 2 * num_workers) batches ready ahead of the loop.
    pin_memory=True hands over batches in page-locked host memory
    (NDArray.pin_memory(), from a cache of pinned blocks), which GPUs copy from
    at full speed; workers make them, so the copy overlaps the loop. Without a
    GPU there is nothing to pin for: a warning says so once, and batches stay
    ordinary CPU arrays, as PyTorch does.
    """

    def __init__(self, dataset: Dataset, batch_size: Optional[int] = None,
                 shuffle: bool = False, sampler: Optional[Sampler] = None,
                 last_batch: Optional[str] = None, batch_sampler: Optional[Sampler] = None,
                 batchify_fn: Optional[Callable] = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0,
                 prefetch: Optional[int] = None, thread_pool: bool = True,
                 timeout: Optional[float] = 120, drop_last: Optional[bool] = None,
                 collate_fn: Optional[Callable] = None, seed: Optional[int] = None) -> None:
        self._dataset = dataset
        self._batch_sampler = _batch_sampler(len(dataset), batch_size, shuffle, sampler,
                                             _last_batch(last_batch, drop_last),
                                             batch_sampler, seed)
        if batchify_fn is not None and collate_fn is not None:
            raise ValueError("DataLoader: give batchify_fn or collate_fn (its PyTorch name), "
                             "not both")
        self._batchify = batchify_fn or collate_fn or default_batchify_fn
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers is {num_workers!r}, expected an int "
                             f">= 0")
        if not thread_pool and num_workers > 0:
            raise ValueError("DataLoader: deft's workers are threads (thread_pool=True): deft "
                             "releases the GIL in its calls, so processes gain nothing")
        self._num_workers = num_workers
        self._prefetch = max(1, 2 * num_workers if prefetch is None else int(prefetch))
        self._pin_memory, self._timeout = pin_memory and _can_pin(), timeout
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def _batch(self, indices: List[int]) -> Any:
        batch = self._batchify([self._dataset[i] for i in indices])
        return _pinned(batch) if self._pin_memory else batch

    def __iter__(self) -> Iterator[Any]:
        if self._num_workers == 0:
            for indices in self._batch_sampler:
                yield self._batch(indices)
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._num_workers, thread_name_prefix="deft-data")
        pending: "collections.deque[concurrent.futures.Future]" = collections.deque()
        batches = iter(self._batch_sampler)
        try:
            for indices in batches:
                pending.append(self._pool.submit(self._batch, indices))
                if len(pending) >= self._prefetch:
                    yield pending.popleft().result(self._timeout)
            while pending:
                yield pending.popleft().result(self._timeout)
        finally:  # a loop left early: batches not started are not made
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Stop the worker threads (a later iteration starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _last_batch(last_batch: Optional[str], drop_last: Optional[bool]) -> Optional[str]:
    if drop_last is None:
        return last_batch
    wanted = "discard" if drop_last else "keep"
    if last_batch is not None and last_batch != wanted:
        raise ValueError(f"DataLoader: drop_last={drop_last} contradicts "
                         f"last_batch={last_batch!r}")
    return wanted


def _batch_sampler(length: int, batch_size: Optional[int], shuffle: bool,
                   sampler: Optional[Sampler], last_batch: Optional[str],
                   batch_sampler: Optional[Sampler], seed: Optional[int]) -> Sampler:
    if batch_sampler is not None:
        if batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError("DataLoader: batch_size, shuffle, sampler and last_batch must "
                             "not be given with batch_sampler")
        return batch_sampler
    if batch_size is None:
        raise ValueError("DataLoader: batch_size is needed when there is no batch_sampler")
    if sampler is None:
        sampler = RandomSampler(length, seed) if shuffle else SequentialSampler(length)
    elif shuffle:
        raise ValueError("DataLoader: shuffle must not be given with a sampler")
    return BatchSampler(sampler, batch_size, last_batch or "keep")


def _can_pin() -> bool:
    """Whether pinning helps: with a GPU. Without one, say so (once, as PyTorch)."""
    if lib.DeftGetGPUCount() > 0:
        return True
    warnings.warn("DataLoader: pin_memory=True, but deft found no GPU: page-locked memory "
                  "is for GPU copies, so batches stay ordinary CPU arrays", stacklevel=3)
    return False


def _pinned(batch: Any) -> Any:
    """The batch with every array in it copied to page-locked host memory."""
    if isinstance(batch, NDArray):
        return batch.pin_memory()
    if isinstance(batch, (tuple, list)):
        return type(batch)(_pinned(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _pinned(b) for k, b in batch.items()}
    return batch
