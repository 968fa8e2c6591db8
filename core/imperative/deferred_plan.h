/*
 * Trigger plans of deferred compute: what a trigger of one graph shape needs
 * that does not depend on the values (which entries live in the arena and
 * where, which get storage of their own, which leaves are read), made once
 * per shape and kept in a small cache, so a training loop that records the
 * same graph every step plans it once.
 *
 * A trigger walks the uncomputed nodes behind the requested arrays (marking
 * records, no lookup table) and writes the cut's structural signature as it
 * goes: operators, wiring, recorded shapes, dtypes and devices, and per
 * output whether it outlives the run (a live lazy array, a value other
 * recorded nodes still need, one saved for backward). Parameters are not in
 * it: the run calls each node's kernel with that node's own parameters, and
 * the plan depends only on the shapes they produced. Equal signatures share
 * a plan; the signature is compared in full, so a hash collision only costs
 * a comparison. Before walking, a trigger tries the most recently used plans
 * by matching (cut.h): a graph of their shape is found without the walk. The cache keeps the 64
 * most recently used plans (plans hold no memory for values: each run allocates its arena).
 *
 * Everything here runs under the record lock (record.h), which also guards
 * the walk's scratch tables and the cache. A plan is immutable once made and
 * reference counted: runs still queued on the engine keep theirs.
 */
#ifndef DEFT_CORE_DEFERRED_PLAN_H
#define DEFT_CORE_DEFERRED_PLAN_H

#include <stdatomic.h>

#include "core/graph/graph.h"
#include "core/graph/infer.h"
#include "core/graph/plan_memory.h"
#include "core/imperative/cut.h"
#include "core/imperative/ndarray.h"

/* A value the run stores outside the arena (why: DEFT_OUT_*, cut.h), or a leaf's
 * value it reads (why 0): entry e, output `index` of node `node`. */
typedef struct deft_plan_value {
    int entry, node, index;
    unsigned char why;
    size_t nbytes; /* destinations */
} deft_plan_value_t;

/* Carve `count` items of `size` bytes from *at (aligned for any of them). */
static inline void *deft_carve(char **at, size_t count, size_t size) {
    void *p = *at;
    *at += (count * size + 15) & ~(size_t)15;
    return p;
}

typedef struct deft_trigger_plan {
    atomic_int refs;
    uint64_t hash;
    int sig_len; /* words */
    uint64_t *sig;
    deft_graph_t graph; /* tables only: a run copies it and sets nodes to its own */
    deft_graph_types_t types;
    deft_memory_plan_t memory;
    deft_device_t *devices; /* per entry: where a non-leaf value lives */
    int num_arena, *arena;  /* entries in the arena */
    deft_tensor_t *tensors; /* per arena entry: its tensor, but its storage (NULL) */
    int num_slots;          /* devices with an arena */
    deft_device_t slot_device[DEFT_DEVICE_SLOTS];
    unsigned char *arena_slot; /* per arena entry: its device's index in slot_device */
    int num_dest, *dest_of;    /* values outside the arena; per entry: index in dest, or -1 */
    deft_plan_value_t *dest;
    int num_leaf, *leaf_of; /* leaf values read; per entry: index in leaf, or -1 */
    deft_plan_value_t *leaf;
    size_t own_bytes; /* bytes of the arena and of the values outside it */
    bool blocking;    /* a node waits for a host callback */
    bool mutates;     /* a node updates an input in place */
    bool saves;       /* a node keeps values for backward */
    bool draws;       /* a node draws random numbers (random.h) */
    /* The memory of a finished run, for the next: a trigger in a loop then allocates nothing
     * large (glibc merges its small free chunks before each large allocation: after a
     * one-off graph freed its nodes, 76 instructions a node of a 100-node chain). */
    _Atomic(void *) spare_run;
    deft_cut_shape_t shape;         /* what a graph must be to use it without a walk */
    struct deft_trigger_plan *next; /* the cache's list, most recently used first */
} deft_trigger_plan_t;

/* The cut a trigger walked (the module's scratch, valid until the next walk):
 * nodes in post-order, not retained (the requested arrays hold them). */
typedef struct deft_trigger_cut {
    int num_nodes;
    deft_node_t **nodes;
    deft_ndarray_t **live; /* per dest of the plan: the live array (retained) or NULL */
} deft_trigger_cut_t;

/*
 * Under the record lock: walk the uncomputed nodes behind roots[0..n) and
 * find or make the plan of that shape (a new reference in *plan). 1 when
 * nothing needs computing, 0 on success, -1 on error.
 */
int deft_trigger_plan_get(int n, const deft_entry_t *roots, deft_trigger_cut_t *cut,
                          deft_trigger_plan_t **plan);

void deft_trigger_plan_release(deft_trigger_plan_t *plan);

/* For tests: hits and misses so far and plans cached now; the capacity (0
 * turns caching off and empties the cache; prev may be NULL). */
void deft_trigger_plan_stats(long *hits, long *misses, int *cached);
void deft_trigger_plan_set_capacity(int capacity, int *prev);
/* For tests: the hits found by matching, without a walk. */
long deft_trigger_plan_matched(void);

#endif
