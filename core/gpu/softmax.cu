/*
 * softmax, log_softmax, softmin and the softmax cross-entropy.
 *
 * Lines along the last axis (inner 1) take a team per line: a group of up
 * to 32 lanes of a warp for short lines, a block for long ones. A team
 * finds the line's maximum, then the sum of exp(x - max), then writes.
 * Lines up to 1024 elements stay in the lanes' registers meanwhile (float32
 * lines of whole float4s, up to 4096, read as float4s), and lines up to
 * 48 KB in the block's shared memory; longer ones are read again. Long
 * lines too few to fill the GPU take a block per piece of a line in two
 * launches (each piece's maximum and sum of exponentials, then
 * the outputs, the pieces' sums rescaled to the line's maximum; the
 * pieces' results go through working memory).
 *
 * The arithmetic is the CPU's (softmax.c): float32 lines without a
 * temperature or lengths in float with deft_expf and the sum in double;
 * everything else in double (softmax_math.h), which is also how lines
 * along other axes go, a thread per line. Only the order of the additions
 * differs, and for lines in pieces, the rescaling of the pieces' sums.
 * float16 and bfloat16 lines (in or out) take the double path, as on the
 * CPU: read and written through dtype_math.h's conversions, rounded once.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/flag.cuh"
#include "core/gpu/gpu.h"
#include "core/gpu/launch.cuh"
#include "core/gpu/kernels.h"
#include "core/math/scalar_math.h"
#include "core/math/softmax_math.h"

#include <cuda_runtime_api.h>

#include <type_traits>

#include "core/base/error.h"

namespace {

constexpr int64_t kLeastPiece = 4096;     /* elements of a line piece: 16 per thread */
constexpr size_t kStagedBytes = 48 << 10; /* shared memory a block may take unasked */

/* float32 lines with no temperature and no lengths: the CPU's float path. */
struct Float32Line {
    typedef float C;
    const float *x;
    float *y;
    int64_t n;

    __device__ float value(int64_t i) const { return x[i]; }
    __device__ int64_t length(int64_t) const { return n; }
    __device__ float expo(float v) const { return deft_expf(v); }
    /* What a line's outputs need of its sum, worked out once per line. */
    __device__ float of_sum(double sum, bool log_form) const {
        return log_form ? (float)log(sum) : (float)(1 / sum);
    }
    /* An output from v: its input for log_softmax, else its exponential
     * expo(input - max). */
    __device__ static float out(bool log_form, float v, float max, float of_sum) {
        return log_form ? (v - max) - of_sum : v * of_sum;
    }
    /* Output i, element k of its line. */
    __device__ void put(int64_t i, int64_t, int64_t, bool log_form, float v, float max,
                        float of_sum) const {
        y[i] = out(log_form, v, max, of_sum);
    }
};

/* Any other line: in double, as deft_softmax_plan_line. */
struct AnyLine {
    typedef double C;
    deft_softmax_plan_t s;
    int64_t n;

    __device__ double value(int64_t i) const {
        return deft_load_double(s.x, s.x_dtype, i) * s.scale;
    }
    __device__ int64_t length(int64_t line) const { return deft_softmax_line_length(&s, line); }
    __device__ double expo(double v) const { return exp(v); }
    __device__ double of_sum(double sum, bool log_form) const { return log_form ? log(sum) : sum; }
    __device__ void put(int64_t i, int64_t k, int64_t len, bool log_form, double v, double max,
                        double of_sum) const {
        double out = k >= len ? 0 : log_form ? (v - max) - of_sum : v / of_sum;
        deft_store_double(s.y, s.y_dtype, i, out);
    }
};

/* max for softmax: NaN wins, as in the CPU's scan. */
template <typename C> __device__ C nan_max(C a, C b) {
    return a > b || a != a ? a : b;
}

struct MaxOp {
    template <typename C> __device__ C operator()(C a, C b) const { return nan_max(a, b); }
};

struct SumOp {
    __device__ double operator()(double a, double b) const { return a + b; }
};

