/*
 * Convolution on a GPU (conv.h): per image, an im2col kernel and one cuBLAS
 * GEMM batched over the groups (group g's rows of W, of the im2col matrix
 * and of the column side are each contiguous, a fixed stride apart).
 * col2im gathers: each image element sums the columns that took it, so no
 * two threads write one place.
 */
#include "core/gpu/gpu.h"
#include "core/gpu/kernels.h"
#include "core/gpu/launch.cuh"
#include "core/op/conv.h"

#include <cuda_runtime_api.h>

namespace {

/* cols (chan x kernel rows, col spatial) of one image. */
template <typename T> __global__ void im2col_kernel(deft_conv_geom_t g, const T *img, T *cols) {
    const int64_t space = g.col[0] * g.col[1] * g.col[2];
    const int64_t ksize = g.k[0] * g.k[1] * g.k[2];
    GRID_STRIDE(i, g.chan * ksize * space) {
        int64_t q = i % space, row = i / space;
        int64_t c = row / ksize, kk = row % ksize;
        int64_t kw = kk % g.k[2], kh = kk / g.k[2] % g.k[1], kd = kk / g.k[2] / g.k[1];
        int64_t ow = q % g.col[2], oh = q / g.col[2] % g.col[1], od = q / g.col[2] / g.col[1];
        int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
        int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
        int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
        bool inside =
            id >= 0 && id < g.img[0] && ih >= 0 && ih < g.img[1] && iw >= 0 && iw < g.img[2];
        cols[i] = inside ? img[((c * g.img[0] + id) * g.img[1] + ih) * g.img[2] + iw] : T(0);
    }
}

/* Along one dimension: does image position x take kernel tap k, and from which output? */
__device__ bool tap_of(int64_t x, int64_t k, int64_t s, int64_t p, int64_t d, int64_t n,
                       int64_t *o) {
    int64_t t = x + p - k * d;
    if (t < 0 || t % s) return false;
    *o = t / s;
    return *o < n;
}

/* img (one image) = bias + the columns put back where im2col took them. */
template <typename T>
__global__ void col2im_kernel(deft_conv_geom_t g, const T *cols, const T *bias, T *img) {
    const int64_t plane = g.img[0] * g.img[1] * g.img[2];
    const int64_t space = g.col[0] * g.col[1] * g.col[2];
    const int64_t ksize = g.k[0] * g.k[1] * g.k[2];
    GRID_STRIDE(i, g.chan * plane) {
        int64_t c = i / plane, x = i % plane;
        int64_t iw = x % g.img[2], ih = x / g.img[2] % g.img[1], id = x / g.img[2] / g.img[1];
        double sum = bias ? (double)bias[c] : 0.0;
        for (int64_t kd = 0; kd < g.k[0]; kd++) {
            int64_t od;
            if (!tap_of(id, kd, g.s[0], g.p[0], g.d[0], g.col[0], &od)) continue;
            for (int64_t kh = 0; kh < g.k[1]; kh++) {
                int64_t oh;
                if (!tap_of(ih, kh, g.s[1], g.p[1], g.d[1], g.col[1], &oh)) continue;
                for (int64_t kw = 0; kw < g.k[2]; kw++) {
                    int64_t ow;
                    if (!tap_of(iw, kw, g.s[2], g.p[2], g.d[2], g.col[2], &ow)) continue;
                    int64_t row = c * ksize + (kd * g.k[1] + kh) * g.k[2] + kw;
                    sum += (double)cols[row * space + (od * g.col[1] + oh) * g.col[2] + ow];
                }
            }
        }
        img[i] = (T)sum;
    }
}

/* y (batch, channels, space) += bias over the channels. */
template <typename T>
__global__ void bias_add_kernel(T *y, const T *bias, int64_t channels, int64_t space, int64_t n) {
    GRID_STRIDE(i, n) y[i] += bias[i / space % channels];
}

/* A block per channel (in turn, past the grid): db[c] = the sum of y[:, c, :], in double. */
template <typename T>
__global__ void bias_grad_kernel(const T *y, T *db, int64_t batch, int64_t channels,
                                 int64_t space) {
    __shared__ double sums[kThreads];
    for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
        double sum = 0;
        for (int64_t i = threadIdx.x; i < batch * space; i += blockDim.x)
            sum += (double)y[(i / space * channels + c) * space + i % space];
        sums[threadIdx.x] = sum;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0) db[c] = (T)sums[0];
        __syncthreads(); /* sums is reused by the next channel */
    }
}

size_t elem_size(deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT32 ? 4 : 8;
}

const char *offset(const void *base, int64_t elems, deft_dtype_t dtype) {
    return static_cast<const char *>(base) + (size_t)elems * elem_size(dtype);
}

/* The group-batched product; an empty sum (k = 0) zeroes C, which cuBLAS would refuse. */
int group_gemm(int dev, cudaStream_t stream, deft_gpu_gemm_t job) {
    if (job.k > 0) return deft_gpu_gemm(dev, &job);
    if (job.beta != 0) return 0;
    size_t bytes = (size_t)(job.batch * job.m * job.n) * elem_size(job.dtype);
    return deft_gpu_check(cudaMemsetAsync(job.c, 0, bytes, stream), "zeroing a product");
}

int enter(int dev, cudaStream_t *stream) {
    deft_gpu_stream_t s;
    if (deft_gpu_enter(dev, &s)) return -1;
    *stream = s;
    return 0;
}

template <typename T>
void launch_im2col(cudaStream_t stream, const deft_conv_geom_t *g, const void *img, void *cols) {
    int64_t n = g->chan * deft_conv_kernel_size(g) * deft_conv_col_size(g);
    im2col_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(*g, static_cast<const T *>(img),
                                                             static_cast<T *>(cols));
}

