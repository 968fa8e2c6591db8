"""The rest of the public surface: each function once, with its error paths."""
import numpy as np
import pytest

import deft
from deft import nn


def test_shape_helpers_and_copies():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = deft.array(a)
    np.testing.assert_array_equal(x.reshape(3, 2).flatten().asnumpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(x.expand_dims(0).asnumpy(), a[None])
    np.testing.assert_array_equal(x.expand_dims(0).squeeze(0).asnumpy(), a)
    np.testing.assert_array_equal(x.expand_dims(1).squeeze().asnumpy(), a)
    d = x.detach()
    x += 1
    np.testing.assert_array_equal(d.asnumpy(), a)
    assert x.to(deft.cpu()).device == deft.cpu()
    assert repr(deft.gpu(1)) == "gpu(1)" and deft.gpu(0) != deft.cpu()
    assert int(deft.array([3])) == 3 and bool(deft.array([1]))
    assert [0, 1, 2][deft.array(2, dtype="int64")] == 2
    with pytest.raises(TypeError, match="only integer arrays are indices"):
        [0][deft.array(0.0)]
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d array"):
        len(deft.array(1.0))
    with pytest.raises(TypeError, match="copyto needs an NDArray"):
        x.copyto(np.zeros((2, 3)))
    assert deft.empty((2, 2)).shape == (2, 2)
    b = deft.array([1.0], dtype="bfloat16")
    assert b.dtype == "bfloat16" and b.asnumpy().dtype == np.float32


def test_symbol_helpers(tmp_path):
    x = deft.array([1.0, 2.0])
    with deft.deferred_compute():
        y = deft.nd.exp(x) * 2
    sym = deft.export({"x": x}, {"y": y})
    assert "digraph" in sym.todot()
    g = sym.gradient(["x"])
    assert len(g.list_outputs()) == 2  # the outputs, then the gradient of x
    assert g.list_inputs() == ["x", "y_output_head_grad"]
    fused = sym.apply_passes("Fuse")
    np.testing.assert_allclose(fused.bind()(x).asnumpy(), y.asnumpy(), rtol=1e-6)
    assert "Symbol ['x']" in repr(sym)
    v = deft.Symbol.var("v")
    assert v.list_inputs() == ["v"]
    both = deft.CachedOp(sym, backward=True)
    out, dx = both(x, deft.ones((2,)))
    np.testing.assert_allclose(dx.asnumpy(), 2 * np.exp([1.0, 2.0]), rtol=1e-6)
    with pytest.raises(deft.DeftParseError):
        deft.Symbol.fromjson("{not json")
    with pytest.raises(ValueError):
        deft.Symbol.load(tmp_path / "missing.json")


def test_cached_op_flags_plan_fuse_and_backward():
    x = deft.array(np.full(1000, 0.5, np.float32))
    with deft.deferred_compute():
        y = x
        for _ in range(4):  # x^16 + 1: four squarings, each an intermediate
            y = y * y
        y = y + 1.0
    sym = deft.export({"x": x}, {"y": y})
    arena = {}
    for name, flags in [("plan", {}), ("no plan", {"memory_plan": False}),
                        ("fused", {"fuse": True})]:
        op = deft.CachedOp(sym, **flags)
        np.testing.assert_allclose(op(x).asnumpy(), 1 + 0.5 ** 16, rtol=1e-6, err_msg=name)
        arena[name] = op.plan_bytes()
        if name != "fused":
            assert abs(op.plan_bytes("naive") - 4 * 4000) <= 4 * 64, name
    assert arena["plan"] < arena["no plan"], arena  # the plan shares buffers
    assert abs(arena["no plan"] - 4 * 4000) <= 4 * 64, arena  # one buffer per entry
    assert arena["fused"] == 0, arena  # one kernel: no intermediates
    with pytest.raises(ValueError, match="stat is 'peak'"):
        op.plan_bytes("peak")


def test_counters_and_memory_stats():
    before = deft.live_arrays()
    x = deft.zeros((256,))
    assert deft.live_arrays() == before + 1
    assert deft.memory_stat("live_bytes") >= 1024
    assert deft.memory_stat("peak_bytes") >= deft.memory_stat("live_bytes")
    del x
    assert deft.live_arrays() == before
    with pytest.raises(KeyError):
        deft.memory_stat("nonsense")


def test_parameters_set_data_and_initializers():
    p = nn.Parameter("w", (2, 3), init="zeros")
    p.initialize()
    np.testing.assert_array_equal(p.data().asnumpy(), np.zeros((2, 3)))
    p.set_data(np.ones((2, 3)))
    np.testing.assert_array_equal(p.data().asnumpy(), np.ones((2, 3)))
    q = nn.Parameter("c", (4,), init=0.5)
    q.initialize()
    np.testing.assert_array_equal(q.data().asnumpy(), [0.5] * 4)
    r = nn.Parameter("n", (1000,), init="normal")
    r.initialize()
    assert abs(float(r.data().asnumpy().std()) - 0.01) < 0.002
    with pytest.raises(ValueError, match="init 'bogus'"):
        nn.Parameter("b", (2,), init="bogus").initialize()
    assert "Parameter('w', shape=(2, 3)" in repr(p)
    act = nn.Activation("sigmoid")
    np.testing.assert_allclose(act(deft.array([0.0])).asnumpy(), [0.5])
    assert "Dense(? -> 4" in repr(nn.Dense(4))


def test_an_unknown_device_is_a_value_error_naming_it():
    x = deft.array([1.0, 2.0])
    with pytest.raises(ValueError, match=r"is cpu\(1\), expected cpu\(0\): the devices are "
                                         r"cpu\(0\) and "):
        x.to(deft.cpu(1))
    with pytest.raises(ValueError, match=r"cpu\(2\)"):
        deft.zeros((2,), device=deft.cpu(2))
    with pytest.raises(ValueError, match=r"cpu\(1\)"):
        deft.array([1.0], device=deft.cpu(1))
    with pytest.raises(ValueError, match=r"cpu\(3\)"):
        deft.full((2,), 1.0, device=deft.cpu(3))
    with pytest.raises(ValueError, match=r"cpu\(1\)"):
        deft.random.uniform(shape=(2,), device=deft.cpu(1))
    assert x.to(deft.cpu(0)).device == deft.cpu()
