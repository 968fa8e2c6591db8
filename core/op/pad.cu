/*
 * Pad on a GPU, with the index arithmetic of pad_math.h: the forward a thread
 * per output element; the gradient a thread per plane, which adds the plane's
 * output gradients into their sources in the CPU's order (edge and reflect
 * padding send several outputs to one source, so planes are not shared).
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/pad_math.h"

#include <cuda_runtime_api.h>

namespace {

__global__ void pad_elements(deft_pad_job_t j, int64_t count, size_t elem) {
    GRID_STRIDE(o, count) deft_pad_element(&j, o, elem);
}

__global__ void unpad_planes(deft_pad_job_t j, int64_t planes) {
    GRID_STRIDE(plane, planes) deft_unpad_plane(&j, plane);
}

} // namespace

extern "C" int deft_gpu_pad(int dev, const deft_pad_job_t *j, bool backward) {
    const deft_pad_plan_t *plan = &j->plan;
    int64_t planes = plan->in[0] * plan->in[1], in_plane, out_plane;
    deft_pad_plane_sizes(plan, &in_plane, &out_plane);
    int64_t count = backward ? planes : planes * out_plane;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (backward)
        unpad_planes<<<blocks_for(count), kThreads, 0, stream>>>(*j, count);
    else
        pad_elements<<<blocks_for(count), kThreads, 0, stream>>>(*j, count,
                                                                 deft_dtype_size(j->dtype));
    return deft_gpu_check(cudaGetLastError(),
                          backward ? "launching _backward_Pad" : "launching Pad");
}
