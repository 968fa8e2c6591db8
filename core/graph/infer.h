/*
 * Shape and dtype inference over an indexed graph (a pass: it reads the
 * graph and produces a table, never changing nodes).
 *
 * Variables start from the caller's shapes and dtypes, else from their
 * "__shape__" and "__dtype__" attributes (dtype float32 when only the shape
 * is given, as in MXNet). Then, until nothing changes: an operator whose
 * inputs are all known gets its outputs from its own inference; an operator
 * that can tell unknown inputs from what is known (FullyConnected's weight
 * from its data, an elementwise input from its output) fills them in.
 * Entries that stay unknown are reported as such; an operator that rejects
 * its inputs is an error naming the node.
 *
 * A variable's shape may be partial (some dimensions DEFT_DIM_UNKNOWN, as in
 * "(-1,784)"): it stays unknown until inference finds its full shape, which
 * must agree with the known dimensions. Unknown entries keep the partial
 * shape in their description.
 */
#ifndef DEFT_CORE_INFER_H
#define DEFT_CORE_INFER_H

#include "core/graph/graph.h"

typedef struct deft_graph_types {
    int num_entries;
    deft_desc_t *desc; /* per entry id */
    bool *known;
    int num_unknown;
} deft_graph_types_t;

/* Caller-provided variable descriptions, by graph node id (known[i] false: not given). */
int deft_graph_infer(const deft_graph_t *g, const deft_desc_t *given, const bool *given_known,
                     deft_graph_types_t *out);
void deft_graph_types_free(deft_graph_types_t *types);

#endif
