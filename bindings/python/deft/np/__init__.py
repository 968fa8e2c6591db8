"""deft.np: NumPy's functions, by NumPy's names and semantics, on deft arrays.

Each function takes deft arrays (or anything deft.array takes) and returns
deft arrays. Where an operator exists, the function calls it, so the result
is lazy under deferred compute and differentiable under autograd. Several
functions are compositions of operators: var, std, tril, triu, roll, pad,
diag, trace, meshgrid and einsum. A few results have a shape that depends on
the values (unique, nonzero, argwhere, flatnonzero). Those read the array,
so they wait for it, and they are not recorded.

NumPy's own functions dispatch here through `NDArray.__array_function__`.
`numpy.sum(x)` is `deft.np.sum(x)`. A NumPy function that deft.np lacks gets
NumPy arrays, and returns what NumPy returns.

The linear algebra is in `deft.np.linalg`.
"""
import builtins
import numbers
import string

import numpy as _np

from .._lib import DTYPE_NAMES, dtype_code
from ..ndarray import NDArray, arange, array, empty, full, invoke, ones, zeros  # noqa: F401
from ..ndarray import ones_like, zeros_like  # noqa: F401


def asarray(a, dtype=None):
    """a as a deft array (the same array when it already is one of that dtype)."""
    if isinstance(a, NDArray):
        return a if dtype is None or a.dtype == _np.dtype(dtype) else a.astype(dtype)
    return array(a, dtype=dtype)


def _axes(axis):
    return (axis,) if isinstance(axis, numbers.Integral) else axis


def _reduce(name, a, axis, keepdims):
    a = asarray(a)
    result = invoke(name, (a,), {"axis": _axes(axis), "keepdims": keepdims})
    return _scalar_if_all(result, a, axis, keepdims)


def _scalar_if_all(result, a, axis, keepdims):
    """deft's reductions over every axis give (1,), as MXNet's; NumPy's give a 0-d array."""
    every = axis is None or len({d % builtins.max(a.ndim, 1) for d in _axes(axis)}) >= a.ndim
    return result.reshape(()) if every and not keepdims and result.shape == (1,) else result


# ---- reductions ----

def sum(a, axis=None, dtype=None, keepdims=False):  # noqa: A001 (NumPy's name)
    a = asarray(a, dtype)
    return _reduce("sum", a, axis, keepdims)


def mean(a, axis=None, dtype=None, keepdims=False):
    """The mean; of integers, a float32 one (NumPy's is float64; deft's floats are float32)."""
    return _reduce("mean", _floating(asarray(a, dtype)), axis, keepdims)


def _kind(a):
    return getattr(a.dtype, "kind", "f")  # bfloat16's dtype is a name


def _floating(a):
    return a.astype("float32") if _kind(a) in "iub" else a


def prod(a, axis=None, dtype=None, keepdims=False):
    return _reduce("prod", asarray(a, dtype), axis, keepdims)


def max(a, axis=None, keepdims=False):  # noqa: A001
    return _reduce("max", a, axis, keepdims)


def min(a, axis=None, keepdims=False):  # noqa: A001
    return _reduce("min", a, axis, keepdims)


amax, amin = max, min


def argmax(a, axis=None, keepdims=False):
    return _arg("argmax", a, axis, keepdims)


def argmin(a, axis=None, keepdims=False):
    return _arg("argmin", a, axis, keepdims)


def _arg(name, a, axis, keepdims):
    a = asarray(a)
    flat = a.reshape(-1) if axis is None else a
    result = invoke(name, (flat,), {"axis": 0 if axis is None else axis, "keepdims": keepdims})
    if axis is None and keepdims:
        result = result.reshape((1,) * a.ndim)
    return _scalar_if_all(result, flat, 0 if axis is None else axis, keepdims).astype("int64")


def var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Variance: the squared deviations summed and divided by (n - ddof), as NumPy's."""
    a = _floating(asarray(a, dtype))
    centre = mean(a, axis, keepdims=True)
    deviation = a - centre
    dof = a.size // builtins.max(centre.size, 1) - ddof
    return sum(deviation * deviation, axis, keepdims=keepdims) * (1.0 / dof if dof > 0
                                                                  else float("nan"))


