/*
 * Connectionist temporal classification (Graves et al. 2006) with MXNet's
 * CTCLoss semantics: data (T, N, C) activations, softmax applied inside;
 * label (N, L) class indices, padded; optional data_lengths and
 * label_lengths (N,) when use_data_lengths / use_label_lengths say so. The
 * blank is class 0 (blank_label "first": labels 1..C-1, padded with 0) or
 * class C-1 ("last": labels 0..C-2, padded with -1); without label lengths a
 * label ends at its first padding value. Output: (N,) -log p(label | data).
 *
 * The forward-backward recursions run in log space in float64, one batch
 * item per task. As in MXNet, the gradient with respect to data is made with
 * the loss, into a hidden second output (only when someone reads it), and
 * the operator's gradient scales it by the head gradient (first order only:
 * a second derivative does not see through that output). A label that no
 * alignment of its steps can emit (too long) has an infinite loss and a zero
 * gradient. CPU only.
 */
#include <math.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/math/dtype_math.h"
#include "core/op/grad.h"
#include "core/op/op.h"

enum { P_DATA_LENGTHS, P_LABEL_LENGTHS, P_BLANK };

static double log_add(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* One call: the tensors, its sizes, and each item's lengths (checked first). */
typedef struct ctc_call {
    const deft_tensor_t *data, *label, *loss, *grad; /* grad NULL: not wanted */
    int64_t steps, batch, classes, max_label;
    int blank;
    const int64_t *t_len, *l_len;
    int status; /* of the workspaces' allocation */
} ctc_call_t;

/* Item n's label, extended with blanks around and between: ext[2 * l_len + 1]. */
static void extend(const ctc_call_t *c, int64_t n, int64_t *ext) {
    int64_t size = 2 * c->l_len[n] + 1;
    for (int64_t s = 0; s < size; s++)
        ext[s] = s % 2 ? (int64_t)deft_load_double(deft_tensor_data(c->label), c->label->dtype,
                                                   n * c->max_label + s / 2)
                       : c->blank;
}

/* lp (t_len x C): the log-softmax of item n's activations at each step. */
static void log_softmax(const ctc_call_t *c, int64_t n, int64_t t_len, double *lp) {
    int64_t C = c->classes;
    for (int64_t t = 0; t < t_len; t++) {
        double *row = lp + t * C, top = -INFINITY, sum = 0;
        for (int64_t k = 0; k < C; k++) {
            row[k] = deft_load_double(deft_tensor_data(c->data), c->data->dtype,
                                      (t * c->batch + n) * C + k);
            top = row[k] > top ? row[k] : top;
        }
        for (int64_t k = 0; k < C; k++) sum += exp(row[k] - top);
        for (int64_t k = 0; k < C; k++) row[k] -= top + log(sum);
    }
}

/* Whether state s may be entered from s - 2 (a label unlike the one two back). */
static bool skips(const int64_t *ext, int64_t s) {
    return s >= 2 && ext[s] != ext[s - 2];
}

/* alpha[t][s]: log p of the prefixes ending in state s at step t. */
static void forward_pass(int64_t t_len, int64_t size, int64_t C, const int64_t *ext,
                         const double *lp, double *alpha) {
    for (int64_t s = 0; s < size; s++) alpha[s] = s < 2 ? lp[ext[s]] : -INFINITY;
    for (int64_t t = 1; t < t_len; t++) {
        const double *prev = alpha + (t - 1) * size;
        for (int64_t s = 0; s < size; s++) {
            double v = prev[s];
            if (s >= 1) v = log_add(v, prev[s - 1]);
            if (skips(ext, s)) v = log_add(v, prev[s - 2]);
            alpha[t * size + s] = v + lp[t * C + ext[s]];
        }
    }
}

/* beta[t][s]: log p of the suffixes from state s at step t (its own step included). */
static void backward_pass(int64_t t_len, int64_t size, int64_t C, const int64_t *ext,
                          const double *lp, double *beta) {
    double *end = beta + (t_len - 1) * size;
    for (int64_t s = 0; s < size; s++)
        end[s] = s >= size - 2 ? lp[(t_len - 1) * C + ext[s]] : -INFINITY;
    for (int64_t t = t_len - 2; t >= 0; t--) {
        const double *next = beta + (t + 1) * size;
        for (int64_t s = 0; s < size; s++) {
            double v = next[s];
            if (s + 1 < size) v = log_add(v, next[s + 1]);
            if (s + 2 < size && skips(ext, s + 2)) v = log_add(v, next[s + 2]);
            beta[t * size + s] = v + lp[t * C + ext[s]];
        }
    }
}

/* d loss / d activations = softmax - (sum over s with ext[s] = k of alpha beta) / (p y_k). */
static void item_gradient(const ctc_call_t *c, int64_t n, int64_t t_len, int64_t size,
                          const int64_t *ext, const double *lp, const double *alpha,
                          const double *beta, double log_p, double *acc) {
    int64_t C = c->classes;
    bool finite = isfinite(log_p);
    for (int64_t t = 0; t < c->steps; t++) {
        for (int64_t k = 0; k < C; k++) acc[k] = -INFINITY;
        for (int64_t s = 0; finite && t < t_len && s < size; s++)
            acc[ext[s]] = log_add(acc[ext[s]], alpha[t * size + s] + beta[t * size + s]);
        for (int64_t k = 0; k < C; k++) {
            double g = 0;
            if (finite && t < t_len) g = exp(lp[t * C + k]) - exp(acc[k] - log_p - lp[t * C + k]);
            deft_store_double(deft_tensor_data(c->grad), c->grad->dtype, (t * c->batch + n) * C + k,
                              g);
        }
    }
}

static void ctc_items(void *arg, int64_t begin, int64_t end) {
    ctc_call_t *c = arg;
    int64_t C = c->classes, size_max = 2 * c->max_label + 1;
    size_t words = (size_t)(c->steps * (C + 2 * size_max) + C + 1);
    double *lp = deft_scratch_alloc(sizeof(double) * words);
    int64_t *ext = deft_scratch_alloc(sizeof(int64_t) * (size_t)size_max);
    if (!lp || !ext) {
        __atomic_store_n(&c->status, -1, __ATOMIC_RELAXED);
        deft_scratch_free(lp), deft_scratch_free(ext);
        return;
    }
    double *alpha = lp + c->steps * C, *beta = alpha + c->steps * size_max,
           *acc = beta + c->steps * size_max;
    for (int64_t n = begin; n < end; n++) {
        int64_t t_len = c->t_len[n], size = 2 * c->l_len[n] + 1;
        extend(c, n, ext);
        log_softmax(c, n, t_len, lp);
        forward_pass(t_len, size, C, ext, lp, alpha);
        const double *last = alpha + (t_len - 1) * size;
        double log_p = size > 1 ? log_add(last[size - 1], last[size - 2]) : last[0];
        deft_store_double(deft_tensor_data(c->loss), c->loss->dtype, n, -log_p);
        if (!c->grad) continue;
        backward_pass(t_len, size, C, ext, lp, beta);
        item_gradient(c, n, t_len, size, ext, lp, alpha, beta, log_p, acc);
    }
    deft_scratch_free(lp), deft_scratch_free(ext);
}

/* ---- the lengths and labels, checked before any work ---- */

static double value_at(const deft_tensor_t *t, int64_t i) {
    return deft_load_double(deft_tensor_data(t), t->dtype, i);
}

/* Item n's label length: given, or up to the first padding value. */
static int label_length(const deft_op_t *op, const ctc_call_t *c, const deft_tensor_t *lengths,
                        int64_t n, int64_t *l_len) {
    int64_t L = c->max_label;
    double pad = c->blank == 0 ? 0 : -1;
    if (lengths) {
        double v = value_at(lengths, n);
        if (!(v >= 0 && v <= (double)L) || v != floor(v))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "label_lengths[%lld] is %g, expected an integer in [0, %lld]",
                                 (long long)n, v, (long long)L);
        *l_len = (int64_t)v;
    } else {
        *l_len = 0;
        while (*l_len < L && value_at(c->label, n * L + *l_len) != pad) ++*l_len;
    }
    int64_t lo = c->blank == 0 ? 1 : 0, hi = c->blank == 0 ? c->classes : c->classes - 1;
    for (int64_t j = 0; j < *l_len; j++) {
        double v = value_at(c->label, n * L + j);
        if (!(v >= (double)lo && v < (double)hi) || v != floor(v))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "item %lld: labels must be in [%lld, %lld) (class %d is the "
                                 "blank), got label[%lld] = %g",
                                 (long long)n, (long long)lo, (long long)hi, c->blank, (long long)j,
                                 v);
    }
    return 0;
}

