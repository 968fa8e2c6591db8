/*
 * Two small helpers of MXNet's transformer models: _contrib_arange_like
 * (positions shaped like an input) and _contrib_div_sqrt_dim (attention
 * scores scaled by 1/sqrt(depth)). Neither needs a kernel of its own:
 * arange_like fills as _arange does, div_sqrt_dim runs _div_scalar's kernel.
 */
#include <math.h>
#include <stdio.h>

#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/op/registry.h"

/* ---- _contrib_arange_like ---- */

static const deft_param_def_t arange_like_params[] = {
    {"start", DEFT_PARAM_FLOAT, "0", "first value", NULL, false},
    {"step", DEFT_PARAM_FLOAT, "1", "spacing between values", NULL, false},
    {"repeat", DEFT_PARAM_INT, "1", "times each value is repeated", NULL, false},
    {"ctx", DEFT_PARAM_STRING, "",
     "accepted for MXNet compatibility; the result is on the input's device, as in MXNet", NULL,
     false},
    {"axis", DEFT_PARAM_INT, "None", "count along this axis only (a 1-D result); None: the shape",
     NULL, true},
    {0}};

static int arange_like_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (p[2].i < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "repeat is %lld, expected >= 1",
                             (long long)p[2].i);
    out[0] = in[0];
    if (!p[4].none) {
        int axis;
        if (deft_op_axis(op, "axis", p[4].i, in[0].shape.ndim, &axis)) return -1;
        out[0].shape = (deft_shape_t){1, {in[0].shape.dims[axis]}};
    }
    *nout = 1;
    return 0;
}

/* Element i is start + floor(i / repeat) step, computed in double and stored in the dtype. */
static int arange_like_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)in, (void)nout;
    int64_t n = deft_shape_size(&out[0].shape), repeat = p[2].i;
    void *y = deft_tensor_data(&out[0]);
    for (int64_t i = 0; i < n; i++)
        deft_store_double(y, out[0].dtype, i, p[0].f + (double)(i / repeat) * p[1].f);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int arange_like_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                   const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)in, (void)nout;
    return deft_gpu_arange(deft_gpu_of(&out[0]), deft_tensor_data(&out[0]), out[0].dtype,
                           deft_shape_size(&out[0].shape), p[0].f, p[1].f, p[2].i);
}
#endif

/* ---- _contrib_div_sqrt_dim ---- */

static int div_sqrt_dim_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (in[0].shape.ndim == 0)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 is a scalar, expected >= 1-D");
    if (deft_op_check_dtype_arith(op, 0, in[0].dtype)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* data / sqrt(data.shape[-1]); as in MXNet, integer dtypes divide by the root truncated. */
static int div_sqrt_dim_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    double root = sqrt((double)in[0].shape.dims[in[0].shape.ndim - 1]);
    char scalar[32];
    snprintf(scalar, sizeof scalar, "%.17g", deft_dtype_is_float(in[0].dtype) ? root : trunc(root));
    return deft_registry_run_kernel("_div_scalar", "scalar", scalar, &in[0], &out[0]);
}

/* The scale is a constant, so the gradient is the same scaling of the output gradient. */
static int grad_div_sqrt_dim(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                             deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op1(b, "_contrib_div_sqrt_dim", b->out_grad(b, 0), GRAD_NONE);
    return 0;
}

#define ARANGE_LIKE_OP(name_)                                                                      \
    {                                                                                              \
        .name = name_,                                                                             \
        .description = "Evenly spaced values shaped like the input (or along one of its axes).",   \
        .input_names = deft_op_data_input, .min_inputs = 1, .max_inputs = 1,                       \
        .params = arange_like_params, .infer = arange_like_infer, .forward = arange_like_forward,  \
        .forward_gpu = DEFT_GPU(arange_like_forward_gpu), .inplace_input = -1,                     \
        .shape_inputs = 1u << 0, .gradient = deft_gradient_zero                                    \
    }

static const deft_op_t contrib_helper_ops[] = {
    ARANGE_LIKE_OP("_contrib_arange_like"),
    {.name = "_contrib_div_sqrt_dim",
     .description = "data / sqrt(data.shape[-1]): attention scores scaled by their depth.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .infer = div_sqrt_dim_infer,
     .forward = div_sqrt_dim_forward,
     .forward_gpu = DEFT_GPU(div_sqrt_dim_forward),
     .inplace_input = 0,
     .gradient = grad_div_sqrt_dim},
};

DEFT_OP_FAMILY(deft_family_contrib_helpers, contrib_helper_ops);