def std(a, axis=None, dtype=None, ddof=0, keepdims=False):
    return invoke("sqrt", (var(a, axis, dtype, ddof, keepdims),))


def any(a, axis=None, keepdims=False):  # noqa: A001
    return asarray(a).any(axis, keepdims)


def all(a, axis=None, keepdims=False):  # noqa: A001
    return asarray(a).all(axis, keepdims)


def cumsum(a, axis=None, dtype=None):
    params = {"axis": axis}
    if dtype is not None:
        params["dtype"] = DTYPE_NAMES[dtype_code(dtype)]
    return invoke("_np_cumsum", (asarray(a),), params)


def cumprod(a, axis=None, dtype=None):
    """Running products, as sums of logarithms: exact for zeros and signs, and
    for integers below 2**53 (computed in float64 and rounded)."""
    a = asarray(a, dtype)
    kind = a.dtype
    integral = _kind(a) in "iub"
    work = a.astype("float64") if integral else a
    if axis is None:
        work, axis = work.reshape(-1), 0
    magnitude = invoke("exp", (cumsum(invoke("log", (invoke("abs", (work,)),)), axis),))
    negatives = cumsum((work < 0).astype("int32"), axis)
    odd = invoke("_mod_scalar", (negatives,), {"scalar": 2}).astype(work.dtype)
    result = magnitude * (1 - 2 * odd)
    return invoke("round", (result,)).astype(kind) if integral else result


# ---- elementwise ----

def _unary(name):
    def fn(x):
        return invoke(name, (asarray(x),))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"NumPy's {name}, elementwise (deft operator {name})."
    return fn


(abs, absolute, exp, expm1, log, log1p, log2, log10, sqrt, cbrt, square, sin, cos, tan, arcsin,
 arccos, arctan, sinh, cosh, tanh, arcsinh, arccosh, arctanh, floor, ceil, trunc, sign, negative,
 reciprocal, degrees, radians) = (
    _unary(n) for n in ("abs", "abs", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt",
                        "cbrt", "square", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
                        "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "floor", "ceil",
                        "trunc", "sign", "negative", "reciprocal", "degrees", "radians"))
fix = trunc


def round(a, decimals=0):  # noqa: A001
    """Halves to even, as NumPy's round (deft's `round` operator rounds them away from 0)."""
    a = asarray(a)
    if decimals:
        scale = 10.0 ** decimals
        return round(a * scale) * (1.0 / scale)
    nearest = invoke("round", (a,))
    # a half rounded away from zero to an odd number goes back one toward zero
    half = invoke("abs", (a - invoke("trunc", (a,)),)) == 0.5
    odd = invoke("_mod_scalar", (nearest,), {"scalar": 2}) != 0
    return where(half & odd, nearest - invoke("sign", (a,)), nearest)


around = rint = round


def maximum(x1, x2):
    return _broadcast_binary("broadcast_maximum", x1, x2)


def minimum(x1, x2):
    return _broadcast_binary("broadcast_minimum", x1, x2)


def _broadcast_binary(name, x1, x2):
    if not isinstance(x1, NDArray):
        x1 = array(x1, dtype=x2.dtype if isinstance(x2, NDArray) else None)
    if not isinstance(x2, NDArray):
        x2 = array(x2, dtype=x1.dtype)
    return invoke(name, (x1, x2))


def clip(a, a_min, a_max):
    a = asarray(a)
    if a_min is None:
        return minimum(a, a_max)
    if a_max is None:
        return maximum(a, a_min)
    return invoke("clip", (a,), {"a_min": a_min, "a_max": a_max})


def where(condition, x=None, y=None):
    """x where condition is nonzero, else y (broadcast); with condition alone, nonzero()."""
    if x is None and y is None:
        return nonzero(condition)
    condition = asarray(condition)
    if condition.dtype == _np.bool_:
        condition = condition.astype("uint8")
    x = x if isinstance(x, NDArray) else array(x, dtype=y.dtype if isinstance(y, NDArray)
                                               else None)
    y = y if isinstance(y, NDArray) else array(y, dtype=x.dtype)
    shape = _np.broadcast_shapes(condition.shape, x.shape, y.shape)
    return invoke("where", tuple(_broadcast_to(v, shape) for v in (condition, x, y)))


