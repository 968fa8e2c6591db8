"""The operator functions generated from the registry."""
import inspect

import numpy as np
import pytest

import deft
from deft import autograd, nd
from numeric import central_differences


def test_every_registered_operator_has_a_function():
    names = deft._lib.DeftListOperators()
    assert len(names) > 100
    for name in names:
        where = nd._internal if name.startswith("_") else nd
        fn = getattr(where, name)
        assert fn.__name__ == name
        assert fn.__doc__ and fn.__doc__.strip()


def test_signatures_and_docstrings_come_from_the_registry():
    sig = inspect.signature(nd.sum)
    assert list(sig.parameters) == ["data", "axis", "keepdims", "exclude", "out"]
    assert sig.parameters["axis"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD  # nd.sum(x, 1)
    assert sig.parameters["out"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "keepdims" in nd.sum.__doc__
    assert "Inputs: lhs, rhs" in nd.dot.__doc__
    assert "inputs" in inspect.signature(nd.add_n).parameters  # variadic


def test_parameters_take_python_values():
    x = deft.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(nd.sum(x, axis=(0, 1)).asnumpy(), 66)
    np.testing.assert_array_equal(nd.sum(x, axis=1, keepdims=True).asnumpy(),
                                  np.arange(12).reshape(3, 4).sum(1, keepdims=True))
    np.testing.assert_array_equal(nd.slice(x, begin=(1, None), end=(None, 2)).asnumpy(),
                                  np.arange(12).reshape(3, 4)[1:, :2])
    np.testing.assert_array_equal(nd.Cast(x, dtype="int32").asnumpy(),
                                  np.arange(12).reshape(3, 4))
    y = nd.dot(lhs=x, rhs=x, transpose_b=True)  # inputs by name
    np.testing.assert_allclose(y.asnumpy(), x.asnumpy() @ x.asnumpy().T)
    np.testing.assert_array_equal(nd.add_n(x, x, x).asnumpy(), 3 * x.asnumpy())
    parts = nd.split(x, num_outputs=2, axis=1)
    assert len(parts) == 2 and parts[1].shape == (3, 2)
    out = deft.zeros((3, 4))
    assert nd.exp(x, out=out) is out
    np.testing.assert_allclose(out.asnumpy(), np.exp(x.asnumpy()), rtol=1e-6)
    np.testing.assert_allclose(nd._internal._plus_scalar(x, scalar=0.5).asnumpy(),
                               x.asnumpy() + 0.5)
    np.testing.assert_allclose(nd.exp([0.0, 1.0]).asnumpy(), np.exp([0, 1]), rtol=1e-6)


def test_bad_calls_are_clear():
    x = deft.zeros((2, 2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'axes'"):
        nd.sum(x, axes=1)
    with pytest.raises(TypeError, match="got input 'lhs' twice"):
        nd.dot(x, lhs=x)
    with pytest.raises(ValueError, match="got 1 input, expected 2"):
        nd.dot(x)
    with pytest.raises(ValueError, match="act_type"):
        nd.Activation(x, act_type="swish")


GRADIENT_CASES = [
    ("exp", lambda x: nd.exp(x), lambda a: np.exp(a)),
    ("tanh", lambda x: nd.tanh(x), np.tanh),
    ("sigmoid", lambda x: nd.sigmoid(x), lambda a: 1 / (1 + np.exp(-a))),
    ("square", lambda x: nd.square(x), np.square),
    ("log_softmax", lambda x: nd.log_softmax(x), lambda a: a - np.log(np.exp(a).sum(-1, keepdims=True))),
    ("mean_axis", lambda x: nd.mean(x, axis=1), lambda a: a.mean(1)),
    ("transpose_dot", lambda x: nd.dot(x, x, transpose_b=True), lambda a: a @ a.T),
    ("broadcast_div", lambda x: x / (x.sum(axis=0, keepdims=True) + 10),
     lambda a: a / (a.sum(0, keepdims=True) + 10)),
    ("slice", lambda x: x[1:, ::2] * 3, lambda a: a[1:, ::2] * 3),
    ("max", lambda x: nd.max(x, axis=0), lambda a: a.max(0)),
]


@pytest.mark.parametrize("name,f,f_np", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_gradients_match_finite_differences(name, f, f_np, rng):
    a = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, np.shape(f_np(a))).astype(np.float64)  # a random projection
    x = deft.array(a).attach_grad()
    with autograd.record():
        y = f(x)
    y.backward(deft.array(w.astype(np.float32)))
    expected = central_differences(lambda v: f_np(v) * w, a, eps=1e-3)
    np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=2e-2, atol=2e-3)


def test_signatures_show_numeric_defaults_as_numbers():
    sig = inspect.signature(nd.sum)
    assert sig.parameters["keepdims"].default is False
    assert sig.parameters["axis"].default is None
    split = inspect.signature(nd.split).parameters
    assert split["axis"].default == 1 and type(split["axis"].default) is int
    assert split["squeeze_axis"].default is False
    assert split["num_outputs"].default is inspect.Parameter.empty  # required
    one_hot = inspect.signature(nd.one_hot).parameters
    assert one_hot["on_value"].default == 1.0 and type(one_hot["on_value"].default) is float
    assert one_hot["dtype"].default == "float32"
    assert inspect.signature(nd.transpose).parameters["axes"].default == ()
    assert inspect.signature(nd.take).parameters["mode"].default == "clip"
    for name in deft._lib.DeftListOperators():  # every default is a value a call accepts
        fn = getattr(nd._internal if name.startswith("_") else nd, name)
        for p in inspect.signature(fn).parameters.values():
            if p.kind is p.KEYWORD_ONLY and p.default is not p.empty and p.default is not None:
                assert not isinstance(p.default, str) or not _is_number(p.default), (name, p)


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_operator_functions_take_numpy_scalars():
    x = deft.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(nd.sum(x, axis=np.int64(0)).asnumpy(), [3, 5, 7])
    np.testing.assert_allclose(nd._internal._plus_scalar(x, scalar=np.float64(0.5)).asnumpy(),
                               x.asnumpy() + 0.5)
    np.testing.assert_array_equal(nd.sum(x, axis=1, keepdims=np.bool_(True)).shape, (2, 1))
    np.testing.assert_array_equal(nd.slice(x, begin=(np.int32(1),), end=(np.int64(2),)).asnumpy(),
                                  x.asnumpy()[1:2])
    oh = nd.one_hot(deft.array([1, 0]), depth=np.uint8(2), on_value=np.float32(0.25))
    np.testing.assert_array_equal(oh.asnumpy(), [[0, 0.25], [0.25, 0]])
