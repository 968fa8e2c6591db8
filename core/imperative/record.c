#define _POSIX_C_SOURCE 200809L
#include "core/imperative/record.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/records.h"
#include "core/base/spin.h"
#include "core/base/tls.h"
#include "core/imperative/autograd.h"
#include "core/op/op.h"

/* One process-wide lock, reentrant through a per-thread depth (cheaper than a
 * recursive mutex): freeing nodes while holding it frees records, which take it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static DEFT_TLS_FAST int tl_depth;

void deft_record_lock(void) {
    if (tl_depth++ == 0) pthread_mutex_lock(&lock);
}

void deft_record_unlock(void) {
    if (--tl_depth == 0) pthread_mutex_unlock(&lock);
}

/*
 * A trigger walking (set only by the lock's holder). It reads `pending` and
 * `live` of records that recorded calls and freed arrays change without the
 * lock. Each side writes first and reads the other's word second, all
 * sequentially consistent (Dekker's pattern): a lock-free caller that sees no
 * walk knows the next walk sees its write; one that sees a walk waits for it
 * by taking the lock, and then looks again (settle), or knows the
 * walk has let go of its array (deft_record_release_entry).
 */
static bool walking;

void deft_record_walk_begin(bool *prev) {
    *prev = walking;
    __atomic_store_n(&walking, true, __ATOMIC_SEQ_CST);
}

void deft_record_walk_end(bool prev) {
    __atomic_store_n(&walking, prev, __ATOMIC_RELEASE);
}

/* Out of line and cold: a walk is seldom under way, and with the lock's calls inline its
 * callers (a freed lazy array, a recorded call on lazy inputs) saved and restored more
 * registers on every call: 10 instructions of a recorded node's 1266 (LTO, callgrind). */
static __attribute__((noinline, cold)) void wait_out_walk(void) {
    deft_record_lock();
    deft_record_unlock();
}

static inline void wait_for_walk(void) {
    if (__atomic_load_n(&walking, __ATOMIC_SEQ_CST)) wait_out_walk();
}

/*
 * Kept slots without the lock. A recorded call counts itself in `pending`
 * and then fills an empty slot; a drop sees `pending` at zero and then empties
 * it. Counted between the drop's look and its emptying, the call would find
 * the value there and then lose it. So a drop swaps in DECIDING, looks at
 * `pending` again, and puts the value back when a consumer came; whoever
 * meets DECIDING waits the few instructions until the drop has decided.
 */
static char deciding_mark;
#define DECIDING ((deft_ndarray_t *)&deciding_mark)

static deft_ndarray_t *wait_decided(deft_ndarray_t **slot) {
    deft_ndarray_t *v;
    for (int spins = 0; (v = __atomic_load_n(slot, __ATOMIC_SEQ_CST)) == DECIDING; spins++)
        if (spins < 64)
            deft_cpu_relax();
        else
            sched_yield(); /* the dropping thread was preempted */
    return v;
}

deft_ndarray_t *deft_record_kept(deft_record_t *rec, int k) {
    return wait_decided(&rec->kept[k]);
}

