/*
 * Training-step graphs: the loss, its gradient with respect to the trained
 * parameters, and each parameter's optimizer update in place, as one graph.
 * One executor run is a whole step: the forward values the backward reads
 * are planned with it (nothing recomputed, nothing kept past the step), the
 * host makes one call, and the updates run as soon as their gradient is
 * ready. It is MXNet's static_alloc CachedOp and PyTorch's captured step,
 * taken to the optimizer.
 *
 * The updates are _step_* operators (core/op/step_update.c) that read their
 * hyper-parameters from an input tensor, so a learning-rate schedule changes
 * numbers, not the graph. Each updates as many parameters as a node's inputs
 * hold (20 with momentum), in one loop over all their elements. Each update
 * must run after every node reading its parameters' old values. The updates
 * form a chain, each taking the one before as its last input, and the
 * graph's one extra output is the last:
 * the post-order walk (graph.c) reaches every update through that chain,
 * after the gradients its other inputs lead to, so every gradient, and every
 * read of a weight they make, comes before the first update.
 */
#include "core/graph/train_step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/gradient.h"
#include "core/graph/graph.h"

typedef struct optimizer {
    const char *name, *op;
    int num_states;
    const char *states[3];
} optimizer_t;

/* The states are named "<param>_<state>" (without "_" in <state>). */
static const optimizer_t optimizers[] = {
    {"sgd", "_step_sgd", 0, {NULL}},
    {"sgd_mom", "_step_sgd_mom", 1, {"mom"}},
    {"nag", "_step_nag", 1, {"mom"}},
    {"adam", "_step_adam", 2, {"mean", "var"}},
    {"adamw", "_step_adamw", 2, {"mean", "var"}},
    {"rmsprop", "_step_rmsprop", 1, {"n"}},
    {"rmsprop_centered", "_step_rmsprop_centered", 3, {"n", "g", "delta"}},
    {"adagrad", "_step_adagrad", 1, {"history"}},
    {"adadelta", "_step_adadelta", 2, {"accg", "accdelta"}},
    {"lamb", "_step_lamb", 2, {"mean", "var"}},
};

static int find_optimizer(const char *name, const optimizer_t **out) {
    for (size_t i = 0; name && i < sizeof optimizers / sizeof optimizers[0]; i++)
        if (strcmp(optimizers[i].name, name) == 0) {
            *out = &optimizers[i];
            return 0;
        }
    return deft_error(DEFT_ERR_VALUE,
                      "optimizer is '%s', expected one of sgd, sgd_mom, adam, adamw, nag, "
                      "rmsprop, rmsprop_centered, adagrad, adadelta, lamb",
                      name ? name : "(NULL)");
}

/* The node ids of the parameters: arguments of the loss, each named once. */
static int find_params(const deft_graph_t *g, int n, const char *const *names, int *ids) {
    for (int p = 0; p < n; p++) {
        ids[p] = -1;
        for (int i = 0; names[p] && i < g->num_nodes && ids[p] < 0; i++)
            if (!g->nodes[i]->op && strcmp(g->names[i], names[p]) == 0) ids[p] = i;
        if (ids[p] < 0)
            return deft_error(DEFT_ERR_VALUE,
                              "params[%d] is '%s', which is not an argument of the loss", p,
                              names[p] ? names[p] : "(NULL)");
        if (deft_graph_is_auxiliary(g, g->nodes[ids[p]]))
            return deft_error(DEFT_ERR_VALUE,
                              "params[%d] is '%s', an auxiliary state of the loss (updated by its "
                              "operators, not by the optimizer)",
                              p, names[p]);
        for (int q = 0; q < p; q++)
            if (ids[q] == ids[p])
                return deft_error(DEFT_ERR_VALUE, "params[%d] and params[%d] are both '%s'", q, p,
                                  names[p]);
    }
    return 0;
}

/* The most parameters one update node takes: its groups (weight, grad,
 * states), hyper and the previous update fit in a node's inputs. */
static int group_limit(const optimizer_t *opt) {
    return (DEFT_OP_MAX_INPUTS - 2) / (2 + opt->num_states);
}

/* One update node of the n parameters ids[] (their gradients grads[]),
 * chained after `prev` (NULL for the first); named after its first. */