static int check_items(const deft_op_t *op, const deft_param_value_t *p, const deft_tensor_t *in,
                       ctc_call_t *c, int64_t *t_len, int64_t *l_len) {
    const deft_tensor_t *data_lengths = p[P_DATA_LENGTHS].i ? &in[2] : NULL;
    const deft_tensor_t *label_lengths =
        p[P_LABEL_LENGTHS].i ? &in[2 + (data_lengths != NULL)] : NULL;
    for (int64_t n = 0; n < c->batch; n++) {
        t_len[n] = c->steps;
        if (data_lengths) {
            double v = value_at(data_lengths, n);
            if (!(v >= 1 && v <= (double)c->steps) || v != floor(v))
                return deft_op_error(op, DEFT_ERR_VALUE,
                                     "data_lengths[%lld] is %g, expected an integer in [1, %lld]",
                                     (long long)n, v, (long long)c->steps);
            t_len[n] = (int64_t)v;
        }
        if (label_length(op, c, label_lengths, n, &l_len[n])) return -1;
    }
    return 0;
}

static int ctc_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const deft_shape_t *s = &in[0].shape;
    ctc_call_t c = {.data = &in[0],
                    .label = &in[1],
                    .loss = &out[0],
                    .grad = deft_op_output_wanted(1) ? &out[1] : NULL,
                    .steps = s->dims[0],
                    .batch = s->dims[1],
                    .classes = s->dims[2],
                    .max_label = in[1].shape.dims[1]};
    c.blank = p[P_BLANK].i == 0 ? 0 : (int)c.classes - 1;
    int64_t *lengths = deft_scratch_alloc(sizeof(int64_t) * (2 * (size_t)c.batch + 1));
    if (!lengths) return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for the lengths");
    c.t_len = lengths, c.l_len = lengths + c.batch;
    int status = check_items(op, p, in, &c, lengths, lengths + c.batch);
    if (status == 0 && c.steps > 0) {
        deft_parallel_for(c.batch, 1, ctc_items, &c);
        if (c.status)
            status = deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for CTC's work");
    } else if (status == 0) { /* no steps: only an empty label has an alignment, the empty one */
        for (int64_t n = 0; n < c.batch; n++)
            deft_store_double(deft_tensor_data(c.loss), c.loss->dtype, n,
                              c.l_len[n] ? INFINITY : 0);
    }
    deft_scratch_free(lengths);
    return status;
}

