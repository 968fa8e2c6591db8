/*
 * Subgraphs: graphs registered under an id so that one _CachedOp node
 * (core/op/subgraph_op.c) can stand for a whole recorded executor call. The
 * graph layer implements that operator here: inference and forward through
 * the executor's plans, and a gradient that inlines the graph's own
 * gradient: backward reads the forward values the run kept, or recomputes
 * them from the node's inputs.
 */
#ifndef DEFT_CORE_SUBGRAPH_H
#define DEFT_CORE_SUBGRAPH_H

#include "core/graph/executor.h"

/* Register a symbol (a copy of its outputs is kept); one reference. With
 * `keep`, a run also outputs, as hidden outputs of the node after the
 * symbol's own, the forward values the gradient reads: backward through the
 * node recomputes nothing (and a graph with random operators or in-place
 * updates of auxiliary states can be recorded as one node). */
int deft_subgraph_new(const deft_symbol_t *sym, bool keep, deft_subgraph_t **out);
deft_subgraph_t *deft_subgraph_retain(deft_subgraph_t *sg);
void deft_subgraph_release(deft_subgraph_t *sg);

/* The id its _CachedOp nodes name it by ("subgraph" parameter). */
const char *deft_subgraph_id(const deft_subgraph_t *sg);
const deft_symbol_t *deft_subgraph_symbol(const deft_subgraph_t *sg);
/* The executor a node's run uses: the symbol's outputs, then any kept values. */
deft_cached_op_t *deft_subgraph_executor(const deft_subgraph_t *sg);
/* The graph a _CachedOp node runs (held by the node), or NULL for other nodes. */
deft_subgraph_t *deft_subgraph_of_node(const deft_node_t *node);
/* The input position (the executor's order) of one of the symbol's variables, or -1. */
int deft_subgraph_input_of(const deft_subgraph_t *sg, const deft_node_t *var);

#endif