/* A team: `size` threads (a power of two up to 32 lanes of a warp, or the
 * whole block), this thread's rank among them, the lanes' mask, and its
 * number and the number of teams in the grid. */
struct Team {
    int size, rank;
    unsigned mask;
    int64_t first, count;
};

__device__ Team team_of(int size) {
    int shift = log2_of(size), rank = threadIdx.x & (size - 1);
    int64_t first = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> shift;
    int64_t count = ((int64_t)gridDim.x * blockDim.x) >> shift;
    return {size, rank, size >= (int)blockDim.x ? ~0u : group_mask(size), first, count};
}

/* Every thread of the team ends with op over the team's values. */
template <typename V, typename Op> __device__ V team_reduce(const Team &t, V v, Op op) {
    int width = t.size < kWarp ? t.size : kWarp;
    for (int delta = width / 2; delta > 0; delta /= 2)
        v = op(v, __shfl_xor_sync(t.mask, v, delta, width));
    if (t.size <= kWarp) return v;
    __shared__ V warps[kWarp];
    __syncthreads(); /* the last call's readers are done with warps[] */
    if (threadIdx.x % kWarp == 0) warps[threadIdx.x / kWarp] = v;
    __syncthreads();
    v = warps[0];
    for (int w = 1; w < (int)blockDim.x / kWarp; w++) v = op(v, warps[w]);
    return v;
}

/* What a launch does with its pieces (piece t % chunks of line t / chunks). */
/* What a launch does with its pieces (piece t % chunks of line t / chunks):
 * whole lines; each piece's maximum and its sum of exp(x - that maximum);
 * or the outputs, from the pieces' results. */
enum Stage { kWhole, kPieces, kWrite };

template <typename C> struct Pieces {
    int64_t chunks, chunk;
    C *maxima; /* per piece; NULL when lines are whole */
    double *sums;
    Stage stage;
};

/* A piece's share of its line's sum: its own sum rescaled from its maximum
 * m to the line's, max. A piece of -inf alone adds exp(-inf - max), 0,
 * unless the line's max is -inf too, where the CPU's exp(-inf + inf) is NaN. */
template <typename C> __device__ double share_of(C m, double sum, C max) {
    if (sum == 0) return 0; /* no element of the line */
    if (m == -(C)INFINITY) return max == -(C)INFINITY ? (double)NAN : 0;
    return sum * exp((double)m - (double)max);
}

template <typename L>
__global__ void softmax_rows(L line, int64_t lines, bool log_form, Pieces<typename L::C> p) {
    typedef typename L::C C;
    Team team = team_of(blockDim.x); /* a block per line, or per piece of one */
    for (int64_t t = team.first; t < lines * p.chunks; t += team.count) {
        int64_t row = t / p.chunks, begin = t % p.chunks * p.chunk, start = row * line.n;
        int64_t len = line.length(row), end = begin + p.chunk;
        int64_t used = end < len ? end : len; /* elements of the piece that take part */
        C max = -INFINITY;
        double sum = 0;
        if (p.stage != kWrite) {
#pragma unroll 4
            for (int64_t k = begin + team.rank; k < used; k += team.size)
                max = nan_max(max, line.value(start + k));
            max = team_reduce(team, max, MaxOp());
#pragma unroll 4
            for (int64_t k = begin + team.rank; k < used; k += team.size)
                sum += line.expo(line.value(start + k) - max);
            sum = team_reduce(team, sum, SumOp());
            if (p.stage == kPieces) {
                if (team.rank == 0) p.maxima[t] = max, p.sums[t] = sum;
                continue;
            }
        } else {
            const C *maxima = p.maxima + row * p.chunks;
            const double *sums = p.sums + row * p.chunks;
            for (int64_t c = team.rank; c < p.chunks; c += team.size) max = nan_max(max, maxima[c]);
            max = team_reduce(team, max, MaxOp());
            for (int64_t c = team.rank; c < p.chunks; c += team.size)
                sum += share_of(maxima[c], sums[c], max);
            sum = team_reduce(team, sum, SumOp());
        }
        int64_t last = end < line.n ? end : line.n;
        C of_sum = line.of_sum(sum, log_form);
#pragma unroll 4
        for (int64_t k = begin + team.rank; k < last; k += team.size)
            line.put(start + k, k, len, log_form,
                     log_form ? line.value(start + k) : line.expo(line.value(start + k) - max), max,
                     of_sum);
    }
}

