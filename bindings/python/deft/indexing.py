"""Indexing with NumPy's semantics: x[key] and x[key] = value for NDArray.

Three kinds of key, as NumPy has them:
- basic: ints, slices, None and Ellipsis. A read is a view sharing x's
  memory, as NumPy's: writes through either show in the other. One whose
  elements are one contiguous run (x[2], x[1:3], x[1, 2:4], x[:]) is a plain
  view; others (x[:, 1:3], x[::2], x[..., 0]) are strided views, which
  operators read and write through a dense buffer of their own (the C
  API's DeftNDArrayStridedView). A read that autograd or deferred compute
  records, or of a GPU array, is one `slice`, a copy. Writes are one
  `_slice_assign`;
- a boolean mask over leading axes (a bool array or a comparison's result);
- advanced: integer arrays (lists, NumPy or deft arrays), alone or mixed
  with ints, slices, None and Ellipsis, as below.

For advanced keys the semantics are NumPy's. Ints beside an index array count as index arrays
of no dimensions. The index arrays broadcast together. Their result
dimensions replace the indexed axes where those axes are adjacent in the
key, and go first otherwise. Negative indices count from the end, and an
out-of-range index is an IndexError, never clipped.

- A key with one index array and otherwise slices reads with one `take`
  along that axis. With a deft array as the index, it reads with `gather_nd`,
  which wraps negative indices and checks the range on the array's device.
- Any other key becomes one index array over every axis of x, shaped like
  the result, made on the host. Then x[key] is one gather_nd, and
  x[key] = value is one _scatter_set_nd that writes x in place.
"""
import numbers

import numpy as np

from ._lib import lib
from .autograd import is_recording
from .ndarray import NDArray, _wrap, array, invoke, zeros
from .symbol import is_deferred_compute


def read(x, key):
    """x[key]: a boolean mask, index arrays, or basic (ints, slices, None, Ellipsis)."""
    mask = _boolean_mask(key)
    if mask is not None:
        return _take_masked(x, mask)
    if is_advanced(key):
        return _read_advanced(x, key)
    plan = _basic_index(x.shape, key)
    if _may_view(x):
        return _view(x, plan)
    result = x
    if plan.sliced:
        result = invoke("slice", (x,), plan.params())
    if plan.final_shape != result.shape:
        result = result.reshape(plan.final_shape)
    return result if result is not x else x.copy()


def assign(x, key, value):
    """x[key] = value, value cast to x's dtype and broadcast to what x[key] reads."""
    value = _value_like(value, x)
    mask = _boolean_mask(key)
    if mask is not None:
        _assign_masked(x, mask, value)
        return
    if is_advanced(key):
        _assign_advanced(x, key, value)
        return
    plan = _basic_index(x.shape, key)
    # A value shaped like the result of reading key gets the integer-indexed
    # axes back as 1s; other values broadcast to the region as they are.
    if value.shape == plan.final_shape != plan.region_shape:
        value = value.reshape(plan.region_shape)
    invoke("_slice_assign", (x, value), plan.params(), out=x)


def _may_view(x):
    """Basic reads are views, as NumPy's, unless they must be recorded (autograd,
    deferred compute), x has no storage yet (lazy), or x is on a GPU."""
    return not (is_recording() or is_deferred_compute() or x.is_lazy
                or x.device.device_type != "cpu")


def _view(x, plan):
    """The view x[key] for a basic key: a plain view when its elements are one
    run of a dense x, else a strided view over x's root (x itself, or what x
    views), placed with x's own layout there."""
    shape = plan.final_shape
    if plan.run is not None and not x._is_strided_view:
        return _wrap(lib.DeftNDArrayView(x, plan.run[0], shape, len(shape)))
    steps, offset, _ = lib.DeftNDArrayGetLayout(x)
    strides = []
    for axis, start, step in plan.picks:
        if axis is None:  # a new axis: one element, any stride
            strides.append(0)
            continue
        offset += start * steps[axis]
        if step is not None:
            strides.append(step * steps[axis])
    return _wrap(lib.DeftNDArrayStridedView(x, offset, shape, strides, len(shape)))


