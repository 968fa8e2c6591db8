/*
 * The widths of pool_vec_t.h's kernels, for pool_cpu.c to choose from by
 * the SIMD level: deft_pool_vec_avx512 (16 lanes) and deft_pool_vec_avx2
 * (8). Each is a table of the same kernels, float32 planes of rows of
 * `width` floats.
 */
#ifndef DEFT_CORE_OP_POOL_VEC_H
#define DEFT_CORE_OP_POOL_VEC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct deft_pool_vec {
    int lanes;
    /* The oh_n x ow_n outputs of 2x2 stride-2 windows inside the input: y[oh][o] = max,
     * sum or scaled sum of x[2oh][2o], x[2oh][2o + 1], x[2oh + 1][2o], x[2oh + 1][2o + 1]. */
    void (*pool2x2_plane)(const float *x, float *y, int64_t width, int64_t oh_n, int64_t ow_n,
                          bool max, float scale);
    /* Their gradient from y and dy into dx, each input of a window written once
     * (the inputs past the last window are not touched); with relu, times relu's
     * gradient at x (relu's output: _backward_Pooling_relu). */
    void (*unpool2x2_plane)(const float *x, const float *y, const float *dy, float *dx,
                            int64_t width, int64_t oh_n, int64_t ow_n, bool max, float scale,
                            bool relu);
    /* Fold a row into n outputs of 3-wide, stride-2 windows: acc[o] with row[2o .. 2o + 2]. */
    void (*pool3x2_fold)(float *acc, const float *row, int64_t n, bool max);
    /* Max pooling's gradient over n interior outputs of 3-wide stride-2 windows:
     * rows [hlo, hhi) of plane x, output o's window from column col0 + 2o. */
    void (*unpool3x2_max)(const float *x, int64_t width, int64_t hlo, int64_t hhi, int64_t col0,
                          const float *y, const float *dy, float *dx, int64_t n);
    /* The max or sum of x[0 .. n). */
    float (*reduce)(const float *x, int64_t n, bool max);
} deft_pool_vec_t;

extern const deft_pool_vec_t deft_pool_vec_avx512;
extern const deft_pool_vec_t deft_pool_vec_avx2;

#endif
