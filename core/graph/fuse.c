#define _POSIX_C_SOURCE 200809L
/*
 * Fusion: first of layers, then of elementwise chains.
 *
 * Layers: where nothing else reads the first node's value (nor is it a
 * graph output), a Convolution read by a relu Activation becomes one
 * _conv_relu node (the relu in the convolution's kernel), and relu's
 * gradient of max pooling's, _backward_relu(_backward_Pooling(g, y, p), y)
 * with y relu's output, one _backward_Pooling_relu node (one pass over the
 * data gradient, not two). A training step's graph (DeftSymbolTrainStep)
 * has both at each conv-relu-pool block; the nodes compute what the pairs
 * compute. A softmax cross-entropy loss's gradient, the six nodes that
 * differentiating -pick(log_softmax(x), label) gives, becomes one
 * _backward_pick_log_softmax node (fuse_loss.c).
 *
 * Elementwise: a group of elementwise nodes whose values are read
 * only inside the group becomes one _fused_elemwise node computing the
 * group's last value (its root) tile by tile, so the intermediates never
 * reach main memory.
 *
 * Groups grow backwards from a root: a node joins the group of its readers
 * when every reader is in that one group and its value is not a graph
 * output. Such a group is convex (no path leaves it and comes back), so
 * replacing it by one node keeps the graph acyclic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/fuse_loss.h"
#include "core/graph/pass.h"
#include "core/op/fused.h"
#include "core/op/registry.h"

/* ---- elementwise chains ---- */

enum { NO_READER = -2, MIXED = -1 };

static bool fusible(const deft_node_t *n) {
    if (!n->op || !n->op->op->elementwise || n->num_outputs != 1) return false;
    for (int i = 0; i < n->attrs.count; i++)
        if (deft_attr_is_annotation(n->attrs.keys[i]) || strpbrk(n->attrs.vals[i], " ;=") ||
            !n->attrs.vals[i][0])
            return false;
    return true;
}

/* A reader `reader` (in group `group`, or -1) of node `id`'s value. */
static void note_reader(int *readers_group, int id, int group) {
    int *r = &readers_group[id];
    if (group < 0 || (*r != NO_READER && *r != group))
        *r = MIXED;
    else
        *r = group;
}

/* group[i]: the root of node i's group, or -1 for nodes left alone. */
static void assign_groups(const deft_graph_t *g, int *group, int *readers, int *size) {
    for (int i = 0; i < g->num_nodes; i++) readers[i] = NO_READER, size[i] = 0;
    for (int o = 0; o < g->num_outputs; o++)
        readers[deft_graph_node_id(g, g->outputs[o].node)] = MIXED;
    for (int i = g->num_nodes - 1; i >= 0; i--) {
        const deft_node_t *n = g->nodes[i];
        group[i] = -1;
        if (fusible(n)) {
            int r = readers[i];
            group[i] = r >= 0 && size[r] < DEFT_FUSED_MAX_STEPS ? r : i;
            size[group[i]]++;
        }
        for (int k = 0; k < n->num_inputs; k++)
            note_reader(readers, deft_graph_node_id(g, n->inputs[k].node), group[i]);
    }
}

/* The argument naming input k of member n: a step, or an input of the fused node. */
static void write_arg(FILE *f, const deft_graph_t *g, const int *group, const int *step, int root,
                      const deft_node_t *n, int k, deft_entry_t *ext, int *next) {
    int id = deft_graph_node_id(g, n->inputs[k].node);
    if (group[id] == root) {
        fprintf(f, " t%d", step[id]);
        return;
    }
    int e = 0;
    while (e < *next && (ext[e].node != n->inputs[k].node || ext[e].index != n->inputs[k].index))
        e++;
    if (e == *next) ext[(*next)++] = n->inputs[k];
    fprintf(f, " i%d", e);
}

/* One fused node for the group rooted at `root` (members have ids up to root). */
static int fuse_group(const deft_graph_t *g, const int *group, int *step, int root,
                      deft_node_t **out) {
    deft_entry_t ext[2 * DEFT_FUSED_MAX_STEPS];
    int next = 0, steps = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a fused program");
    for (int i = 0; i <= root; i++) {
        if (group[i] != root) continue;
        const deft_node_t *n = g->nodes[i];
        fprintf(f, "%s%s", steps ? "; " : "", n->op->op->name);
        for (int k = 0; k < n->num_inputs; k++)
            write_arg(f, g, group, step, root, n, k, ext, &next);
        for (int a = 0; a < n->attrs.count; a++)
            fprintf(f, " %s=%s", n->attrs.keys[a], n->attrs.vals[a]);
        step[i] = steps++;
    }
    if (fclose(f) != 0) {
        free(text);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot write a fused program");
    }
    const char *key = "program", *val = text;
    int status = deft_node_new_op(deft_registry_find(DEFT_FUSED_OP_NAME), g->nodes[root]->name, 1,
                                  &key, &val, next, ext, out);
    free(text);
    return status;
}

/* ---- layers ---- */

/* An operator node of that name without annotations (a device, a profiler
 * scope: which one node could not honour for both). */
static bool is_op(const deft_node_t *n, const char *name) {
    if (!n->op || strcmp(n->op->op->name, name) != 0) return false;
    for (int a = 0; a < n->attrs.count; a++)
        if (deft_attr_is_annotation(n->attrs.keys[a])) return false;
    return true;
}

