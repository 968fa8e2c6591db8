/*
 * softmax and log_softmax along an axis, and the fused softmax
 * cross-entropy loss. All subtract the maximum before exponentiating, so
 * large inputs neither overflow nor lose the answer; accumulation is in
 * double. float32 rows take a vectorised path; float16 and bfloat16 take the
 * general one, which reads and writes any float dtype.
 */
#include <math.h>

#include "core/base/parallel.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/math/softmax_math.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/math/scalar_math.h"

/* What distinguishes the operators sharing the softmax kernel. */
typedef struct softmax_kind {
    bool log_form;
    bool negate;     /* softmin: the softmax of -x */
    bool activation; /* SoftmaxActivation: `mode` picks the axis, no other parameter */
} softmax_kind_t;

/* The sum of x[0, n) in double, over eight independent partial sums. */
DEFT_CLONES static double row_sum_f32(const float *x, int64_t n) {
    double part[8] = {0}, sum = 0;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) part[j] += x[k + j];
    for (; k < n; k++) sum += x[k];
    for (int j = 0; j < 8; j++) sum += part[j];
    return sum;
}

/* A float32 row (softmax over the last axis, the common case): deft's
 * vectorised expf. y may be x itself (the operator runs in place), so
 * log_softmax, which reads x again after the sum, takes its exponentials in
 * a block buffer, not in y. */
enum { LOG_BLOCK = 256 };

/* The row's largest element; NaN once one is met (it then stays). */
static inline float row_max_f32(const float *x, int64_t n) {
    float max = -INFINITY;
    for (int64_t k = 0; k < n; k++)
        if (x[k] > max || x[k] != x[k]) max = x[k];
    return max;
}

DEFT_CLONES static void softmax_row_f32(const float *x, float *y, int64_t n, bool log_form) {
    float max = row_max_f32(x, n);
    if (log_form) {
        float block[LOG_BLOCK];
        double sum = 0;
        for (int64_t at = 0; at < n; at += LOG_BLOCK) {
            int64_t b = n - at < LOG_BLOCK ? n - at : LOG_BLOCK;
            for (int64_t k = 0; k < b; k++) block[k] = deft_expf(x[at + k] - max);
            sum += row_sum_f32(block, b);
        }
        float log_sum = (float)log(sum);
        for (int64_t k = 0; k < n; k++) y[k] = (x[k] - max) - log_sum;
    } else {
        for (int64_t k = 0; k < n; k++) y[k] = deft_expf(x[k] - max);
        float scale = (float)(1 / row_sum_f32(y, n));
        for (int64_t k = 0; k < n; k++) y[k] *= scale;
    }
}

/* log_softmax of short float32 rows (a classifier's 10 classes): the rows of
 * a block share one loop for their exponentials, a vectorised one, where a
 * row of 10 alone left them to a scalar tail. The same arithmetic as
 * softmax_row_f32's, row by row. */
DEFT_CLONES static void log_softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t n) {
    float block[LOG_BLOCK], max[LOG_BLOCK];
    const int64_t per = LOG_BLOCK / n;
    for (int64_t r0 = 0; r0 < rows; r0 += per, x += per * n, y += per * n) {
        const int64_t m = rows - r0 < per ? rows - r0 : per;
        for (int64_t r = 0; r < m; r++) {
            max[r] = row_max_f32(x + r * n, n);
            for (int64_t k = 0; k < n; k++) block[r * n + k] = x[r * n + k] - max[r];
        }
        for (int64_t e = 0; e < m * n; e++) block[e] = deft_expf(block[e]);
        for (int64_t r = 0; r < m; r++) {
            float log_sum = (float)log(row_sum_f32(block + r * n, n));
            for (int64_t k = 0; k < n; k++) y[r * n + k] = (x[r * n + k] - max[r]) - log_sum;
        }
    }
}

static void softmax_range(void *arg, int64_t begin, int64_t end) {
    const deft_softmax_plan_t *s = arg;
    if (s->x_dtype == DEFT_DT_FLOAT32 && s->y_dtype == DEFT_DT_FLOAT32 && s->inner == 1 &&
        s->scale == 1 && !s->length) {
        if (s->log_form && s->n > 0 && s->n <= LOG_BLOCK / 4) {
            log_softmax_rows_f32((const float *)s->x + begin * s->n, (float *)s->y + begin * s->n,
                                 end - begin, s->n);
            return;
        }
        for (int64_t line = begin; line < end; line++)
            softmax_row_f32((const float *)s->x + line * s->n, (float *)s->y + line * s->n, s->n,
                            s->log_form);
        return;
    }
    for (int64_t line = begin; line < end; line++) deft_softmax_plan_line(s, line);
}

