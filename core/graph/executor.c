#include "core/graph/executor.h"
#include "core/base/profiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/graph/place_device.h"
#include "core/graph/subgraph.h"

/* Where a plan's values live when the inputs are on given devices: each
 * node runs on its placed device ("__device__"), else where its parameters
 * put it (copies, creation), else where its first input is. */
typedef struct placement {
    deft_device_t *inputs;  /* the devices of the inputs it was made for */
    deft_device_t *devices; /* per entry */
    deft_storage_t *arenas[DEFT_DEVICE_SLOTS];
    deft_tensor_t *tensors; /* per entry: arena entries filled once, the rest per run */
    struct placement *next;
} placement_t;

/* Everything that depends on the input signature, made once and kept. */
typedef struct plan_entry {
    deft_desc_t *signature; /* one per input */
    deft_graph_types_t types;
    deft_memory_plan_t plan;
    placement_t *placements;
    struct plan_entry *next;
} plan_entry_t;

struct deft_cached_op {
    atomic_int refcount;
    deft_graph_t *g;
    bool plan_memory;
    bool blocking; /* a node waits for a host callback: runs never go inline */
    int num_inputs;
    int *input_nodes;          /* node ids: arguments, then auxiliary states */
    int *input_of_node;        /* node id -> input position, -1 for operators */
    int *output_entries;       /* entry ids of the graph outputs */
    bool *input_written;       /* auxiliary states are updated in place */
    deft_var_t *var;           /* runs share the arena: one at a time */
    deft_subgraph_t *subgraph; /* made when a call is first recorded as one node */
    pthread_mutex_t lock;      /* the plan list */
    plan_entry_t *plans, *last;
};

static int node_entry(const deft_graph_t *g, const deft_entry_t *e) {
    return deft_graph_entry_id(g, deft_graph_node_id(g, e->node), e->index);
}

int deft_cached_op_new(const deft_symbol_t *sym, bool plan_memory, deft_cached_op_t **out) {
    if (deft_symbol_check_composed(sym, "sym")) return -1;
    deft_cached_op_t *op = calloc(1, sizeof *op);
    if (!op) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an executor");
    atomic_init(&op->refcount, 1);
    pthread_mutex_init(&op->lock, NULL);
    op->plan_memory = plan_memory;
    if (deft_graph_build(sym->num_outputs, sym->outputs, &op->g)) {
        deft_cached_op_release(op);
        return -1;
    }
    const deft_graph_t *g = op->g;
    op->blocking = deft_graph_has_blocking(g);
    size_t n = (size_t)g->num_nodes + 1;
    op->input_nodes = malloc(n * sizeof(int));
    op->input_of_node = malloc(n * sizeof(int));
    op->input_written = calloc(n, sizeof(bool));
    op->output_entries = malloc(((size_t)g->num_outputs + 1) * sizeof(int));
    op->var = deft_var_new();
    if (!op->input_nodes || !op->input_of_node || !op->input_written || !op->output_entries ||
        !op->var) {
        deft_cached_op_release(op);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an executor");
    }
    for (int pass = 0; pass < 2; pass++) /* arguments first, then auxiliary states */
        for (int i = 0; i < g->num_nodes; i++) {
            if (pass == 0) op->input_of_node[i] = -1;
            if (g->nodes[i]->op || deft_graph_is_auxiliary(g, g->nodes[i]) != (pass == 1)) continue;
            op->input_of_node[i] = op->num_inputs;
            op->input_written[op->num_inputs] = pass == 1;
            op->input_nodes[op->num_inputs++] = i;
        }
    for (int o = 0; o < g->num_outputs; o++) op->output_entries[o] = node_entry(g, &g->outputs[o]);
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
    deft_graph_types_free(&p->types);
    deft_memory_plan_free(&p->plan);
    free(p);
}

void deft_cached_op_release(deft_cached_op_t *op) {
    if (!op || atomic_fetch_sub_explicit(&op->refcount, 1, memory_order_acq_rel) != 1) return;
    while (op->plans) {
        plan_entry_t *next = op->plans->next;
        free_plan(op->plans);
        op->plans = next;
    }
    deft_subgraph_release(op->subgraph);
    deft_graph_free(op->g);
    deft_var_release(op->var);
    free(op->input_nodes), free(op->input_of_node), free(op->input_written),
        free(op->output_entries);
    pthread_mutex_destroy(&op->lock);
    free(op);
}

int deft_cached_op_num_inputs(const deft_cached_op_t *op) {
    return op->num_inputs;
}

const char *deft_cached_op_input_name(const deft_cached_op_t *op, int i) {
    return op->g->names[op->input_nodes[i]];
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
                                  k, g->names[i]);
    return 0;
}

