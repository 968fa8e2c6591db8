#include "core/graph/executor.h"
#include "core/base/profiler.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/base/parallel.h"
#include "core/graph/branches.h"
#include "core/graph/pass.h"
#include "core/graph/place_device.h"
#include "core/graph/subgraph.h"

/* Runs with at most this many inputs and outputs (most graphs) keep their
 * per-run lists on the stack; larger ones take them from the heap. */
#define RUN_INLINE 16

#define NO_SOURCE INT_MIN

/* Where a plan's values live when the inputs are on given devices: each
 * node runs on its placed device ("__device__"), else where its parameters
 * put it (copies, creation), else where its first input is. */
typedef struct deft_cached_plan {
    deft_device_t *inputs;  /* the devices of the inputs it was made for */
    deft_device_t *devices; /* per entry */
    deft_storage_t *arenas[DEFT_DEVICE_SLOTS];
    deft_tensor_t *tensors; /* per entry: arena entries filled once, the rest per run */
    struct deft_cached_plan *next;
    struct plan_entry *plan;   /* the plan it places */
    struct deft_cached_op *op; /* the plan's executor */
} placement_t;

/*
 * Everything that depends on the input signature, made once and kept while
 * the executor's cache has room (executor.h: DEFT_PLAN_CACHE_BYTES and
 * DEFT_PLAN_CACHE_SIZE). A plan is reference counted: the executor's list
 * holds one reference while the plan is listed, and every run, forward or
 * inference using it holds one, so a plan dropped from the list (evicted,
 * or by DeftMemoryReleaseCached) keeps its arenas until its last queued run
 * is done with them.
 */
typedef struct plan_entry {
    atomic_int refs;
    size_t bytes;           /* of its placements' arenas */
    deft_desc_t *signature; /* one per input */
    deft_graph_types_t types;
    bool borrowed_desc; /* types.desc is the executor's symbol types' (recorded_types) */
    deft_memory_plan_t plan;
    bool reported; /* plan's report figures are filled (report_last) */
    placement_t *placements;
    struct plan_entry *next; /* the list, most recently used first; or a list of dropped ones */
} plan_entry_t;

struct deft_cached_op {
    atomic_int refcount;
    deft_graph_t *g;            /* what runs: the symbol after the executor's own passes */
    deft_symbol_t *source;      /* the symbol as given: what autograd records */
    deft_symbol_types_t *types; /* what its recording knew of its values (symbol.h), or NULL */
    bool types_in_order;        /* g is the index its export made with types (build_graph) */
    bool plan_memory;
    bool blocking; /* a node waits for a host callback: runs never go inline */
    bool draws;    /* a node draws random numbers: runs are ordered with other draws */
    /* a node chooses its device (node_device): else every value lives where the inputs do */
    bool chooses_device;
    int num_inputs;
    int *input_nodes;             /* node ids: arguments, then auxiliary states */
    int *input_of_node;           /* node id -> input position, -1 for operators */
    int *output_entries;          /* entry ids of the graph outputs */
    int *output_source;           /* per output: an earlier output o (o >= 0) or input i
                                     (-1 - i) whose value it copies, or NO_SOURCE */
    bool *input_written;          /* auxiliary states are updated in place */
    deft_var_t *var;              /* runs share the arena: one at a time */
    deft_branches_t *branches;    /* which nodes run at once (branches.h) */
    deft_subgraph_t *subgraph[2]; /* made when a call is first recorded as one node: by
                                     deferred compute [0], by autograd, keeping activations [1] */
    bool subgraph_failed[2];      /* making it failed once: it would again */
    pthread_mutex_t lock;         /* the plan list and the figures below */
    plan_entry_t *plans;
    int num_plans;
    size_t plan_bytes;     /* arenas of the listed plans */
    size_t max_plan_bytes; /* the cache's bounds, read at creation */
    int max_plans;
    bool has_run;            /* a plan was used: last_used, or `last` once it is unlisted */
    plan_entry_t *last_used; /* the last plan used, while listed (not a reference) */
    deft_memory_plan_t last; /* its figures, without offsets, when reported */
    bool last_lost;          /* unlisted before its figures could be reported */
    struct deft_cached_op *prev, *next; /* every live executor (release_arenas) */
    bool registered;
};

/* ---- the plan cache's bounds and the list of executors ---- */

static pthread_once_t limits_once = PTHREAD_ONCE_INIT;
static size_t limit_bytes = (size_t)512 << 20;
static int limit_plans = 64;

/* A non-negative decimal number from the environment, or `fallback`. */
static long long env_count(const char *name, long long fallback) {
    const char *text = getenv(name);
    if (!text || !*text) return fallback;
    char *end;
    long long v = strtoll(text, &end, 10);
    return *end || v < 0 ? fallback : v;
}

static void read_limits(void) {
    limit_bytes = (size_t)env_count("DEFT_PLAN_CACHE_BYTES", (long long)limit_bytes);
    long long plans = env_count("DEFT_PLAN_CACHE_SIZE", limit_plans);
    limit_plans = plans > 1 << 20 ? 1 << 20 : (int)plans;
}

