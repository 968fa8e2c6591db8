#define _POSIX_C_SOURCE 200809L
/*
 * Elementwise fusion. A group of elementwise nodes whose values are read
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
#include "core/graph/pass.h"
#include "core/op/fused.h"
#include "core/op/registry.h"

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

int deft_pass_fuse(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g;
    if (deft_graph_build(in->num_outputs, in->outputs, &g)) return -1;
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
