/*
 * Operators shaped by another input, which gradients need because a graph
 * is built before shapes are known: zeros_like, ones_like, broadcast_like,
 * reshape_like, _reduce_to_like (sum a broadcast gradient back to an
 * input's shape) and add_n (the sum of any number of arrays).
 */

#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/math/reduce_math.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/reduce.h"
#include "core/op/strided.h"

static const char *const data_like[] = {"data", "like", NULL};
static const char *const any_inputs[] = {"args", NULL};

static int fill_like_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)in, (void)nout;
    int64_t n = deft_shape_size(&out[0].shape);
    double value = op->data ? 1.0 : 0.0;
    for (int64_t i = 0; i < n; i++)
        deft_store_double(deft_tensor_data(&out[0]), out[0].dtype, i, value);
    return 0;
}

static int zeros_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* ---- broadcast_like, reshape_like ---- */

static int broadcast_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    deft_shape_t shape;
    if (deft_broadcast_shape(op, &in[0].shape, &in[1].shape, &shape)) return -1;
    if (!deft_shape_equal(&shape, &in[1].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "cannot broadcast %s to %s",
                             deft_shape_format(&in[0].shape, a, sizeof a),
                             deft_shape_format(&in[1].shape, b, sizeof b));
    }
    out[0] = (deft_desc_t){in[1].shape, in[0].dtype};
    *nout = 1;
    return 0;
}

static int reshape_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (deft_shape_size(&in[0].shape) != deft_shape_size(&in[1].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "cannot reshape %s to %s (different sizes)",
                             deft_shape_format(&in[0].shape, a, sizeof a),
                             deft_shape_format(&in[1].shape, b, sizeof b));
    }
    out[0] = (deft_desc_t){in[1].shape, in[0].dtype};
    *nout = 1;
    return 0;
}

/* ---- _reduce_to_like: sum over the axes where `like` was broadcast ---- */

static int reduce_to_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    deft_shape_t shape;
    if (deft_op_check_dtype_float_or_half(op, 0, in[0].dtype) ||
        deft_broadcast_shape(op, &in[1].shape, &in[0].shape, &shape))
        return -1;
    if (!deft_shape_equal(&shape, &in[0].shape)) {
        char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "%s does not broadcast to %s",
                             deft_shape_format(&in[1].shape, b, sizeof b),
                             deft_shape_format(&in[0].shape, a, sizeof a));
    }
    out[0] = (deft_desc_t){in[1].shape, in[0].dtype};
    *nout = 1;
    return 0;
}

/* Most calls come from gradients of broadcasting ops whose inputs had one
 * shape after all (Dropout's x * mask): the sum is then the data itself, a
 * copy, or nothing where the output was planned over the input. Real sums
 * run the reduction kernel over the axes that `like` broadcast along. */
static int reduce_to_like_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin;
    const deft_shape_t *big = &in[0].shape, *small = &out[0].shape;
    if (deft_shape_size(big) == deft_shape_size(small))
        return deft_forward_copy(op, p, nin, in, nout, out);
    int shift = big->ndim - small->ndim;
    uint32_t reduced = 0;
    for (int d = 0; d < big->ndim; d++)
        if (d < shift || small->dims[d - shift] == 1) reduced |= 1u << d;
    return deft_reduce_sum_axes(op, &in[0], reduced, &out[0]);
}

/* ---- add_n ---- */

static const deft_param_def_t add_n_params[] = {DEFT_NUM_ARGS_PARAM, {0}};

static int add_n_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (deft_op_check_num_args(op, &p[0], nin) || deft_op_check_same_dtype(op, nin, in) ||
        (!deft_dtype_is_half(in[0].dtype) && deft_op_check_dtype_arith(op, 0, in[0].dtype)))
        return -1;
    for (int i = 1; i < nin; i++) {
        if (!deft_shape_equal(&in[i].shape, &in[0].shape)) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d has shape %s, expected %s", i,
                                 deft_shape_format(&in[i].shape, b, sizeof b),
                                 deft_shape_format(&in[0].shape, a, sizeof a));
        }
    }
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int add_n_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nout;
    int64_t n = deft_shape_size(&out[0].shape);
    void *y = deft_tensor_data(&out[0]);
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < nin; k++)
            s += deft_load_double(deft_tensor_data(&in[k]), in[k].dtype, i);
        deft_store_double(y, out[0].dtype, i, s);
    }
    return 0;
}

/* ---- _cast_like ---- */

static int cast_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin;
    out[0] = (deft_desc_t){in[0].shape, in[1].dtype};
    *nout = 1;
    return 0;
}

static int cast_like_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    int64_t n = deft_shape_size(&out[0].shape);
    for (int64_t i = 0; i < n; i++)
        deft_store_double(deft_tensor_data(&out[0]), out[0].dtype, i,
                          deft_load_double(deft_tensor_data(&in[0]), in[0].dtype, i));
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int fill_like_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)in, (void)nout;
    if (!op->data)
        return deft_device_zero(deft_tensor_data(&out[0]), out[0].device,
                                deft_tensor_nbytes(&out[0]));
    const double one[DEFT_GPU_MAX_OPS] = {[1] = 1.0};
    return deft_gpu_elementwise(DEFT_GPU_FN_FILL, &out[0], 0, NULL, one);
}

