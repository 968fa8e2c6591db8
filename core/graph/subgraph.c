#include "core/graph/subgraph.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/gradient.h"
#include "core/op/subgraph.h"

struct deft_subgraph {
    atomic_int refcount;
    long number; /* its slot in the table; the id is "sg<number>" */
    char id[32];
    deft_symbol_t *sym;     /* what it computes: its outputs are the node's visible ones */
    deft_cached_op_t *exec; /* plans per input signature; runs use arenas of their own */
    /* A subgraph that keeps activations runs a graph with more outputs: after
     * the visible ones, the forward values its gradient reads (hidden outputs
     * of the node), so backward recomputes nothing. kept_at maps an entry of
     * gg to the output holding it, or -1. */
    bool keeps;
    int *kept_at;
    /* the gradient, made on first use: the graph's nodes, head variables, results */
    bool gradient_made;
    int grad_status;
    deft_graph_t *g;
    deft_node_t **heads;
    deft_entry_t *grads; /* per argument; NULL node: no output depends on it */
    deft_graph_t *gg;    /* the nodes the gradients reach */
};

/* The table: id number -> subgraph, for the operator's callbacks. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static deft_subgraph_t **table;
static long table_size, next_number;

static void install(void);

/*
 * The subgraph registered as `id`, retained (release it after use), or NULL
 * with the error set. One whose last reference is being dropped counts as
 * gone: its count is 0 until its release takes it out of the table.
 */
static deft_subgraph_t *acquire(const char *id) {
    char *end = NULL;
    long n = id && strncmp(id, "sg", 2) == 0 ? strtol(id + 2, &end, 10) : -1;
    if (end && *end) n = -1;
    pthread_mutex_lock(&table_lock);
    deft_subgraph_t *sg = n >= 0 && n < table_size ? table[n] : NULL;
    int count = sg ? atomic_load(&sg->refcount) : 0;
    while (count > 0 && !atomic_compare_exchange_weak(&sg->refcount, &count, count + 1)) {
    }
    pthread_mutex_unlock(&table_lock);
    if (count > 0) return sg;
    deft_error(DEFT_ERR_VALUE, "no graph is registered as '%s'", id ? id : "(NULL)");
    return NULL;
}

static int keep_activations(deft_subgraph_t *sg);

/* What a subgraph owns besides its slot in the table. */
static void free_parts(deft_subgraph_t *sg) {
    for (int o = 0; sg->heads && o < sg->sym->num_outputs; o++) deft_node_release(sg->heads[o]);
    for (int a = 0; sg->grads && a < deft_cached_op_num_inputs(sg->exec); a++)
        deft_node_release(sg->grads[a].node);
    free(sg->heads), free(sg->grads), free(sg->kept_at);
    deft_graph_free(sg->g);
    deft_graph_free(sg->gg);
    deft_cached_op_release(sg->exec);
    deft_symbol_free(sg->sym);
    free(sg);
}

/* Put a made subgraph in the table, where its id finds it. */
static int register_subgraph(deft_subgraph_t *sg) {
    pthread_mutex_lock(&table_lock);
    if (next_number == table_size) {
        long size = table_size ? 2 * table_size : 16;
        deft_subgraph_t **grown = realloc(table, (size_t)size * sizeof *grown);
        if (grown) {
            memset(grown + table_size, 0, (size_t)(size - table_size) * sizeof *grown);
            table = grown, table_size = size;
        }
    }
    int status = next_number < table_size ? 0 : -1;
    if (status == 0) {
        sg->number = next_number++;
        table[sg->number] = sg;
    }
    pthread_mutex_unlock(&table_lock);
    if (status) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register a subgraph");
    snprintf(sg->id, sizeof sg->id, "sg%ld", sg->number);
    return 0;
}

int deft_subgraph_new(const deft_symbol_t *sym, bool keep, deft_subgraph_t **out) {
    install();
    deft_subgraph_t *sg = calloc(1, sizeof *sg);
    if (!sg) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a subgraph");
    atomic_init(&sg->refcount, 1);
    int status = deft_symbol_from_entries(sym->num_outputs, sym->outputs, &sg->sym);
    if (status == 0) status = deft_cached_op_new(sg->sym, true, &sg->exec);
    if (status == 0 && keep) status = keep_activations(sg);
    /* One node has at most DEFT_OP_MAX_OUTPUTS outputs: every per-node pass
     * (inference, gradient) sizes its buffers by that. */
    int nout = status ? 0 : deft_cached_op_num_outputs(sg->exec);
    if (status == 0 && nout > DEFT_OP_MAX_OUTPUTS)
        status = deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                            "a graph with %d outputs%s cannot be recorded as one node (at most "
                            "%d)",
                            nout, keep ? " (counting the values its gradient keeps)" : "",
                            DEFT_OP_MAX_OUTPUTS);
    if (status == 0) status = register_subgraph(sg);
    if (status) {
        free_parts(sg);
        return -1;
    }
    *out = sg;
    return 0;
}

