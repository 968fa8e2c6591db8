#include "core/graph/gradient.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/graph.h"

#define SUM_LIMIT 8 /* more terms than this are summed by a chain of _grad_add */

/* Backward nodes go where their forward node goes (see place_device.h). */
static const char *const placement[] = {"__device__", "ctx_group"};

typedef struct contribution {
    deft_entry_t entry; /* retained */
    struct contribution *next;
} contribution_t;

typedef struct grad_state {
    deft_grad_builder_t builder; /* first: the builder callbacks receive this */
    const deft_graph_t *g;
    int status;
    contribution_t **grads;  /* per entry id: the terms of its gradient */
    const deft_node_t *node; /* the node whose gradient is being built */
    deft_entry_t *summed;    /* per output of `node`: its total gradient, or NULL node */
    /* Nodes made since the last release_made(): this list owns one reference
     * to each; whatever must outlive it (terms, the result) holds its own. */
    int num_made, made_capacity;
    deft_node_t **made;
} grad_state_t;

static deft_gref_t ref_of(deft_entry_t e) {
    return (deft_gref_t){e.node, e.index};
}

static deft_entry_t entry_of(deft_gref_t r) {
    return (deft_entry_t){r.node, r.index};
}

static deft_entry_t make_node(grad_state_t *s, const char *op, int nin, const deft_entry_t *in,
                              const char *const *params, int output) {
    deft_entry_t none = {NULL, 0};
    if (s->status) return none;
    for (int i = 0; i < nin; i++)
        if (!in[i].node) return none; /* an input with no value: no gradient along here */
    const deft_op_entry_t *entry = deft_registry_find(op);
    if (!entry) {
        s->status = deft_error(DEFT_ERR_INTERNAL, "gradient uses unknown operator '%s'", op);
        return none;
    }
    const char *keys[DEFT_OP_MAX_PARAMS + 2], *vals[DEFT_OP_MAX_PARAMS + 2];
    int np = 0;
    while (params && params[2 * np] && np < DEFT_OP_MAX_PARAMS) {
        keys[np] = params[2 * np], vals[np] = params[2 * np + 1];
        np++;
    }
    for (int a = 0; s->node && a < 2; a++) {
        const char *v = deft_node_attr(s->node, placement[a]);
        if (v) keys[np] = placement[a], vals[np] = v, np++;
    }
    if (s->num_made == s->made_capacity) {
        int cap = s->made_capacity ? 2 * s->made_capacity : 32;
        deft_node_t **grown = realloc(s->made, (size_t)cap * sizeof *grown);
        if (!grown) {
            s->status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a gradient");
            return none;
        }
        s->made = grown, s->made_capacity = cap;
    }
    deft_node_t *node;
    if ((s->status = deft_node_new_op(entry, NULL, np, keys, vals, nin, in, &node)) != 0)
        return none;
    s->made[s->num_made++] = node;
    return (deft_entry_t){node, output};
}

static void release_made(grad_state_t *s) {
    for (int i = 0; i < s->num_made; i++) deft_node_release(s->made[i]);
    s->num_made = 0;
}

/* Builder callbacks. What they return is borrowed (owned by the made list or the graph). */
static deft_gref_t cb_apply(deft_grad_builder_t *b, const char *op, int nin, const deft_gref_t *in,
                            const char *const *params, int output) {
    grad_state_t *s = (grad_state_t *)b;
    deft_entry_t entries[DEFT_OP_MAX_INPUTS];
    for (int i = 0; i < nin && i < DEFT_OP_MAX_INPUTS; i++) entries[i] = entry_of(in[i]);
    return ref_of(make_node(s, op, nin, entries, params, output));
}

static deft_gref_t cb_input(deft_grad_builder_t *b, int k) {
    grad_state_t *s = (grad_state_t *)b;
    return ref_of(s->node->inputs[k]);
}

static deft_gref_t cb_output(deft_grad_builder_t *b, int k) {
    grad_state_t *s = (grad_state_t *)b;
    return (deft_gref_t){(void *)s->node, k};
}

static deft_gref_t cb_out_grad(deft_grad_builder_t *b, int k) {
    grad_state_t *s = (grad_state_t *)b;
    if (s->summed[k].node) return ref_of(s->summed[k]);
    deft_entry_t out = {(deft_node_t *)s->node, k};
    s->summed[k] = make_node(s, "zeros_like", 1, &out, NULL, 0); /* no gradient reached it */
    return ref_of(s->summed[k]);
}

static const char *cb_attr(deft_grad_builder_t *b, const char *key) {
    return deft_node_attr(((grad_state_t *)b)->node, key);
}

/* A term holds its own reference to its node. */
static void add_term(grad_state_t *s, int entry_id, deft_entry_t term) {
    if (!term.node || s->status) return;
    contribution_t *c = malloc(sizeof *c);
    if (!c) {
        s->status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a gradient");
        return;
    }
    c->entry = (deft_entry_t){deft_node_retain(term.node), term.index};
    c->next = s->grads[entry_id];
    s->grads[entry_id] = c;
}

