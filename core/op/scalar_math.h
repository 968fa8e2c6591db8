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
#else
#include <tgmath.h>
#endif

#ifndef DEFT_DEVICE_FN
#define DEFT_DEVICE_FN static inline
#endif

#define DEFT_M_SQRT1_2 0.70710678118654752440

/* X(name, expression in x). NaN propagates through every one of them. */
#define DEFT_UNARY_FLOAT_MATH(X)                                                                   \
    X(negative, -x)                                                                                \
    X(abs, fabs(x))                                                                                \
    X(sign, x > 0 ? (T)1 : x < 0 ? (T)-1 : x)                                                      \
    X(exp, exp(x))                                                                                 \
    X(log, log(x))                                                                                 \
    X(sqrt, sqrt(x))                                                                               \
    X(square, x *x)                                                                                \
    X(rsqrt, (T)1 / sqrt(x))                                                                       \
    X(sin, sin(x))                                                                                 \
    X(cos, cos(x))                                                                                 \
    X(tanh, tanh(x))                                                                               \
    X(sigmoid, (T)1 / ((T)1 + exp(-x)))                                                            \
    X(relu, x < 0 ? (T)0 : x)                                                                      \
    X(softrelu, x > (T)20 ? x : log1p(exp(x)))                                                     \
    X(erf, erf(x))                                                                                 \
    X(gelu, (T)0.5 * x * ((T)1 + erf(x * (T)DEFT_M_SQRT1_2)))

/* X(name, expression in a and b). Comparisons give 1 or 0; maximum and
 * minimum propagate NaN from either side, as NumPy's do. */
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
    X(lesser_equal, (T)(a <= b))

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
    DEFT_DEVICE_FN T deft_negative_##S(T x) {                                                      \
        return (T)(0 - (U)x);                                                                      \
    }                                                                                              \
    DEFT_DEVICE_FN T deft_square_##S(T x) {                                                        \
        return (T)((U)x * (U)x);                                                                   \
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

#endif