void deft_plan_cache_limits(size_t *bytes, int *plans) {
    pthread_once(&limits_once, read_limits);
    *bytes = limit_bytes, *plans = limit_plans;
}

/* Every live executor, so DeftMemoryReleaseCached can reach their arenas.
 * Lock order: this lock, then an executor's; nothing holding an executor's
 * lock makes or frees an executor. */
static pthread_mutex_t executors_lock = PTHREAD_MUTEX_INITIALIZER;
static deft_cached_op_t *executors;

static void register_op(deft_cached_op_t *op) {
    pthread_mutex_lock(&executors_lock);
    op->next = executors;
    if (executors) executors->prev = op;
    executors = op;
    op->registered = true;
    pthread_mutex_unlock(&executors_lock);
}

static void unregister_op(deft_cached_op_t *op) {
    if (!op->registered) return;
    pthread_mutex_lock(&executors_lock);
    if (op->prev)
        op->prev->next = op->next;
    else
        executors = op->next;
    if (op->next) op->next->prev = op->prev;
    pthread_mutex_unlock(&executors_lock);
}

/* ---- creation ---- */

/* The inputs: arguments in graph order, then auxiliary states (a second pass, made only
 * when the first met one: most graphs have none). */
static void list_inputs(deft_cached_op_t *op) {
    const deft_graph_t *g = op->g;
    bool any_aux = false;
    for (int pass = 0; pass < 2 && (pass == 0 || any_aux); pass++)
        for (int i = 0; i < g->num_nodes; i++) {
            if (pass == 0) op->input_of_node[i] = -1;
            /* a node that reads something is no variable: known without a look at it */
            if (g->in_ptr[i + 1] > g->in_ptr[i] || g->nodes[i]->op) continue;
            bool aux = deft_graph_is_auxiliary_at(g, i);
            any_aux = any_aux || aux;
            if (aux != (pass == 1)) continue;
            op->input_of_node[i] = op->num_inputs;
            op->input_written[op->num_inputs] = pass == 1 || deft_graph_is_updated_at(g, i);
            op->input_nodes[op->num_inputs++] = i;
        }
}

/* Which outputs the walk does not write (an input, or an entry an earlier
 * output already lists) and where their values come from: found once here,
 * so runs with many outputs stay linear. */
static int list_outputs(deft_cached_op_t *op) {
    const deft_graph_t *g = op->g;
    int *first = malloc(((size_t)deft_graph_num_entries(g) + 1) * sizeof *first);
    if (!first) return -1;
    for (int o = 0; o < g->num_outputs; o++) {
        int e = op->output_entries[o] = deft_graph_output_entry(g, o);
        first[e] = -1;
    }
    for (int o = 0; o < g->num_outputs; o++) {
        int e = op->output_entries[o], node = g->output_ids[o];
        op->output_source[o] = NO_SOURCE;
        if (!g->outputs[o].node->op)
            op->output_source[o] = -1 - op->input_of_node[node];
        else if (first[e] >= 0)
            op->output_source[o] = first[e];
        if (first[e] < 0) first[e] = o;
    }
    free(first);
    return 0;
}

/* Whether a node has an annotation ("__" first, as "__device__"): most nodes have none, and a
 * look at each key's first bytes is cheaper than the lookup by name. */
static bool annotated(const deft_node_t *node) {
    for (int a = 0; a < node->attrs.count; a++)
        if (node->attrs.keys[a][0] == '_' && node->attrs.keys[a][1] == '_') return true;
    return false;
}

/* What the nodes to run ask of runs, and whether one is a BatchNorm (to fold), found in
 * one pass over them (a one-off graph's executor made four). */
typedef struct node_scan {
    bool blocking;       /* one waits for a host callback */
    bool draws;          /* one draws random numbers */
    bool chooses_device; /* one is placed, or its operator says where its outputs go or it
                          * has no input to follow */
    bool batch_norm;
} node_scan_t;

static node_scan_t scan_nodes(const deft_graph_t *g) {
    static _Atomic(const deft_op_entry_t *) bn_entry;
    const deft_op_entry_t *bn =
        deft_registry_find_kept("BatchNorm", &bn_entry); /* by pointer: no name */
    node_scan_t scan = {false, false, false, false};
    for (int i = 0; i < g->num_nodes; i++) {
        if (deft_graph_is_leaf(g, i)) continue;
        const deft_node_t *node = g->nodes[i];
        const deft_op_t *o = node->op->op;
        scan.blocking |= o->blocking;
        scan.draws |= o->nondeterministic;
        scan.chooses_device |= o->output_device || !node->num_inputs || annotated(node);
        scan.batch_norm |= node->op == bn;
    }
    return scan;
}

/* The graph an executor runs, and its scan: sym's, with BatchNorm folded into the
 * convolutions it follows (fold_bn.c); symbols and exports keep both. Its
 * nodes are named only if a name is asked for (an error, an input's name).
 * An exported symbol's first executor takes the index its export made, which
 * lists its nodes and entries as the symbol's types do (*types_in_order). */
