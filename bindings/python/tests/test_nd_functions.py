"""deft.nd's generated functions: how positional values, lists and keywords
reach an operator, and what the module exposes."""
import inspect

import numpy as np
import pytest

import deft
from deft import nd


def test_lists_of_arrays_are_spread_into_variadic_inputs():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = deft.array(a)
    np.testing.assert_array_equal(nd.stack([x, x], axis=1).asnumpy(), np.stack([a, a], axis=1))
    np.testing.assert_array_equal(nd.stack((x, x)).asnumpy(), np.stack([a, a]))
    np.testing.assert_array_equal(nd.Concat([x, x], dim=0).asnumpy(), np.concatenate([a, a]))
    np.testing.assert_array_equal(nd.add_n([x, x, x]).asnumpy(), 3 * a)
    # the arrays one by one still work
    np.testing.assert_array_equal(nd.concat(x, x, dim=1).asnumpy(), np.concatenate([a, a], 1))


def test_positional_values_after_the_inputs_are_parameters():
    a = np.array([-1.0, -0.25, 0.75], np.float32)
    x = deft.array(a)
    np.testing.assert_array_equal(nd.clip(x, -0.5, 0.5).asnumpy(), np.clip(a, -0.5, 0.5))
    np.testing.assert_array_equal(nd.clip(x, -0.5, a_max=0.5).asnumpy(), np.clip(a, -0.5, 0.5))
    assert str(inspect.signature(nd.clip)) == "(data, a_min, a_max, *, out=None)"
    with pytest.raises(TypeError, match="parameter 'a_min' twice"):
        nd.clip(x, -0.5, 0.5, a_min=0)
    with pytest.raises(TypeError, match="clip\\(\\) takes 1 inputs and 2 positional parameters, "
                                        "got 4 positional arguments"):
        nd.clip(x, -0.5, 0.5, 1.0)
    # parameters with defaults after the inputs: sum(data, axis, keepdims, ...)
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(nd.sum(deft.array(b), 1).asnumpy(), b.sum(1))


def test_the_module_exposes_operators_and_creation_functions_only():
    for name in ("sys", "inspect", "lib", "invoke", "numbers", "types", "op_handle"):
        assert not hasattr(nd, name), name
    assert callable(nd.relu) and callable(nd.zeros) and callable(nd.random.uniform)


def test_flatten_keeps_one_dimension_and_collapses_the_rest():
    assert deft.array([1.0, 2.0, 3.0]).flatten().shape == (3,)
    assert deft.array(2.0).flatten().shape == (1,)
    assert deft.zeros((2, 3, 4)).flatten().shape == (2, 12)


def test_truth_of_arrays_follows_numpy():
    assert bool(deft.array([2.0])) and not bool(deft.array([0]))
    with pytest.raises(ValueError, match="The truth value of an array with more than one "
                                         "element is ambiguous. Use a.any\\(\\) or a.all\\(\\)"):
        bool(deft.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="truth value of an empty array is ambiguous"):
        bool(deft.zeros((0,)))
    a = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]], np.float32)
    x = deft.array(a)
    assert bool(x.any()) and not bool(x.all())
    np.testing.assert_array_equal(x.any(axis=1).asnumpy(), a.any(axis=1))
    np.testing.assert_array_equal(x.all(axis=0).asnumpy(), a.all(axis=0))
    np.testing.assert_array_equal(deft.array(np.array([True, True])).all().asnumpy(), 1)


def test_to_keeps_an_array_already_there_and_takes_device_text():
    x = deft.array([1.0, 2.0])
    assert x.to(deft.cpu()) is x and x.to("cpu") is x and x.as_in_context("cpu:0") is x
    copy = x.copyto("cpu")  # MXNet's copyto(ctx): a copy on that device
    assert copy is not x
    copy += 1
    np.testing.assert_array_equal(x.asnumpy(), [1.0, 2.0])
    assert deft.zeros(2, device="cpu").device == deft.cpu()
    assert deft.array([1], device="cpu(0)").device == deft.cpu()
    with pytest.raises(ValueError, match="device 'tpu' is not one deft knows"):
        x.to("tpu")


def test_operators_return_every_output_they_make():
    a = np.arange(40, dtype=np.float32).reshape(2, 20)
    parts = nd.split(deft.array(a), num_outputs=20, axis=1)
    assert len(parts) == 20
    for got, want in zip(parts, np.split(a, 20, axis=1)):
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_typed_functions_call_c_directly_and_fall_back_for_the_rest(no_leaks):
    """The common call (arrays, int/float/str parameters by keyword) runs in C; every
    other call goes through the Python function, with the same results and errors."""
    a = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    x = deft.array(a)
    assert type(nd.relu).__name__ == "OpFunction" and nd.relu.__name__ == "relu"
    assert "out" in inspect.signature(nd.relu).parameters and nd.relu.__doc__
    np.testing.assert_array_equal(nd.relu(x).asnumpy(), np.maximum(a, 0))     # in C
    np.testing.assert_array_equal(nd.relu(a).asnumpy(), np.maximum(a, 0))     # NumPy: Python
    np.testing.assert_allclose(nd._internal._plus_scalar(x, scalar=0.5).asnumpy(), a + 0.5)
    np.testing.assert_array_equal(nd.sum(x, axis=1).asnumpy(), a.sum(axis=1))
    np.testing.assert_array_equal(nd.sum(x, axis=np.int64(1)).asnumpy(), a.sum(axis=1))
    np.testing.assert_array_equal(nd.sum(x, axis=(0, 1)).asnumpy(), a.sum())  # a tuple: Python
    parts = nd.split(x, num_outputs=4, axis=1)                                 # a list of 4
    assert [p.asnumpy().tolist() for p in parts] == [[[-1.0]], [[2.0]], [[-3.0]], [[4.0]]]
    y = deft.zeros((1, 4))
    assert nd.relu(x, out=y) is y
    np.testing.assert_array_equal(y.asnumpy(), np.maximum(a, 0))
    with pytest.raises(deft.DeftIndexError, match="axis is 5"):                # C refuses
        nd.sum(x, axis=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        nd.relu(x, bogus=1)
    with pytest.raises(deft.DeftValueError, match="got 0 inputs, expected 1"):
        nd.relu()
