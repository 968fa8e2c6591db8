/*
 * Deferred compute: recording calls, and computing what lazy arrays need.
 *
 * Computing walks back from the requested arrays through recorded nodes
 * not yet computed (without recursion), stopping at nodes whose values
 * exist: those are the leaves of a cut graph (graph.h). The cut graph is
 * memory-planned like the executor's: values that outlive the run (live
 * lazy arrays, values other recorded nodes still need) get storage of their
 * own and the rest share one arena. The run is one engine operation that
 * reads the leaves' values and writes the others.
 */
#include "core/imperative/deferred.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/base/tls.h"
#include "core/graph/executor.h"
#include "core/imperative/autograd.h"
#include "core/imperative/deferred_plan.h"
#include "core/imperative/record.h"
#include "core/op/random.h"

static DEFT_TLS_FAST bool tl_deferred;

bool deft_deferred_enabled(void) {
    return tl_deferred;
}

void deft_deferred_set(bool on, bool *prev) {
    if (prev) *prev = tl_deferred;
    tl_deferred = on;
}

/* ---- recording ---- */

/* An input the operator updates in place (BatchNorm's moving statistics) must
 * be an array with a value: it becomes an auxiliary state of an exported graph,
 * and computing the call updates it. */
static int check_recordable(const deft_op_t *op, int nin, deft_ndarray_t *const *in, int nout,
                            deft_ndarray_t *const *out) {
    for (int k = 0; k < nout; k++)
        if (out[k])
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "output %d is given, but in deferred compute mode a call is "
                                 "recorded and makes new lazy arrays: it writes into none",
                                 k);
    for (int i = 0; deft_op_mutates_any(op) && i < nin; i++)
        if (deft_op_mutates(op, nin, i) && deft_ndarray_is_lazy(in[i]))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d is a lazy array (deferred compute), which cannot be "
                                 "updated in place",
                                 i);
    return 0;
}

int deft_deferred_record(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                         deft_ndarray_t *const *in, int nout, const deft_desc_t *out_desc,
                         int nparams, const char *const *keys, const char *const *vals,
                         deft_ndarray_t **out) {
    if (check_recordable(entry->op, nin, in, nout, out)) return -1;
    deft_device_t device = nin ? in[0]->tensor.device : deft_device_cpu();
    if (entry->op->output_device && entry->op->output_device(entry->op, params, &device)) return -1;
    /* The node of the call, counted in its inputs and keeping their values, without the lock
     * (record.h says why that is safe). */
    deft_entry_t entries[DEFT_OP_MAX_INPUTS];
    deft_node_t *node;
    if (deft_record_input_entries(nin, in, entries) ||
        deft_node_new_call(entry, params, nparams, keys, vals, nin, entries,
                           deft_record_size(nin, nout), true, &node))
        return -1;
    if (deft_record_attach(node, device, out_desc) || deft_autograd_prepare_node(node) ||
        deft_record_use_inputs(node, in)) {
        deft_node_release(node);
        return -1;
    }
    /* The node's one reference goes to its last output, and each other output takes one. */
    if (nout > 1) deft_node_retain_many(node, nout - 1);
    int k = 0;
    while (k < nout &&
           deft_ndarray_new_lazy(&out_desc[k], device, (deft_entry_t){node, k}, &out[k]) == 0)
        deft_record_set_live(node, k, out[k]), k++;
    if (k == nout) {
        if (nout == 0) deft_node_release(node);
        return 0;
    }
    for (int j = k; j < nout; j++) deft_node_release(node); /* not handed out */
    for (int j = 0; j < k; j++) {
        deft_ndarray_release(out[j]);
        out[j] = NULL;
    }
    return -1;
}

int deft_deferred_find_lazy(int n, deft_ndarray_t *const *arrays) {
    for (int i = 0; i < n; i++)
        if (arrays[i] && deft_ndarray_is_lazy(arrays[i])) return i;
    return -1;
}

/* ---- computing ---- */

