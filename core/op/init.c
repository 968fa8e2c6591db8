/*
 * Creation operators (_zeros, _ones, _full, _arange, _random_uniform,
 * _random_normal), dtype conversion (Cast) and copying (_copyto).
 */
#include <math.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/math/philox.h"
#include "core/op/random.h"
#include "core/op/strided.h"

static const char *const no_inputs[] = {NULL};

/* Parameters 0 and 1 of every shaped creation op: shape and dtype. */
#define SHAPE_PARAM                                                                                \
    { "shape", DEFT_PARAM_TUPLE, "()", "shape of the new array", NULL, false }
#define DTYPE_PARAM                                                                                \
    { "dtype", DEFT_PARAM_DTYPE, "float32", "dtype of the new array", NULL, false }
/* The last parameter of every creation op: where the array goes. */
#define CTX_PARAM                                                                                  \
    { "ctx", DEFT_PARAM_DEVICE, "cpu(0)", "device of the new array, e.g. gpu(0)", NULL, false }

static int shaped_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)in, (void)nin;
    const deft_tuple_t *t = &p[0].t;
    for (int d = 0; d < t->n; d++) {
        if (t->v[d] < 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "shape[%d] is %lld, expected >= 0", d,
                                 (long long)t->v[d]);
    }
    out[0].shape.ndim = t->n;
    memcpy(out[0].shape.dims, t->v, sizeof t->v);
    out[0].dtype = (deft_dtype_t)p[1].i;
    size_t nbytes;
    if (deft_shape_nbytes(&out[0].shape, deft_dtype_size(out[0].dtype), &nbytes)) return -1;
    *nout = 1;
    return 0;
}

/* ---- filling with one value ---- */

typedef struct fill_ctx {
    void *data;
    deft_dtype_t dtype;
    double value;
} fill_ctx_t;

static void fill_range(void *arg, int64_t begin, int64_t end) {
    const fill_ctx_t *c = arg;
    size_t elem = deft_dtype_size(c->dtype);
    char *base = (char *)c->data;
    if (c->value == 0 && !signbit(c->value)) {
        memset(base + begin * (int64_t)elem, 0, (size_t)(end - begin) * elem);
        return;
    }
    /* Store one element, then double the filled span with memcpy. */
    deft_store_double(base, c->dtype, begin, c->value);
    for (int64_t done = 1; done < end - begin;) {
        int64_t chunk = done < end - begin - done ? done : end - begin - done;
        memcpy(base + (begin + done) * (int64_t)elem, base + begin * (int64_t)elem,
               (size_t)chunk * elem);
        done += chunk;
    }
}

static void fill(const deft_tensor_t *t, double value) {
    fill_ctx_t c = {deft_tensor_data(t), t->dtype, value};
    deft_parallel_for(deft_shape_size(&t->shape), DEFT_PARALLEL_GRAIN * 4, fill_range, &c);
}

static int zeros_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)in, (void)nout;
    fill(&out[0], 0.0);
    return 0;
}

static int ones_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)in, (void)nout;
    fill(&out[0], 1.0);
    return 0;
}

static int full_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)in, (void)nout;
    fill(&out[0], p[2].f);
    return 0;
}

static const deft_param_def_t shaped_params[] = {SHAPE_PARAM, DTYPE_PARAM, CTX_PARAM, {0}};
static const deft_param_def_t full_params[] = {
    SHAPE_PARAM,
    DTYPE_PARAM,
    {"value", DEFT_PARAM_FLOAT, NULL, "the fill value", NULL, false},
    CTX_PARAM,
    {0}};

/* ---- arange ---- */

static const deft_param_def_t arange_params[] = {
    {"start", DEFT_PARAM_FLOAT, NULL, "first value (or the stop, when stop is None)", NULL, false},
    {"stop", DEFT_PARAM_FLOAT, "None", "end of the range, excluded", NULL, true},
    {"step", DEFT_PARAM_FLOAT, "1", "spacing between values", NULL, false},
    {"repeat", DEFT_PARAM_INT, "1", "times each value is repeated", NULL, false},
    DTYPE_PARAM,
    CTX_PARAM,
    {0}};

static void arange_bounds(const deft_param_value_t *p, double *start, double *stop) {
    *start = p[1].none ? 0.0 : p[0].f;
    *stop = p[1].none ? p[0].f : p[1].f;
}

