/* The cut a trigger or a backward works on, and its signature (cut.h). */
#include "core/imperative/cut.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/imperative/record.h"

typedef struct frame {
    deft_node_t *node;
    int k; /* the next input to visit */
} frame_t;

/* The walk's tables, grown as needed and kept between walks (under the record lock); a walked
 * cut's tables are these. */
static uint64_t epoch; /* marks the records the current walk has reached */
static deft_cut_t cut;
static struct {
    deft_node_t **nodes;
    bool *leaf;
    int *row_ptr, *in_ptr, *in_entry, *consumers, *attr_at;
    uint64_t *sig;
} w;
static frame_t *frames;
static int cap_nodes, cap_inputs, cap_sig;

static int resize(void *table, int cap, size_t size) {
    void *grown = realloc(*(void **)table, (size_t)cap * size);
    if (!grown) return -1;
    *(void **)table = grown;
    return 0;
}

static int next_cap(int cap, int need) {
    cap = cap ? cap : 64;
    while (cap < need) cap *= 2;
    return cap;
}

static int oom(void) {
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the walk of a recorded graph");
}

static int reserve_nodes(int need) {
    if (need + 1 <= cap_nodes) return 0;
    int cap = next_cap(cap_nodes, need + 1);
    if (resize(&w.nodes, cap, sizeof *w.nodes) || resize(&frames, cap, sizeof *frames) ||
        resize(&w.leaf, cap, sizeof *w.leaf) || resize(&w.row_ptr, cap, sizeof(int)) ||
        resize(&w.in_ptr, cap, sizeof(int)) || resize(&w.consumers, cap, sizeof(int)) ||
        resize(&w.attr_at, cap, sizeof(int)))
        return oom();
    cap_nodes = cap;
    return 0;
}

/* Room for `need` items of `size` bytes in *table, whose capacity is *cap. */
static int reserve(void *table, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int grown = next_cap(*cap, need);
    if (resize(table, grown, size)) return oom();
    *cap = grown;
    return 0;
}

static int reserve_inputs(int need) {
    return reserve(&w.in_entry, &cap_inputs, need, sizeof *w.in_entry);
}

static int reserve_sig(int need) {
    return reserve(&w.sig, &cap_sig, need, sizeof *w.sig);
}

static inline void put(uint64_t word) {
    w.sig[cut.sig_len++] = word;
    cut.hash = deft_cut_mix(cut.hash, word);
}

int deft_cut_sign(deft_cut_t *c, int n, const uint64_t *words) {
    (void)c;
    if (reserve_sig(cut.sig_len + n)) return -1;
    cut.sig = w.sig;
    for (int i = 0; i < n; i++) put(words[i]);
    return 0;
}

uint64_t deft_cut_hash(const deft_cut_t *c) {
    return c->hash ^ c->hash >> 29;
}

int deft_cut_id(const deft_node_t *node) {
    const deft_record_t *rec = deft_record_of(node);
    return rec && rec->walk == epoch ? rec->walk_id : -1;
}

static bool is_leaf(const deft_record_t *rec) {
    return cut.kind == DEFT_CUT_UNCOMPUTED ? rec->computed : !rec->requires_grad;
}

/* A string, 8 bytes a word, then its length. */
static int sign_string(const char *text) {
    size_t len = strlen(text);
    if (reserve_sig(cut.sig_len + (int)(len / 8) + 2)) return -1;
    for (size_t at = 0; at < len; at += 8) {
        uint64_t word = 0;
        memcpy(&word, text + at, len - at < 8 ? len - at : 8);
        put(word);
    }
    put(len);
    return 0;
}

/* A backward runs copies of the nodes: their attributes, as given, are part of its plan. */
static int sign_attrs(const deft_node_t *node) {
    put((uint64_t)node->attrs.count);
    for (int a = 0; a < node->attrs.count; a++)
        if (sign_string(node->attrs.keys[a]) || sign_string(node->attrs.vals[a])) return -1;
    return 0;
}

/* Words being written: kept in locals (the compiler cannot keep the globals in registers
 * across stores through the table, which may alias them). */
typedef struct signer {
    uint64_t *at, hash;
} signer_t;

static inline void sign_word(signer_t *s, uint64_t word) {
    *s->at++ = word;
    s->hash = deft_cut_mix(s->hash, word);
}

