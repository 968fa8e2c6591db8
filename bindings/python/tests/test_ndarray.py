import operator

import numpy as np
import pytest

import deft


def test_array_from_lists_numpy_and_scalars():
    a = deft.array([[1.0, 2.0], [3.0, 4.0]])
    assert a.shape == (2, 2) and a.dtype == np.float32 and a.ndim == 2 and a.size == 4
    assert a.device == deft.cpu() and len(a) == 2
    np.testing.assert_array_equal(a.asnumpy(), [[1, 2], [3, 4]])
    assert deft.array([1, 2, 3]).dtype == np.int64
    assert deft.array([True, False]).dtype == np.bool_
    assert deft.array(np.arange(3, dtype=np.float64)).dtype == np.float64
    s = deft.array(2.5)
    assert s.shape == () and s.item() == 2.5 and float(s) == 2.5
    assert deft.array([1, 2], dtype="float64").dtype == np.float64
    b = deft.array(a)  # a copy
    a += 1
    np.testing.assert_array_equal(b.asnumpy(), [[1, 2], [3, 4]])


def test_creation_functions():
    np.testing.assert_array_equal(deft.zeros((2, 3)).asnumpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(deft.ones(4, dtype="int32").asnumpy(), np.ones(4))
    assert deft.ones(4, dtype="int32").dtype == np.int32
    np.testing.assert_array_equal(deft.full((2,), 7.5).asnumpy(), [7.5, 7.5])
    np.testing.assert_array_equal(deft.arange(5).asnumpy(), np.arange(5))
    np.testing.assert_allclose(deft.arange(1, 2, 0.25).asnumpy(), np.arange(1, 2, 0.25))
    x = deft.array([[1, 2]])
    np.testing.assert_array_equal(deft.zeros_like(x).asnumpy(), [[0, 0]])
    np.testing.assert_array_equal(deft.ones_like(x).asnumpy(), [[1, 1]])
    assert deft.zeros((0, 3)).shape == (0, 3)


def test_random_is_seeded():
    deft.random.seed(42)
    a = deft.random.uniform(-1, 1, (100,)).asnumpy()
    deft.random.seed(42)
    b = deft.random.uniform(-1, 1, (100,)).asnumpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= -1 and a.max() < 1
    n = deft.random.normal(2.0, 0.5, (20000,)).asnumpy()
    assert abs(n.mean() - 2.0) < 0.02 and abs(n.std() - 0.5) < 0.02


BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow]
COMPARE = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", BINARY + COMPARE)
def test_arithmetic_matches_numpy_with_broadcasting_and_scalars(op, rng):
    a = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    b = rng.uniform(0.5, 2, (1, 4)).astype(np.float32)
    da, db = deft.array(a), deft.array(b)
    expect = lambda v: np.asarray(v, np.float32)  # noqa: E731  comparisons give 0/1 in the dtype
    np.testing.assert_allclose(op(da, db).asnumpy(), expect(op(a, b)), rtol=1e-5)
    np.testing.assert_allclose(op(da, 1.5).asnumpy(), expect(op(a, np.float32(1.5))), rtol=1e-5)
    if op not in COMPARE:
        np.testing.assert_allclose(op(1.5, da).asnumpy(), expect(op(np.float32(1.5), a)),
                                   rtol=1e-5)
    np.testing.assert_allclose(op(da, b).asnumpy(), expect(op(a, b)), rtol=1e-5)


def test_unary_matmul_and_in_place(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    da = deft.array(a)
    np.testing.assert_allclose((-da).asnumpy(), -a)
    np.testing.assert_allclose(abs(da).asnumpy(), np.abs(a))
    np.testing.assert_allclose((da @ deft.array(b)).asnumpy(), a @ b, rtol=1e-5)
    np.testing.assert_allclose((da @ b).asnumpy(), a @ b, rtol=1e-5)
    c = rng.standard_normal((2, 3, 4)).astype(np.float32)
    d = rng.standard_normal((2, 4, 5)).astype(np.float32)
    np.testing.assert_allclose((deft.array(c) @ deft.array(d)).asnumpy(), c @ d, rtol=1e-4)
    x = deft.array(a)
    same = x
    x += 1
    x *= 2
    x -= deft.array(a)
    x /= 4
    assert x is same
    np.testing.assert_allclose(x.asnumpy(), ((a + 1) * 2 - a) / 4, rtol=1e-6)


def test_numpy_on_the_left_defers_to_deft():
    x = deft.array([1.0, 2.0])
    r = np.float32(2) * x
    assert isinstance(r, deft.NDArray)
    np.testing.assert_array_equal(r.asnumpy(), [2, 4])


def test_reading_by_index_and_slice(rng):
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    x = deft.array(a)
    for key in [1, -1, (2, 3), (slice(1, 3),), (slice(None), slice(None, None, 2)),
                (slice(None, None, -1), 0), (Ellipsis, 1), (1, Ellipsis, slice(2, 4)),
                (slice(3, 1),), (slice(-100, 100),)]:
        np.testing.assert_array_equal(x[key].asnumpy(), a[key], err_msg=str(key))
    assert x[1, 2, 3].item() == a[1, 2, 3]
    np.testing.assert_array_equal(x[[2, 0]].asnumpy(), a[[2, 0]])
    np.testing.assert_array_equal(x[deft.array([3, 1])].asnumpy(), a[[3, 1]])
    with pytest.raises(IndexError, match="out of range for axis 0"):
        x[4]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="not an int, slice"):
        x["a"]