static int make_update(const optimizer_t *opt, const deft_graph_t *g, int n, const int *ids,
                       const deft_entry_t *grads, deft_node_t *hyper, deft_node_t *prev,
                       deft_node_t **out) {
    deft_entry_t in[DEFT_OP_MAX_INPUTS];
    deft_node_t *states[DEFT_OP_MAX_INPUTS];
    int nin = 0, made = 0, status = 0;
    for (int p = 0; status == 0 && p < n; p++) {
        in[nin++] = (deft_entry_t){g->nodes[ids[p]], 0};
        in[nin++] = grads[p];
        for (int s = 0; status == 0 && s < opt->num_states; s++) {
            char name[320];
            snprintf(name, sizeof name, "%s_%s", g->names[ids[p]], opt->states[s]);
            status = deft_node_new_variable(name, NULL, 0, NULL, NULL, &states[made]);
            if (status == 0) in[nin++] = (deft_entry_t){states[made++], 0};
        }
    }
    in[nin++] = (deft_entry_t){hyper, 0};
    if (prev) in[nin++] = (deft_entry_t){prev, 0};
    char name[320];
    snprintf(name, sizeof name, "%s_update", g->names[ids[0]]);
    if (status == 0)
        status = deft_node_new_op(deft_registry_find(opt->op), name, 0, NULL, NULL, nin, in, out);
    for (int s = 0; s < made; s++) deft_node_release(states[s]);
    return status;
}

/* The updates of the parameters that have a gradient, as few nodes as fit
 * them, chained; the last in *last. */
static int make_updates(const optimizer_t *opt, const deft_graph_t *g, int n, const int *ids,
                        const deft_entry_t *grads, deft_node_t **last) {
    deft_node_t *hyper = NULL, *prev = NULL;
    int *group_ids = malloc(((size_t)n + 1) * sizeof *group_ids);
    deft_entry_t *group_grads = malloc(((size_t)n + 1) * sizeof *group_grads);
    int status = group_ids && group_grads
                     ? deft_node_new_variable("step_hyper", NULL, 0, NULL, NULL, &hyper)
                     : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a training step");
    int trained = 0; /* the loss does not depend on the others: nothing to update */
    for (int p = 0; p < n; p++)
        if (grads[p].node) group_ids[trained] = ids[p], group_grads[trained++] = grads[p];
    for (int at = 0; status == 0 && at < trained; at += group_limit(opt)) {
        int count = trained - at < group_limit(opt) ? trained - at : group_limit(opt);
        deft_node_t *made = NULL;
        status = make_update(opt, g, count, group_ids + at, group_grads + at, hyper, prev, &made);
        deft_node_release(prev);
        prev = made;
    }
    deft_node_release(hyper);
    free(group_ids), free(group_grads);
    if (status == 0 && !prev)
        status = deft_error(DEFT_ERR_VALUE, "the loss depends on none of the parameters");
    if (status) deft_node_release(prev), prev = NULL;
    *last = prev;
    return status;
}

/* Loss, gradients and updates on the loss's indexed graph g. */
static int build_step(const deft_graph_t *g, const optimizer_t *opt, int n,
                      const char *const *params, deft_symbol_t **out) {
    int *ids = malloc(((size_t)n + 1) * sizeof *ids);
    deft_entry_t *heads = calloc((size_t)g->num_outputs + 1, sizeof *heads);
    deft_entry_t *grads = calloc((size_t)n + 1, sizeof *grads);
    deft_entry_t *outs = calloc((size_t)g->num_outputs + 2, sizeof *outs);
    deft_node_t *ones = NULL, *last = NULL;
    int status = ids && heads && grads && outs
                     ? 0
                     : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a training step");
    if (status == 0) status = find_params(g, n, params, ids);
    /* output 0 is the loss: its head gradient is ones, as backward() without one */
    if (status == 0)
        status = deft_node_new_op(deft_registry_find("ones_like"), "loss_head_grad", 0, NULL, NULL,
                                  1, &g->outputs[0], &ones);
    if (status == 0) heads[0] = (deft_entry_t){ones, 0};
    if (status == 0) status = deft_gradient_entries(g, heads, n, ids, grads);
    if (status == 0) status = make_updates(opt, g, n, ids, grads, &last);
    if (status == 0) {
        memcpy(outs, g->outputs, (size_t)g->num_outputs * sizeof *outs);
        outs[g->num_outputs] = (deft_entry_t){last, 0};
        status = deft_symbol_from_entries(g->num_outputs + 1, outs, out);
    }
    for (int p = 0; grads && p < n; p++) deft_node_release(grads[p].node);
    deft_node_release(ones), deft_node_release(last);
    free(ids), free(heads), free(grads), free(outs);
    return status;
}

int deft_symbol_train_step(const deft_symbol_t *loss, int num_params, const char *const *params,
                           const char *optimizer, deft_symbol_t **out) {
    const optimizer_t *opt = NULL;
    if (deft_symbol_check_composed(loss, "loss") || find_optimizer(optimizer, &opt)) return -1;
    if (num_params < 1 || !params)
        return deft_error(DEFT_ERR_VALUE,
                          "num_params is %d with params %p: a step trains at "
                          "least one parameter",
                          num_params, (const void *)params);
    deft_graph_t *g;
    if (deft_graph_build(loss->num_outputs, loss->outputs, &g)) return -1;
    int status = build_step(g, opt, num_params, params, out);
    deft_graph_free(g);
    return status;
}
