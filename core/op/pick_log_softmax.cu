/* _backward_pick_log_softmax on a GPU: a thread per element of the data's
 * gradient. The index was checked by the deferred check (index_check.cu);
 * deft_take_resolve keeps every read in bounds whatever its verdict. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/softmax_math.h"

#include <cuda_runtime_api.h>

namespace {

__global__ void pick_log_softmax_grad_kernel(deft_pick_softmax_plan_t s, int64_t total) {
    GRID_STRIDE(e, total) {
        deft_pick_log_softmax_grad_at(&s, e);
    }
}

} // namespace

extern "C" int deft_gpu_pick_log_softmax_grad(int dev, const deft_pick_softmax_plan_t *s) {
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    int64_t total = s->pick.outer * s->pick.size * s->pick.inner;
    pick_log_softmax_grad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(*s, total);
    return deft_gpu_check(cudaGetLastError(), "launching _backward_pick_log_softmax");
}
