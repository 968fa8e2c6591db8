/*
 * Ordering: topk, sort and argsort along an axis (or over the flattened
 * array when axis is None), and _backward_topk, the gradient of the values
 * they return: the head gradient written back at the indices they came from.
 *
 * Order: NaN sorts above every number. Ties keep their original order
 * (a stable sort), in both directions. MXNet leaves the order of ties
 * unspecified (std::sort on the CPU; its GPU full sort is stable, as here).
 *
 * The ordering and the writing of results are core/math/sort_math.h, shared
 * with the GPU kernels (core/op/sort.cu), which sort rows of up to
 * DEFT_GPU_SORT_MAX elements.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/math/gather_math.h"
#include "core/math/sort_math.h"
#include "core/op/grad.h"
#include "core/op/index_check.h"
#include "core/op/kernel.h"
#include "core/op/op.h"

enum { RET_VALUE, RET_INDICES, RET_MASK, RET_BOTH }; /* topk's ret_typ, in order */
enum { OP_TOPK, OP_SORT, OP_ARGSORT };

static const char *const ret_types[] = {"value", "indices", "mask", "both", NULL};

static const deft_param_def_t topk_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "axis to select along; None: the flattened array", NULL, true},
    {"k", DEFT_PARAM_INT, "1", "number of elements to select; k < 1 selects all", NULL, false},
    {"ret_typ", DEFT_PARAM_ENUM, "indices",
     "value, indices, mask (1 at the selected places) or both (values and indices)", ret_types,
     false},
    {"is_ascend", DEFT_PARAM_BOOL, "false", "select the smallest instead of the largest", NULL,
     false},
    {"dtype", DEFT_PARAM_DTYPE, "float32", "dtype of the indices", NULL, false},
    {0}};

static const deft_param_def_t sort_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "axis to sort along; None: the flattened array", NULL, true},
    {"is_ascend", DEFT_PARAM_BOOL, "true", "ascending (or descending) order", NULL, false},
    {0}};

static const deft_param_def_t argsort_params[] = {
    {"axis", DEFT_PARAM_INT, "-1", "axis to sort along; None: the flattened array", NULL, true},
    {"is_ascend", DEFT_PARAM_BOOL, "true", "ascending (or descending) order", NULL, false},
    {"dtype", DEFT_PARAM_DTYPE, "float32", "dtype of the indices", NULL, false},
    {0}};

/* What to select: data seen as (outer, n, inner), k of the n along the middle axis. */
typedef struct topk_view {
    int64_t outer, n, inner, k;
    int ret;
    bool ascend;
    deft_dtype_t index_dtype;
    deft_shape_t selected; /* the shape of the values and indices (not the mask) */
} topk_view_t;

/* The parameters of topk, sort or argsort (op->data) read into one view over `shape`. */
static int topk_view(const deft_op_t *op, const deft_param_value_t *p, const deft_shape_t *shape,
                     topk_view_t *v) {
    int which = *(const int *)op->data;
    int64_t k = which == OP_TOPK ? p[1].i : 0;
    *v = (topk_view_t){.outer = 1,
                       .n = deft_shape_size(shape),
                       .inner = 1,
                       .ret = which == OP_TOPK   ? (int)p[2].i
                              : which == OP_SORT ? RET_VALUE
                                                 : RET_INDICES,
                       .ascend = which == OP_TOPK ? p[3].i : p[1].i,
                       .index_dtype = which == OP_TOPK      ? (deft_dtype_t)p[4].i
                                      : which == OP_ARGSORT ? (deft_dtype_t)p[2].i
                                                            : DEFT_DT_INT64,
                       .selected = {.ndim = 1}};
    int axis = -1;
    if (!p[0].none) {
        if (deft_op_axis(op, "axis", p[0].i, shape->ndim, &axis)) return -1;
        v->n = shape->dims[axis];
        for (int d = 0; d < axis; d++) v->outer *= shape->dims[d];
        for (int d = axis + 1; d < shape->ndim; d++) v->inner *= shape->dims[d];
    }
    v->k = k < 1 ? v->n : k;
    if (v->k > v->n)
        return deft_op_error(op, DEFT_ERR_VALUE, "k is %lld, more than the %lld elements %s",
                             (long long)k, (long long)v->n,
                             axis < 0 ? "of the flattened array" : "along the axis");
    if (axis < 0) {
        v->selected.dims[0] = v->k;
    } else {
        v->selected = *shape;
        v->selected.dims[axis] = v->k;
    }
    return 0;
}

