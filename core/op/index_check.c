/* Checking index inputs on the CPU or a GPU (index_check.h). */
#include "core/op/index_check.h"

#include <math.h>
#include <stdio.h>

#ifdef DEFT_HAVE_CUDA
#include "core/op/gpu_ops.h"
#endif

void deft_index_check_init(deft_index_check_t *c, const deft_tensor_t *t, int64_t lo, int64_t hi) {
    *c = (deft_index_check_t){.indices = deft_tensor_data(t),
                              .dtype = t->dtype,
                              .count = deft_shape_size(&t->shape),
                              .group = 1};
    c->group = c->count > 0 ? c->count : 1;
    c->lo[0] = lo, c->hi[0] = hi;
}

/* The element j of t, read from wherever t lives. */
static double element_at(const deft_tensor_t *t, int64_t j) {
#ifdef DEFT_HAVE_CUDA
    if (t->device.type == DEFT_DEV_GPU) {
        char element[8];
        return deft_gpu_read_element(t, j, element) ? NAN : deft_load_double(element, t->dtype, 0);
    }
#endif
    return deft_load_double(deft_tensor_data(t), t->dtype, j);
}

static int report(const deft_op_t *op, int input, const deft_index_check_t *c, int64_t j,
                  double v) {
    const char *name = deft_op_input_name(op, input);
    int64_t g = j / c->group;
    bool whole = v == floor(v);
    char range[64] = "";
    if (c->lo[g] > -DEFT_INDEX_UNBOUNDED || c->hi[g] < DEFT_INDEX_UNBOUNDED)
        snprintf(range, sizeof range, " in [%lld, %lld]", (long long)c->lo[g], (long long)c->hi[g]);
    return deft_op_error(op, whole ? DEFT_ERR_INDEX : DEFT_ERR_VALUE,
                         "input %d (%s) has %.17g at position %lld, expected a whole number%s",
                         input, name ? name : "indices", v, (long long)j, range);
}

#ifdef DEFT_HAVE_CUDA
/* What a GPU check keeps to word its failure later (device_check.h). */
typedef struct deferred_report {
    const deft_op_t *op;
    int input;
    deft_index_check_t check;
} deferred_report_t;

static int report_deferred(const void *ctx, int64_t j, double v) {
    const deferred_report_t *r = ctx;
    return report(r->op, r->input, &r->check, j, v);
}
#endif

int deft_check_indices(const deft_op_t *op, int input, const deft_tensor_t *t,
                       const deft_index_check_t *c) {
#ifdef DEFT_HAVE_CUDA
    /* On a GPU the kernel that follows clips bad indices, so the verdict
     * may come later: at the wait for the outputs (flag.cuh). */
    if (t->device.type == DEFT_DEV_GPU) {
        deferred_report_t r = {op, input, *c};
        deft_check_report_t how = {report_deferred, &r, sizeof r};
        return c->count > 0 ? deft_gpu_check_indices(deft_gpu_of(t), c, &how) : 0;
    }
#endif
    for (int64_t j = 0; j < c->count; j++)
        if (!deft_index_ok(c, j)) return report(op, input, c, j, element_at(t, j));
    return 0;
}

int deft_op_check_index_dtype(const deft_op_t *op, int input, deft_dtype_t dtype) {
    if (deft_index_dtype_ok(dtype)) return 0;
    return deft_op_error(op, DEFT_ERR_TYPE,
                         "input %d holds indices and has dtype %s, expected float32, float64, "
                         "int32 or int64",
                         input, deft_dtype_name(dtype));
}