/* softmax, log_softmax, softmin: p[0] axis, p[1] temperature, p[2] dtype, p[3] use_length. */
static const deft_param_def_t softmax_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "axis to normalise over", NULL, false},
    {"temperature", DEFT_PARAM_FLOAT, "None", "divides the input first (None: 1)", NULL, true},
    {"dtype", DEFT_PARAM_DTYPE, "None",
     "output dtype: float16, float32 or float64 (None: the "
     "input's)",
     NULL, true},
    {"use_length", DEFT_PARAM_BOOL, "False", "input 1 (length) masks each line after its length",
     NULL, true},
    {0}};

static const char *const activation_modes[] = {"instance", "channel", NULL};
static const deft_param_def_t activation_params[] = {
    {"mode", DEFT_PARAM_ENUM, "instance",
     "instance: softmax over the last axis; channel: over axis 1", activation_modes, false},
    {0}};

static bool uses_length(const deft_op_t *op, const deft_param_value_t *p) {
    return !((const softmax_kind_t *)op->data)->activation && !p[3].none && p[3].i;
}

static int softmax_num_inputs(const deft_param_value_t *p) {
    return !p[3].none && p[3].i ? 2 : 1;
}

/* The axis of a call, normalised. */
static int softmax_axis(const deft_op_t *op, const deft_param_value_t *p, int ndim, int *axis) {
    if (!((const softmax_kind_t *)op->data)->activation)
        return deft_op_axis(op, "axis", p[0].i, ndim, axis);
    if (p[0].i == 0) { /* instance: each row of the input flattened to 2-D (n, last) */
        *axis = ndim - 1;
        return ndim > 0 ? 0 : deft_op_error(op, DEFT_ERR_VALUE, "input 0 must have an axis");
    }
    if (ndim < 3)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "mode=channel needs an input of 3 or more dimensions, got %d", ndim);
    *axis = 1;
    return 0;
}

static int check_length(const deft_op_t *op, const deft_desc_t *in, int axis) {
    deft_shape_t want = {.ndim = 0};
    for (int d = 0; d < in[0].shape.ndim; d++)
        if (d != axis) want.dims[want.ndim++] = in[0].shape.dims[d];
    if (want.ndim == 0) want.ndim = 1, want.dims[0] = 1;
    if (deft_op_check_dtype_arith(op, 1, in[1].dtype)) return -1;
    if (deft_shape_equal(&want, &in[1].shape)) return 0;
    char sl[DEFT_SHAPE_STR_MAX], sw[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "input 1 (length) has shape %s, expected %s (the data's shape without "
                         "axis %d)",
                         deft_shape_format(&in[1].shape, sl, sizeof sl),
                         deft_shape_format(&want, sw, sizeof sw), axis);
}

static int softmax_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_desc_t *in, int *nout, deft_desc_t *out) {
    const softmax_kind_t *kind = op->data;
    int axis;
    if (deft_op_check_dtype_float_or_half(op, 0, in[0].dtype) ||
        softmax_axis(op, p, in[0].shape.ndim, &axis))
        return -1;
    out[0] = in[0];
    if (!kind->activation) {
        if (!p[1].none && p[1].f == 0)
            return deft_op_error(op, DEFT_ERR_VALUE, "temperature must not be 0");
        if (!p[2].none) {
            deft_dtype_t dt = (deft_dtype_t)p[2].i;
            if (dt != DEFT_DT_FLOAT16 && !deft_dtype_is_float(dt))
                return deft_op_error(op, DEFT_ERR_VALUE,
                                     "dtype is %s, expected float16, float32 or float64",
                                     deft_dtype_name(dt));
            out[0].dtype = dt;
        }
        int want = uses_length(op, p) ? 2 : 1;
        if (nin != want)
            return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d (use_length=%s)",
                                 nin, want, want == 2 ? "True" : "False");
        if (want == 2 && check_length(op, in, axis)) return -1;
    }
    *nout = 1;
    return 0;
}

