/*
 * The Fuse pass's loss pattern (fuse_loss.c) and the matching helpers of
 * fuse.c it shares.
 */
#ifndef DEFT_CORE_FUSE_LOSS_H
#define DEFT_CORE_FUSE_LOSS_H

#include "core/graph/graph.h"

/* Whether n is an operator node of that name without annotations. */
bool deft_fuse_is_op(const deft_node_t *n, const char *name);
/* The node of input k of node i when i alone reads it (readers: per entry,
 * as fuse.c counts them) and it is operator `name`'s (output 0 of one); else
 * NULL. */
const deft_node_t *deft_fuse_sole_input(const deft_graph_t *g, const int *readers, int i, int k,
                                        const char *name);

/* Node i's replacement when it ends the gradient of -pick(log_softmax(x),
 * label) (*out NULL otherwise): one _backward_pick_log_softmax node. */
int deft_fuse_loss_node(const deft_graph_t *g, const int *readers, int i, deft_node_t **out);

#endif
