/*
 * Reductions. Most reduce adjacent axes of a contiguous array, which makes
 * the input [a, s, b]: a * b results of s elements each, b apart. Three
 * kinds of kernel serve that form, chosen by its shape:
 *  - lanes: a group of up to 32 lanes of a warp per result, for short spans;
 *  - blocks: a block per result (float rows of whole float4s read as
 *    float4s), or per piece of one when there are too few results to fill
 *    the GPU (a split reduction);
 *  - columns (b >= 16: a warp reads neighbouring elements): a thread per
 *    result when they fill the GPU, else a block per 32 neighbouring
 *    results in groups of rows, or per piece of them, split likewise.
 * A split writes partial results to working memory, and a block per
 * result merges them. Other reductions (non-adjacent axes) take a block
 * per result, indexing through the general offset.
 *
 * The arithmetic is reduce_math.h's, shared with the CPU: floats add in
 * double, and partials carry the index of the element they chose, so the
 * result does not depend on the order they meet. Sum-like reductions of
 * floats keep only the double total. float16 and bfloat16 elements are
 * widened to float32 as they are read (half.cuh), then go the float32 way,
 * as the CPU's span_half: sums in double (exact for float16 spans of up to
 * 2^13 elements, and then equal to the CPU's), max and min in float32, and
 * the result rounded once into the input's dtype by deft_reduce_store.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/half.cuh"
#include "core/gpu/launch.cuh"
#include "core/gpu/gpu_index.h"
#include "core/gpu/kernels.h"
#include "core/math/reduce_math.h"

#include <cuda_runtime_api.h>

#include <type_traits>

#include "core/base/error.h"

namespace {

constexpr int64_t kShortSpan = 32;        /* general form: spans this short, a thread per result */
constexpr int64_t kBusyThreads = 1 << 18; /* threads that keep every multiprocessor busy */
constexpr int64_t kLanesSpan = 512;       /* spans up to this: a group of lanes per result */

/* The input as [a, s, b]: result o = ai * b + bi reads x[ai * s * b + j * b + bi]. */
struct Layout {
    int64_t a, s, b;
};

/* Element j, of value v (widened from T, half.cuh), as a partial. */
template <typename T>
__device__ deft_partial_t element(deft_reduce_kind_t kind, Wide<T> v, int64_t j) {
    if constexpr (is_float_like<T>)
        return deft_reduce_element(kind, (double)v, 0, j);
    else
        return deft_reduce_element(kind, (double)v, (uint64_t)(int64_t)v, j);
}

/* What a thread keeps of the elements it has seen. */
enum Mode {
    kAny,     /* a whole partial (reduce_math.h): integers, products */
    kSum,     /* floats' sum-like kinds: the double total */
    kExtreme, /* floats' max and min: the value */
    kArg      /* floats' argmax and argmin: the value and its index */
};

/* One thread's running result, of elements of storage type T: add() takes
 * them widened (Wide<T>, half.cuh). */
template <typename T, Mode M> struct Acc {
    static constexpr bool is_float = is_float_like<T>;
    deft_partial_t p;

    __device__ static Acc start(deft_reduce_kind_t kind) { return {deft_reduce_identity(kind)}; }
    __device__ static Acc of(const deft_partial_t &p) { return {p}; }
    __device__ void add(deft_reduce_kind_t kind, Wide<T> v, int64_t j) {
        deft_partial_t e = element<T>(kind, v, j);
        deft_reduce_combine(kind, is_float, &p, &e);
    }
    __device__ void merge(deft_reduce_kind_t kind, const Acc &o) {
        deft_reduce_combine(kind, is_float, &p, &o.p);
    }
    /* The running result of the lane `delta` away within a group of `width`. */
    __device__ Acc other(unsigned mask, int delta, int width) const {
        deft_partial_t q;
        q.f = __shfl_xor_sync(mask, p.f, delta, width);
        q.u = __shfl_xor_sync(mask, (unsigned long long)p.u, delta, width);
        q.index = __shfl_xor_sync(mask, (long long)p.index, delta, width);
        q.count = __shfl_xor_sync(mask, (long long)p.count, delta, width);
        return {q};
    }
    __device__ deft_partial_t partial() const { return p; }
};