typedef struct run {
    atomic_int refs; /* the engine's and, until it has committed, the pusher's */
    deft_trigger_plan_t *plan;
    deft_graph_t g; /* the plan's tables over this run's nodes */
    bool training;  /* the training flag of the thread that asked for the values */
    int num_roots;
    deft_node_t **roots;    /* retained: they hold every node of the run */
    deft_tensor_t *tensors; /* per entry; only the entries the run touches are set */
    deft_storage_t *arenas[DEFT_DEVICE_SLOTS]; /* per plan arena device */
    deft_storage_t **fresh; /* per destination: storage made for a live lazy array */
    deft_ndarray_t **live;  /* per destination: that array (retained) */
    deft_ndarray_t **kept;  /* per destination: a new array for a value kept after the run */
    deft_ndarray_t **leaf;  /* per leaf value read (retained) */
    deft_var_t **reads, **writes;
    int num_reads, num_writes;
    size_t bytes;     /* that the run reads and writes */
    size_t allocated; /* bytes of this run's one allocation */
    bool warm;        /* the arena's tensors are set: the allocation is a spare (below) */
    bool arena_set;   /* make_arenas has set them */
} run_t;

static void free_run(void *arg) {
    run_t *r = arg;
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1) return;
    const deft_trigger_plan_t *p = r->plan;
    for (int d = 0; d < p->num_dest; d++) {
        deft_storage_release(r->fresh[d]);
        deft_ndarray_release(r->live[d]);
        deft_ndarray_release(r->kept[d]);
    }
    for (int l = 0; l < p->num_leaf; l++) deft_ndarray_release(r->leaf[l]);
    for (int s = 0; s < DEFT_DEVICE_SLOTS; s++) deft_storage_release(r->arenas[s]);
    for (int i = 0; i < r->num_roots; i++) deft_node_release(r->roots[i]);
    deft_trigger_plan_t *plan = r->plan;
    void *none = NULL; /* kept for the plan's next run, unless one is kept already */
    if (!atomic_compare_exchange_strong(&plan->spare_run, &none, r)) free(r);
    deft_trigger_plan_release(plan);
}

static int forward(void *arg) {
    run_t *r = arg;
    return deft_graph_forward(&r->g, r->tensors, r->training);
}

/* The tensors the run touches, for fences: leaves, destinations, the arena. */
static int touched_tensors(const run_t *r, deft_tensor_t *out) {
    const deft_trigger_plan_t *p = r->plan;
    int n = 0;
    for (int l = 0; l < p->num_leaf; l++) out[n++] = r->tensors[p->leaf[l].entry];
    for (int d = 0; d < p->num_dest; d++) out[n++] = r->tensors[p->dest[d].entry];
    for (int a = 0; a < p->num_arena; a++) out[n++] = r->tensors[p->arena[a]];
    return n;
}

/* A run on a GPU fences every value it touches, all as written: the
 * executor's finer list is not worth its bookkeeping here. */
static int run_nodes(void *arg) {
    run_t *r = arg;
    if (!deft_storage_gpu_made()) return forward(r);
    const deft_trigger_plan_t *p = r->plan;
    size_t count = (size_t)p->num_leaf + (size_t)p->num_dest + (size_t)p->num_arena + 1;
    deft_tensor_t *t = malloc(count * sizeof *t);
    deft_access_t *access = malloc(count * sizeof *access);
    if (!t || !access) {
        free(t), free(access);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred run");
    }
    int n = touched_tensors(r, t), status;
    bool on_gpu = false;
    for (int i = 0; i < n && !on_gpu; i++) on_gpu = t[i].device.type == DEFT_DEV_GPU;
    if (on_gpu) {
        deft_fence_tensors(t, n, true, access);
        /* The leaves come first: read, their values (and checks) unchanged. */
        for (int l = 0; l < p->num_leaf; l++) access[l].value = DEFT_VALUE_SAME;
        status = deft_fence_run(access, n, forward, r);
    } else {
        status = forward(r);
    }
    free(t), free(access);
    return status;
}

/* A run of plan p over the walked cut, its per-run tables in one allocation
 * (a one-node trigger is common, and a dozen mallocs cost more than computing it). */
