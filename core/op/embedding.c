/*
 * Embedding, as MXNet's: row data[i] of weight (input_dim, output_dim) for
 * each index, indices clipped into [0, input_dim). It is take(weight, data)
 * along axis 0 in clip mode, so it runs take's kernels (CPU and GPU), and its
 * gradient is take's: the head gradient's rows added into the rows they came
 * from (a dense gradient; sparse_grad is accepted and means the same).
 */
#include "core/op/grad.h"
#include "core/op/op.h"
#include "core/op/registry.h"

static const deft_param_def_t embedding_params[] = {
    {"input_dim", DEFT_PARAM_INT, NULL, "vocabulary size: rows of the weight", NULL, false},
    {"output_dim", DEFT_PARAM_INT, NULL, "embedding size: columns of the weight", NULL, false},
    {"dtype", DEFT_PARAM_DTYPE, "float32", "dtype of the weight and output", NULL, false},
    {"sparse_grad", DEFT_PARAM_BOOL, "false", "accepted for MXNet compatibility: dense gradient",
     NULL, false},
    {0}};

enum { P_INPUT_DIM, P_OUTPUT_DIM, P_DTYPE };

static const char *const embedding_inputs[] = {"data", "weight", NULL};

static int check_dims(const deft_op_t *op, const deft_param_value_t *p) {
    if (p[P_INPUT_DIM].i < 1 || p[P_OUTPUT_DIM].i < 1)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input_dim is %lld and output_dim %lld, expected both >= 1",
                             (long long)p[P_INPUT_DIM].i, (long long)p[P_OUTPUT_DIM].i);
    return 0;
}

static int embedding_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (check_dims(op, p) || deft_op_check_dtype_arith(op, 0, in[0].dtype)) return -1;
    const deft_shape_t *w = &in[1].shape;
    if (w->ndim != 2 || w->dims[0] != p[P_INPUT_DIM].i || w->dims[1] != p[P_OUTPUT_DIM].i) {
        char text[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "weight has shape %s, expected (input_dim, output_dim) = (%lld, %lld)",
                             deft_shape_format(w, text, sizeof text), (long long)p[P_INPUT_DIM].i,
                             (long long)p[P_OUTPUT_DIM].i);
    }
    if (in[1].dtype != (deft_dtype_t)p[P_DTYPE].i)
        return deft_op_error(op, DEFT_ERR_TYPE, "weight is %s, but dtype is %s",
                             deft_dtype_name(in[1].dtype),
                             deft_dtype_name((deft_dtype_t)p[P_DTYPE].i));
    if (in[0].shape.ndim + 1 > DEFT_SHAPE_MAX_NDIM)
        return deft_op_error(op, DEFT_ERR_VALUE, "data has %d dimensions, at most %d",
                             in[0].shape.ndim, DEFT_SHAPE_MAX_NDIM - 1);
    out[0].dtype = in[1].dtype;
    out[0].shape = in[0].shape;
    out[0].shape.dims[out[0].shape.ndim++] = p[P_OUTPUT_DIM].i;
    *nout = 1;
    return 0;
}

/* The weight's shape and dtype follow from the parameters alone. */
static int embedding_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  deft_desc_t *in, bool *known, const deft_desc_t *out,
                                  const bool *out_known) {
    (void)op, (void)nin, (void)out, (void)out_known;
    if (known[1] || p[P_INPUT_DIM].i < 1 || p[P_OUTPUT_DIM].i < 1) return 0;
    in[1].shape = (deft_shape_t){.ndim = 2, .dims = {p[P_INPUT_DIM].i, p[P_OUTPUT_DIM].i}};
    in[1].dtype = (deft_dtype_t)p[P_DTYPE].i;
    known[1] = true;
    return 0;
}

/* take's parameters: axis 0, mode clip (the first of its modes). */
static const deft_param_value_t take_rows[2] = {{.i = 0}, {.i = 0}};

static const deft_op_t *take_op(void) {
    return deft_registry_find("take")->op;
}

static int embedding_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin;
    deft_tensor_t args[2] = {in[1], in[0]};
    return take_op()->forward(op, take_rows, 2, args, nout, out);
}

#ifdef DEFT_HAVE_CUDA
static int embedding_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin;
    deft_tensor_t args[2] = {in[1], in[0]};
    return take_op()->forward_gpu(op, take_rows, 2, args, nout, out);
}
#endif

static int embedding_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                              deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), b->input(b, 1)};
    in_grads[1] = b->apply(b, "_backward_take", 3, in, GRAD_PARAMS("axis", "0", "mode", "clip"), 0);
    return 0; /* indices are not differentiable */
}

static const deft_op_t embedding_ops[] = {
    {.name = "Embedding",
     .description = "Maps integer indices to rows of a weight table (input_dim, output_dim); "
                    "indices outside [0, input_dim) are clipped, as MXNet does.",
     .input_names = embedding_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = embedding_params,
     .infer = embedding_infer,
     .infer_inputs = embedding_infer_inputs,
     .forward = embedding_forward,
     .forward_gpu = DEFT_GPU(embedding_forward_gpu),
     .inplace_input = -1,
     .gradient = embedding_gradient},
};

DEFT_OP_FAMILY(deft_family_embedding, embedding_ops);