/* Backward inference: the data has the output's shape (and dtype, unless
 * `dtype` set the output's); lengths are not inferred. */
static int softmax_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                deft_desc_t *in, bool *known, const deft_desc_t *out,
                                const bool *out_known) {
    (void)nin;
    bool own_dtype = ((const softmax_kind_t *)op->data)->activation || p[2].none;
    if (known[0] || !out_known[0] || !own_dtype) return 0;
    in[0] = out[0];
    known[0] = true;
    return 0;
}

/* The plan of a call on these tensors (axis already checked by infer). */
static int softmax_plan(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, const deft_tensor_t *out, deft_softmax_plan_t *s) {
    const softmax_kind_t *kind = op->data;
    int axis;
    if (softmax_axis(op, p, in[0].shape.ndim, &axis)) return -1;
    double temperature = kind->activation || p[1].none ? 1 : p[1].f;
    *s = (deft_softmax_plan_t){.x = deft_tensor_data(&in[0]),
                               .y = deft_tensor_data(&out[0]),
                               .x_dtype = in[0].dtype,
                               .y_dtype = out[0].dtype,
                               .length = nin > 1 ? deft_tensor_data(&in[1]) : NULL,
                               .length_dtype = nin > 1 ? in[1].dtype : DEFT_DT_INT32,
                               .n = in[0].shape.dims[axis],
                               .outer = 1,
                               .inner = 1,
                               .scale = (kind->negate ? -1 : 1) / temperature,
                               .log_form = kind->log_form};
    for (int d = 0; d < axis; d++) s->outer *= in[0].shape.dims[d];
    for (int d = axis + 1; d < in[0].shape.ndim; d++) s->inner *= in[0].shape.dims[d];
    return 0;
}

/* Lengths must be counts of elements of their line (MXNet reads past the line otherwise). */
static int check_length_values(const deft_op_t *op, const deft_softmax_plan_t *s) {
    for (int64_t line = 0; line < s->outer * s->inner; line++) {
        double len = deft_load_double(s->length, s->length_dtype, line);
        if (!(len >= 0 && len <= (double)s->n))
            return deft_op_error(op, DEFT_ERR_VALUE, "length[%lld] is %g, expected 0 to %lld",
                                 (long long)line, len, (long long)s->n);
    }
    return 0;
}

static int softmax_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_softmax_plan_t s;
    if (softmax_plan(op, p, nin, in, out, &s)) return -1;
    int64_t lines = s.outer * s.inner;
    if (s.length && s.n && check_length_values(op, &s)) return -1;
    int64_t grain = DEFT_PARALLEL_GRAIN / (s.n ? 4 * s.n : 1);
    deft_parallel_for(s.n ? lines : 0, grain < 1 ? 1 : grain, softmax_range, &s);
    return 0;
}

/* ---- softmax_cross_entropy ---- */

static int bad_label(const deft_op_t *op, int64_t b, double label, int64_t classes) {
    return deft_op_error(op, DEFT_ERR_VALUE,
                         "label[%lld] is %g, expected a class index in [0, %lld)", (long long)b,
                         label, (long long)classes);
}

static int xent_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    char sd[DEFT_SHAPE_STR_MAX], sl[DEFT_SHAPE_STR_MAX];
    if (deft_op_check_dtype_float_or_half(op, 0, in[0].dtype) ||
        deft_op_check_dtype_arith(op, 1, in[1].dtype))
        return -1;
    if (in[0].shape.ndim != 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s, expected (batch, classes)",
                             deft_shape_format(&in[0].shape, sd, sizeof sd));
    if (in[1].shape.ndim != 1 || in[1].shape.dims[0] != in[0].shape.dims[0])
        return deft_op_error(op, DEFT_ERR_VALUE, "input 1 (label) has shape %s, expected (%lld,)",
                             deft_shape_format(&in[1].shape, sl, sizeof sl),
                             (long long)in[0].shape.dims[0]);
    out[0].shape.ndim = 1;
    out[0].shape.dims[0] = 1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

