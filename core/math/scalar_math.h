/*
 * Scalar math of the elementwise operators, written once for every
 * backend: CPU kernels include it as plain C, and the CUDA kernels in
 * core/gpu include it with DEFT_DEVICE_FN set to __host__ __device__, so the
 * CPU tests exercise exactly the formulas the GPU runs.
 *
 * Each expression is instantiated for float (_f) and double (_d). Math
 * functions are type-generic: <tgmath.h> in C, overloads in CUDA C++, so
 * exp(x) is expf for float. T names the element type inside an expression.
 */
#ifndef DEFT_CORE_SCALAR_MATH_H
#define DEFT_CORE_SCALAR_MATH_H

#ifdef __CUDACC__
#include <cmath>
#include <cstring>
#else
#include <string.h>
#include <tgmath.h>
#endif

#include "core/math/device_fn.h"
#include "core/math/dtype_math.h"
#include "core/math/special_math.h"

/*
 * expf and tanhf without calls into libm, so loops over float arrays
 * vectorise (libm's are scalar and 10-70x slower per element here): Cephes'
 * polynomials, within 2 ulp of the exact result. Branches are selects, which
 * the compiler turns into blends when built with -fno-trapping-math.
 */
DEFT_DEVICE_FN float deft_pow2i(int n) { /* 2^n for n in [-126, 127] */
    int bits = (n + 127) * (1 << 23);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

DEFT_DEVICE_FN float deft_expf(float x) {
    /* n = x / ln 2 rounded, read from the low bits of a sum with 1.5 * 2^23
     * (no float-to-int conversion, which is undefined out of range); the
     * selects at the end give 0, inf and NaN where this does not hold. */
    float t = x * 1.44269504088896341f + 12582912.0f;
    unsigned bits;
    memcpy(&bits, &t, sizeof bits);
    int n = (int)(bits - 0x4B400000u);
    n = n < -150 ? -150 : n > 128 ? 128 : n;
    float k = (float)n;
    float r = x - k * 0.693359375f + k * 2.12194440e-4f; /* x - k ln 2 in two parts */
    float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) *
                   r +
               1.6666665459e-1f) *
                  r +
              5.0000001201e-1f;
    int half = n / 2; /* two factors keep 2^n representable down to 2^-150 */
    float y = (p * r * r + r + 1.0f) * deft_pow2i(half) * deft_pow2i(n - half);
    y = x > 88.72283935546875f ? INFINITY : y;
    y = x < -104.0f ? 0.0f : y;
    return x != x ? x : y;
}

DEFT_DEVICE_FN float deft_tanhf(float x) {
    float a = fabsf(x), z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) *
                       z -
                   3.33332819422e-1f) *
                      z * x +
                  x;
    float big = copysignf(1.0f - 2.0f / (deft_expf(2.0f * a) + 1.0f), x);
    return a < 0.625f ? small : big; /* NaN takes the second branch, and stays NaN */
}

/* exp and tanh for either type: the fast float forms, libm's for double. */
#ifdef __CUDACC__
DEFT_DEVICE_FN float deft_exp(float x) {
    return deft_expf(x);
}
DEFT_DEVICE_FN double deft_exp(double x) {
    return exp(x);
}
DEFT_DEVICE_FN float deft_tanh(float x) {
    return deft_tanhf(x);
}
DEFT_DEVICE_FN double deft_tanh(double x) {
    return tanh(x);
}
#else
#define deft_exp(x)  _Generic((x), float : deft_expf, default : exp)(x)
#define deft_tanh(x) _Generic((x), float : deft_tanhf, default : tanh)(x)
#endif

#define DEFT_M_SQRT1_2          0.70710678118654752440
#define DEFT_DEGREES_PER_RADIAN 57.295779513082320877

/* X(name, expression in x). NaN propagates through every one of them. The
 * rounding functions follow MXNet: round halves away from zero, rint takes
 * the lower neighbour on a tie (rint(2.5) is 2, rint(-2.5) is -3), fix
 * rounds towards zero. */