static inline void sign_outputs(signer_t *s, const deft_node_t *node, const deft_record_t *rec) {
    for (int k = 0; k < node->num_outputs; k++) {
        const deft_desc_t *d = &rec->desc[k];
        sign_word(s, (uint64_t)d->shape.ndim | (uint64_t)d->dtype << 8);
        for (int j = 0; j < d->shape.ndim; j++) sign_word(s, (uint64_t)d->shape.dims[j]);
    }
}

/* All inputs finished: number the node, its entries and input slots, and sign it. */
static int finish(deft_node_t *node, deft_record_t *rec, bool leaf) {
    int words = 3 + node->num_inputs + node->num_outputs * (1 + DEFT_SHAPE_MAX_NDIM);
    if (reserve_inputs(cut.num_inputs + node->num_inputs) || reserve_sig(cut.sig_len + words))
        return -1;
    int id = cut.num_nodes++, first = cut.num_entries;
    rec->walk_id = id;
    w.attr_at[id] = -1;
    w.nodes[id] = node;
    w.leaf[id] = leaf;
    w.row_ptr[id] = first;
    w.in_ptr[id] = cut.num_inputs;
    w.consumers[id] = 0;
    cut.num_entries = first + node->num_outputs;
    signer_t s = {w.sig + cut.sig_len, cut.hash};
    uint64_t where = (uint64_t)rec->device.type << 32 | (uint64_t)rec->device.id << 40;
    if (leaf) {
        sign_word(&s, (uint64_t)node->num_outputs << 1 | 1);
        if (cut.kind == DEFT_CUT_NEEDS_GRADIENT) sign_word(&s, where), sign_outputs(&s, node, rec);
    } else {
        sign_word(&s, (uint64_t)(uintptr_t)node->op);
        sign_word(&s, (uint64_t)node->num_inputs | (uint64_t)node->num_outputs << 16 | where);
        int *row_ptr = w.row_ptr, *consumers = w.consumers;
        for (int k = 0; k < node->num_inputs; k++) {
            int src = deft_record_of(node->inputs[k].node)->walk_id;
            int e = row_ptr[src] + node->inputs[k].index;
            w.in_entry[cut.num_inputs + k] = e; /* indexed: the list is NULL until an input */
            consumers[src]++;
            sign_word(&s, (uint64_t)e << 1 | (rec->save_in >> k & 1));
        }
        cut.num_inputs += node->num_inputs;
        sign_outputs(&s, node, rec);
    }
    cut.sig_len = (int)(s.at - w.sig);
    cut.hash = s.hash;
    if (leaf || cut.kind != DEFT_CUT_NEEDS_GRADIENT) return 0;
    w.attr_at[id] = cut.sig_len;
    return sign_attrs(node);
}

/* Reached for the first time: mark it; a leaf is finished at once. 1: visit its inputs. */
static int reach(deft_node_t *node, int depth) {
    deft_record_t *rec = deft_record_of(node);
    if (!rec) return deft_error(DEFT_ERR_INTERNAL, "a recorded call has an input with no record");
    if (rec->walk == epoch) return 0;
    rec->walk = epoch;
    if (reserve_nodes(cut.num_nodes + depth + 1)) return -1;
    if (is_leaf(rec)) return finish(node, rec, true);
    frames[depth] = (frame_t){node, 0};
    return 1;
}

static int walk_from(deft_node_t *start) {
    int top = reach(start, 0);
    if (top < 0) return -1;
    while (top > 0) {
        deft_node_t *node = frames[top - 1].node;
        int pushed = 0;
        while (!pushed && frames[top - 1].k < node->num_inputs) { /* reach may move frames */
            pushed = reach(node->inputs[frames[top - 1].k++].node, top);
            if (pushed < 0) return -1;
        }
        if (pushed) {
            top++;
            continue;
        }
        top--;
        if (finish(node, deft_record_of(node), false)) return -1;
    }
    return 0;
}

int deft_cut_walk(deft_cut_kind_t kind, int n, const deft_entry_t *roots, deft_cut_t **out) {
    epoch++;
    cut.kind = kind;
    cut.num_nodes = cut.num_inputs = cut.num_entries = cut.sig_len = 0;
    cut.hash = kind;
    if (reserve_nodes(1)) return -1;
    for (int i = 0; i < n; i++)
        if (walk_from(roots[i].node)) return -1;
    w.row_ptr[cut.num_nodes] = cut.num_entries;
    w.in_ptr[cut.num_nodes] = cut.num_inputs;
    cut.nodes = w.nodes, cut.leaf = w.leaf, cut.row_ptr = w.row_ptr, cut.in_ptr = w.in_ptr;
    cut.in_entry = w.in_entry, cut.consumers = w.consumers, cut.attr_at = w.attr_at;
    cut.sig = w.sig;
    *out = &cut;
    return 0;
}

