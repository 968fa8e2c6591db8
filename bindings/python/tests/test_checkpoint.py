"""Checkpoints: save_parameters / load_parameters at the exact path in MXNet's .params
format, their options, state_dict, export of the inference graph, SymbolBlock.imports."""
import json
import os

import numpy as np
import pytest

import deft
from deft import autograd, nn

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "mxnet", "corpus")
# MXNet's NDArray-list file magic (the first 8 bytes, little-endian uint64)
MXNET_LIST_MAGIC = 0x112


def _net():
    net = nn.HybridSequential()
    net.add(nn.Dense(6, activation="relu", in_units=4), nn.BatchNorm(in_channels=6),
            nn.Dropout(0.5), nn.Dense(3, in_units=6))
    net.initialize()
    return net


def _values(net):
    return {k: p.data().asnumpy() for k, p in net.collect_params().items()}


def test_save_parameters_writes_the_exact_path_in_mxnets_format(tmp_path):
    net = _net()
    path = tmp_path / "m.params"
    net.save_parameters(str(path))
    assert sorted(os.listdir(tmp_path)) == ["m.params"]
    assert int.from_bytes(path.read_bytes()[:8], "little") == MXNET_LIST_MAGIC
    other = _net()
    other.load_parameters(path)  # a path object works too
    for k, v in _values(net).items():
        np.testing.assert_array_equal(_values(other)[k], v)
    assert sorted(deft.nd.load(str(path))) == sorted(net.collect_params())


def test_allow_missing_and_ignore_extra(tmp_path):
    small, big = nn.Dense(3, in_units=4), _net()
    small.initialize()
    small.save_parameters(str(tmp_path / "small.params"))
    big.save_parameters(str(tmp_path / "big.params"))
    with pytest.raises(ValueError, match="parameter '0.weight' is missing"):
        big.load_parameters(str(tmp_path / "small.params"))
    with pytest.raises(ValueError, match="holds '0.weight', which is not a parameter"):
        small.load_parameters(str(tmp_path / "big.params"), allow_missing=True)
    # the names differ entirely: each direction needs its flag
    big.load_parameters(str(tmp_path / "small.params"), allow_missing=True, ignore_extra=True)
    before = small.weight.data().asnumpy().copy()
    small.load_parameters(str(tmp_path / "big.params"), allow_missing=True, ignore_extra=True)
    np.testing.assert_array_equal(small.weight.data().asnumpy(), before)


def test_cast_dtype_and_dtype_source(tmp_path):
    net = nn.Dense(3, in_units=2)
    net.initialize()
    net.cast("float64")
    net.save_parameters(str(tmp_path / "f64.params"))
    target = nn.Dense(3, in_units=2)
    target.initialize()
    with pytest.raises(ValueError, match="'weight' is float32, .* holds float64 "
                                         r"\(cast_dtype=True converts it\)"):
        target.load_parameters(str(tmp_path / "f64.params"))
    target.load_parameters(str(tmp_path / "f64.params"), cast_dtype=True)
    assert target.weight.data().dtype == np.float32
    np.testing.assert_allclose(target.weight.data().asnumpy(),
                               net.weight.data().asnumpy().astype(np.float32))
    target.load_parameters(str(tmp_path / "f64.params"), cast_dtype=True, dtype_source="saved")
    assert target.weight.data().dtype == np.float64 and target.weight.dtype == "float64"
    with pytest.raises(ValueError, match="dtype_source is 'mine'"):
        target.load_parameters(str(tmp_path / "f64.params"), cast_dtype=True,
                               dtype_source="mine")


def test_state_dict_round_trip():
    net, other = _net(), _net()
    state = net.state_dict()
    assert list(state) == list(net.collect_params())
    other.load_state_dict({k: v.asnumpy() for k, v in state.items()})
    for k, v in _values(net).items():
        np.testing.assert_array_equal(_values(other)[k], v)
    partial = dict(list(state.items())[:2])
    with pytest.raises(ValueError, match="is missing in the state dict"):
        other.load_state_dict(partial)
    other.load_state_dict(partial, strict=False)


