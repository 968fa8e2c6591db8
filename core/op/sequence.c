/*
 * Operators over padded batches of sequences: SequenceMask (fill the steps
 * past each sequence's end), SequenceLast (each sequence's last step) and
 * SequenceReverse (reverse each sequence, padding left in place), with the
 * optional sequence_length input (use_sequence_length) and gradients.
 * Data is (max_length, batch, ...) for axis 0, (batch, max_length, ...)
 * for axis 1. Lengths may be float32 (as MXNet passes them) or integers;
 * they are checked to be whole and in range before a kernel reads them.
 */
#include <stdio.h>

#include "core/math/sequence_math.h"
#include "core/op/grad.h"
#include "core/op/index_check.h"
#include "core/op/kernel.h"
#include "core/op/op.h"

/* What sets the operators apart, in op->data. */
typedef struct seq_kind {
    int kernel;         /* DEFT_SEQ_* */
    int axis_param;     /* index of `axis` in the parameter table */
    int max_axis;       /* sequence axes supported: 0 .. max_axis */
    int64_t min_length; /* the smallest length that makes sense */
    bool long_ok;       /* lengths past the axis are fine (SequenceMask: nothing to mask) */
    int data;           /* which input is the data (1 for SequenceLast's gradient) */
} seq_kind_t;

static const seq_kind_t mask_kind = {DEFT_SEQ_MASK, 2, 1, 0, true, 0};
static const seq_kind_t last_kind = {DEFT_SEQ_LAST, 1, 1, 1, false, 0};
static const seq_kind_t last_backward_kind = {DEFT_SEQ_LAST_BACKWARD, 1, 1, 1, false, 1};
static const seq_kind_t reverse_kind = {DEFT_SEQ_REVERSE, 1, 0, 0, false, 0};

static const deft_param_def_t mask_params[] = {
    {"use_sequence_length", DEFT_PARAM_BOOL, "false",
     "take a second input, sequence_length, of shape (batch,)", NULL, false},
    {"value", DEFT_PARAM_FLOAT, "0", "the value written past each sequence's end", NULL, false},
    {"axis", DEFT_PARAM_INT, "0", "the sequence axis: 0 or 1", NULL, false},
    {0}};

static const deft_param_def_t last_params[] = {
    {"use_sequence_length", DEFT_PARAM_BOOL, "false",
     "take a second input, sequence_length, of shape (batch,)", NULL, false},
    {"axis", DEFT_PARAM_INT, "0", "the sequence axis: 0 or 1", NULL, false},
    {0}};

static const deft_param_def_t reverse_params[] = {
    {"use_sequence_length", DEFT_PARAM_BOOL, "false",
     "take a second input, sequence_length, of shape (batch,)", NULL, false},
    {"axis", DEFT_PARAM_INT, "0", "the sequence axis: only 0 (as in MXNet)", NULL, false},
    {0}};

static int seq_num_inputs(const deft_param_value_t *p) {
    return 1 + (p[0].i != 0);
}

static int seq_backward_num_inputs(const deft_param_value_t *p) {
    return 2 + (p[0].i != 0);
}

/* SequenceLast's result: data without the sequence axis, batch first. */
static deft_shape_t last_shape(const deft_shape_t *data, int axis) {
    deft_shape_t r = *data;
    r.dims[0] = data->dims[axis ? 0 : 1];
    for (int d = 1; d + 1 < data->ndim; d++) r.dims[d] = data->dims[d + 1];
    r.ndim--;
    return r;
}

