/* The GPU scan of an index array (index_check.h): the first bad element, flagged. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/flag.cuh"
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/index_check.h"

namespace {

__global__ void check_kernel(deft_index_check_t c, deft_check_verdict_t *bad) {
    GRID_STRIDE(j, c.count) {
        if (!deft_index_ok(&c, j)) flag_first(bad, j);
    }
}

} // namespace

extern "C" int deft_gpu_check_indices(int dev, const deft_index_check_t *c,
                                      const deft_check_report_t *report) {
    if (c->count == 0) return 0;
    return run_flagged(
        dev,
        [&](cudaStream_t stream, deft_check_verdict_t *flag) {
            check_kernel<<<blocks_for(c->count), kThreads, 0, stream>>>(*c, flag);
        },
        c->indices, c->dtype, report);
}