static run_t *run_alloc(deft_trigger_plan_t *p, const deft_trigger_cut_t *cut, int nroots,
                        const deft_entry_t *roots) {
    size_t nodes = (size_t)cut->num_nodes + 1, entries = (size_t)p->types.num_entries + 1;
    size_t dest = (size_t)p->num_dest + 1, leaf = (size_t)p->num_leaf + 1;
    size_t head = (sizeof(run_t) + 15) & ~(size_t)15;
    size_t lists = dest * (sizeof(deft_storage_t *) + 2 * sizeof(deft_ndarray_t *)) +
                   leaf * sizeof(deft_ndarray_t *) + 8 * 16;
    size_t bytes = head + lists + (nodes + (size_t)nroots + 1) * sizeof(deft_node_t *) +
                   entries * sizeof(deft_tensor_t) +
                   (leaf + dest + leaf + 1) * sizeof(deft_var_t *) + 8 * 16;
    run_t *r = atomic_exchange(&p->spare_run, NULL);
    bool warm = r && r->allocated == bytes && r->arena_set;
    if (r && r->allocated != bytes) free(r), r = NULL;
    if (!r) r = malloc(bytes);
    if (!r) {
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred compute run");
        return NULL;
    }
    memset(r, 0, head + lists); /* what free_run releases; the rest is written before it is read */
    r->allocated = bytes;
    r->warm = warm;
    char *at = (char *)r + head;
    r->fresh = deft_carve(&at, dest, sizeof *r->fresh);
    r->live = deft_carve(&at, dest, sizeof *r->live);
    r->kept = deft_carve(&at, dest, sizeof *r->kept);
    r->leaf = deft_carve(&at, leaf, sizeof *r->leaf);
    at = (char *)r + head + lists;
    r->g = p->graph;
    r->g.nodes = memcpy(deft_carve(&at, nodes, sizeof(deft_node_t *)), cut->nodes,
                        (size_t)cut->num_nodes * sizeof(deft_node_t *));
    r->roots = deft_carve(&at, (size_t)nroots + 1, sizeof *r->roots);
    r->tensors = deft_carve(&at, entries, sizeof *r->tensors);
    r->reads = deft_carve(&at, leaf, sizeof *r->reads);
    r->writes = deft_carve(&at, dest + leaf + 1, sizeof *r->writes);
    atomic_init(&r->refs, 1);
    r->plan = p;
    for (int i = 0; i < nroots; i++) r->roots[r->num_roots++] = deft_node_retain(roots[i].node);
    for (int d = 0; d < p->num_dest; d++) r->live[d] = cut->live[d];
    return r;
}

/* Values that outlive the run: storage for live lazy arrays, new arrays for
 * values that recorded consumers outside the run still need or that are saved. */
static int make_destinations(run_t *r) {
    const deft_trigger_plan_t *p = r->plan;
    for (int d = 0; d < p->num_dest; d++) {
        const deft_plan_value_t *v = &p->dest[d];
        const deft_desc_t *desc = &p->types.desc[v->entry];
        deft_device_t device = p->devices[v->entry];
        if (r->live[d]) {
            if (deft_storage_new(device, v->nbytes, &r->fresh[d])) return -1;
            r->tensors[v->entry] =
                (deft_tensor_t){desc->shape, desc->dtype, device, r->fresh[d], 0};
            r->writes[r->num_writes++] = r->live[d]->var;
        } else {
            if (deft_ndarray_new(&desc->shape, desc->dtype, device, false, &r->kept[d])) return -1;
            r->tensors[v->entry] = r->kept[d]->tensor;
            r->writes[r->num_writes++] = r->kept[d]->var;
        }
    }
    r->bytes += p->own_bytes;
    return 0;
}

/* The leaves' values, kept by their records for the consumers being computed. */
static int gather_leaves(run_t *r) {
    const deft_trigger_plan_t *p = r->plan;
    for (int l = 0; l < p->num_leaf; l++) {
        const deft_plan_value_t *v = &p->leaf[l];
        const deft_node_t *node = r->g.nodes[v->node];
        deft_ndarray_t *value = deft_record_kept(deft_record_of(node), v->index);
        if (!value)
            return deft_error(DEFT_ERR_INTERNAL,
                              "a recorded call lost the value of its input (output %d of a '%s')",
                              v->index, node->op ? node->op->op->name : "variable");
        r->leaf[l] = deft_ndarray_retain(value);
        r->tensors[v->entry] = value->tensor;
        r->reads[r->num_reads++] = value->var;
        r->bytes += deft_tensor_nbytes(&value->tensor);
    }
    return 0;
}

