/*
 * Records: what the imperative layer keeps on each graph node it records
 * (deferred compute now, autograd later), hung on the node's ext slot.
 *
 * The recorded graph is reference counted, not a tape: a lazy array holds its
 * producing node and a node holds its inputs, so freeing the last array that
 * reaches a node frees the node and what it kept. A record's values follow
 * one rule: a node keeps its output values while some consumer that still
 * needs them (a recorded node not yet computed) exists. Each such consumer
 * counts once in `pending` of each of its inputs (the high half of the
 * node's counts word, node.h); when the count falls to zero the values go.
 *
 * Who touches a record, and how (recording and deferred compute are per
 * thread, but arrays, and with them nodes, are shared: a parameter is an
 * input of every thread's graph, a lazy array may be read on another thread,
 * the engine's workers drop the last references of runs):
 *  - A recorded call (deft_record_use_inputs) takes no lock: its
 *    own node is private until its arrays are handed out, and on its inputs
 *    it only counts itself in `pending` (with its reference, one atomic add
 *    when its node is made) and fills an empty `kept` slot (a
 *    compare-and-swap). Only giving a history-less input its variable takes
 *    the lock (two threads may try at once).
 *  - Freeing an array or a node (deft_record_release_entry, the node's
 *    ext_free) takes no lock either: it clears `live`, drops its counts in
 *    `pending` and the values nobody needs any more (record.c says how a
 *    drop and a recorded call agree on a `kept` slot without one).
 *  - A trigger (deferred.c), a backward, an export, marking variables and
 *    replacing an array's history run under one process-wide lock (reentrant,
 *    because freeing a node while holding it frees records too). A trigger
 *    also says, while it holds the lock, that it is walking (walk_begin /
 *    walk_end): it reads `pending` and `live` of records that lock-free
 *    callers change, and those, seeing it walk, wait for it to end (record.c).
 *  - An array's entry changes under the lock only. A recorded call reads its
 *    inputs' entries without it, as autograd's recording does: replacing the
 *    history of an array (marking it, clearing it, backward writing its
 *    gradient into it) while another thread passes that same array to a call
 *    is a race on the array, like writing its values would be.
 * Nothing waits for computation while holding the lock.
 */
#ifndef DEFT_CORE_RECORD_H
#define DEFT_CORE_RECORD_H

#include "core/graph/node.h"
#include "core/imperative/ndarray.h"

typedef struct deft_record {
    bool computed;      /* its values exist or are being computed by the engine */
    bool requires_grad; /* a marked variable, or recorded from one (autograd.h) */
    bool holds_inputs;  /* counted in its inputs' pending (until computed or freed) */
    bool training;      /* the caller's training flag when the call was recorded */
    deft_device_t device;
    int num_outputs;
    deft_desc_t *desc;     /* per output: known when recorded */
    deft_ndarray_t **live; /* per output: the array handed out, not retained; NULL once freed */
    deft_ndarray_t **kept; /* per output: the value kept for pending consumers (no entry);
                            * read with deft_record_kept, set with deft_record_keep */
    /* autograd (autograd.h) */
    int grad_req;               /* variables: DEFT_GRAD_REQ_* */
    deft_ndarray_t *grad;       /* variables: where backward writes (retained) */
    uint64_t save_in, save_out; /* the inputs and outputs its gradient reads */
    deft_ndarray_t **saved;     /* their values (no entry): inputs, then outputs */
    bool saved_released;        /* a backward without retain_graph dropped them */
    enum { ALLOC_IN_NODE, ALLOC_RECORD, ALLOC_MALLOC } allocation; /* where it lives */
    /* a trigger's walk (deferred_plan.c): the walk that reached it last, and its id there */
    uint64_t walk;
    int walk_id;
} deft_record_t;

void deft_record_lock(void);
void deft_record_unlock(void);

/* Under the lock: a trigger's walk starts (it reads `pending` and `live`, which
 * lock-free callers change), and ends; *prev for nesting. */
void deft_record_walk_begin(bool *prev);
void deft_record_walk_end(bool prev);

static inline deft_record_t *deft_record_of(const deft_node_t *node) {
    return node->ext;
}

/* The recorded consumers that still need a node's values (sequentially consistent: a
 * trigger's walk reads it before the node's `live` slots, record.c). */