def is_advanced(key):
    """Whether key holds an index array (a list, NumPy or deft array)."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (list, np.ndarray, NDArray)) for k in keys)


def _read_advanced(x, key):
    """x[key] for a key with index arrays."""
    entries, new_axes = _entries(x.shape, key)
    single = _single_array(entries, new_axes)
    if single is not None:
        return _take_along(x, entries, single)
    shape = _with_new_axes(x.shape, new_axes)
    if new_axes:
        x = x.reshape(shape)
    entries = _host_entries(_insert_slices(entries, new_axes), shape)
    index, result = _full_index(shape, entries)
    if 0 in result:
        return zeros(result, x.dtype, x.device)
    return invoke("gather_nd", (x, array(index, dtype="int64")))


def _assign_advanced(x, key, value):
    """x[key] = value for a key with index arrays: value broadcasts to x[key]'s shape."""
    entries, new_axes = _entries(x.shape, key)
    single = _single_array(entries, new_axes)
    if single == 0 and isinstance(entries[0], NDArray) and _all_full(entries[1:]):
        index = entries[0]
        _check_index_dtype(index)
        target = index.shape + x.shape[1:]
        value = _broadcast(value, target, target)
        if 0 not in target:
            index = index.reshape((1,) + index.shape)
            invoke("_scatter_set_nd", (x, value, index), out=x)
        return
    entries = _host_entries(entries, x.shape)
    # None adds axes of 1 to x[key], which value broadcasts to; x itself has none
    with_new = _host_entries(_insert_slices(entries, new_axes), _with_new_axes(x.shape, new_axes))
    _, shown = _full_index(_with_new_axes(x.shape, new_axes), with_new, shape_only=True)
    index, result = _full_index(x.shape, entries)
    value = _broadcast(value, shown, result)
    if 0 not in result:
        invoke("_scatter_set_nd", (x, value, array(index, dtype="int64")), out=x)


def _entries(shape, key):
    """One entry per axis of x (int, slice or index array) and the positions
    in the key where None adds an axis."""
    key = key if isinstance(key, tuple) else (key,)
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but "
                         f"{used} were indexed")
    fill = (slice(None),) * (len(shape) - used)
    if ellipses:
        at = ellipses[0]
        key = key[:at] + fill + key[at + 1:]
    else:
        key = key + fill
    new_axes = [i for i, k in enumerate(key) if k is None]
    return [_entry(k) for k in key if k is not None], new_axes


def _entry(k):
    if isinstance(k, (slice, NDArray)) or isinstance(k, (numbers.Integral, np.integer)):
        if isinstance(k, NDArray) and k.dtype == np.bool_:
            return _mask_positions(k.asnumpy())
        return k
    if isinstance(k, (list, np.ndarray)):
        values = np.asarray(k)
        if values.dtype == np.bool_:
            return _mask_positions(values)
        if values.size == 0:
            return values.astype(np.int64)
        if values.dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type, "
                             f"not {values.dtype}")
        return values
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) "
                     f"and integer or boolean arrays are valid indices, not {type(k).__name__}")


def _mask_positions(mask):
    if mask.ndim != 1:
        raise IndexError("a boolean array inside a tuple index must be 1-D (deft indexes one "
                         "axis with it)")
    return np.flatnonzero(mask)


def _single_array(entries, new_axes):
    """The axis of the only index array when every other entry is a slice, else None."""
    arrays = [a for a, k in enumerate(entries) if not isinstance(k, slice)]
    if new_axes or len(arrays) != 1 or not isinstance(entries[arrays[0]], (np.ndarray, NDArray)):
        return None
    return arrays[0]


def _all_full(entries):
    return all(isinstance(k, slice) and k == slice(None) for k in entries)