/* Row b's label, which must be a class index. */
static int xent_label(const deft_op_t *op, const deft_tensor_t *labels, int64_t b, int64_t classes,
                      int64_t *out) {
    double label = deft_load_double(deft_tensor_data(labels), labels->dtype, b);
    if (!deft_xent_label_ok(label, classes)) return bad_label(op, b, label, classes);
    *out = (int64_t)label;
    return 0;
}

/*
 * float32 rows a chunk at a time: each row's maximum, then the exponentials
 * of the whole chunk in one vectorised loop (deft's expf: the rows of a
 * classifier are too short, often 10, for a vector per row), then each
 * row's sum in double. Rows longer than a chunk take the double path.
 */
enum { XENT_CHUNK = 1024 };

DEFT_CLONES static void row_exps_f32(const float *x, float *e, int64_t rows, int64_t classes,
                                     float *max, double *sums) {
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * classes;
        float m = -INFINITY;
        for (int64_t k = 0; k < classes; k++)
            if (row[k] > m || row[k] != row[k]) m = row[k];
        max[r] = m;
        for (int64_t k = 0; k < classes; k++) e[r * classes + k] = row[k] - m;
    }
    for (int64_t i = 0; i < rows * classes; i++) e[i] = deft_expf(e[i]);
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        for (int64_t k = 0; k < classes; k++) sum += e[r * classes + k];
        sums[r] = sum;
    }
}

/* The labels of rows [first, first + n), checked. */
static int xent_labels(const deft_op_t *op, const deft_tensor_t *labels, int64_t first, int64_t n,
                       int64_t classes, int64_t *out) {
    for (int64_t r = 0; r < n; r++)
        if (xent_label(op, labels, first + r, classes, &out[r])) return -1;
    return 0;
}

static int xent_forward_f32(const deft_op_t *op, const deft_tensor_t *in, double *total) {
    int64_t batch = in[0].shape.dims[0], classes = in[0].shape.dims[1];
    int64_t chunk = XENT_CHUNK / classes, label[XENT_CHUNK];
    float e[XENT_CHUNK], max[XENT_CHUNK];
    double sums[XENT_CHUNK];
    const float *x = deft_tensor_data(&in[0]);
    for (int64_t b = 0; b < batch; b += chunk) {
        int64_t rows = batch - b < chunk ? batch - b : chunk;
        if (xent_labels(op, &in[1], b, rows, classes, label)) return -1;
        row_exps_f32(x + b * classes, e, rows, classes, max, sums);
        for (int64_t r = 0; r < rows; r++)
            *total += max[r] + log(sums[r]) - x[(b + r) * classes + label[r]];
    }
    return 0;
}

static int xent_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    int64_t batch = in[0].shape.dims[0], classes = in[0].shape.dims[1];
    double total = 0;
    if (in[0].dtype == DEFT_DT_FLOAT32 && classes > 0 && classes <= XENT_CHUNK) {
        if (xent_forward_f32(op, in, &total)) return -1;
    } else {
        for (int64_t b = 0; b < batch; b++) {
            int64_t label = 0;
            if (xent_label(op, &in[1], b, classes, &label)) return -1;
            total += deft_xent_row_loss(deft_tensor_data(&in[0]), in[0].dtype, b, classes, label);
        }
    }
    deft_store_double(deft_tensor_data(&out[0]), out[0].dtype, 0, total);
    return 0;
}

/* d data of the summed cross-entropy: g (softmax(data) - one_hot(label)). */
static int xent_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_desc_t loss;
    int n;
    if (xent_infer(op, p, nin - 1, in + 1, &n, &loss)) return -1;
    if (deft_shape_size(&in[0].shape) != 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (the loss gradient) must have 1 element");
    out[0] = in[1];
    *nout = 1;
    return 0;
}

/* float32: g (e / sum - one_hot), the exponentials computed into dx. */
static int xent_backward_f32(const deft_op_t *op, const deft_tensor_t *in, double g,
                             const deft_tensor_t *out) {
    int64_t batch = in[1].shape.dims[0], classes = in[1].shape.dims[1];
    int64_t chunk = XENT_CHUNK / classes, label[XENT_CHUNK];
    float max[XENT_CHUNK];
    double sums[XENT_CHUNK];
    const float *x = deft_tensor_data(&in[1]);
    float *dx = deft_tensor_data(&out[0]);
    for (int64_t b = 0; b < batch; b += chunk) {
        int64_t rows = batch - b < chunk ? batch - b : chunk;
        if (xent_labels(op, &in[2], b, rows, classes, label)) return -1;
        float *d = dx + b * classes;
        row_exps_f32(x + b * classes, d, rows, classes, max, sums);
        for (int64_t r = 0; r < rows; r++) {
            float scale = (float)(g / sums[r]);
            for (int64_t k = 0; k < classes; k++) d[r * classes + k] *= scale;
            d[r * classes + label[r]] -= (float)g;
        }
    }
    return 0;
}