/* Whole lines that a group of lanes can hold: each thread keeps its `Per`
 * elements, then their exponentials, in registers, so a line is read once
 * and each exponential computed once. (Blocks holding 4096-element lines
 * in registers ran 1.7x slower than streaming them: their 88 registers a
 * thread let half as many blocks overlap their barriers.) */
template <typename L, int Per>
__global__ void softmax_held(L line, int64_t lines, bool log_form, int team_size) {
    typedef typename L::C C;
    Team team = team_of(team_size);
    for (int64_t row = team.first; row < lines; row += team.count) {
        int64_t start = row * line.n;
        int len = (int)line.length(row); /* held lines are short: int indices */
        C v[Per], max = -INFINITY;
#pragma unroll
        for (int i = 0; i < Per; i++) {
            int k = team.rank + i * team.size;
            v[i] = k < len ? line.value(start + k) : (C)0;
            if (k < len) max = nan_max(max, v[i]);
        }
        max = team_reduce(team, max, MaxOp());
        double sum = 0;
#pragma unroll
        for (int i = 0; i < Per; i++)
            if (team.rank + i * team.size < len) {
                C e = line.expo(v[i] - max);
                sum += e;
                if (!log_form) v[i] = e;
            }
        sum = team_reduce(team, sum, SumOp());
        C of_sum = line.of_sum(sum, log_form);
#pragma unroll
        for (int i = 0; i < Per; i++) {
            int k = team.rank + i * team.size;
            if (k < line.n) line.put(start + k, k, len, log_form, v[i], max, of_sum);
        }
    }
}

/* float32 lines of whole float4s (n % 4 == 0, 16-byte aligned): as
 * softmax_held, by a group of lanes or a block, but each thread holds
 * Per / 4 runs of four neighbours, read and written as float4: a quarter
 * of the memory instructions. */
template <int Per>
__global__ void softmax_held4(Float32Line line, int64_t lines, bool log_form, int team_size) {
    Team team = team_of(team_size);
    const int quads = (int)(line.n / 4);
    for (int64_t row = team.first; row < lines; row += team.count) {
        const float4 *x = reinterpret_cast<const float4 *>(line.x + row * line.n);
        float4 *y = reinterpret_cast<float4 *>(line.y + row * line.n), v[Per / 4];
        float max = -INFINITY;
#pragma unroll
        for (int i = 0; i < Per / 4; i++) {
            int q = team.rank + i * team.size;
            v[i] = q < quads ? x[q] : make_float4(0, 0, 0, 0);
            if (q < quads)
                max = nan_max(nan_max(max, v[i].x), nan_max(nan_max(v[i].y, v[i].z), v[i].w));
        }
        max = team_reduce(team, max, MaxOp());
        double sum = 0;
#pragma unroll
        for (int i = 0; i < Per / 4; i++)
            if (team.rank + i * team.size < quads) {
                float4 e = make_float4(deft_expf(v[i].x - max), deft_expf(v[i].y - max),
                                       deft_expf(v[i].z - max), deft_expf(v[i].w - max));
                sum += (double)e.x, sum += (double)e.y, sum += (double)e.z, sum += (double)e.w;
                if (!log_form) v[i] = e;
            }
        sum = team_reduce(team, sum, SumOp());
        float of_sum = line.of_sum(sum, log_form);
#pragma unroll
        for (int i = 0; i < Per / 4; i++) {
            int q = team.rank + i * team.size;
            float4 a = v[i];
            if (q < quads)
                y[q] = make_float4(Float32Line::out(log_form, a.x, max, of_sum),
                                   Float32Line::out(log_form, a.y, max, of_sum),
                                   Float32Line::out(log_form, a.z, max, of_sum),
                                   Float32Line::out(log_form, a.w, max, of_sum));
        }
    }
}

