/* Operators: listing, introspection, the random seed and imperative invoke. */
#include <stdio.h>

#include "capi/src/api.h"
#include "core/imperative/memo.h"
#include "core/imperative/invoke.h"
#include "core/op/random.h"

_Static_assert(DEFT_MAX_OUTPUTS == DEFT_OP_MAX_OUTPUTS, "output limits must match");

static int api_op(DeftOpHandle handle, const deft_op_entry_t **out) {
    const deft_op_entry_t *entry = (const deft_op_entry_t *)handle;
    if (!entry) return deft_error(DEFT_ERR_VALUE, "op is NULL, expected an operator handle");
    if (entry->magic != DEFT_OP_ENTRY_MAGIC)
        return deft_error(DEFT_ERR_VALUE, "op (%p) is not an operator handle from DeftGetOperator",
                          (const void *)handle);
    *out = entry;
    return 0;
}

int DeftListOperators(int *out_count, const char *const **out_names) {
    API_BEGIN();
    if (api_check_out(out_count, "out_count") || api_check_out(out_names, "out_names")) return -1;
    const char *const *names = deft_registry_names();
    if (!names) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot build the operator registry");
    *out_count = deft_registry_count();
    *out_names = names;
    return 0;
}

int DeftGetOperator(const char *name, DeftOpHandle *out) {
    API_BEGIN();
    if (!name) return deft_error(DEFT_ERR_VALUE, "name is NULL, expected an operator name");
    if (api_check_out(out, "out")) return -1;
    const deft_op_entry_t *entry = deft_registry_find(name);
    if (!entry) {
        char hint[128];
        deft_registry_suggest(name, hint, sizeof hint);
        return deft_error(DEFT_ERR_VALUE, "unknown operator '%s'%s", name, hint);
    }
    *out = (DeftOpHandle)(void *)entry;
    return 0;
}

int DeftOpGetInfo(DeftOpHandle op, const char **out_name, const char **out_description) {
    API_BEGIN();
    const deft_op_entry_t *entry = NULL;
    if (api_op(op, &entry) || api_check_out(out_name, "out_name") ||
        api_check_out(out_description, "out_description"))
        return -1;
    *out_name = entry->op->name;
    *out_description = entry->op->description;
    return 0;
}

int DeftOpGetInputs(DeftOpHandle op, int *out_min, int *out_max, int *out_num_names,
                    const char *const **out_names) {
    API_BEGIN();
    const deft_op_entry_t *entry = NULL;
    if (api_op(op, &entry) || api_check_out(out_min, "out_min") ||
        api_check_out(out_max, "out_max") || api_check_out(out_num_names, "out_num_names") ||
        api_check_out(out_names, "out_names"))
        return -1;
    int n = 0;
    while (entry->op->input_names[n]) n++;
    *out_min = entry->op->min_inputs;
    *out_max = entry->op->max_inputs;
    *out_num_names = n;
    *out_names = entry->op->input_names;
    return 0;
}

int DeftOpGetNumParams(DeftOpHandle op, int *out) {
    API_BEGIN();
    const deft_op_entry_t *entry = NULL;
    if (api_op(op, &entry) || api_check_out(out, "out")) return -1;
    *out = entry->num_params;
    return 0;
}

static int api_param(DeftOpHandle op, int index, const deft_param_def_t **out) {
    const deft_op_entry_t *entry = NULL;
    if (api_op(op, &entry)) return -1;
    if (index < 0 || index >= entry->num_params)
        return deft_error(DEFT_ERR_INDEX, "index is %d, but '%s' has %d parameters", index,
                          entry->op->name, entry->num_params);
    *out = &entry->op->params[index];
    return 0;
}

int DeftOpGetParam(DeftOpHandle op, int index, const char **out_name, const char **out_type,
                   const char **out_default, const char **out_doc) {
    API_BEGIN();
    const deft_param_def_t *def = NULL;
    if (api_param(op, index, &def) || api_check_out(out_name, "out_name") ||
        api_check_out(out_type, "out_type") || api_check_out(out_default, "out_default") ||
        api_check_out(out_doc, "out_doc"))
        return -1;
    *out_name = def->name;
    *out_type = deft_param_type_name(def);
    *out_default = def->default_value;
    *out_doc = def->doc;
    return 0;
}

