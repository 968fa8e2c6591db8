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
#include "core/imperative/record.h"

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

/* Under the lock: the node of a call, counted in its inputs and keeping their values. */
static int record_node(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                       deft_ndarray_t *const *in, int nout, const deft_desc_t *out_desc,
                       int nparams, const char *const *keys, const char *const *vals,
                       deft_device_t device, deft_node_t **out) {
    deft_entry_t entries[DEFT_OP_MAX_INPUTS];
    deft_node_t *node;
    if (deft_record_input_entries(nin, in, entries) ||
        deft_node_new_call(entry, params, nparams, keys, vals, nin, entries,
                           deft_record_size(nin, nout), &node))
        return -1;
    if (deft_record_attach(node, device, out_desc) || deft_autograd_prepare_node(node)) {
        deft_node_release(node);
        return -1;
    }
    for (int i = 0; i < nin; i++) {
        if (deft_record_use(&entries[i], deft_ndarray_is_lazy(in[i]) ? NULL : in[i])) {
            for (int j = 0; j < i; j++) deft_record_of(entries[j].node)->pending--;
            deft_node_release(node);
            return -1;
        }
    }
    deft_record_of(node)->holds_inputs = true;
    *out = node;
    return 0;
}

int deft_deferred_record(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                         deft_ndarray_t *const *in, int nout, const deft_desc_t *out_desc,
                         int nparams, const char *const *keys, const char *const *vals,
                         deft_ndarray_t **out) {
    if (check_recordable(entry->op, nin, in, nout, out)) return -1;
    deft_device_t device = nin ? in[0]->tensor.device : deft_device_cpu();
    if (entry->op->output_device && entry->op->output_device(entry->op, params, &device)) return -1;
    deft_node_t *node;
    deft_record_lock();
    int status =
        record_node(entry, params, nin, in, nout, out_desc, nparams, keys, vals, device, &node);
    if (status) {
        deft_record_unlock();
        return -1;
    }
    for (int k = 0; status == 0 && k < nout; k++) {
        deft_entry_t produced = {deft_node_retain(node), k};
        if ((status = deft_ndarray_new_lazy(&out_desc[k], device, produced, &out[k])) != 0) {
            deft_node_release(node);
            for (int j = 0; j < k; j++) {
                deft_record_set_live(node, j, NULL);
                deft_ndarray_release(out[j]);
                out[j] = NULL;
            }
        } else {
            deft_record_set_live(node, k, out[k]);
        }
    }
    deft_node_release(node); /* the lazy arrays hold it now */
    deft_record_unlock();
    return status;
}

int deft_deferred_find_lazy(int n, deft_ndarray_t *const *arrays) {
    for (int i = 0; i < n; i++)
        if (arrays[i] && deft_ndarray_is_lazy(arrays[i])) return i;
    return -1;
}

/* ---- computing ---- */

typedef struct run {
    atomic_int refs; /* the engine's and, until it has committed, the pusher's */
    deft_graph_t *g;
    deft_graph_types_t types;
    deft_memory_plan_t plan;
    deft_storage_t *arenas[DEFT_DEVICE_SLOTS]; /* one per device with transient values */
    deft_tensor_t *tensors;                    /* per entry */
    int *consumers;          /* per node: input slots of the run's nodes reading it */
    deft_storage_t **fresh;  /* per entry: storage made for a live lazy array */
    deft_ndarray_t **live;   /* per entry: that array (retained) */
    deft_ndarray_t **values; /* per entry: the array read (leaves) or written (kept) */
    deft_var_t **reads, **writes;
    bool *pinned;  /* per entry: lives outside the arena */
    bool training; /* the training flag of the thread that asked for the values */
    int num_reads, num_writes;
    /* every per-entry and per-node table above follows, in the run's allocation */
} run_t;

static bool is_computed(const deft_node_t *node, void *ctx) {
    (void)ctx;
    const deft_record_t *rec = deft_record_of(node);
    return !rec || rec->computed;
}

static void free_run(void *arg) {
    run_t *r = arg;
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1) return;
    int entries = r->g ? deft_graph_num_entries(r->g) : 0;
    for (int e = 0; e < entries; e++) {
        if (r->fresh) deft_storage_release(r->fresh[e]);
        if (r->live) deft_ndarray_release(r->live[e]);
        if (r->values) deft_ndarray_release(r->values[e]);
    }
    deft_graph_free(r->g);
    deft_memory_plan_free(&r->plan);
    deft_plan_arenas_release(r->arenas);
    free(r);
}

static int forward(void *arg) {
    run_t *r = arg;
    return deft_graph_forward(r->g, r->tensors, r->training);
}