def _broadcast_to(a, shape):
    a = asarray(a)
    return a if a.shape == tuple(shape) else invoke("broadcast_to", (a.reshape(
        (1,) * (len(shape) - a.ndim) + a.shape),), {"shape": tuple(shape)})


broadcast_to = _broadcast_to


# ---- sorting and searching ----

def sort(a, axis=-1):
    return invoke("sort", (asarray(a),), {"axis": axis})


def argsort(a, axis=-1):
    return invoke("argsort", (asarray(a),), {"axis": axis, "dtype": "int64"})


def topk(a, k, axis=-1, largest=True):
    """(values, indices) of the k largest (or smallest) elements along axis, in order."""
    values, indices = invoke("topk", (asarray(a),), {"k": k, "axis": axis, "ret_typ": "both",
                                                     "is_ascend": not largest,
                                                     "dtype": "int64"})
    return values, indices


def unique(a, return_index=False, return_inverse=False, return_counts=False, axis=None):
    """NumPy's unique; the result's size depends on the values, so this reads a."""
    a = asarray(a)
    got = _np.unique(a.asnumpy(), return_index, return_inverse, return_counts, axis)
    if isinstance(got, tuple):
        return tuple(array(g, device=a.device) for g in got)
    return array(got, device=a.device)


def nonzero(a):
    a = asarray(a)
    return tuple(array(i.astype(_np.int64), device=a.device) for i in _np.nonzero(a.asnumpy()))


def flatnonzero(a):
    a = asarray(a)
    return array(_np.flatnonzero(a.asnumpy()).astype(_np.int64), device=a.device)


def argwhere(a):
    a = asarray(a)
    return array(_np.argwhere(a.asnumpy()).astype(_np.int64), device=a.device)


# ---- shapes and rearrangements ----

def reshape(a, newshape):
    return asarray(a).reshape(newshape)


def transpose(a, axes=None):
    return asarray(a).transpose(axes) if axes is not None else asarray(a).T


def expand_dims(a, axis):
    return asarray(a).expand_dims(axis)


def squeeze(a, axis=None):
    return asarray(a).squeeze(axis)


def concatenate(arrays, axis=0):
    arrays = [asarray(a) for a in arrays]
    if axis is None:
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    return invoke("Concat", arrays, {"dim": axis})


def stack(arrays, axis=0):
    return invoke("stack", [asarray(a) for a in arrays], {"axis": axis})


def flip(m, axis=None):
    m = asarray(m)
    axis = tuple(range(m.ndim)) if axis is None else _axes(axis)
    return invoke("reverse", (m,), {"axis": axis})


def roll(a, shift, axis=None):
    """Elements shifted along axis, those past the end coming back at the start."""
    a = asarray(a)
    if axis is None:
        return roll(a.reshape(-1), shift, 0).reshape(a.shape)
    shifts, axes = _np.broadcast_arrays(_np.atleast_1d(shift), _np.atleast_1d(axis))
    for s, ax in zip(shifts.tolist(), axes.tolist()):
        n = a.shape[ax]
        s = s % n if n else 0
        if s:
            index = array((_np.arange(n) - s) % n, dtype="int64")
            a = invoke("take", (a, index), {"axis": ax})
    return a


def pad(array_, pad_width, mode="constant", constant_values=0):
    """NumPy's pad in the modes constant, edge, reflect, symmetric and wrap: one
    gather per padded axis (so it is differentiable), then the constant."""
    a = asarray(array_)
    widths = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64), (a.ndim, 2))
    if (widths < 0).any():
        raise ValueError("index can't contain negative values")
    modes = {"constant": _edge, "edge": _edge, "reflect": _reflect, "symmetric": _symmetric,
             "wrap": _wrap}
    if mode not in modes:
        raise ValueError(f"mode {mode!r} is not supported; deft.np.pad has "
                         f"{', '.join(modes)}")
    inside = None
    for ax, (before, after) in enumerate(widths.tolist()):
        if before == 0 and after == 0:
            continue
        n = a.shape[ax]
        if n == 0:
            raise ValueError(f"can't extend empty axis {ax} using modes other than "
                             f"'constant' or 'empty'")
        positions = _np.arange(-before, n + after)
        a = invoke("take", (a, array(modes[mode](positions, n), dtype="int64")), {"axis": ax})
        if mode == "constant":
            keep = ((positions >= 0) & (positions < n)).reshape(
                (-1,) + (1,) * (a.ndim - ax - 1))
            inside = keep if inside is None else inside & keep
    if mode == "constant" and inside is not None:
        a = where(array(_np.broadcast_to(inside, a.shape), dtype="uint8"), a,
                  full((), constant_values, a.dtype))
    return a


