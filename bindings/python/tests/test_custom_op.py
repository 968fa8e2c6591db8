"""Custom operators written in Python."""
import json
import threading

import numpy as np
import pytest

import deft
from deft import autograd, operator, profiler


class Sqr(operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], in_data[0] * 2 * out_grad[0])


calls = []


@operator.register("py_sqr")
class SqrProp(operator.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return Sqr()


class Broken(operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        calls.append(threading.current_thread().name)
        raise ZeroDivisionError("no way")


@operator.register("py_broken")
class BrokenProp(operator.CustomOpProp):
    has_backward = False

    def infer_shape(self, in_shape):
        return in_shape, [(in_shape[0][0], 2)], []

    def create_operator(self, ctx, shapes, dtypes):
        return Broken()


def test_imperative_deferred_and_export():
    x = deft.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(deft.nd.py_sqr(x).asnumpy(), [1, 4, 9])
    with deft.deferred_compute():
        y = deft.nd.py_sqr(x) + 1
    sym = deft.export({"x": x}, {"y": y})
    again = deft.Symbol.fromjson(sym.tojson())
    np.testing.assert_array_equal(deft.CachedOp(again)(x).asnumpy(), [2, 5, 10])
    np.testing.assert_array_equal(y.asnumpy(), [2, 5, 10])


def test_gradient_against_finite_differences():
    a = np.array([0.5, -1.5, 2.0])
    x = deft.array(a, dtype="float64").attach_grad()
    with autograd.record():
        loss = (deft.nd.py_sqr(x) * x).sum()  # x^3
    loss.backward()
    h = 1e-6
    numeric = ((a + h) ** 3 - (a - h) ** 3) / (2 * h)
    np.testing.assert_allclose(x.grad.asnumpy(), numeric, rtol=1e-6)


def test_an_exception_becomes_an_error_on_the_output():
    calls.clear()
    x = deft.ones((3,))
    y = deft.nd.py_broken(x)
    assert y.shape == (3, 2)  # from the Prop's infer_shape, at once
    with pytest.raises(deft.DeftError, match="ZeroDivisionError: no way"):
        y.asnumpy()
    assert calls and calls[0] != threading.main_thread().name  # a callback thread ran it
    with pytest.raises(deft.DeftError, match="ZeroDivisionError"):
        deft.waitall()  # reports this thread's failure; y keeps it
    with pytest.raises(ValueError, match="lists 2 outputs"):
        @operator.register("two_outputs")
        class TwoProp(operator.CustomOpProp):
            def list_outputs(self):
                return ["a", "b"]


def test_profiled_as_custom_operators(tmp_path):
    profiler.reset()
    profiler.set_config(profile_imperative=True, filename=str(tmp_path / "t.json"))
    profiler.set_state("run")
    deft.nd.py_sqr(deft.array([2.0])).wait_to_read()
    profiler.set_state("stop")
    profiler.dump()
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    names = {(e.get("cat"), e["name"]) for e in events}
    assert ("Custom Operators", "py_sqr") in names
    assert ("Custom Operators", "py_sqr::broadcast_mul") in names
    assert ("operator", "py_sqr") in names
