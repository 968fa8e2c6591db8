/*
 * The GPU kernels' launchers, callable from C. Each queues its work on the
 * calling thread's stream of the device (gpu.h) and returns at once; -1 with an error when the
 * launch fails. The operators (core/op) plan the work with the same code as
 * their CPU kernels (shapes, broadcasting, merged dimensions) and pass the
 * plan here; the per-element math is the shared scalar_math.h and
 * dtype_math.h.
 */
#ifndef DEFT_CORE_GPU_KERNELS_H
#define DEFT_CORE_GPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/device_check.h"
#include "core/base/dtype.h"
#include "core/base/shape.h"
#include "core/math/optimizer_math.h"
#include "core/math/scalar_math.h"
#include "core/math/softmax_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a map computes for each element (operand 0 is the output). */
typedef enum deft_gpu_fn {
#define DEFT_GPU_FN_ID(name, expr) DEFT_GPU_FN_##name,
    DEFT_UNARY_FLOAT_MATH(DEFT_GPU_FN_ID)       /* y = f(x) */
    DEFT_ACTIVATION_UNARY_MATH(DEFT_GPU_FN_ID)  /* y = f(x), floats only */
    DEFT_ACTIVATION_BINARY_MATH(DEFT_GPU_FN_ID) /* y = f(a, b), floats only */
    DEFT_GRAD_BINARY_MATH(DEFT_GPU_FN_ID)       /* y = f(a, b), floats only */
    DEFT_BINARY_FLOAT_MATH(DEFT_GPU_FN_ID)      /* y = f(a, b); from add on, integers too */
#undef DEFT_GPU_FN_ID
    DEFT_GPU_FN_CLIP,  /* y = x clipped to [scalars[2], scalars[3]] */
    DEFT_GPU_FN_COPY,  /* y = x, any dtype of the output's size */
    DEFT_GPU_FN_CAST,  /* y = x converted from dtype[1] to dtype[0], as Cast does */
    DEFT_GPU_FN_FILL,  /* y = scalars[1] */
    DEFT_GPU_FN_WHERE, /* y = c != 0 ? a : b, c of dtype[1] */
    DEFT_GPU_FN_COUNT
} deft_gpu_fn_t;

#define DEFT_GPU_MAX_OPS 8

/*
 * An elementwise map over a strided iteration: `size` elements in `ndim`
 * (merged) dimensions, the last varying fastest; operand k's element is at
 * base[k] + its offset (gpu_index.h) in elements of dtype[k]. An operand
 * whose base is NULL is the value scalars[k] (the scalar operators).
 */
typedef struct deft_gpu_map {
    deft_gpu_fn_t fn;
    int ndim, nops;
    int64_t size;
    int64_t dims[DEFT_SHAPE_MAX_NDIM];
    int64_t strides[DEFT_GPU_MAX_OPS][DEFT_SHAPE_MAX_NDIM];
    void *base[DEFT_GPU_MAX_OPS];
    deft_dtype_t dtype[DEFT_GPU_MAX_OPS];
    double scalars[DEFT_GPU_MAX_OPS];
} deft_gpu_map_t;

/*
 * A reduction: `outer` results of `span` elements each. The input's
 * dimensions are listed kept ones first (dims[0..nkept)), then reduced
 * ones, with the input's strides; result o goes to y[o]. kind is a
 * deft_reduce_kind_t (core/math/reduce_math.h).
 */
typedef struct deft_gpu_reduce {
    int kind;
    deft_dtype_t dtype; /* the input's */
    int64_t outer, span;
    int ndim, nkept;
    int64_t dims[DEFT_SHAPE_MAX_NDIM], strides[DEFT_SHAPE_MAX_NDIM];
    const void *x;
    void *y;
} deft_gpu_reduce_t;

int deft_gpu_reduce(int dev, const deft_gpu_reduce_t *reduce);

/*
 * batch products C = op(A) op(B) + beta C, row-major like the CPU's gemm:
 * C is m x n, the shared dimension k; float32, float64, float16 or bfloat16
 * (accumulated in float32). Product i uses
 * A + i stride_a, B + i stride_b, C + i stride_c (elements). Through cuBLAS.
 */
typedef struct deft_gpu_gemm {
    deft_dtype_t dtype;
    bool ta, tb;
    int64_t m, n, k, batch;
    const void *a, *b;
    void *c;
    double beta;
    long long stride_a, stride_b, stride_c;
} deft_gpu_gemm_t;

int deft_gpu_gemm(int dev, const deft_gpu_gemm_t *gemm);

/* A softmax-family plan (softmax_math.h), one thread per line. */
typedef deft_softmax_plan_t deft_gpu_softmax_t;

int deft_gpu_softmax(int dev, const deft_gpu_softmax_t *softmax);

/*
 * The softmax cross-entropy of data (batch, classes) and labels: with g
 * NULL, the summed loss into out[0]; otherwise its gradient times g[0]
 * into out (batch, classes). Rows whose label is not a class index are
 * skipped, and the first is reported through `report` (flag.cuh: at once,
 * or when the host waits for out, the check deferred).
 */
typedef struct deft_gpu_xent {
    deft_dtype_t dtype, label_dtype, g_dtype;
    const void *x, *labels, *g;
    void *out;
    int64_t batch, classes;
} deft_gpu_xent_t;

int deft_gpu_xent(int dev, const deft_gpu_xent_t *xent, const deft_check_report_t *report);

/*
 * take along an axis: dst[o, j, k] = src[o, index j, k] for o < outer,
 * j < count, k < inner, the source axis of length `size`; indices resolved
 * by `mode` (index_math.h). In raise mode it also checks every index and
 * reports the first out of range through `report` (flag.cuh: at once, and
 * then writes nothing, or deferred, and then gathers clipped indices).
 */