deft_subgraph_t *deft_subgraph_retain(deft_subgraph_t *sg) {
    atomic_fetch_add_explicit(&sg->refcount, 1, memory_order_relaxed);
    return sg;
}

void deft_subgraph_release(deft_subgraph_t *sg) {
    if (!sg || atomic_fetch_sub_explicit(&sg->refcount, 1, memory_order_acq_rel) != 1) return;
    pthread_mutex_lock(&table_lock);
    table[sg->number] = NULL;
    pthread_mutex_unlock(&table_lock);
    free_parts(sg);
}

const char *deft_subgraph_id(const deft_subgraph_t *sg) {
    return sg->id;
}

const deft_symbol_t *deft_subgraph_symbol(const deft_subgraph_t *sg) {
    return sg->sym;
}

deft_cached_op_t *deft_subgraph_executor(const deft_subgraph_t *sg) {
    return sg->exec;
}

int deft_subgraph_input_of(const deft_subgraph_t *sg, const deft_node_t *var) {
    for (int a = 0; a < deft_cached_op_num_inputs(sg->exec); a++)
        if (deft_cached_op_input_node(sg->exec, a) == var) return a;
    return -1;
}

/* ---- the operator's callbacks ---- */

/* The operator's callbacks each hold the graph while they use it: another
 * thread may drop what else held it meanwhile. */
static int sg_infer(const char *id, int nin, const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_subgraph_t *sg = acquire(id);
    int status = sg ? deft_cached_op_infer(sg->exec, nin, in, nout, out) : -1;
    deft_subgraph_release(sg);
    return status;
}

static int sg_forward(const char *id, int nin, const deft_tensor_t *in, int nout,
                      const deft_tensor_t *out) {
    deft_subgraph_t *sg = acquire(id);
    int status = sg ? deft_cached_op_forward(sg->exec, nin, in, nout, out) : -1;
    deft_subgraph_release(sg);
    return status;
}

static int sg_num_outputs(const char *id) {
    deft_subgraph_t *sg = acquire(id);
    int n = sg ? deft_cached_op_num_outputs(sg->exec) : 1;
    deft_subgraph_release(sg);
    return n;
}

static int sg_num_visible(const char *id) {
    deft_subgraph_t *sg = acquire(id);
    int n = sg ? sg->sym->num_outputs : 1;
    deft_subgraph_release(sg);
    return n;
}

static void *sg_hold(const char *id) {
    return acquire(id);
}

static void sg_unhold(void *sg) {
    deft_subgraph_release(sg);
}

deft_subgraph_t *deft_subgraph_of_node(const deft_node_t *node) {
    return node->op && node->op == deft_registry_find("_CachedOp") ? node->held : NULL;
}

static pthread_mutex_t gradient_lock = PTHREAD_MUTEX_INITIALIZER;

/* The graph's gradient with respect to every input, a head variable per output. */
static int make_gradient(deft_subgraph_t *sg) {
    int nargs = deft_cached_op_num_inputs(sg->exec), nout = sg->sym->num_outputs;
    int status = deft_graph_build_cut(nout, sg->sym->outputs, NULL, NULL, &sg->g);
    int *ids = malloc(((size_t)nargs + 1) * sizeof *ids);
    deft_entry_t *head_entries = calloc((size_t)nout + 1, sizeof *head_entries);
    deft_entry_t *roots = calloc((size_t)nargs + 1, sizeof *roots);
    sg->heads = calloc((size_t)nout + 1, sizeof *sg->heads);
    sg->grads = calloc((size_t)nargs + 1, sizeof *sg->grads);
    if (!status && (!ids || !head_entries || !roots || !sg->heads || !sg->grads))
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a gradient");
    for (int a = 0; !status && a < nargs; a++)
        ids[a] = deft_graph_node_id(sg->g, deft_cached_op_input_node(sg->exec, a));
    for (int o = 0; !status && o < nout; o++) {
        status = deft_node_new_variable("head", NULL, 0, NULL, NULL, &sg->heads[o]);
        head_entries[o] = (deft_entry_t){sg->heads[o], 0};
    }
    if (!status) status = deft_gradient_entries(sg->g, head_entries, nargs, ids, sg->grads);
    int reached = 0;
    for (int a = 0; !status && a < nargs; a++)
        if (sg->grads[a].node) roots[reached++] = sg->grads[a];
    if (!status) status = deft_graph_build_cut(reached, roots, NULL, NULL, &sg->gg);
    free(ids), free(head_entries), free(roots);
    return status;
}