template <typename T> struct Acc<T, kSum> {
    double f;

    __device__ static Acc start(deft_reduce_kind_t) { return {0}; }
    __device__ static Acc of(const deft_partial_t &p) { return {p.f}; }
    __device__ void add(deft_reduce_kind_t kind, Wide<T> v, int64_t j) {
        f += deft_reduce_element(kind, (double)v, 0, j).f;
    }
    __device__ void merge(deft_reduce_kind_t, const Acc &o) { f += o.f; }
    __device__ Acc other(unsigned mask, int delta, int width) const {
        return {__shfl_xor_sync(mask, f, delta, width)};
    }
    __device__ deft_partial_t partial() const { return {f, 0, -1, 1}; }
};

/* Whether x replaces v as the maximum (big) or minimum: any NaN wins, and
 * among NaNs the first, which is the earlier element within one thread. */
template <typename T> __device__ bool replaces(bool big, T x, T v) {
    return x != x ? v == v : big ? x > v : x < v;
}

template <typename T> struct Acc<T, kExtreme> {
    typedef Wide<T> W;
    W v; /* starts at the identity, -inf or inf */

    __device__ static Acc start(deft_reduce_kind_t kind) {
        return {kind == DEFT_R_MAX ? -(W)INFINITY : (W)INFINITY};
    }
    __device__ static Acc of(const deft_partial_t &p) { return {(W)p.f}; }
    __device__ void add(deft_reduce_kind_t kind, W x, int64_t) {
        if (replaces(kind == DEFT_R_MAX, x, v)) v = x;
    }
    __device__ void merge(deft_reduce_kind_t kind, const Acc &o) { add(kind, o.v, 0); }
    __device__ Acc other(unsigned mask, int delta, int width) const {
        return {__shfl_xor_sync(mask, v, delta, width)};
    }
    __device__ deft_partial_t partial() const { return {(double)v, 0, -1, 1}; }
};

template <typename T> struct Acc<T, kArg> {
    typedef Wide<T> W;
    W v;
    int64_t index; /* -1: no element yet */

    __device__ static Acc start(deft_reduce_kind_t) { return {0, -1}; }
    __device__ static Acc of(const deft_partial_t &p) { return {(W)p.f, p.count ? p.index : -1}; }
    __device__ void add(deft_reduce_kind_t kind, W x, int64_t j) {
        if (index < 0 || replaces(kind == DEFT_R_ARGMAX, x, v)) v = x, index = j;
    }
    /* Across threads the lower index wins ties, as in deft_reduce_takes. */
    __device__ void merge(deft_reduce_kind_t kind, const Acc &o) {
        if (o.index < 0) return;
        deft_partial_t a = partial(), b = o.partial();
        if (index < 0 || deft_reduce_takes(kind, true, &a, &b)) *this = o;
    }
    __device__ Acc other(unsigned mask, int delta, int width) const {
        return {__shfl_xor_sync(mask, v, delta, width),
                (int64_t)__shfl_xor_sync(mask, (long long)index, delta, width)};
    }
    __device__ deft_partial_t partial() const { return {(double)v, 0, index, index >= 0 ? 1 : 0}; }
};

/* Merge the running results of a group of `width` lanes: each ends with the whole. */
template <typename A>
__device__ A merge_lanes(deft_reduce_kind_t kind, A acc, unsigned mask, int width) {
    for (int delta = width / 2; delta > 0; delta /= 2)
        acc.merge(kind, acc.other(mask, delta, width));
    return acc;
}

/* Merge the block's running results: thread 0 ends with the whole. Every
 * thread of the block calls it. */
