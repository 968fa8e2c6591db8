"""Gradients of deft.np.linalg under autograd against central finite
differences (float64), and against PyTorch's where torch imports.

Each case is a scalar objective of one matrix, written once for deft and once
for torch. Singular and eigenvectors enter squared, so their sign (which
LAPACK picks) does not matter; cholesky and eigh take a symmetric matrix made
from x, as their users do.
"""
import numpy as np
import pytest

import deft
from deft import autograd
from deft import np as dnp
from numeric import central_differences

rng = np.random.default_rng(7)


def weights(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def _total(y, w):
    return dnp.sum(y * deft.array(w))


def _t(x):  # the matrices transposed
    return x.transpose(tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _sym(x):  # (x + x^T) / 2
    return (x + _t(x)) * 0.5


def _spd(x):  # x x^T + 3 I: positive definite
    eye = np.broadcast_to(np.eye(x.shape[-1]), x.shape[:-2] + (x.shape[-1],) * 2)
    return dnp.matmul(x, _t(x)) + deft.array(3 * eye)


# name: (shape, deft objective, torch objective)
CASES = {
    "inv": ((2, 3, 3), lambda x: _total(dnp.linalg.inv(x), weights((2, 3, 3), 1)),
            lambda t, x: (t.linalg.inv(x) * t.tensor(weights((2, 3, 3), 1))).sum()),
    "det": ((2, 3, 3), lambda x: _total(dnp.linalg.det(x), weights((2,), 2)),
            lambda t, x: (t.linalg.det(x) * t.tensor(weights((2,), 2))).sum()),
    "solve": ((3, 3), lambda x: _total(dnp.linalg.solve(x, deft.array(weights((3, 2), 3))),
                                       weights((3, 2), 4)),
              lambda t, x: (t.linalg.solve(x, t.tensor(weights((3, 2), 3)))
                            * t.tensor(weights((3, 2), 4))).sum()),
    "solve b": ((2, 3), lambda b: _total(dnp.linalg.solve(deft.array(weights((2, 3, 3), 5)), b),
                                         weights((2, 3), 6)),
                lambda t, b: (t.linalg.solve(t.tensor(weights((2, 3, 3), 5)), b)
                              * t.tensor(weights((2, 3), 6))).sum()),
    "cholesky": ((2, 3, 3), lambda x: _total(dnp.linalg.cholesky(_spd(x)), weights((2, 3, 3), 7)),
                 lambda t, x: (t.linalg.cholesky(x @ x.mT + 3 * t.eye(3))
                               * t.tensor(weights((2, 3, 3), 7))).sum()),
    "qr": ((5, 3), lambda x: sum(_total(y, weights(y.shape, 8 + i))
                                 for i, y in enumerate(dnp.linalg.qr(x))),
           lambda t, x: sum((y * t.tensor(weights(tuple(y.shape), 8 + i))).sum()
                            for i, y in enumerate(t.linalg.qr(x)))),
    "svd tall": ((4, 3), lambda x: _svd_objective(x, 10), lambda t, x: _svd_torch(t, x, 10)),
    "svd wide": ((2, 3, 4), lambda x: _svd_objective(x, 11), lambda t, x: _svd_torch(t, x, 11)),
    "eigh": ((2, 3, 3), lambda x: _eigh_objective(x), lambda t, x: _eigh_torch(t, x)),
    "norm 2": ((3, 5), lambda x: dnp.linalg.norm(x, 2), lambda t, x: t.linalg.matrix_norm(x, 2)),
    "norm nuc": ((5, 3), lambda x: dnp.linalg.norm(x, "nuc"),
                 lambda t, x: t.linalg.matrix_norm(x, "nuc")),
}


def _svd_objective(x, seed):
    u, s, vh = dnp.linalg.svd(x, full_matrices=False)
    return (_total(u * u, weights(u.shape, seed)) + _total(s, weights(s.shape, seed + 1))
            + _total(vh * vh, weights(vh.shape, seed + 2)))


def _svd_torch(t, x, seed):
    u, s, vh = t.linalg.svd(x, full_matrices=False)
    return ((u * u * t.tensor(weights(tuple(u.shape), seed))).sum()
            + (s * t.tensor(weights(tuple(s.shape), seed + 1))).sum()
            + (vh * vh * t.tensor(weights(tuple(vh.shape), seed + 2))).sum())


def _eigh_objective(x):
    w, v = dnp.linalg.eigh(_sym(x))
    return _total(w, weights(w.shape, 12)) + _total(v * v, weights(v.shape, 13))


def _eigh_torch(t, x):
    w, v = t.linalg.eigh((x + x.mT) / 2)
    return ((w * t.tensor(weights(tuple(w.shape), 12))).sum()
            + (v * v * t.tensor(weights(tuple(v.shape), 13))).sum())


def _value(f, x):
    return float(f(deft.array(x)).asnumpy().sum())


def _autograd(f, x):
    a = deft.array(x)
    a.attach_grad()
    with autograd.record():
        y = f(a)
    y.backward()
    return a.grad.asnumpy()


def _finite_differences(f, x):
    return central_differences(lambda v: _value(f, v), x)


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_matches_finite_differences(name):
    shape, f, _ = CASES[name]
    x = rng.uniform(-1, 1, shape)
    np.testing.assert_allclose(_autograd(f, x), _finite_differences(f, x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_matches_pytorch(name):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: no comparison")
    shape, f, f_torch = CASES[name]
    x = rng.uniform(-1, 1, shape)
    t = torch.tensor(x, requires_grad=True)
    f_torch(torch, t).backward()
    np.testing.assert_allclose(_autograd(f, x), t.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_float32_gradients_are_float32():
    x = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
    g = _autograd(lambda a: dnp.sum(dnp.linalg.inv(a)), x)
    assert g.dtype == np.float32
    want = _autograd(lambda a: dnp.sum(dnp.linalg.inv(a)), x.astype(np.float64))
    np.testing.assert_allclose(g, want, rtol=1e-4)


def _fails(f, x, text):
    with pytest.raises(deft.DeftError, match=text):
        _autograd(f, x)
    try:  # a kernel's failure is also this thread's until a wait for all work reports it
        deft.waitall()
    except deft.DeftError:
        pass


def test_gradients_that_do_not_exist_are_errors():
    wide = rng.uniform(-1, 1, (2, 3))
    _fails(lambda a: _total(dnp.linalg.qr(a)[0], np.ones((2, 2))), wide,
           "qr's gradient needs m >= n")
    _fails(lambda a: _total(dnp.linalg.svd(a)[2], np.ones((3, 3))), wide,
           "use full_matrices=false")
    _fails(lambda a: dnp.sum(dnp.linalg.det(a)), np.ones((2, 2)),
           "is singular, and det's gradient needs")
    # through s alone, full_matrices is the reduced SVD's gradient
    full = _autograd(lambda a: dnp.sum(dnp.linalg.svd(a)[1]), wide)
    reduced = _autograd(lambda a: dnp.sum(dnp.linalg.svd(a, full_matrices=False)[1]), wide)
    np.testing.assert_allclose(full, reduced, rtol=1e-12)


def test_values_of_repeated_singular_values_have_a_gradient():
    # the identity's singular values are all 1: their gradient is u v^T = I, finite
    eye = np.eye(3)
    np.testing.assert_allclose(_autograd(lambda a: dnp.linalg.norm(a, "nuc"), eye), eye)
    # the vectors' gradient does not exist there, and says so by being infinite
    g = _autograd(lambda a: _total(dnp.linalg.svd(a)[0], weights((3, 3), 1)), eye)
    assert not np.all(np.isfinite(g))