static int arange_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin, (void)in;
    double start, stop, step = p[2].f;
    arange_bounds(p, &start, &stop);
    if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(stop))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "start (%g), stop (%g) and step (%g) must be finite, step non-zero",
                             start, stop, step);
    if (p[3].i < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "repeat is %lld, expected >= 1",
                             (long long)p[3].i);
    double count = ceil((stop - start) / step);
    if (count < 0) count = 0;
    if (count * (double)p[3].i > 9.0e15)
        return deft_op_error(op, DEFT_ERR_VALUE, "the range has %g elements, too many", count);
    out[0].shape.ndim = 1;
    out[0].shape.dims[0] = (int64_t)count * p[3].i;
    out[0].dtype = (deft_dtype_t)p[4].i;
    *nout = 1;
    return 0;
}

static int arange_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)in, (void)nout;
    double start, stop;
    arange_bounds(p, &start, &stop);
    int64_t n = out[0].shape.dims[0], repeat = p[3].i;
    void *data = deft_tensor_data(&out[0]);
    for (int64_t i = 0; i < n; i++)
        deft_store_double(data, out[0].dtype, i, start + (double)(i / repeat) * p[2].f);
    return 0;
}

/* ---- random ---- */

typedef struct random_ctx {
    void *data;
    deft_dtype_t dtype;
    uint64_t seed, first;
    double a, b; /* low/high or loc/scale */
    bool normal;
    int64_t n;
} random_ctx_t;

enum { CHUNK_BLOCKS = 64 }; /* words drawn at a time: 1 KB, in L1 */

DEFT_CLONES static void uniform_words_f32(float *out, const uint32_t *words, int64_t n, float low,
                                          float width) {
    for (int64_t i = 0; i < n; i++) out[i] = deft_random_uniform_f(words[i], low, width);
}

/* Uniform float32 uses all four words of a block (element i: block i / 4, word
 * i % 4); the other kinds use a block per element (they need 53 or more bits). */
static void random_range(void *arg, int64_t begin, int64_t end) {
    const random_ctx_t *c = arg;
    if (c->dtype == DEFT_DT_FLOAT32 && !c->normal) {
        float low = (float)c->a, width = (float)(c->b - c->a);
        uint32_t words[4 * CHUNK_BLOCKS];
        for (int64_t i = begin; i < end;) {
            int64_t b = i / 4, blocks = (end + 3) / 4 - b;
            if (blocks > CHUNK_BLOCKS) blocks = CHUNK_BLOCKS;
            int64_t n = 4 * (b + blocks) < end ? 4 * (b + blocks) - i : end - i;
            deft_philox_words(c->seed, c->first + (uint64_t)b, blocks, words);
            uniform_words_f32((float *)c->data + i, words + i % 4, n, low, width);
            i += n;
        }
        return;
    }
    for (int64_t i = begin; i < end; i++) {
        deft_philox_block_t block = deft_philox(c->seed, c->first + (uint64_t)i);
        if (c->dtype == DEFT_DT_FLOAT32)
            ((float *)c->data)[i] = deft_random_normal_f(block, c->a, c->b);
        else
            ((double *)c->data)[i] = deft_random_d(block, c->normal, c->a, c->b);
    }
}

/* Elements [4 * begin, 4 * end) (the grain of parallel_for is 4 elements). */
static void random_blocks(void *arg, int64_t begin, int64_t end) {
    const random_ctx_t *c = arg;
    random_range(arg, 4 * begin, 4 * end < c->n ? 4 * end : c->n);
}

static int random_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (shaped_infer(op, p, nin, in, nout, out)) return -1;
    if (!deft_dtype_is_float(out[0].dtype))
        return deft_op_error(op, DEFT_ERR_TYPE, "dtype is %s, expected float32 or float64",
                             deft_dtype_name(out[0].dtype));
    if (!isfinite(p[2].f) || !isfinite(p[3].f))
        return deft_op_error(op, DEFT_ERR_VALUE, "%s (%g) and %s (%g) must be finite",
                             op->params[2].name, p[2].f, op->params[3].name, p[3].f);
    bool normal = op->data != NULL;
    if (normal && p[3].f < 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "scale is %g, expected >= 0", p[3].f);
    if (!normal && p[2].f > p[3].f)
        return deft_op_error(op, DEFT_ERR_VALUE, "low (%g) is greater than high (%g)", p[2].f,
                             p[3].f);
    return 0;
}