static int make_plan(deft_cached_op_t *op, int nin, const deft_desc_t *in, plan_entry_t **out) {
    const deft_graph_t *g = op->g;
    plan_entry_t *p = calloc(1, sizeof *p);
    deft_desc_t *given = calloc((size_t)g->num_nodes + 1, sizeof *given);
    bool *known = calloc((size_t)g->num_nodes + 1, sizeof *known);
    int status = p && given && known ? 0 : -1;
    if (status == 0 && !(p->signature = malloc(((size_t)nin + 1) * sizeof *p->signature)))
        status = -1;
    if (status) {
        free(p), free(given), free(known);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a plan");
    }
    for (int i = 0; i < nin; i++) {
        p->signature[i] = in[i];
        given[op->input_nodes[i]] = p->signature[i];
        known[op->input_nodes[i]] = true;
    }
    status = deft_graph_infer(g, given, known, &p->types);
    free(given), free(known);
    if (status == 0) status = incomplete(op, &p->types);
    if (status == 0) status = deft_plan_memory(g, &p->types, op->plan_memory, NULL, &p->plan);
    if (status) {
        free_plan(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* The plan for these inputs: cached, or made now. */
static int find_plan(deft_cached_op_t *op, int nin, const deft_desc_t *in, plan_entry_t **out) {
    pthread_mutex_lock(&op->lock);
    plan_entry_t *p = op->plans;
    while (p && !same_signature(p, nin, in)) p = p->next;
    int status = 0;
    if (!p && (status = make_plan(op, nin, in, &p)) == 0) {
        p->next = op->plans;
        op->plans = p;
    }
    if (status == 0) op->last = p;
    pthread_mutex_unlock(&op->lock);
    *out = p;
    return status;
}

/* The device node i runs on, its inputs' entries already placed. */
static int node_device(const deft_graph_t *g, int i, const deft_device_t *devices,
                       deft_device_t *out) {
    const deft_node_t *node = g->nodes[i];
    const deft_op_t *op = node->op->op;
    bool placed;
    int type = 0, id = 0;
    char what[160];
    snprintf(what, sizeof what, "the device of node '%s' (%s)", g->names[i], op->name);
    if (deft_node_placed_device(node, &placed, &type, &id)) return -1;
    if (placed && type == DEFT_DEV_CPU) id = 0; /* cpu(n): the one host memory */
    if (placed) return deft_device_check(type, id, what, out);
    if (op->output_device) return op->output_device(op, node->params, out);
    *out = node->num_inputs ? devices[deft_graph_input_entry(g, i, 0)] : deft_device_cpu();
    return 0;
}

/* Every entry's device, for inputs on `inputs`; an operator reading an
 * input from another device (an unplaced graph) is an error. */
static int entry_devices(const deft_cached_op_t *op, const deft_device_t *inputs,
                         deft_device_t *devices) {
    const deft_graph_t *g = op->g;
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
                                  g->names[i], g->nodes[i]->op->op->name,
                                  deft_device_format(dev, a, sizeof a), k,
                                  deft_device_format(from, b, sizeof b));
        }
        for (int k = 0; k < g->nodes[i]->num_outputs; k++) devices[g->row_ptr[i] + k] = dev;
    }
    return 0;
}

static int make_placement(const deft_cached_op_t *op, const plan_entry_t *p,
                          const deft_device_t *inputs, placement_t **out) {
    size_t entries = (size_t)p->types.num_entries + 1;
    placement_t *pl = calloc(1, sizeof *pl);
    if (pl) {
        pl->inputs = malloc(((size_t)op->num_inputs + 1) * sizeof *pl->inputs);
        pl->devices = calloc(entries, sizeof *pl->devices);
        pl->tensors = calloc(entries, sizeof *pl->tensors);
    }
    if (!pl || !pl->inputs || !pl->devices || !pl->tensors) {
        free_placement(pl);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a placement");
    }
    for (int i = 0; i < op->num_inputs; i++) pl->inputs[i] = inputs[i];
    if (entry_devices(op, inputs, pl->devices) ||
        deft_plan_arenas(&p->plan, &p->types, pl->devices, pl->arenas, pl->tensors)) {
        free_placement(pl);
        return -1;
    }
    *out = pl;
    return 0;
}

