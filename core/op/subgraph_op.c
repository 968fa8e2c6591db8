/*
 * _CachedOp: a whole graph as one operator, which is how a call of an
 * executor (a hybridized block) is recorded, by deferred compute and by
 * autograd: one node, not one per operator of its graph. The operator layer
 * sits below the graph layer, so the work is done by functions the graph
 * layer installs (core/graph/subgraph.c) before it makes the first such node.
 */
#include <stdatomic.h>

#include "core/op/op.h"
#include "core/op/subgraph.h"

static _Atomic(const deft_subgraph_impl_t *) impl;

void deft_subgraph_install(const deft_subgraph_impl_t *implementation) {
    atomic_store(&impl, implementation);
}

/* The graph layer installs itself when it registers its first graph: until
 * then no id names a graph. */
static const deft_subgraph_impl_t *get_impl(const char *id) {
    const deft_subgraph_impl_t *i = atomic_load(&impl);
    if (!i)
        deft_error(DEFT_ERR_VALUE, "operator '_CachedOp': no graph is registered as '%s'",
                   id ? id : "(NULL)");
    return i;
}

static int subgraph_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op;
    const deft_subgraph_impl_t *i = get_impl(p[0].s);
    return i ? i->infer(p[0].s, nin, in, nout, out) : -1;
}

static int subgraph_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op;
    const deft_subgraph_impl_t *i = get_impl(p[0].s);
    return i ? i->forward(p[0].s, nin, in, nout, out) : -1;
}

static int subgraph_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                             deft_gref_t *in_grads) {
    const deft_subgraph_impl_t *i = get_impl(p[0].s);
    return i ? i->gradient(p[0].s, b, nin, in_grads) : -1;
}

static int subgraph_num_outputs(const deft_param_value_t *p, int nin) {
    (void)nin;
    const deft_subgraph_impl_t *i = atomic_load(&impl);
    return i ? i->num_outputs(p[0].s) : 1;
}

static int subgraph_num_visible(const deft_param_value_t *p) {
    const deft_subgraph_impl_t *i = atomic_load(&impl);
    return i ? i->num_visible_outputs(p[0].s) : 1;
}

static void *subgraph_hold(const deft_op_t *op, const deft_param_value_t *p) {
    (void)op;
    const deft_subgraph_impl_t *i = get_impl(p[0].s);
    return i ? i->hold(p[0].s) : NULL;
}

static void subgraph_unhold(void *graph) {
    atomic_load(&impl)->unhold(graph);
}

static const deft_param_def_t subgraph_params[] = {
    {"subgraph", DEFT_PARAM_STRING, NULL, "the graph's id in this process", NULL, false}, {0}};

static const deft_op_t subgraph_ops[] = {
    {.name = "_CachedOp",
     .description = "A whole graph run as one operator: a recorded call of an executor.",
     .input_names = (const char *const[]){"args", NULL},
     .min_inputs = 0,
     .max_inputs = DEFT_OP_MAX_INPUTS,
     .params = subgraph_params,
     .infer = subgraph_infer,
     .forward = subgraph_forward,
     .forward_gpu = DEFT_GPU(subgraph_forward), /* the graph layer runs each node on its device */
     .inplace_input = -1,
     .num_outputs = subgraph_num_outputs,
     .num_visible_outputs = subgraph_num_visible,
     .graph_only = true,
     .hold = subgraph_hold,
     .unhold = subgraph_unhold,
     .gradient = subgraph_gradient},
};

DEFT_OP_FAMILY(deft_family_subgraph, subgraph_ops);
