/*
 * Special functions of the elementwise operators that the C library lacks
 * or gets wrong for kernels: digamma (the gradients of gamma and gammaln),
 * a thread-safe lgamma, and MXNet's modulo. Shared by the CPU and the GPU
 * kernels like scalar_math.h, which includes it.
 */
#ifndef DEFT_CORE_SPECIAL_MATH_H
#define DEFT_CORE_SPECIAL_MATH_H

#ifdef __CUDACC__
#include <cfloat>
#else
#include <float.h>
#endif

#include "core/math/device_fn.h"

/*
 * MXNet's mod (mshadow_op::mod), computed in double for every dtype: the
 * remainder takes the divisor's sign, as Python's %, and x mod 0 is 0. A
 * remainder whose sign differs from the divisor's moves up by one divisor;
 * the branches keep MXNet's signed zeros.
 */
DEFT_DEVICE_FN double deft_mod_double(double a, double b) {
    if (b == 0) return 0;
    if ((a < 0) == (b < 0)) return a < 0 ? -fmod(-a, -b) : fmod(a, b);
    double r = a < 0 ? -fmod(-a, b) : fmod(a, -b);
    return r + (r != 0 ? b : 0);
}

/*
 * The digamma function psi(x) = d/dx ln|Gamma(x)|. Arguments at or below 0
 * are reflected (psi(x) = psi(1 - x) - pi / tan(pi x), with the tangent taken
 * of the distance to the nearest integer, where it is accurate); positive
 * integers up to 10 are a harmonic sum; everything else climbs with
 * psi(x) = psi(x + 1) - 1/x to 10 or more, where the asymptotic series
 * ln x - 1/(2x) - sum B_2k / (2k x^2k) converges fast. The poles (0 and the
 * negative integers) give DBL_MAX, as MXNet's cephes psi does.
 */
DEFT_DEVICE_FN double deft_digamma_d(double x) {
    const double pi = 3.14159265358979323846, euler = 0.57721566490153286061;
    double reflected = 0;
    if (x <= 0) {
        double below = floor(x);
        if (below == x) return DBL_MAX;
        double frac = x - below;
        if (frac != 0.5) reflected = pi / tan(pi * (frac > 0.5 ? frac - 1 : frac));
        x = 1 - x;
    }
    double y;
    if (x <= 10 && x == floor(x)) {
        y = -euler;
        for (int k = 1; k < (int)x; k++) y += 1.0 / k;
    } else {
        double steps = 0;
        for (; x < 10; x += 1) steps += 1 / x;
        double z = 1 / (x * x), series = 0;
        if (x < 1e17) /* -B_2k / 2k for k = 7 down to 1, in z = 1/x^2 */
            series =
                z * (1.0 / 12 +
                     z * (-1.0 / 120 +
                          z * (1.0 / 252 + z * (-1.0 / 240 +
                                                z * (1.0 / 132 + z * (-691.0 / 32760 + z / 12))))));
        y = log(x) - 0.5 / x - series - steps;
    }
    return y - reflected;
}

/* In float: the double result rounded (a pole gives inf). */
DEFT_DEVICE_FN float deft_digamma_f(float x) {
    double y = deft_digamma_d(x);
    return y == DBL_MAX ? INFINITY : (float)y;
}

#ifdef __CUDACC__
DEFT_DEVICE_FN float deft_digamma(float x) {
    return deft_digamma_f(x);
}
DEFT_DEVICE_FN double deft_digamma(double x) {
    return deft_digamma_d(x);
}
DEFT_DEVICE_FN float deft_lgamma(float x) {
    return lgammaf(x);
}
DEFT_DEVICE_FN double deft_lgamma(double x) {
    return lgamma(x);
}
#else
/* The C library's lgamma writes the global signgam, a data race between the
 * kernels' threads: the _r forms return the sign instead (declared here, as
 * <math.h> hides them from files that ask for strict POSIX). */
float lgammaf_r(float x, int *sign);
double lgamma_r(double x, int *sign);
DEFT_DEVICE_FN float deft_lgammaf(float x) {
    int sign;
    return lgammaf_r(x, &sign);
}
DEFT_DEVICE_FN double deft_lgammad(double x) {
    int sign;
    return lgamma_r(x, &sign);
}
#define deft_digamma(x) _Generic((x), float : deft_digamma_f, default : deft_digamma_d)(x)
#define deft_lgamma(x)  _Generic((x), float : deft_lgammaf, default : deft_lgammad)(x)
#endif

#endif
