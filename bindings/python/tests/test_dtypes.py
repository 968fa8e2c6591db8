"""dtypes: NumPy's promotion in the operators (with deft's float32 default), //, %,
bitwise operators and shifts, a real bool dtype, and float16 / bfloat16 arithmetic."""
import itertools

import numpy as np
import pytest

import deft
from deft import nd
from deft import np as dnp
from deft.ndarray import invoke

# deft's dtypes with arithmetic (int8 and bfloat16 are checked on their own)
DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]
KIND = {"bool": 0, "uint8": 1, "int8": 1, "int32": 1, "int64": 1,
        "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2}


def expected_dtype(a, b):
    """The rule the operators follow: NumPy's within a kind, the higher kind across."""
    if KIND[a] != KIND[b]:
        return a if KIND[a] > KIND[b] else b
    promoted = np.promote_types(a, b).name
    return "int32" if promoted == "int16" else promoted


def values_of(dtype, rng, n=12):
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if KIND[dtype] == 1:
        low = 0 if dtype == "uint8" else -50
        return rng.integers(low, 50, n).astype(dtype)
    return rng.uniform(-4, 4, n).astype(dtype)


# ---- promotion ----

@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_array_operands_promote(a, b, rng):
    x, y = values_of(a, rng), values_of(b, rng)
    want = expected_dtype(a, b)
    ops = [("+", np.add), ("*", np.multiply)] + ([] if want == "bool" else [("-", np.subtract)])
    for sym, ufunc in ops:
        got = eval(f"dx {sym} dy", {"dx": deft.array(x), "dy": deft.array(y)})
        assert got.dtype == np.dtype(want), (a, sym, b)
        ref = ufunc(x.astype(want), y.astype(want))
        np.testing.assert_allclose(got.asnumpy().astype(float), ref.astype(float), rtol=1e-3)


def test_mixed_kinds_take_the_higher_kinds_dtype_as_pytorch():
    i = deft.array(np.array([1, 2, 3], np.int32))
    f = deft.array(np.array([0.5, 0.5, 0.5], np.float32))
    assert (i + f).dtype == np.float32  # NumPy would give float64
    assert (deft.array(np.array([1, 2], np.int64)) + deft.array(np.array([1, 2], np.int32))
            ).dtype == np.int64
    assert (deft.array(np.array([1, 2], np.uint8)) + deft.array(np.array([1, 2], np.int32))
            ).dtype == np.int32
    assert (deft.array(np.array([True, False])) + deft.array(np.array([3, 4], np.int32))
            ).dtype == np.int32
    h = deft.array(np.array([1, 2], np.float16))
    assert (h + deft.array(np.array([1, 2], np.int64))).dtype == np.float16
    assert (h + deft.array(np.array([1, 2], np.float16)).astype("bfloat16")).dtype == np.float32


def test_python_scalars_follow_the_array_or_promote():
    i = deft.array(np.array([1, 2, 3], np.int32))
    r = i + 0.5  # was int32 [1 2 3], silently
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r.asnumpy(), [1.5, 2.5, 3.5])
    assert (i + 1).dtype == np.int32 and (2 * i).dtype == np.int32
    np.testing.assert_array_equal((0.5 - i).asnumpy(), [-0.5, -1.5, -2.5])
    np.testing.assert_array_equal((i ** 0.5).asnumpy(), np.sqrt([1, 2, 3]).astype(np.float32))
    b = deft.array(np.array([True, False]))
    assert (b + 1).dtype == np.int64 and (b + True).dtype == np.bool_
    h = deft.array(np.array([1, 2], np.float16))
    assert (h + 0.5).dtype == np.float16 and (h * 3).dtype == np.float16
    assert (deft.array(np.array([1.0], np.float64)) + 1.5).dtype == np.float64


def test_true_division_of_integers_gives_float32():
    i = deft.array(np.array([1, 2, -7], np.int64))
    j = deft.array(np.array([2, 2, 2], np.int32))
    for got, want in [(i / j, np.array([0.5, 1, -3.5])), (i / 2, [0.5, 1, -3.5]),
                      (7 / i, [7, 3.5, -1])]:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    assert (deft.array(np.array([True])) / deft.array(np.array([True]))).dtype == np.float32


