/* _backward_LeakyReLU (prelu) on a GPU: the formulas of prelu_math.h, a
 * thread per data element for d data, then a thread per gamma element for
 * d gamma, which sums its data elements in the CPU's order. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/prelu_math.h"

#include <cuda_runtime_api.h>

namespace {

__global__ void prelu_dx(deft_prelu_grad_t p) {
    GRID_STRIDE(i, p.n) deft_prelu_dx_at(&p, i);
}

__global__ void prelu_dgamma(deft_prelu_grad_t p) {
    GRID_STRIDE(e, p.ng) deft_prelu_dgamma_at(&p, e);
}

} // namespace

extern "C" int deft_gpu_prelu_backward(int dev, const deft_prelu_grad_t *p) {
    if (p->n == 0 && p->ng == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (p->n > 0) prelu_dx<<<blocks_for(p->n), kThreads, 0, stream>>>(*p);
    if (p->ng > 0) prelu_dgamma<<<blocks_for(p->ng), kThreads, 0, stream>>>(*p);
    return deft_gpu_check(cudaGetLastError(), "launching _backward_LeakyReLU");
}