/* The placement of plan p for these input devices: cached, or made now. */
static int find_placement(deft_cached_op_t *op, plan_entry_t *p, const deft_device_t *inputs,
                          placement_t **out) {
    pthread_mutex_lock(&op->lock);
    placement_t *pl = p->placements;
    for (; pl; pl = pl->next) {
        bool same = true;
        for (int i = 0; same && i < op->num_inputs; i++)
            same = deft_device_equal(pl->inputs[i], inputs[i]);
        if (same) break;
    }
    int status = 0;
    if (!pl && (status = make_placement(op, p, inputs, &pl)) == 0) {
        pl->next = p->placements;
        p->placements = pl;
    }
    pthread_mutex_unlock(&op->lock);
    *out = pl;
    return status;
}

int deft_cached_op_last_plan(deft_cached_op_t *op, deft_memory_plan_t *out) {
    pthread_mutex_lock(&op->lock);
    plan_entry_t *p = op->last;
    if (p) *out = p->plan;
    pthread_mutex_unlock(&op->lock);
    if (!p) return deft_error(DEFT_ERR_VALUE, "the executor has not run yet");
    return 0;
}

int deft_graph_forward(const deft_graph_t *g, deft_tensor_t *t) {
    deft_tensor_t in[DEFT_OP_MAX_INPUTS];
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        if (deft_graph_is_leaf(g, i)) continue;
        for (int k = 0; k < node->num_inputs; k++) in[k] = t[deft_graph_input_entry(g, i, k)];
        const deft_op_t *op = node->op->op;
        deft_device_t dev = node->num_outputs ? t[g->row_ptr[i]].device : deft_device_cpu();
        deft_forward_fn forward = dev.type == DEFT_DEV_GPU ? op->forward_gpu : op->forward;
        if (!forward)
            return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "node '%s' (%s) has no GPU kernel",
                              g->names[i], op->name);
        double start = deft_profiling(DEFT_PROF_SYMBOLIC) ? deft_profiler_now() : 0;
        void *timer = start != 0 ? deft_device_timer_start(dev, op->name) : NULL;
        int status =
            forward(op, node->params, node->num_inputs, in, node->num_outputs, &t[g->row_ptr[i]]);
        if (timer) deft_device_timer_stop(dev, timer);
        if (status) {
            char detail[DEFT_ERROR_MAX];
            snprintf(detail, sizeof detail, "%s", deft_error_message());
            return deft_error_restore(deft_error_kind(), detail);
        }
        if (start != 0)
            deft_profiler_op_span("graph", op->name, deft_profiler_device_name(dev), start,
                                  deft_profiler_now());
    }
    return 0;
}

/* ---- one run ---- */

typedef struct run {
    deft_cached_op_t *op;
    plan_entry_t *plan;
    placement_t *place;
    int nin, nout;
    deft_ndarray_t **arrays; /* inputs, then outputs; retained */
} run_t;

/* Run the graph with per-entry tensors t (the plan's arena entries filled in)
 * on input and output tensors. */
static int run_on(const deft_cached_op_t *op, deft_tensor_t *t, int nin, const deft_tensor_t *in,
                  int nout, const deft_tensor_t *out) {
    const deft_graph_t *g = op->g;
    /* Outputs from last to first, so an entry listed twice lands in its first
     * array; inputs after outputs, so an output that is an input reads the input. */
    for (int o = nout - 1; o >= 0; o--) t[op->output_entries[o]] = out[o];
    for (int i = 0; i < nin; i++) t[g->row_ptr[op->input_nodes[i]]] = in[i];
    if (deft_graph_forward(g, t)) return -1;
    /* An output that is an input, or the same entry twice: copy what the walk did not write. */
    for (int o = 0; o < nout; o++) {
        const deft_entry_t *e = &g->outputs[o];
        const deft_tensor_t *src = NULL;
        int node = deft_graph_node_id(g, e->node);
        if (!e->node->op) src = &in[op->input_of_node[node]];
        for (int p = 0; p < o && !src; p++)
            if (op->output_entries[p] == op->output_entries[o]) src = &out[p];
        if (src && deft_device_copy(deft_tensor_data(&out[o]), out[o].device, deft_tensor_data(src),
                                    src->device, deft_tensor_nbytes(&out[o])))
            return -1;
    }
    return 0;
}

static int run_arrays(void *arg) {
    const run_t *r = arg;
    deft_tensor_t in[DEFT_OP_MAX_INPUTS * 4], out[DEFT_OP_MAX_OUTPUTS * 4];
    for (int i = 0; i < r->nin; i++) in[i] = r->arrays[i]->tensor;
    for (int o = 0; o < r->nout; o++) out[o] = r->arrays[r->nin + o]->tensor;
    return run_on(r->op, r->place->tensors, r->nin, in, r->nout, out);
}

