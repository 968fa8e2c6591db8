/* RNN on a GPU: a time step forward and backward (one thread per batch row and state unit, the
 * formulas of rnn_math.h, which the CPU's kernels share), and the backward's bias sums and
 * dropout masks. cuBLAS runs the GEMMs (rnn.c, rnn_backward.c). */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/rnn_math.h"

#include <cuda_runtime_api.h>

#include "core/base/dtype.h"
#include "core/base/error.h"

namespace {

template <typename T> __global__ void step_kernel(deft_rnn_step_t s, int64_t count) {
    GRID_STRIDE(at, count) {
        if (sizeof(T) == sizeof(float))
            deft_rnn_step_elem_f(&s, at / s.H, at % s.H);
        else
            deft_rnn_step_elem_d(&s, at / s.H, at % s.H);
    }
}

template <typename T> __global__ void back_step_kernel(deft_rnn_back_step_t s, int64_t count) {
    GRID_STRIDE(at, count) {
        if (sizeof(T) == sizeof(float))
            deft_rnn_back_elem_f(&s, at / s.H, at % s.H);
        else
            deft_rnn_back_elem_d(&s, at / s.H, at % s.H);
    }
}

/* sum[j] = the sum over rows of m (rows x cols): a thread per column, reading along rows
 * (neighbouring threads read neighbouring columns). */
template <typename T>
__global__ void column_sums_kernel(const T *m, int64_t rows, int64_t cols, T *sum) {
    GRID_STRIDE(j, cols) {
        T total = 0;
        for (int64_t r = 0; r < rows; r++) total += m[r * cols + j];
        sum[j] = total;
    }
}

template <typename T> __global__ void multiply_kernel(T *x, const T *m, int64_t n) {
    GRID_STRIDE(i, n) x[i] *= m[i];
}

} // namespace

extern "C" int deft_gpu_rnn_step(int dev, const deft_rnn_step_t *s, deft_dtype_t dtype) {
    int64_t count = s->N * s->H;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (dtype == DEFT_DT_FLOAT32)
        step_kernel<float><<<blocks_for(count), kThreads, 0, stream>>>(*s, count);
    else
        step_kernel<double><<<blocks_for(count), kThreads, 0, stream>>>(*s, count);
    return deft_gpu_check(cudaGetLastError(), "launching an RNN step");
}

extern "C" int deft_gpu_rnn_back_step(int dev, const deft_rnn_back_step_t *s, deft_dtype_t dtype) {
    int64_t count = s->N * s->H;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (dtype == DEFT_DT_FLOAT32)
        back_step_kernel<float><<<blocks_for(count), kThreads, 0, stream>>>(*s, count);
    else
        back_step_kernel<double><<<blocks_for(count), kThreads, 0, stream>>>(*s, count);
    return deft_gpu_check(cudaGetLastError(), "launching an RNN backward step");
}

extern "C" int deft_gpu_rnn_column_sums(int dev, deft_dtype_t dtype, const void *m, int64_t rows,
                                        int64_t cols, void *sum) {
    if (cols == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (dtype == DEFT_DT_FLOAT32)
        column_sums_kernel<float><<<blocks_for(cols), kThreads, 0, stream>>>(
            (const float *)m, rows, cols, (float *)sum);
    else
        column_sums_kernel<double><<<blocks_for(cols), kThreads, 0, stream>>>(
            (const double *)m, rows, cols, (double *)sum);
    return deft_gpu_check(cudaGetLastError(), "launching the RNN bias gradient sums");
}

extern "C" int deft_gpu_rnn_multiply(int dev, deft_dtype_t dtype, void *x, const void *m,
                                     int64_t n) {
    if (n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (dtype == DEFT_DT_FLOAT32)
        multiply_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>((float *)x,
                                                                        (const float *)m, n);
    else
        multiply_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>((double *)x,
                                                                         (const double *)m, n);
    return deft_gpu_check(cudaGetLastError(), "launching the RNN dropout gradient");
}
