/* _np_cumsum's running sums on a GPU: a thread per column of the axis. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/cumsum_math.h"

#include <cuda_runtime_api.h>

#include "core/base/error.h"

namespace {

__global__ void cumsum_kernel(deft_cumsum_plan_t p, int64_t columns) {
    GRID_STRIDE(i, columns) {
        int64_t c = i % p.trailing;
        deft_cumsum_rows(&p, i / p.trailing, c, c + 1);
    }
}

} // namespace

extern "C" int deft_gpu_cumsum(int dev, const deft_cumsum_plan_t *p) {
    int64_t columns = p->outer * p->trailing;
    if (columns == 0 || p->middle == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    cumsum_kernel<<<blocks_for(columns), kThreads, 0, stream>>>(*p, columns);
    return deft_gpu_check(cudaGetLastError(), "launching _np_cumsum");
}