void deft_record_keep(deft_record_t *rec, int k, deft_ndarray_t *value) {
    deft_ndarray_t *seen = NULL;
    while (!__atomic_compare_exchange_n(&rec->kept[k], &seen, value, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
        if (seen != DECIDING) { /* kept already: the same value */
            deft_ndarray_release(value);
            return;
        }
        wait_decided(&rec->kept[k]);
        seen = NULL;
    }
}

int deft_record_keep_alias(deft_record_t *rec, int k, deft_ndarray_t *arr) {
    deft_ndarray_t *alias;
    if (deft_record_kept(rec, k)) return 0;
    if (deft_ndarray_alias(arr, &alias)) return -1;
    deft_record_keep(rec, k, alias);
    return 0;
}

/* Drop the kept values no consumer needs. A value whose array is alive
 * stays (it costs no memory: the array holds the same storage), so a
 * parameter used by call after call is not captured afresh each time. */
static __attribute__((noinline)) void drop_kept_unneeded(const deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    for (int k = 0; k < rec->num_outputs; k++) {
        if (deft_record_pending(node) != 0) return;
        deft_ndarray_t **slot = &rec->kept[k];
        deft_ndarray_t *v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (!v || v == DECIDING || __atomic_load_n(&rec->live[k], __ATOMIC_ACQUIRE)) continue;
        if ((v = __atomic_exchange_n(slot, DECIDING, __ATOMIC_SEQ_CST)) == DECIDING) continue;
        bool needed = v && deft_record_pending(node) != 0; /* a consumer came meanwhile */
        __atomic_store_n(slot, needed ? v : NULL, __ATOMIC_RELEASE);
        if (!needed) deft_ndarray_release(v);
    }
}

/* Usually a consumer still needs the values (an array of a recorded chain is freed while
 * the next call holds its node), or nothing is kept (a value a trigger's run made in its
 * arena): both are seen here, without a call. */
static inline void drop_unneeded(const deft_node_t *node) {
    if (deft_record_pending(node) != 0) return;
    deft_record_t *rec = deft_record_of(node);
    for (int k = 0; k < rec->num_outputs; k++)
        if (__atomic_load_n(&rec->kept[k], __ATOMIC_ACQUIRE)) {
            drop_kept_unneeded(node);
            return;
        }
}

/* Usually nothing is kept (a chain's values are its next call's to keep, and a trigger's run
 * keeps them in its arena): empty slots cost no call. */
static void drop_kept(deft_record_t *rec) {
    for (int k = 0; k < rec->num_outputs; k++) {
        if (!rec->kept[k]) continue;
        deft_ndarray_release(rec->kept[k]);
        rec->kept[k] = NULL;
    }
}

static void unuse(deft_node_t *in) {
    if (atomic_fetch_sub(&in->counts, DEFT_NODE_PENDING) >> 32 == 1) drop_unneeded(in);
}

/* Uncount the consumer in its inputs' pending; `dying`: the consumer is being freed. */
static void drop_inputs(deft_node_t *consumer, bool dying) {
    deft_record_t *rec = deft_record_of(consumer);
    if (!rec || !rec->holds_inputs) return;
    rec->holds_inputs = false;
    for (int i = 0; i < consumer->num_inputs; i++) {
        deft_node_t *node = consumer->inputs[i].node;
        /* An input that a dying consumer holds alone goes with it (node.h): no array, walk
         * or other consumer reaches its record any more, and freeing it drops what it
         * keeps, so its count is left as it is (a locked decrement per node of a freed
         * chain saved). */
        if (deft_record_of(node) && !(dying && deft_node_refs(node) == 1)) unuse(node);
    }
}

/* The consumer is computed (by a trigger, under the lock) or unreachable (being freed). */
void deft_record_drop_inputs(deft_node_t *consumer) {
    drop_inputs(consumer, false);
}

void deft_record_drop_saved(deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    for (int i = 0; i < node->num_inputs + rec->num_outputs; i++) {
        deft_ndarray_release(rec->saved[i]);
        rec->saved[i] = NULL;
    }
}

/* The node is unreachable: only its pending counts on its inputs are shared. */
static void free_record(deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    drop_inputs(node, true);
    drop_kept(rec);
    if (rec->save_in | rec->save_out) deft_record_drop_saved(node); /* only autograd saves */
    if (rec->grad) deft_ndarray_release(rec->grad); /* variables marked for autograd only */
    node->ext = NULL;
    if (rec->allocation == ALLOC_RECORD)
        deft_record_free(rec);
    else if (rec->allocation == ALLOC_MALLOC)
        free(rec);
}

int deft_record_attach(deft_node_t *node, deft_device_t device, const deft_desc_t *desc) {
    int n = node->num_outputs;
    size_t size = deft_record_size(node->num_inputs, n);
    deft_record_t *rec = node->ext; /* room made with the node, if it fits there */
    int allocation = ALLOC_IN_NODE;
    if (node->ext_bytes < size) {
        allocation = size <= DEFT_RECORD_SIZE ? ALLOC_RECORD : ALLOC_MALLOC;
        rec = allocation == ALLOC_RECORD ? deft_record_alloc() : malloc(size);
        if (!rec) {
            for (int i = 0; node->pending_inputs && i < node->num_inputs; i++)
                if (deft_record_of(node->inputs[i].node)) unuse(node->inputs[i].node);
            return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a recorded node");
        }
    }
    /* Each field written once, the descriptions and slots too (a compound literal zeroes the
     * header with `rep stos` first, whose start-up cost was 3% of recording a call, perf). A
     * new field must be set here. */
    _Static_assert(sizeof(void *) != 8 || sizeof(deft_record_t) == 104, "every field set");
    rec->computed = rec->requires_grad = false;
    rec->holds_inputs = node->pending_inputs; /* freeing the node now uncounts it */
    rec->training = deft_op_training();
    rec->device = device;
    rec->num_outputs = n;
    rec->grad_req = DEFT_GRAD_REQ_NULL;
    rec->grad = NULL;
    rec->save_in = rec->save_out = 0;
    rec->saved_released = false;
    rec->allocation = allocation;
    rec->walk = 0;
    rec->walk_id = 0;
    rec->desc = (deft_desc_t *)(rec + 1);
    rec->live = (deft_ndarray_t **)(rec->desc + n);
    rec->kept = rec->live + n;
    rec->saved = rec->kept + n;
    for (int k = 0; k < n; k++) {
        rec->desc[k] = desc[k];
        rec->live[k] = rec->kept[k] = rec->saved[node->num_inputs + k] = NULL;
    }
    for (int i = 0; i < node->num_inputs; i++) rec->saved[i] = NULL;
    node->ext = rec;
    node->ext_free = free_record;
    return 0;
}

/* Entries change under the lock but are read without it where only the node
 * matters (is there history, does it need a gradient): the node pointer is
 * stored last, with release order, after everything its record says. */
static void publish_entry(deft_ndarray_t *arr, deft_entry_t entry) {
    arr->entry.index = entry.index;
    __atomic_store_n(&arr->entry.node, entry.node, __ATOMIC_RELEASE);
}

static void set_live(deft_record_t *rec, int k, deft_ndarray_t *arr) {
    __atomic_store_n(&rec->live[k], arr, __ATOMIC_RELEASE);
}

int deft_record_new_variable(const deft_ndarray_t *arr, const char *name, deft_node_t **out) {
    deft_node_t *node;
    deft_desc_t desc = {arr->tensor.shape, arr->tensor.dtype};
    if (deft_node_new_variable(name, NULL, 0, NULL, NULL, &node)) return -1;
    if (deft_record_attach(node, arr->tensor.device, &desc)) {
        deft_node_release(node);
        return -1;
    }
    deft_record_of(node)->computed = true;
    *out = node;
    return 0;
}

int deft_record_variable(deft_ndarray_t *arr, const char *name) {
    deft_node_t *node;
    if (deft_record_new_variable(arr, name, &node)) return -1;
    set_live(deft_record_of(node), 0, arr);
    publish_entry(arr, (deft_entry_t){node, 0});
    return 0;
}

int deft_record_input_variables(int i, int nin, deft_ndarray_t *const *in, deft_entry_t *entries) {
    deft_record_lock(); /* another thread may be giving the same array its variable */
    int status = 0;
    for (; status == 0 && i < nin; i++) {
        if (!in[i]->entry.node) status = deft_record_variable(in[i], NULL);
        entries[i] = in[i]->entry;
    }
    deft_record_unlock();
    return status;
}

/*
 * A lazy input: the trigger that computes it decides whether its value
 * outlives its run by counting `pending` as it walks. A call counted after
 * that look finds the input computed now, without a kept value: it keeps the
 * input's own. A walk still under way is waited for first (see `walking`).
 */
static int settle(const deft_node_t *consumer, deft_ndarray_t *const *in, uint64_t lazy) {
    wait_for_walk();
    for (int i = 0; i < consumer->num_inputs; i++) {
        const deft_entry_t *e = &consumer->inputs[i];
        if ((lazy >> i & 1) && !deft_ndarray_is_lazy(in[i]) &&
            deft_record_keep_alias(deft_record_of(e->node), e->index, in[i]))
            return -1;
    }
    return 0;
}

int deft_record_use_inputs(deft_node_t *consumer, deft_ndarray_t *const *in) {
    _Static_assert(DEFT_OP_MAX_INPUTS <= 64, "a bit per input");
    uint64_t lazy = 0;
    for (int i = 0; i < consumer->num_inputs; i++) {
        const deft_entry_t *e = &consumer->inputs[i];
        bool is_lazy = deft_ndarray_is_lazy(in[i]);
        lazy |= (uint64_t)is_lazy << i;
        /* Counted when the node was made, then the slot filled: the order a drop relies on
         * (drop_unneeded). */
        if (!is_lazy && deft_record_keep_alias(deft_record_of(e->node), e->index, in[i])) return -1;
    }
    return lazy ? settle(consumer, in, lazy) : 0;
}

void deft_record_set_entry(deft_ndarray_t *arr, deft_entry_t entry) {
    deft_entry_t old = arr->entry;
    publish_entry(arr,
                  (deft_entry_t){entry.node ? deft_node_retain(entry.node) : NULL, entry.index});
    if (!old.node) return;
    deft_record_t *rec = deft_record_of(old.node);
    deft_ndarray_t *was = arr;
    if (rec && __atomic_compare_exchange_n(&rec->live[old.index], &was, NULL, false,
                                           __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        drop_unneeded(old.node);
    deft_node_release(old.node);
}

void deft_record_give_entry(deft_ndarray_t *arr, deft_entry_t entry) {
    publish_entry(arr, entry);
}

/* A variable's gradient array is its array's: with create_graph, that
 * gradient's history reaches the variable's node, whose record holds the
 * gradient, a cycle that only the variable's own array going can break.
 * Backward reads the gradient under the lock. */
static void release_variable(deft_node_t *node, deft_record_t *rec) {
    deft_record_lock();
    set_live(rec, 0, NULL);
    drop_unneeded(node);
    deft_ndarray_t *grad = rec->grad;
    rec->grad = NULL, rec->grad_req = DEFT_GRAD_REQ_NULL;
    deft_node_release(node);
    deft_ndarray_release(grad);
    deft_record_unlock();
}

bool deft_record_forget_live(deft_ndarray_t *arr) {
    deft_node_t *node = arr->entry.node;
    deft_record_t *rec = deft_record_of(node);
    int k = arr->entry.index;
    /* The slot can only hold this array if it was set when the array was made. */
    if (!rec || !node->op || __atomic_load_n(&rec->live[k], __ATOMIC_ACQUIRE) != arr) return false;
    /* A walk that read the slot before it was cleared may still use the array: wait for it. */
    __atomic_store_n(&rec->live[k], NULL, __ATOMIC_SEQ_CST);
    wait_for_walk();
    drop_unneeded(node);
    return true;
}

void deft_record_release_entry(deft_ndarray_t *arr) {
    deft_node_t *node = arr->entry.node;
    deft_record_t *rec = deft_record_of(node);
    if (rec && !node->op && __atomic_load_n(&rec->live[0], __ATOMIC_ACQUIRE) == arr) {
        release_variable(node, rec);
        return;
    }
    deft_record_forget_live(arr);
    deft_node_release(node);
}
