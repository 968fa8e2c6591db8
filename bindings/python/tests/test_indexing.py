"""Indexing with NumPy's semantics: integer arrays on one or several axes,
mixed with ints, slices, None and Ellipsis; reads and writes, checked
against NumPy on the same keys."""
import numpy as np
import pytest

import deft

SHAPE = (4, 5, 6)

READ_KEYS = [
    [0, 2, -1],                          # a list on the first axis, negative counts from the end
    np.array([[1, 0], [3, 3]]),          # a 2-D index array
    (slice(None), [4, 0, 1]),            # one array after a slice: take along axis 1
    (1, slice(None), [0, -2]),           # an int and an array apart: both advanced, result first
    ([0, 1], [2, 3]),                    # arrays on adjacent axes: pairs of elements
    ([0, 1], slice(1, 4), [2, 3]),       # arrays apart: the broadcast dimensions go first
    (slice(1, 3), [0, 4], [1, 5]),       # adjacent arrays after a slice stay in place
    ([[0], [3]], [1, 2, 4]),             # arrays that broadcast to (2, 3)
    (Ellipsis, [5, 0]),                  # Ellipsis before an array
    (None, [1, 2]),                      # a new axis and an array
    ([1, 2], None, slice(None), 0),      # an array, a new axis apart from it
    (None, 1, slice(None, None, 2)),     # basic: a new axis in front
    (slice(None), None, 2),              # basic: a new axis in the middle
    (Ellipsis, None),                    # basic: a new last axis
    np.array([], dtype=np.int64),        # an empty index
    (np.array([True, False, True, True]), [0, 1, 2]),  # a 1-D mask inside a tuple
]


@pytest.mark.parametrize("key", READ_KEYS, ids=range(len(READ_KEYS)))
def test_reads_match_numpy(key):
    a = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    got = deft.array(a)[key]
    assert got.shape == a[key].shape
    np.testing.assert_array_equal(got.asnumpy(), a[key])


@pytest.mark.parametrize("key", READ_KEYS[:11], ids=range(11))
def test_writes_match_numpy(key):
    a = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    value = -np.arange(np.prod(a[key].shape), dtype=np.float32).reshape(a[key].shape) - 1
    x = deft.array(a)
    x[key] = deft.array(value)
    a[key] = value
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[key] = 7.5  # a scalar broadcasts
    a[key] = 7.5
    np.testing.assert_array_equal(x.asnumpy(), a)


def test_deft_index_arrays_read_and_write_on_the_device_of_the_data():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = deft.array(a)
    index = deft.array(np.array([3, -1, 0]), dtype="int64")
    np.testing.assert_array_equal(x[index].asnumpy(), a[[3, -1, 0]])
    np.testing.assert_array_equal(x[:, index].asnumpy(), a[:, [3, -1, 0]])
    np.testing.assert_array_equal(x[1:3, index].asnumpy(), a[1:3, [3, -1, 0]])
    x[index] = deft.array(np.ones((3, 6), np.float32))
    a[[3, -1, 0]] = 1
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[index] = 2.0
    a[[3, -1, 0]] = 2.0
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[:, deft.array([0, 5], dtype="int32")] = 9.0
    a[:, [0, 5]] = 9.0
    np.testing.assert_array_equal(x.asnumpy(), a)


def test_out_of_range_indices_raise_instead_of_clipping():
    x = deft.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        x[[0, 3]]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        x[:, [-5]]
    with pytest.raises(IndexError, match="out of bounds for axis 1"):
        x[[0], [4]] = 1.0
    with pytest.raises(IndexError, match=r"has 7 at position 0, expected a whole number in "
                                         r"\[-3, 2\]"):  # checked where the index lives
        x[deft.array([7], dtype="int64")].asnumpy()
    with pytest.raises(IndexError):  # the failed gather is this thread's to collect
        deft.waitall()
    with pytest.raises(IndexError, match="could not be broadcast together"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="must be of integer"):
        x[np.array([0.5])]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], [0], [0]]
    with pytest.raises(ValueError, match="could not be broadcast to indexing result of shape"):
        x[[0, 1]] = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(x.asnumpy(), np.arange(12).reshape(3, 4))  # untouched


