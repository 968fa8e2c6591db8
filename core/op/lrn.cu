/* LRN and its gradient on a GPU: a thread per element, the window sums of lrn_math.h. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/lrn_math.h"

#include <cuda_runtime_api.h>

namespace {

/* Element at = (line, channel). A thread reads only inputs (x; g and tmp_norm
 * for the gradient) and writes its own element, so threads are independent. */
__global__ void lrn_elements(deft_lrn_call_t c, int64_t count) {
    GRID_STRIDE(at, count) {
        int64_t j = at / c.lines.na, ch = at % c.lines.na;
        if (c.g)
            deft_lrn_backward_at(&c, c.dtype, j, ch);
        else
            deft_lrn_forward_at(&c, c.dtype, j, ch);
    }
}

} // namespace

extern "C" int deft_gpu_lrn(int dev, const deft_lrn_call_t *c) {
    int64_t count = c->lines.slices * c->lines.na;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    lrn_elements<<<blocks_for(count), kThreads, 0, stream>>>(*c, count);
    return deft_gpu_check(cudaGetLastError(), c->g ? "launching _backward_LRN" : "launching LRN");
}
