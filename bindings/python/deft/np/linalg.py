"""deft.np.linalg: NumPy's linear algebra on deft arrays.

norm is built from operators, so it runs on any device. The decompositions
(inv, det, solve, cholesky, qr, svd, eigh) call LAPACK through deft's
`_linalg_*` operators (core/op/linalg_lapack.c). They work on the last two
axes, with the leading axes as a batch, on float32 and float64 arrays on the
CPU. A matrix that LAPACK cannot factor raises LinAlgError, which is a
ValueError, as NumPy's is.

All are differentiable under autograd (first order; the formulas are in
core/op/linalg_lapack_backward.c). Where a gradient does not exist it says
so: det of a singular matrix, qr of a wide one (m < n), svd's u and vh with
full_matrices=True beyond the first min(m, n) vectors, and the singular
vectors (eigenvectors) of repeated singular values (eigenvalues), whose
gradient comes out infinite; the values' own gradient is always finite.
cholesky and eigh read the lower triangle only, so their gradient is that of
the lower triangle (through a symmetric input, the same as PyTorch's).
"""
import numpy as _np

from ..ndarray import invoke
from . import asarray, max as _max, min as _min, sum as _sum


class LinAlgError(ValueError):
    """NumPy's LinAlgError: a matrix that cannot be factored (singular, not positive definite)."""


def _run(name, *inputs, params=None):
    try:
        result = invoke(name, tuple(asarray(x) for x in inputs), params or {})
        for r in result if isinstance(result, (tuple, list)) else (result,):
            r.wait_to_read()  # a factorisation's failure is known only when it has run
        return result
    except ValueError as e:
        if "is singular" in str(e) or "not positive definite" in str(e) or "converge" in str(e):
            raise LinAlgError(str(e)) from None
        raise


def inv(a):
    """The inverse of each matrix (last two axes)."""
    return _run("_linalg_inv", a)


def det(a):
    """The determinant of each matrix."""
    return _run("_linalg_det", a)


def solve(a, b):
    """x with a @ x = b: b is (..., n) or (..., n, k), with a's batch."""
    return _run("_linalg_solve", a, b)


def cholesky(a):
    """The lower-triangular L with a = L @ L.T of each symmetric positive-definite matrix."""
    return _run("_linalg_cholesky", a)


def qr(a, mode="reduced"):
    """(q, r) of the reduced QR decomposition; mode='r' gives r alone."""
    if mode not in ("reduced", "r"):
        raise ValueError(f"qr mode {mode!r} is not supported; deft has 'reduced' and 'r'")
    q, r = _run("_linalg_qr", a)
    return r if mode == "r" else (q, r)


def svd(a, full_matrices=True, compute_uv=True):
    """(u, s, vh) with a = u @ diag(s) @ vh, s descending; s alone without compute_uv."""
    # s alone: the reduced SVD's, whose gradient exists for every shape
    full = bool(full_matrices) and compute_uv
    u, s, vh = _run("_linalg_svd", a, params={"full_matrices": full})
    return (u, s, vh) if compute_uv else s


def eigh(a, UPLO="L"):
    """(w, v): eigenvalues ascending and eigenvectors as columns, from the lower triangle."""
    a = asarray(a)
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    if UPLO == "U":  # the upper triangle of a is the lower one of its transpose
        a = a.transpose(tuple(range(a.ndim - 2)) + (a.ndim - 1, a.ndim - 2))
    return _run("_linalg_eigh", a)


def eigvalsh(a, UPLO="L"):
    return eigh(a, UPLO)[0]


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's vector and matrix norms: vectors take ord None/2, 1, inf, -inf, 0
    or any p; matrices (two axes) 'fro', 1, -1, inf, -inf, 2, -2 and 'nuc'."""
    x = asarray(x)
    if x.dtype.kind in "iub":
        x = x.astype("float32")
    if axis is None:
        if ord is None:
            return _sqrt(_sum(x * x, keepdims=keepdims) if keepdims else _sum(x * x))
        axis = tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % x.ndim for a in axes)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def _sqrt(x):
    return invoke("sqrt", (x,))


def _abs(x):
    return invoke("abs", (x,))


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _sqrt(_sum(x * x, axis, keepdims=keepdims))
    if ord == _np.inf:
        return _max(_abs(x), axis, keepdims)
    if ord == -_np.inf:
        return _min(_abs(x), axis, keepdims)
    if ord == 0:
        return _sum((x != 0).astype(x.dtype), axis, keepdims=keepdims)
    if ord == 1:
        return _sum(_abs(x), axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    powered = invoke("_power_scalar", (_abs(x),), {"scalar": float(ord)})
    return invoke("_power_scalar", (_sum(powered, axis, keepdims=keepdims),),
                  {"scalar": 1.0 / ord})


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if row == col:
        raise ValueError("Duplicate axes given.")
    if ord in (None, "fro", "f"):
        result = _sqrt(_sum(x * x, axes, keepdims=True))
    elif ord in (1, -1):  # the largest (smallest) column sum
        sums = _sum(_abs(x), row, keepdims=True)
        result = (_max if ord == 1 else _min)(sums, col, True)
    elif ord in (_np.inf, -_np.inf):  # the largest (smallest) row sum
        sums = _sum(_abs(x), col, keepdims=True)
        result = (_max if ord > 0 else _min)(sums, row, True)
    elif ord in (2, -2, "nuc"):
        moved = x.transpose(tuple(a for a in range(x.ndim) if a not in axes) + (row, col))
        s = svd(moved, compute_uv=False)
        reduced = _sum(s, -1) if ord == "nuc" else (_max if ord == 2 else _min)(s, -1)
        return reduced.reshape(_kept_shape(x.shape, axes)) if keepdims else reduced
    else:
        raise ValueError("Invalid norm order for matrices.")
    return result if keepdims else result.reshape(
        tuple(n for a, n in enumerate(x.shape) if a not in axes))


def _kept_shape(shape, axes):
    return tuple(1 if a in axes else n for a, n in enumerate(shape))


__all__ = ["LinAlgError", "cholesky", "det", "eigh", "eigvalsh", "inv", "norm", "qr", "solve",
           "svd"]