def _take_along(x, entries, axis):
    """x[..., index, ...]: the slices first, then one gather along `axis`."""
    basic = tuple(slice(None) if a == axis else k for a, k in enumerate(entries))
    y = x[basic] if not _all_full(basic) else x
    index = entries[axis]
    if not isinstance(index, NDArray):
        index = array(_wrapped(index, y.shape[axis], axis), dtype="int64")
        return invoke("take", (y, index), {"axis": axis})
    _check_index_dtype(index)
    if axis == 0:
        return invoke("gather_nd", (y, index.reshape((1,) + index.shape)))
    order = (axis,) + tuple(a for a in range(y.ndim) if a != axis)
    front = invoke("gather_nd", (y.transpose(order), index.reshape((1,) + index.shape)))
    k = index.ndim  # the index's dimensions lead: move them to where the axis was
    back = tuple(range(k, k + axis)) + tuple(range(k)) + tuple(range(k + axis, front.ndim))
    return front.transpose(back)


def _check_index_dtype(index):
    if getattr(index.dtype, "kind", "f") not in "iu":  # bfloat16's dtype is a name
        raise IndexError(f"arrays used as indices must be of integer (or boolean) type, not "
                         f"{index.dtype}")


def _with_new_axes(shape, new_axes):
    shape = list(shape)
    for at in new_axes:
        shape.insert(at, 1)
    return tuple(shape)


def _insert_slices(entries, new_axes):
    entries = list(entries)
    for at in new_axes:
        entries.insert(at, slice(None))
    return entries


def _host_entries(entries, shape):
    """Index arrays (deft ones read back) and ints as NumPy int64 arrays, in range."""
    out = []
    for axis, (k, dim) in enumerate(zip(entries, shape)):
        if isinstance(k, slice):
            out.append(k)
            continue
        if isinstance(k, NDArray):
            _check_index_dtype(k)
            k = k.asnumpy()
        out.append(_wrapped(np.asarray(k), dim, axis))
    return out


def _wrapped(values, dim, axis):
    """values with negative indices counted from the end; IndexError when out of range."""
    values = np.asarray(values, dtype=np.int64)
    bad = (values < -dim) | (values >= dim)
    if bad.any():
        raise IndexError(f"index {int(values[bad].flat[0])} is out of bounds for axis {axis} "
                         f"with size {dim}")
    return np.where(values < 0, values + dim, values)


def _full_index(shape, entries, shape_only=False):
    """(index, result shape): index of shape (ndim, *result) addresses every
    axis of x for gather_nd, laid out as NumPy lays out x[key]."""
    arrays = [a for a, k in enumerate(entries) if not isinstance(k, slice)]
    try:
        common = np.broadcast_shapes(*(entries[a].shape for a in arrays))
    except ValueError:
        shapes = " ".join(str(entries[a].shape) for a in arrays)
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together with "
                         f"shapes {shapes}") from None
    ranges = {a: range(*k.indices(dim)) for a, (k, dim) in enumerate(zip(entries, shape))
              if isinstance(k, slice)}
    adjacent = arrays == list(range(arrays[0], arrays[-1] + 1))
    before = [a for a in ranges if adjacent and a < arrays[0]]
    after = [a for a in ranges if a not in before]
    result = (tuple(len(ranges[a]) for a in before) + common +
              tuple(len(ranges[a]) for a in after))
    if shape_only:
        return None, result
    lead, width = len(before), len(common)
    parts = []
    for a in range(len(shape)):
        if a in ranges:
            at = before.index(a) if a in before else lead + width + after.index(a)
            view = (1,) * at + (-1,) + (1,) * (len(result) - at - 1)
            parts.append(np.arange(ranges[a].start, ranges[a].stop, ranges[a].step).reshape(view))
        else:
            placed = np.broadcast_to(entries[a], common)
            parts.append(placed.reshape((1,) * lead + common + (1,) * (len(result) - lead - width)))
    index = np.stack([np.broadcast_to(p, result) for p in parts]) if parts else None
    return index, result


