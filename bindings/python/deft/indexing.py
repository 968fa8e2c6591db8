"""NumPy's advanced indexing: integer arrays (lists, NumPy or deft arrays) as
indices, alone or mixed with ints, slices, None and Ellipsis.

The semantics are NumPy's. Ints beside an index array count as index arrays
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

from .ndarray import NDArray, array, invoke, value_like, zeros


def is_advanced(key):
    """Whether key holds an index array (a list, NumPy or deft array)."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (list, np.ndarray, NDArray)) for k in keys)


def read(x, key):
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


def assign(x, key, value):
    """x[key] = value for a key with index arrays: value broadcasts to x[key]'s shape."""
    entries, new_axes = _entries(x.shape, key)
    value = value_like(value, x)
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
    vshape = value.shape
    while len(vshape) > len(shown) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        fits = np.broadcast_shapes(vshape, shown) == tuple(shown)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"shape mismatch: value array of shape {value.shape} could not be "
                         f"broadcast to indexing result of shape {tuple(shown)}")
    if vshape != value.shape:
        value = value.reshape(vshape)
    if value.shape != tuple(shown):
        value = invoke("broadcast_to", (value,), {"shape": tuple(shown)})
    return value.reshape(target) if tuple(shown) != tuple(target) else value