/* ---- matching a cut of a known shape ---- */

void deft_cut_fill_shape(const deft_cut_t *c, int nroots, const deft_entry_t *roots,
                         const deft_op_entry_t **ops, uint64_t *save_in, int *in_node,
                         int *root_entry, int *root_node) {
    for (int i = 0; i < c->num_nodes; i++) {
        const deft_node_t *node = c->nodes[i];
        ops[i] = node->op;
        save_in[i] = deft_record_of(node)->save_in;
        for (int k = 0; !c->leaf[i] && k < node->num_inputs; k++)
            in_node[c->in_ptr[i] + k] = deft_cut_id(node->inputs[k].node);
    }
    for (int r = 0; r < nroots; r++) {
        root_node[r] = deft_cut_id(roots[r].node);
        root_entry[r] = c->row_ptr[root_node[r]] + roots[r].index;
    }
}

static inline __attribute__((always_inline)) bool same_desc(const deft_desc_t *a,
                                                            const deft_desc_t *b) {
    if (a->dtype != b->dtype || a->shape.ndim != b->shape.ndim) return false;
    for (int j = 0; j < a->shape.ndim; j++)
        if (a->shape.dims[j] != b->shape.dims[j]) return false;
    return true;
}

/* The words after `at` if they are text's as sign_string wrote them, else NULL. Those words
 * hold the bytes in order, zero-padded, then the length: equal lengths and bytes suffice. */
static const uint64_t *string_agrees(const char *text, const uint64_t *at, const uint64_t *end) {
    size_t len = strlen(text), words = (len + 7) / 8;
    if ((size_t)(end - at) <= words || at[words] != len || memcmp(at, text, len)) return NULL;
    return at + words + 1;
}

/* The node's parameters are the ones signed at `at` (sign_attrs), before end. */
static bool attrs_agree(const deft_node_t *node, const uint64_t *at, const uint64_t *end) {
    if (at >= end || *at++ != (uint64_t)node->attrs.count) return false;
    for (int a = 0; at && a < node->attrs.count; a++) {
        at = string_agrees(node->attrs.keys[a], at, end);
        at = at ? string_agrees(node->attrs.vals[a], at, end) : NULL;
    }
    return at != NULL;
}

/* The match runs these for every node: inlined, the loop keeps the shape's tables in registers
 * (called, each call saved and restored six of them: 190 instructions a node of bench_graph's
 * chain, against 100). */
#define HOT static inline __attribute__((always_inline))

/* Its outputs have the shape's recorded descs, and it the shape's device. */
HOT bool outputs_agree(const deft_cut_shape_t *s, int first, int nout, const deft_node_t *node,
                       const deft_record_t *rec) {
    if (node->num_outputs != nout || !deft_device_equal(rec->device, s->devices[first]))
        return false;
    for (int k = 0; k < nout; k++)
        if (!same_desc(&rec->desc[k], &s->desc[first + k])) return false;
    return true;
}

/* Its outputs outlive a run for the reasons of its own the shape gives (deft_cut_outlives). */
HOT bool outlives_agree(const deft_cut_shape_t *s, int i, int first, int nout,
                        const deft_node_t *node, const deft_record_t *rec) {
    unsigned char needed = deft_cut_needed(node, s->consumers[i]);
    for (int k = 0; k < nout; k++) {
        const deft_ndarray_t *live = __atomic_load_n(&rec->live[k], __ATOMIC_SEQ_CST);
        if (deft_cut_outlives(rec, needed, k, live) != s->outlives[first + k]) return false;
    }
    return true;
}

/* Leaf i of the shape: a value that exists, for a trigger; for a backward, one that needs no
 * gradient, of the signed desc and device. */
static bool leaf_agrees(const deft_cut_shape_t *s, int first, int nout, const deft_node_t *node,
                        const deft_record_t *rec) {
    if (s->kind == DEFT_CUT_NEEDS_GRADIENT)
        return !rec->requires_grad && outputs_agree(s, first, nout, node, rec);
    return rec->computed && node->num_outputs == nout;
}

