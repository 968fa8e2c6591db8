/* The graph layer's implementation of _CachedOp (see subgraph_op.c). */
#ifndef DEFT_CORE_OP_SUBGRAPH_H
#define DEFT_CORE_OP_SUBGRAPH_H

#include "core/op/op.h"

typedef struct deft_subgraph_impl {
    int (*infer)(const char *id, int nin, const deft_desc_t *in, int *nout, deft_desc_t *out);
    int (*forward)(const char *id, int nin, const deft_tensor_t *in, int nout,
                   const deft_tensor_t *out);
    int (*gradient)(const char *id, deft_grad_builder_t *b, int nin, deft_gref_t *in_grads);
    int (*num_outputs)(const char *id);
    int (*num_visible_outputs)(const char *id); /* the rest are kept for the gradient */
    void *(*hold)(const char *id);              /* a reference to the graph, or NULL (error set) */
    void (*unhold)(void *graph);
} deft_subgraph_impl_t;

void deft_subgraph_install(const deft_subgraph_impl_t *implementation);

#endif