/* readers[e]: the node inputs reading entry e, plus 2 for a graph output. */
static void count_readers(const deft_graph_t *g, int *readers) {
    for (int e = 0; e < deft_graph_num_entries(g); e++) readers[e] = 0;
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            readers[deft_graph_input_entry(g, i, k)]++;
    for (int o = 0; o < g->num_outputs; o++)
        readers[deft_graph_entry_id(g, deft_graph_node_id(g, g->outputs[o].node),
                                    g->outputs[o].index)] += 2;
}

/* The node of input k of node i when i alone reads it and it is that
 * operator's (output 0 of one); else NULL. */
static const deft_node_t *sole_input(const deft_graph_t *g, const int *readers, int i, int k,
                                     const char *name) {
    const deft_node_t *n = g->nodes[i];
    if (k >= n->num_inputs || n->inputs[k].index != 0 || !is_op(n->inputs[k].node, name) ||
        n->inputs[k].node->num_outputs != 1)
        return NULL;
    return readers[deft_graph_input_entry(g, i, k)] == 1 ? n->inputs[k].node : NULL;
}

/* The two above, for the patterns in files of their own (fuse_loss.h). */
bool deft_fuse_is_op(const deft_node_t *n, const char *name) {
    return is_op(n, name);
}
const deft_node_t *deft_fuse_sole_input(const deft_graph_t *g, const int *readers, int i, int k,
                                        const char *name) {
    return sole_input(g, readers, i, k, name);
}

/* Node i's replacement (NULL: none): `op` over `from`'s inputs and attributes. */
static int layer_node(const deft_graph_t *g, const int *readers, int i, deft_node_t **out) {
    const deft_node_t *n = g->nodes[i], *from = NULL;
    const char *op = NULL, *act = is_op(n, "Activation") ? deft_node_attr(n, "act_type") : NULL;
    if (act && strcmp(act, "relu") == 0 && (from = sole_input(g, readers, i, 0, "Convolution")))
        op = "_conv_relu";
    else if (is_op(n, "_backward_relu") &&
             (from = sole_input(g, readers, i, 0, "_backward_Pooling")) &&
             from->inputs[1].node == n->inputs[1].node &&
             from->inputs[1].index == n->inputs[1].index)
        op = "_backward_Pooling_relu";
    if (!op) return deft_fuse_loss_node(g, readers, i, out);
    return deft_node_new_op(
        deft_registry_find(op), n->name, from->attrs.count, (const char *const *)from->attrs.keys,
        (const char *const *)from->attrs.vals, from->num_inputs, from->inputs, out);
}

/* g with its layers fused (*out), or NULL in *out when none fuse. */
static int fuse_layers(const deft_graph_t *g, deft_symbol_t **out) {
    *out = NULL;
    int *readers = malloc(((size_t)deft_graph_num_entries(g) + 1) * sizeof *readers);
    deft_node_t **replace = calloc((size_t)g->num_nodes + 1, sizeof *replace);
    int status = readers && replace ? 0
                                    : deft_error(DEFT_ERR_OUT_OF_MEMORY,
                                                 "cannot allocate the layer fusion tables");
    bool any = false;
    if (status == 0) count_readers(g, readers);
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        status = layer_node(g, readers, i, &replace[i]);
        any |= replace[i] != NULL;
    }
    if (status == 0 && any) status = deft_graph_rebuild(g, NULL, replace, out);
    for (int i = 0; replace && i < g->num_nodes; i++) deft_node_release(replace[i]);
    free(readers), free(replace);
    return status;
}

/* ---- the pass: layers, then elementwise chains ---- */

/* The graph of `in` with its layers fused (fuse_layers), built. */
static int build_fused_layers(const deft_symbol_t *in, deft_graph_t **g) {
    deft_symbol_t *layers;
    if (deft_graph_build(in->num_outputs, in->outputs, g)) return -1;
    int status = fuse_layers(*g, &layers);
    if (status || !layers) return status;
    deft_graph_free(*g);
    *g = NULL;
    status = deft_graph_build(layers->num_outputs, layers->outputs, g);
    deft_symbol_free(layers);
    return status;
}

int deft_pass_fuse(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g = NULL;
    if (build_fused_layers(in, &g)) {
        deft_graph_free(g);
        return -1;
    }
    size_t n = (size_t)g->num_nodes + 1;
    int *group = malloc(n * sizeof *group), *readers = malloc(n * sizeof *readers);
    int *size = malloc(n * sizeof *size);
    deft_node_t **replace = calloc(n, sizeof *replace);
    int status = group && readers && size && replace
                     ? 0
                     : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the fusion tables");
    if (status == 0) assign_groups(g, group, readers, size);
    int *step = readers; /* free again once the groups are known */
    for (int i = 0; status == 0 && i < g->num_nodes; i++)
        if (group[i] == i && size[i] >= 2) status = fuse_group(g, group, step, i, &replace[i]);
    if (status == 0) status = deft_graph_rebuild(g, NULL, replace, out);
    for (int i = 0; replace && i < g->num_nodes; i++) deft_node_release(replace[i]);
    free(group), free(readers), free(size), free(replace);
    deft_graph_free(g);
    return status;
}
