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
 * A graph that has the shape of an earlier cut (a training loop records the
 * same step every time) can skip the walk and its signature: deft_cut_match
 * follows the earlier cut's tables from the roots and checks, node by node,
 * every word the signature would hold, giving the same cut. It is cheaper
 * because it knows where to go: no stack of frames, no signature to write,
 * hash and compare, and no tables to fill but the nodes.
 *
 * Everything here runs under the record lock (record.h), which guards the
 * walk's marks and its tables: they are reused, valid until the next walk.
 */
#ifndef DEFT_CORE_CUT_H
#define DEFT_CORE_CUT_H

#include "core/graph/node.h"
#include "core/imperative/record.h"

typedef enum { DEFT_CUT_UNCOMPUTED, DEFT_CUT_NEEDS_GRADIENT } deft_cut_kind_t;

/* A cut's tables are read-only for its users (a matched cut's are its shape's). */
typedef struct deft_cut {
    deft_cut_kind_t kind;
    int num_nodes, num_entries, num_inputs;
    deft_node_t **nodes;         /* post-order; not retained */
    const bool *leaf;            /* per node */
    const int *row_ptr, *in_ptr; /* per node (+1): first entry, first input slot */
    const int *in_entry,
        *consumers;     /* per input slot: its entry; per node: input slots reading it */
    const int *attr_at; /* per node needing a gradient: where its parameters start in sig */
    int sig_len;
    const uint64_t *sig;
    uint64_t hash;
} deft_cut_t;

/* Per output entry of a trigger's cut: why its value outlives the run. */
enum {
    DEFT_OUT_LIVE = 1,   /* a live lazy array gets it */
    DEFT_OUT_NEEDED = 2, /* recorded consumers outside the run still need it */
    DEFT_OUT_SAVED = 4,  /* a node keeps it for backward */
};

/* Why output k of a non-leaf node of a trigger's cut outlives the run, as its own record says:
 * `live` its live lazy array (or NULL), `needed` deft_cut_needed's, and its own gradient saving
 * it. A consumer that saves it adds DEFT_OUT_SAVED (deft_cut_shape_t's save_in). */
static inline unsigned char deft_cut_outlives(const deft_record_t *rec, unsigned char needed, int k,
                                              const deft_ndarray_t *live) {
    return (unsigned char)(needed | (live ? DEFT_OUT_LIVE : 0) |
                           (rec->save_out >> k & 1 ? DEFT_OUT_SAVED : 0));
}

/* DEFT_OUT_NEEDED if recorded consumers outside the cut need the node's values: more are pending
 * than the `consumers` input slots of the cut that read them; else 0. */
static inline unsigned char deft_cut_needed(const deft_node_t *node, int consumers) {
    return deft_record_pending(node) > consumers ? DEFT_OUT_NEEDED : 0;
}

/* How a word joins a signature's hash: a rotate-xor of independent products, cheap,
 * and collisions only cost a comparison. */
static inline uint64_t deft_cut_mix(uint64_t h, uint64_t w) {
    return (h << 7 | h >> 57) ^ (w * 0x9E3779B97F4A7C15ull);
}

/* The shape of an earlier cut, as deft_cut_match checks it: per node (post-order) its tables
 * as in deft_cut_t, its operator (leaves: unused) and the inputs its gradient saves; per input
 * slot the node of its entry; per entry its desc and device; the roots' entries and their
 * nodes. A cut of nodes needing a gradient also signs its nodes' parameters: per node the
 * offset in `words` (its signature, num_words long) where they start (attr_at; NULL for the
 * other kind). A trigger's may also ask, per entry of a non-leaf node, that its value outlive
 * the run for the same reasons of its own (outlives: deft_cut_outlives with the live array
 * read, not retained; NULL: not asked). */
typedef struct deft_cut_shape {
    deft_cut_kind_t kind;
    int num_nodes, num_entries, num_inputs, num_roots;
    const int *row_ptr, *in_ptr, *in_entry, *consumers, *in_node, *roots, *root_node;
    const bool *leaf;
    const deft_op_entry_t *const *ops;
    const uint64_t *save_in;
    const deft_desc_t *desc;
    const deft_device_t *devices;
    const int *attr_at;
    const unsigned char *outlives;
    int num_words;
    const uint64_t *words;
} deft_cut_shape_t;

/* Walk back from roots[0..n) (their nodes must have records). */
int deft_cut_walk(deft_cut_kind_t kind, int n, const deft_entry_t *roots, deft_cut_t **out);

/* The words of walked cut c that its shape keeps beyond c's tables, written into the shape's
 * own: per node its operator and saved inputs, per input slot the node of its entry, the roots'
 * entries and nodes. */
void deft_cut_fill_shape(const deft_cut_t *c, int nroots, const deft_entry_t *roots,
                         const deft_op_entry_t **ops, uint64_t *save_in, int *in_node,
                         int *root_entry, int *root_node);

/* Whether the nodes behind roots[0..n) form a cut of shape s: a walk of s's kind would give
 * the signature s was made from (and its values outlive a run as s->outlives says). If so *out
 * is that cut, without a signature (its marks and ids set as by a walk, its tables s's, valid
 * while s is); if not, or on any doubt (a node without a record), false and nothing else: walk
 * it. */
bool deft_cut_match(const deft_cut_shape_t *s, int n, const deft_entry_t *roots, deft_cut_t **out);

/* Add words to the signature. */
int deft_cut_sign(deft_cut_t *cut, int n, const uint64_t *words);

/* The hash of the signature as it stands. */
uint64_t deft_cut_hash(const deft_cut_t *cut);

/* A node's id in the last walk, or -1 when it did not reach the node. */
int deft_cut_id(const deft_node_t *node);

#endif
