#include "core/imperative/invoke.h"

#include <stdlib.h>

static int check_given_output(const deft_op_t *op, int k, const deft_ndarray_t *arr,
                              const deft_desc_t *want) {
    const deft_tensor_t *t = &arr->tensor;
    if (deft_shape_equal(&t->shape, &want->shape) && t->dtype == want->dtype) return 0;
    char have_s[DEFT_SHAPE_STR_MAX], want_s[DEFT_SHAPE_STR_MAX];
    return deft_op_error(
        op, DEFT_ERR_VALUE, "output %d has shape %s and dtype %s, expected %s %s", k,
        deft_shape_format(&t->shape, have_s, sizeof have_s), deft_dtype_name(t->dtype),
        deft_shape_format(&want->shape, want_s, sizeof want_s), deft_dtype_name(want->dtype));
}

/* A given output sharing storage with an input the kernel does not expect to be
 * overwritten: compute into a fresh array, then copy. */
static bool needs_staging(const deft_op_t *op, int k, const deft_ndarray_t *target, int nin,
                          deft_ndarray_t *const *in) {
    for (int i = 0; i < nin; i++) {
        if (in[i]->tensor.storage != target->tensor.storage) continue;
        bool sanctioned =
            k == 0 && i == op->inplace_input && in[i]->tensor.offset == target->tensor.offset;
        if (!sanctioned) return true;
    }
    return false;
}

static void release_all(deft_ndarray_t **arrays, int n) {
    for (int k = 0; k < n; k++) deft_ndarray_release(arrays[k]);
}

int deft_invoke(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int *nout,
                deft_ndarray_t **out, int nparams, const char *const *keys,
                const char *const *vals) {
    const deft_op_t *op = entry->op;
    if (nin < op->min_inputs || nin > op->max_inputs)
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %s%d%s%d", nin,
                             op->min_inputs == op->max_inputs ? "" : "between ", op->min_inputs,
                             op->min_inputs == op->max_inputs ? "" : " and ", op->max_inputs);
    const deft_params_t *params;
    if (deft_op_parse_params(entry, nparams, keys, vals, &params)) return -1;

    deft_desc_t in_desc[DEFT_OP_MAX_INPUTS], out_desc[DEFT_OP_MAX_OUTPUTS];
    deft_tensor_t in_t[DEFT_OP_MAX_INPUTS], out_t[DEFT_OP_MAX_OUTPUTS];
    for (int i = 0; i < nin; i++) {
        in_t[i] = in[i]->tensor;
        in_desc[i] = (deft_desc_t){in[i]->tensor.shape, in[i]->tensor.dtype};
        if (i > 0 && !deft_device_equal(in[i]->tensor.device, in[0]->tensor.device))
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d is on another device than input 0",
                                 i);
    }
    int produced = 0;
    if (op->infer(op, params->v, nin, in_desc, &produced, out_desc)) return -1;
    if (produced > *nout)
        return deft_op_error(op, DEFT_ERR_VALUE, "produces %d outputs, but there is room for %d",
                             produced, *nout);

    deft_device_t device = nin ? in[0]->tensor.device : deft_device_cpu();
    deft_ndarray_t *fresh[DEFT_OP_MAX_OUTPUTS];
    int staged = 0;
    for (int k = 0; k < produced; k++) fresh[k] = NULL;
    for (int k = 0; k < produced; k++) {
        if (out[k]) {
            if (check_given_output(op, k, out[k], &out_desc[k])) goto fail;
            if (!deft_device_equal(out[k]->tensor.device, device)) {
                deft_op_error(op, DEFT_ERR_VALUE, "output %d is on another device than the inputs",
                              k);
                goto fail;
            }
            if (!needs_staging(op, k, out[k], nin, in)) {
                out_t[k] = out[k]->tensor;
                continue;
            }
            staged++;
        }
        if (deft_ndarray_new(&out_desc[k].shape, out_desc[k].dtype, device, false, &fresh[k]))
            goto fail;
        out_t[k] = fresh[k]->tensor;
    }
    if (op->forward(op, params->v, nin, in_t, produced, out_t)) goto fail;
    for (int k = 0; staged && k < produced; k++) {
        if (out[k] && fresh[k]) {
            deft_ndarray_copy_from_host(out[k], deft_tensor_data(&fresh[k]->tensor),
                                        deft_tensor_nbytes(&fresh[k]->tensor));
            deft_ndarray_release(fresh[k]);
            fresh[k] = NULL;
        }
    }
    for (int k = 0; k < produced; k++)
        if (!out[k]) out[k] = fresh[k];
    *nout = produced;
    return 0;
fail:
    release_all(fresh, produced);
    return -1;
}
