/* _linalg_gemm and _linalg_gemm2 on a GPU: a thread per output element, the dot product of
 * gemm_math.h. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/gemm_math.h"

#include <cuda_runtime_api.h>

namespace {

__global__ void gemm_elements(deft_gemm_plan_t g, int64_t count) {
    GRID_STRIDE(at, count) {
        int64_t j = at % g.n, i = at / g.n % g.m, batch = at / (g.n * g.m);
        deft_gemm_element(&g, deft_gemm_batch_offset(&g, &g.la, batch),
                          deft_gemm_batch_offset(&g, &g.lb, batch),
                          deft_gemm_batch_offset(&g, &g.ly, batch), i, j);
    }
}

} // namespace

extern "C" int deft_gpu_linalg_gemm(int dev, const deft_gemm_plan_t *g, int64_t count) {
    if (count == 0) return 0; /* then m or n is 0 too: nothing divides by them */
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    gemm_elements<<<blocks_for(count), kThreads, 0, stream>>>(*g, count);
    return deft_gpu_check(cudaGetLastError(), "launching a _linalg_gemm");
}
