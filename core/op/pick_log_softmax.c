/*
 * _backward_pick_log_softmax: the gradient of a softmax cross-entropy loss
 * written as -pick(log_softmax(x), label), in one pass. Differentiation
 * gives it as negative, _backward_pick, a row sum, exp, broadcast_mul and
 * elemwise_sub (six nodes, two full-size temporaries); the Fuse pass
 * (core/graph/fuse_loss.c) replaces them by this node. With h the loss's
 * gradient and y log_softmax's output, it computes h (exp(y) -
 * one_hot(label)) along pick's axis, in the order the nodes do (so float32
 * results are the same bits). Labels follow pick: whole numbers, clipped or
 * wrapped into range.
 */
#include "core/base/parallel.h"
#include "core/math/scalar_math.h"
#include "core/math/softmax_math.h"
#include "core/op/kernel.h"
#include "core/op/pick.h"

/* float32 lines along the last axis: the exponentials of all elements in one
 * vectorised loop, then each line's products. */
DEFT_CLONES static void grad_rows_f32(const deft_pick_softmax_plan_t *s) {
    const deft_pick_plan_t *p = &s->pick;
    const float *y = s->y, *h = p->src;
    float *dx = p->dst;
    int64_t n = p->size;
    for (int64_t e = 0; e < p->outer * n; e++) dx[e] = deft_expf(y[e]);
    for (int64_t r = 0; r < p->outer; r++) {
        float g = -h[r], *row = dx + r * n;
        int64_t i = deft_take_resolve(deft_index_at(p->index, p->index_dtype, r), n, p->mode);
        for (int64_t k = 0; k < n; k++) row[k] = (k == i ? g : 0.0f) - row[k] * g;
    }
}

static int grad_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_pick_softmax_plan_t s = {.y = deft_tensor_data(&in[2])};
    if (deft_pick_plan(op, p, &in[2].shape, &in[1], &s.pick)) return -1;
    s.pick.src = deft_tensor_data(&in[0]), s.pick.dst = deft_tensor_data(&out[0]);
    s.pick.dtype = out[0].dtype;
    int64_t total = s.pick.outer * s.pick.size * s.pick.inner;
    if (total == 0) return 0;
#ifdef DEFT_HAVE_CUDA
    if (out[0].device.type == DEFT_DEV_GPU)
        return deft_gpu_pick_log_softmax_grad(out[0].device.id, &s);
#endif
    if (s.pick.dtype == DEFT_DT_FLOAT32 && s.pick.inner == 1) {
        grad_rows_f32(&s);
        return 0;
    }
    for (int64_t e = 0; e < total; e++) deft_pick_log_softmax_grad_at(&s, e);
    return 0;
}

/* (grad, index, y): _backward_pick's shapes, y a float array (float16 and
 * bfloat16 through the general path, in double). */
static int grad_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    return deft_op_check_dtype_float_or_half(op, 2, in[2].dtype) ||
                   deft_pick_backward_infer(op, p, nin, in, nout, out)
               ? -1
               : 0;
}

static const char *const grad_inputs[] = {"grad", "index", "y", NULL};

static const deft_op_t pick_log_softmax_ops[] = {
    {.name = "_backward_pick_log_softmax",
     .description = "Gradient of -pick(log_softmax(x), index) with respect to x, given y = "
                    "log_softmax(x): grad (exp(y) - one_hot(index)) along the axis.",
     .input_names = grad_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = deft_pick_params,
     .infer = grad_infer,
     .forward = grad_forward,
     .forward_gpu = DEFT_GPU(grad_forward),
     .inplace_input = -1},
};

DEFT_OP_FAMILY(deft_family_pick_log_softmax, pick_log_softmax_ops);
