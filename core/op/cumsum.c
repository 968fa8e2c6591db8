/*
 * _np_cumsum (MXNet 1.9.1's only cumulative sum, which it also names
 * cumsum) and its gradient _backward_np_cumsum, the running sums in reverse.
 *
 * Both first copy their input into the result, converted to the result's
 * dtype, then add along the axis in place (core/math/cumsum_math.h), so the
 * sums accumulate in the result's dtype as MXNet's do.
 */
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/cumsum_math.h"
#include "core/op/grad.h"
#include "core/op/op.h"
#ifdef DEFT_HAVE_CUDA
#include "core/op/gpu_ops.h"
#endif

/* MXNet's accepted result dtypes, in its order. */
static const char *const result_dtypes[] = {"float16", "float32", "float64", "int8",
                                            "int32",   "int64",   NULL};
static const deft_dtype_t result_dtype_codes[] = {DEFT_DT_FLOAT16, DEFT_DT_FLOAT32, DEFT_DT_FLOAT64,
                                                  DEFT_DT_INT8,    DEFT_DT_INT32,   DEFT_DT_INT64};

static const deft_param_def_t cumsum_params[] = {
    {"axis", DEFT_PARAM_INT, "None", "axis of the sums; None sums over the flattened array", NULL,
     true},
    {"dtype", DEFT_PARAM_ENUM, "None",
     "dtype of the result and of the sums; None: the input's (int64 for bool)", result_dtypes,
     true},
    {0}};

static bool input_dtype_ok(deft_dtype_t dtype) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
    case DEFT_DT_FLOAT64:
    case DEFT_DT_FLOAT16:
    case DEFT_DT_UINT8:
    case DEFT_DT_INT8:
    case DEFT_DT_INT32:
    case DEFT_DT_INT64:
    case DEFT_DT_BOOL:
        return true;
    default:
        return false;
    }
}

static deft_dtype_t result_dtype(const deft_param_value_t *p, deft_dtype_t input) {
    if (!p[1].none) return result_dtype_codes[p[1].i];
    return input == DEFT_DT_BOOL ? DEFT_DT_INT64 : input;
}

static int cumsum_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    if (!input_dtype_ok(in[0].dtype))
        return deft_op_error(op, DEFT_ERR_TYPE,
                             "input 0 (a) has dtype %s, expected float16, float32, float64, "
                             "uint8, int8, int32, int64 or bool",
                             deft_dtype_name(in[0].dtype));
    int axis;
    if (!p[0].none && deft_op_axis(op, "axis", p[0].i, in[0].shape.ndim, &axis)) return -1;
    out[0].dtype = result_dtype(p, in[0].dtype);
    if (p[0].none)
        out[0].shape = (deft_shape_t){.ndim = 1, .dims = {deft_shape_size(&in[0].shape)}};
    else
        out[0].shape = in[0].shape;
    *nout = 1;
    return 0;
}

/* The sums over `shape` (the forward input's), in place over `data`. */
static deft_cumsum_plan_t plan_of(const deft_param_value_t *p, const deft_shape_t *shape,
                                  const deft_tensor_t *data, bool reverse) {
    deft_cumsum_plan_t plan = {.data = deft_tensor_data(data),
                               .dtype = data->dtype,
                               .outer = 1,
                               .middle = deft_shape_size(shape),
                               .trailing = 1,
                               .reverse = reverse};
    if (p[0].none) return plan;
    int axis = (int)(p[0].i < 0 ? p[0].i + shape->ndim : p[0].i);
    plan.middle = shape->dims[axis];
    for (int d = 0; d < axis; d++) plan.outer *= shape->dims[d];
    for (int d = axis + 1; d < shape->ndim; d++) plan.trailing *= shape->dims[d];
    return plan;
}

typedef struct convert_job {
    const void *src;
    void *dst;
    deft_dtype_t from, to;
} convert_job_t;

static void convert_range(void *ctx, int64_t begin, int64_t end) {
    const convert_job_t *c = ctx;
    for (int64_t i = begin; i < end; i++)
        deft_store_double(c->dst, c->to, i, deft_load_double(c->src, c->from, i));
}

