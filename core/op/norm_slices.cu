/*
 * Normalisation over slices on a GPU (BatchNorm, LayerNorm, InstanceNorm,
 * GroupNorm): a block per slice sums its elements and their squared
 * deviations with a tree in shared memory, one thread finishes the
 * statistics (norm_math.h, as the CPU does), and the block writes the slice.
 * The backward sums a slice the same way, then writes its gradient; gamma's
 * and beta's gradients, when slices share their elements, take a second
 * kernel with a thread per element of gamma. L2Normalization and its
 * gradient sum each slice the same way (l2_norm_math.h).
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/l2_norm_math.h"
#include "core/math/norm_math.h"

#include <cuda_runtime_api.h>

#include "core/base/error.h"

namespace {

/* The sum of every thread's v, returned to all of them. */
__device__ double block_sum(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads(); /* before the next call writes shared */
    return total;
}

__global__ void forward_slices(deft_norm_forward_t f) {
    __shared__ double shared[kThreads];
    __shared__ double stats[2];
    const deft_norm_plan_t *p = &f.plan;
    const int64_t n = deft_norm_count(p);
    for (int64_t j = blockIdx.x; j < p->slices; j += gridDim.x) {
        int64_t start = deft_norm_start(p, j);
        double mean = 0, var = 0;
        if (!f.use_moving && n > 0) { /* the same for every thread of the block */
            double sum = 0, squares = 0;
            for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
                sum += deft_load_double(f.x, f.dtype, deft_norm_at(p, start, k));
            mean = block_sum(sum, shared) / (double)n;
            for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
                double d = deft_load_double(f.x, f.dtype, deft_norm_at(p, start, k)) - mean;
                squares += d * d;
            }
            var = block_sum(squares, shared) / (double)n;
        }
        if (threadIdx.x == 0) {
            stats[1] = deft_norm_finish(&f, f.dtype, j, &mean, var);
            stats[0] = mean;
        }
        __syncthreads();
        mean = stats[0];
        double invstd = stats[1];
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            deft_norm_apply(&f, f.dtype, deft_norm_at(p, start, k), deft_norm_param_at(p, j, k),
                            mean, invstd);
        __syncthreads(); /* before thread 0 writes the next slice's stats */
    }
}

__global__ void backward_slices(deft_norm_backward_t b) {
    __shared__ double shared[kThreads];
    const deft_norm_plan_t *p = &b.plan;
    const int64_t n = deft_norm_count(p);
    const bool own_params = b.dgamma && deft_norm_slices_own_params(p);
    for (int64_t j = blockIdx.x; j < p->slices; j += gridDim.x) {
        int64_t start = deft_norm_start(p, j);
        double mean, invstd;
        deft_norm_slice_stats(&b, b.dtype, j, &mean, &invstd);
        deft_norm_sums_t s = {0, 0, 0, 0};
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            deft_norm_add_sums(&b, b.dtype, deft_norm_at(p, start, k), deft_norm_param_at(p, j, k),
                               mean, invstd, &s);
        s.dy = block_sum(s.dy, shared);
        s.dy_xhat = block_sum(s.dy_xhat, shared);
        if (own_params) {
            s.g = block_sum(s.g, shared);
            s.g_xhat = block_sum(s.g_xhat, shared);
        }
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            int64_t i = deft_norm_at(p, start, k);
            deft_store_double(b.dx, b.dtype, i,
                              deft_norm_dx(&b, b.dtype, i, deft_norm_param_at(p, j, k), mean,
                                           invstd, (double)n, s.dy, s.dy_xhat));
        }
        if (own_params && threadIdx.x == 0) {
            int64_t e = j % p->gq;
            deft_store_double(b.dgamma, b.dtype, e, b.gamma ? s.g_xhat : 0);
            deft_store_double(b.dbeta, b.dtype, e, s.g);
        }
    }
}

/* The gradients of gamma and beta where slices share gamma's elements: a
 * thread per element e sums over the elements that take it, which are the
 * whole slices j = e (mod gq) or element e of every slice (host-checked). */