/* The largest whole number every index up to it fits in `dtype` exactly; 0: not an index dtype. */
static int64_t index_dtype_limit(deft_dtype_t dtype) {
    switch (dtype) {
    case DEFT_DT_UINT8:
        return 255;
    case DEFT_DT_INT32:
        return INT32_MAX;
    case DEFT_DT_INT64:
        return INT64_MAX;
    case DEFT_DT_FLOAT16:
        return 2048;
    case DEFT_DT_FLOAT32:
        return 16777216;
    case DEFT_DT_FLOAT64:
        return DEFT_INDEX_UNBOUNDED;
    default:
        return 0;
    }
}

static int topk_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    topk_view_t v;
    if (deft_op_check_dtype_arith(op, 0, in[0].dtype) || topk_view(op, p, &in[0].shape, &v))
        return -1;
    int64_t limit = index_dtype_limit(v.index_dtype);
    if (v.ret == RET_INDICES || v.ret == RET_BOTH) {
        if (limit == 0)
            return deft_op_error(op, DEFT_ERR_TYPE,
                                 "dtype is %s, expected uint8, int32, int64, float16, float32 or "
                                 "float64",
                                 deft_dtype_name(v.index_dtype));
        if (v.n > limit)
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "dtype %s cannot hold every index of %lld elements exactly",
                                 deft_dtype_name(v.index_dtype), (long long)v.n);
    }
    deft_desc_t values = {v.selected, in[0].dtype}, indices = {v.selected, v.index_dtype};
    *nout = 1;
    if (v.ret == RET_VALUE) out[0] = values;
    if (v.ret == RET_INDICES) out[0] = indices;
    if (v.ret == RET_MASK) out[0] = in[0];
    if (v.ret == RET_BOTH) out[0] = values, out[1] = indices, *nout = 2;
    return 0;
}

static int topk_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return p[2].i == RET_BOTH ? 2 : 1;
}

/* ---- the kernel: a stable merge sort of positions, one row (o, i) at a time ---- */

typedef struct sort_run {
    deft_sort_call_t c;
    atomic_int failed; /* scratch could not be allocated */
} sort_run_t;

/* Sort pos[0..n) (element offsets) in the requested order, stably, using tmp. */
static void merge_sort(const deft_sort_call_t *c, int64_t *pos, int64_t *tmp, int64_t n) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n,
                    hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t a = lo, b = mid, t = lo;
            while (a < mid && b < hi) {
                int order = deft_sort_compare(c, pos[b], pos[a]);
                bool b_first = c->ascend ? order < 0 : order > 0; /* ties: a, the earlier, first */
                tmp[t++] = b_first ? pos[b++] : pos[a++];
            }
            while (a < mid) tmp[t++] = pos[a++];
            while (b < hi) tmp[t++] = pos[b++];
        }
        memcpy(pos, tmp, (size_t)n * sizeof *pos);
    }
}

static void sort_rows(void *ctx, int64_t begin, int64_t end) {
    sort_run_t *s = ctx;
    const deft_sort_call_t *c = &s->c;
    int64_t *pos = malloc(2 * (size_t)c->n * sizeof *pos);
    if (!pos) {
        atomic_store(&s->failed, 1);
        return;
    }
    for (int64_t row = begin; row < end; row++) {
        int64_t base = deft_sort_row_base(c, row);
        for (int64_t j = 0; j < c->n; j++) pos[j] = base + j * c->inner;
        merge_sort(c, pos, pos + c->n, c->n);
        for (int64_t r = 0; r < c->k; r++) deft_sort_emit(c, row, r, pos[r]);
    }
    free(pos);
}

