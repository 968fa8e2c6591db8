/*
 * FoldBatchNorm: a Convolution without bias whose output is read by one
 * BatchNorm over its channels, and by nothing else, becomes one _conv_bn
 * node (core/op/conv_bn.c); with the relu Activation that alone reads the
 * BatchNorm's output, one _conv_bn_relu node. In predict mode the node applies BatchNorm as a
 * per-channel scale and shift inside the convolution's kernel; in training
 * mode it runs the two operators' kernels, so the graph computes what it
 * computed before in either mode. Executors apply it to their own graphs;
 * symbols, and so exported graphs, keep the two MXNet operators.
 *
 * Folded only where nothing else needs the two nodes' values: the
 * convolution's output has the one reader and is no graph output, and
 * BatchNorm's hidden outputs (the batch statistics a gradient reads) have
 * no reader either. The node keeps BatchNorm's inputs in its order (after
 * the convolution's data and weight), so the graph's arguments and
 * auxiliary states are listed as before.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/pass.h"
#include "core/op/registry.h"

/* BatchNorm's parameters the fused node takes (the others have no effect or forbid folding). */
static const char *const bn_keys[] = {"eps", "momentum", "fix_gamma", "use_global_stats", "axis"};

/* An operator node of that name without annotations (a device to run on,
 * a profiler scope: which the one node could not honour for both). */
static bool is_op(const deft_node_t *n, const char *name) {
    if (!n->op || strcmp(n->op->op->name, name) != 0) return false;
    for (int a = 0; a < n->attrs.count; a++)
        if (deft_attr_is_annotation(n->attrs.keys[a])) return false;
    return true;
}

/* readers[e]: the node inputs reading entry e, plus 2 for a graph output;
 * reader[e]: the last node reading it. */
static void count_readers(const deft_graph_t *g, int *readers, int *reader) {
    for (int e = 0; e < deft_graph_num_entries(g); e++) readers[e] = 0;
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++) {
            readers[deft_graph_input_entry(g, i, k)]++;
            reader[deft_graph_input_entry(g, i, k)] = i;
        }
    for (int o = 0; o < g->num_outputs; o++)
        readers[deft_graph_entry_id(g, deft_graph_node_id(g, g->outputs[o].node),
                                    g->outputs[o].index)] += 2;
}

/* The convolution node BatchNorm node i folds into, or -1. Parameters by
 * index: BatchNorm's output_mean_var 4, axis 5; Convolution's no_bias 7. */
static int foldable(const deft_graph_t *g, const int *readers, int i) {
    const deft_node_t *bn = g->nodes[i];
    if (!is_op(bn, "BatchNorm") || bn->num_outputs != 3 || bn->params[4].i || bn->params[5].i != 1)
        return -1;
    for (int k = 1; k < 3; k++)
        if (readers[deft_graph_entry_id(g, i, k)]) return -1;
    int e = deft_graph_input_entry(g, i, 0), c = deft_graph_entry_node(g, e);
    const deft_node_t *conv = g->nodes[c];
    if (!is_op(conv, "Convolution") || !conv->params[7].i || e != deft_graph_entry_id(g, c, 0) ||
        readers[e] != 1)
        return -1;
    return c;
}

/* The relu Activation that alone reads BatchNorm node i's output, or -1. */
static int relu_after(const deft_graph_t *g, const int *readers, const int *reader, int i) {
    int e = deft_graph_entry_id(g, i, 0);
    if (readers[e] != 1) return -1;
    const char *act = deft_node_attr(g->nodes[reader[e]], "act_type");
    return is_op(g->nodes[reader[e]], "Activation") && act && strcmp(act, "relu") == 0 ? reader[e]
                                                                                       : -1;
}

/* The _conv_bn node of BatchNorm `bn` over Convolution `conv` (_conv_bn_relu
 * with `relu`, named as it): the convolution's parameters as given, then
 * BatchNorm's that it takes. */
static int fused_node(const deft_node_t *conv, const deft_node_t *bn, const deft_node_t *relu,
                      deft_node_t **out) {
    const char *keys[DEFT_OP_MAX_PARAMS], *vals[DEFT_OP_MAX_PARAMS];
    int n = 0;
    for (int a = 0; a < conv->attrs.count && n < DEFT_OP_MAX_PARAMS; a++)
        keys[n] = conv->attrs.keys[a], vals[n++] = conv->attrs.vals[a];
    for (size_t b = 0; b < sizeof bn_keys / sizeof bn_keys[0]; b++) {
        const char *v = deft_node_attr(bn, bn_keys[b]);
        if (v && n < DEFT_OP_MAX_PARAMS) keys[n] = bn_keys[b], vals[n++] = v;
    }
    deft_entry_t in[6] = {conv->inputs[0], conv->inputs[1], bn->inputs[1],
                          bn->inputs[2],   bn->inputs[3],   bn->inputs[4]};
    return deft_node_new_op(deft_registry_find(relu ? "_conv_bn_relu" : "_conv_bn"),
                            relu ? relu->name : bn->name, n, keys, vals, 6, in, out);
}

/* The graph g with its BatchNorms folded (out), or NULL in *out when g has
 * no BatchNorm to fold: then g itself is what to run. */
int deft_fold_bn_graph(const deft_graph_t *g, deft_symbol_t **out) {
    *out = NULL;
    bool any = false;
    for (int i = 0; !any && i < g->num_nodes; i++) any = is_op(g->nodes[i], "BatchNorm");
    if (!any) return 0; /* most graphs: no tables, no rebuild */
    size_t entries = (size_t)deft_graph_num_entries(g) + 1;
    int *readers = malloc(2 * entries * sizeof *readers), *reader = readers + entries;
    deft_node_t **replace = calloc((size_t)g->num_nodes + 1, sizeof *replace);
    int status = readers && replace ? 0
                                    : deft_error(DEFT_ERR_OUT_OF_MEMORY,
                                                 "cannot allocate the BatchNorm folding tables");
    if (status == 0) count_readers(g, readers, reader);
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        int c = foldable(g, readers, i), r = c >= 0 ? relu_after(g, readers, reader, i) : -1;
        /* a relu replaces itself; the BatchNorm it reads is then read by no one */
        if (c >= 0)
            status = fused_node(g->nodes[c], g->nodes[i], r >= 0 ? g->nodes[r] : NULL,
                                &replace[r >= 0 ? r : i]);
    }
    if (status == 0) status = deft_graph_rebuild(g, NULL, replace, out);
    for (int i = 0; replace && i < g->num_nodes; i++) deft_node_release(replace[i]);
    free(readers), free(replace);
    return status;
}

int deft_pass_fold_bn(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g;
    if (deft_graph_build(in->num_outputs, in->outputs, &g)) return -1;
    int status = deft_fold_bn_graph(g, out);
    if (status == 0 && !*out) status = deft_symbol_from_entries(in->num_outputs, in->outputs, out);
    deft_graph_free(g);
    return status;
}