/* Inputs (read, or written when the graph writes them), outputs and arenas. */
static int run_accesses(const run_t *r, deft_access_t *access) {
    int n = 0;
    for (int i = 0; i < r->nin; i++)
        access[n++] = (deft_access_t){r->arrays[i]->tensor.storage, r->op->input_written[i]};
    for (int o = 0; o < r->nout; o++)
        access[n++] = (deft_access_t){r->arrays[r->nin + o]->tensor.storage, true};
    for (int s = 0; s < DEFT_DEVICE_SLOTS; s++)
        access[n++] = (deft_access_t){r->place->arenas[s], true};
    return n;
}

static int run_graph(void *arg) {
    if (!deft_storage_gpu_made()) return run_arrays(arg);
    deft_access_t access[DEFT_OP_MAX_INPUTS * 4 + DEFT_OP_MAX_OUTPUTS * 4 + DEFT_DEVICE_SLOTS];
    int n = run_accesses(arg, access);
    return deft_fence_any_gpu(access, n) ? deft_fence_run(access, n, run_arrays, arg)
                                         : run_arrays(arg);
}

static void free_run(void *arg) {
    run_t *r = arg;
    for (int i = 0; i < r->nin + r->nout; i++) deft_ndarray_release(r->arrays[i]);
    deft_cached_op_release(r->op);
    free(r->arrays);
    free(r);
}

static int check_input_count(const deft_cached_op_t *op, int nin) {
    if (nin != op->num_inputs)
        return deft_error(DEFT_ERR_VALUE,
                          "got %d inputs, expected %d (the arguments, then the "
                          "auxiliary states)",
                          nin, op->num_inputs);
    return 0;
}

static int prepare_outputs(const deft_cached_op_t *op, const plan_entry_t *p,
                           const placement_t *place, deft_ndarray_t **out, run_t *r) {
    for (int o = 0; o < op->g->num_outputs; o++) {
        const deft_desc_t *want = &p->types.desc[op->output_entries[o]];
        deft_ndarray_t *given = out[o];
        if (given && (!deft_shape_equal(&given->tensor.shape, &want->shape) ||
                      given->tensor.dtype != want->dtype)) {
            char have[DEFT_SHAPE_STR_MAX], expect[DEFT_SHAPE_STR_MAX];
            return deft_error(DEFT_ERR_VALUE, "output %d has shape %s and dtype %s, expected %s %s",
                              o, deft_shape_format(&given->tensor.shape, have, sizeof have),
                              deft_dtype_name(given->tensor.dtype),
                              deft_shape_format(&want->shape, expect, sizeof expect),
                              deft_dtype_name(want->dtype));
        }
        if (given)
            r->arrays[r->nin + o] = deft_ndarray_retain(given);
        else if (deft_ndarray_new(&want->shape, want->dtype, place->devices[op->output_entries[o]],
                                  false, &r->arrays[r->nin + o]))
            return -1;
    }
    return 0;
}

int deft_cached_op_invoke(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                          deft_ndarray_t **out) {
    const deft_graph_t *g = op->g;
    plan_entry_t *plan;
    deft_desc_t sig[DEFT_OP_MAX_INPUTS * 4];
    deft_device_t devices[DEFT_OP_MAX_INPUTS * 4];
    placement_t *place;
    if (check_input_count(op, nin)) return -1;
    for (int i = 0; i < nin; i++) {
        sig[i] = (deft_desc_t){in[i]->tensor.shape, in[i]->tensor.dtype};
        devices[i] = in[i]->tensor.device;
    }
    if (find_plan(op, nin, sig, &plan) || find_placement(op, plan, devices, &place)) return -1;
    if (*nout < g->num_outputs)
        return deft_error(DEFT_ERR_VALUE, "the graph has %d outputs, but there is room for %d",
                          g->num_outputs, *nout);
    run_t *r = calloc(1, sizeof *r);
    deft_ndarray_t **arrays = calloc((size_t)(nin + g->num_outputs + 1), sizeof *arrays);
    if (!r || !arrays) {
        free(r), free(arrays);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an executor run");
    }
    *r = (run_t){op, plan, place, nin, g->num_outputs, arrays};
    for (int i = 0; i < nin; i++) arrays[i] = deft_ndarray_retain(in[i]);
    atomic_fetch_add(&op->refcount, 1);
    if (prepare_outputs(op, plan, place, out, r)) {
        free_run(r);
        return -1;
    }
    deft_var_t *reads[DEFT_OP_MAX_INPUTS * 4], *writes[DEFT_OP_MAX_OUTPUTS * 4];
    int nreads = 0, nwrites = 0;
    if (nin > DEFT_OP_MAX_INPUTS * 4 || g->num_outputs + nin + 1 > DEFT_OP_MAX_OUTPUTS * 4) {
        free_run(r);
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "too many inputs and outputs for one run");
    }
    for (int i = 0; i < nin; i++) {
        if (op->input_written[i])
            writes[nwrites++] = in[i]->var;
        else
            reads[nreads++] = in[i]->var;
    }
    for (int o = 0; o < g->num_outputs; o++) writes[nwrites++] = arrays[nin + o]->var;
    writes[nwrites++] = op->var;
    deft_ndarray_t *created[DEFT_OP_MAX_OUTPUTS * 4];
    for (int o = 0; o < g->num_outputs; o++)
        created[o] = out[o] ? NULL : deft_ndarray_retain(arrays[nin + o]);
    deft_engine_op_desc_t desc = {.fn = run_graph,
                                  .free_ctx = free_run,
                                  .ctx = r,
                                  .reads = reads,
                                  .num_reads = nreads,
                                  .writes = writes,
                                  .num_writes = nwrites,
                                  .name = "CachedOp",
                                  .origin = "DeftCachedOpInvoke",
                                  .small = plan->plan.arena_bytes < 64 * 1024 && !op->blocking};
    if (deft_engine_push(&desc)) {
        for (int o = 0; o < g->num_outputs; o++) deft_ndarray_release(created[o]);
        return -1;
    }
    for (int i = 0; i < nin; i++)
        if (op->input_written[i]) deft_ndarray_touch(in[i]);
    for (int o = 0; o < g->num_outputs; o++) {
        if (out[o]) deft_ndarray_touch(out[o]);
        if (!out[o]) out[o] = created[o];
    }
    *nout = g->num_outputs;
    return 0;
}

