#include "core/imperative/cached_call.h"

#include "core/base/error.h"
#include "core/graph/subgraph.h"
#include "core/imperative/autograd.h"
#include "core/imperative/deferred.h"
#include "core/imperative/record.h"

static int record_deferred(const deft_op_entry_t *entry, deft_cached_op_t *op, int nin,
                           deft_ndarray_t *const *in, int *nout, deft_ndarray_t **out,
                           const char *const *keys, const char *const *vals) {
    deft_desc_t in_desc[DEFT_OP_MAX_INPUTS], out_desc[DEFT_OP_MAX_OUTPUTS];
    int produced = 0;
    for (int i = 0; i < nin; i++)
        in_desc[i] = (deft_desc_t){in[i]->tensor.shape, in[i]->tensor.dtype};
    if (deft_cached_op_infer(op, nin, in_desc, &produced, out_desc)) return -1;
    if (produced > *nout)
        return deft_error(DEFT_ERR_VALUE, "the graph has %d outputs, but there is room for %d",
                          produced, *nout);
    const deft_params_t *params;
    if (deft_op_parse_params(entry, 1, keys, vals, &params) ||
        deft_deferred_record(entry, params->v, nin, in, produced, out_desc, 1, keys, vals, out))
        return -1;
    *nout = produced;
    return 0;
}

static int run_and_record(const deft_op_entry_t *entry, deft_cached_op_t *op, int nin,
                          deft_ndarray_t *const *in, int *nout, deft_ndarray_t **out,
                          const char *const *keys, const char *const *vals) {
    const deft_params_t *params;
    deft_autograd_call_t call;
    deft_ndarray_t *given[DEFT_OP_MAX_OUTPUTS] = {NULL};
    int room = *nout < DEFT_OP_MAX_OUTPUTS ? *nout : DEFT_OP_MAX_OUTPUTS;
    bool any_given = false;
    for (int k = 0; k < room; k++) given[k] = out[k], any_given = any_given || out[k];
    if (deft_op_parse_params(entry, 1, keys, vals, &params) ||
        deft_autograd_plan(entry, params->v, nin, in, room, given, 1, keys, vals, &call) ||
        deft_cached_op_invoke(op, nin, in, nout, out))
        return -1;
    deft_desc_t out_desc[DEFT_OP_MAX_OUTPUTS];
    for (int k = 0; k < *nout; k++)
        out_desc[k] = (deft_desc_t){out[k]->tensor.shape, out[k]->tensor.dtype};
    if (!deft_autograd_record(&call, entry, params->v, nin, in, *nout, out_desc, 1, keys, vals, out,
                              !any_given))
        return 0;
    for (int k = 0; k < *nout; k++)
        if (!given[k]) deft_ndarray_release(out[k]), out[k] = NULL;
    return -1;
}

int deft_cached_call(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                     deft_ndarray_t **out) {
    bool deferred = deft_deferred_enabled();
    bool record =
        !deferred && deft_autograd_recording() && deft_autograd_any_requires_grad(nin, in);
    if (!deferred && !record)
        return deft_deferred_compute(nin, in) || deft_cached_op_invoke(op, nin, in, nout, out);
    if (deft_cached_op_updates_inputs(op))
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "the graph updates auxiliary states in place, so a call of it cannot "
                          "be recorded; call it with deferred compute and recording off");
    if (nin > DEFT_OP_MAX_INPUTS)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "a recorded graph call takes at most %d inputs",
                          DEFT_OP_MAX_INPUTS);
    deft_subgraph_t *sg;
    if (deft_cached_op_subgraph(op, &sg)) return -1;
    const deft_op_entry_t *entry = deft_registry_find("_CachedOp");
    const char *keys[1] = {"subgraph"}, *vals[1] = {deft_subgraph_id(sg)};
    int status = deferred ? record_deferred(entry, op, nin, in, nout, out, keys, vals)
                          : (deft_deferred_compute(nin, in) ||
                             run_and_record(entry, op, nin, in, nout, out, keys, vals));
    return status ? -1 : 0; /* the recorded node holds the subgraph its parameter names */
}