static int build_graph(const deft_symbol_t *sym, deft_graph_t **g, node_scan_t *scan,
                       bool *types_in_order) {
    deft_symbol_t *folded = NULL;
    *types_in_order = (*g = deft_symbol_take_graph(sym)) != NULL;
    if (!*g && deft_graph_build_unnamed(sym->num_outputs, sym->outputs, g)) return -1;
    *scan = scan_nodes(*g);
    int status = scan->batch_norm ? deft_fold_bn_graph(*g, &folded) : 0;
    if (status || !folded) return status; /* nothing folded: the graph as built */
    *types_in_order = false;
    deft_graph_free(*g);
    *g = NULL;
    status = deft_graph_build_unnamed(folded->num_outputs, folded->outputs, g);
    deft_symbol_free(folded);
    if (status == 0) *scan = scan_nodes(*g);
    return status;
}

int deft_cached_op_new(const deft_symbol_t *sym, bool plan_memory, deft_cached_op_t **out) {
    if (deft_symbol_check_composed(sym, "sym")) return -1;
    /* malloc and memset, here and for the plan's tables, not calloc: glibc's calloc takes
     * no thread cache (four callocs cost 14 instructions per node of a 100-node chain) */
    deft_cached_op_t *op = malloc(sizeof *op);
    if (!op) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an executor");
    memset(op, 0, sizeof *op);
    atomic_init(&op->refcount, 1);
    pthread_mutex_init(&op->lock, NULL);
    op->plan_memory = plan_memory;
    deft_plan_cache_limits(&op->max_plan_bytes, &op->max_plans);
    node_scan_t scan;
    if (deft_symbol_from_entries(sym->num_outputs, sym->outputs, &op->source) ||
        build_graph(sym, &op->g, &scan, &op->types_in_order)) {
        deft_cached_op_release(op);
        return -1;
    }
    const deft_graph_t *g = op->g;
    op->types = deft_symbol_types_retain(sym->types);
    op->blocking = scan.blocking, op->draws = scan.draws;
    op->chooses_device = scan.chooses_device;
    size_t n = (size_t)g->num_nodes + 1;
    op->input_nodes = malloc(n * sizeof(int));
    op->input_of_node = malloc(n * sizeof(int));
    if ((op->input_written = malloc(n * sizeof(bool)))) memset(op->input_written, 0, n);
    op->output_entries = malloc(((size_t)g->num_outputs + 1) * sizeof(int));
    op->output_source = malloc(((size_t)g->num_outputs + 1) * sizeof(int));
    op->var = deft_var_new();
    op->branches = deft_branches_new(g);
    bool made = op->input_nodes && op->input_of_node && op->input_written && op->output_entries &&
                op->output_source && op->var && op->branches;
    if (made) list_inputs(op);
    if (!made || list_outputs(op)) {
        deft_cached_op_release(op);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an executor");
    }
    register_op(op);
    *out = op;
    return 0;
}

static void free_placement(placement_t *pl) {
    if (!pl) return;
    deft_plan_arenas_release(pl->arenas);
    free(pl->inputs), free(pl->devices), free(pl->tensors);
    free(pl);
}

static void free_plan(plan_entry_t *p) {
    while (p->placements) {
        placement_t *next = p->placements->next;
        free_placement(p->placements);
        p->placements = next;
    }
    free(p->signature);
    if (p->borrowed_desc) p->types.desc = NULL; /* the executor's symbol types' */
    deft_graph_types_free(&p->types);
    deft_memory_plan_free(&p->plan);
    free(p);
}

static void release_plan(plan_entry_t *p) {
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) free_plan(p);
}

/* Drop the listed references of plans taken off the list (outside the lock:
 * freeing arenas is not work to do while runs wait for the list). */
static void release_dropped(plan_entry_t *dropped) {
    while (dropped) {
        plan_entry_t *next = dropped->next;
        release_plan(dropped);
        dropped = next;
    }
}

/* Under the lock: the figures of the last plan used in op->last. Made when asked, not
 * when planned: a report plans three more times, which a one-off graph would pay for. */
static int report_last(deft_cached_op_t *op) {
    plan_entry_t *p = op->last_used;
    if (!p) return 0; /* reported when it was unlisted */
    if (!p->reported) {
        if (deft_plan_memory_report(op->g, &p->types, NULL, &p->plan)) return -1;
        p->reported = true;
    }
    op->last = p->plan;
    op->last.offset = NULL;
    return 0;
}

/* Under the lock: take the plan at *at off the list onto `dropped`. */
static void unlist(deft_cached_op_t *op, plan_entry_t **at, plan_entry_t **dropped) {
    plan_entry_t *p = *at;
    if (p == op->last_used) { /* its figures stay for DeftCachedOpGetPlanStat */
        op->last_lost = report_last(op) != 0;
        op->last_used = NULL;
    }
    *at = p->next;
    op->num_plans--;
    op->plan_bytes -= p->bytes;
    p->next = *dropped;
    *dropped = p;
}