template <typename A> __device__ A merge_block(deft_reduce_kind_t kind, A acc) {
    __shared__ deft_partial_t warps[kWarp];
    int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    acc = merge_lanes(kind, acc, ~0u, kWarp);
    if (lane == 0) warps[warp] = acc.partial();
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + kWarp - 1) / kWarp;
        acc = lane < nwarps ? A::of(warps[lane]) : A::start(kind);
        acc = merge_lanes(kind, acc, ~0u, kWarp);
    }
    __syncthreads(); /* warps[] is free for the next call */
    return acc;
}

/* Where a result or a piece of it goes: y, or working memory when split,
 * piece c of result o at parts[o * by_result + c * by_piece]. */
struct Out {
    deft_partial_t *parts; /* NULL: not split */
    int64_t chunks, chunk; /* pieces per result, elements per piece */
    int64_t by_result, by_piece;

    __device__ deft_partial_t &part(int64_t o, int64_t c) const {
        return parts[o * by_result + c * by_piece];
    }
};

template <typename A>
__device__ void finish(const deft_gpu_reduce_t &r, const Out &out, const A &acc, int64_t o,
                       int64_t c) {
    deft_partial_t p = acc.partial();
    if (out.parts)
        out.part(o, c) = p;
    else
        deft_reduce_store((deft_reduce_kind_t)r.kind, &p, r.span, r.y, o, r.dtype);
}

/* A group of `lanes` lanes (a power of two up to 32) per result. */
template <typename T, Mode M>
__global__ void reduce_lanes(deft_gpu_reduce_t r, Layout l, int lanes) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const T *x = static_cast<const T *>(r.x);
    int lane = threadIdx.x % lanes;
    unsigned mask = group_mask(lanes);
    int64_t groups = (int64_t)gridDim.x * blockDim.x / lanes;
    for (int64_t o = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / lanes; o < r.outer;
         o += groups) {
        const T *base = x + o / l.b * l.s * l.b + o % l.b;
        auto acc = Acc<T, M>::start(kind);
#pragma unroll 4
        for (int64_t j = lane; j < l.s; j += lanes) acc.add(kind, widen(base[j * l.b]), j);
        acc = merge_lanes(kind, acc, mask, lanes);
        if (lane == 0) finish(r, Out{}, acc, o, 0);
    }
}

/* A block per result, or per piece t % chunks of result t / chunks. */
template <typename T, Mode M>
__global__ void reduce_blocks(deft_gpu_reduce_t r, Layout l, Out out) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const T *x = static_cast<const T *>(r.x);
    for (int64_t t = blockIdx.x; t < r.outer * out.chunks; t += gridDim.x) {
        int64_t o = t / out.chunks, begin = t % out.chunks * out.chunk;
        int64_t end = begin + out.chunk < l.s ? begin + out.chunk : l.s;
        const T *base = x + o / l.b * l.s * l.b + o % l.b;
        auto acc = Acc<T, M>::start(kind);
#pragma unroll 4
        for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x)
            acc.add(kind, widen(base[j * l.b]), j);
        acc = merge_block(kind, acc);
        if (threadIdx.x == 0) finish(r, out, acc, o, t % out.chunks);
    }
}

/* A block per result of float rows of whole float4s (b == 1, s % 4 == 0,
 * 16-byte aligned, no split): each thread reads float4s and keeps two
 * running results, merged at the end, so the loads and the compares of
 * two float4s overlap. Each running result sees its elements in order, and
 * merging keeps the earlier index on ties, as the other kernels do. */