#define DEFT_UNARY_FLOAT_MATH(X)                                                                   \
    X(negative, -x)                                                                                \
    X(abs, fabs(x))                                                                                \
    X(sign, x > 0 ? (T)1 : x < 0 ? (T)-1 : x)                                                      \
    X(exp, deft_exp(x))                                                                            \
    X(log, log(x))                                                                                 \
    X(sqrt, sqrt(x))                                                                               \
    X(square, x *x)                                                                                \
    X(rsqrt, (T)1 / sqrt(x))                                                                       \
    X(sin, sin(x))                                                                                 \
    X(cos, cos(x))                                                                                 \
    X(tanh, deft_tanh(x))                                                                          \
    X(sigmoid, (T)1 / ((T)1 + deft_exp(-x)))                                                       \
    X(relu, x < 0 ? (T)0 : x)                                                                      \
    X(softrelu, x > (T)20 ? x : log1p(deft_exp(x)))                                                \
    X(erf, erf(x))                                                                                 \
    X(gelu, (T)0.5 * x * ((T)1 + erf(x * (T)DEFT_M_SQRT1_2)))                                      \
    X(softsign, x / ((T)1 + fabs(x)))                                                              \
    X(log1p, log1p(x))                                                                             \
    X(expm1, expm1(x))                                                                             \
    X(log2, log2(x))                                                                               \
    X(log10, log10(x))                                                                             \
    X(reciprocal, (T)1 / x)                                                                        \
    X(cbrt, cbrt(x))                                                                               \
    X(rcbrt, (T)1 / cbrt(x))                                                                       \
    X(tan, tan(x))                                                                                 \
    X(arcsin, asin(x))                                                                             \
    X(arccos, acos(x))                                                                             \
    X(arctan, atan(x))                                                                             \
    X(sinh, sinh(x))                                                                               \
    X(cosh, cosh(x))                                                                               \
    X(arcsinh, asinh(x))                                                                           \
    X(arccosh, acosh(x))                                                                           \
    X(arctanh, atanh(x))                                                                           \
    X(degrees, x *(T)DEFT_DEGREES_PER_RADIAN)                                                      \
    X(radians, x *(T)(1 / DEFT_DEGREES_PER_RADIAN))                                                \
    X(round, round(x))                                                                             \
    X(rint, (x - floor(x)) <= (ceil(x) - x) ? floor(x) : ceil(x))                                  \
    X(ceil, ceil(x))                                                                               \
    X(floor, floor(x))                                                                             \
    X(trunc, trunc(x))                                                                             \
    X(fix, fabs(floor(x)) < fabs(ceil(x)) ? floor(x) : ceil(x))                                    \
    X(logical_not, (T)(x == 0))                                                                    \
    X(gamma, tgamma(x))                                                                            \
    X(gammaln, deft_lgamma(x))

/* The elementwise modes of LeakyReLU (activation.c), b the slope: leaky
 * (xelu) and elu take it as their second operand, selu has none. */
#define DEFT_SELU_ALPHA  1.6732632423543772848170429916717
#define DEFT_SELU_LAMBDA 1.0507009873554804934193349852946
#define DEFT_ACTIVATION_UNARY_MATH(X)                                                              \
    X(selu, (T)DEFT_SELU_LAMBDA *(x > 0 ? x : (T)DEFT_SELU_ALPHA * expm1(x)))
#define DEFT_ACTIVATION_BINARY_MATH(X)                                                             \
    X(xelu, a > 0 ? a : a * b)                                                                     \
    X(elu, a > 0 ? a : b * expm1(a))

/* The backward of unary functions whose derivative no other operator
 * computes, X(name, expression in a, the output gradient, and b, the
 * input): _backward_gamma and _backward_gammaln (elemwise_binary.c). */
#define DEFT_GRAD_BINARY_MATH(X)                                                                   \
    X(gamma_grad, a *(tgamma(b) * deft_digamma(b)))                                                \
    X(gammaln_grad, a *deft_digamma(b))

/* X(name, expression in a and b). Comparisons give 1 or 0; maximum and
 * minimum propagate NaN from either side, as NumPy's do; mod is MXNet's
 * (special_math.h). relu_grad is relu's gradient (_backward_relu), a the
 * output gradient and b relu's output or input (relu keeps the sign and NaN):
 * MXNet's, a NaN where b is NaN, written as a product so that it gives the
 * bits of a * (b > 0), the two kernels it replaced: -0 for a negative a and
 * NaN for an infinite one, where b <= 0. */