/* A leaf that a node of the run updates in place is written by the run, not read. */
static void mark_updated_leaves(run_t *r) {
    const deft_trigger_plan_t *p = r->plan;
    const deft_graph_t *g = &r->g;
    for (int i = 0; p->mutates && i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        bool mutates = !deft_graph_is_leaf(g, i) && deft_op_mutates_any(node->op->op);
        for (int k = 0; mutates && k < node->num_inputs; k++) {
            int l = p->leaf_of[deft_graph_input_entry(g, i, k)];
            if (!deft_op_mutates(node->op->op, node->num_inputs, k) || l < 0) continue;
            deft_var_t *var = r->leaf[l]->var;
            bool read = false; /* the array may be read through other entries too */
            for (int j = r->num_reads - 1; j >= 0; j--)
                if (r->reads[j] == var) r->reads[j] = r->reads[--r->num_reads], read = true;
            if (read) r->writes[r->num_writes++] = var;
        }
    }
}

/* A run that draws random numbers writes the stream's variable: draws in push order. */
static int order_draws(run_t *r) {
    if (!r->plan->draws) return 0;
    deft_var_t *stream = deft_random_stream_var();
    if (!stream) return -1;
    r->writes[r->num_writes++] = stream;
    return 0;
}

/* The arena of each device the plan puts transient values on. */
static int make_arenas(run_t *r) {
    const deft_trigger_plan_t *p = r->plan;
    for (int s = 0; s < p->num_slots; s++)
        if (deft_storage_new(p->slot_device[s], p->memory.arena_bytes, &r->arenas[s])) return -1;
    /* The arena's tensors differ from run to run in their storage only. Set field by field,
     * they were a third of the run's set-up (32 instructions a node of a chain, callgrind): a
     * new allocation copies them whole from the plan, and the plan's spare (the last run's
     * allocation, its tables at the same places) has them already, unless that run failed
     * before it set them. */
    for (int a = 0; !r->warm && a < p->num_arena; a++)
        r->tensors[p->arena[a]] = p->tensors[p->arena[a]];
    for (int a = 0; a < p->num_arena; a++)
        r->tensors[p->arena[a]].storage = r->arenas[p->arena_slot[a]];
    r->arena_set = true;
    return 0;
}

/* An array without history holding entry e's value after the run (a new reference). */
static int value_of(const run_t *r, int e, deft_ndarray_t **out) {
    const deft_trigger_plan_t *p = r->plan;
    int d = p->dest_of[e], l = p->leaf_of[e];
    if (d >= 0 && r->kept[d]) {
        *out = deft_ndarray_retain(r->kept[d]);
        return 0;
    }
    if (d >= 0) return deft_ndarray_alias(r->live[d], out);
    if (l >= 0) {
        *out = deft_ndarray_retain(r->leaf[l]);
        return 0;
    }
    return deft_error(DEFT_ERR_INTERNAL, "a value saved for backward was not kept");
}

/* A node recorded for autograd keeps what its gradient reads. */
static int save_for_backward(const run_t *r, int i) {
    const deft_graph_t *g = &r->g;
    const deft_node_t *node = g->nodes[i];
    deft_record_t *rec = deft_record_of(node);
    int status = 0;
    for (int k = 0; status == 0 && k < node->num_inputs; k++)
        if (rec->save_in & (1ull << k))
            status = value_of(r, deft_graph_input_entry(g, i, k), &rec->saved[k]);
    for (int k = 0; status == 0 && k < node->num_outputs; k++)
        if (rec->save_out & (1ull << k))
            status = value_of(r, g->row_ptr[i] + k, &rec->saved[node->num_inputs + k]);
    return status;
}