/* A run on a GPU fences every value it touches, all as written: the
 * executor's finer list is not worth its bookkeeping here. */
static int run_nodes(void *arg) {
    run_t *r = arg;
    if (!deft_storage_gpu_made()) return forward(r);
    int entries = deft_graph_num_entries(r->g);
    bool on_gpu = false;
    for (int e = 0; e < entries && !on_gpu; e++) on_gpu = r->tensors[e].device.type == DEFT_DEV_GPU;
    if (!on_gpu) return forward(r);
    deft_access_t *access = malloc((size_t)entries * sizeof *access);
    if (!access) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred run");
    deft_fence_tensors(r->tensors, entries, true, access);
    int status = deft_fence_run(access, entries, forward, r);
    free(access);
    return status;
}

/* Carve `count` items of `size` bytes from *at (aligned for any of them). */
static void *carve(char **at, size_t count, size_t size) {
    void *p = *at;
    *at += (count * size + 15) & ~(size_t)15;
    return p;
}

/* A run over `g` (taken over) with all its tables in one zeroed allocation: a
 * one-node trigger is common, and a dozen mallocs cost more than computing it. */
static run_t *run_alloc(deft_graph_t *g) {
    size_t nodes = (size_t)g->num_nodes + 1, entries = (size_t)deft_graph_num_entries(g) + 1;
    size_t per_entry = sizeof(deft_desc_t) + sizeof(bool) + sizeof(deft_tensor_t) +
                       sizeof(deft_storage_t *) + 2 * sizeof(deft_ndarray_t *) +
                       2 * sizeof(deft_var_t *) + sizeof(bool);
    size_t head = (sizeof(run_t) + 15) & ~(size_t)15;
    run_t *r = calloc(1, head + entries * per_entry + nodes * sizeof(int) + 12 * 16);
    if (!r) {
        deft_graph_free(g);
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred compute run");
        return NULL;
    }
    atomic_init(&r->refs, 1);
    r->g = g;
    char *at = (char *)r + head;
    r->types.num_entries = (int)entries - 1;
    r->types.desc = carve(&at, entries, sizeof *r->types.desc);
    r->types.known = carve(&at, entries, sizeof *r->types.known);
    r->tensors = carve(&at, entries, sizeof *r->tensors);
    r->consumers = carve(&at, nodes, sizeof *r->consumers);
    r->fresh = carve(&at, entries, sizeof *r->fresh);
    r->live = carve(&at, entries, sizeof *r->live);
    r->values = carve(&at, entries, sizeof *r->values);
    r->reads = carve(&at, entries, sizeof *r->reads);
    r->writes = carve(&at, entries, sizeof *r->writes);
    r->pinned = carve(&at, entries, sizeof *r->pinned);
    return r;
}

/* Shapes and dtypes come from the records (known since recording); consumers
 * are counted; values that nodes recorded for autograd keep are pinned. */
static void describe_entries(run_t *r) {
    const deft_graph_t *g = r->g;
    bool *pinned = r->pinned;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        for (int k = 0; k < node->num_outputs; k++) {
            r->types.desc[g->row_ptr[i] + k] = rec ? rec->desc[k] : (deft_desc_t){0};
            r->types.known[g->row_ptr[i] + k] = true;
        }
        if (deft_graph_is_leaf(g, i)) continue;
        for (int k = 0; k < node->num_inputs; k++) {
            r->consumers[deft_graph_entry_node(g, deft_graph_input_entry(g, i, k))]++;
            if (rec->save_in & (1ull << k)) pinned[deft_graph_input_entry(g, i, k)] = true;
        }
        for (int k = 0; k < node->num_outputs; k++)
            if (rec->save_out & (1ull << k)) pinned[g->row_ptr[i] + k] = true;
    }
}

/* Values that outlive the run: storage for live lazy arrays, new arrays for
 * values that recorded consumers outside this run still need. */
