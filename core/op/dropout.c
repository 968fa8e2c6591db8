/*
 * Dropout, as MXNet's: in training mode (or mode=always) each element is
 * kept with probability 1 - p and scaled by 1 / (1 - p), else zeroed; in
 * predict mode the output is the input.
 *
 * The mask is a second, hidden output (MXNet's too): the gradient is the
 * head gradient times the mask, so backward needs no random numbers. With
 * `axes`, one mask value is shared along those axes (variational dropout),
 * and the mask has extent 1 there. In predict mode the mask is all ones,
 * so a gradient taken through a predict-mode call is the identity.
 *
 * Masks draw from the global Philox stream (DeftRandomSeed): mask element i
 * takes word i % 4 of block first + i / 4, on the CPU and the GPU alike.
 */
#include <math.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/dtype_math.h"
#include "core/math/philox.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/random.h"

static const char *const dropout_modes[] = {"training", "always", NULL};

static const deft_param_def_t dropout_params[] = {
    {"p", DEFT_PARAM_FLOAT, "0.5", "fraction of the input that gets dropped out", NULL, false},
    {"mode", DEFT_PARAM_ENUM, "training",
     "training: drop only in training mode; always: drop in predict mode too", dropout_modes,
     false},
    {"axes", DEFT_PARAM_TUPLE, "()", "axes along which one mask value is shared", NULL, false},
    {"cudnn_off", DEFT_PARAM_BOOL, "false", "accepted for MXNet compatibility; no effect", NULL,
     true},
    {0}};

enum { P_P, P_MODE, P_AXES };

static int dropout_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    if (!(p[P_P].f >= 0 && p[P_P].f <= 1))
        return deft_op_error(op, DEFT_ERR_VALUE, "p is %g, expected a probability in [0, 1]",
                             p[P_P].f);
    out[0] = out[1] = in[0];
    for (int i = 0; i < p[P_AXES].t.n; i++) {
        int axis;
        if (deft_op_axis(op, "axes", p[P_AXES].t.v[i], in[0].shape.ndim, &axis)) return -1;
        out[1].shape.dims[axis] = 1;
    }
    *nout = 2;
    return 0;
}

/* Whether this call drops: in training mode, or always. */
static bool dropping(const deft_param_value_t *p) {
    return p[P_MODE].i == 1 || deft_op_training();
}

typedef struct mask_ctx {
    void *mask;
    deft_dtype_t dtype;
    uint64_t seed, first;
    double keep;
    uint32_t below; /* keep exactly when a word's top 24 bits are below this */
    int64_t n;
} mask_ctx_t;

/* deft_dropout_mask's test, (word >> 8) / 2^24 < keep, as an integer
 * compare: for an integer t, t < keep * 2^24 exactly when t < ceil(keep * 2^24)
 * (the product is exact: 2^24 is a power of two). */
static uint32_t keep_below(double keep) {
    return (uint32_t)ceil(keep * 16777216.0);
}

#define MASK_WORDS(S, T)                                                                           \
    DEFT_CLONES static void mask_words_##S(T *mask, const uint32_t *words, int64_t n,              \
                                           uint32_t below, T scale) {                              \
        for (int64_t i = 0; i < n; i++) mask[i] = words[i] >> 8 < below ? scale : (T)0;            \
    }
MASK_WORDS(f32, float)
MASK_WORDS(f64, double)

enum { CHUNK_BLOCKS = 64 }; /* words drawn at a time: 1 KB, in L1 */

/* Mask elements [4 * begin, 4 * end): a block of four words each. */
static void mask_blocks(void *arg, int64_t begin, int64_t end) {
    const mask_ctx_t *c = arg;
    uint32_t words[4 * CHUNK_BLOCKS];
    for (int64_t b = begin; b < end; b += CHUNK_BLOCKS) {
        int64_t blocks = end - b < CHUNK_BLOCKS ? end - b : CHUNK_BLOCKS;
        int64_t at = 4 * b, n = 4 * blocks < c->n - at ? 4 * blocks : c->n - at;
        deft_philox_words(c->seed, c->first + (uint64_t)b, blocks, words);
        if (c->dtype == DEFT_DT_FLOAT32)
            mask_words_f32((float *)c->mask + at, words, n, c->below, (float)(1.0 / c->keep));
        else if (c->dtype == DEFT_DT_FLOAT64)
            mask_words_f64((double *)c->mask + at, words, n, c->below, 1.0 / c->keep);
        else
            for (int64_t i = 0; i < n; i++)
                deft_store_double(c->mask, c->dtype, at + i, deft_dropout_mask(words[i], c->keep));
    }
}

typedef struct apply_ctx {
    const void *x;
    const void *mask;
    void *y;
    deft_dtype_t dtype;
    deft_shape_t shape;                       /* the data's */
    int64_t mask_stride[DEFT_SHAPE_MAX_NDIM]; /* per data axis: the mask's stride, 0 if shared */
} apply_ctx_t;

/* y = x * mask for elements [begin, end), the mask broadcast along shared axes. */
static void apply_range(void *arg, int64_t begin, int64_t end) {
    const apply_ctx_t *c = arg;
    int ndim = c->shape.ndim;
    for (int64_t i = begin; i < end; i++) {
        int64_t rest = i, m = 0;
        for (int d = ndim - 1; d >= 0; d--) {
            m += (rest % c->shape.dims[d]) * c->mask_stride[d];
            rest /= c->shape.dims[d];
        }
        double v = deft_load_double(c->x, c->dtype, i) * deft_load_double(c->mask, c->dtype, m);
        deft_store_double(c->y, c->dtype, i, v);
    }
}