/* The stream's blocks for n numbers: float32 uniforms take four a block. */
static uint64_t reserve_blocks(deft_dtype_t dtype, bool normal, int64_t n, uint64_t *seed) {
    bool packed = dtype == DEFT_DT_FLOAT32 && !normal;
    return deft_random_reserve(packed ? ((uint64_t)n + 3) / 4 : (uint64_t)n, seed);
}

static int random_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)in, (void)nout;
    int64_t n = deft_shape_size(&out[0].shape);
    random_ctx_t c = {.data = deft_tensor_data(&out[0]),
                      .dtype = out[0].dtype,
                      .a = p[2].f,
                      .b = p[3].f,
                      .normal = op->data != NULL,
                      .n = n};
    c.first = reserve_blocks(c.dtype, c.normal, n, &c.seed);
    /* chunks start at multiples of 4, so each block is drawn by one thread only */
    deft_parallel_for((n + 3) / 4, DEFT_PARALLEL_GRAIN / 32, random_blocks, &c);
    return 0;
}

/* ---- on a GPU (the `ctx` parameter) ---- */

static int ctx_device(const deft_op_t *op, const deft_param_value_t *p, deft_device_t *out) {
    int k = 0;
    while (strcmp(op->params[k].name, "ctx") != 0) k++;
    return deft_output_device_param0(op, &p[k], out);
}

#ifdef DEFT_HAVE_CUDA
static int fill_gpu(const deft_tensor_t *t, double value) {
    if (value == 0 && !signbit(value))
        return deft_device_zero(deft_tensor_data(t), t->device, deft_tensor_nbytes(t));
    const double scalars[DEFT_GPU_MAX_OPS] = {[1] = value};
    return deft_gpu_elementwise(DEFT_GPU_FN_FILL, t, 0, NULL, scalars);
}

static int zeros_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)in, (void)nout;
    return fill_gpu(&out[0], 0.0);
}

static int ones_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)in, (void)nout;
    return fill_gpu(&out[0], 1.0);
}

static int full_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)in, (void)nout;
    return fill_gpu(&out[0], p[2].f);
}

static int arange_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)in, (void)nout;
    double start, stop;
    arange_bounds(p, &start, &stop);
    return deft_gpu_arange(deft_gpu_of(&out[0]), deft_tensor_data(&out[0]), out[0].dtype,
                           out[0].shape.dims[0], start, p[2].f, p[3].i);
}

/* The same numbers as the CPU's for the same seed and draws before. */
static int random_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)in, (void)nout;
    deft_gpu_random_t r = {.dtype = out[0].dtype,
                           .data = deft_tensor_data(&out[0]),
                           .n = deft_shape_size(&out[0].shape),
                           .a = p[2].f,
                           .b = p[3].f,
                           .normal = op->data != NULL};
    r.first = reserve_blocks(r.dtype, r.normal, r.n, &r.seed);
    return deft_gpu_random(deft_gpu_of(&out[0]), &r);
}
#endif

static const deft_param_def_t uniform_params[] = {
    SHAPE_PARAM,
    DTYPE_PARAM,
    {"low", DEFT_PARAM_FLOAT, "0", "lower bound, included", NULL, false},
    {"high", DEFT_PARAM_FLOAT, "1", "upper bound, excluded", NULL, false},
    CTX_PARAM,
    {0}};
static const deft_param_def_t normal_params[] = {
    SHAPE_PARAM,
    DTYPE_PARAM,
    {"loc", DEFT_PARAM_FLOAT, "0", "mean", NULL, false},
    {"scale", DEFT_PARAM_FLOAT, "1", "standard deviation", NULL, false},
    CTX_PARAM,
    {0}};

/* ---- Cast and _copyto ---- */

static const deft_param_def_t cast_params[] = {
    {"dtype", DEFT_PARAM_DTYPE, NULL, "dtype to convert to", NULL, false}, {0}};

static int cast_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)nin;
    out[0].shape = in[0].shape;
    out[0].dtype = (deft_dtype_t)p[0].i;
    *nout = 1;
    return 0;
}