int DeftOpGetParamChoices(DeftOpHandle op, int index, int *out_count,
                          const char *const **out_words) {
    API_BEGIN();
    const deft_param_def_t *def = NULL;
    if (api_param(op, index, &def) || api_check_out(out_count, "out_count") ||
        api_check_out(out_words, "out_words"))
        return -1;
    static const char *const none[] = {NULL};
    int n = 0;
    while (def->choices && def->choices[n]) n++;
    *out_count = n;
    *out_words = def->choices ? def->choices : none;
    return 0;
}

int DeftRandomSeed(uint64_t seed) {
    API_BEGIN();
    return deft_random_seed(seed);
}

/* api_invoke's body, inlined into DeftImperativeInvoke: one call fewer on the dispatch path. */
static inline __attribute__((always_inline)) int
invoke(DeftOpHandle op, int num_inputs, const DeftNDArrayHandle *inputs, int *num_outputs,
       DeftNDArrayHandle *outputs, int num_params, const char *const *keys,
       const char *const *vals) {
    const deft_op_entry_t *entry = NULL;
    if (api_op(op, &entry) || api_check_out(num_outputs, "num_outputs")) return -1;
    if (num_inputs < 0 || num_inputs > DEFT_OP_MAX_INPUTS || (num_inputs > 0 && !inputs))
        return deft_op_error(entry->op, DEFT_ERR_VALUE,
                             "num_inputs is %d with inputs %p, expected 0 to %d inputs and an "
                             "array when there are any",
                             num_inputs, (const void *)inputs, DEFT_OP_MAX_INPUTS);
    int room = *num_outputs;
    if (room < 0 || (room > 0 && !outputs))
        return deft_op_error(entry->op, DEFT_ERR_VALUE,
                             "*num_outputs is %d with outputs %p, expected room >= 0 and an array",
                             room, (const void *)outputs);
    if (room > DEFT_OP_MAX_OUTPUTS) room = DEFT_OP_MAX_OUTPUTS;
    deft_ndarray_t *in[DEFT_OP_MAX_INPUTS], *out[DEFT_OP_MAX_OUTPUTS];
    if (api_ndarrays(inputs, num_inputs, "inputs", false, in) ||
        api_ndarrays(outputs, room, "outputs", true, out))
        return -1;
    int produced = room;
    if (deft_invoke(entry, num_inputs, in, &produced, out, num_params, keys, vals)) {
        if (produced > room) *num_outputs = produced; /* too little room: what it needs */
        return -1;
    }
    if (api_wrap_outputs(produced, out, outputs)) return -1;
    *num_outputs = produced;
    return 0;
}

int api_invoke(DeftOpHandle op, int num_inputs, const DeftNDArrayHandle *inputs, int *num_outputs,
               DeftNDArrayHandle *outputs, int num_params, const char *const *keys,
               const char *const *vals) {
    return invoke(op, num_inputs, inputs, num_outputs, outputs, num_params, keys, vals);
}

int DeftImperativeInvoke(DeftOpHandle op, int num_inputs, const DeftNDArrayHandle *inputs,
                         int *num_outputs, DeftNDArrayHandle *outputs, int num_params,
                         const char *const *keys, const char *const *vals) {
    API_BEGIN();
    return invoke(op, num_inputs, inputs, num_outputs, outputs, num_params, keys, vals);
}

int DeftSetMemoization(int capacity, int *prev) {
    API_BEGIN();
    if (capacity < 0)
        return deft_error(DEFT_ERR_VALUE, "capacity is %d, expected 0 (off) or more", capacity);
    return deft_memo_set_capacity(capacity, prev);
}

int DeftGetMemoizationStats(int64_t *hits, int64_t *misses) {
    API_BEGIN();
    if (api_check_out(hits, "hits") || api_check_out(misses, "misses")) return -1;
    long h, m;
    deft_memo_stats(&h, &m);
    *hits = h, *misses = m;
    return 0;
}