template <Mode M> __global__ void reduce_rows4(deft_gpu_reduce_t r, Layout l) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const int64_t quads = l.s / 4;
    for (int64_t o = blockIdx.x; o < r.outer; o += gridDim.x) {
        const float4 *row = static_cast<const float4 *>(r.x) + o * quads;
        auto a = Acc<float, M>::start(kind), b = a;
        for (int64_t q = threadIdx.x; q < quads; q += 2 * blockDim.x) {
            int64_t q2 = q + blockDim.x;
            float4 v = row[q], w = q2 < quads ? row[q2] : make_float4(0, 0, 0, 0);
            a.add(kind, v.x, 4 * q), a.add(kind, v.y, 4 * q + 1);
            a.add(kind, v.z, 4 * q + 2), a.add(kind, v.w, 4 * q + 3);
            if (q2 < quads) {
                b.add(kind, w.x, 4 * q2), b.add(kind, w.y, 4 * q2 + 1);
                b.add(kind, w.z, 4 * q2 + 2), b.add(kind, w.w, 4 * q2 + 3);
            }
        }
        a.merge(kind, b);
        a = merge_block(kind, a);
        if (threadIdx.x == 0) finish(r, Out{}, a, o, 0);
    }
}

/* Columns with results enough to fill the GPU a thread each: a warp reads
 * neighbouring elements, with no split and no shared memory. (The column
 * blocks below took 1.8x as long for 64 x 262144 on an H200.) */
template <typename T, Mode M> __global__ void reduce_column_threads(deft_gpu_reduce_t r, Layout l) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const T *x = static_cast<const T *>(r.x);
    GRID_STRIDE(o, r.outer) {
        const T *base = x + o / l.b * l.s * l.b + o % l.b;
        auto acc = Acc<T, M>::start(kind);
#pragma unroll 4
        for (int64_t j = 0; j < l.s; j++) acc.add(kind, widen(base[j * l.b]), j);
        finish(r, Out{}, acc, o, 0);
    }
}

/* Fewer columns (b >= 16): a block takes kColumns neighbouring results (a warp
 * reads them side by side) in kGroups groups of rows of one piece; each
 * thread runs over its group's rows, the groups meet in shared memory,
 * and one partial per result and piece leaves the block. Piece t /
 * col_blocks of column block t % col_blocks. (A thread per result and
 * piece wrote 64 partials a result for 4096 x 4096, and their merge, a
 * thread per result, ran at a warp per multiprocessor.) */
constexpr int kColumns = 32, kGroups = kThreads / kColumns;

template <typename T, Mode M>
__global__ void reduce_columns(deft_gpu_reduce_t r, Layout l, Out out, int64_t col_blocks) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const T *x = static_cast<const T *>(r.x);
    __shared__ deft_partial_t groups[kThreads];
    const int column = threadIdx.x % kColumns, group = threadIdx.x / kColumns;
    for (int64_t t = blockIdx.x; t < col_blocks * out.chunks; t += gridDim.x) {
        int64_t o = t % col_blocks * kColumns + column, piece = t / col_blocks;
        int64_t begin = piece * out.chunk;
        int64_t end = begin + out.chunk < l.s ? begin + out.chunk : l.s;
        auto acc = Acc<T, M>::start(kind);
        if (o < r.outer) {
            const T *base = x + o / l.b * l.s * l.b + o % l.b;
#pragma unroll 4
            for (int64_t j = begin + group; j < end; j += kGroups)
                acc.add(kind, widen(base[j * l.b]), j);
        }
        groups[threadIdx.x] = acc.partial();
        __syncthreads();
        if (group == 0 && o < r.outer) {
            for (int g = 1; g < kGroups; g++)
                acc.merge(kind, Acc<T, M>::of(groups[g * kColumns + column]));
            finish(r, out, acc, o, piece);
        }
        __syncthreads(); /* groups[] is free for the next column block */
    }
}

/* Merging a split reduction's pieces, as whole partials whatever the
 * pieces kept: a block per result when the pieces are many, a thread per
 * result otherwise. */
template <typename T> __global__ void merge_blocks(deft_gpu_reduce_t r, Out out) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    for (int64_t o = blockIdx.x; o < r.outer; o += gridDim.x) {
        auto acc = Acc<T, kAny>::start(kind);
        for (int64_t c = threadIdx.x; c < out.chunks; c += blockDim.x)
            acc.merge(kind, Acc<T, kAny>::of(out.part(o, c)));
        acc = merge_block(kind, acc);
        if (threadIdx.x == 0) finish(r, Out{}, acc, o, 0);
    }
}

