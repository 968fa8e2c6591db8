"""deft.np against NumPy on the same inputs, and NumPy's functions on deft arrays."""
import numpy as np
import pytest

import deft
from deft import np as dnp


@pytest.fixture
def a(rng):
    return rng.standard_normal((3, 4, 5)).astype(np.float32)


def close(got, want, tol=1e-5):
    got = got.asnumpy() if isinstance(got, deft.NDArray) else got
    assert np.shape(got) == np.shape(want), (np.shape(got), np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "std"])
@pytest.mark.parametrize("axis", [None, 1, (0, 2), -1])
def test_reductions_match_numpy(a, name, axis):
    close(getattr(dnp, name)(a, axis=axis), getattr(np, name)(a, axis=axis), 1e-4)
    close(getattr(dnp, name)(a, axis=axis, keepdims=True),
          getattr(np, name)(a, axis=axis, keepdims=True), 1e-4)


def test_statistics_details_match_numpy(a):
    close(dnp.var(a, axis=1, ddof=1), np.var(a, axis=1, ddof=1), 1e-4)
    close(dnp.std(a, ddof=1), np.std(a, ddof=1), 1e-4)
    ints = np.array([[1, 2], [3, 5]], np.int32)
    close(dnp.mean(ints, axis=0), np.mean(ints, axis=0).astype(np.float32))
    close(dnp.argmax(a, axis=2), np.argmax(a, axis=2))
    close(dnp.argmin(a), np.argmin(a))
    x = np.array([[0.0, 1.0], [0.0, 0.0]], np.float32)
    assert bool(dnp.any(x)) and not bool(dnp.all(x))


@pytest.mark.parametrize("axis", [None, 0, 2])
def test_running_sums_and_products_match_numpy(a, axis):
    close(dnp.cumsum(a, axis=axis), np.cumsum(a, axis=axis), 1e-4)
    close(dnp.cumprod(a, axis=axis), np.cumprod(a, axis=axis), 1e-4)
    ints = np.array([[3, -2, 0, 4], [-1, -1, 5, 2]], np.int64)
    close(dnp.cumprod(ints, axis=1), np.cumprod(ints, axis=1))


def test_elementwise_and_rounding_match_numpy():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.26, -3.7], np.float32)
    for name in ("floor", "ceil", "trunc", "abs", "sign", "round", "rint", "around"):
        close(getattr(dnp, name)(x), getattr(np, name)(x))
    close(dnp.round(x, 1), np.round(x, 1), 1e-6)
    y = np.array([0.0, 2.0, -1.0, 3.0, 0.0, 0.0, 1.0, 1.0], np.float32)
    close(dnp.maximum(x, y), np.maximum(x, y))
    close(dnp.minimum(x, 0.0), np.minimum(x, 0.0))
    close(dnp.clip(x, -1, None), np.clip(x, -1, None))
    close(dnp.where(x > 0, x, y), np.where(x > 0, x, y))


def test_sorting_and_searching_match_numpy(rng):
    x = rng.permutation(20).reshape(4, 5).astype(np.float32)
    close(dnp.sort(x), np.sort(x))
    close(dnp.sort(x, axis=0), np.sort(x, axis=0))
    close(dnp.argsort(x, axis=1), np.argsort(x, axis=1))
    values, indices = dnp.topk(x, 2, axis=1)
    close(values, -np.sort(-x, axis=1)[:, :2])
    close(indices, np.argsort(-x, axis=1)[:, :2])
    r = np.array([[0, 3, 0], [2, 0, 3]], np.float32)
    values, inverse, counts = dnp.unique(r, return_inverse=True, return_counts=True)
    want = np.unique(r, return_inverse=True, return_counts=True)
    for got, w in zip((values, inverse, counts), want):
        close(got, w)
    for got, w in zip(dnp.nonzero(r), np.nonzero(r)):
        close(got, w)
    close(dnp.argwhere(r), np.argwhere(r))
    close(dnp.flatnonzero(r), np.flatnonzero(r))