static int make_destinations(run_t *r) {
    const deft_graph_t *g = r->g;
    bool *pinned = r->pinned;
    for (int i = 0; i < g->num_nodes; i++) {
        if (deft_graph_is_leaf(g, i)) continue;
        const deft_record_t *rec = deft_record_of(g->nodes[i]);
        bool needed_later = rec->pending > r->consumers[i];
        for (int k = 0; k < rec->num_outputs; k++) {
            int e = g->row_ptr[i] + k;
            const deft_desc_t *d = &rec->desc[k];
            deft_ndarray_t *live = rec->live[k] ? deft_ndarray_try_retain(rec->live[k]) : NULL;
            size_t nbytes; /* checked when recorded: this cannot fail, but says so */
            if (deft_shape_nbytes(&d->shape, deft_dtype_size(d->dtype), &nbytes)) return -1;
            if (live) {
                r->live[e] = live;
                if (deft_storage_new(rec->device, nbytes, &r->fresh[e])) return -1;
                r->tensors[e] = (deft_tensor_t){d->shape, d->dtype, rec->device, r->fresh[e], 0};
                r->writes[r->num_writes++] = live->var;
            } else if (needed_later || pinned[e]) { /* pinned here: saved for backward */
                if (deft_ndarray_new(&d->shape, d->dtype, rec->device, false, &r->values[e]))
                    return -1;
                r->tensors[e] = r->values[e]->tensor;
                r->writes[r->num_writes++] = r->values[e]->var;
            }
            pinned[e] = pinned[e] || live || needed_later;
        }
    }
    return 0;
}

/* The leaves' values, kept by their records for the consumers being computed. */
static void gather_leaves(run_t *r) {
    const deft_graph_t *g = r->g;
    for (int i = 0; i < g->num_nodes; i++) {
        if (!deft_graph_is_leaf(g, i) || !r->consumers[i]) continue;
        const deft_node_t *node = g->nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        for (int k = 0; k < node->num_outputs; k++) {
            int e = g->row_ptr[i] + k;
            deft_ndarray_t *value = rec ? rec->kept[k] : NULL;
            if (!value) continue; /* an output of a computed node that nothing here reads */
            r->values[e] = deft_ndarray_retain(value);
            r->tensors[e] = value->tensor;
            r->reads[r->num_reads++] = value->var;
        }
    }
}

/* A leaf that a node of the run updates in place is written by the run, not read. */
static void mark_updated_leaves(run_t *r) {
    const deft_graph_t *g = r->g;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        bool mutates = !deft_graph_is_leaf(g, i) && deft_op_mutates_any(node->op->op);
        for (int k = 0; mutates && k < node->num_inputs; k++) {
            int e = deft_graph_input_entry(g, i, k);
            if (!deft_op_mutates(node->op->op, node->num_inputs, k) || !r->values[e]) continue;
            deft_var_t *var = r->values[e]->var;
            bool read = false; /* the array may be read through other entries too */
            for (int j = r->num_reads - 1; j >= 0; j--)
                if (r->reads[j] == var) r->reads[j] = r->reads[--r->num_reads], read = true;
            if (read) r->writes[r->num_writes++] = var;
        }
    }
}

static int plan_arena(run_t *r) {
    const deft_graph_t *g = r->g;
    const bool *pinned = r->pinned;
    bool transient = false; /* a value living only during the run */
    for (int i = 0; i < g->num_nodes && !transient; i++)
        for (int k = 0; !deft_graph_is_leaf(g, i) && k < g->nodes[i]->num_outputs; k++)
            transient = transient || !pinned[g->row_ptr[i] + k];
    if (!transient) return 0; /* every value has storage of its own: nothing to plan */
    if (deft_plan_memory(g, &r->types, true, pinned, &r->plan)) return -1;
    deft_device_t *devices = malloc(((size_t)r->types.num_entries + 1) * sizeof *devices);
    if (!devices) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred run");
    for (int i = 0; i < g->num_nodes; i++) { /* a value lives where its node was recorded */
        const deft_record_t *rec = deft_record_of(g->nodes[i]);
        for (int k = 0; k < g->nodes[i]->num_outputs; k++)
            devices[g->row_ptr[i] + k] = rec ? rec->device : deft_device_cpu();
    }
    int status = deft_plan_arenas(&r->plan, &r->types, devices, r->arenas, r->tensors);
    free(devices);
    return status;
}

/* Every input of the run's nodes must have a value: computed here or kept. */
static int check_inputs_present(const run_t *r) {
    const deft_graph_t *g = r->g;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        for (int k = 0; !deft_graph_is_leaf(g, i) && k < node->num_inputs; k++) {
            int e = deft_graph_input_entry(g, i, k);
            if (deft_graph_is_leaf(g, deft_graph_entry_node(g, e)) && !r->values[e])
                return deft_error(DEFT_ERR_INTERNAL,
                                  "a recorded '%s' lost the value of its input %d",
                                  node->op->op->name, k);
        }
    }
    return 0;
}

/* An array without history holding entry e's value after the run (a new reference). */
static int value_of(const run_t *r, int e, deft_ndarray_t **out) {
    if (r->values[e]) {
        *out = deft_ndarray_retain(r->values[e]);
        return 0;
    }
    if (r->live[e]) return deft_ndarray_alias(r->live[e], out);
    return deft_error(DEFT_ERR_INTERNAL, "a value saved for backward was not kept");
}

