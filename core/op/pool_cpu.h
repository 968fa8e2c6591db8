/*
 * Pooling and its gradient on the CPU (pool_cpu.c): the general loops over
 * core/math/pool_math.h's windows for every dtype, type and rank, and
 * float32 plane kernels for the 1-D and 2-D max, average and sum pooling of
 * CNNs. pool.c checks the parameters and calls these.
 */
#ifndef DEFT_CORE_POOL_CPU_H
#define DEFT_CORE_POOL_CPU_H

#include "core/math/pool_math.h"

/* y (planes, out...) from x (planes, in...), both of dtype, in parallel over planes. */
void deft_pool_cpu_forward(const deft_pool_geom_t *g, deft_dtype_t dtype, const void *x, void *y);

/* _backward_Pooling: j->dx from j->dy, j->x and j->y, in parallel over planes. */
void deft_pool_cpu_backward(const deft_pool_grad_t *j);

/* The kernels pooling may use, for the tests to run each: the general loops alone,
 * also the float32 plane kernels, or also their AVX-512 rows (the default). */
typedef enum { DEFT_POOL_GENERAL, DEFT_POOL_PLANES, DEFT_POOL_AVX512 } deft_pool_kernels_t;
void deft_pool_kernels_set(deft_pool_kernels_t kernels);

/* pool_avx512.c, when the CPU has AVX-512F: rows of 2x2 stride-2 windows that lie
 * inside the input, the n outputs of input rows x0 and x1; rows of 3x3/2 ones. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DEFT_POOL_X86 1
bool deft_pool_avx512(void);
/* The oh_n x ow_n outputs of a plane of rows of `width`: y[oh][o] = max, sum or
 * scaled sum of x[2oh][2o], x[2oh][2o + 1], x[2oh + 1][2o], x[2oh + 1][2o + 1]. */
void deft_pool2x2_plane_avx512(const float *x, float *y, int64_t width, int64_t oh_n, int64_t ow_n,
                               bool max, float scale);
/* Their gradient from y and dy into dx, each input of a window written once
 * (the inputs past the last window are not touched); with relu, times relu's
 * gradient at x (relu's output: _backward_Pooling_relu). */
void deft_unpool2x2_plane_avx512(const float *x, const float *y, const float *dy, float *dx,
                                 int64_t width, int64_t oh_n, int64_t ow_n, bool max, float scale,
                                 bool relu);
/* Fold a row into n outputs of 3-wide, stride-2 windows: acc[o] with row[2o .. 2o + 2]. */
void deft_pool3x2_fold_avx512(float *acc, const float *row, int64_t n, bool max);
/* Max pooling's gradient over n interior outputs of 3-wide stride-2 windows: rows
 * [hlo, hhi) of plane x, output o's window from column col0 + 2o, plane offsets < 2^31. */
void deft_unpool3x2_max_avx512(const float *x, int64_t width, int64_t hlo, int64_t hhi,
                               int64_t col0, const float *y, const float *dy, float *dx, int64_t n);
/* The max or sum of x[0 .. n). */
float deft_pool_reduce_avx512(const float *x, int64_t n, bool max);
#else
#define DEFT_POOL_X86 0
#endif

#endif
