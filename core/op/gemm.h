/* Matrix products for kernels of other families, on the CPU (OpenBLAS, split
 * between deft's threads) or a GPU (cuBLAS): linalg.c's. */
#ifndef DEFT_CORE_GEMM_H
#define DEFT_CORE_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/device.h"
#include "core/base/dtype.h"

/* C (m x n) = op(A) op(B) + beta C, row-major and dense, float32 or float64,
 * on device `dev` (a GPU's work goes on the calling thread's stream). */
int deft_gemm(deft_device_t dev, deft_dtype_t dtype, bool ta, bool tb, int64_t m, int64_t n,
              int64_t k, const void *a, const void *b, double beta, void *c);

#endif