static int xent_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    int64_t batch = in[1].shape.dims[0], classes = in[1].shape.dims[1];
    double g = deft_load_double(deft_tensor_data(&in[0]), in[0].dtype, 0);
    if (in[1].dtype == DEFT_DT_FLOAT32 && classes > 0 && classes <= XENT_CHUNK)
        return xent_backward_f32(op, in, g, out);
    for (int64_t b = 0; b < batch; b++) {
        int64_t label = 0;
        if (xent_label(op, &in[2], b, classes, &label)) return -1;
        deft_xent_row_grad(deft_tensor_data(&in[1]), deft_tensor_data(&out[0]), in[1].dtype, b,
                           classes, label, g);
    }
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int softmax_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    deft_softmax_plan_t s;
    if (softmax_plan(op, p, nin, in, out, &s)) return -1;
    return deft_gpu_softmax(deft_gpu_of(&in[0]), &s);
}

/* What the label check keeps to word its failure, maybe later (flag.cuh). */
typedef struct label_report {
    const deft_op_t *op;
    int64_t classes;
} label_report_t;

static int report_label(const void *ctx, int64_t b, double label) {
    const label_report_t *r = ctx;
    return bad_label(r->op, b, label, r->classes);
}

/* Both directions of the loss: the kernels check the labels, skip bad rows
 * and report the first. */
static int xent_gpu(const deft_op_t *op, const deft_tensor_t *grad, const deft_tensor_t *data,
                    const deft_tensor_t *labels, const deft_tensor_t *out) {
    deft_gpu_xent_t x = {.dtype = data->dtype,
                         .x = deft_tensor_data(data),
                         .labels = deft_tensor_data(labels),
                         .label_dtype = labels->dtype,
                         .batch = data->shape.dims[0],
                         .classes = data->shape.dims[1],
                         .g = grad ? deft_tensor_data(grad) : NULL,
                         .g_dtype = grad ? grad->dtype : data->dtype,
                         .out = deft_tensor_data(out)};
    label_report_t r = {op, x.classes};
    deft_check_report_t how = {report_label, &r, sizeof r};
    return deft_gpu_xent(deft_gpu_of(data), &x, &how);
}

static int xent_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    return xent_gpu(op, NULL, &in[0], &in[1], &out[0]);
}

static int xent_backward_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                     const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    return xent_gpu(op, &in[0], &in[1], &in[2], &out[0]);
}
#endif

/* ---- gradients ---- */

/* 1 where a line's element takes part (before its length), else 0: the
 * softmax of zeros under the same lengths is 1/length there and 0 after. */
static deft_gref_t length_mask(deft_grad_builder_t *b, const char *axis) {
    deft_gref_t in[2] = {g_op1(b, "zeros_like", b->input(b, 0), GRAD_NONE), b->input(b, 1)};
    deft_gref_t even =
        b->apply(b, "softmax", 2, in, GRAD_PARAMS("axis", axis, "use_length", "True"), 0);
    return g_op1(b, "_greater_scalar", even, GRAD_PARAMS("scalar", "0"));
}

/*
 * softmax, softmin and SoftmaxActivation: s y (g - sum(g y, axis)), where s
 * is 1 / temperature, negated for softmin (y is 0 after a line's length, so
 * those elements get nothing). log_softmax: s (g - exp(y) sum(g, axis)),
 * masked to the lengths when there are some. The gradient is cast back to
 * the input's dtype when `dtype` gave the output another. Lengths get none.
 */
