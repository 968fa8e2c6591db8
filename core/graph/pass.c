#include "core/graph/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/gradient.h"
#include "core/graph/place_device.h"

static const deft_pass_t passes[] = {
    {"DCE", "dead-code elimination: keep only nodes the outputs depend on", deft_pass_dce},
    {"CSE", "common sub-expression elimination: merge equal deterministic nodes", deft_pass_cse},
    {"InferShape", "write inferred shapes and dtypes into the variables' attributes",
     deft_pass_infer_shape},
    {"Fuse", "fuse chains of elementwise operators into nodes evaluated in cache-sized tiles",
     deft_pass_fuse},
    {"PlanMemory", "write each output's arena offset into its node (\"__storage_offset__\")",
     deft_pass_plan_memory},
    {"Gradient", "append the gradient of every argument (DeftSymbolGradient over all of them)",
     deft_symbol_gradient_all},
    {"PlaceDevice",
     "place nodes by their \"__device__\" attributes (default cpu(0)), copying "
     "across devices",
     deft_pass_place_device_default},
    {"FoldBatchNorm",
     "fold each BatchNorm into the Convolution (without bias) it alone reads (_conv_bn); "
     "executors do it to their graphs",
     deft_pass_fold_bn},
};

const deft_pass_t *deft_pass_find(const char *name) {
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
        if (strcmp(passes[i].name, name) == 0) return &passes[i];
    return NULL;
}

static int unknown_pass(const char *name, size_t len) {
    char known[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                                 passes[i].name);
    return deft_error(DEFT_ERR_VALUE, "unknown pass '%.*s' (passes: %s)", (int)len, name, known);
}

int deft_passes_apply(const deft_symbol_t *in, const char *names, deft_symbol_t **out) {
    if (deft_symbol_check_composed(in, "sym")) return -1;
    deft_symbol_t *current;
    if (deft_symbol_from_entries(in->num_outputs, in->outputs, &current)) return -1;
    const char *p = names;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        size_t len = strcspn(p, ", ");
        if (len == 0) break;
        char name[64];
        if (len >= sizeof name) {
            deft_symbol_free(current);
            return unknown_pass(p, len);
        }
        memcpy(name, p, len);
        name[len] = '\0';
        const deft_pass_t *pass = deft_pass_find(name);
        deft_symbol_t *next;
        if (!pass || pass->run(current, &next)) {
            deft_symbol_free(current);
            return pass ? -1 : unknown_pass(p, len);
        }
        deft_symbol_free(current);
        current = next;
        p += len;
    }
    *out = current;
    return 0;
}

int deft_graph_rebuild(const deft_graph_t *g, const int *same_as, deft_node_t *const *replace,
                       deft_symbol_t **out) {
    deft_node_t **now = calloc((size_t)(g->num_nodes ? g->num_nodes : 1), sizeof *now);
    if (!now) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a pass table");
    int status = 0;
    for (int i = 0; i < g->num_nodes && status == 0; i++) {
        if (same_as && same_as[i] >= 0) {
            now[i] = deft_node_retain(now[same_as[i]]);
            continue;
        }
        deft_node_t *node = replace && replace[i] ? replace[i] : g->nodes[i];
        if (!node->op) {
            now[i] = deft_node_retain(node);
            continue;
        }
        deft_entry_t inputs[DEFT_OP_MAX_INPUTS];
        bool changed = false;
        for (int k = 0; k < node->num_inputs; k++) {
            int id = deft_graph_node_id(g, node->inputs[k].node);
            deft_node_t *src = id >= 0 && now[id] ? now[id] : node->inputs[k].node;
            inputs[k] = (deft_entry_t){src, node->inputs[k].index};
            changed = changed || src != node->inputs[k].node;
        }
        if (!changed) {
            now[i] = deft_node_retain(node);
            continue;
        }
        status = deft_node_new_op(
            node->op, node->name, node->attrs.count, (const char *const *)node->attrs.keys,
            (const char *const *)node->attrs.vals, node->num_inputs, inputs, &now[i]);
    }
    deft_entry_t *heads = calloc((size_t)(g->num_outputs ? g->num_outputs : 1), sizeof *heads);
    if (!heads && status == 0) status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    for (int o = 0; status == 0 && o < g->num_outputs; o++)
        heads[o] =
            (deft_entry_t){now[deft_graph_node_id(g, g->outputs[o].node)], g->outputs[o].index};
    if (status == 0) status = deft_symbol_from_entries(g->num_outputs, heads, out);
    free(heads);
    for (int i = 0; i < g->num_nodes; i++) deft_node_release(now[i]);
    free(now);
    return status;
}
