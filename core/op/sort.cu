/*
 * topk, sort and argsort on a GPU: a block per row sorts the row's
 * positions in shared memory with a bitonic network, ordering by the shared
 * comparison (sort_math.h) and breaking ties by position, which is the
 * order the CPU's stable merge sort gives. The row is padded to a power of
 * two with positions past its end, which sort last. Rows are at most
 * DEFT_GPU_SORT_MAX long (the caller refuses longer ones).
 * _backward_topk: a thread per row, writing the gradient in rank order.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/math/sort_math.h"

#include <cuda_runtime_api.h>

namespace {

/* Whether position a of the row at `base` goes before position b. */
__device__ bool goes_before(const deft_sort_call_t &c, int64_t base, int a, int b) {
    if (a >= c.n || b >= c.n) return a < c.n && b >= c.n; /* padding last */
    int order = deft_sort_compare(&c, base + a * c.inner, base + b * c.inner);
    if (order != 0) return c.ascend ? order < 0 : order > 0;
    return a < b;
}

/* `size`: the row length rounded up to a power of two (at most DEFT_GPU_SORT_MAX). */
__global__ void sort_rows(deft_sort_call_t c, int size) {
    __shared__ int order[DEFT_GPU_SORT_MAX];
    for (int64_t row = blockIdx.x; row < c.outer * c.inner; row += gridDim.x) {
        int64_t base = deft_sort_row_base(&c, row);
        for (int t = threadIdx.x; t < size; t += blockDim.x) order[t] = t;
        __syncthreads();
        for (int span = 2; span <= size; span *= 2)       /* bitonic runs of `span` */
            for (int gap = span / 2; gap > 0; gap /= 2) { /* compare-exchange at `gap` */
                for (int t = threadIdx.x; t < size; t += blockDim.x) {
                    int partner = t ^ gap;
                    if (partner <= t) continue;
                    int a = order[t], b = order[partner];
                    bool rising = (t & span) == 0; /* this run ends up ascending */
                    if (rising ? goes_before(c, base, b, a) : goes_before(c, base, a, b))
                        order[t] = b, order[partner] = a;
                }
                __syncthreads();
            }
        for (int64_t r = threadIdx.x; r < c.k; r += blockDim.x)
            deft_sort_emit(&c, row, r, base + order[r] * c.inner);
        __syncthreads(); /* before the next row overwrites `order` */
    }
}

__global__ void unsort_rows(deft_sort_call_t c, const void *g, const void *indices,
                            deft_dtype_t index_dtype, void *dx) {
    GRID_STRIDE(row, c.outer * c.inner) deft_topk_unsort_row(&c, row, g, indices, index_dtype, dx);
}

} // namespace

extern "C" int deft_gpu_sort(int dev, const deft_sort_call_t *c) {
    int64_t rows = c->outer * c->inner;
    if (rows == 0 || c->n == 0) return 0;
    int size = 1;
    while (size < c->n) size *= 2; /* n <= DEFT_GPU_SORT_MAX, checked by the caller */
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    sort_rows<<<grid_of(rows), kThreads, 0, stream>>>(*c, size);
    return deft_gpu_check(cudaGetLastError(), "launching a sort");
}

extern "C" int deft_gpu_topk_backward(int dev, const deft_sort_call_t *c, const void *g,
                                      const void *indices, deft_dtype_t index_dtype, void *dx) {
    int64_t rows = c->outer * c->inner;
    if (rows == 0 || c->k == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    unsort_rows<<<blocks_for(rows), kThreads, 0, stream>>>(*c, g, indices, index_dtype, dx);
    return deft_gpu_check(cudaGetLastError(), "launching _backward_topk");
}