typedef struct cast_ctx {
    const void *src;
    void *dst;
    deft_dtype_t from, to;
} cast_ctx_t;

static void cast_range(void *arg, int64_t begin, int64_t end) {
    const cast_ctx_t *c = arg;
    for (int64_t i = begin; i < end; i++)
        deft_store_double(c->dst, c->to, i, deft_load_double(c->src, c->from, i));
}

static int cast_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    if (in[0].dtype == out[0].dtype) return deft_forward_copy(op, p, nin, in, nout, out);
    /* Through double: exact for every dtype but int64 beyond 2^53. */
    cast_ctx_t c = {deft_tensor_data(&in[0]), deft_tensor_data(&out[0]), in[0].dtype, out[0].dtype};
    deft_parallel_for(deft_shape_size(&in[0].shape), DEFT_PARALLEL_GRAIN / 4, cast_range, &c);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int cast_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    if (in[0].dtype == out[0].dtype) return deft_forward_copy(op, p, nin, in, nout, out);
    const deft_tensor_t *x = &in[0];
    return deft_gpu_elementwise(DEFT_GPU_FN_CAST, &out[0], 1, &x, NULL);
}
#endif

int deft_infer_same(const deft_op_t *op, const deft_param_value_t *p, int nin,
                    const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

#define RANDOM_OP(name_, params_, data_, doc)                                                      \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = no_inputs, .min_inputs = 0,              \
        .max_inputs = 0, .params = params_, .infer = random_infer, .forward = random_forward,      \
        .forward_gpu = DEFT_GPU(random_forward_gpu), .output_device = ctx_device,                  \
        .inplace_input = -1, .data = data_, .nondeterministic = true                               \
    }
#define CREATE_OP(name_, params_, infer_, forward_, data_, doc)                                    \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = no_inputs, .min_inputs = 0,              \
        .max_inputs = 0, .params = params_, .infer = infer_, .forward = forward_,                  \
        .forward_gpu = DEFT_GPU(forward_##_gpu), .output_device = ctx_device, .inplace_input = -1, \
        .data = data_                                                                              \
    }

static int grad_cast(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_cast_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

static int grad_copy(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = b->out_grad(b, 0);
    return 0;
}

#define CAST_OP(name_)                                                                             \
    {                                                                                              \
        .name = name_, .description = "Converts to another dtype (integers saturate, NaN to 0).",  \
        .input_names = deft_op_data_input, .min_inputs = 1, .max_inputs = 1,                       \
        .params = cast_params, .infer = cast_infer, .forward = cast_forward,                       \
        .forward_gpu = DEFT_GPU(cast_forward_gpu), .inplace_input = -1, .gradient = grad_cast      \
    }

#define COPY_OP(name_, any_device_, doc)                                                           \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,     \
        .max_inputs = 1, .infer = deft_infer_same, .forward = deft_forward_copy,                   \
        .forward_gpu = DEFT_GPU(deft_forward_copy), .any_device = any_device_,                     \
        .inplace_input = -1, .gradient = grad_copy                                                 \
    }

static const deft_op_t init_ops[] = {
    CREATE_OP("_zeros", shaped_params, shaped_infer, zeros_forward, NULL,
              "A new array filled with zeros."),
    CREATE_OP("_ones", shaped_params, shaped_infer, ones_forward, NULL,
              "A new array filled with ones."),
    CREATE_OP("_full", full_params, shaped_infer, full_forward, NULL,
              "A new array filled with `value`."),
    CREATE_OP("_arange", arange_params, arange_infer, arange_forward, NULL,
              "Evenly spaced values in [start, stop), each repeated `repeat` times."),
    RANDOM_OP("_random_uniform", uniform_params, NULL,
              "Uniform random numbers in [low, high), from the seeded stream (DeftRandomSeed)."),
    RANDOM_OP("_random_normal", normal_params, "normal",
              "Normal random numbers with mean loc and deviation scale, from the seeded stream."),
    CAST_OP("Cast"),
    COPY_OP("_copy", false,
            "A copy of the input (MXNet's _copy: identity). Export names an output that is an "
            "input, or that another output already names, with one."),
    COPY_OP("_copyto", true, "Copies data into the output array, which may be on another device."),
};

DEFT_OP_FAMILY(deft_family_init, init_ops);