/* The sum of an entry's terms as one entry (borrowed), or a NULL node: one
 * ElementWiseSum up to SUM_LIMIT terms, else a chain of _grad_add that the
 * memory planner runs in place (MXNet's rule), so the sum never holds more
 * than two terms' worth of extra memory. */
static deft_entry_t total(grad_state_t *s, int entry_id) {
    deft_entry_t terms[SUM_LIMIT];
    int n = 0;
    for (contribution_t *c = s->grads[entry_id]; c && n <= SUM_LIMIT; c = c->next) {
        if (n < SUM_LIMIT) terms[n] = c->entry;
        n++;
    }
    if (n <= 1 || s->status) return n == 1 && !s->status ? terms[0] : (deft_entry_t){NULL, 0};
    if (n <= SUM_LIMIT) return make_node(s, "add_n", n, terms, NULL, 0);
    deft_entry_t acc = {NULL, 0};
    for (contribution_t *c = s->grads[entry_id]; c && !s->status; c = c->next) {
        deft_entry_t pair[2] = {acc, c->entry};
        acc = acc.node ? make_node(s, "_grad_add", 2, pair, NULL, 0) : c->entry;
    }
    return acc;
}

/* Nodes that depend on a requested node: only these need gradients. Leaves
 * of a cut graph are constants: nothing flows through them. */
static bool *needs_gradient(const deft_graph_t *g, const bool *wanted) {
    bool *need = calloc((size_t)g->num_nodes + 1, sizeof *need);
    for (int i = 0; need && i < g->num_nodes; i++) {
        need[i] = wanted[i];
        for (int r = g->in_ptr[i]; r < g->in_ptr[i + 1] && !need[i]; r++)
            need[i] = need[deft_graph_entry_node(g, g->in_entry[r])];
    }
    return need;
}

static const char *node_label(const deft_graph_t *g, int id, char *buf, size_t len) {
    if (g->names) return g->names[id];
    snprintf(buf, len, "#%d", id);
    return buf;
}

static int backward_node(grad_state_t *s, int id, const bool *need) {
    const deft_graph_t *g = s->g;
    const deft_node_t *node = g->nodes[id];
    deft_entry_t summed[DEFT_OP_MAX_OUTPUTS];
    bool any = false;
    s->node = node; /* sums of its output gradients are placed with it */
    for (int k = 0; k < node->num_outputs; k++) {
        summed[k] = total(s, g->row_ptr[id] + k);
        any = any || summed[k].node;
    }
    if (any && !s->status) {
        const deft_op_t *op = node->op->op;
        if (!op->gradient) {
            char label[32];
            s->status =
                deft_error(DEFT_ERR_NOT_IMPLEMENTED, "operator '%s' (node '%s') has no gradient",
                           op->name, node_label(g, id, label, sizeof label));
        } else {
            deft_gref_t in_grads[DEFT_OP_MAX_INPUTS] = {{NULL, 0}};
            s->node = node;
            s->summed = summed;
            s->builder.op = op;
            if (op->gradient(&s->builder, node->params, node->num_inputs, in_grads) && !s->status)
                s->status = -1;
            for (int k = 0; k < node->num_inputs; k++) {
                int e = deft_graph_input_entry(g, id, k);
                if (need[deft_graph_entry_node(g, e)]) add_term(s, e, entry_of(in_grads[k]));
            }
        }
    }
    release_made(s); /* the terms hold what is still needed */
    return s->status;
}

/* Requested argument names to graph ids; -1 with an error naming an unknown one. */
static int find_wanted(const deft_graph_t *g, int num_wrt, const char *const *wrt, int *ids,
                       bool *wanted) {
    for (int w = 0; w < num_wrt; w++) {
        ids[w] = -1;
        for (int i = 0; wrt[w] && i < g->num_nodes && ids[w] < 0; i++)
            if (!g->nodes[i]->op && strcmp(g->names[i], wrt[w]) == 0) ids[w] = i;
        if (ids[w] < 0)
            return deft_error(DEFT_ERR_VALUE,
                              "wrt[%d] is '%s', which is not an argument of the "
                              "symbol",
                              w, wrt[w] ? wrt[w] : "(NULL)");
        wanted[ids[w]] = true;
    }
    return 0;
}

/* The head gradient of each output: a variable named after it. */
static int make_heads(const deft_graph_t *g, deft_node_t **heads) {
    for (int o = 0; o < g->num_outputs; o++) {
        char output[300], name[320];
        int id = deft_graph_node_id(g, g->outputs[o].node);
        deft_node_output_name(g->outputs[o].node, g->names[id], g->outputs[o].index, output,
                              sizeof output);
        snprintf(name, sizeof name, "%s_head_grad", output);
        if (deft_node_new_variable(name, NULL, 0, NULL, NULL, &heads[o])) return -1;
    }
    return 0;
}

static void free_terms(grad_state_t *s, int entries) {
    for (int e = 0; s->grads && e < entries; e++) {
        for (contribution_t *c = s->grads[e], *next; c; c = next) {
            next = c->next;
            deft_node_release(c->entry.node);
            free(c);
        }
    }
    free(s->grads);
}