/* Lines a block can stage in shared memory (up to 48 KB of them): read
 * once, each exponential computed once. Thread t keeps elements t, t +
 * blockDim.x, ... of every line it serves, so only the reductions meet. */
template <typename L> __global__ void softmax_staged(L line, int64_t lines, bool log_form) {
    typedef typename L::C C;
    extern __shared__ double staged_space[]; /* double: aligned for either type */
    C *v = reinterpret_cast<C *>(staged_space);
    Team team = team_of(blockDim.x);
    for (int64_t row = blockIdx.x; row < lines; row += gridDim.x) {
        int64_t start = row * line.n, len = line.length(row);
        C max = -INFINITY;
#pragma unroll 8
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
            v[k] = line.value(start + k);
            max = nan_max(max, v[k]);
        }
        max = team_reduce(team, max, MaxOp());
        double sum = 0;
#pragma unroll 8
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
            C e = line.expo(v[k] - max);
            sum += e;
            if (!log_form) v[k] = e;
        }
        sum = team_reduce(team, sum, SumOp());
        C of_sum = line.of_sum(sum, log_form);
#pragma unroll 8
        for (int64_t k = threadIdx.x; k < line.n; k += blockDim.x)
            line.put(start + k, k, len, log_form, k < len ? v[k] : (C)0, max, of_sum);
    }
}

template <typename L>
int launch_rows(int dev, const L &line, int64_t lines, int64_t n, bool log_form,
                cudaStream_t stream) {
    typedef typename L::C C;
    Pieces<C> p = {1, n, nullptr, nullptr, kWhole};
    /* A group of lanes per short line, a block per long one. Four elements
     * a lane, or eight, sixteen or 32 when a warp holds no fewer: four ran
     * 15% faster than eight on 32-element lines on an H200. */
    int team = lanes_for(n, 4);
    int64_t blocks = grid_of(ceil_div(lines * team, kThreads));
    if constexpr (std::is_same<L, Float32Line>::value) {
        /* whole float4s: eight elements a lane (two float4s) */
        int team8 = lanes_for(n, 8);
        bool quads = n % 4 == 0 && ((uintptr_t)line.x | (uintptr_t)line.y) % 16 == 0;
        if (quads && n <= 8 * team8) {
            softmax_held4<8><<<grid_of(ceil_div(lines * team8, kThreads)), kThreads, 0, stream>>>(
                line, lines, log_form, team8);
            return 0;
        }
        /* longer lines whole float4s up to 16 elements a thread: a block each */
        if (quads && n > 32 * kWarp && n <= 16 * kThreads) {
            softmax_held4<16>
                <<<grid_of(lines), kThreads, 0, stream>>>(line, lines, log_form, kThreads);
            return 0;
        }
    }
    if (n <= 4 * team) {
        softmax_held<L, 4><<<blocks, kThreads, 0, stream>>>(line, lines, log_form, team);
        return 0;
    }
    if (n <= 8 * team) {
        softmax_held<L, 8><<<blocks, kThreads, 0, stream>>>(line, lines, log_form, team);
        return 0;
    }
    if (n <= 16 * team) {
        softmax_held<L, 16><<<blocks, kThreads, 0, stream>>>(line, lines, log_form, team);
        return 0;
    }
    if (n <= 32 * team) {
        softmax_held<L, 32><<<blocks, kThreads, 0, stream>>>(line, lines, log_form, team);
        return 0;
    }
    size_t staged = (size_t)n * sizeof(C);
    if (staged <= kStagedBytes && (lines >= kBusyBlocks || n <= kLeastPiece)) {
        softmax_staged<<<grid_of(lines), kThreads, staged, stream>>>(line, lines, log_form);
        return 0;
    }
    if (lines < kBusyBlocks) { /* too few lines to fill the GPU: split them */
        int64_t chunks = ceil_div(kBusyBlocks, lines), most = ceil_div(n, kLeastPiece);
        p.chunk = ceil_div(n, chunks < most ? chunks : most);
        p.chunks = ceil_div(n, p.chunk);
    }
    if (p.chunks == 1) {
        softmax_rows<<<grid_of(lines), kThreads, 0, stream>>>(line, lines, log_form, p);
        return 0;
    }
    size_t pieces = (size_t)(lines * p.chunks);
    void *space;
    if (deft_gpu_workspace_hold(dev, pieces * (sizeof(C) + sizeof(double)), &space)) return -1;
    p.sums = static_cast<double *>(space);
    p.maxima = reinterpret_cast<C *>(p.sums + pieces);
    static const Stage stages[2] = {kPieces, kWrite};
    for (Stage stage : stages) {
        p.stage = stage;
        softmax_rows<<<grid_of(lines * p.chunks), kThreads, 0, stream>>>(line, lines, log_form, p);
    }
    deft_gpu_workspace_release(dev);
    return 0;
}