/* Node `node` stands for node i of the shape (as a walk would number it): its record agrees with
 * the words the signature holds for i. */
HOT bool node_agrees(const deft_cut_shape_t *s, deft_cut_kind_t kind, int i,
                     const deft_node_t *node, const deft_record_t *rec) {
    int first = s->row_ptr[i], nout = s->row_ptr[i + 1] - first;
    if (s->leaf[i]) return leaf_agrees(s, first, nout, node, rec);
    bool gradient = kind == DEFT_CUT_NEEDS_GRADIENT;
    if ((gradient ? !rec->requires_grad : rec->computed) || node->op != s->ops[i] ||
        node->num_inputs != s->in_ptr[i + 1] - s->in_ptr[i] || rec->save_in != s->save_in[i] ||
        !outputs_agree(s, first, nout, node, rec) ||
        (s->outlives && !outlives_agree(s, i, first, nout, node, rec)))
        return false;
    return !gradient || attrs_agree(node, s->words + s->attr_at[i], s->words + s->num_words);
}

/* Node `node` is the one node i of the shape stands for: the first to claim i marks the node
 * (a node claimed for another i, or i claimed by another node, is a different graph). The
 * epoch and table come as arguments: as globals, every store here would make the caller reload
 * them. */
HOT bool claim(deft_node_t **nodes, uint64_t mark, int i, deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    if (!rec) return false;
    if (rec->walk == mark) return rec->walk_id == i && nodes[i] == node;
    if (nodes[i]) return false;
    rec->walk = mark, rec->walk_id = i;
    nodes[i] = node;
    return true;
}

/* From the last node to the first (consumers before producers): each node claimed by a root
 * or a consumer agrees, and claims its inputs. */
HOT bool follow_kind(const deft_cut_shape_t *shape, deft_cut_kind_t kind, deft_node_t **nodes,
                     uint64_t mark) {
    /* A copy the stores below cannot alias: its tables stay in registers. */
    const deft_cut_shape_t copy = *shape, *s = &copy;
    const int *in_ptr = s->in_ptr, *in_node = s->in_node, *in_entry = s->in_entry;
    const int *row_ptr = s->row_ptr;
    for (int i = s->num_nodes - 1; i >= 0; i--) {
        const deft_node_t *node = nodes[i];
        if (!node || !node_agrees(s, kind, i, node, deft_record_of(node))) return false;
        if (s->leaf[i]) continue;
        const deft_entry_t *inputs = node->inputs;
        for (int r = in_ptr[i], end = in_ptr[i + 1]; r < end; r++, inputs++) {
            int src = in_node[r];
            if (inputs->index != in_entry[r] - row_ptr[src] ||
                !claim(nodes, mark, src, inputs->node))
                return false;
        }
    }
    return true;
}

/* One loop a kind, its checks known (the trigger's is the hot one). */
static bool follow(const deft_cut_shape_t *s, deft_node_t **nodes, uint64_t mark) {
    return s->kind == DEFT_CUT_UNCOMPUTED ? follow_kind(s, DEFT_CUT_UNCOMPUTED, nodes, mark)
                                          : follow_kind(s, DEFT_CUT_NEEDS_GRADIENT, nodes, mark);
}

bool deft_cut_match(const deft_cut_shape_t *s, int n, const deft_entry_t *roots, deft_cut_t **out) {
    /* out of memory: the walk will say so */
    if (n != s->num_roots || reserve_nodes(s->num_nodes)) return false;
    uint64_t mark = ++epoch;
    deft_node_t **nodes = w.nodes;
    memset(nodes, 0, (size_t)s->num_nodes * sizeof *nodes);
    for (int r = 0; r < n; r++) {
        int src = s->root_node[r];
        if (roots[r].index != s->roots[r] - s->row_ptr[src] ||
            !claim(nodes, mark, src, roots[r].node))
            return false;
    }
    if (!follow(s, nodes, mark)) return false;
    cut = (deft_cut_t){.kind = s->kind,
                       .num_nodes = s->num_nodes,
                       .num_entries = s->num_entries,
                       .num_inputs = s->num_inputs,
                       .nodes = nodes,
                       .leaf = s->leaf,
                       .row_ptr = s->row_ptr,
                       .in_ptr = s->in_ptr,
                       .in_entry = s->in_entry,
                       .consumers = s->consumers,
                       .attr_at = s->attr_at,
                       .sig = w.sig};
    *out = &cut;
    return true;
}