static int grad_softmax(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    const softmax_kind_t *kind = b->op->data;
    deft_gref_t y = b->output(b, 0), g = b->out_grad(b, 0), dx;
    const char *axis = kind->activation ? (p[0].i ? "1" : "-1") : g_attr(b, "axis", "-1");
    const char *const *keep = GRAD_PARAMS("axis", axis, "keepdims", "true");
    if (kind->log_form) {
        deft_gref_t mask = {NULL, 0};
        if (nin > 1) g = g_mul(b, g, mask = length_mask(b, axis));
        deft_gref_t spread = g_op2(b, "broadcast_mul", g_op1(b, "exp", y, GRAD_NONE),
                                   g_op1(b, "sum", g, keep), GRAD_NONE);
        dx = g_op2(b, "elemwise_sub", g, spread, GRAD_NONE);
        if (nin > 1) dx = g_mul(b, dx, mask);
    } else {
        deft_gref_t dot = g_op1(b, "sum", g_mul(b, g, y), keep);
        dx = g_mul(b, y, g_op2(b, "broadcast_sub", g, dot, GRAD_NONE));
    }
    double scale = (kind->negate ? -1 : 1) / (kind->activation || p[1].none ? 1 : p[1].f);
    if (scale != 1) dx = g_scale(b, dx, scale);
    if (!kind->activation && !p[2].none) dx = g_op2(b, "_cast_like", dx, b->input(b, 0), GRAD_NONE);
    in_grads[0] = dx;
    return 0;
}

static int grad_xent(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), b->input(b, 1)};
    in_grads[0] = b->apply(b, "_backward_softmax_cross_entropy", 3, in, GRAD_NONE, 0);
    return 0; /* labels are not differentiable */
}

static const char *const data_label[] = {"data", "label", NULL};
static const char *const data_length[] = {"data", "length", NULL};

#define SOFTMAX_OP(name_, doc, log_, negate_)                                                      \
    {                                                                                              \
        .name = name_, .description = doc " With use_length, input 1 holds each line's length.",   \
        .input_names = data_length, .min_inputs = 1, .max_inputs = 2,                              \
        .num_inputs = softmax_num_inputs, .params = softmax_params, .infer = softmax_infer,        \
        .forward = softmax_forward, .forward_gpu = DEFT_GPU(softmax_forward_gpu),                  \
        .inplace_input = 0, .infer_inputs = softmax_infer_inputs, .gradient = grad_softmax,        \
        .data = &(const softmax_kind_t) {                                                          \
            .log_form = log_, .negate = negate_                                                    \
        }                                                                                          \
    }
static const char *const grad_data_label[] = {"grad", "data", "label", NULL};

static const deft_op_t softmax_ops[] = {
    SOFTMAX_OP("softmax", "Softmax along an axis: exp(x / t) / sum(exp(x / t)), stably.", false,
               false),
    SOFTMAX_OP("log_softmax", "Log of softmax along an axis, computed stably.", true, false),
    SOFTMAX_OP("softmin", "Softmax of -x along an axis: exp(-x / t) / sum(exp(-x / t)).", false,
               true),
    {.name = "SoftmaxActivation",
     .description = "Softmax of each instance (over the last axis) or, with mode=channel, across "
                    "the channels (axis 1) at each position.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = activation_params,
     .infer = softmax_infer,
     .forward = softmax_forward,
     .forward_gpu = DEFT_GPU(softmax_forward_gpu),
     .inplace_input = 0,
     .data = &(const softmax_kind_t){.activation = true},
     .infer_inputs = softmax_infer_inputs,
     .gradient = grad_softmax},
    {.name = "softmax_cross_entropy",
     .description = "Sum over the batch of -log(softmax(data)[label]), for data (batch, classes) "
                    "and integer class labels (batch,); the result has shape (1,).",
     .input_names = data_label,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = xent_infer,
     .forward = xent_forward,
     .forward_gpu = DEFT_GPU(xent_forward_gpu),
     .inplace_input = -1,
     .gradient = grad_xent},
    {.name = "_backward_softmax_cross_entropy",
     .description = "Gradient of softmax_cross_entropy with respect to data.",
     .input_names = grad_data_label,
     .min_inputs = 3,
     .max_inputs = 3,
     .infer = xent_backward_infer,
     .forward = xent_backward_forward,
     .forward_gpu = DEFT_GPU(xent_backward_forward_gpu),
     .inplace_input = -1},
};

DEFT_OP_FAMILY(deft_family_softmax, softmax_ops);
