/* RNN's time step on a GPU: one thread per (batch row, state unit), the formulas of rnn_math.h. */
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