__global__ void softmax_lines(deft_gpu_softmax_t s) {
    GRID_STRIDE(line, s.outer * s.inner) deft_softmax_plan_line(&s, line);
}

/* The label of row b, or -1 (and the row noted in *bad) when it is not a class index. */
__device__ int64_t row_label(const deft_gpu_xent_t &x, int64_t b, deft_check_verdict_t *bad) {
    double label = deft_load_double(x.labels, x.label_dtype, b);
    if (deft_xent_label_ok(label, x.classes)) return (int64_t)label;
    flag_first(bad, b);
    return -1;
}

/* The loss: one block, each thread summing rows, then a tree in shared memory. */
__global__ void xent_loss(deft_gpu_xent_t x, deft_check_verdict_t *bad) {
    __shared__ double sums[kThreads];
    double sum = 0;
    for (int64_t b = threadIdx.x; b < x.batch; b += blockDim.x) {
        int64_t label = row_label(x, b, bad);
        if (label >= 0) sum += deft_xent_row_loss(x.x, x.dtype, b, x.classes, label);
    }
    sums[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) deft_store_double(x.out, x.dtype, 0, sums[0]);
}

__global__ void xent_grad(deft_gpu_xent_t x, deft_check_verdict_t *bad) {
    double g = deft_load_double(x.g, x.g_dtype, 0);
    GRID_STRIDE(b, x.batch) {
        int64_t label = row_label(x, b, bad);
        if (label >= 0) deft_xent_row_grad(x.x, x.out, x.dtype, b, x.classes, label, g);
    }
}

} // namespace

extern "C" int deft_gpu_softmax(int dev, const deft_gpu_softmax_t *s) {
    if (s->outer * s->inner == 0 || s->n == 0) return 0;
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    int status = 0;
    if (s->inner != 1)
        softmax_lines<<<blocks_for(s->outer * s->inner), kThreads, 0, stream>>>(*s);
    else if (s->x_dtype == DEFT_DT_FLOAT32 && s->y_dtype == DEFT_DT_FLOAT32 && s->scale == 1 &&
             !s->length)
        status = launch_rows(dev, Float32Line{(const float *)s->x, (float *)s->y, s->n}, s->outer,
                             s->n, s->log_form, stream);
    else
        status = launch_rows(dev, AnyLine{*s, s->n}, s->outer, s->n, s->log_form, stream);
    return status ? status : deft_gpu_check(cudaGetLastError(), "launching softmax");
}

extern "C" int deft_gpu_xent(int dev, const deft_gpu_xent_t *x, const deft_check_report_t *report) {
    return run_flagged(
        dev,
        [&](cudaStream_t stream, deft_check_verdict_t *bad) {
            if (x->g)
                xent_grad<<<blocks_for(x->batch), kThreads, 0, stream>>>(*x, bad);
            else
                xent_loss<<<1, kThreads, 0, stream>>>(*x, bad);
        },
        x->labels, x->label_dtype, report);
}