static int ensure_gradient(deft_subgraph_t *sg) {
    pthread_mutex_lock(&gradient_lock);
    if (!sg->gradient_made) {
        sg->grad_status = make_gradient(sg);
        sg->gradient_made = true;
    }
    pthread_mutex_unlock(&gradient_lock);
    return sg->grad_status;
}

/* An operator node of the forward graph (the gradient graph holds the ones it reads). */
static bool is_forward(const deft_subgraph_t *sg, const deft_node_t *node) {
    return node->op && deft_graph_node_id(sg->g, node) >= 0;
}

/* Keep entry e of the gradient graph if a forward operator makes it: a
 * visible output already holds it, or it becomes the next output. */
static void keep_entry(deft_subgraph_t *sg, deft_entry_t *outs, int *n, int e) {
    const deft_graph_t *gg = sg->gg;
    int id = deft_graph_entry_node(gg, e);
    deft_entry_t entry = {gg->nodes[id], e - gg->row_ptr[id]};
    if (sg->kept_at[e] >= 0 || !is_forward(sg, entry.node)) return;
    for (int o = 0; o < sg->sym->num_outputs; o++)
        if (outs[o].node == entry.node && outs[o].index == entry.index) {
            sg->kept_at[e] = o;
            return;
        }
    sg->kept_at[e] = *n;
    outs[(*n)++] = entry;
}

/* The gradient's own nodes may not update a forward input: the forward ran
 * once, and its updates are the only ones. */
static int check_gradient_node(const deft_node_t *node) {
    if (deft_op_mutates_any(node->op->op))
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "the gradient of this graph updates an input in place ('%s'), so a call "
                          "of it cannot be recorded as one node",
                          node->op->op->name);
    return 0;
}

/* Outputs for the forward values the gradient reads: kept_at, and an
 * executor of the graph with them as outputs after the visible ones. */
static int keep_activations(deft_subgraph_t *sg) {
    sg->keeps = sg->gradient_made = true;
    if ((sg->grad_status = make_gradient(sg))) return -1;
    const deft_graph_t *gg = sg->gg;
    int nargs = deft_cached_op_num_inputs(sg->exec), entries = deft_graph_num_entries(gg);
    int n = sg->sym->num_outputs, status = 0;
    deft_entry_t *outs = malloc(((size_t)n + (size_t)entries + 1) * sizeof *outs);
    sg->kept_at = malloc(((size_t)entries + 1) * sizeof *sg->kept_at);
    if (!outs || !sg->kept_at) {
        free(outs);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a gradient");
    }
    memcpy(outs, sg->sym->outputs, (size_t)n * sizeof *outs);
    for (int e = 0; e < entries; e++) sg->kept_at[e] = -1;
    for (int i = 0; status == 0 && i < gg->num_nodes; i++) {
        const deft_node_t *node = gg->nodes[i];
        if (!node->op || is_forward(sg, node)) continue;
        status = check_gradient_node(node);
        for (int k = 0; status == 0 && k < node->num_inputs; k++)
            keep_entry(sg, outs, &n, deft_graph_input_entry(gg, i, k));
    }
    for (int a = 0; status == 0 && a < nargs; a++) /* a gradient that is a forward value */
        if (sg->grads[a].node)
            keep_entry(sg, outs, &n,
                       deft_graph_entry_id(gg, deft_graph_node_id(gg, sg->grads[a].node),
                                           sg->grads[a].index));
    deft_symbol_t *kept = NULL;
    deft_cached_op_t *exec = NULL;
    if (status == 0 && n > sg->sym->num_outputs)
        status = deft_symbol_from_entries(n, outs, &kept) || deft_cached_op_new(kept, true, &exec);
    /* The extra outputs are values of the same graph: its inputs are the same, in order. */
    for (int a = 0; status == 0 && exec && a < nargs; a++)
        if (deft_cached_op_input_node(exec, a) != deft_cached_op_input_node(sg->exec, a))
            status = deft_error(DEFT_ERR_INTERNAL, "keeping activations reordered the inputs");
    if (status == 0 && exec) {
        deft_cached_op_release(sg->exec);
        sg->exec = exec, exec = NULL;
    }
    deft_cached_op_release(exec);
    deft_symbol_free(kept);
    free(outs);
    return status;
}

