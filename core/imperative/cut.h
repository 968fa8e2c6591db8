/*
 * The cut of a recorded graph that a trigger or a backward works on, walked
 * without a lookup table, and its structural signature.
 *
 * The walk goes back from root entries through the nodes of the kind asked
 * for (not yet computed, for a trigger; needing a gradient, for a backward),
 * stopping at the others, which become leaves. It marks each record it
 * reaches, so every node is visited once, and numbers nodes in post-order
 * (every node after its inputs) and their outputs as entries, as an indexed
 * graph does (graph.h).
 *
 * As each node is finished, the words its plan depends on go into the
 * signature: its operator, counts and device, its input entries (and whether
 * it saves each for backward), its output shapes and dtypes, and, for a
 * backward (whose plan runs copies of the nodes), its parameters. The caller
 * may add words of its own. Equal signatures mean equal plans: a cache keys
 * plans by the hash and compares the words in full.
 *
 * Everything here runs under the record lock (record.h), which guards the
 * walk's marks and its tables: they are reused, valid until the next walk.
 */
#ifndef DEFT_CORE_CUT_H
#define DEFT_CORE_CUT_H

#include "core/graph/node.h"

typedef enum { DEFT_CUT_UNCOMPUTED, DEFT_CUT_NEEDS_GRADIENT } deft_cut_kind_t;

typedef struct deft_cut {
    deft_cut_kind_t kind;
    int num_nodes, num_entries, num_inputs;
    deft_node_t **nodes;       /* post-order; not retained */
    bool *leaf;                /* per node */
    int *row_ptr, *in_ptr;     /* per node (+1): first entry, first input slot */
    int *in_entry, *consumers; /* per input slot: its entry; per node: input slots reading it */
    int sig_len;
    uint64_t *sig;
    uint64_t hash;
} deft_cut_t;

/* How a word joins a signature's hash: a rotate-xor of independent products, cheap,
 * and collisions only cost a comparison. */
static inline uint64_t deft_cut_mix(uint64_t h, uint64_t w) {
    return (h << 7 | h >> 57) ^ (w * 0x9E3779B97F4A7C15ull);
}

/* Walk back from roots[0..n) (their nodes must have records). */
int deft_cut_walk(deft_cut_kind_t kind, int n, const deft_entry_t *roots, deft_cut_t **out);

/* Add words to the signature. */
int deft_cut_sign(deft_cut_t *cut, int n, const uint64_t *words);

/* The hash of the signature as it stands. */
uint64_t deft_cut_hash(const deft_cut_t *cut);

/* A node's id in the last walk, or -1 when it did not reach the node. */
int deft_cut_id(const deft_node_t *node);

#endif