/* A node recorded for autograd keeps what its gradient reads. */
static int save_for_backward(const run_t *r, int i) {
    const deft_graph_t *g = r->g;
    const deft_node_t *node = g->nodes[i];
    deft_record_t *rec = deft_record_of(node);
    int status = 0;
    for (int k = 0; rec->requires_grad && status == 0 && k < node->num_inputs; k++)
        if (rec->save_in & (1ull << k))
            status = value_of(r, deft_graph_input_entry(g, i, k), &rec->saved[k]);
    for (int k = 0; rec->requires_grad && status == 0 && k < node->num_outputs; k++)
        if (rec->save_out & (1ull << k))
            status = value_of(r, g->row_ptr[i] + k, &rec->saved[node->num_inputs + k]);
    return status;
}

/* After the push: the records say what is computed and kept, live arrays get storage. */
static int commit(run_t *r) {
    const deft_graph_t *g = r->g;
    int status = 0;
    for (int i = 0; i < g->num_nodes; i++) {
        if (deft_graph_is_leaf(g, i)) continue;
        deft_record_t *rec = deft_record_of(g->nodes[i]);
        bool needed_later = rec->pending > r->consumers[i];
        rec->computed = true;
        for (int k = 0; k < rec->num_outputs; k++) {
            int e = g->row_ptr[i] + k;
            if (r->live[e]) {
                __atomic_store_n(&r->live[e]->tensor.storage, deft_storage_retain(r->fresh[e]),
                                 __ATOMIC_RELEASE);
                if (needed_later && !status) status = deft_ndarray_alias(r->live[e], &rec->kept[k]);
            } else if (needed_later) {
                rec->kept[k] = deft_ndarray_retain(r->values[e]);
            }
        }
    }
    for (int i = 0; status == 0 && i < g->num_nodes; i++)
        if (!deft_graph_is_leaf(g, i)) status = save_for_backward(r, i);
    for (int i = 0; i < g->num_nodes; i++)
        if (!deft_graph_is_leaf(g, i)) deft_record_drop_inputs(g->nodes[i]);
    return status;
}

static int push(run_t *r) {
    size_t bytes = r->plan.arena_bytes;
    for (int e = 0; e < r->types.num_entries; e++)
        if (r->fresh[e] || (r->values[e] && (!r->plan.offset || r->plan.offset[e] < 0)))
            bytes += deft_tensor_nbytes(&r->tensors[e]);
    deft_engine_op_desc_t desc = {.fn = run_nodes,
                                  .free_ctx = free_run,
                                  .ctx = r,
                                  .reads = r->reads,
                                  .num_reads = r->num_reads,
                                  .writes = r->writes,
                                  .num_writes = r->num_writes,
                                  .name = "DeferredCompute",
                                  .origin = "deferred compute",
                                  .small = bytes < 64 * 1024 && !deft_graph_has_blocking(r->g),
                                  .never_block = true};
    return deft_engine_push(&desc);
}

/* Under the lock: the uncomputed nodes behind the arrays, as one run. */
static int compute_locked(int n, deft_ndarray_t *const *arrays) {
    deft_entry_t roots[64], *heap = NULL, *entries = roots;
    int count = 0;
    if (n > 64 && !(entries = heap = malloc((size_t)n * sizeof *heap)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred compute run");
    for (int i = 0; i < n; i++)
        if (arrays[i] && deft_ndarray_is_lazy(arrays[i]) &&
            !is_computed(arrays[i]->entry.node, NULL))
            entries[count++] = arrays[i]->entry;
    deft_graph_t *g = NULL;
    int status = count ? deft_graph_build_cut(count, entries, is_computed, NULL, &g) : 0;
    free(heap);
    if (!g) return status;
    run_t *r = run_alloc(g);
    if (!r) return -1;
    r->training = deft_op_training();
    describe_entries(r);
    status = make_destinations(r);
    if (!status) gather_leaves(r), mark_updated_leaves(r);
    if (!status) status = check_inputs_present(r);
    if (!status) status = plan_arena(r);
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

int deft_deferred_compute(int n, deft_ndarray_t *const *arrays) {
    int lazy = 0;
    while (lazy < n && (!arrays[lazy] || !deft_ndarray_is_lazy(arrays[lazy]))) lazy++;
    if (lazy == n) return 0; /* the common case costs no lock */
    deft_record_lock();
    int status = compute_locked(n, arrays);
    deft_record_unlock();
    return status;
}