def _edge(i, n):
    return _np.clip(i, 0, n - 1)


def _reflect(i, n):
    if n == 1:
        return _np.zeros_like(i)
    period = 2 * (n - 1)
    i = _np.abs(i) % period
    return _np.where(i >= n, period - i, i)


def _symmetric(i, n):
    period = 2 * n
    i = _np.where(i < 0, -i - 1, i) % period
    return _np.where(i >= n, period - 1 - i, i)


def _wrap(i, n):
    return i % n


def tril(m, k=0):
    """The lower triangle of the last two axes (below diagonal k); the rest 0."""
    return _triangle(m, k, _np.tril)


def triu(m, k=0):
    """The upper triangle of the last two axes (above diagonal k); the rest 0."""
    return _triangle(m, k, _np.triu)


def _triangle(m, k, numpy_fn):
    m = asarray(m)
    if m.ndim < 2:
        raise ValueError(f"tril and triu need at least 2 dimensions, got an array of {m.ndim}")
    mask = numpy_fn(_np.ones(m.shape[-2:], dtype=_np.uint8), k)
    return where(array(_np.broadcast_to(mask, m.shape), dtype="uint8"), m,
                 zeros((), m.dtype, m.device))


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal of the axis1 x axis2 planes, on a last axis (one gather)."""
    a = asarray(a)
    axis1, axis2 = axis1 % a.ndim, axis2 % a.ndim
    rest = [d for d in range(a.ndim) if d not in (axis1, axis2)]
    a = a.transpose(tuple([axis1, axis2] + rest))
    n, m = a.shape[0], a.shape[1]
    rows = _np.arange(builtins.max(0, -offset), builtins.min(n, m - offset))
    if rows.size == 0:
        return zeros(a.shape[2:] + (0,), a.dtype, a.device)
    index = array(_np.stack([rows, rows + offset]), dtype="int64")
    picked = invoke("gather_nd", (a, index))  # (count, *rest)
    return picked.transpose(tuple(range(1, picked.ndim)) + (0,))


def diag(v, k=0):
    """A 2-D array's k-th diagonal, or a 2-D array with a 1-D one on its k-th diagonal."""
    v = asarray(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = v.shape[0] + builtins.abs(k)
    rows = _np.arange(v.shape[0]) + builtins.max(0, -k)
    index = array(_np.stack([rows, rows + k]), dtype="int64")
    return invoke("scatter_nd", (v, index), {"shape": (n, n)})


def trace(a, offset=0, axis1=0, axis2=1):
    return sum(diagonal(a, offset, axis1, axis2), axis=-1)


# ---- making arrays ----

def eye(N, M=None, k=0, dtype="float32", device=None):
    return array(_np.eye(N, M, k, dtype=_np.dtype(dtype) if dtype != "bfloat16"
                         else _np.float32), dtype=dtype, device=device)


identity = eye


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype="float32", device=None):
    values, step = _np.linspace(start, stop, num, endpoint, retstep=True, dtype=_np.float64)
    result = array(values, dtype=dtype, device=device)
    return (result, step) if retstep else result


