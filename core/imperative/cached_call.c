#include "core/imperative/cached_call.h"

#include <stdlib.h>

#include "core/base/error.h"
#include "core/graph/subgraph.h"
#include "core/imperative/autograd.h"
#include "core/imperative/deferred.h"
#include "core/imperative/view.h"
#include "core/imperative/invoke.h"
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

/* The caller gets the visible outputs; the kept ones stay with the recorded node. */
static void hand_over(deft_ndarray_t **all, int visible, int produced, deft_ndarray_t **out) {
    for (int k = 0; k < visible; k++) out[k] = all[k];
    for (int k = visible; k < produced; k++) deft_ndarray_release(all[k]);
}

/* Run the graph of `sg` (the symbol's outputs, then the activations its
 * gradient keeps) and record the call as one _CachedOp node. */
static int run_and_record(const deft_op_entry_t *entry, deft_subgraph_t *sg, int nin,
                          deft_ndarray_t *const *in, int *nout, deft_ndarray_t **out,
                          const char *const *keys, const char *const *vals) {
    const deft_params_t *params;
    deft_autograd_call_t call;
    deft_cached_op_t *exec = deft_subgraph_executor(sg);
    int visible = deft_subgraph_symbol(sg)->num_outputs;
    int produced = deft_cached_op_num_outputs(exec);
    if (visible > *nout)
        return deft_error(DEFT_ERR_VALUE, "the graph has %d outputs, but there is room for %d",
                          visible, *nout);
    deft_ndarray_t *all[DEFT_OP_MAX_OUTPUTS] = {NULL};
    bool any_given = false;
    for (int k = 0; k < visible; k++) all[k] = out[k], any_given = any_given || out[k];
    if (deft_op_parse_params(entry, 1, keys, vals, &params) ||
        deft_autograd_plan(entry, params->v, nin, in, produced, all, 1, keys, vals, &call) ||
        deft_cached_op_invoke(exec, nin, in, &produced, all))
        return -1;
    deft_desc_t out_desc[DEFT_OP_MAX_OUTPUTS];
    for (int k = 0; k < produced; k++)
        out_desc[k] = (deft_desc_t){all[k]->tensor.shape, all[k]->tensor.dtype};
    if (deft_autograd_record(&call, entry, params->v, nin, in, produced, out_desc, 1, keys, vals,
                             all, !any_given)) {
        for (int k = 0; k < produced; k++)
            if (k >= visible || !out[k]) deft_ndarray_release(all[k]);
        return -1;
    }
    hand_over(all, visible, produced, out);
    *nout = visible;
    return 0;
}

/* The value of graph output o, for the caller: a fresh copy where it is a
 * graph input or an earlier output (as the executor's runs give). */
static int output_value(const deft_graph_t *g, deft_ndarray_t **val, int o, bool *handed,
                        deft_ndarray_t **out) {
    int e = deft_graph_entry_id(g, deft_graph_node_id(g, g->outputs[o].node), g->outputs[o].index);
    if (!g->outputs[o].node->op || handed[e]) {
        int n = 1;
        *out = NULL;
        return deft_invoke(deft_registry_find("_copy"), 1, &val[e], &n, out, 0, NULL, NULL);
    }
    handed[e] = true;
    *out = deft_ndarray_retain(val[e]);
    return 0;
}

/* Run the graph's operators one by one, each recorded on its own as an eager
 * block's would be: for graphs that one node cannot stand for (too many
 * inputs or kept values, or a gradient that cannot keep its activations). */