void deft_cached_op_release(deft_cached_op_t *op) {
    if (!op || atomic_fetch_sub_explicit(&op->refcount, 1, memory_order_acq_rel) != 1) return;
    unregister_op(op);
    plan_entry_t *dropped = NULL;
    op->last_used = NULL; /* nobody asks any more */
    while (op->plans) unlist(op, &op->plans, &dropped);
    release_dropped(dropped);
    deft_subgraph_release(op->subgraph[0]);
    deft_subgraph_release(op->subgraph[1]);
    deft_graph_free(op->g);
    deft_symbol_free(op->source);
    deft_symbol_types_release(op->types);
    deft_var_release(op->var);
    deft_branches_free(op->branches);
    free(op->input_nodes), free(op->input_of_node), free(op->input_written),
        free(op->output_entries), free(op->output_source);
    pthread_mutex_destroy(&op->lock);
    free(op);
}

void deft_cached_op_branch_stat(const deft_cached_op_t *op, deft_branch_stat_t *out) {
    deft_branches_stat(op->branches, out);
}

int deft_cached_op_num_inputs(const deft_cached_op_t *op) {
    return op->num_inputs;
}

const char *deft_cached_op_input_name(const deft_cached_op_t *op, int i) {
    return deft_graph_name(op->g, op->input_nodes[i]);
}

const deft_node_t *deft_cached_op_input_node(const deft_cached_op_t *op, int i) {
    return op->g->nodes[op->input_nodes[i]];
}

static bool same_signature(const plan_entry_t *p, int nin, const deft_desc_t *in) {
    for (int i = 0; i < nin; i++)
        if (p->signature[i].dtype != in[i].dtype ||
            !deft_shape_equal(&p->signature[i].shape, &in[i].shape))
            return false;
    return true;
}

static int incomplete(const deft_cached_op_t *op, const deft_graph_types_t *t) {
    const deft_graph_t *g = op->g;
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_outputs; k++)
            if (!t->known[g->row_ptr[i] + k])
                return deft_error(DEFT_ERR_VALUE,
                                  "cannot infer the shape of output %d of node "
                                  "'%s' from the inputs",
                                  k, deft_graph_name(g, i));
    return 0;
}

/* The types of every entry from what the recording knew (op->types), when
 * they cover every node of the graph and its inputs are described as they
 * were recorded: true, and *out made; its descriptions are the symbol's own
 * (*borrowed: not to be freed, and kept by op->types for the executor's life, which
 * is longer than its plans') when listed in the graph's order. Else false
 * (inference finds them). */
static bool recorded_types(const deft_cached_op_t *op, int nin, const deft_desc_t *in,
                           deft_graph_types_t *out, bool *borrowed) {
    const deft_graph_t *g = op->g;
    const deft_symbol_types_t *r = op->types;
    if (!r || r->num_nodes != g->num_nodes) return false;
    deft_graph_types_t t = {.num_entries = deft_graph_num_entries(g)};
    /* Usually listed in the graph's own order (the export copied in post-order), each node's
     * descriptions where its entries are: then they are the plan's as they are, and no
     * lookup by node (the graph's map) nor a look at each node is needed. Known without a
     * look when g is the export's index (a one-off graph's executor). */
    bool same_order = op->types_in_order;
    for (int j = 0; !op->types_in_order && same_order && j <= r->num_nodes; j++)
        same_order =
            r->first[j] == g->row_ptr[j] && (j == r->num_nodes || r->nodes[j] == g->nodes[j]);
    t.desc = same_order ? r->desc : malloc(((size_t)t.num_entries + 1) * sizeof *t.desc);
    t.known = malloc((size_t)t.num_entries + 1);
    bool covered = t.desc && t.known;
    for (int j = 0; covered && !same_order && j < r->num_nodes; j++) {
        int id = deft_graph_node_id(g, r->nodes[j]);
        int n = r->first[j + 1] - r->first[j];
        covered = id >= 0 && g->row_ptr[id + 1] - g->row_ptr[id] == n;
        if (covered)
            memcpy(&t.desc[g->row_ptr[id]], &r->desc[r->first[j]], (size_t)n * sizeof *t.desc);
    }
    for (int i = 0; covered && i < nin; i++) { /* the nodes are distinct: each entry is set */
        const deft_desc_t *d = &t.desc[g->row_ptr[op->input_nodes[i]]];
        covered = d->dtype == in[i].dtype && deft_shape_equal(&d->shape, &in[i].shape);
    }
    if (!covered) {
        if (same_order) t.desc = NULL; /* the symbol's */
        deft_graph_types_free(&t);
        return false;
    }
    memset(t.known, 1, (size_t)t.num_entries);
    *out = t;
    *borrowed = same_order;
    return true;
}

