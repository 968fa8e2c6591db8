"""Deferred compute from Python, mirroring the C suite's cases."""
import numpy as np
import pytest

import deft
from deft import autograd


def test_lazy_until_read_and_shape_without_compute():
    x = deft.array([1.0, 2.0, 3.0])
    with deft.deferred_compute():
        assert deft.is_deferred_compute()
        y = (x + 5) * (x + 5)
        z = y.sum()
    assert y.is_lazy and z.is_lazy
    assert y.shape == (3,) and y.dtype == np.float32 and z.shape == (1,)  # MXNet 1.x: never ()
    assert y.is_lazy  # asking for the shape computed nothing
    np.testing.assert_array_equal(z.asnumpy(), 36 + 49 + 64)  # trigger by reading
    assert not z.is_lazy and not y.is_lazy
    np.testing.assert_array_equal(y.asnumpy(), [36, 49, 64])


def test_trigger_by_normal_operator_and_explicit_compute():
    x = deft.array([1.0, 2.0])
    with deft.deferred_compute():
        y = x * 3
        w = x - 1
    r = y + 1  # outside the scope: computes y first
    np.testing.assert_array_equal(r.asnumpy(), [4, 7])
    deft.compute(w)
    assert not w.is_lazy


def test_export_lists_inputs_and_outputs_and_runs_in_the_executor(tmp_path):
    x = deft.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = deft.array(np.ones((3, 2), np.float32))
    with deft.deferred_compute():
        h = deft.nd.dot(x, w)
        y = deft.nd.relu(h - 4)
        s = y.sum()
    sym = deft.export({"x": x, "w": w}, {"y": y, "s": s})
    assert sym.list_inputs() == ["x", "w"]
    assert len(sym.list_outputs()) == 2
    text = sym.tojson()
    assert text == deft.export({"x": x, "w": w}, {"y": y, "s": s}).tojson()  # twice, same
    sym.save(tmp_path / "g.json")
    again = deft.Symbol.load(tmp_path / "g.json")
    assert again.tojson() == text
    y2, s2 = deft.CachedOp(again)(x, w)
    np.testing.assert_array_equal(y2.asnumpy(), y.asnumpy())
    np.testing.assert_array_equal(s2.asnumpy(), s.asnumpy())
    other = deft.array(np.full((2, 3), 2.0, np.float32))
    y3, _ = deft.CachedOp(deft.Symbol.fromjson(text))(other, w)
    np.testing.assert_array_equal(y3.asnumpy(), np.maximum(other.asnumpy() @ w.asnumpy() - 4, 0))


def test_export_errors():
    x, p = deft.array([1.0, 2.0]), deft.array([3.0, 4.0])
    with deft.deferred_compute():
        y = x * p
    with pytest.raises(ValueError, match="neither"):  # p used but not listed
        deft.export({"x": x}, {"y": y})
    with deft.deferred_compute():
        u = x + 1
    unused = deft.array([0.0])
    with pytest.raises(ValueError, match="connected to no output"):
        deft.export({"x": x, "unused": unused}, {"u": u})
    with pytest.raises(TypeError, match="expected a dict"):
        deft.export([x], {"u": u})


def test_writing_a_lazy_array_is_refused():
    x = deft.array([1.0, 2.0])
    with deft.deferred_compute():
        y = x + 1
        with pytest.raises(ValueError, match="lazy"):
            deft.nd.exp(x, out=y)
    with pytest.raises(ValueError, match="lazy"):
        y[0] = 5.0
    np.testing.assert_array_equal(y.asnumpy(), [2, 3])


def test_deferred_and_autograd_together():
    w = deft.array([1.0, 2.0]).attach_grad()
    with autograd.record():
        with deft.deferred_compute():
            loss = (w * w).sum()
        assert loss.is_lazy
    loss.backward()
    np.testing.assert_array_equal(w.grad.asnumpy(), [2, 4])


def test_zero_size_and_dtype_changes():
    x = deft.zeros((0, 3))
    with deft.deferred_compute():
        y = (x + 1).sum(axis=0)
        c = deft.nd.Cast(x + 1, dtype="float64")
    np.testing.assert_array_equal(y.asnumpy(), [0, 0, 0])
    assert c.dtype == np.float64 and c.shape == (0, 3)


def test_backward_and_grad_inside_a_deferred_scope_compute():
    """They used to crash: the kernels ran on lazy values' missing buffers."""
    x = deft.array([1.0, -2.0, 0.5]).attach_grad()
    with deft.deferred_compute():
        with autograd.record():
            y = (x * x * x).sum()
        assert y.is_lazy
        y.backward(retain_graph=True)
        np.testing.assert_allclose(x.grad.asnumpy(), [3, 12, 0.75])
        (g,) = autograd.grad(y, [x])
        np.testing.assert_allclose(g.asnumpy(), [3, 12, 0.75])
    np.testing.assert_allclose(y.asnumpy(), [1 - 8 + 0.125])