static int run_node_by_node(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                            deft_ndarray_t **out) {
    /* the symbol as given: the executor's graph has nodes (folded
     * BatchNorms) that have no gradient and run only inside it */
    const deft_symbol_t *source = deft_cached_op_source(op);
    deft_graph_t *g;
    if (deft_graph_build(source->num_outputs, source->outputs, &g)) return -1;
    if (g->num_outputs > *nout) {
        int n = g->num_outputs;
        deft_graph_free(g);
        return deft_error(DEFT_ERR_VALUE, "the graph has %d outputs, but there is room for %d", n,
                          *nout);
    }
    int entries = deft_graph_num_entries(g), status = 0, made = 0;
    deft_ndarray_t **val = calloc((size_t)entries + 1, sizeof *val);
    bool *handed = calloc((size_t)entries + 1, sizeof *handed);
    if (!val || !handed) status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph run");
    for (int a = 0; status == 0 && a < nin; a++)
        val[g->row_ptr[deft_graph_node_id(g, deft_cached_op_input_node(op, a))]] =
            deft_ndarray_retain(in[a]);
    deft_ndarray_t *args[DEFT_OP_MAX_INPUTS];
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        if (!node->op) continue;
        for (int k = 0; k < node->num_inputs; k++) args[k] = val[deft_graph_input_entry(g, i, k)];
        int n = node->num_outputs;
        status = deft_invoke(node->op, node->num_inputs, args, &n, &val[g->row_ptr[i]],
                             node->attrs.count, (const char *const *)node->attrs.keys,
                             (const char *const *)node->attrs.vals);
    }
    for (; status == 0 && made < g->num_outputs; made++)
        status = output_value(g, val, made, handed, &out[made]);
    for (int e = 0; val && e < entries; e++) deft_ndarray_release(val[e]);
    for (int o = 0; status && o < made; o++) deft_ndarray_release(out[o]), out[o] = NULL;
    free(val), free(handed);
    if (status == 0) *nout = g->num_outputs;
    deft_graph_free(g);
    return status;
}

/* A call with strided views among its inputs runs on dense copies of them
 * (view.h); a graph that updates such an input in place, or a view given
 * for an output, would lose its writes: errors. */
static int call_on_dense(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                         deft_ndarray_t **out) {
    for (int i = 0; i < nin; i++)
        if (deft_ndarray_is_strided(in[i]) && deft_cached_op_input_written(op, i))
            return deft_error(DEFT_ERR_VALUE,
                              "input %d is a strided view, which the graph updates in place: "
                              "pass a dense array",
                              i);
    if (deft_check_no_views(*nout, out, "outputs", "a CachedOp call cannot write into it"))
        return -1;
    deft_ndarray_t *room[32], **dense = nin <= 32 ? room : malloc((size_t)nin * sizeof *dense);
    if (!dense) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %d inputs", nin);
    int status = deft_dense_inputs(nin, in, dense);
    if (status == 0) {
        status = deft_cached_call(op, nin, dense, nout, out);
        deft_release_dense(nin, in, dense);
    }
    if (dense != room) free(dense);
    return status;
}

int deft_cached_call(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                     deft_ndarray_t **out) {
    if (deft_any_strided(nin, in) || deft_any_strided(*nout, out))
        return call_on_dense(op, nin, in, nout, out);
    bool deferred = deft_deferred_enabled();
    bool record =
        !deferred && deft_autograd_recording() && deft_autograd_any_requires_grad(nin, in);
    if (!deferred && !record)
        return deft_deferred_compute(nin, in) || deft_cached_op_invoke(op, nin, in, nout, out);
    if (record) {
        deft_subgraph_t *sg = NULL;
        if (deft_deferred_compute(nin, in)) return -1;
        if (nin <= DEFT_OP_MAX_INPUTS && deft_cached_op_subgraph(op, true, &sg) == 0) {
            const char *keys[1] = {"subgraph"}, *vals[1] = {deft_subgraph_id(sg)};
            return run_and_record(deft_registry_find("_CachedOp"), sg, nin, in, nout, out, keys,
                                  vals);
        }
        return run_node_by_node(op, nin, in, nout, out);
    }
    if (deft_cached_op_updates_inputs(op))
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "the graph updates auxiliary states in place, so a call of it cannot "
                          "be recorded by deferred compute; call it with deferred compute off");
    if (nin > DEFT_OP_MAX_INPUTS)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "a recorded graph call takes at most %d inputs",
                          DEFT_OP_MAX_INPUTS);
    deft_subgraph_t *sg;
    if (deft_cached_op_subgraph(op, false, &sg)) return -1;
    const char *keys[1] = {"subgraph"}, *vals[1] = {deft_subgraph_id(sg)};
    /* the recorded node holds the subgraph its parameter names */
    return record_deferred(deft_registry_find("_CachedOp"), op, nin, in, nout, out, keys, vals);
}
