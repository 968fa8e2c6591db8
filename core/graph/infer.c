#include "core/graph/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/pass.h"

/* A variable's own "__shape__" and "__dtype__" attributes, if it has them. */
static int annotated(const deft_node_t *var, deft_desc_t *desc, bool *known) {
    const char *shape = deft_node_attr(var, "__shape__");
    const char *dtype = deft_node_attr(var, "__dtype__");
    *known = false;
    if (!shape) return 0;
    deft_param_def_t tuple = {"__shape__", DEFT_PARAM_TUPLE, NULL, "shape", NULL, false};
    deft_param_def_t type = {"__dtype__", DEFT_PARAM_DTYPE, NULL, "dtype", NULL, false};
    static const deft_op_t var_op = {.name = "variable"};
    deft_param_value_t v;
    if (deft_param_parse(&var_op, &tuple, shape, &v)) return -1;
    /* MXNet 1.x writes 0 for a dimension not known yet (a model-zoo
     * convolution's weight is "(64, 0, 7, 7)"): inference fills it in. */
    for (int d = 0; d < v.t.n; d++)
        if (v.t.v[d] == 0) v.t.v[d] = DEFT_DIM_UNKNOWN;
    if (deft_shape_init_partial(&desc->shape, v.t.v, v.t.n, "__shape__")) return -1;
    desc->dtype = DEFT_DT_FLOAT32;
    if (dtype) {
        /* MXNet writes dtypes as type flags ("0"), deft as names: accept both. */
        char *end;
        long code = strtol(dtype, &end, 10);
        if (*dtype && !*end) {
            if (deft_dtype_check((int)code, "__dtype__")) return -1;
            desc->dtype = (deft_dtype_t)code;
        } else {
            if (deft_param_parse(&var_op, &type, dtype, &v)) return -1;
            desc->dtype = (deft_dtype_t)v.i;
        }
    }
    *known = !deft_shape_is_partial(&desc->shape);
    return 0;
}

/* The known dimensions of a partial shape must agree with what inference found. */
static int check_partial(const deft_desc_t *given, const deft_desc_t *found, int k,
                         const char *name) {
    bool fits = given->shape.ndim == found->shape.ndim;
    for (int d = 0; fits && d < given->shape.ndim; d++)
        fits = given->shape.dims[d] == DEFT_DIM_UNKNOWN ||
               given->shape.dims[d] == found->shape.dims[d];
    if (fits) return 0;
    char a[96], b[96];
    return deft_error(DEFT_ERR_VALUE,
                      "input %d ('%s') was given shape %s, but the operator needs %s", k, name,
                      deft_shape_format(&given->shape, a, sizeof a),
                      deft_shape_format(&found->shape, b, sizeof b));
}

/*
 * In an MXNet 1.x graph a 0 in a shape means "not known yet": Gluon's RNN
 * layers make their begin state with _zeros(shape=(0, hidden)) and let the
 * graph find the batch size. So the zero dimensions of an operator without
 * inputs (the creation operators) stay open for its consumers to fill; what
 * nobody fills is taken as 0, a zero-size dimension, at the end.
 */
static bool open_zero_dims(const deft_node_t *node, deft_desc_t *out) {
    bool open = false;
    for (int d = 0; node->num_inputs == 0 && d < out->shape.ndim; d++)
        if (out->shape.dims[d] == 0) out->shape.dims[d] = DEFT_DIM_UNKNOWN, open = true;
    return open;
}

static bool same_desc(const deft_desc_t *a, const deft_desc_t *b) {
    return a->dtype == b->dtype && deft_shape_equal(&a->shape, &b->shape);
}

/* The error just set, as "<caller>: node '<name>': <what>" ("graph" when no
 * API call is the caller): made only on failure, since formatting the node's
 * context for every node would cost more than inferring most of them. */