def test_shared_parameters_load_from_a_file_naming_them_twice(tmp_path):
    class Shared(nn.Block):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(2, in_units=2)
            self.b = self.a

        def forward(self, x):
            return self.b(self.a(x))

    net = Shared()
    net.initialize()
    net.save_parameters(str(tmp_path / "twice.params"), deduplicate=False)
    assert sorted(deft.nd.load(str(tmp_path / "twice.params"))) == [
        "a.bias", "a.weight", "b.bias", "b.weight"]
    other = Shared()
    other.initialize()
    other.load_parameters(str(tmp_path / "twice.params"))
    np.testing.assert_array_equal(other.a.weight.data().asnumpy(),
                                  net.a.weight.data().asnumpy())


def _train_a_step(net, x):
    with autograd.record():
        loss = net(x).sum()
    loss.backward()


def test_export_writes_the_inference_graph_after_training(tmp_path):
    """Bug 1: export after a training call exported the training graph."""
    net = _net()
    net.hybridize()
    x = deft.array(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    _train_a_step(net, x)  # the last graph compiled is the training one
    sym_file, params_file = net.export(str(tmp_path / "model"))
    sym = deft.Symbol.load(sym_file)
    assert sym.list_inputs() == ["data", "0.weight", "0.bias", "1.gamma", "1.beta",
                                 "3.weight", "3.bias"]
    fresh = _net()  # the same model, run in predict mode only
    fresh.hybridize()
    fresh(x)
    predict_file, _ = fresh.export(str(tmp_path / "predict"))
    assert json.load(open(sym_file)) == json.load(open(predict_file))
    imported = nn.SymbolBlock.imports(sym_file, ["data"], params_file)
    expected = net(x).asnumpy()  # predict mode
    np.testing.assert_allclose(imported(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(imported(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_export_needs_a_hybridized_block_that_ran(tmp_path):
    net = _net()
    with pytest.raises(RuntimeError, match="hybridized block that has run"):
        net.export(str(tmp_path / "m"))


@pytest.mark.parametrize("model", ["model_mlp", "model_lenet", "model_resnet_block"])
def test_symbolblock_imports_mxnets_files(model):
    prefix = os.path.join(CORPUS, model)
    block = nn.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params",
                                   device="cpu")
    x = deft.nd.load(prefix + "-inputs.params")["data"]
    (expected,) = deft.nd.load(prefix + "-outputs.params").values()
    np.testing.assert_allclose(block(x).asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(block(x.asnumpy()).asnumpy(), expected.asnumpy(), rtol=1e-5,
                               atol=1e-6)  # a NumPy input too
    params = block.collect_params()
    aux = set(deft.Symbol.load(prefix + "-symbol.json").list_auxiliary_states())
    assert all((p.grad_req == "null") == (k in aux) for k, p in params.items())


def test_resume_from_a_checkpoint_gives_the_same_losses(tmp_path):
    rng = np.random.default_rng(1)
    x = deft.array(rng.standard_normal((8, 4)).astype(np.float32))

    def steps(net, opt, n):
        losses = []
        for _ in range(n):
            with autograd.record():
                loss = (net(x) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.asnumpy().item())
        return losses

    def fresh():
        net = nn.HybridSequential()
        net.add(nn.Dense(5, activation="tanh", in_units=4), nn.Dense(2, in_units=5))
        deft.random.seed(3)
        net.initialize()
        return net, deft.optim.SGD(net.collect_params(), lr=0.1)

    net, opt = fresh()
    whole = steps(net, opt, 6)
    net, opt = fresh()
    first = steps(net, opt, 3)
    net.save_parameters(str(tmp_path / "ckpt.params"))
    resumed, opt = fresh()
    resumed.load_parameters(str(tmp_path / "ckpt.params"))
    np.testing.assert_allclose(first + steps(resumed, opt, 3), whole, rtol=1e-5)


def test_symbolblock_imports_takes_the_files_dtypes(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2))
    net.initialize()
    net.cast("float64")
    net.hybridize()
    x = deft.ones((1, 2), dtype="float64")
    expected = net(x).asnumpy()
    sym_file, params_file = net.export(str(tmp_path / "f64"))
    block = nn.SymbolBlock.imports(sym_file, "data", params_file)
    assert block.collect_params()["0.weight"].dtype == "float64"
    np.testing.assert_allclose(block(x).asnumpy(), expected)