def meshgrid(*xi, indexing="xy"):
    """Coordinate arrays from 1-D ones, as NumPy's ('xy': the first two swapped)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    xi = [asarray(x).reshape(-1) for x in xi]
    shape = [x.size for x in xi]
    if indexing == "xy" and len(xi) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    grids = []
    for i, x in enumerate(xi):
        at = i if indexing == "ij" or len(xi) < 2 else {0: 1, 1: 0}.get(i, i)
        view = [1] * len(xi)
        view[at] = -1
        grids.append(_broadcast_to(x.reshape(tuple(view)), tuple(shape)))
    return grids


# ---- products ----

def dot(a, b):
    return invoke("dot", (asarray(a), asarray(b)))


def matmul(a, b):
    return asarray(a) @ asarray(b)


def einsum(subscripts, *operands):
    """Einstein summation, by pairwise contractions into batched matrix products.

    Explicit ('ij,jk->ik') and implicit ('ij,jk') forms. An index repeated
    within one operand (a diagonal, 'ii->i') and '...' are not supported and
    raise ValueError."""
    inputs, output = _einsum_parse(subscripts, len(operands))
    arrays = [asarray(x) for x in operands]
    for labels, x in zip(inputs, arrays):
        if len(labels) != x.ndim:
            raise ValueError(f"einsum(): operand {labels!r} has {len(labels)} subscripts for "
                             f"an array of {x.ndim} dimensions")
    sizes = {}
    for labels, x in zip(inputs, arrays):
        for c, n in zip(labels, x.shape):
            if sizes.setdefault(c, n) != n and 1 not in (n, sizes[c]):
                raise ValueError(f"einsum(): size of label {c!r} is {n} in one operand and "
                                 f"{sizes[c]} in another")
            sizes[c] = builtins.max(sizes[c], n)
    terms = list(zip(inputs, arrays))
    labels, x = terms[0]
    for i in range(1, len(terms)):
        later = set(output).union(*(t[0] for t in terms[i + 1:]))
        labels, x = _contract(labels, x, *terms[i], later, sizes)
    keep = [c for c in labels if c in output]
    if len(keep) < len(labels):
        x = sum(x, axis=tuple(d for d, c in enumerate(labels) if c not in output))
        labels = keep
    if list(labels) != list(output):
        x = x.transpose(tuple(labels.index(c) for c in output))
    return x


def _einsum_parse(subscripts, count):
    text = subscripts.replace(" ", "")
    if "." in text:
        raise ValueError("einsum(): '...' (broadcast dimensions) is not supported by deft.np")
    left, arrow, right = text.partition("->")
    inputs = left.split(",")
    if len(inputs) != count:
        raise ValueError(f"einsum(): {len(inputs)} operands in the subscripts, {count} given")
    for labels in inputs:
        if len(set(labels)) != len(labels):
            raise ValueError(f"einsum(): the repeated subscript in {labels!r} (a diagonal) is "
                             f"not supported by deft.np; use deft.np.diagonal")
        bad = [c for c in labels if c not in string.ascii_letters]
        if bad:
            raise ValueError(f"einsum(): invalid subscript {bad[0]!r}")
    if not arrow:
        counts = {}
        for c in left.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        right = "".join(sorted(c for c, n in counts.items() if n == 1))
    return inputs, right


def _contract(la, a, lb, b, later, sizes):
    """a and b (labelled) as one array: shared labels needed later are batch
    axes, shared ones not needed are summed, the others stay."""
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in later]
    summed = [c for c in shared if c not in later]
    only_a, only_b = [c for c in la if c not in lb], [c for c in lb if c not in la]
    nb = int(_np.prod([sizes[c] for c in batch]))
    nk = int(_np.prod([sizes[c] for c in summed]))
    na = int(_np.prod([sizes[c] for c in only_a]))
    nc = int(_np.prod([sizes[c] for c in only_b]))
    a = _broadcast_to(a.transpose(tuple(la.index(c) for c in batch + only_a + summed)),
                      tuple(sizes[c] for c in batch + only_a + summed)).reshape((nb, na, nk))
    b = _broadcast_to(b.transpose(tuple(lb.index(c) for c in batch + summed + only_b)),
                      tuple(sizes[c] for c in batch + summed + only_b)).reshape((nb, nk, nc))
    product = invoke("batch_dot", (a, b))
    labels = batch + only_a + only_b
    return labels, product.reshape(tuple(sizes[c] for c in labels))


from . import linalg  # noqa: E402,F401 (it builds on the names above)