/* The reference standing for a variable of the gradient graph: an input of
 * the node, or the gradient of one of its outputs. */
static deft_gref_t variable_ref(const deft_subgraph_t *sg, deft_grad_builder_t *b,
                                const deft_node_t *var) {
    int a = deft_subgraph_input_of(sg, var);
    if (a >= 0) return b->input(b, a);
    for (int o = 0; o < sg->sym->num_outputs; o++)
        if (sg->heads[o] == var) return b->out_grad(b, o);
    return (deft_gref_t){NULL, 0};
}

/* Apply one node of the gradient graph through the builder. */
static deft_gref_t apply_node(deft_grad_builder_t *b, const deft_graph_t *gg, int i,
                              const deft_gref_t *refs) {
    const deft_node_t *node = gg->nodes[i];
    deft_gref_t in[DEFT_OP_MAX_INPUTS];
    const char *params[2 * DEFT_OP_MAX_PARAMS + 9];
    int np = 0;
    for (int a = 0; a < node->attrs.count && np < 2 * DEFT_OP_MAX_PARAMS + 8; a++) {
        params[np++] = node->attrs.keys[a];
        params[np++] = node->attrs.vals[a];
    }
    params[np] = NULL;
    for (int k = 0; k < node->num_inputs; k++) in[k] = refs[deft_graph_input_entry(gg, i, k)];
    return b->apply(b, node->op->op->name, node->num_inputs, in, params, 0);
}

/* The inlined gradient recomputes the forward values it reads from the
 * node's inputs: a random operator among them would draw new values, and the
 * gradient would silently belong to another forward. */
static int check_replayable(const deft_graph_t *gg) {
    for (int i = 0; i < gg->num_nodes; i++) {
        const deft_node_t *node = gg->nodes[i];
        if (node->op && node->op->op->nondeterministic)
            return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                              "the gradient of this cached graph would recompute '%s', a random "
                              "operator, and get other values than the forward run; make the "
                              "random values an input of the graph instead",
                              node->op->op->name);
    }
    return 0;
}

/* A forward value the gradient reads: the node's hidden output keeping it
 * (keeping subgraphs), or NULL, for a value nothing reads. */
static deft_gref_t kept_ref(const deft_subgraph_t *sg, deft_grad_builder_t *b, int e) {
    return sg->kept_at[e] >= 0 ? b->output(b, sg->kept_at[e]) : (deft_gref_t){NULL, 0};
}

/* The gradient of a _CachedOp node: its graph's gradient, inlined. A
 * keeping subgraph reads the forward values from the node's outputs; any
 * other recomputes them from the node's inputs. */
static int inline_gradient(deft_subgraph_t *sg, deft_grad_builder_t *b, int nin,
                           deft_gref_t *in_grads) {
    if (ensure_gradient(sg) || (!sg->keeps && check_replayable(sg->gg))) return -1;
    const deft_graph_t *gg = sg->gg;
    deft_gref_t *refs = calloc((size_t)deft_graph_num_entries(gg) + 1, sizeof *refs);
    if (!refs) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a gradient");
    for (int i = 0; i < gg->num_nodes; i++) {
        const deft_node_t *node = gg->nodes[i];
        if (!node->op) {
            refs[gg->row_ptr[i]] = variable_ref(sg, b, node);
        } else if (sg->keeps && is_forward(sg, node)) {
            for (int k = 0; k < node->num_outputs; k++)
                refs[gg->row_ptr[i] + k] = kept_ref(sg, b, gg->row_ptr[i] + k);
        } else {
            deft_gref_t r = apply_node(b, gg, i, refs);
            for (int k = 0; k < node->num_outputs; k++)
                refs[gg->row_ptr[i] + k] = (deft_gref_t){r.node, k};
        }
    }
    for (int a = 0; a < nin; a++) {
        const deft_entry_t *e = &sg->grads[a];
        in_grads[a] = e->node
                          ? refs[deft_graph_entry_id(gg, deft_graph_node_id(gg, e->node), e->index)]
                          : (deft_gref_t){NULL, 0};
    }
    free(refs);
    return 0;
}

static int sg_gradient(const char *id, deft_grad_builder_t *b, int nin, deft_gref_t *in_grads) {
    deft_subgraph_t *sg = acquire(id);
    int status = sg ? inline_gradient(sg, b, nin, in_grads) : -1;
    deft_subgraph_release(sg);
    return status;
}

static const deft_subgraph_impl_t impl = {sg_infer,       sg_forward, sg_gradient, sg_num_outputs,
                                          sg_num_visible, sg_hold,    sg_unhold};

static void install(void) {
    deft_subgraph_install(&impl);
}
