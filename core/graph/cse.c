/*
 * Common sub-expression elimination: two operator nodes with the same
 * operator, the same attributes and the same inputs (after merging their
 * inputs) compute the same values, so the later one is replaced by the
 * earlier. Random operators are never merged, nor operators that update an
 * input in place (BatchNorm's moving statistics, optimizer updates): two
 * such calls are two updates. Variables are never merged: two variables are
 * two arguments, whatever their names.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/pass.h"

static bool same_attrs(const deft_node_t *a, const deft_node_t *b) {
    if (a->attrs.count != b->attrs.count) return false;
    for (int i = 0; i < a->attrs.count; i++) /* both sorted by key */
        if (strcmp(a->attrs.keys[i], b->attrs.keys[i]) ||
            strcmp(a->attrs.vals[i], b->attrs.vals[i]))
            return false;
    return true;
}

/* The representative of input k of n: the first node equivalent to it. */
static int input_rep(const deft_graph_t *g, const int *same_as, const deft_node_t *n, int k) {
    int id = deft_graph_node_id(g, n->inputs[k].node);
    return same_as[id] >= 0 ? same_as[id] : id;
}

/* Same computation, given each node's inputs mapped to their representatives. */
static bool equivalent(const deft_graph_t *g, const int *same_as, const deft_node_t *a,
                       const deft_node_t *b) {
    if (a->op != b->op || a->num_inputs != b->num_inputs || !same_attrs(a, b)) return false;
    for (int k = 0; k < a->num_inputs; k++)
        if (input_rep(g, same_as, a, k) != input_rep(g, same_as, b, k) ||
            a->inputs[k].index != b->inputs[k].index)
            return false;
    return true;
}

static size_t node_hash(const deft_graph_t *g, const int *same_as, const deft_node_t *n) {
    size_t h = (size_t)(uintptr_t)n->op * 31u + (size_t)n->num_inputs;
    for (int k = 0; k < n->num_inputs; k++) {
        h = h * 1000003u ^ (size_t)input_rep(g, same_as, n, k);
        h = h * 31u + (size_t)n->inputs[k].index;
    }
    for (int i = 0; i < n->attrs.count; i++)
        for (const char *c = n->attrs.vals[i]; *c; c++) h = h * 131u + (unsigned char)*c;
    return h;
}

int deft_pass_cse(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g;
    if (deft_graph_build(in->num_outputs, in->outputs, &g)) return -1;
    int cap = 16;
    while (cap < 2 * g->num_nodes) cap *= 2;
    int *same_as = malloc(((size_t)g->num_nodes + 1) * sizeof *same_as);
    int *table = malloc((size_t)cap * sizeof *table);
    if (!same_as || !table) {
        free(same_as), free(table), deft_graph_free(g);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the CSE table");
    }
    for (int i = 0; i < cap; i++) table[i] = -1;
    for (int i = 0; i < g->num_nodes; i++) {
        same_as[i] = -1;
        const deft_node_t *n = g->nodes[i];
        if (!n->op || n->op->op->nondeterministic || deft_op_mutates_any(n->op->op)) continue;
        size_t slot = node_hash(g, same_as, n) & (size_t)(cap - 1);
        for (; table[slot] >= 0; slot = (slot + 1) & (size_t)(cap - 1)) {
            if (equivalent(g, same_as, g->nodes[table[slot]], n)) {
                same_as[i] = table[slot];
                break;
            }
        }
        if (same_as[i] < 0) table[slot] = i;
    }
    int status = deft_graph_rebuild(g, same_as, NULL, out);
    free(same_as), free(table);
    deft_graph_free(g);
    return status;
}