/* After the push: the records say what is computed and kept, live arrays get storage. */
static int commit(run_t *r) {
    const deft_trigger_plan_t *p = r->plan;
    const deft_graph_t *g = &r->g;
    int status = 0;
    for (int d = 0; d < p->num_dest; d++) {
        const deft_plan_value_t *v = &p->dest[d];
        deft_record_t *rec = deft_record_of(g->nodes[v->node]);
        bool needed_later = v->why & DEFT_OUT_NEEDED;
        if (r->live[d]) {
            __atomic_store_n(&r->live[d]->tensor.storage, deft_storage_retain(r->fresh[d]),
                             __ATOMIC_RELEASE);
            if (needed_later && !status) status = deft_record_keep_alias(rec, v->index, r->live[d]);
        } else if (needed_later) {
            deft_record_keep(rec, v->index, deft_ndarray_retain(r->kept[d]));
        }
    }
    for (int i = 0; status == 0 && p->saves && i < g->num_nodes; i++) {
        const deft_record_t *rec = deft_record_of(g->nodes[i]);
        if (!g->leaf[i] && rec->requires_grad && (rec->save_in | rec->save_out))
            status = save_for_backward(r, i);
    }
    for (int i = 0; i < g->num_nodes; i++) {
        if (g->leaf[i]) continue;
        deft_record_of(g->nodes[i])->computed = true;
        deft_record_drop_inputs(g->nodes[i]);
    }
    return status;
}

static int push(run_t *r) {
    deft_engine_op_desc_t desc = {.fn = run_nodes,
                                  .free_ctx = free_run,
                                  .ctx = r,
                                  .reads = r->reads,
                                  .num_reads = r->num_reads,
                                  .writes = r->writes,
                                  .num_writes = r->num_writes,
                                  .name = "DeferredCompute",
                                  .origin = "deferred compute",
                                  .small = r->bytes < 64 * 1024 && !r->plan->blocking,
                                  .bytes = r->bytes,
                                  .never_block = true};
    return deft_engine_push(&desc);
}

/* Under the lock: the uncomputed nodes behind the roots, as one run of their shape's plan. */
static int run_roots(int count, const deft_entry_t *roots) {
    deft_trigger_plan_t *p;
    deft_trigger_cut_t cut;
    int status = deft_trigger_plan_get(count, roots, &cut, &p);
    if (status) return status > 0 ? 0 : -1;
    run_t *r = run_alloc(p, &cut, count, roots);
    if (!r) {
        for (int d = 0; d < p->num_dest; d++) deft_ndarray_release(cut.live[d]);
        deft_trigger_plan_release(p);
        return -1;
    }
    r->training = deft_op_training();
    status = make_destinations(r);
    if (!status) status = gather_leaves(r);
    if (!status) mark_updated_leaves(r);
    if (!status) status = order_draws(r);
    if (!status) status = make_arenas(r);
    if (status) {
        free_run(r);
        return status;
    }
    /* The run may finish (and be freed by the engine) during the push: hold it till committed. */
    atomic_init(&r->refs, 2);
    status = push(r) ? -1 : commit(r);
    free_run(r);
    return status;
}

/* Under the lock: the uncomputed nodes behind the arrays. */
static int compute_locked(int n, deft_ndarray_t *const *arrays) {
    deft_entry_t roots[64], *heap = NULL, *entries = roots;
    int count = 0;
    if (n > 64 && !(entries = heap = malloc((size_t)n * sizeof *heap)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred compute run");
    for (int i = 0; i < n; i++) {
        const deft_record_t *rec = arrays[i] ? deft_record_of(arrays[i]->entry.node) : NULL;
        if (arrays[i] && deft_ndarray_is_lazy(arrays[i]) && rec && !rec->computed)
            entries[count++] = arrays[i]->entry;
    }
    int status = count ? run_roots(count, entries) : 0;
    free(heap);
    return status;
}

int deft_deferred_compute(int n, deft_ndarray_t *const *arrays) {
    int lazy = 0;
    while (lazy < n && (!arrays[lazy] || !deft_ndarray_is_lazy(arrays[lazy]))) lazy++;
    if (lazy == n) return 0; /* the common case costs no lock */
    bool walking;
    deft_record_lock();
    deft_record_walk_begin(&walking);
    int status = compute_locked(n, arrays);
    deft_record_walk_end(walking);
    deft_record_unlock();
    return status;
}