DEFT_CLONES static void apply_dense_f32(const float *x, const float *mask, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * mask[i];
}

static void apply_dense_range(void *arg, int64_t begin, int64_t end) {
    const apply_ctx_t *c = arg;
    if (c->dtype == DEFT_DT_FLOAT32) {
        apply_dense_f32((const float *)c->x + begin, (const float *)c->mask + begin,
                        (float *)c->y + begin, end - begin);
        return;
    }
    const double *x = c->x, *mask = c->mask;
    double *y = c->y;
    for (int64_t i = begin; i < end; i++) y[i] = x[i] * mask[i];
}

static void fill_ones(const deft_tensor_t *t) {
    int64_t n = deft_shape_size(&t->shape);
    for (int64_t i = 0; i < n; i++) deft_store_double(deft_tensor_data(t), t->dtype, i, 1.0);
}

/* The mask's strides seen from the data's axes: 0 along shared axes. */
static void mask_strides(const deft_tensor_t *mask, const deft_shape_t *data, int64_t *out) {
    int64_t stride = 1;
    for (int d = data->ndim - 1; d >= 0; d--) {
        out[d] = mask->shape.dims[d] == 1 ? 0 : stride;
        stride *= mask->shape.dims[d];
    }
}

static int dropout_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    int64_t n = deft_shape_size(&in[0].shape);
    if (!dropping(p)) {
        fill_ones(&out[1]);
        if (n && deft_tensor_data(&out[0]) != deft_tensor_data(&in[0]))
            memcpy(deft_tensor_data(&out[0]), deft_tensor_data(&in[0]), deft_tensor_nbytes(&in[0]));
        return 0;
    }
    mask_ctx_t m = {.mask = deft_tensor_data(&out[1]),
                    .dtype = out[1].dtype,
                    .keep = 1 - p[P_P].f,
                    .below = keep_below(1 - p[P_P].f),
                    .n = deft_shape_size(&out[1].shape)};
    m.first = deft_random_reserve(((uint64_t)m.n + 3) / 4, &m.seed);
    deft_parallel_for((m.n + 3) / 4, DEFT_PARALLEL_GRAIN / 32, mask_blocks, &m);
    apply_ctx_t a = {.x = deft_tensor_data(&in[0]),
                     .mask = m.mask,
                     .y = deft_tensor_data(&out[0]),
                     .dtype = in[0].dtype,
                     .shape = in[0].shape};
    if (m.n == n) {
        deft_parallel_for(n, DEFT_PARALLEL_GRAIN, apply_dense_range, &a);
    } else {
        mask_strides(&out[1], &in[0].shape, a.mask_stride);
        deft_parallel_for(n, DEFT_PARALLEL_GRAIN / 8, apply_range, &a);
    }
    return 0;
}

#ifdef DEFT_HAVE_CUDA
/* dropout.cu: the n mask elements on GPU dev, drawn as mask_blocks draws them. */
int deft_gpu_dropout_mask(int dev, void *mask, deft_dtype_t dtype, int64_t n, uint64_t seed,
                          uint64_t first, double keep);

static int dropout_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    if (!dropping(p)) {
        const double one[DEFT_GPU_MAX_OPS] = {[1] = 1.0};
        const deft_tensor_t *x = &in[0];
        if (deft_gpu_elementwise(DEFT_GPU_FN_FILL, &out[1], 0, NULL, one)) return -1;
        return deft_gpu_elementwise(DEFT_GPU_FN_COPY, &out[0], 1, &x, NULL);
    }
    int64_t n = deft_shape_size(&out[1].shape);
    uint64_t seed, first = deft_random_reserve(((uint64_t)n + 3) / 4, &seed);
    if (deft_gpu_dropout_mask(deft_gpu_of(&out[1]), deft_tensor_data(&out[1]), out[1].dtype, n,
                              seed, first, 1 - p[P_P].f))
        return -1;
    /* y = x * mask, the mask broadcast to the data's shape along shared axes */
    const deft_tensor_t *operands[2] = {&in[0], &out[1]};
    return deft_gpu_elementwise(DEFT_GPU_FN_mul, &out[0], 2, operands, NULL);
}
#endif

/* d/dx = head gradient * mask (broadcast along shared axes). */
static int dropout_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                            deft_gref_t *in_grads) {
    (void)nin;
    const char *mul = p[P_AXES].t.n ? "broadcast_mul" : "elemwise_mul";
    in_grads[0] = g_op2(b, mul, b->out_grad(b, 0), b->output(b, 1), GRAD_NONE);
    return 0;
}

static const char *const dropout_outputs_doc =
    "Randomly zeroes elements in training mode (or always), scaling the rest by 1 / (1 - p); "
    "the identity in predict mode. Outputs the result (and a hidden mask, for the gradient).";

static const deft_op_t dropout_ops[] = {
    {.name = "Dropout",
     .description = dropout_outputs_doc,
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = dropout_params,
     .infer = dropout_infer,
     .forward = dropout_forward,
     .forward_gpu = DEFT_GPU(dropout_forward_gpu),
     .inplace_input = 0,
     .num_outputs = deft_op_two_outputs,
     .num_visible_outputs = deft_op_one_visible,
     .nondeterministic = true,
     .gradient = dropout_gradient},
};

DEFT_OP_FAMILY(deft_family_dropout, dropout_ops);