def test_writing_by_index_and_slice():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = deft.array(a)
    x[1] = 0
    a[1] = 0
    x[2:, ::2] = deft.array([-1.0, -2.0, -3.0])
    a[2:, ::2] = [-1, -2, -3]
    x[0, 5] = 99
    a[0, 5] = 99
    x[:, 1] = np.arange(4)
    a[:, 1] = np.arange(4)
    np.testing.assert_array_equal(x.asnumpy(), a)
    with pytest.raises(ValueError, match="does not fit a region"):
        x[0] = deft.array([1.0, 2.0])


def test_shape_reductions_and_conversions(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = deft.array(a)
    np.testing.assert_array_equal(x.reshape(6, 4).asnumpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(x.reshape((4, -1)).asnumpy(), a.reshape(4, -1))
    np.testing.assert_array_equal(x[0].T.asnumpy(), a[0].T)
    np.testing.assert_array_equal(x.transpose(1, 0, 2).asnumpy(), a.transpose(1, 0, 2))
    np.testing.assert_allclose(x.sum().asnumpy(), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(x.sum(axis=1).asnumpy(), a.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(x.mean(axis=(0, 2), keepdims=True).asnumpy(),
                               a.mean(axis=(0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(x.max(axis=2).asnumpy(), a.max(axis=2))
    np.testing.assert_array_equal(x.min().asnumpy(), a.min())
    np.testing.assert_array_equal(x.argmax(axis=1).asnumpy(), a.argmax(axis=1))
    y = x.astype("int32")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y.asnumpy(), a.astype(np.int32))
    target = deft.zeros((2, 3, 4))
    assert x.copyto(target) is target
    np.testing.assert_array_equal(target.asnumpy(), a)
    np.testing.assert_array_equal(np.asarray(x), a)
    assert x.wait_to_read() is x
    assert x.tolist() == a.tolist()
    assert "NDArray (2, 3, 4) float32 @cpu(0)" in repr(x)


def test_dlpack_zero_copy_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = deft.from_dlpack(a)
    a[0, 0] = 42  # the same memory
    assert x[0, 0].item() == 42
    y = deft.array([[1.0, 2.0], [3.0, 4.0]])
    view = np.from_dlpack(y)  # NumPy marks DLPack 0.x imports read-only
    y[1, 1] = -1  # written by deft, seen through NumPy: no copy was made
    assert view[1, 1] == -1
    del y  # the exported memory stays valid while NumPy holds it
    assert view[1, 1] == -1
    assert deft.array([1, 2]).__dlpack_device__() == (1, 0)
    with pytest.raises(NotImplementedError, match="not compact"):
        deft.from_dlpack(np.arange(6.0).reshape(2, 3).T)


def test_errors_are_the_matching_python_exceptions():
    with pytest.raises(deft.DeftValueError, match=r"shape\[1\] is -3") as info:
        deft.zeros((2, -3))
    assert isinstance(info.value, ValueError) and isinstance(info.value, deft.DeftError)
    with pytest.raises(IndexError, match="axis is 5"):
        deft.nd.sum(deft.zeros((2, 2)), axis=5)
    with pytest.raises(deft.DeftTypeError):
        deft.nd.dot(deft.zeros((2, 2)), deft.zeros((2, 2), dtype="int32"))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        deft.zeros((2, 3)) + deft.zeros((4,))
    with pytest.raises(deft.DeftParseError):
        deft.nd.sum(deft.zeros((2,)), axis="x")
    with pytest.raises(TypeError, match="dtype 'float7' is not one deft has"):
        deft.zeros(3, dtype="float7")
    with pytest.raises(TypeError, match="make arrays with deft.array"):
        deft.NDArray()
    with pytest.raises(ValueError, match="item\\(\\) needs an array of one element"):
        deft.zeros(3).item()


def test_raw_module_type_errors_name_the_argument():
    from deft import _deft
    with pytest.raises(TypeError, match=r"handle is int, expected a deft"):
        _deft.DeftNDArrayGetNDim(3)
    with pytest.raises(TypeError, match=r"inputs\[0\] is str"):
        _deft.DeftImperativeInvoke(_deft.DeftGetOperator("exp"), 1, ["x"], [None], 0, [], [])


def test_zero_size_indexing_reshape_and_slicing_match_numpy():
    a = np.zeros((2, 0), np.float32)
    x = deft.zeros((2, 0))
    for key in [0, -1, (1,), (slice(None), slice(None)), slice(1, 1), (Ellipsis, slice(0, 0)),
                (0, slice(None)), (slice(None, None, -1),)]:
        assert x[key].shape == a[key].shape, key
    z = np.zeros((0, 3, 4), np.float32)
    w = deft.zeros((0, 3, 4))
    for shape in [(0,), (3, 0), (0, 12), (-1, 4), (4, 0, 3), (0, -1, 2, 2), ()]:
        try:
            want = z.reshape(shape).shape
        except ValueError:
            with pytest.raises(ValueError):
                w.reshape(shape)
            continue
        assert w.reshape(shape).shape == want, shape
    assert w[:, 1].shape == z[:, 1].shape and w[..., 0].shape == z[..., 0].shape
    assert w[:, 1:2, ::2].shape == z[:, 1:2, ::2].shape
    assert deft.zeros((3, 2))[2:].shape == (1, 2) and deft.zeros((3, 2))[3:].shape == (0, 2)
    np.testing.assert_array_equal(deft.zeros((3, 2))[3:, 1].asnumpy(), np.zeros((3, 2))[3:, 1])
    q = deft.array(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(q.reshape(2, 3).asnumpy(), np.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match="cannot reshape"):
        q.reshape(0, 6)
    with pytest.raises(IndexError, match="out of range for axis 1 of size 0"):
        x[0, 0]
    with pytest.raises(IndexError, match="out of range for axis 0 of size 0"):
        w[0]
    y = deft.zeros((2, 0))
    y[0] = 1.0  # writes nothing
    y[:, :] = deft.zeros((0,))
    assert y.shape == (2, 0)


def test_boolean_masks_read_like_numpy(rng):
    a = np.arange(1, 7, dtype=np.float32)
    x = deft.array(a)
    np.testing.assert_array_equal(x[x > 2].asnumpy(), a[a > 2])
    np.testing.assert_array_equal(x[a > 2].asnumpy(), a[a > 2])  # a NumPy mask
    np.testing.assert_array_equal(x[[True, False] * 3].asnumpy(), a[[True, False] * 3])
    np.testing.assert_array_equal(x[(x > 1) & (x < 5)].asnumpy(), a[(a > 1) & (a < 5)])
    np.testing.assert_array_equal(x[(x < 2) | ~(x < 6)].asnumpy(), a[(a < 2) | ~(a < 6)])
    np.testing.assert_array_equal(x[(x > 1) * (x < 5)].asnumpy(), a[(a > 1) & (a < 5)])
    assert x[x > 10].shape == (0,)
    i = deft.array([5, 1, 7, 3])  # int64: its comparisons are masks too, not indices
    np.testing.assert_array_equal(i[i > 2].asnumpy(), [5, 7, 3])
    b = rng.standard_normal((3, 4, 2)).astype(np.float32)
    y = deft.array(b)
    for mask in [b > 0, b[:, :, 0] > 0, b[:, 0, 0] > 0, np.zeros(3, bool)]:
        np.testing.assert_array_equal(y[mask].asnumpy(), b[mask])
        np.testing.assert_array_equal(y[deft.array(mask)].asnumpy(), b[mask])
    np.testing.assert_array_equal(y[y[:, :, 0] > 0].asnumpy(), b[b[:, :, 0] > 0])
    np.testing.assert_array_equal(x[True].asnumpy(), a[True])
    assert x[np.bool_(False)].shape == a[False].shape
    np.testing.assert_array_equal(x[[3, 1]].asnumpy(), a[[3, 1]])  # integers still index


def test_boolean_mask_mismatch_is_an_index_error():
    x = deft.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    with pytest.raises(IndexError, match="did not match indexed array along axis 0; size of "
                                         "axis is 3 but size of corresponding boolean axis is 2"):
        x[np.array([True, False])]
    with pytest.raises(IndexError, match="along axis 1"):
        x[deft.array(np.ones((3, 3), bool))]
    with pytest.raises(IndexError, match="too many indices"):
        x[np.ones((3, 2, 1), bool)]
    with pytest.raises(IndexError, match="must be of integer or boolean type"):
        x[deft.array([0.5, 1.0, 0.0])]
    with pytest.raises(IndexError, match="did not match"):
        x[np.array([True, False])] = 1.0


def test_boolean_masks_write_like_numpy(rng):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = deft.array(a)
    x[x > 6] = 0
    a[a > 6] = 0
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[x == 0] = deft.array([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0])  # one per selected element
    a[a == 0] = [-1, -2, -3, -4, -5, -6]
    np.testing.assert_array_equal(x.asnumpy(), a)
    rows = np.array([True, False, True])
    x[rows] = np.array([10.0, 20.0, 30.0, 40.0])  # each selected row, broadcast
    a[rows] = [10, 20, 30, 40]
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[rows] = deft.array([[1.0], [2.0]])  # one value per selected row
    a[rows] = [[1], [2]]
    np.testing.assert_array_equal(x.asnumpy(), a)
    x[np.zeros(3, bool)] = 5  # nothing selected
    np.testing.assert_array_equal(x.asnumpy(), a)
    i = deft.array([1, 2, 3, 4])
    i[i > 2] = np.int64(0)
    np.testing.assert_array_equal(i.asnumpy(), [1, 2, 0, 0])
    with pytest.raises(ValueError, match="cannot assign a value of shape \\(3,\\) to the "
                                         "elements a boolean index selects, of shape \\(2, 4\\)"):
        x[rows] = deft.array([1.0, 2.0, 3.0])
    b = rng.standard_normal((2, 3, 2)).astype(np.float32)
    y = deft.array(b)
    m = b > 0
    y[m] = y[m] * 10
    b[m] = b[m] * 10
    np.testing.assert_allclose(y.asnumpy(), b)


def test_numpy_scalars_work_where_python_numbers_do():
    a = np.array([1.0, 2.0, 4.0])
    x = deft.array(a, dtype="float64")
    for s in [np.float16(0.5), np.float32(0.1), np.float64(0.1), np.int8(-3), np.int16(3),
              np.int32(2), np.int64(-5), np.uint8(7), np.uint16(2), np.uint32(3), np.uint64(9),
              np.bool_(True), np.bool_(False)]:
        exact = float(s)  # the scalar's exact value, at float64
        np.testing.assert_array_equal((x + s).asnumpy(), a + exact, err_msg=repr(s))
        np.testing.assert_array_equal((s * x).asnumpy(), exact * a, err_msg=repr(s))
        np.testing.assert_array_equal((x > s).asnumpy(), a > exact, err_msg=repr(s))
        y = deft.array(a, dtype="float64")
        y -= s
        np.testing.assert_array_equal(y.asnumpy(), a - exact, err_msg=repr(s))
    np.testing.assert_array_equal((x + np.float64(0.5)).asnumpy(), a + 0.5)
    np.testing.assert_array_equal((x + True).asnumpy(), a + 1)
    # float32's 0.1 keeps every digit: not "0.1" (str), which would give float64's 0.1
    assert (deft.full((1,), np.float32(0.1), dtype="float64").item() == float(np.float32(0.1)))
    assert deft.full((2,), np.float64(1 / 3), dtype="float64").asnumpy()[0] == 1 / 3
    assert deft.zeros(np.int64(3)).shape == (3,) and deft.ones((np.int32(2), 2)).shape == (2, 2)
    assert deft.arange(np.int64(4)).shape == (4,)
    m = deft.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert m.reshape(np.int64(3), np.int64(2)).shape == (3, 2)
    np.testing.assert_array_equal(m.sum(axis=np.int64(1)).asnumpy(), [3, 12])
    assert m[np.int64(1), np.uint8(2)].item() == 5
    assert m.expand_dims(np.int32(0)).shape == (1, 2, 3)
    assert deft.random.uniform(np.float32(0), np.float64(1), np.int64(5)).shape == (5,)