#define DEFT_BINARY_FLOAT_MATH(X)                                                                  \
    X(add, a + b)                                                                                  \
    X(sub, a - b)                                                                                  \
    X(mul, a *b)                                                                                   \
    X(div, a / b)                                                                                  \
    X(power, pow(a, b))                                                                            \
    X(maximum, (a > b || a != a) ? a : b)                                                          \
    X(minimum, (a < b || a != a) ? a : b)                                                          \
    X(equal, (T)(a == b))                                                                          \
    X(not_equal, (T)(a != b))                                                                      \
    X(greater, (T)(a > b))                                                                         \
    X(greater_equal, (T)(a >= b))                                                                  \
    X(lesser, (T)(a < b))                                                                          \
    X(lesser_equal, (T)(a <= b))                                                                   \
    X(hypot, hypot(a, b))                                                                          \
    X(logical_and, (T)(a != 0 && b != 0))                                                          \
    X(logical_or, (T)(a != 0 || b != 0))                                                           \
    X(logical_xor, (T)((a != 0) != (b != 0)))                                                      \
    X(mod, (T)deft_mod_double(a, b))                                                               \
    X(floor_divide, deft_floor_divide(a, b))                                                       \
    X(remainder, deft_remainder(a, b))                                                             \
    X(relu_grad, a *(b > 0 ? (T)1 : b != b ? b : (T)0))

/* NumPy's floor_divide of floats: floor(a / b) computed as (a - fmod(a, b)) / b,
 * so that a == b * (a // b) + a % b holds as closely as rounding allows (7.0 // 0.7
 * is 10, as in Python: fmod(7.0, 0.7) is 4e-16); x // 0 is a / 0 (inf or NaN). */
#define DEFT_DEFINE_FLOOR_DIVIDE(S, T)                                                             \
    DEFT_DEVICE_FN T deft_floor_divide_##S(T a, T b) {                                             \
        if (b == 0) return a / b;                                                                  \
        T rem = fmod(a, b), div = (a - rem) / b;                                                   \
        if (rem != 0 && ((b < 0) != (rem < 0))) div -= 1;                                          \
        if (div == 0) return copysign((T)0, a / b);                                                \
        T below = floor(div);                                                                      \
        return div - below > (T)0.5 ? below + 1 : below;                                           \
    }
/* NumPy's remainder of floats: the sign of b, x % 0 is NaN (MXNet's mod gives 0). */
#define DEFT_DEFINE_REMAINDER(S, T)                                                                \
    DEFT_DEVICE_FN T deft_remainder_##S(T a, T b) {                                                \
        T rem = fmod(a, b);                                                                        \
        if (b == 0) return rem;                                                                    \
        if (rem == 0) return copysign((T)0, b);                                                    \
        return (b < 0) != (rem < 0) ? rem + b : rem;                                               \
    }
DEFT_DEFINE_FLOOR_DIVIDE(f32, float)
DEFT_DEFINE_FLOOR_DIVIDE(f64, double)
DEFT_DEFINE_REMAINDER(f32, float)
DEFT_DEFINE_REMAINDER(f64, double)
#ifdef __CUDACC__
DEFT_DEVICE_FN float deft_floor_divide(float a, float b) {
    return deft_floor_divide_f32(a, b);
}
DEFT_DEVICE_FN double deft_floor_divide(double a, double b) {
    return deft_floor_divide_f64(a, b);
}
DEFT_DEVICE_FN float deft_remainder(float a, float b) {
    return deft_remainder_f32(a, b);
}
DEFT_DEVICE_FN double deft_remainder(double a, double b) {
    return deft_remainder_f64(a, b);
}
#else
#define deft_floor_divide(a, b)                                                                    \
    _Generic((a), float : deft_floor_divide_f32, default : deft_floor_divide_f64)(a, b)
#define deft_remainder(a, b)                                                                       \
    _Generic((a), float : deft_remainder_f32, default : deft_remainder_f64)(a, b)
#endif

#define DEFT_DEFINE_UNARY_F(name, expr)                                                            \
    DEFT_DEVICE_FN float deft_##name##_f(float x) {                                                \
        typedef float T __attribute__((unused));                                                   \
        return expr;                                                                               \
    }                                                                                              \
    DEFT_DEVICE_FN double deft_##name##_d(double x) {                                              \
        typedef double T __attribute__((unused));                                                  \
        return expr;                                                                               \
    }
DEFT_UNARY_FLOAT_MATH(DEFT_DEFINE_UNARY_F)
DEFT_ACTIVATION_UNARY_MATH(DEFT_DEFINE_UNARY_F)

#define DEFT_DEFINE_BINARY_F(name, expr)                                                           \
    DEFT_DEVICE_FN float deft_##name##_f(float a, float b) {                                       \
        typedef float T __attribute__((unused));                                                   \
        return expr;                                                                               \
    }                                                                                              \
    DEFT_DEVICE_FN double deft_##name##_d(double a, double b) {                                    \
        typedef double T __attribute__((unused));                                                  \
        return expr;                                                                               \
    }