static int name_the_node(const char *name) {
    const char *caller = deft_error_swap_function(NULL);
    deft_error_swap_function(caller);
    const char *message = deft_error_message();
    size_t skip = caller ? strlen(caller) : 0;
    if (skip && (strncmp(message, caller, skip) != 0 || strncmp(message + skip, ": ", 2) != 0))
        skip = 0; /* not prefixed by the caller after all */
    else if (skip)
        skip += 2;
    char detail[DEFT_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s: node '%s': %s", caller ? caller : "graph", name,
             message + skip);
    return deft_error_restore(deft_error_kind(), detail);
}

/* Forward: all inputs known, outputs not yet. Errors name the node. */
static int infer_node(const deft_graph_t *g, int id, deft_graph_types_t *t, bool *changed) {
    const deft_node_t *node = g->nodes[id];
    const deft_op_t *op = node->op->op;
    deft_desc_t in[DEFT_OP_MAX_INPUTS], out[DEFT_OP_MAX_OUTPUTS];
    bool in_known[DEFT_OP_MAX_INPUTS], out_known[DEFT_OP_MAX_OUTPUTS];
    int first = g->row_ptr[id], all_in = 1, all_out = 1;
    /* the flags first: a settled node (most visits) copies no description */
    for (int k = 0; k < node->num_inputs; k++)
        all_in &= in_known[k] = t->known[deft_graph_input_entry(g, id, k)];
    for (int k = 0; k < node->num_outputs; k++) all_out &= out_known[k] = t->known[first + k];
    if (all_out && (all_in || !op->infer_inputs)) return 0;
    /* one input (most nodes) is read where it is, not copied */
    const deft_desc_t *given =
        node->num_inputs == 1 && all_in ? &t->desc[deft_graph_input_entry(g, id, 0)] : in;
    for (int k = 0; given == in && k < node->num_inputs; k++)
        in[k] = t->desc[deft_graph_input_entry(g, id, k)];
    for (int k = 0; k < node->num_outputs; k++) out[k] = t->desc[first + k];
    int status = 0;
    if (all_in && !all_out) {
        int produced = 0;
        status = op->infer(op, node->params, node->num_inputs, given, &produced, out);
        size_t nbytes; /* what the plan will allocate must have a size */
        for (int k = 0; status == 0 && k < produced; k++)
            status = deft_shape_nbytes(&out[k].shape, deft_dtype_size(out[k].dtype), &nbytes);
        for (int k = 0; status == 0 && k < produced && k < node->num_outputs; k++) {
            bool open = open_zero_dims(node, &out[k]);
            if (open && same_desc(&t->desc[first + k], &out[k])) continue; /* still open */
            t->desc[first + k] = out[k], t->known[first + k] = !open;
            *changed = true;
        }
    } else if (!all_in && op->infer_inputs) {
        status = op->infer_inputs(op, node->params, node->num_inputs, in, in_known, out, out_known);
        for (int k = 0; status == 0 && k < node->num_inputs; k++) {
            int e = deft_graph_input_entry(g, id, k);
            if (!t->known[e] && in_known[k]) {
                if (deft_shape_is_partial(&t->desc[e].shape))
                    status = check_partial(&t->desc[e], &in[k], k,
                                           deft_graph_name(g, deft_graph_entry_node(g, e)));
                t->desc[e] = in[k], t->known[e] = status == 0;
                *changed = true;
            }
        }
    }
    return status ? name_the_node(deft_graph_name(g, id)) : 0;
}

static bool all_known(const deft_graph_types_t *t) {
    for (int e = 0; e < t->num_entries; e++)
        if (!t->known[e]) return false;
    return true;
}

/* Infer node by node until nothing changes. Each round settles at least one
 * node or stops; a bound guards the loop. Once every entry is known no node
 * can change one: a graph whose inputs are all given (an executor's) settles
 * in one round, in order, instead of two. */
static int settle(const deft_graph_t *g, deft_graph_types_t *t) {
    bool changed = true;
    for (int round = 0; changed && round < g->num_nodes + 2; round++) {
        changed = false;
        for (int i = 0; i < g->num_nodes; i++)
            if (g->nodes[i]->op && infer_node(g, i, t, &changed)) return -1;
        if (changed && all_known(t)) break;
    }
    return 0;
}