template <typename T> __global__ void merge_threads(deft_gpu_reduce_t r, Out out) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    GRID_STRIDE(o, r.outer) {
        auto acc = Acc<T, kAny>::start(kind);
        for (int64_t c = 0; c < out.chunks; c++) acc.merge(kind, Acc<T, kAny>::of(out.part(o, c)));
        finish(r, Out{}, acc, o, 0);
    }
}

/* ---- the general form: any reduced axes, through the general offset ---- */

template <typename T> __global__ void reduce_any_blocks(deft_gpu_reduce_t r) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const T *x = static_cast<const T *>(r.x);
    for (int64_t o = blockIdx.x; o < r.outer; o += gridDim.x) {
        auto acc = Acc<T, kAny>::start(kind);
        for (int64_t j = threadIdx.x; j < r.span; j += blockDim.x)
            acc.add(kind, widen(x[deft_gpu_reduce_offset(&r, o, j)]), j);
        acc = merge_block(kind, acc);
        if (threadIdx.x == 0) finish(r, Out{}, acc, o, 0);
    }
}

template <typename T> __global__ void reduce_any_threads(deft_gpu_reduce_t r) {
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    const T *x = static_cast<const T *>(r.x);
    GRID_STRIDE(o, r.outer) {
        auto acc = Acc<T, kAny>::start(kind);
        for (int64_t j = 0; j < r.span; j++)
            acc.add(kind, widen(x[deft_gpu_reduce_offset(&r, o, j)]), j);
        finish(r, Out{}, acc, o, 0);
    }
}

/* ---- choosing ---- */

/* Whether the reduced axes (those longer than 1) are adjacent, which makes
 * the contiguous input [a, s, b]. */
bool as_layout(const deft_gpu_reduce_t &r, Layout *l) {
    int64_t b = 1;
    bool any = false;
    for (int d = r.nkept; d < r.ndim; d++) {
        if (r.dims[d] == 1) continue;
        if (any && b != r.strides[d] * r.dims[d]) return false;
        b = r.strides[d], any = true;
    }
    if (r.span == 0) b = 1;
    *l = {r.outer / b, r.span, b};
    return l->a * b == r.outer;
}

/* Split each result's span into pieces of at least `least` elements, as
 * many as make `busy` workers of `results`. */
Out split(int64_t results, int64_t span, int64_t busy, int64_t least) {
    int64_t chunks = results >= busy ? 1 : ceil_div(busy, results);
    int64_t most = ceil_div(span, least);
    chunks = chunks < most ? chunks : most;
    if (chunks < 1) chunks = 1;
    int64_t chunk = ceil_div(span, chunks);
    return Out{nullptr, chunk ? ceil_div(span, chunk) : 1, chunk, 0, 0};
}