/* Every entry's type for inputs described by `in`: as recorded, or inferred. */
static int entry_types(const deft_cached_op_t *op, int nin, const deft_desc_t *in,
                       deft_graph_types_t *out, bool *borrowed) {
    *borrowed = false;
    if (recorded_types(op, nin, in, out, borrowed)) return 0;
    const deft_graph_t *g = op->g;
    /* read only where known: not zeroed (a description per node is most of a plan's bytes) */
    deft_desc_t *given = malloc(((size_t)g->num_nodes + 1) * sizeof *given);
    bool *known = calloc((size_t)g->num_nodes + 1, sizeof *known);
    if (!given || !known) {
        free(given), free(known);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a plan");
    }
    for (int i = 0; i < nin; i++) {
        given[op->input_nodes[i]] = in[i];
        known[op->input_nodes[i]] = true;
    }
    int status = deft_graph_infer(g, given, known, out);
    free(given), free(known);
    if (status == 0 && incomplete(op, out)) {
        deft_graph_types_free(out);
        return -1;
    }
    return status;
}

static int make_plan(deft_cached_op_t *op, int nin, const deft_desc_t *in, plan_entry_t **out) {
    plan_entry_t *p = malloc(sizeof *p); /* not calloc (deft_cached_op_new) */
    if (p) memset(p, 0, sizeof *p);
    if (!p || !(p->signature = malloc(((size_t)nin + 1) * sizeof *p->signature))) {
        free(p);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a plan");
    }
    for (int i = 0; i < nin; i++) p->signature[i] = in[i];
    int status = entry_types(op, nin, in, &p->types, &p->borrowed_desc);
    if (status == 0) status = deft_plan_memory(op->g, &p->types, op->plan_memory, NULL, &p->plan);
    if (status) {
        free_plan(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* The device node i runs on, its inputs' entries already placed. */
static int node_device(const deft_graph_t *g, int i, const deft_device_t *devices,
                       deft_device_t *out) {
    const deft_node_t *node = g->nodes[i];
    const deft_op_t *op = node->op->op;
    bool placed = false;
    int type = 0, id = 0;
    if (annotated(node) && deft_node_placed_device(node, &placed, &type, &id)) return -1;
    if (placed) {
        char what[160];
        snprintf(what, sizeof what, "the device of node '%s' (%s)", deft_graph_name(g, i),
                 op->name);
        /* cpu(n): the one host memory */
        return deft_device_check(type, type == DEFT_DEV_CPU ? 0 : id, what, out);
    }
    if (op->output_device) return op->output_device(op, node->params, out);
    *out = node->num_inputs ? devices[deft_graph_input_entry(g, i, 0)] : deft_device_cpu();
    return 0;
}

/* Whether every value lives on the inputs' one device: no node chooses its own, and every
 * node follows its first input (every variable is an input). */
static bool all_on_inputs_device(const deft_cached_op_t *op, const deft_device_t *inputs) {
    if (op->chooses_device || op->num_inputs == 0) return false;
    for (int i = 1; i < op->num_inputs; i++)
        if (!deft_device_equal(inputs[i], inputs[0])) return false;
    return true;
}

/* Every entry's device, for inputs on `inputs`; an operator reading an
 * input from another device (an unplaced graph) is an error. */
static int entry_devices(const deft_cached_op_t *op, const deft_device_t *inputs,
                         deft_device_t *devices) {
    const deft_graph_t *g = op->g;
    if (all_on_inputs_device(op, inputs)) { /* most graphs: nothing to check node by node */
        for (int e = 0; e < deft_graph_num_entries(g); e++) devices[e] = inputs[0];
        return 0;
    }
    for (int i = 0; i < g->num_nodes; i++) {
        deft_device_t dev;
        if (deft_graph_is_leaf(g, i)) {
            int k = op->input_of_node[i];
            dev = k >= 0 ? inputs[k] : deft_device_cpu();
        } else if (node_device(g, i, devices, &dev)) {
            return -1;
        }
        for (int k = 0; !deft_graph_is_leaf(g, i) && !g->nodes[i]->op->op->any_device &&
                        k < g->nodes[i]->num_inputs;
             k++) {
            deft_device_t from = devices[deft_graph_input_entry(g, i, k)];
            char a[DEFT_DEVICE_STR_MAX], b[DEFT_DEVICE_STR_MAX];
            if (!deft_device_equal(from, dev))
                return deft_error(DEFT_ERR_VALUE,
                                  "node '%s' (%s) runs on %s but its input %d is on %s: place the "
                                  "graph's devices (DeftSymbolPlaceDevice) or copy the input",
                                  deft_graph_name(g, i), g->nodes[i]->op->op->name,
                                  deft_device_format(dev, a, sizeof a), k,
                                  deft_device_format(from, b, sizeof b));
        }
        for (int k = 0; k < g->nodes[i]->num_outputs; k++) devices[g->row_ptr[i] + k] = dev;
    }
    return 0;
}

static int make_placement(deft_cached_op_t *op, plan_entry_t *p, const deft_device_t *inputs,
                          placement_t **out) {
    size_t entries = (size_t)p->types.num_entries + 1;
    placement_t *pl = malloc(sizeof *pl); /* not calloc (deft_cached_op_new) */
    if (pl) {
        memset(pl, 0, sizeof *pl);
        pl->inputs = malloc(((size_t)op->num_inputs + 1) * sizeof *pl->inputs);
        /* Not zeroed: entry_devices writes every entry's device; a run writes the tensors
         * of the inputs and outputs, and the arena's are set below, which is every entry
         * (every variable is an input), before any is read. */
        pl->devices = malloc(entries * sizeof *pl->devices);
        pl->tensors = malloc(entries * sizeof *pl->tensors);
    }
    if (!pl || !pl->inputs || !pl->devices || !pl->tensors) {
        free_placement(pl);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a placement");
    }
    pl->plan = p;
    pl->op = op;
    for (int i = 0; i < op->num_inputs; i++) pl->inputs[i] = inputs[i];
    if (entry_devices(op, inputs, pl->devices) ||
        deft_plan_arenas(&p->plan, &p->types, pl->devices, pl->arenas, pl->tensors)) {
        free_placement(pl);
        return -1;
    }
    *out = pl;
    return 0;
}

/* Under the lock: the placement of plan p for these input devices, cached
 * or made now (its arenas then count towards the cache's bytes). */
static int find_placement(deft_cached_op_t *op, plan_entry_t *p, const deft_device_t *inputs,
                          placement_t **out) {
    placement_t *pl = p->placements;
    for (; pl; pl = pl->next) {
        bool same = true;
        for (int i = 0; same && i < op->num_inputs; i++)
            same = deft_device_equal(pl->inputs[i], inputs[i]);
        if (same) break;
    }
    if (!pl) {
        if (make_placement(op, p, inputs, &pl)) return -1;
        pl->next = p->placements;
        p->placements = pl;
        size_t bytes = 0;
        for (int s = 0; s < DEFT_DEVICE_SLOTS; s++)
            bytes += pl->arenas[s] ? p->plan.arena_bytes : 0;
        p->bytes += bytes;
        op->plan_bytes += bytes;
    }
    *out = pl;
    return 0;
}

/* Under the lock: drop least recently used plans while the cache is over
 * its bounds, never `keep` (the one about to run, whatever its size). */
static void trim(deft_cached_op_t *op, const plan_entry_t *keep, plan_entry_t **dropped) {
    while (op->num_plans > op->max_plans || op->plan_bytes > op->max_plan_bytes) {
        plan_entry_t **oldest = NULL;
        for (plan_entry_t **at = &op->plans; *at; at = &(*at)->next)
            if (*at != keep) oldest = at;
        if (!oldest) return;
        unlist(op, oldest, dropped);
    }
}

/* Under the lock: the listed plan for these inputs, moved to the front, or
 * a new one put there. */
static int find_plan(deft_cached_op_t *op, int nin, const deft_desc_t *in, plan_entry_t **out) {
    plan_entry_t **at = &op->plans;
    while (*at && !same_signature(*at, nin, in)) at = &(*at)->next;
    plan_entry_t *p = *at;
    if (p) {
        *at = p->next;
    } else {
        if (make_plan(op, nin, in, &p)) return -1;
        atomic_init(&p->refs, 1); /* the list's */
        op->num_plans++;
    }
    p->next = op->plans;
    op->plans = p;
    *out = p;
    return 0;
}

/* The plan for inputs described by `in`, and with `devices` its placement
 * for inputs on those devices: held for the caller (release_plan). */
static int acquire(deft_cached_op_t *op, int nin, const deft_desc_t *in,
                   const deft_device_t *devices, plan_entry_t **plan, placement_t **place) {
    plan_entry_t *p = NULL, *dropped = NULL;
    pthread_mutex_lock(&op->lock);
    int status = find_plan(op, nin, in, &p);
    if (status == 0 && devices) status = find_placement(op, p, devices, place);
    if (status == 0) {
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
        op->has_run = true;
        op->last_used = p;
        op->last_lost = false;
    }
    if (p) trim(op, p, &dropped);
    pthread_mutex_unlock(&op->lock);
    release_dropped(dropped);
    if (status == 0) *plan = p;
    return status;
}

int deft_cached_op_last_plan(deft_cached_op_t *op, deft_memory_plan_t *out) {
    pthread_mutex_lock(&op->lock);
    bool has_run = op->has_run, lost = op->last_lost;
    int status = has_run && !lost ? report_last(op) : 0;
    if (has_run) *out = op->last;
    pthread_mutex_unlock(&op->lock);
    if (!has_run) return deft_error(DEFT_ERR_VALUE, "the executor has not run yet");
    if (lost)
        return deft_error(DEFT_ERR_OUT_OF_MEMORY,
                          "the figures of the last plan were lost (out of memory when it was "
                          "dropped)");
    return status;
}

size_t deft_cached_op_cached_bytes(deft_cached_op_t *op) {
    pthread_mutex_lock(&op->lock);
    size_t bytes = op->plan_bytes;
    pthread_mutex_unlock(&op->lock);
    return bytes;
}

/* Drop the listed plans with an arena on `dev`. */
static void drop_plans(deft_cached_op_t *op, deft_device_t dev) {
    plan_entry_t *dropped = NULL;
    pthread_mutex_lock(&op->lock);
    for (plan_entry_t **at = &op->plans; *at;) {
        bool on_dev = false;
        for (placement_t *pl = (*at)->placements; pl && !on_dev; pl = pl->next)
            on_dev = pl->arenas[deft_device_slot(dev)] != NULL;
        if (on_dev)
            unlist(op, at, &dropped);
        else
            at = &(*at)->next;
    }
    pthread_mutex_unlock(&op->lock);
    release_dropped(dropped);
}

void deft_cached_ops_release_arenas(deft_device_t dev) {
    pthread_mutex_lock(&executors_lock);
    for (deft_cached_op_t *op = executors; op; op = op->next) drop_plans(op, dev);
    pthread_mutex_unlock(&executors_lock);
}

/* ---- one run ---- */

const deft_tensor_t *deft_tensor_list_at(const void *list, int i) {
    return &((const deft_tensor_t *)list)[i];
}

/* Run the graph with per-entry tensors t (the plan's arena entries filled in)
 * on the tensors of the inputs and outputs (lists read through `at` in place:
 * no per-run copy, whatever their number). */
static int run_on(const deft_cached_op_t *op, deft_tensor_t *t, int nin, const void *in, int nout,
                  const void *out, deft_tensor_at_fn at, bool training) {
    const deft_graph_t *g = op->g;
    /* Outputs from last to first, so an entry listed twice lands in its first
     * array; inputs after outputs, so an output that is an input reads the input. */
    for (int o = nout - 1; o >= 0; o--) t[op->output_entries[o]] = *at(out, o);
    for (int i = 0; i < nin; i++) t[g->row_ptr[op->input_nodes[i]]] = *at(in, i);
    if (deft_graph_run(g, t, training, op->branches)) return -1;
    /* An output that is an input, or the same entry twice: copy what the walk did not write. */
    for (int o = 0; o < nout; o++) {
        int from = op->output_source[o];
        if (from == NO_SOURCE) continue;
        const deft_tensor_t *dst = at(out, o), *src = from >= 0 ? at(out, from) : at(in, -1 - from);
        if (deft_device_copy(deft_tensor_data(dst), dst->device, deft_tensor_data(src), src->device,
                             deft_tensor_nbytes(dst)))
            return -1;
    }
    return 0;
}

/* The plan and placement for these inputs, held for the caller. */
static int acquire_for(deft_cached_op_t *op, int nin, const void *list, deft_tensor_at_fn at,
                       plan_entry_t **plan, placement_t **place) {
    deft_desc_t sig_room[RUN_INLINE];
    deft_device_t dev_room[RUN_INLINE];
    bool fits = nin <= RUN_INLINE;
    deft_desc_t *sig = fits ? sig_room : malloc((size_t)nin * sizeof *sig);
    deft_device_t *devices = fits ? dev_room : malloc((size_t)nin * sizeof *devices);
    int status = sig && devices ? 0
                                : deft_error(DEFT_ERR_OUT_OF_MEMORY,
                                             "cannot allocate the signature of %d inputs", nin);
    for (int i = 0; status == 0 && i < nin; i++) {
        const deft_tensor_t *t = at(list, i);
        sig[i] = (deft_desc_t){t->shape, t->dtype};
        devices[i] = t->device;
    }
    if (status == 0) status = acquire(op, nin, sig, devices, plan, place);
    if (!fits) free(sig), free(devices);
    return status;
}

int deft_cached_op_acquire(deft_cached_op_t *op, int nin, const void *in, deft_tensor_at_fn at,
                           deft_cached_plan_t **out) {
    if (nin != op->num_inputs)
        return deft_error(DEFT_ERR_VALUE,
                          "got %d inputs, expected %d (the arguments, then the "
                          "auxiliary states)",
                          nin, op->num_inputs);
    plan_entry_t *plan;
    placement_t *place;
    if (acquire_for(op, nin, in, at, &plan, &place)) return -1;
    atomic_fetch_add_explicit(&op->refcount, 1, memory_order_relaxed);
    *out = place;
    return 0;
}

void deft_cached_plan_release(deft_cached_plan_t *p) {
    if (!p) return;
    deft_cached_op_t *op = p->op;
    release_plan(p->plan);
    deft_cached_op_release(op);
}

deft_desc_t deft_cached_plan_output(const deft_cached_plan_t *p, int o, deft_device_t *device) {
    int e = p->op->output_entries[o];
    *device = p->devices[e];
    return p->plan->types.desc[e];
}

size_t deft_cached_plan_arena_bytes(const deft_cached_plan_t *p) {
    return p->plan->plan.arena_bytes;
}

deft_storage_t *deft_cached_plan_arena(const deft_cached_plan_t *p, int slot) {
    return p->arenas[slot];
}

int deft_cached_plan_run(const deft_cached_plan_t *p, int nin, const void *in, int nout,
                         const void *out, deft_tensor_at_fn at, bool training) {
    return run_on(p->op, p->tensors, nin, in, nout, out, at, training);
}

int deft_cached_op_infer(deft_cached_op_t *op, int nin, const deft_desc_t *in, int *nout,
                         deft_desc_t *out) {
    plan_entry_t *p;
    if (nin != op->num_inputs)
        return deft_error(DEFT_ERR_VALUE, "got %d inputs, expected %d", nin, op->num_inputs);
    if (acquire(op, nin, in, NULL, &p, NULL)) return -1;
    *nout = op->g->num_outputs;
    for (int o = 0; o < op->g->num_outputs; o++) out[o] = p->types.desc[op->output_entries[o]];
    release_plan(p);
    return 0;
}

/* Run on tensors with placement pl of plan p, in arenas of its own: runs of
 * one graph as a node may overlap. */
static int forward_in_own_arenas(deft_cached_op_t *op, const plan_entry_t *p, const placement_t *pl,
                                 int nin, const deft_tensor_t *in, int nout,
                                 const deft_tensor_t *out) {
    int entries = p->types.num_entries;
    deft_storage_t *arenas[DEFT_DEVICE_SLOTS];
    deft_tensor_t *t = malloc(((size_t)entries + 1) * sizeof *t);
    if (!t) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph run");
    memcpy(t, pl->tensors, (size_t)entries * sizeof *t);
    if (deft_plan_arenas(&p->plan, &p->types, pl->devices, arenas, t)) {
        free(t);
        return -1;
    }
    /* a node of an enclosing run: in that run's mode, which this thread has now */
    int status = run_on(op, t, nin, in, nout, out, deft_tensor_list_at, deft_op_training());
    deft_plan_arenas_release(arenas);
    free(t);
    return status;
}

int deft_cached_op_forward(deft_cached_op_t *op, int nin, const deft_tensor_t *in, int nout,
                           const deft_tensor_t *out) {
    if (nin != op->num_inputs || nout != op->g->num_outputs)
        return deft_error(DEFT_ERR_INTERNAL,
                          "a graph run with %d inputs and %d outputs, not %d, %d", nin, nout,
                          op->num_inputs, op->g->num_outputs);
    plan_entry_t *p;
    placement_t *place;
    if (acquire_for(op, nin, in, deft_tensor_list_at, &p, &place)) return -1;
    int status = forward_in_own_arenas(op, p, place, nin, in, nout, out);
    release_plan(p);
    return status;
}

int deft_cached_op_subgraph(deft_cached_op_t *op, bool keep, deft_subgraph_t **out) {
    pthread_mutex_lock(&op->lock);
    deft_subgraph_t *sg = op->subgraph[keep];
    bool failed = op->subgraph_failed[keep];
    pthread_mutex_unlock(&op->lock);
    if (sg) {
        *out = sg;
        return 0;
    }
    if (failed)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "this graph cannot be recorded as one node (as its first try said)");
    /* Made outside the lock: making one makes an executor, which takes the
     * list of executors' lock, and DeftMemoryReleaseCached takes that lock
     * before this one. Of two made at once, the first kept wins. */
    deft_symbol_t *sym = NULL;
    deft_subgraph_t *made = NULL;
    int status = deft_symbol_from_entries(op->source->num_outputs, op->source->outputs, &sym);
    if (status == 0) status = deft_subgraph_new(sym, keep, &made);
    deft_symbol_free(sym);
    if (status) {
        pthread_mutex_lock(&op->lock);
        op->subgraph_failed[keep] = true;
        pthread_mutex_unlock(&op->lock);
        return -1;
    }
    pthread_mutex_lock(&op->lock);
    if (!op->subgraph[keep]) op->subgraph[keep] = made, made = NULL;
    *out = op->subgraph[keep];
    pthread_mutex_unlock(&op->lock);
    deft_subgraph_release(made);
    return 0;
}

int deft_cached_op_num_outputs(const deft_cached_op_t *op) {
    return op->g->num_outputs;
}

const deft_graph_t *deft_cached_op_graph(const deft_cached_op_t *op) {
    return op->g;
}

const deft_symbol_t *deft_cached_op_source(const deft_cached_op_t *op) {
    return op->source;
}

bool deft_cached_op_input_written(const deft_cached_op_t *op, int i) {
    return op->input_written[i];
}

bool deft_cached_op_blocking(const deft_cached_op_t *op) {
    return op->blocking;
}

bool deft_cached_op_draws(const deft_cached_op_t *op) {
    return op->draws;
}

deft_var_t *deft_cached_op_var(const deft_cached_op_t *op) {
    return op->var;
}

bool deft_cached_op_updates_inputs(const deft_cached_op_t *op) {
    for (int i = 0; i < op->num_inputs; i++)
        if (op->input_written[i]) return true;
    return false;
}