int deft_gradient_entries(const deft_graph_t *g, const deft_entry_t *head_grads, int num_wrt,
                          const int *wrt_ids, deft_entry_t *out) {
    int entries = deft_graph_num_entries(g);
    grad_state_t s = {.builder = {cb_apply, cb_input, cb_output, cb_out_grad, cb_attr, NULL},
                      .g = g};
    s.grads = calloc((size_t)entries + 1, sizeof *s.grads);
    bool *wanted = calloc((size_t)g->num_nodes + 1, sizeof *wanted), *need = NULL;
    if (!s.grads || !wanted)
        s.status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the gradient pass");
    for (int w = 0; !s.status && w < num_wrt; w++) wanted[wrt_ids[w]] = true;
    if (!s.status && !(need = needs_gradient(g, wanted)))
        s.status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the gradient pass");
    for (int o = 0; !s.status && o < g->num_outputs; o++)
        if (head_grads[o].node)
            add_term(&s,
                     deft_graph_entry_id(g, deft_graph_node_id(g, g->outputs[o].node),
                                         g->outputs[o].index),
                     head_grads[o]);
    for (int i = g->num_nodes - 1; i >= 0 && !s.status; i--)
        if (!deft_graph_is_leaf(g, i) && need[i]) backward_node(&s, i, need);
    for (int w = 0; w < num_wrt; w++) {
        out[w] = (deft_entry_t){NULL, 0};
        if (s.status) continue;
        s.node = g->nodes[wrt_ids[w]];
        deft_entry_t grad = total(&s, g->row_ptr[wrt_ids[w]]);
        if (grad.node) out[w] = (deft_entry_t){deft_node_retain(grad.node), grad.index};
    }
    if (s.status)
        for (int w = 0; w < num_wrt; w++) deft_node_release(out[w].node);
    release_made(&s);
    free(s.made);
    free_terms(&s, entries);
    free(wanted), free(need);
    return s.status;
}

int deft_symbol_gradient(const deft_symbol_t *sym, int num_wrt, const char *const *wrt,
                         deft_symbol_t **out) {
    if (deft_symbol_check_composed(sym, "sym")) return -1;
    deft_graph_t *g;
    if (deft_graph_build(sym->num_outputs, sym->outputs, &g)) return -1;
    int n = g->num_outputs + num_wrt, status = 0;
    bool *wanted = calloc((size_t)g->num_nodes + 1, sizeof *wanted);
    int *ids = malloc(((size_t)num_wrt + 1) * sizeof *ids);
    deft_node_t **heads = calloc((size_t)g->num_outputs + 1, sizeof *heads);
    deft_entry_t *head_entries = calloc((size_t)g->num_outputs + 1, sizeof *head_entries);
    deft_entry_t *result = calloc((size_t)n + 1, sizeof *result);
    if (!wanted || !ids || !heads || !head_entries || !result)
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the gradient pass");
    if (!status) status = find_wanted(g, num_wrt, wrt, ids, wanted);
    if (!status) status = make_heads(g, heads);
    for (int o = 0; !status && o < g->num_outputs; o++) {
        head_entries[o] = (deft_entry_t){heads[o], 0};
        result[o] = (deft_entry_t){deft_node_retain(g->outputs[o].node), g->outputs[o].index};
    }
    if (!status)
        status = deft_gradient_entries(g, head_entries, num_wrt, ids, result + g->num_outputs);
    for (int w = 0; !status && w < num_wrt; w++) {
        deft_entry_t *grad = &result[g->num_outputs + w];
        if (grad->node) continue; /* the outputs do not depend on it: zeros */
        deft_node_t *var = g->nodes[ids[w]];
        const char *keys[2], *vals[2];
        int np = 0;
        for (int a = 0; a < 2; a++) /* placed with its variable (see place_device.h) */
            if ((vals[np] = deft_node_attr(var, placement[a])) != NULL) keys[np++] = placement[a];
        status = deft_node_new_op(deft_registry_find("zeros_like"), NULL, np, keys, vals, 1,
                                  &(deft_entry_t){var, 0}, &grad->node);
    }
    if (!status) status = deft_symbol_from_entries(n, result, out);
    for (int i = 0; result && i < n; i++) deft_node_release(result[i].node);
    for (int o = 0; heads && o < g->num_outputs; o++) deft_node_release(heads[o]);
    free(wanted), free(ids), free(heads), free(head_entries), free(result);
    deft_graph_free(g);
    return status;
}

int deft_symbol_gradient_all(const deft_symbol_t *sym, deft_symbol_t **out) {
    if (deft_symbol_check_composed(sym, "sym")) return -1;
    deft_graph_t *g;
    if (deft_graph_build(sym->num_outputs, sym->outputs, &g)) return -1;
    const char **names = malloc(((size_t)g->num_nodes + 1) * sizeof *names);
    int n = 0, status = 0;
    if (!names) status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate argument names");
    for (int i = 0; names && i < g->num_nodes; i++)
        if (!g->nodes[i]->op && !deft_graph_is_auxiliary(g, g->nodes[i])) names[n++] = g->names[i];
    if (status == 0) status = deft_symbol_gradient(sym, n, names, out);
    free(names);
    deft_graph_free(g);
    return status;
}
