/*
 * What every header of math shared between the CPU and GPU kernels
 * (scalar_math.h, dtype_math.h, reduce_math.h, ...) starts from: the math
 * library of the compiler at hand, and DEFT_DEVICE_FN, which is `static
 * inline` in C and `__host__ __device__ static inline` where a .cu file
 * defines it so before including them.
 */
#ifndef DEFT_CORE_DEVICE_FN_H
#define DEFT_CORE_DEVICE_FN_H

#ifdef __CUDACC__
#include <cmath>
#else
#include <math.h>
#include <stdbool.h>
#endif
#include <stdint.h>

#ifndef DEFT_DEVICE_FN
#define DEFT_DEVICE_FN static inline
#endif

#endif