template <typename T, Mode M>
int launch_layout(int dev, const deft_gpu_reduce_t &r, const Layout &l, cudaStream_t stream) {
    bool columns = l.b >= 16;
    if (!columns && l.s <= kLanesSpan) {
        int lanes = lanes_for(l.s);
        reduce_lanes<T, M>
            <<<grid_of(ceil_div(r.outer * lanes, kThreads)), kThreads, 0, stream>>>(r, l, lanes);
        return 0;
    }
    if (columns && r.outer >= kBusyThreads) {
        reduce_column_threads<T, M><<<blocks_for(r.outer), kThreads, 0, stream>>>(r, l);
        return 0;
    }
    /* columns: enough column blocks and pieces to fill the GPU, 16 rows a
     * thread at least; blocks: a block per result, or per piece of 4096 */
    int64_t col_blocks = ceil_div(r.outer, kColumns);
    Out out = columns ? split(col_blocks, l.s, kBusyBlocks, 16 * kGroups)
                      : split(r.outer, l.s, kBusyBlocks, 4096);
    if constexpr (std::is_same<T, float>::value && M != kAny) {
        /* contiguous float rows, enough of them to fill the GPU whole */
        if (l.b == 1 && !columns && out.chunks == 1 && l.s % 4 == 0 && (uintptr_t)r.x % 16 == 0) {
            reduce_rows4<M><<<grid_of(r.outer), kThreads, 0, stream>>>(r, l);
            return 0;
        }
    }
    /* pieces in the order their kernel writes them: a result's together
     * from blocks, a piece's together from columns */
    out.by_result = columns ? 1 : out.chunks, out.by_piece = columns ? r.outer : 1;
    if (out.chunks > 1 &&
        deft_gpu_workspace_hold(dev, sizeof(deft_partial_t) * (size_t)(r.outer * out.chunks),
                                (void **)&out.parts))
        return -1;
    if (columns)
        reduce_columns<T, M>
            <<<grid_of(col_blocks * out.chunks), kThreads, 0, stream>>>(r, l, out, col_blocks);
    else
        reduce_blocks<T, M><<<grid_of(r.outer * out.chunks), kThreads, 0, stream>>>(r, l, out);
    if (out.chunks > 1) {
        if (out.chunks > 64)
            merge_blocks<T><<<grid_of(r.outer), kThreads, 0, stream>>>(r, out);
        else
            merge_threads<T><<<blocks_for(r.outer), kThreads, 0, stream>>>(r, out);
        deft_gpu_workspace_release(dev);
    }
    return 0;
}

bool sum_like(deft_reduce_kind_t kind) {
    return kind == DEFT_R_SUM || kind == DEFT_R_MEAN || kind == DEFT_R_NORM ||
           kind == DEFT_R_NORM1 || kind == DEFT_R_NANSUM;
}

template <typename T> int launch(int dev, const deft_gpu_reduce_t &r, cudaStream_t stream) {
    Layout l;
    if (!as_layout(r, &l)) {
        if (r.span <= kShortSpan)
            reduce_any_threads<T><<<blocks_for(r.outer), kThreads, 0, stream>>>(r);
        else
            reduce_any_blocks<T><<<grid_of(r.outer), kThreads, 0, stream>>>(r);
        return 0;
    }
    const deft_reduce_kind_t kind = (deft_reduce_kind_t)r.kind;
    if constexpr (is_float_like<T>) {
        if (sum_like(kind)) return launch_layout<T, kSum>(dev, r, l, stream);
        /* an empty span's max is the CPU's identity, not -inf */
        if ((kind == DEFT_R_MAX || kind == DEFT_R_MIN) && r.span > 0)
            return launch_layout<T, kExtreme>(dev, r, l, stream);
        if (kind == DEFT_R_ARGMAX || kind == DEFT_R_ARGMIN)
            return launch_layout<T, kArg>(dev, r, l, stream);
    }
    return launch_layout<T, kAny>(dev, r, l, stream);
}

} // namespace

extern "C" int deft_gpu_reduce(int dev, const deft_gpu_reduce_t *r) {
    if (r->outer == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    int status;
    switch (r->dtype) {
    case DEFT_DT_FLOAT32:
        status = launch<float>(dev, *r, stream);
        break;
    case DEFT_DT_FLOAT64:
        status = launch<double>(dev, *r, stream);
        break;
    case DEFT_DT_FLOAT16:
        status = launch<__half>(dev, *r, stream);
        break;
    case DEFT_DT_BFLOAT16:
        status = launch<__nv_bfloat16>(dev, *r, stream);
        break;
    case DEFT_DT_INT32:
        status = launch<int32_t>(dev, *r, stream);
        break;
    case DEFT_DT_INT64:
        status = launch<int64_t>(dev, *r, stream);
        break;
    case DEFT_DT_UINT8:
    case DEFT_DT_BOOL: /* max and min: 0 and 1 */
        status = launch<uint8_t>(dev, *r, stream);
        break;
    default:
        return deft_error(DEFT_ERR_TYPE, "no GPU reduction for %s", deft_dtype_name(r->dtype));
    }
    return status ? status : deft_gpu_check(cudaGetLastError(), "launching a reduction kernel");
}