def test_advanced_reads_are_differentiable():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = deft.array(a)
    x.attach_grad()
    with deft.autograd.record():
        y = (x[[0, 2, 2], [1, 3, 3]] * deft.array([1.0, 2.0, 3.0])).sum()
    y.backward()
    want = np.zeros_like(a)
    np.add.at(want, ([0, 2, 2], [1, 3, 3]), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.grad.asnumpy(), want)


def test_contiguous_basic_reads_are_views_as_in_numpy(no_leaks):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = deft.array(a)
    row, run, whole = x[1, 2], x[0, 1:3], x[:]
    row[:] = -1.0                  # writes through a view land in x
    run += 100.0
    a[1, 2] = -1.0
    a[0, 1:3] += 100.0
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[0, 1, 0] = 7.0               # and writes to x show in the views
    a[0, 1, 0] = 7.0
    np.testing.assert_array_equal(run.asnumpy(), a[0, 1:3])
    np.testing.assert_array_equal(whole.asnumpy(), a)
    np.testing.assert_array_equal(x[None, 1].asnumpy(), a[None, 1])
    del x                          # a view keeps the memory it shows
    np.testing.assert_array_equal(row.asnumpy(), a[1, 2])


def test_strided_basic_reads_are_views_as_in_numpy(no_leaks):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = deft.array(a)
    v = x[:, 1:3]                  # not one run of elements: a strided view
    assert v._is_strided_view and not x[1:3]._is_strided_view
    np.testing.assert_array_equal(v.asnumpy(), a[:, 1:3])
    v[:] = 0.0                     # writes through the view land in x
    a[:, 1:3] = 0.0
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[:, 2] = 7.0                  # and writes to x show in the view
    a[:, 2] = 7.0
    np.testing.assert_array_equal(v.asnumpy(), a[:, 1:3])
    v += 1.0                       # in place, through an operator
    a[:, 1:3] += 1.0
    np.testing.assert_array_equal(x.asnumpy(), a)
    deft.nd.elemwise_add(v, v, out=v)
    a[:, 1:3] *= 2.0
    np.testing.assert_array_equal(x.asnumpy(), a)
    w = v[::2, ::-1]               # a view of a view, with a negative step
    np.testing.assert_array_equal(w.asnumpy(), a[:, 1:3][::2, ::-1])
    w[:] = -5.0
    a[:, 1:3][::2, ::-1] = -5.0
    np.testing.assert_array_equal(x.asnumpy(), a)
    np.testing.assert_array_equal((v * 2.0 + 1.0).asnumpy(), a[:, 1:3] * 2.0 + 1.0)
    np.testing.assert_array_equal(deft.nd.dot(v, v.T).asnumpy(), a[:, 1:3] @ a[:, 1:3].T)
    for key in [(Ellipsis, 0), (None, slice(None, None, 3), 1), (slice(None), slice(5, 2)),
                (slice(None, None, -1),), (1, slice(None, None, 2))]:
        np.testing.assert_array_equal(x[key].asnumpy(), a[key], err_msg=str(key))
    np.testing.assert_array_equal(np.from_dlpack(v), a[:, 1:3])  # strided DLPack, no copy
    with deft.autograd.record():   # a recording reads a copy: later writes do not reach it
        q = v * 3.0
    x[:] = 0.0
    np.testing.assert_array_equal(q.asnumpy(), a[:, 1:3] * 3.0)
    a[:] = 0.0
    del x                          # the view keeps the memory it shows
    np.testing.assert_array_equal(v.asnumpy(), a[:, 1:3])


def test_strided_views_refuse_what_would_lose_writes():
    x = deft.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = x[:, ::2]
    with pytest.raises(deft.DeftError, match="strided view"):
        v.attach_grad()
    with deft.autograd.record():
        with pytest.raises(deft.DeftError, match="strided view"):
            deft.nd.elemwise_add(x[:, :2], x[:, :2], out=v)


def test_recorded_reads_are_copies_that_carry_gradients():
    x = deft.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    x.attach_grad()
    with deft.autograd.record():
        y = (x[1] * 2.0).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [[0, 0, 0], [2, 2, 2]])
    with deft.deferred_compute():
        lazy = x * 1.0
        part = lazy[1]
    np.testing.assert_array_equal(part.asnumpy(), [3, 4, 5])
    later = (x * 1.0)[0]           # outside both: a view
    later[:] = 9.0
    np.testing.assert_array_equal(x.asnumpy(), [[0, 1, 2], [3, 4, 5]])