DEFT_BINARY_FLOAT_MATH(DEFT_DEFINE_BINARY_F)
DEFT_ACTIVATION_BINARY_MATH(DEFT_DEFINE_BINARY_F)
DEFT_GRAD_BINARY_MATH(DEFT_DEFINE_BINARY_F)

/* Integer arithmetic wraps (through unsigned), and never traps: x / 0 is 0,
 * and INT_MIN / -1 wraps, where C would have undefined behaviour. */
#define DEFT_DEFINE_INT_MATH(S, T, U)                                                              \
    DEFT_DEVICE_FN T deft_add_##S(T a, T b) {                                                      \
        return (T)((U)a + (U)b);                                                                   \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_sub_##S(T a, T b) {                                                      \
        return (T)((U)a - (U)b);                                                                   \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_mul_##S(T a, T b) {                                                      \
        return (T)((U)a * (U)b);                                                                   \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_upower_##S(T a, U e) {                                                   \
        U result = 1, base = (U)a;                                                                 \
        for (; e; e >>= 1, base = (U)(base * base))                                                \
            if (e & 1) result = (U)(result * base);                                                \
        return (T)result;                                                                          \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_maximum_##S(T a, T b) {                                                  \
        return a > b ? a : b;                                                                      \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_minimum_##S(T a, T b) {                                                  \
        return a < b ? a : b;                                                                      \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_equal_##S(T a, T b) {                                                    \
        return (T)(a == b);                                                                        \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_not_equal_##S(T a, T b) {                                                \
        return (T)(a != b);                                                                        \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_greater_##S(T a, T b) {                                                  \
        return (T)(a > b);                                                                         \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_greater_equal_##S(T a, T b) {                                            \
        return (T)(a >= b);                                                                        \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_lesser_##S(T a, T b) {                                                   \
        return (T)(a < b);                                                                         \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_lesser_equal_##S(T a, T b) {                                             \
        return (T)(a <= b);                                                                        \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_logical_and_##S(T a, T b) {                                              \
        return (T)(a != 0 && b != 0);                                                              \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_logical_or_##S(T a, T b) {                                               \
        return (T)(a != 0 || b != 0);                                                              \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_logical_xor_##S(T a, T b) {                                              \
        return (T)((a != 0) != (b != 0));                                                          \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_logical_not_##S(T x) {                                                   \
        return (T)(x == 0);                                                                        \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_negative_##S(T x) {                                                      \
        return (T)(0 - (U)x);                                                                      \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_square_##S(T x) {                                                        \
        return (T)((U)x * (U)x);                                                                   \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_relu_grad_##S(T a, T b) {                                                \
        return b > 0 ? a : (T)0;                                                                   \
    }

#define DEFT_DEFINE_SIGNED_MATH(S, T, U)                                                           \
    DEFT_DEFINE_INT_MATH(S, T, U)                                                                  \
    DEFT_DEVICE_FN T deft_div_##S(T a, T b) {                                                      \
        return b == 0 ? (T)0 : b == (T)-1 ? (T)(0 - (U)a) : (T)(a / b);                            \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_power_##S(T a, T b) {                                                    \
        if (b >= 0) return deft_upower_##S(a, (U)b);                                               \
        return a == 1 ? (T)1 : a == (T)-1 ? ((b & 1) ? a : (T)1) : (T)0;                           \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_abs_##S(T x) {                                                           \
        return x < 0 ? (T)(0 - (U)x) : x;                                                          \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_sign_##S(T x) {                                                          \
        return (T)((x > 0) - (x < 0));                                                             \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_relu_##S(T x) {                                                          \
        return x < 0 ? (T)0 : x;                                                                   \
    }

DEFT_DEFINE_SIGNED_MATH(i32, int32_t, uint32_t)
DEFT_DEFINE_SIGNED_MATH(i64, int64_t, uint64_t)
DEFT_DEFINE_INT_MATH(u8, uint8_t, uint8_t)
DEFT_DEVICE_FN uint8_t deft_div_u8(uint8_t a, uint8_t b) {
    return b == 0 ? 0 : (uint8_t)(a / b);
}
DEFT_DEVICE_FN uint8_t deft_power_u8(uint8_t a, uint8_t b) {
    return deft_upower_u8(a, b);
}
DEFT_DEVICE_FN uint8_t deft_abs_u8(uint8_t x) {
    return x;
}
DEFT_DEVICE_FN uint8_t deft_sign_u8(uint8_t x) {
    return x != 0;
}
DEFT_DEVICE_FN uint8_t deft_relu_u8(uint8_t x) {
    return x;
}