__global__ void shared_param_grads(deft_norm_backward_t b) {
    const deft_norm_plan_t *p = &b.plan;
    const int64_t n = deft_norm_count(p);
    const bool by_slice = deft_norm_params_by_slice(p);
    GRID_STRIDE(e, b.nparams) {
        deft_norm_sums_t s = {0, 0, 0, 0};
        double mean, invstd;
        if (by_slice) {
            for (int64_t j = e; j < p->slices; j += p->gq) {
                int64_t start = deft_norm_start(p, j);
                deft_norm_slice_stats(&b, b.dtype, j, &mean, &invstd);
                for (int64_t k = 0; k < n; k++)
                    deft_norm_add_sums(&b, b.dtype, deft_norm_at(p, start, k), e, mean, invstd, &s);
            }
        } else {
            for (int64_t j = 0; j < p->slices; j++) {
                deft_norm_slice_stats(&b, b.dtype, j, &mean, &invstd);
                deft_norm_add_sums(&b, b.dtype, deft_norm_at(p, deft_norm_start(p, j), e), e, mean,
                                   invstd, &s);
            }
        }
        deft_store_double(b.dgamma, b.dtype, e, b.gamma ? s.g_xhat : 0);
        deft_store_double(b.dbeta, b.dtype, e, s.g);
    }
}

/* L2Normalization (c.g NULL) or its gradient. The gradient may write over g:
 * block_sum's barriers keep every read of the sum before the first write. */
__global__ void l2_slices(deft_l2_call_t c) {
    __shared__ double shared[kThreads];
    __shared__ double slice_norm;
    const deft_norm_plan_t *p = &c.plan;
    const int64_t n = deft_norm_count(p);
    for (int64_t j = blockIdx.x; j < p->slices; j += gridDim.x) {
        int64_t start = deft_norm_start(p, j);
        double sum = 0;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            sum += deft_l2_term(&c, c.dtype, deft_norm_at(p, start, k));
        sum = block_sum(sum, shared);
        if (threadIdx.x == 0)
            slice_norm =
                c.g ? deft_load_double(c.norm, c.dtype, j) : deft_l2_norm(&c, c.dtype, j, sum);
        __syncthreads();
        double norm = slice_norm;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            deft_l2_finish(&c, c.dtype, deft_norm_at(p, start, k), norm, sum);
        __syncthreads(); /* before thread 0 writes the next slice's norm */
    }
}

} // namespace

extern "C" int deft_gpu_norm_forward(int dev, const deft_norm_forward_t *f) {
    if (f->plan.slices == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    forward_slices<<<grid_of(f->plan.slices), kThreads, 0, stream>>>(*f);
    return deft_gpu_check(cudaGetLastError(), "launching a normalisation");
}

extern "C" int deft_gpu_norm_backward(int dev, const deft_norm_backward_t *b) {
    const deft_norm_plan_t *p = &b->plan;
    bool shared = b->dgamma && !deft_norm_slices_own_params(p);
    if (shared && !deft_norm_params_by_slice(p) && !deft_norm_params_by_element(p))
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "a normalisation's gamma gradient on the GPU: gamma shared by slices "
                          "neither whole nor element by element");
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    if (p->slices > 0) backward_slices<<<grid_of(p->slices), kThreads, 0, stream>>>(*b);
    if (shared && b->nparams > 0)
        shared_param_grads<<<blocks_for(b->nparams), kThreads, 0, stream>>>(*b);
    return deft_gpu_check(cudaGetLastError(), "launching a normalisation's gradient");
}

extern "C" int deft_gpu_l2_normalization(int dev, const deft_l2_call_t *c) {
    if (c->plan.slices == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    l2_slices<<<grid_of(c->plan.slices), kThreads, 0, stream>>>(*c);
    return deft_gpu_check(cudaGetLastError(), c->g ? "launching _backward_L2Normalization"
                                                   : "launching L2Normalization");
}