/* Checks shared by every sequence operator: rank, axis and the lengths' shape and dtype. */
static int seq_check(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in) {
    const seq_kind_t *kind = op->data;
    const deft_shape_t *data = &in[kind->data].shape;
    int64_t axis = p[kind->axis_param].i;
    int expected = kind->data + 1 + (p[0].i != 0);
    if (nin != expected)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "got %d inputs, expected %d (use_sequence_length "
                             "is %s)",
                             nin, expected, p[0].i ? "true" : "false");
    if (data->ndim < 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d (data) has %d dimensions, expected 2 or more", kind->data,
                             data->ndim);
    if (axis < 0 || axis > kind->max_axis)
        return deft_op_error(op, DEFT_ERR_VALUE, "axis is %lld, expected %s", (long long)axis,
                             kind->max_axis ? "0 or 1" : "0 (the only axis it supports, as MXNet)");
    deft_shape_t last = last_shape(data, (int)axis);
    if (kind->min_length > 0 && data->dims[axis] == 0 && deft_shape_size(&last) > 0)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "the sequence axis (%lld) of input %d (data) has size 0: there is no "
                             "last step",
                             (long long)axis, kind->data);
    if (!p[0].i) return 0;
    const deft_desc_t *lengths = &in[kind->data + 1];
    deft_shape_t want = {.ndim = 1, .dims = {data->dims[axis ? 0 : 1]}};
    if (deft_op_check_index_dtype(op, kind->data + 1, lengths->dtype)) return -1;
    if (!deft_shape_equal(&lengths->shape, &want)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d (sequence_length) has shape %s, expected %s (the batch)",
                             kind->data + 1, deft_shape_format(&lengths->shape, a, sizeof a),
                             deft_shape_format(&want, b, sizeof b));
    }
    return 0;
}

static int seq_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    const seq_kind_t *kind = op->data;
    if (seq_check(op, p, nin, in)) return -1;
    out[0] = in[0];
    if (kind->kernel == DEFT_SEQ_LAST)
        out[0].shape = last_shape(&in[0].shape, (int)p[kind->axis_param].i);
    *nout = 1;
    return 0;
}

/* _backward_SequenceLast(grad, data[, sequence_length]): zeros shaped like data,
 * with grad at each sequence's last step. */
static int last_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (seq_check(op, p, nin, in)) return -1;
    deft_shape_t want = last_shape(&in[1].shape, (int)p[1].i);
    if (!deft_shape_equal(&in[0].shape, &want) || in[0].dtype != in[1].dtype) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(
            op, DEFT_ERR_VALUE, "input 0 (grad) is %s %s, expected SequenceLast's %s %s",
            deft_shape_format(&in[0].shape, a, sizeof a), deft_dtype_name(in[0].dtype),
            deft_shape_format(&want, b, sizeof b), deft_dtype_name(in[1].dtype));
    }
    out[0] = in[1];
    *nout = 1;
    return 0;
}

static int seq_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const seq_kind_t *kind = op->data;
    const deft_shape_t *data = &in[kind->data].shape;
    int axis = (int)p[kind->axis_param].i;
    deft_seq_plan_t plan = {.src = deft_tensor_data(&in[0]),
                            .dst = deft_tensor_data(&out[0]),
                            .dtype = out[0].dtype,
                            .d0 = data->dims[0],
                            .d1 = data->dims[1],
                            .rest = 1,
                            .axis = axis,
                            .value = kind->kernel == DEFT_SEQ_MASK ? p[1].f : 0};
    for (int d = 2; d < data->ndim; d++) plan.rest *= data->dims[d];
    if (p[0].i) {
        const deft_tensor_t *lengths = &in[kind->data + 1];
        deft_index_check_t check;
        int64_t steps = data->dims[axis];
        deft_index_check_init(&check, lengths, kind->min_length,
                              kind->long_ok ? DEFT_INDEX_UNBOUNDED : steps);
        if (deft_check_indices(op, kind->data + 1, lengths, &check)) return -1;
        plan.lengths = deft_tensor_data(lengths), plan.length_dtype = lengths->dtype;
    }
    if (kind->kernel == DEFT_SEQ_LAST_BACKWARD &&
        deft_device_zero(plan.dst, out[0].device, deft_tensor_nbytes(&out[0])))
        return -1;
    int64_t count = deft_seq_count(&plan, kind->kernel);
    if (count == 0) return 0;
#ifdef DEFT_HAVE_CUDA
    if (out[0].device.type == DEFT_DEV_GPU)
        return deft_gpu_sequence(out[0].device.id, &plan, kind->kernel);
#endif
    size_t elem = deft_dtype_size(plan.dtype);
    for (int64_t at = 0; at < count; at++) deft_seq_apply(&plan, kind->kernel, at, elem);
    return 0;
}

/* ---- gradients ---- */

/* The forward node's sequence_length input, as the second input of a gradient node. */
static int with_lengths(deft_grad_builder_t *b, const deft_param_value_t *p, deft_gref_t first,
                        int lengths_input, deft_gref_t *in) {
    in[0] = first;
    if (p[0].i) in[1] = b->input(b, lengths_input);
    return 1 + (p[0].i != 0);
}

