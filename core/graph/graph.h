/*
 * An indexed graph: the nodes that outputs reach, in post-order (every node
 * after its inputs), each with an id, a name, and ids for its output
 * entries (node_row_ptr, as in MXNet's JSON). Passes, JSON and the executor
 * work on this form; it holds a reference to every node.
 *
 * Names: a node's own name if it has one; otherwise an operator node is
 * named after its operator and its rank among same-named nodes in this order
 * ("fullyconnected0", "fullyconnected1"), and a variable made for a missing
 * input after its first consumer and that input ("fullyconnected0_weight").
 * The same graph is always named the same way. A default name is written
 * into the node the first time a graph containing it is named, so every
 * later view of the node (its children, a larger graph) agrees with it.
 * deft_graph_build names at once; graphs built to run (executors:
 * deft_graph_build_unnamed) name only when a name is asked for
 * (deft_graph_name: an error message, an input's name), since naming a node
 * cost more than indexing and running it.
 */
#ifndef DEFT_CORE_GRAPH_H
#define DEFT_CORE_GRAPH_H

#include <stdint.h>

#include "core/graph/node.h"

/* Small graphs (most deferred runs) keep their node list inline, and live
 * in one record (records.h) with their tables: building one costs a list
 * pop, not eight mallocs. */
#define DEFT_GRAPH_SMALL 8

typedef struct deft_graph_slot {
    const deft_node_t *key;
    int id;
} deft_graph_slot_t;

typedef struct deft_graph {
    int num_nodes;
    deft_node_t **nodes; /* post-order; retained (borrowed when `borrowed`) */
    /* Holds no reference to its nodes or outputs (deft_graph_build_cut_borrowed). */
    bool borrowed;
    /* per node: its name (the node's own, which the graph names once and holds); NULL until
     * named (deft_graph_name reads it) */
    char **names;
    int *row_ptr; /* entry ids of node i are row_ptr[i] .. row_ptr[i+1]-1 */
    /* entry id read by input k of node i: in_entry[in_ptr[i] + k] (no lookups on hot walks) */
    int *in_ptr, *in_entry;
    int num_outputs;
    deft_entry_t *outputs; /* retained; allocated with the graph */
    int *output_ids;       /* per output, its node's id (NULL in a view made elsewhere) */
    bool *leaf;            /* cut graphs: per node, its value is given (NULL otherwise) */
    /* node pointer -> id, open addressing (deft_graph_slot_t), made on first use */
    _Atomic(void *) map;
    void *tables; /* row_ptr, in_ptr, in_entry and leaf when malloc'd (NULL: in the record) */
    /* per node, how it is used (read, updated in place): made on first use (graph.c) */
    _Atomic(void *) uses; /* unsigned char per node */
    /* per node, bit k: output k is read by no node and is no graph output (made on first use) */
    _Atomic(void *) unwanted; /* uint64_t per node */
    deft_node_t *small_nodes[DEFT_GRAPH_SMALL];
} deft_graph_t;

int deft_graph_build(int num_outputs, const deft_entry_t *outputs, deft_graph_t **out);
/* As deft_graph_build, its nodes named when first asked (deft_graph_name). */
int deft_graph_build_unnamed(int num_outputs, const deft_entry_t *outputs, deft_graph_t **out);
/*
 * The graph of `outputs` from what a caller already knows of it: its nodes
 * in the order deft_graph_build gives them, per node and input the entry id
 * it reads (in_entry, in that order), and each output's node id. Unnamed, as
 * deft_graph_build_unnamed. For a caller that made the nodes in that order
 * (an export copying a recorded graph): no walk, no map. On success the
 * graph takes over one reference to each node (the caller's, which it no
 * longer releases: a retain and a release per node fewer); on failure the
 * references stay the caller's.
 */
int deft_graph_from_order(int num_nodes, deft_node_t *const *nodes, const int *in_entry,
                          int num_outputs, const deft_entry_t *outputs, const int *output_ids,
                          deft_graph_t **out);
/* The name of node id: names the graph first if it is not named yet (thread-safe). */
const char *deft_graph_name(const deft_graph_t *g, int id);

/* Whether a node's value is given from outside, so its inputs need not be visited. */
typedef bool (*deft_graph_leaf_fn)(const deft_node_t *node, void *ctx);

/*
 * The graph the outputs reach, cut at the operator nodes `is_leaf` accepts:
 * those are kept as leaves, like variables, and their inputs are not
 * followed. Nodes are not named (names is NULL): a cut graph is for running,
 * not for showing. Used to run the not-yet-computed part of a recorded graph.
 */
int deft_graph_build_cut(int num_outputs, const deft_entry_t *outputs, deft_graph_leaf_fn is_leaf,
                         void *ctx, deft_graph_t **out);
/*
 * As deft_graph_build_cut, holding no reference to the nodes or outputs: for
 * a caller that keeps every node alive for the graph's whole life (an export,
 * under the record lock, holds the arrays that reach the recorded nodes).
 * Retaining and releasing each node were two atomic updates per node, and
 * wrote into nodes the walk otherwise only reads.
 */
int deft_graph_build_cut_borrowed(int num_outputs, const deft_entry_t *outputs,
                                  deft_graph_leaf_fn is_leaf, void *ctx, deft_graph_t **out);
void deft_graph_free(deft_graph_t *graph);

/* Id of a node in the graph, or -1. The first call makes the graph's map:
 * walks that know ids (in_entry, output ids) need none. */
int deft_graph_node_id(const deft_graph_t *graph, const deft_node_t *node);
/* The entry id of graph output o. */
int deft_graph_output_entry(const deft_graph_t *g, int o);
/* An auxiliary state: a variable whose every use is an in-place update
 * (running statistics). The first call makes a table for all nodes in one
 * pass over the inputs; later calls look it up, so asking for every variable
 * is linear in the graph. */
bool deft_graph_is_auxiliary(const deft_graph_t *g, const deft_node_t *var);
/* A variable some node updates in place (an auxiliary state, or a weight of
 * a training-step graph, also read by others). */
bool deft_graph_is_updated(const deft_graph_t *g, const deft_node_t *var);
/* The same, of the node with id `id`. */
bool deft_graph_is_auxiliary_at(const deft_graph_t *g, int id);
bool deft_graph_is_updated_at(const deft_graph_t *g, int id);
/* Per node, its outputs that no node reads and the graph does not return (bit k:
 * output k; outputs past 63 are always wanted): kernels may skip them. The
 * table is made on the first call and kept; NULL when it cannot be made (all
 * outputs wanted). */
const uint64_t *deft_graph_unwanted_outputs(const deft_graph_t *g);
/* A variable, or an operator node whose value the cut graph is given. */
static inline bool deft_graph_is_leaf(const deft_graph_t *g, int id) {
    return !g->nodes[id]->op || (g->leaf && g->leaf[id]);
}
static inline int deft_graph_entry_id(const deft_graph_t *g, int node_id, int index) {
    return g->row_ptr[node_id] + index;
}
static inline int deft_graph_input_entry(const deft_graph_t *g, int node_id, int k) {
    return g->in_entry[g->in_ptr[node_id] + k];
}
/* The node producing entry e (a binary search: row_ptr is sorted). */
int deft_graph_entry_node(const deft_graph_t *g, int e);
static inline int deft_graph_num_entries(const deft_graph_t *g) {
    return g->row_ptr[g->num_nodes];
}

#endif