/* A sort's call: the view, data and the outputs ret_typ asks for; the mask is zeroed. */
static int sort_call(const topk_view_t *v, const deft_tensor_t *in, const deft_tensor_t *out,
                     deft_sort_call_t *c) {
    *c = (deft_sort_call_t){.outer = v->outer,
                            .n = v->n,
                            .inner = v->inner,
                            .k = v->k,
                            .ascend = v->ascend,
                            .dtype = in[0].dtype,
                            .index_dtype = v->index_dtype,
                            .elem = deft_dtype_size(in[0].dtype),
                            .x = deft_tensor_data(&in[0])};
    if (v->ret == RET_VALUE || v->ret == RET_BOTH) c->values = deft_tensor_data(&out[0]);
    if (v->ret == RET_INDICES) c->indices = deft_tensor_data(&out[0]);
    if (v->ret == RET_BOTH) c->indices = deft_tensor_data(&out[1]);
    if (v->ret != RET_MASK || !deft_tensor_nbytes(&out[0])) return 0;
    c->mask = deft_tensor_data(&out[0]);
    return deft_device_zero(c->mask, out[0].device, deft_tensor_nbytes(&out[0]));
}

static int topk_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    topk_view_t v;
    sort_run_t s = {.failed = 0};
    if (topk_view(op, p, &in[0].shape, &v) || sort_call(&v, in, out, &s.c)) return -1;
    int64_t rows = v.outer * v.inner;
    if (rows == 0 || v.n == 0) return 0;
    int64_t grain = DEFT_PARALLEL_GRAIN / (8 * v.n) + 1;
    deft_parallel_for(rows, grain, sort_rows, &s);
    if (atomic_load(&s.failed))
        return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY,
                             "cannot allocate the scratch to sort %lld elements", (long long)v.n);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int topk_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    topk_view_t v;
    deft_sort_call_t c;
    if (topk_view(op, p, &in[0].shape, &v)) return -1;
    if (v.n > DEFT_GPU_SORT_MAX && v.outer * v.inner > 0)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "sorting %lld elements on a GPU: at most %d per row are supported",
                             (long long)v.n, DEFT_GPU_SORT_MAX);
    if (sort_call(&v, in, out, &c)) return -1;
    return deft_gpu_sort(in[0].device.id, &c);
}
#endif

/* ---- _backward_topk(grad, indices, data): zeros like data, grad at the indices ---- */

static int topk_backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    topk_view_t v;
    if (deft_op_check_dtype_arith(op, 2, in[2].dtype) || topk_view(op, p, &in[2].shape, &v))
        return -1;
    for (int k = 0; k < 2; k++)
        if (!deft_shape_equal(&in[k].shape, &v.selected) ||
            (k == 0 && in[0].dtype != in[2].dtype)) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(
                op, DEFT_ERR_VALUE, "input %d (%s) is %s %s, expected %s%s%s", k,
                k ? "indices" : "grad", deft_shape_format(&in[k].shape, a, sizeof a),
                deft_dtype_name(in[k].dtype), deft_shape_format(&v.selected, b, sizeof b),
                k ? "" : " ", k ? "" : deft_dtype_name(in[2].dtype));
        }
    out[0] = in[2];
    *nout = 1;
    return 0;
}

/* _backward_topk's call on (grad, indices, data): indices checked, d data zeroed. */
static int topk_backward_call(const deft_op_t *op, const deft_param_value_t *p,
                              const deft_tensor_t *in, const deft_tensor_t *out,
                              deft_sort_call_t *c) {
    topk_view_t v;
    deft_index_check_t check;
    if (topk_view(op, p, &in[2].shape, &v)) return -1;
    deft_index_check_init(&check, &in[1], 0, v.n - 1);
    if (deft_check_indices(op, 1, &in[1], &check)) return -1;
    *c = (deft_sort_call_t){.outer = v.outer,
                            .n = v.n,
                            .inner = v.inner,
                            .k = v.k,
                            .dtype = out[0].dtype,
                            .elem = deft_dtype_size(out[0].dtype)};
    size_t bytes = deft_tensor_nbytes(&out[0]);
    return bytes ? deft_device_zero(deft_tensor_data(&out[0]), out[0].device, bytes) : 0;
}

static int topk_backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_sort_call_t c;
    if (topk_backward_call(op, p, in, out, &c)) return -1;
    for (int64_t row = 0; row < c.outer * c.inner; row++)
        deft_topk_unsort_row(&c, row, deft_tensor_data(&in[0]), deft_tensor_data(&in[1]),
                             in[1].dtype, deft_tensor_data(&out[0]));
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int topk_backward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_sort_call_t c;
    if (topk_backward_call(op, p, in, out, &c)) return -1;
    return deft_gpu_topk_backward(in[2].device.id, &c, deft_tensor_data(&in[0]),
                                  deft_tensor_data(&in[1]), in[1].dtype, deft_tensor_data(&out[0]));
}
#endif