/* mod of integers: MXNet's, through double (exact below 2^53), saturating. */
DEFT_DEVICE_FN int32_t deft_mod_i32(int32_t a, int32_t b) {
    return deft_to_i32(deft_mod_double(a, b));
}
DEFT_DEVICE_FN int64_t deft_mod_i64(int64_t a, int64_t b) {
    return deft_to_i64(deft_mod_double((double)a, (double)b));
}
DEFT_DEVICE_FN uint8_t deft_mod_u8(uint8_t a, uint8_t b) {
    return deft_to_u8(deft_mod_double(a, b));
}

/* hypot of integers: the float result truncated into the dtype (saturating). */
DEFT_DEVICE_FN int32_t deft_hypot_i32(int32_t a, int32_t b) {
    return deft_to_i32(hypot((double)a, (double)b));
}
DEFT_DEVICE_FN int64_t deft_hypot_i64(int64_t a, int64_t b) {
    return deft_to_i64(hypot((double)a, (double)b));
}
DEFT_DEVICE_FN uint8_t deft_hypot_u8(uint8_t a, uint8_t b) {
    return deft_to_u8(hypot((double)a, (double)b));
}

/* NumPy's integer-only functions (no float forms): bitwise and shifts; a shift by a
 * negative count or by the width or more gives 0 (-1 for a negative x shifted right),
 * as NumPy's npy_lshift / npy_rshift. */
#define DEFT_DEFINE_BITWISE_MATH(S, T, U)                                                          \
    DEFT_DEVICE_FN T deft_bitwise_and_##S(T a, T b) {                                              \
        return (T)(a & b);                                                                         \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_bitwise_or_##S(T a, T b) {                                               \
        return (T)(a | b);                                                                         \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_bitwise_xor_##S(T a, T b) {                                              \
        return (T)(a ^ b);                                                                         \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_bitwise_not_##S(T x) {                                                   \
        return (T)~x;                                                                              \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_left_shift_##S(T a, T b) {                                               \
        return (U)b < (U)(8 * sizeof(T)) ? (T)((U)a << (U)b) : (T)0;                               \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_right_shift_##S(T a, T b) {                                              \
        /* a >> (width - 1) >> 1: -1 for negative a, else 0 (C shifts signed right arithmetically  \
         * on every compiler deft supports) */                                                     \
        return (U)b < (U)(8 * sizeof(T)) ? (T)(a >> (U)b) : (T)(a >> (8 * sizeof(T) - 1) >> 1);    \
    }
DEFT_DEFINE_BITWISE_MATH(i32, int32_t, uint32_t)
DEFT_DEFINE_BITWISE_MATH(i64, int64_t, uint64_t)
DEFT_DEFINE_BITWISE_MATH(u8, uint8_t, uint8_t)

/* floor division of integers, Python's (rounding towards minus infinity); x // 0 is 0
 * and INT_MIN // -1 wraps, as NumPy's. */
#define DEFT_DEFINE_SIGNED_FLOOR_DIVIDE(S, T, U)                                                   \
    DEFT_DEVICE_FN T deft_floor_divide_##S(T a, T b) {                                             \
        if (b == 0) return 0;                                                                      \
        if (b == (T)-1) return (T)(0 - (U)a);                                                      \
        T q = (T)(a / b);                                                                          \
        return (a % b != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;                              \
    }
DEFT_DEFINE_SIGNED_FLOOR_DIVIDE(i32, int32_t, uint32_t)
DEFT_DEFINE_SIGNED_FLOOR_DIVIDE(i64, int64_t, uint64_t)
DEFT_DEVICE_FN uint8_t deft_floor_divide_u8(uint8_t a, uint8_t b) {
    return b == 0 ? 0 : (uint8_t)(a / b);
}

/* The matching remainder, with the sign of b (Python's %); x % 0 is 0, as NumPy's. */
#define DEFT_DEFINE_SIGNED_REMAINDER(S, T)                                                         \
    DEFT_DEVICE_FN T deft_remainder_##S(T a, T b) {                                                \
        if (b == 0 || b == (T)-1) return 0;                                                        \
        T rem = (T)(a % b);                                                                        \
        return (rem != 0 && ((rem < 0) != (b < 0))) ? (T)(rem + b) : rem;                          \
    }
DEFT_DEFINE_SIGNED_REMAINDER(i32, int32_t)
DEFT_DEFINE_SIGNED_REMAINDER(i64, int64_t)
DEFT_DEVICE_FN uint8_t deft_remainder_u8(uint8_t a, uint8_t b) {
    return b == 0 ? 0 : (uint8_t)(a % b);
}

#endif