void im2col(cudaStream_t stream, deft_dtype_t dtype, const deft_conv_geom_t *g, const void *img,
            void *cols) {
    if (dtype == DEFT_DT_FLOAT32)
        launch_im2col<float>(stream, g, img, cols);
    else
        launch_im2col<double>(stream, g, img, cols);
}

} // namespace

extern "C" int deft_conv_lower_gpu(int dev, const deft_conv_geom_t *g, deft_dtype_t dtype,
                                   const void *image, const void *w, const void *bias,
                                   void *colside, void *cols) {
    cudaStream_t stream;
    if (enter(dev, &stream)) return -1;
    const int64_t rows = deft_conv_col_rows(g), space = deft_conv_col_size(g);
    const int64_t fg = g->filt / g->groups, plane = deft_conv_img_size(g);
    for (int64_t n = 0; n < g->batch; n++) {
        im2col(stream, dtype, g, offset(image, n * g->chan * plane, dtype), cols);
        deft_gpu_gemm_t job = {dtype,        false,
                               false,        fg,
                               space,        rows,
                               g->groups,    w,
                               cols,         (void *)offset(colside, n * g->filt * space, dtype),
                               0.0,          fg * rows,
                               rows * space, fg * space};
        if (group_gemm(dev, stream, job)) return -1;
    }
    int64_t total = g->batch * g->filt * space;
    if (bias && total > 0) {
        if (dtype == DEFT_DT_FLOAT32)
            bias_add_kernel<float><<<blocks_for(total), kThreads, 0, stream>>>(
                static_cast<float *>(colside), static_cast<const float *>(bias), g->filt, space,
                total);
        else
            bias_add_kernel<double><<<blocks_for(total), kThreads, 0, stream>>>(
                static_cast<double *>(colside), static_cast<const double *>(bias), g->filt, space,
                total);
    }
    return deft_gpu_check(cudaGetLastError(), "launching a convolution");
}

extern "C" int deft_conv_raise_gpu(int dev, const deft_conv_geom_t *g, deft_dtype_t dtype,
                                   const void *colside, const void *w, const void *bias,
                                   void *image, void *cols) {
    cudaStream_t stream;
    if (enter(dev, &stream)) return -1;
    const int64_t rows = deft_conv_col_rows(g), space = deft_conv_col_size(g);
    const int64_t fg = g->filt / g->groups, plane = deft_conv_img_size(g);
    for (int64_t n = 0; n < g->batch; n++) {
        deft_gpu_gemm_t job = {dtype,      true,        false,
                               rows,       space,       fg,
                               g->groups,  w,           offset(colside, n * g->filt * space, dtype),
                               cols,       0.0,         fg * rows,
                               fg * space, rows * space};
        if (group_gemm(dev, stream, job)) return -1;
        void *img = (void *)offset(image, n * g->chan * plane, dtype);
        int64_t count = g->chan * plane;
        if (dtype == DEFT_DT_FLOAT32)
            col2im_kernel<float><<<blocks_for(count), kThreads, 0, stream>>>(
                *g, static_cast<const float *>(cols), static_cast<const float *>(bias),
                static_cast<float *>(img));
        else
            col2im_kernel<double><<<blocks_for(count), kThreads, 0, stream>>>(
                *g, static_cast<const double *>(cols), static_cast<const double *>(bias),
                static_cast<double *>(img));
    }
    return deft_gpu_check(cudaGetLastError(), "launching a transposed convolution");
}

extern "C" int deft_conv_wgrad_gpu(int dev, const deft_conv_geom_t *g, deft_dtype_t dtype,
                                   const void *image, const void *colside, void *dw, void *cols) {
    cudaStream_t stream;
    if (enter(dev, &stream)) return -1;
    const int64_t rows = deft_conv_col_rows(g), space = deft_conv_col_size(g);
    const int64_t fg = g->filt / g->groups, plane = deft_conv_img_size(g);
    /* dW starts at zero and every image adds its product */
    size_t bytes = (size_t)(g->filt * rows) * elem_size(dtype);
    if (deft_gpu_check(cudaMemsetAsync(dw, 0, bytes, stream), "zeroing a weight gradient"))
        return -1;
    for (int64_t n = 0; n < g->batch && space > 0; n++) {
        im2col(stream, dtype, g, offset(image, n * g->chan * plane, dtype), cols);
        deft_gpu_gemm_t job = {
            dtype,        false,    true,      fg,
            rows,         space,    g->groups, offset(colside, n * g->filt * space, dtype),
            cols,         dw,       1.0,       fg * space,
            rows * space, fg * rows};
        if (deft_gpu_gemm(dev, &job)) return -1;
    }
    return deft_gpu_check(cudaGetLastError(), "launching a convolution's weight gradient");
}

extern "C" int deft_conv_bias_grad_gpu(int dev, deft_dtype_t dtype, int64_t batch, int64_t channels,
                                       int64_t space, const void *y, void *db) {
    if (channels == 0) return 0;
    cudaStream_t stream;
    if (enter(dev, &stream)) return -1;
    int blocks = grid_of(channels);
    if (dtype == DEFT_DT_FLOAT32)
        bias_grad_kernel<float><<<blocks, kThreads, 0, stream>>>(
            static_cast<const float *>(y), static_cast<float *>(db), batch, channels, space);
    else
        bias_grad_kernel<double><<<blocks, kThreads, 0, stream>>>(
            static_cast<const double *>(y), static_cast<double *>(db), batch, channels, space);
    return deft_gpu_check(cudaGetLastError(), "launching a bias gradient");
}