/* ---- gradients ---- */

/* d values / d data: the head gradient back at the places the values came from. */
static deft_gref_t scatter_back(deft_grad_builder_t *b, deft_gref_t indices, const char *k) {
    deft_gref_t in[3] = {b->out_grad(b, 0), indices, b->input(b, 0)};
    return b->apply(b, "_backward_topk", 3, in,
                    GRAD_PARAMS("axis", g_attr(b, "axis", "-1"), "k", k, "ret_typ", "value"), 0);
}

/* topk: values flow back to where they were taken; indices and masks have no gradient.
 * With ret_typ=value the indices are not an output, so the graph selects them again. */
static int grad_topk(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)nin;
    const char *k = g_attr(b, "k", "1");
    if (p[2].i == RET_BOTH) in_grads[0] = scatter_back(b, b->output(b, 1), k);
    if (p[2].i != RET_VALUE) return 0;
    deft_gref_t indices =
        g_op1(b, "topk", b->input(b, 0),
              GRAD_PARAMS("axis", g_attr(b, "axis", "-1"), "k", k, "ret_typ", "indices",
                          "is_ascend", g_attr(b, "is_ascend", "false"), "dtype", "int64"));
    in_grads[0] = scatter_back(b, indices, k);
    return 0;
}

/* sort: the values go back through the permutation that argsort finds. */
static int grad_sort(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t indices = g_op1(b, "argsort", b->input(b, 0),
                                GRAD_PARAMS("axis", g_attr(b, "axis", "-1"), "is_ascend",
                                            g_attr(b, "is_ascend", "true"), "dtype", "int64"));
    in_grads[0] = scatter_back(b, indices, "0");
    return 0;
}

static const int op_topk = OP_TOPK, op_sort = OP_SORT, op_argsort = OP_ARGSORT;
static const char *const topk_backward_inputs[] = {"grad", "indices", "data", NULL};

/* MXNet's sort and topk (values, or both) have two outputs, the indices hidden
 * where only values are asked for, so MXNet names them x_output0, x_output1;
 * deft's sort keeps no hidden indices (its gradient sorts again) but is named
 * alike. topk with ret_typ=indices or mask, one output in MXNet, lists
 * x_output0 here where MXNet lists x_output. */
static const char *const two_output_names[] = {"output0", "output1", NULL};

static const deft_op_t sort_ops[] = {
    {.name = "topk",
     .description = "The k largest (or smallest) elements along an axis, in order: their values, "
                    "indices, a mask of them, or both values and indices.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = topk_params,
     .infer = topk_infer,
     .forward = topk_forward,
     .forward_gpu = DEFT_GPU(topk_forward_gpu),
     .inplace_input = -1,
     .data = &op_topk,
     .num_outputs = topk_num_outputs,
     .output_names = two_output_names,
     .gradient = grad_topk},
    {.name = "sort",
     .description = "A sorted copy along an axis (of the flattened array when axis is None).",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = sort_params,
     .infer = topk_infer,
     .forward = topk_forward,
     .forward_gpu = DEFT_GPU(topk_forward_gpu),
     .inplace_input = -1,
     .data = &op_sort,
     .output_names = two_output_names,
     .gradient = grad_sort},
    {.name = "argsort",
     .description = "The indices that sort an array along an axis (the flattened array when axis "
                    "is None).",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = argsort_params,
     .infer = topk_infer,
     .forward = topk_forward,
     .forward_gpu = DEFT_GPU(topk_forward_gpu),
     .inplace_input = -1,
     .data = &op_argsort,
     .gradient = deft_gradient_zero},
    {.name = "_backward_topk",
     .description = "Gradient of topk's (and sort's) values: zeros shaped like data, with grad "
                    "at the indices the values came from.",
     .input_names = topk_backward_inputs,
     .min_inputs = 3,
     .max_inputs = 3,
     .params = topk_params,
     .infer = topk_backward_infer,
     .forward = topk_backward_forward,
     .forward_gpu = DEFT_GPU(topk_backward_gpu),
     .inplace_input = -1,
     .shape_inputs = 1u << 2,
     .data = &op_topk},
};

DEFT_OP_FAMILY(deft_family_sort, sort_ops);