/* Masked steps had no influence: the gradient is the head gradient masked with zeros. */
static int grad_mask(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)nin;
    if (!p[0].i) {
        in_grads[0] = b->out_grad(b, 0);
        return 0;
    }
    deft_gref_t in[2];
    int n = with_lengths(b, p, b->out_grad(b, 0), 1, in);
    in_grads[0] = b->apply(
        b, "SequenceMask", n, in,
        GRAD_PARAMS("use_sequence_length", "true", "value", "0", "axis", g_attr(b, "axis", "0")),
        0);
    return 0; /* lengths are not differentiable */
}

/* Reversing is its own inverse. */
static int grad_reverse(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)nin;
    deft_gref_t in[2];
    int n = with_lengths(b, p, b->out_grad(b, 0), 1, in);
    in_grads[0] = b->apply(b, "SequenceReverse", n, in,
                           GRAD_PARAMS("use_sequence_length", p[0].i ? "true" : "false", "axis",
                                       g_attr(b, "axis", "0")),
                           0);
    return 0;
}

static int grad_last(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0)};
    if (p[0].i) in[2] = b->input(b, 1);
    in_grads[0] = b->apply(b, "_backward_SequenceLast", 2 + (p[0].i != 0), in,
                           GRAD_PARAMS("use_sequence_length", p[0].i ? "true" : "false", "axis",
                                       g_attr(b, "axis", "0")),
                           0);
    return 0;
}

/* _backward_SequenceLast is linear in grad: its gradient takes the last steps again. */
static int grad_last_backward(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                              deft_gref_t *in_grads) {
    (void)nin;
    deft_gref_t in[2];
    int n = with_lengths(b, p, b->out_grad(b, 0), 2, in);
    in_grads[0] = b->apply(b, "SequenceLast", n, in,
                           GRAD_PARAMS("use_sequence_length", p[0].i ? "true" : "false", "axis",
                                       g_attr(b, "axis", "0")),
                           0);
    return 0;
}

static const char *const seq_inputs[] = {"data", "sequence_length", NULL};
static const char *const last_backward_inputs[] = {"grad", "data", "sequence_length", NULL};

static const deft_op_t sequence_ops[] = {
    {.name = "SequenceMask",
     .description = "Sets the steps past each sequence's length to value (the identity without "
                    "sequence_length).",
     .input_names = seq_inputs,
     .min_inputs = 1,
     .max_inputs = 2,
     .num_inputs = seq_num_inputs,
     .params = mask_params,
     .infer = seq_infer,
     .forward = seq_forward,
     .forward_gpu = DEFT_GPU(seq_forward),
     .inplace_input = 0,
     .data = &mask_kind,
     .gradient = grad_mask},
    {.name = "SequenceLast",
     .description = "The last step of each sequence (the last along the axis without "
                    "sequence_length): shape (batch, ...).",
     .input_names = seq_inputs,
     .min_inputs = 1,
     .max_inputs = 2,
     .num_inputs = seq_num_inputs,
     .params = last_params,
     .infer = seq_infer,
     .forward = seq_forward,
     .forward_gpu = DEFT_GPU(seq_forward),
     .inplace_input = -1,
     .data = &last_kind,
     .gradient = grad_last},
    {.name = "_backward_SequenceLast",
     .description = "Gradient of SequenceLast: zeros shaped like data, with grad at each "
                    "sequence's last step.",
     .input_names = last_backward_inputs,
     .min_inputs = 2,
     .max_inputs = 3,
     .num_inputs = seq_backward_num_inputs,
     .params = last_params,
     .infer = last_backward_infer,
     .forward = seq_forward,
     .forward_gpu = DEFT_GPU(seq_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1,
     .data = &last_backward_kind,
     .gradient = grad_last_backward},
    {.name = "SequenceReverse",
     .description = "Reverses the first sequence_length steps of each sequence along axis 0, "
                    "leaving the padding after them in place.",
     .input_names = seq_inputs,
     .min_inputs = 1,
     .max_inputs = 2,
     .num_inputs = seq_num_inputs,
     .params = reverse_params,
     .infer = seq_infer,
     .forward = seq_forward,
     .forward_gpu = DEFT_GPU(seq_forward),
     .inplace_input = -1,
     .data = &reverse_kind,
     .gradient = grad_reverse},
};

DEFT_OP_FAMILY(deft_family_sequence, sequence_ops);