def test_operands_from_numpy_and_lists_keep_their_dtype():
    i = deft.array(np.array([1, 2], np.int32))
    assert (i + np.array([0.5, 0.5])).dtype == np.float64
    assert (i + [0.5, 0.5]).dtype == np.float32  # lists: deft's float32 default
    np.testing.assert_array_equal((np.array([1, 1], np.int32) - i).asnumpy(), [0, -1])


def test_bool_arithmetic_is_logical_as_numpy():
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    dp, dq = deft.array(p), deft.array(q)
    np.testing.assert_array_equal((dp + dq).asnumpy(), p + q)
    np.testing.assert_array_equal((dp * dq).asnumpy(), p * q)
    with pytest.raises(TypeError, match="boolean subtract"):
        dp - dq


def test_in_place_operators_keep_the_dtype_or_raise():
    x = deft.array(np.array([1, 2, 3], np.int32))
    with pytest.raises(TypeError, match=r"'add' output from dtype\('float32'\) to "
                                        r"dtype\('int32'\)"):
        x += 0.5
    with pytest.raises(TypeError, match="'divide'.*float32.*int32"):
        x /= 2
    np.testing.assert_array_equal(x.asnumpy(), [1, 2, 3])  # untouched
    y = x
    x += deft.array(np.array([10, 20, 30], np.int64))  # same kind: allowed, as NumPy
    assert x is y and x.dtype == np.int32
    np.testing.assert_array_equal(x.asnumpy(), [11, 22, 33])
    x //= 2
    x %= 4
    x <<= 1
    np.testing.assert_array_equal(x.asnumpy(), ((np.array([11, 22, 33]) // 2) % 4) << 1)
    f = deft.array(np.array([1, 2], np.float32))
    f += deft.array(np.array([1, 2], np.int64))
    f *= 0.5
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.asnumpy(), [1, 2])


# ---- //, % and the bitwise operators ----

INTS = np.array([7, -7, 7, -7, 0, 5, -1, 13])
DIVISORS = np.array([2, 2, -2, -2, 3, 3, 5, -4])


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_floor_division_and_remainder_match_numpy(dtype):
    a, b = INTS.astype(dtype), DIVISORS.astype(dtype)
    if dtype.startswith("float"):
        a = a + np.array([0.5, -0.25, 0, 0, 0, 0, 0, 0.75], dtype)
    x, y = deft.array(a), deft.array(b)
    for got, want in [(x // y, a // b), (x % y, a % b), (x // 3, a // 3), (x % -3, a % -3),
                      (20 // y, 20 // b), (-20 % y, -20 % b)]:
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


def test_division_by_zero_follows_numpy():
    i = deft.array(np.array([5, -5, 0], np.int32))
    np.testing.assert_array_equal((i // 0).asnumpy(), [0, 0, 0])
    np.testing.assert_array_equal((i % 0).asnumpy(), [0, 0, 0])
    f = np.array([5, -5, 0], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((deft.array(f) // 0).asnumpy(), f // np.float32(0))
        np.testing.assert_array_equal((deft.array(f) % 0).asnumpy(), f % np.float32(0))


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "bool"])
def test_bitwise_operators_match_numpy(dtype, rng):
    a, b = values_of(dtype, rng), values_of(dtype, rng)
    x, y = deft.array(a), deft.array(b)
    pairs = [(x & y, a & b), (x | y, a | b), (x ^ y, a ^ b), (~x, ~a)]
    if dtype != "bool":
        pairs += [(x & 6, a & 6), (3 | x, 3 | a), (x ^ 5, a ^ 5)]
    else:
        pairs += [(x & True, a & True), (False | x, False | a)]
    for got, want in pairs:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.asnumpy(), want)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_shifts_match_numpy(dtype, rng):
    a = values_of(dtype, rng)
    bits = np.iinfo(dtype).bits
    counts = np.array([0, 1, 3, bits - 1, bits, bits + 5, 2, 1, 0, 4, 5, 6], dtype)
    x, n = deft.array(a), deft.array(counts)
    for got, want in [(x << n, a << counts), (x >> n, a >> counts), (x << 2, a << 2),
                      (x >> 1, a >> 1), (1 << n, np.left_shift(np.array(1, dtype), counts)),
                      (64 >> n, np.right_shift(np.array(64, dtype), counts))]:
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_bitwise_operators_refuse_floats_naming_the_dtypes():
    f = deft.array(np.array([1.0, 2.0], np.float32))
    i = deft.array(np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="'bitwise_and' not supported.*float32 and int32"):
        f & i
    with pytest.raises(TypeError, match="'left_shift' not supported.*int32 and float32"):
        i << 1.5
    with pytest.raises(TypeError, match="'invert' not supported.*float32"):
        ~f


def test_mxnet_operators_keep_mxnet_semantics():
    x = deft.array(np.array([1.0, 3.0], np.float32))
    y = deft.array(np.array([2.0, 2.0], np.float32))
    g = nd.broadcast_greater(x, y)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g.asnumpy(), [0, 1])
    i = deft.array(np.array([5], np.int32))
    assert nd.broadcast_div(i, i).dtype == np.int32  # integer division, as MXNet
    np.testing.assert_array_equal(nd.broadcast_mod(x, deft.zeros((2,))).asnumpy(), [0, 0])


# ---- bool ----

def test_comparisons_give_bool_arrays_like_numpy(rng):
    a = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    b = rng.integers(-5, 5, (4,)).astype(np.int64)
    x, y = deft.array(a), deft.array(b)
    for got, want in [(x > 2, a > 2), (x >= y, a >= b), (x == y, a == b), (x != 0, a != 0),
                      (x < 2.5, a < 2.5), (2 <= x, 2 <= a), (x <= b, a <= b)]:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got.asnumpy(), want)
    big = deft.array(np.array([2**53 + 1], np.int64))
    assert not (big == 2**53).item()  # compared exactly, not as doubles


def test_bool_masks_combine_and_index():
    a = np.array([5.0, 1.0, 7.0, 3.0], np.float32)
    x = deft.array(a)
    mask = (x > 2) & ~(x > 6)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(x[mask].asnumpy(), a[(a > 2) & ~(a > 6)])
    np.testing.assert_array_equal(x[(x < 2) | (x > 6)].asnumpy(), [1, 7])
    np.testing.assert_array_equal(x[(x > 2) ^ (x > 4)].asnumpy(), [3])
    x[x > 4] = 0
    np.testing.assert_array_equal(x.asnumpy(), [0, 1, 0, 3])


def test_bool_reductions_where_and_conversions():
    a = np.array([[True, False, True], [False, False, True]])
    m = deft.array(a)
    assert m.dtype == np.bool_ and "bool" in repr(m)
    assert m.sum().dtype == np.int64 and m.sum().item() == 3
    np.testing.assert_array_equal(m.sum(axis=0).asnumpy(), a.sum(axis=0))
    np.testing.assert_allclose(m.mean(axis=1).asnumpy(), a.mean(axis=1), rtol=1e-6)
    for got, want in [(m.any(axis=1), a.any(axis=1)), (m.all(axis=0), a.all(axis=0)),
                      (m.max(axis=1), a.max(axis=1)), (m.min(axis=1), a.min(axis=1))]:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got.asnumpy(), want)
    assert deft.array(np.array([1, 0], np.int32)).any().dtype == np.bool_
    picked = nd.where(m, deft.ones((2, 3)), deft.zeros((2, 3)))
    np.testing.assert_array_equal(picked.asnumpy(), a.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(m), a)
    np.testing.assert_array_equal(m.astype("float32").asnumpy(), a.astype(np.float32))
    np.testing.assert_array_equal(deft.array(np.array([0.0, 2.5])).astype(bool).asnumpy(),
                                  [False, True])


def test_bool_reductions_by_operator_name_have_numpys_dtypes(rng):
    a = rng.integers(0, 2, (3, 40000)).astype(bool)
    m = deft.array(a)
    for name, axis, want in [("sum", 1, a.sum(axis=1)), ("sum", None, a.sum()),
                             ("nansum", 0, np.nansum(a, axis=0)), ("prod", 0, a.prod(axis=0)),
                             ("nanprod", 1, np.nanprod(a, axis=1))]:
        got = invoke(name, (m,), {"axis": axis})
        assert got.dtype == np.int64 == want.dtype, name
        np.testing.assert_array_equal(got.asnumpy().reshape(want.shape), want)
    mean = invoke("mean", (m,), {"axis": 0})
    assert mean.dtype == np.float32  # deft's float, as deft.np.mean of integers
    np.testing.assert_allclose(mean.asnumpy(), a.mean(axis=0), rtol=1e-6)
    total = dnp.sum(m)
    assert total.dtype == np.int64 and total.item() == np.sum(a)
    with pytest.raises(deft.DeftError, match="dtype bool, expected float32 or float64"):
        invoke("norm", (m,), {})


# ---- float16 and bfloat16 ----

def test_float16_arithmetic_matches_numpy(rng):
    a = rng.uniform(-3, 3, (4, 5)).astype(np.float16)
    b = rng.uniform(0.5, 3, (5,)).astype(np.float16)
    x, y = deft.array(a), deft.array(b)
    for got, want in [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                      (x * 0.1, a * np.float16(0.1)), (-x, -a), (abs(x), abs(a))]:
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got.asnumpy(), want)
    for fn in ["exp", "sqrt", "tanh", "sigmoid", "log1p"]:
        got = getattr(nd, fn)(abs(x)).asnumpy()
        want = getattr(nd, fn)(abs(x).astype("float32")).asnumpy().astype(np.float16)
        np.testing.assert_array_equal(got, want)  # float32 compute, one rounding
    np.testing.assert_allclose(x.sum().asnumpy(), a.astype(np.float32).sum(), rtol=1e-3)
    np.testing.assert_allclose(x.mean(axis=0).asnumpy(), a.astype(np.float32).mean(axis=0),
                               rtol=1e-3)
    np.testing.assert_array_equal(x.max(axis=1).asnumpy(), a.max(axis=1))
    np.testing.assert_array_equal(x.min().asnumpy(), a.min())


def test_bfloat16_arithmetic_rounds_float32_results():
    a = np.array([1.0, 2.5, -3.0, 0.1], np.float32)
    x = deft.array(a).astype("bfloat16")
    y = (x + x * 2).astype("float32").asnumpy()
    rounded = deft.array(a).astype("bfloat16").astype("float32").asnumpy()
    want = deft.array(rounded * 3).astype("bfloat16").astype("float32").asnumpy()
    np.testing.assert_array_equal(y, want)
    assert (x > 0).dtype == np.bool_
    np.testing.assert_array_equal((x > 0).asnumpy(), a > 0)
    torch = pytest.importorskip("torch")
    t = torch.tensor(a).bfloat16()
    np.testing.assert_array_equal(y, (t + t * 2).float().numpy())
    np.testing.assert_array_equal((x / 3).astype("float32").asnumpy(), (t / 3).float().numpy())


# ---- on a GPU (bool comparisons go through MXNet's 0/1 kernels and a cast there) ----

@pytest.mark.skipif(deft.num_gpus() == 0, reason="no GPU on this machine")
def test_operators_on_a_gpu_match_the_cpu():
    a = np.array([[-3, 5, 7], [0, -8, 2]], np.int32)
    x = deft.array(a, device=deft.gpu(0))
    f = deft.array(a.astype(np.float32) / 3, device=deft.gpu(0))
    for got, want in [(x > 2, a > 2), (x == x, a == a), (f < 0.5, a / 3 < 0.5),
                      (x // 3, a // 3), (x % -3, a % -3), (x + 0.5, (a + 0.5).astype(np.float32)),
                      (x / 2, (a / 2).astype(np.float32)), ((x > 0).any(axis=1), (a > 0).any(1))]:
        assert got.device == deft.gpu(0) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.asnumpy(), want)
    with pytest.raises(NotImplementedError, match="no GPU kernel"):
        x & x