def test_rearrangements_match_numpy(a):
    close(dnp.flip(a, 1), np.flip(a, 1))
    close(dnp.flip(a), np.flip(a))
    for shift, axis in ((2, 1), (-1, 2), ((1, 2), (0, 2)), (3, None)):
        close(dnp.roll(a, shift, axis), np.roll(a, shift, axis))
    close(dnp.concatenate([a, a], axis=2), np.concatenate([a, a], axis=2))
    close(dnp.concatenate([a, a], axis=None), np.concatenate([a, a], axis=None))
    close(dnp.stack([a, a], axis=1), np.stack([a, a], axis=1))
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (-1, 0, 2):
        close(dnp.tril(m, k), np.tril(m, k))
        close(dnp.triu(a, k), np.triu(a, k))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_matches_numpy(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for width in (1, ((1, 2), (0, 3)), ((2, 0), (3, 3))):
        kwargs = {"constant_values": 7} if mode == "constant" else {}
        close(dnp.pad(x, width, mode, **kwargs), np.pad(x, width, mode, **kwargs))
    with pytest.raises(ValueError, match="mode 'median' is not supported"):
        dnp.pad(x, 1, "median")


def test_diagonals_and_traces_match_numpy(a):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (-2, 0, 1, 3, 5):
        close(dnp.diag(m, k), np.diag(m, k))
        close(dnp.trace(m, k), np.trace(m, k))
    v = np.array([1.0, 2.0, 3.0], np.float32)
    for k in (-1, 0, 2):
        close(dnp.diag(v, k), np.diag(v, k))
    close(dnp.diagonal(a, 1, 1, 2), np.diagonal(a, 1, 1, 2))
    close(dnp.trace(a, 0, 0, 2), np.trace(a, 0, 0, 2), 1e-4)


def test_constructors_match_numpy():
    close(dnp.eye(3, 4, 1), np.eye(3, 4, 1, dtype=np.float32))
    close(dnp.linspace(0, 1, 5), np.linspace(0, 1, 5).astype(np.float32))
    close(dnp.linspace(2, 3, 4, endpoint=False), np.linspace(2, 3, 4, endpoint=False),
          1e-6)
    x, y, z = np.arange(3.0), np.arange(4.0), np.arange(2.0)
    for indexing in ("xy", "ij"):
        for got, want in zip(dnp.meshgrid(x, y, z, indexing=indexing),
                             np.meshgrid(x, y, z, indexing=indexing)):
            close(got, want.astype(np.float32))


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
])
def test_einsum_matches_numpy(rng, spec, shapes):
    operands = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    close(dnp.einsum(spec, *operands), np.einsum(spec, *operands), 1e-4)


def test_einsum_names_what_it_does_not_support():
    with pytest.raises(ValueError, match="repeated subscript in 'ii'"):
        dnp.einsum("ii->i", np.eye(2))
    with pytest.raises(ValueError, match="'...'"):
        dnp.einsum("...i->i", np.eye(2))
    with pytest.raises(ValueError, match="2 operands in the subscripts, 1 given"):
        dnp.einsum("i,i->", np.ones(2))


def test_compositions_are_differentiable():
    x = deft.array(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))
    x.attach_grad()
    with deft.autograd.record():
        y = dnp.sum(dnp.var(x, axis=1) + dnp.pad(x, 1).sum() + dnp.tril(x).sum())
    y.backward()
    # the two scalar sums broadcast to var's two elements: each counts twice
    centred = x.asnumpy() - x.asnumpy().mean(1, keepdims=True)
    want = 2 * centred / 3 + 2 * (1 + np.tril(np.ones((2, 3))))
    close(x.grad, want.astype(np.float32))


def test_numpy_functions_dispatch_to_deft(a):
    x = deft.array(a)
    total = np.sum(x, axis=1)
    assert isinstance(total, deft.NDArray)
    close(total, a.sum(axis=1), 1e-4)
    assert isinstance(np.concatenate([x, x]), deft.NDArray)
    assert isinstance(np.linalg.norm(x), deft.NDArray)
    # a function deft.np lacks runs in NumPy on the values
    assert np.array_equal(x, a) and np.shape(x) == a.shape