def _broadcast(value, shown, target):
    """value broadcast to `shown` (the shape x[key] reads as, NumPy's rule),
    then laid out as `target` (the same elements without the new axes)."""
    vshape = _fitting_shape(value, tuple(shown), f"shape mismatch: value array of shape "
                            f"{value.shape} could not be broadcast to indexing result of "
                            f"shape {tuple(shown)}")
    if vshape != value.shape:
        value = value.reshape(vshape)
    if value.shape != tuple(shown):
        value = invoke("broadcast_to", (value,), {"shape": tuple(shown)})
    return value.reshape(target) if tuple(shown) != tuple(target) else value


def _fitting_shape(value, target, message):
    """value's shape without the leading 1s past target's rank, when it broadcasts
    to target (NumPy's rule for what an assignment stores); ValueError(message) if not."""
    vshape = value.shape
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        fits = np.broadcast_shapes(vshape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(message)
    return vshape


# ---- basic indexing: one slice and a reshape ----

class _IndexPlan:
    """Basic indexing as one slice and a reshape; `run` is (offset, count) when
    the region is one contiguous run of elements (a view can show it)."""

    __slots__ = ("begin", "end", "step", "sliced", "final_shape", "region_shape", "run",
                 "picks")

    def params(self):
        return {"begin": self.begin, "end": self.end, "step": self.step}


def _contiguous_run(shape, starts, counts, unit):
    """(offset, count) of a region of x when its elements are one run: before
    some axis every count is 1, that axis steps by 1, and after it every axis
    is whole. None otherwise."""
    offset, stride, whole = 0, 1, True
    for dim, start, count, steps_by_one in reversed(list(zip(shape, starts, counts, unit))):
        if not whole and count != 1:
            return None
        if count > 1 and not steps_by_one:
            return None
        offset += start * stride
        whole = whole and start == 0 and count == dim
        stride *= dim
    return offset, int(np.prod(counts)) if counts else 1


def _basic_index(shape, key):
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices: {used} for an array of {len(shape)} dimensions")
    fill = (slice(None),) * (len(shape) - used)
    key = (key[:key.index(Ellipsis)] + fill + key[key.index(Ellipsis) + 1:]
           if Ellipsis in key else key + fill)
    plan = _IndexPlan()
    plan.begin, plan.end, plan.step, final, region = [], [], [], [], []
    starts, unit = [], []
    plan.picks = []  # per key entry: (axis, first index, step; None for an int) or a new axis
    plan.sliced = False
    axis = 0
    for k in key:
        if k is None:  # numpy.newaxis: an axis of 1 in the result, none in x
            final.append(1)
            plan.picks.append((None, 0, None))
            continue
        dim = shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(dim)
            n = len(range(start, stop, step))
            plan.begin.append(k.start)
            plan.end.append(k.stop)
            plan.step.append(k.step)
            final.append(n)
            region.append(n)
            starts.append(start if n else 0)
            unit.append(step == 1)
            plan.picks.append((axis, start if n else 0, step))
            plan.sliced |= n != dim or (k.step not in (None, 1))
        elif isinstance(k, (bool, np.bool_)):
            raise IndexError("a bool inside a tuple index (a new axis, in NumPy) is not supported")
        elif isinstance(k, (numbers.Integral, np.integer)) or hasattr(k, "__index__"):
            i = int(k.__index__())
            if not -dim <= i < dim:
                raise IndexError(f"index {i} is out of range for axis {axis} of size {dim}")
            i %= dim
            plan.begin.append(i)
            plan.end.append(i + 1)
            plan.step.append(None)
            region.append(1)
            starts.append(i)
            unit.append(True)
            plan.picks.append((axis, i, None))
            plan.sliced = True
        else:
            raise IndexError(f"index {k!r} ({type(k).__name__}) is not an int, slice, "
                             f"Ellipsis, None or integer array")
        axis += 1
    plan.final_shape, plan.region_shape = tuple(final), tuple(region)
    plan.run = _contiguous_run(shape, starts, region, unit)
    return plan


# ---- boolean masks ----

def _boolean_mask(key):
    """The key as a NumPy bool array when it is a boolean mask, else None.

    Masks are bool arrays (NumPy's, deft's, lists of bools, comparisons such as
    a > 2), a bool, and float arrays of 0s and 1s (the dtype MXNet's comparison
    operators give for float arrays; NumPy never reads floats as indices).
    Reading a deft array's values waits for it: the result's shape depends on them.
    """
    kind = type(key)
    if kind is int or kind is slice or kind is tuple:  # the common keys, at once
        return None
    if kind is bool or kind is np.bool_:
        return np.array(bool(key))
    if isinstance(key, NDArray):
        dtype = key.dtype
        if dtype == np.bool_:
            return key.asnumpy()
        if isinstance(dtype, str) or dtype.kind == "f":  # bfloat16 (a name) is a float too
            return _float_mask(key.asnumpy())
        return None
    if isinstance(key, list) and len(key) > 0:
        key = np.asarray(key)
    if isinstance(key, np.ndarray):
        if key.dtype == np.bool_:
            return key
        if key.dtype.kind == "f":
            return _float_mask(key)
    return None


def _float_mask(values):
    ones = values == 1
    if not (ones | (values == 0)).all():
        raise IndexError("arrays used as indices must be of integer or boolean type; a float "
                         "array is read as a mask (as comparisons give) only when its values "
                         "are 0 and 1")
    return ones


def _mask_split(shape, mask):
    """Check a mask against the leading axes of shape; the rows it covers (their
    count, as one axis) and the shape of each row."""
    if mask.ndim > len(shape):
        raise IndexError(f"too many indices: a boolean index of {mask.ndim} dimensions for an "
                         f"array of {len(shape)}")
    for axis, (m, dim) in enumerate(zip(mask.shape, shape)):
        if m != dim:
            raise IndexError(f"boolean index did not match indexed array along axis {axis}; "
                             f"size of axis is {dim} but size of corresponding boolean axis "
                             f"is {m}")
    rows = 1
    for dim in shape[:mask.ndim]:
        rows *= dim
    return rows, tuple(shape[mask.ndim:])


def _take_masked(x, mask):
    """x[mask]: the rows of x (over the mask's axes) where the mask is true."""
    rows, row_shape = _mask_split(x.shape, mask)
    flat = x.reshape((rows,) + row_shape)
    return invoke("take", (flat, array(np.flatnonzero(mask), dtype="int64")))


def _value_like(value, x):
    """A value to write into x: an NDArray of x's dtype (NumPy casts what it assigns)."""
    if not isinstance(value, NDArray):
        return array(value, dtype=x.dtype)
    return value if value.dtype == x.dtype else value.astype(x.dtype)


def _assign_masked(x, mask, value):
    """x[mask] = value: value broadcasts to (count of true, *row shape), as in NumPy."""
    rows, row_shape = _mask_split(x.shape, mask)
    count = int(mask.sum())
    target = (count,) + row_shape
    vshape = _fitting_shape(value, target, f"cannot assign a value of shape {value.shape} to "
                            f"the elements a boolean index selects, of shape {target}")
    if count == 0 or x.size == 0:
        return
    lead = x.shape[:mask.ndim]
    cond = array(mask.reshape(lead + (1,) * len(row_shape)), dtype="uint8")
    if len(vshape) > len(row_shape) and vshape[0] != 1:  # one row of value per selected row
        if value.shape != target:
            value = invoke("broadcast_to", (value.reshape(vshape),), {"shape": target})
        position = np.maximum(np.cumsum(mask.reshape(-1)) - 1, 0)
        value = invoke("take", (value, array(position, dtype="int64"))).reshape(x.shape)
    else:  # the same for every selected row
        value = value.reshape(vshape[1:] if len(vshape) > len(row_shape) else vshape)
    invoke("_copyto", (invoke("where", (cond, value, x)),), out=x)
