/* SequenceMask, SequenceLast (and its gradient) and SequenceReverse on a GPU. */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/sequence_math.h"

#include <cuda_runtime_api.h>

#include "core/base/error.h"

namespace {

__global__ void sequence_kernel(deft_seq_plan_t p, int kind, int64_t count, size_t elem) {
    GRID_STRIDE(at, count) {
        deft_seq_apply(&p, kind, at, elem);
    }
}

} // namespace

extern "C" int deft_gpu_sequence(int dev, const deft_seq_plan_t *p, int kind) {
    int64_t count = deft_seq_count(p, kind);
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    sequence_kernel<<<blocks_for(count), kThreads, 0, stream>>>(*p, kind, count,
                                                                deft_dtype_size(p->dtype));
    return deft_gpu_check(cudaGetLastError(), "launching a sequence operator");
}