def test_linalg_matches_numpy(rng):
    m = rng.standard_normal((2, 4, 4))
    spd = m @ np.swapaxes(m, 1, 2) + 4 * np.eye(4)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        a, s = m.astype(dtype), spd.astype(dtype)
        close(dnp.linalg.inv(a), np.linalg.inv(a), tol * 10)
        close(dnp.linalg.det(a), np.linalg.det(a), tol * 10)
        close(dnp.linalg.cholesky(s), np.linalg.cholesky(s), tol)
        b = rng.standard_normal((2, 4, 3)).astype(dtype)
        close(dnp.linalg.solve(a, b), np.linalg.solve(a, b), tol * 10)
        v = rng.standard_normal((2, 4)).astype(dtype)
        close(dnp.linalg.solve(a, v), np.linalg.solve(a, v[..., None])[..., 0], tol * 10)
        w, vectors = dnp.linalg.eigh(s)
        close(w, np.linalg.eigvalsh(s), tol * 10)
        vectors = vectors.asnumpy()  # columns up to sign: check s v = w v
        np.testing.assert_allclose(s @ vectors, vectors * w.asnumpy()[:, None, :],
                                   atol=tol * 100)
    wide = rng.standard_normal((3, 5))
    for full in (True, False):
        u, sv, vh = dnp.linalg.svd(wide, full_matrices=full)
        nu, nsv, nvh = np.linalg.svd(wide, full_matrices=full)
        assert u.shape == nu.shape and vh.shape == nvh.shape
        close(sv, nsv, 1e-10)
        k = len(nsv)
        np.testing.assert_allclose((u.asnumpy()[:, :k] * sv.asnumpy()) @ vh.asnumpy()[:k],
                                   wide, atol=1e-10)
    for shape in ((5, 3), (3, 5)):
        x = rng.standard_normal(shape)
        q, r = dnp.linalg.qr(x)
        nq, nr = np.linalg.qr(x)
        assert q.shape == nq.shape and r.shape == nr.shape
        np.testing.assert_allclose(q.asnumpy() @ r.asnumpy(), x, atol=1e-10)
        np.testing.assert_allclose(np.abs(r.asnumpy()), np.abs(nr), atol=1e-10)


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3])
def test_vector_norms_match_numpy(ord):
    v = np.array([3.0, -4.0, 0.0, 1.5], np.float32)
    close(dnp.linalg.norm(v, ord), np.linalg.norm(v, ord), 1e-5)


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"])
def test_matrix_norms_match_numpy(rng, ord):
    m = rng.standard_normal((2, 3, 4))
    close(dnp.linalg.norm(m, ord, axis=(1, 2)), np.linalg.norm(m, ord, axis=(1, 2)), 1e-10)
    close(dnp.linalg.norm(m, ord, axis=(2, 1), keepdims=True),
          np.linalg.norm(m, ord, axis=(2, 1), keepdims=True), 1e-10)


def test_linalg_errors_are_numpys():
    with pytest.raises(dnp.linalg.LinAlgError, match="matrix 1 of the batch is singular"):
        dnp.linalg.inv(np.stack([np.eye(2), np.zeros((2, 2))]))
    with pytest.raises(np.linalg.LinAlgError.__mro__[1], match="not positive definite"):
        dnp.linalg.cholesky(-np.eye(2))
    with pytest.raises(ValueError, match="and 1 more failure"):  # this thread's to collect
        deft.waitall()
    with pytest.raises(ValueError, match="last two dimensions must be square"):
        dnp.linalg.det(np.ones((2, 3)))
    with pytest.raises(TypeError, match="input 0 is int32, expected float32 or float64"):
        dnp.linalg.inv(np.eye(2, dtype=np.int32))
    with pytest.raises(ValueError, match="expected float64 with a's batch and rows"):
        dnp.linalg.solve(np.eye(2), np.ones(3))


def test_array_methods_are_deft_np_functions(a):
    x = deft.array(a)
    close(x.cumsum(axis=1), a.cumsum(axis=1), 1e-4)
    close(x.cumprod(axis=2), a.cumprod(axis=2), 1e-4)
    close(x.var(axis=0, ddof=1), a.var(axis=0, ddof=1), 1e-4)
    close(x.std(), a.std(), 1e-4)
    close(x.prod(axis=2), a.prod(axis=2), 1e-4)
    close(x.sort(axis=1), np.sort(a, axis=1))
    close(x.argsort(), a.argsort())
    close(x.argmin(axis=1), a.argmin(axis=1))
    close(x.round(1), a.round(1), 1e-6)
    close(x.clip(-0.5, 0.5), a.clip(-0.5, 0.5))
    close(x.diagonal(0, 1, 2), a.diagonal(0, 1, 2))
    close(x.trace(), a.trace(), 1e-4)
    close(x.ravel(), a.ravel())
    close(x.nonzero()[2], a.nonzero()[2])
    assert x.cumsum.__name__ == "cumsum"