/* ---- shapes, inputs and the gradient ---- */

static int ctc_num_inputs(const deft_param_value_t *p) {
    return 2 + (p[P_DATA_LENGTHS].i != 0) + (p[P_LABEL_LENGTHS].i != 0);
}

static int ctc_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (nin != ctc_num_inputs(p))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "got %d inputs, expected %d: data, label%s%s (use_data_lengths and "
                             "use_label_lengths say which lengths come)",
                             nin, ctc_num_inputs(p), p[P_DATA_LENGTHS].i ? ", data_lengths" : "",
                             p[P_LABEL_LENGTHS].i ? ", label_lengths" : "");
    const deft_shape_t *d = &in[0].shape, *l = &in[1].shape;
    char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    if (d->ndim != 3 || l->ndim != 2 || l->dims[0] != d->dims[1])
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "data is %s and label %s, expected (steps, batch, classes) and "
                             "(batch, label length)",
                             deft_shape_format(d, a, sizeof a), deft_shape_format(l, b, sizeof b));
    if (d->dims[2] < 1 || (d->dims[2] < 2 && l->dims[1] > 0))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "data has %lld classes: none left for labels "
                             "besides the blank",
                             (long long)d->dims[2]);
    for (int i = 2; i < nin; i++)
        if (in[i].shape.ndim != 1 || in[i].shape.dims[0] != d->dims[1])
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d (lengths) is %s, expected (%lld,)",
                                 i, deft_shape_format(&in[i].shape, a, sizeof a),
                                 (long long)d->dims[1]);
    for (int i = 1; i < nin; i++)
        if (!deft_dtype_is_arith(in[i].dtype) && !deft_dtype_is_float(in[i].dtype))
            return deft_op_error(op, DEFT_ERR_TYPE, "input %d is %s, expected numbers", i,
                                 deft_dtype_name(in[i].dtype));
    out[0] = (deft_desc_t){{1, {d->dims[1]}}, in[0].dtype};
    out[1] = in[0]; /* the hidden gradient */
    *nout = 2;
    return 0;
}

/* d(sum g * loss)/d data = the hidden gradient times g, broadcast over steps and classes. */
static int ctc_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t g = g_op1(b, "Reshape", b->out_grad(b, 0), GRAD_PARAMS("shape", "(1,-1,1)"));
    in_grads[0] = g_op2(b, "broadcast_mul", b->output(b, 1), g, GRAD_NONE);
    return 0;
}

static const char *const blank_choices[] = {"first", "last", NULL};
static const deft_param_def_t ctc_params[] = {
    {"use_data_lengths", DEFT_PARAM_BOOL, "false", "whether input data_lengths comes", NULL, false},
    {"use_label_lengths", DEFT_PARAM_BOOL, "false", "whether input label_lengths comes", NULL,
     false},
    {"blank_label", DEFT_PARAM_ENUM, "first",
     "the blank is class 0 (labels padded with 0) or C - 1 (padded with -1)", blank_choices, false},
    {0}};
static const char *const ctc_inputs[] = {"data", "label", "data_lengths", "label_lengths", NULL};
static const char *const ctc_outputs[] = {"output", NULL};

static const deft_op_t ctc_ops[] = {
    {.name = "CTCLoss",
     .description = "Connectionist temporal classification loss of (steps, batch, classes) "
                    "activations (softmax inside) and padded labels: (batch,) -log p(label).",
     .input_names = ctc_inputs,
     .min_inputs = 2,
     .max_inputs = 4,
     .params = ctc_params,
     .infer = ctc_infer,
     .forward = ctc_forward,
     .inplace_input = -1,
     .num_outputs = deft_op_two_outputs,
     .num_visible_outputs = deft_op_one_visible,
     .output_names = ctc_outputs,
     .num_inputs = ctc_num_inputs,
     .gradient = ctc_gradient},
};

DEFT_OP_FAMILY(deft_family_ctc_loss, ctc_ops);
