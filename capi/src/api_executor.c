/* The executor (CachedOp): creation, runs, plan figures, release. */
#include <stdlib.h>

#include "capi/src/api.h"
#include "core/imperative/cached_call.h"
#include "core/imperative/deferred.h"
#include "core/graph/executor.h"
#include "core/graph/gradient.h"
#include "core/graph/pass.h"

static int api_cached_op(DeftCachedOpHandle handle, deft_cached_op_t **out) {
    void *object;
    if (deft_handle_get(handle, DEFT_HANDLE_CACHED_OP, "op", &object)) return -1;
    *out = object;
    return 0;
}

/* The graph the flags ask for: the gradient graph, fused, or `s` itself. */
static int prepare(deft_symbol_t *s, int flags, deft_symbol_t **out) {
    deft_symbol_t *grad = s, *fused = NULL;
    if ((flags & DEFT_CACHED_OP_BACKWARD) && deft_symbol_gradient_all(s, &grad)) return -1;
    if (!(flags & DEFT_CACHED_OP_FUSE)) {
        *out = grad;
        return 0;
    }
    int status = deft_passes_apply(grad, "Fuse", &fused);
    if (grad != s) deft_symbol_free(grad);
    *out = fused;
    return status;
}

int DeftCachedOpCreate(DeftSymbolHandle sym, int flags, DeftCachedOpHandle *out) {
    API_BEGIN();
    deft_symbol_t *s = NULL;
    deft_cached_op_t *op;
    if (api_symbol_get(sym, "sym", &s) || api_check_out(out, "out")) return -1;
    const int known = DEFT_CACHED_OP_NO_MEMORY_PLAN | DEFT_CACHED_OP_BACKWARD | DEFT_CACHED_OP_FUSE;
    if (flags & ~known)
        return deft_error(DEFT_ERR_VALUE, "flags is %d, expected DeftCachedOpFlag values", flags);
    deft_symbol_t *graph;
    if (prepare(s, flags, &graph)) return -1;
    int status = deft_cached_op_new(graph, !(flags & DEFT_CACHED_OP_NO_MEMORY_PLAN), &op);
    if (graph != s) deft_symbol_free(graph);
    if (status) return -1;
    DeftCachedOpHandle handle = deft_handle_new(DEFT_HANDLE_CACHED_OP, op);
    if (!handle) {
        deft_cached_op_release(op);
        return -1;
    }
    *out = handle;
    return 0;
}

/* The call's arrays, looked up: in `room` when they fit, else on the heap. */
static deft_ndarray_t **array_list(deft_ndarray_t **room, size_t fits, size_t n) {
    if (n <= fits) return room;
    deft_ndarray_t **list = malloc(n * sizeof *list);
    if (!list) deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a list of %zu arrays", n);
    return list;
}

static int invoke(deft_cached_op_t *op, int num_inputs, const DeftNDArrayHandle *inputs,
                  int *num_outputs, DeftNDArrayHandle *outputs, deft_ndarray_t **in,
                  deft_ndarray_t **out) {
    int room = *num_outputs;
    if (api_ndarrays(inputs, num_inputs, "inputs", false, in) ||
        api_ndarrays(outputs, room, "outputs", true, out))
        return -1;
    int lazy = deft_deferred_find_lazy(room, out);
    if (lazy >= 0)
        return deft_error(DEFT_ERR_VALUE,
                          "outputs[%d] is a lazy array (deferred compute), which cannot be written",
                          lazy);
    int produced = room;
    if (deft_cached_call(op, num_inputs, in, &produced, out) ||
        api_wrap_outputs(produced, out, outputs))
        return -1;
    *num_outputs = produced;
    return 0;
}

/* Any number of inputs and outputs: small calls look their arrays up on the
 * stack, large ones on the heap. */
int DeftCachedOpInvoke(DeftCachedOpHandle handle, int num_inputs, const DeftNDArrayHandle *inputs,
                       int *num_outputs, DeftNDArrayHandle *outputs) {
    API_BEGIN();
    deft_cached_op_t *op = NULL;
    if (api_cached_op(handle, &op) || api_check_out(num_outputs, "num_outputs")) return -1;
    if (num_inputs < 0 || (num_inputs > 0 && !inputs))
        return deft_error(DEFT_ERR_VALUE, "num_inputs is %d with inputs %p", num_inputs,
                          (const void *)inputs);
    int room = *num_outputs;
    if (room < 0 || (room > 0 && !outputs))
        return deft_error(DEFT_ERR_VALUE, "*num_outputs is %d with outputs %p", room,
                          (const void *)outputs);
    deft_ndarray_t *in_room[DEFT_OP_MAX_INPUTS], *out_room[DEFT_OP_MAX_OUTPUTS];
    deft_ndarray_t **in = array_list(in_room, DEFT_OP_MAX_INPUTS, (size_t)num_inputs);
    deft_ndarray_t **out = array_list(out_room, DEFT_OP_MAX_OUTPUTS, (size_t)room);
    int status = in && out ? invoke(op, num_inputs, inputs, num_outputs, outputs, in, out) : -1;
    if (in != in_room) free(in);
    if (out != out_room) free(out);
    return status;
}

int DeftCachedOpGetPlanStat(DeftCachedOpHandle handle, int stat, int64_t *out) {
    API_BEGIN();
    deft_cached_op_t *op = NULL;
    deft_memory_plan_t plan;
    if (api_cached_op(handle, &op) || api_check_out(out, "out")) return -1;
    if (stat < DEFT_PLAN_ARENA_BYTES || stat > DEFT_PLAN_SHARING_ONLY_BYTES)
        return deft_error(DEFT_ERR_VALUE, "stat is %d, expected a DeftPlanStat (0 to 3)", stat);
    if (deft_cached_op_last_plan(op, &plan)) return -1;
    size_t values[] = {plan.arena_bytes, plan.naive_bytes, plan.inplace_only_bytes,
                       plan.sharing_only_bytes};
    *out = (int64_t)values[stat];
    return 0;
}

int DeftCachedOpFree(DeftCachedOpHandle handle) {
    API_BEGIN();
    if (!handle) return 0;
    void *object;
    if (deft_handle_retire(handle, DEFT_HANDLE_CACHED_OP, "op", &object)) return -1;
    deft_cached_op_release(object);
    return 0;
}