typedef struct deft_gpu_take {
    deft_dtype_t dtype, index_dtype;
    const void *src, *indices;
    void *dst;
    int64_t outer, size, count, inner;
    int mode;
} deft_gpu_take_t;

int deft_gpu_take(int dev, const deft_gpu_take_t *take, const deft_check_report_t *report);
/* take's gradient: dst (outer, size, inner) = zeros, then src (outer,
 * count, inner) added at the taken places (float32 and float64). */
int deft_gpu_take_backward(int dev, const deft_gpu_take_t *take);

/* one_hot: y[j, k] = indices[j] == k ? on : off, in dtype. */
typedef struct deft_gpu_one_hot {
    deft_dtype_t dtype, index_dtype;
    const void *indices;
    void *y;
    int64_t count, depth;
    double on, off;
} deft_gpu_one_hot_t;

int deft_gpu_one_hot(int dev, const deft_gpu_one_hot_t *one_hot);

/* Random numbers as the CPU draws them (philox.h): uniform in [a, b) or
 * normal (mean a, deviation b), float32 or float64, from blocks reserved
 * from the global stream starting at `first`. */
typedef struct deft_gpu_random {
    deft_dtype_t dtype;
    void *data;
    int64_t n;
    uint64_t seed, first;
    double a, b;
    bool normal;
} deft_gpu_random_t;

int deft_gpu_random(int dev, const deft_gpu_random_t *random);

/* y[i] = start + (i / repeat) * step, computed in double, in dtype. */
int deft_gpu_arange(int dev, void *y, deft_dtype_t dtype, int64_t n, double start, double step,
                    int64_t repeat);

/* An optimizer step over n elements (optimizer_math.h): kind 0 sgd_update
 * (in: weight, grad), 1 sgd_mom_update (+ mom), 2 adam_update (+ mean,
 * var); states are updated in place, the new weight goes to out. */
typedef struct deft_gpu_update {
    int kind;
    deft_hyper_t hyper;
    deft_dtype_t dtype;
    int64_t n;
    void *out;
    void *in[4];
} deft_gpu_update_t;

int deft_gpu_update(int dev, const deft_gpu_update_t *update);

/*
 * add_n: y = x[0] + ... + x[nin - 1], n elements each, all of dtype and
 * dense: in one pass, summed in double and rounded once into dtype, as the
 * CPU's add_n (a map has too few operands for the operator's inputs).
 */
#define DEFT_GPU_ADD_N_MAX 64

typedef struct deft_gpu_add_n {
    deft_dtype_t dtype;
    int nin;
    int64_t n;
    void *y;
    const void *x[DEFT_GPU_ADD_N_MAX];
} deft_gpu_add_n_t;

int deft_gpu_add_n(int dev, const deft_gpu_add_n_t *add_n);

/* Whether fn has a kernel for dtype (the output's; the input's for casts):
 * every function for float32, float64, float16 and bfloat16 (the half types
 * computed in float32), scalar_math.h's integer ones for int32, int64 and
 * uint8; copy and cast for every dtype. */
bool deft_gpu_map_supports(deft_gpu_fn_t fn, deft_dtype_t dtype);
/* fn's name, as scalar_math.h spells it ("exp", "add", ...; "clip" ...). */
const char *deft_gpu_fn_name(deft_gpu_fn_t fn);
int deft_gpu_map(int dev, const deft_gpu_map_t *map);

/*
 * A chain of maps (the fused elementwise operator) as one kernel: each
 * element runs the steps in registers and only the last is stored. A step
 * is a unary or binary function, or clip; its operand k (1 or 2, as in a
 * map) is an input, an earlier step's result or, when src is
 * DEFT_GPU_FUSED_SCALAR, scalars[k]. Inputs are dense (in_stride 1) or hold
 * one value (in_stride 0); everything has one float dtype (float16 and
 * bfloat16 steps computed in float32, each result rounded to it).
 */
#define DEFT_GPU_FUSED_MAX_STEPS 32
#define DEFT_GPU_FUSED_SCALAR    (-128)

typedef struct deft_gpu_fused_step {
    deft_gpu_fn_t fn;
    int8_t src[3];      /* per operand: >= 0 input, -1 - j step j's result */
    double scalars[4];  /* by operand, as in a map (clip's bounds at 2 and 3) */
    float scalars_f[4]; /* as float32, as a map takes them: the launcher fills them in */
} deft_gpu_fused_step_t;

typedef struct deft_gpu_fused {
    int64_t size;
    deft_dtype_t dtype;
    int nin, nsteps;
    void *out;
    const void *in[DEFT_GPU_MAX_OPS];
    int64_t in_stride[DEFT_GPU_MAX_OPS];
    deft_gpu_fused_step_t steps[DEFT_GPU_FUSED_MAX_STEPS];
} deft_gpu_fused_t;

/*
 * Planning a fused chain: from start to stop, the calling thread's maps are
 * noted in `c` (the first one; count says how many were asked for) instead
 * of launched, and every other kernel fails, so a step whose operator
 * launches anything but one map is seen and run unfused.
 */
typedef struct deft_gpu_capture {
    int count;
    deft_gpu_map_t map;
} deft_gpu_capture_t;

void deft_gpu_capture_start(deft_gpu_capture_t *c);
void deft_gpu_capture_stop(void);
/* In a launcher: true when the map was noted (and must not run). */
bool deft_gpu_capture_map(const deft_gpu_map_t *map);

/* Whether a fused chain may use fn on dtype. */
bool deft_gpu_fused_supports(deft_gpu_fn_t fn, deft_dtype_t dtype);
int deft_gpu_fused(int dev, const deft_gpu_fused_t *chain);

#ifdef __cplusplus
}
#endif

#endif