/* Zero dimensions of creation operators that no consumer filled are zero
 * after all; whether there were any (then inference goes on from them). */
static bool close_zero_dims(const deft_graph_t *g, deft_graph_types_t *t) {
    bool closed = false;
    for (int i = 0; i < g->num_nodes; i++) {
        if (!g->nodes[i]->op || g->nodes[i]->num_inputs) continue;
        for (int k = 0; k < g->nodes[i]->num_outputs; k++) {
            deft_desc_t *d = &t->desc[g->row_ptr[i] + k];
            if (t->known[g->row_ptr[i] + k] || !deft_shape_is_partial(&d->shape)) continue;
            for (int j = 0; j < d->shape.ndim; j++)
                if (d->shape.dims[j] == DEFT_DIM_UNKNOWN) d->shape.dims[j] = 0;
            t->known[g->row_ptr[i] + k] = closed = true;
        }
    }
    return closed;
}

int deft_graph_infer(const deft_graph_t *g, const deft_desc_t *given, const bool *given_known,
                     deft_graph_types_t *out) {
    deft_graph_types_t t = {.num_entries = deft_graph_num_entries(g)};
    t.desc = calloc((size_t)(t.num_entries ? t.num_entries : 1), sizeof *t.desc);
    t.known = calloc((size_t)(t.num_entries ? t.num_entries : 1), sizeof *t.known);
    if (!t.desc || !t.known) {
        deft_graph_types_free(&t);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate inference tables");
    }
    for (int i = 0; i < g->num_nodes; i++) {
        if (g->nodes[i]->op) continue;
        int e = g->row_ptr[i];
        if (given_known && given_known[i]) {
            t.desc[e] = given[i], t.known[e] = !deft_shape_is_partial(&given[i].shape);
        } else if (annotated(g->nodes[i], &t.desc[e], &t.known[e])) {
            deft_graph_types_free(&t);
            return -1;
        }
    }
    if (settle(g, &t) || (close_zero_dims(g, &t) && settle(g, &t))) {
        deft_graph_types_free(&t);
        return -1;
    }
    for (int e = 0; e < t.num_entries; e++) t.num_unknown += !t.known[e];
    *out = t;
    return 0;
}

void deft_graph_types_free(deft_graph_types_t *t) {
    free(t->desc);
    free(t->known);
    t->desc = NULL, t->known = NULL;
}

/* ---- the InferShape pass: inferred shapes become variable attributes ---- */

static int annotate(const deft_node_t *var, const deft_desc_t *d, deft_node_t **out) {
    char shape[DEFT_SHAPE_STR_MAX];
    deft_node_t *with_shape;
    if (deft_node_with_attr(var, "__shape__", deft_shape_format(&d->shape, shape, sizeof shape),
                            &with_shape))
        return -1;
    int status = deft_node_with_attr(with_shape, "__dtype__", deft_dtype_name(d->dtype), out);
    deft_node_release(with_shape);
    return status;
}

int deft_pass_infer_shape(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g;
    deft_graph_types_t t;
    if (deft_graph_build(in->num_outputs, in->outputs, &g)) return -1;
    if (deft_graph_infer(g, NULL, NULL, &t)) {
        deft_graph_free(g);
        return -1;
    }
    deft_node_t **replace = calloc((size_t)g->num_nodes + 1, sizeof *replace);
    int status = replace ? 0 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    for (int i = 0; status == 0 && i < g->num_nodes; i++)
        if (!g->nodes[i]->op && t.known[g->row_ptr[i]])
            status = annotate(g->nodes[i], &t.desc[g->row_ptr[i]], &replace[i]);
    if (status == 0) status = deft_graph_rebuild(g, NULL, replace, out);
    for (int i = 0; replace && i < g->num_nodes; i++) deft_node_release(replace[i]);
    free(replace);
    deft_graph_types_free(&t);
    deft_graph_free(g);
    return status;
}
