/*
 * UpSampling and BilinearResize2D, and their gradients, on a GPU, with the
 * arithmetic of resize_math.h. Where each output element is computed on its
 * own (nearest upsampling and its gradient, the resize forward) a thread
 * takes one; where outputs add into shared places (the bilinear
 * deconvolution, the resize gradient) a thread takes a whole plane, or a
 * whole channel for the kernel's gradient, and adds in the CPU's order.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/resize_math.h"

#include <cuda_runtime_api.h>

namespace {

__global__ void up_nearest_elements(deft_up_nearest_t u, int64_t count) {
    GRID_STRIDE(at, count) {
        int64_t ox = at % u.OW, oy = at / u.OW % u.OH, plane = at / (u.OW * u.OH);
        deft_up_nearest_at(&u, plane, oy, ox);
    }
}

__global__ void up_nearest_grad_elements(deft_up_nearest_grad_t u, int64_t count) {
    GRID_STRIDE(at, count) {
        int64_t x = at % u.W, y = at / u.W % u.H, plane = at / (u.W * u.H);
        deft_up_nearest_grad_at(&u, plane, y, x);
    }
}

__global__ void deconv_planes(deft_deconv_job_t j) {
    GRID_STRIDE(plane, j.batch * j.C) deft_deconv_forward_plane(&j, plane);
}

__global__ void deconv_grad_channels(deft_deconv_job_t j) {
    GRID_STRIDE(c, j.C) deft_deconv_grad_channel(&j, c);
}

__global__ void resize_elements(deft_resize_job_t j, int64_t count) {
    GRID_STRIDE(at, count) {
        int64_t x = at % j.OW, y = at / j.OW % j.OH, plane = at / (j.OW * j.OH);
        deft_resize_at(&j, plane, y, x, deft_lerp_at(j.H, j.OH, j.align, y),
                       deft_lerp_at(j.W, j.OW, j.align, x));
    }
}

__global__ void unresize_planes(deft_resize_job_t j, int64_t planes) {
    GRID_STRIDE(plane, planes) {
        for (int64_t i = plane * j.H * j.W; i < (plane + 1) * j.H * j.W; i++)
            deft_store_double(j.dst, j.dtype, i, 0);
        for (int64_t y = 0; y < j.OH; y++) {
            deft_lerp_t r = deft_lerp_at(j.H, j.OH, j.align, y);
            for (int64_t x = 0; x < j.OW; x++)
                deft_unresize_at(&j, plane, y, x, r, deft_lerp_at(j.W, j.OW, j.align, x));
        }
    }
}

} // namespace

extern "C" int deft_gpu_up_nearest(int dev, const deft_up_nearest_t *u, int64_t planes) {
    int64_t count = planes * u->OH * u->OW;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    up_nearest_elements<<<blocks_for(count), kThreads, 0, stream>>>(*u, count);
    return deft_gpu_check(cudaGetLastError(), "launching UpSampling");
}

extern "C" int deft_gpu_up_nearest_grad(int dev, const deft_up_nearest_grad_t *u, int64_t planes) {
    int64_t count = planes * u->H * u->W;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    up_nearest_grad_elements<<<blocks_for(count), kThreads, 0, stream>>>(*u, count);
    return deft_gpu_check(cudaGetLastError(), "launching _backward_UpSampling");
}

extern "C" int deft_gpu_deconv(int dev, const deft_deconv_job_t *j, bool backward) {
    int64_t count = backward ? j->C : j->batch * j->C;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (backward)
        deconv_grad_channels<<<blocks_for(count), kThreads, 0, stream>>>(*j);
    else
        deconv_planes<<<blocks_for(count), kThreads, 0, stream>>>(*j);
    return deft_gpu_check(cudaGetLastError(),
                          backward ? "launching _backward_UpSampling" : "launching UpSampling");
}

extern "C" int deft_gpu_resize(int dev, const deft_resize_job_t *j, int64_t planes, bool backward) {
    int64_t count = backward ? planes : planes * j->OH * j->OW;
    if (count == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (backward)
        unresize_planes<<<blocks_for(count), kThreads, 0, stream>>>(*j, count);
    else
        resize_elements<<<blocks_for(count), kThreads, 0, stream>>>(*j, count);
    return deft_gpu_check(cudaGetLastError(), backward
                                                  ? "launching _backward_contrib_BilinearResize2D"
                                                  : "launching _contrib_BilinearResize2D");
}