/* dst = src (with as many elements) converted to dst's dtype, as Cast does. */
static int load_converted(const deft_tensor_t *src, const deft_tensor_t *dst) {
    int64_t n = deft_shape_size(&dst->shape);
    if (n == 0) return 0;
#ifdef DEFT_HAVE_CUDA
    if (dst->device.type == DEFT_DEV_GPU) {
        deft_tensor_t view = *src; /* the same elements in dst's shape */
        view.shape = dst->shape;
        const deft_tensor_t *x = &view;
        return deft_gpu_elementwise(src->dtype == dst->dtype ? DEFT_GPU_FN_COPY : DEFT_GPU_FN_CAST,
                                    dst, 1, &x, NULL);
    }
#endif
    if (src->dtype == dst->dtype) {
        memcpy(deft_tensor_data(dst), deft_tensor_data(src), deft_tensor_nbytes(dst));
        return 0;
    }
    convert_job_t job = {deft_tensor_data(src), deft_tensor_data(dst), src->dtype, dst->dtype};
    deft_parallel_for(n, DEFT_PARALLEL_GRAIN / 4, convert_range, &job);
    return 0;
}

/* Columns a CPU task sums: rows of this many stay in cache from one step to the next. */
#define COLUMNS 1024

typedef struct sum_job {
    const deft_cumsum_plan_t *plan;
    int64_t chunks; /* of COLUMNS columns, per outer block */
} sum_job_t;

static void sum_range(void *ctx, int64_t begin, int64_t end) {
    const sum_job_t *job = ctx;
    const deft_cumsum_plan_t *p = job->plan;
    for (int64_t t = begin; t < end; t++) {
        int64_t c0 = t % job->chunks * COLUMNS, c1 = c0 + COLUMNS;
        deft_cumsum_rows(p, t / job->chunks, c0, c1 < p->trailing ? c1 : p->trailing);
    }
}

static int run_sums(const deft_cumsum_plan_t *p, deft_device_t dev) {
    if (p->outer * p->middle * p->trailing == 0 || p->middle == 1) return 0;
#ifdef DEFT_HAVE_CUDA
    if (dev.type == DEFT_DEV_GPU) return deft_gpu_cumsum(dev.id, p);
#else
    (void)dev;
#endif
    sum_job_t job = {p, (p->trailing + COLUMNS - 1) / COLUMNS};
    int64_t per_task = p->middle * (p->trailing < COLUMNS ? p->trailing : COLUMNS);
    int64_t grain = DEFT_PARALLEL_GRAIN / per_task;
    deft_parallel_for(p->outer * job.chunks, grain > 1 ? grain : 1, sum_range, &job);
    return 0;
}

static int cumsum_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    if (load_converted(&in[0], &out[0])) return -1;
    deft_cumsum_plan_t plan = plan_of(p, &in[0].shape, &out[0], false);
    return run_sums(&plan, out[0].device);
}

/* ---- the gradient: (out_grad, a) -> d a, the sums taken from the end ---- */

static int backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    return deft_infer_backward(op, cumsum_infer, p, nin, in, nout, out);
}

/* out_grad in a's shape and dtype, summed from the end in that dtype (as MXNet's). */
static int backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    if (load_converted(&in[0], &out[0])) return -1;
    deft_cumsum_plan_t plan = plan_of(p, &out[0].shape, &out[0], true);
    return run_sums(&plan, out[0].device);
}

static int grad_cumsum(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const char *params[2 * 2 + 1];
    in_grads[0] = g_op2(b, "_backward_np_cumsum", b->out_grad(b, 0), b->input(b, 0),
                        g_forward_params(b, cumsum_params, params));
    return 0;
}

static const char *const cumsum_inputs[] = {"a", NULL};
static const char *const backward_inputs[] = {"out_grad", "a", NULL};

static const deft_op_t cumsum_ops[] = {
    {.name = "_np_cumsum",
     .description = "Cumulative sum along `axis` (None: over the flattened array), accumulated "
                    "in the result's dtype.",
     .input_names = cumsum_inputs,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = cumsum_params,
     .infer = cumsum_infer,
     .forward = cumsum_forward,
     .forward_gpu = DEFT_GPU(cumsum_forward),
     .inplace_input = -1,
     .gradient = grad_cumsum},
    {.name = "_backward_np_cumsum",
     .description = "The gradient of _np_cumsum: out_grad summed along the axis from its end, "
                    "in the shape and dtype of a (whose values are not read).",
     .input_names = backward_inputs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = cumsum_params,
     .infer = backward_infer,
     .forward = backward_forward,
     .forward_gpu = DEFT_GPU(backward_forward),
     .inplace_input = -1,
     .shape_inputs = 1u << 1},
};

DEFT_OP_FAMILY(deft_family_cumsum, cumsum_ops);
