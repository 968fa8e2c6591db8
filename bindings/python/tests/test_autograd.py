import numpy as np
import pytest

import deft
from deft import autograd


def test_record_backward_and_grad_req():
    x = deft.array([1.0, 2.0, 3.0]).attach_grad()
    assert not autograd.is_recording()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        y = (x * x).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2, 4, 6])
    with autograd.record():
        y = (x * 3).sum()
    y.backward()  # write: replaced
    np.testing.assert_array_equal(x.grad.asnumpy(), [3, 3, 3])
    z = deft.array([1.0, 1.0]).attach_grad("add")
    for _ in range(2):
        with autograd.record():
            w = (z * 5).sum()
        w.backward()
    np.testing.assert_array_equal(z.grad.asnumpy(), [10, 10])


def test_pause_and_modes():
    x = deft.array([2.0]).attach_grad()
    with autograd.record():
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
            c = x * 10  # not recorded: a constant
        y = x * c
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [20])
    with autograd.train_mode():
        assert autograd.is_training()
        with autograd.predict_mode():
            assert not autograd.is_training()


def test_grad_leaves_dot_grad_alone_and_second_derivatives():
    x = deft.array([1.0, 2.0]).attach_grad()
    with autograd.record():
        y = (x * x * x).sum()
    (g,) = autograd.grad(y, [x], create_graph=True)
    np.testing.assert_array_equal(g.asnumpy(), [3, 12])  # 3x^2
    np.testing.assert_array_equal(x.grad.asnumpy(), [0, 0])
    with autograd.record():  # g was recorded (create_graph): differentiate it again
        total = g.sum()
    total.backward()  # d/dx sum(3x^2) = 6x
    np.testing.assert_array_equal(x.grad.asnumpy(), [6, 12])
    with autograd.record():
        y = (x * 4).sum()
    assert isinstance(autograd.grad(y, x), deft.NDArray)


def test_head_gradients_and_errors():
    x = deft.array([1.0, 2.0]).attach_grad()
    with autograd.record():
        y = x * 2
    y.backward(deft.array([10.0, 100.0]))
    np.testing.assert_array_equal(x.grad.asnumpy(), [20, 200])
    with pytest.raises(ValueError, match="1 heads but 2 head_grads"):
        autograd.backward([y], [y, y])
    with pytest.raises(TypeError, match=r"heads\[0\] is int"):
        autograd.backward([3])
    with pytest.raises(ValueError, match="grad_req 'sometimes'"):
        autograd.mark_variables([x], [deft.zeros(2)], "sometimes")
    with pytest.raises(deft.DeftError):
        deft.array([1.0]).backward()  # nothing recorded


def test_detach_stops_the_gradient():
    x = deft.array([1.0, -2.0, 0.5]).attach_grad()
    with autograd.record():
        y = (x * x.detach()).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [1.0, -2.0, 0.5])  # not 2x
    with autograd.record():
        z = (x.detach() * 3).sum() + (x * 2).sum()
    z.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2, 2, 2])
    d = x.detach()
    np.testing.assert_array_equal(d.asnumpy(), x.asnumpy())
    assert d.shape == x.shape and d.dtype == x.dtype


def test_detach_stops_the_gradient_in_a_deferred_recording():
    x = deft.array([3.0, 4.0]).attach_grad()
    with autograd.record(), deft.deferred_compute():
        y = (x * x.detach()).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 4.0])