/* A sum over the axes along which out was broadcast to in's shape. */
static int reduce_to_like_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    const deft_shape_t *big = &in[0].shape, *small = &out[0].shape;
    if (deft_shape_size(big) == deft_shape_size(small))
        return deft_forward_copy(op, p, nin, in, nout, out);
    int shift = big->ndim - small->ndim;
    uint32_t reduced = 0;
    for (int d = 0; d < big->ndim; d++)
        if (d < shift || small->dims[d - shift] == 1) reduced |= 1u << d;
    deft_gpu_reduce_t r = {.kind = DEFT_R_SUM,
                           .dtype = in[0].dtype,
                           .x = deft_tensor_data(&in[0]),
                           .y = deft_tensor_data(&out[0])};
    deft_gpu_reduce_layout(big, reduced, &r);
    return deft_gpu_reduce(deft_gpu_of(&in[0]), &r);
}

/* Every input in one kernel, summed in double and rounded once, as on the CPU. */
static int add_n_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nout;
    _Static_assert(DEFT_OP_MAX_INPUTS <= DEFT_GPU_ADD_N_MAX, "add_n's inputs fit one launch");
    deft_gpu_add_n_t a = {.dtype = out[0].dtype,
                          .nin = nin,
                          .n = deft_shape_size(&out[0].shape),
                          .y = deft_tensor_data(&out[0])};
    for (int k = 0; k < nin; k++) a.x[k] = deft_tensor_data(&in[k]);
    return deft_gpu_add_n(deft_gpu_of(&out[0]), &a);
}

static int cast_like_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    const deft_tensor_t *x = &in[0];
    return deft_gpu_elementwise(DEFT_GPU_FN_CAST, &out[0], 1, &x, NULL);
}
#endif

/* ---- _copy_to_device ---- */

static const deft_param_def_t copy_device_params[] = {
    {"device", DEFT_PARAM_DEVICE, NULL, "where the copy goes, e.g. gpu(0)", NULL, false}, {0}};

static int copy_device_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* ---- gradients ---- */

static int grad_broadcast_like(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_reduce_to_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

static int grad_reduce_to_like(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "broadcast_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

static int grad_cast_like(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_cast_like", b->out_grad(b, 0), b->input(b, 0), GRAD_NONE);
    return 0;
}

static int grad_copy_to_device(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads) {
    (void)p, (void)nin;
    /* The placement pass puts a gradient on its forward node's device and
     * copies it across again where needed. */
    in_grads[0] = b->out_grad(b, 0);
    return 0;
}

static int grad_add_n(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)p;
    for (int i = 0; i < nin; i++) in_grads[i] = b->out_grad(b, 0);
    return 0;
}

/* The last input is the `like`: only its shape and dtype are read. */
#define LIKE_OP(name_, doc, inputs, n, infer_, forward_, gpu_, data_, grad)                        \
    LIKE_OP_INPLACE(name_, doc, inputs, n, infer_, forward_, gpu_, data_, grad, -1)
/* ... whose output may be written over input `inplace` (of the same size) */
#define LIKE_OP_INPLACE(name_, doc, inputs, n, infer_, forward_, gpu_, data_, grad, inplace)       \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = inputs, .min_inputs = n,                 \
        .max_inputs = n, .infer = infer_, .forward = forward_, .forward_gpu = DEFT_GPU(gpu_),      \
        .inplace_input = inplace, .data = data_, .gradient = grad, .shape_inputs = 1u << (n - 1)   \
    }

static const deft_op_t like_ops[] = {
    LIKE_OP("zeros_like", "An array of zeros with the shape and dtype of the input.",
            deft_op_data_input, 1, zeros_like_infer, fill_like_forward, fill_like_forward_gpu, NULL,
            NULL),
    LIKE_OP("ones_like", "An array of ones with the shape and dtype of the input.",
            deft_op_data_input, 1, zeros_like_infer, fill_like_forward, fill_like_forward_gpu,
            "ones", NULL),
    LIKE_OP("broadcast_like", "Broadcasts data to the shape of `like`.", data_like, 2,
            broadcast_like_infer, deft_forward_broadcast_input, deft_forward_broadcast_input, NULL,
            grad_broadcast_like),
    LIKE_OP("reshape_like", "Data in the shape of `like` (same number of elements).", data_like, 2,
            reshape_like_infer, deft_forward_copy, deft_forward_copy, NULL,
            deft_gradient_reshape_back),
    LIKE_OP_INPLACE(
        "_reduce_to_like",
        "Sums data over the axes along which `like` would be broadcast to data's shape: "
        "the gradient of broadcasting.",
        data_like, 2, reduce_to_like_infer, reduce_to_like_forward, reduce_to_like_forward_gpu,
        NULL, grad_reduce_to_like, 0 /* a same-size sum: nothing to do */),
    LIKE_OP("_cast_like", "Data converted to the dtype of `like`: the gradient of Cast.", data_like,
            2, cast_like_infer, cast_like_forward, cast_like_forward_gpu, NULL, grad_cast_like),
    {.name = "_copy_to_device",
     .description = "Copies data to a device; inserted by device placement where an edge "
                    "crosses devices.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = copy_device_params,
     .infer = copy_device_infer,
     .forward = deft_forward_copy,
     .forward_gpu = DEFT_GPU(deft_forward_copy),
     .output_device = deft_output_device_param0,
     .any_device = true,
     .inplace_input = -1,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_copy_to_device},
    {.name = "add_n",
     .description =
         "Elementwise sum of any number of arrays of one shape (MXNet's ElementWiseSum).",
     .input_names = any_inputs,
     .min_inputs = 1,
     .max_inputs = DEFT_OP_MAX_INPUTS,
     .params = add_n_params,
     .infer = add_n_infer,
     .forward = add_n_forward,
     .forward_gpu = DEFT_GPU(add_n_forward_gpu),
     .inplace_input = 0,
     .gradient = grad_add_n},
};

DEFT_OP_FAMILY(deft_family_like, like_ops);