static inline int deft_record_pending(const deft_node_t *node) {
    return (int)(atomic_load_explicit(&node->counts, memory_order_seq_cst) >> 32);
}

/* Bytes of a record: a recorded call makes its node with this much room for it. */
static inline size_t deft_record_size(int num_inputs, int num_outputs) {
    int slots = 3 * num_outputs + num_inputs; /* live, kept, saved */
    return sizeof(deft_record_t) + (size_t)num_outputs * sizeof(deft_desc_t) +
           (size_t)slots * sizeof(void *);
}

/* Give a node (not yet shared) its record (in the room made with the node, if any): uncomputed,
 * outputs described by `desc`, holding its inputs' pending counts if it was made counted in them
 * (on failure they are uncounted). */
int deft_record_attach(deft_node_t *node, deft_device_t device, const deft_desc_t *desc);

/* A variable node with a record standing for an array made outside any
 * recording (its entry is set to it); NULL name: unnamed. Under the lock. */
int deft_record_variable(deft_ndarray_t *arr, const char *name);

/* deft_record_input_entries from input i on, i being without history. */
int deft_record_input_variables(int i, int nin, deft_ndarray_t *const *in, deft_entry_t *entries);

/* A variable node with a record for an array, not attached to it yet. */
int deft_record_new_variable(const deft_ndarray_t *arr, const char *name, deft_node_t **out);

/* The array handed out for output k of a recorded node (not retained), or NULL: for a node
 * not shared yet, or under the lock. */
static inline void deft_record_set_live(deft_node_t *node, int k, deft_ndarray_t *arr) {
    __atomic_store_n(&deft_record_of(node)->live[k], arr, __ATOMIC_RELEASE);
}

/* The node of an array's entry, read without the lock (NULL: no history). */
static inline deft_node_t *deft_record_entry_node(const deft_ndarray_t *arr) {
    return __atomic_load_n(&arr->entry.node, __ATOMIC_ACQUIRE);
}

/* The entries of a recorded call's inputs, giving arrays made outside any
 * recording a variable (taking the lock only for that). Entries are read
 * without the lock: see above. */
static inline int deft_record_input_entries(int nin, deft_ndarray_t *const *in,
                                            deft_entry_t *entries) {
    for (int i = 0; i < nin; i++) {
        if (!deft_record_entry_node(in[i])) return deft_record_input_variables(i, nin, in, entries);
        entries[i] = in[i]->entry;
    }
    return 0;
}

/* A recorded call's node (made counted in its inputs' pending, deft_node_new_call; its record
 * attached; not shared yet) has its inputs keep the values of those that have one (in[i] is
 * the array of input i); lazy inputs that a trigger on another thread computed meanwhile keep
 * theirs too. On failure the node's release uncounts it. Takes no lock. */
int deft_record_use_inputs(deft_node_t *consumer, deft_ndarray_t *const *in);

/* The value output k keeps (NULL: none), and keeping one (the reference is
 * taken over; dropped if the slot is already filled); keep_alias keeps an
 * alias of arr, if the slot is empty. */
deft_ndarray_t *deft_record_kept(deft_record_t *rec, int k);
void deft_record_keep(deft_record_t *rec, int k, deft_ndarray_t *value);
int deft_record_keep_alias(deft_record_t *rec, int k, deft_ndarray_t *arr);

/* A consumer no longer needs its inputs (it was computed or freed). */
void deft_record_drop_inputs(deft_node_t *consumer);

/* A new array (no entry, nobody else's yet) takes the caller's reference to entry's node. */
void deft_record_give_entry(deft_ndarray_t *arr, deft_entry_t entry);

/* Point an array at another recorded entry (retained), dropping its old one. Under the lock. */
void deft_record_set_entry(deft_ndarray_t *arr, deft_entry_t entry);

/* Drop the values a node keeps for backward. Under the lock. */
void deft_record_drop_saved(deft_node_t *node);

/* An array with an entry is being freed: forget it as its node's live output
 * and drop its reference to the node. Takes the lock only for a variable. */
void deft_record_release_entry(deft_ndarray_t *arr);

/* If arr (with an entry, not a variable's) is its node's live output, forget it
 * there, once any trigger's walk that could have read the slot is over: true.
 * No walk can retain arr through its node after that. Takes no lock. */
bool deft_record_forget_live(deft_ndarray_t *arr);

#endif