int deft_cached_op_infer(deft_cached_op_t *op, int nin, const deft_desc_t *in, int *nout,
                         deft_desc_t *out) {
    plan_entry_t *p;
    if (nin != op->num_inputs)
        return deft_error(DEFT_ERR_VALUE, "got %d inputs, expected %d", nin, op->num_inputs);
    if (find_plan(op, nin, in, &p)) return -1;
    *nout = op->g->num_outputs;
    for (int o = 0; o < op->g->num_outputs; o++) out[o] = p->types.desc[op->output_entries[o]];
    return 0;
}

int deft_cached_op_forward(deft_cached_op_t *op, int nin, const deft_tensor_t *in, int nout,
                           const deft_tensor_t *out) {
    deft_desc_t sig[DEFT_OP_MAX_INPUTS * 4];
    deft_device_t devices[DEFT_OP_MAX_INPUTS * 4];
    for (int i = 0; i < nin && i < DEFT_OP_MAX_INPUTS * 4; i++) {
        sig[i] = (deft_desc_t){in[i].shape, in[i].dtype};
        devices[i] = in[i].device;
    }
    plan_entry_t *p;
    placement_t *place;
    if (nin != op->num_inputs || nout != op->g->num_outputs)
        return deft_error(DEFT_ERR_INTERNAL,
                          "a graph run with %d inputs and %d outputs, not %d, %d", nin, nout,
                          op->num_inputs, op->g->num_outputs);
    if (find_plan(op, nin, sig, &p) || find_placement(op, p, devices, &place)) return -1;
    /* Its own arenas and entry table: runs of one graph as a node may overlap. */
    int entries = p->types.num_entries;
    deft_storage_t *arenas[DEFT_DEVICE_SLOTS];
    deft_tensor_t *t = malloc(((size_t)entries + 1) * sizeof *t);
    if (!t) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph run");
    memcpy(t, place->tensors, (size_t)entries * sizeof *t);
    if (deft_plan_arenas(&p->plan, &p->types, place->devices, arenas, t)) {
        free(t);
        return -1;
    }
    int status = run_on(op, t, nin, in, nout, out);
    deft_plan_arenas_release(arenas);
    free(t);
    return status;
}

int deft_cached_op_subgraph(deft_cached_op_t *op, deft_subgraph_t **out) {
    pthread_mutex_lock(&op->lock);
    int status = 0;
    if (!op->subgraph) {
        deft_symbol_t *sym;
        status = deft_symbol_from_entries(op->g->num_outputs, op->g->outputs, &sym);
        if (status == 0) status = deft_subgraph_new(sym, &op->subgraph);
        if (status == 0) deft_symbol_free(sym);
    }
    *out = op->subgraph;
    pthread_mutex_unlock(&op->lock);
    return status;
}

bool deft_cached_op_updates_inputs(const deft_cached_op_t *op) {
    for (int i = 0; i < op->num_inputs; i++)
        if (op->input_written[i]) return true;
    return false;
}
