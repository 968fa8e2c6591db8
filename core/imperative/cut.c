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

/* The walk's tables, grown as needed and kept between walks (under the record lock). */
static uint64_t epoch; /* marks the records the current walk has reached */
static deft_cut_t cut;
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
    if (resize(&cut.nodes, cap, sizeof *cut.nodes) || resize(&frames, cap, sizeof *frames) ||
        resize(&cut.leaf, cap, sizeof *cut.leaf) || resize(&cut.row_ptr, cap, sizeof(int)) ||
        resize(&cut.in_ptr, cap, sizeof(int)) || resize(&cut.consumers, cap, sizeof(int)) ||
        resize(&cut.attr_at, cap, sizeof(int)))
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
    return reserve(&cut.in_entry, &cap_inputs, need, sizeof *cut.in_entry);
}

static int reserve_sig(int need) {
    return reserve(&cut.sig, &cap_sig, need, sizeof *cut.sig);
}

static inline void put(uint64_t w) {
    cut.sig[cut.sig_len++] = w;
    cut.hash = deft_cut_mix(cut.hash, w);
}

int deft_cut_sign(deft_cut_t *c, int n, const uint64_t *words) {
    (void)c;
    if (reserve_sig(cut.sig_len + n)) return -1;
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
        uint64_t w = 0;
        memcpy(&w, text + at, len - at < 8 ? len - at : 8);
        put(w);
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

static inline void sign_word(signer_t *s, uint64_t w) {
    *s->at++ = w;
    s->hash = deft_cut_mix(s->hash, w);
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
    cut.attr_at[id] = -1;
    cut.nodes[id] = node;
    cut.leaf[id] = leaf;
    cut.row_ptr[id] = first;
    cut.in_ptr[id] = cut.num_inputs;
    cut.consumers[id] = 0;
    cut.num_entries = first + node->num_outputs;
    signer_t s = {cut.sig + cut.sig_len, cut.hash};
    uint64_t where = (uint64_t)rec->device.type << 32 | (uint64_t)rec->device.id << 40;
    if (leaf) {
        sign_word(&s, (uint64_t)node->num_outputs << 1 | 1);
        if (cut.kind == DEFT_CUT_NEEDS_GRADIENT) sign_word(&s, where), sign_outputs(&s, node, rec);
    } else {
        sign_word(&s, (uint64_t)(uintptr_t)node->op);
        sign_word(&s, (uint64_t)node->num_inputs | (uint64_t)node->num_outputs << 16 | where);
        int *row_ptr = cut.row_ptr, *consumers = cut.consumers;
        for (int k = 0; k < node->num_inputs; k++) {
            int src = deft_record_of(node->inputs[k].node)->walk_id;
            int e = row_ptr[src] + node->inputs[k].index;
            cut.in_entry[cut.num_inputs + k] = e; /* indexed: the list is NULL until an input */
            consumers[src]++;
            sign_word(&s, (uint64_t)e << 1 | (rec->save_in >> k & 1));
        }
        cut.num_inputs += node->num_inputs;
        sign_outputs(&s, node, rec);
    }
    cut.sig_len = (int)(s.at - cut.sig);
    cut.hash = s.hash;
    if (leaf || cut.kind != DEFT_CUT_NEEDS_GRADIENT) return 0;
    cut.attr_at[id] = cut.sig_len;
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
    cut.row_ptr[cut.num_nodes] = cut.num_entries;
    cut.in_ptr[cut.num_nodes] = cut.num_inputs;
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

static bool same_desc(const deft_desc_t *a, const deft_desc_t *b) {
    if (a->dtype != b->dtype || a->shape.ndim != b->shape.ndim) return false;
    for (int j = 0; j < a->shape.ndim; j++)
        if (a->shape.dims[j] != b->shape.dims[j]) return false;
    return true;
}

/* The words after `w` if they are text's as sign_string wrote them, else NULL. Those words
 * hold the bytes in order, zero-padded, then the length: equal lengths and bytes suffice. */
static const uint64_t *string_agrees(const char *text, const uint64_t *w, const uint64_t *end) {
    size_t len = strlen(text), words = (len + 7) / 8;
    if ((size_t)(end - w) <= words || w[words] != len || memcmp(w, text, len)) return NULL;
    return w + words + 1;
}

/* The node's parameters are the ones signed at w (sign_attrs), before end. */
static bool attrs_agree(const deft_node_t *node, const uint64_t *w, const uint64_t *end) {
    if (w >= end || *w++ != (uint64_t)node->attrs.count) return false;
    for (int a = 0; w && a < node->attrs.count; a++) {
        w = string_agrees(node->attrs.keys[a], w, end);
        w = w ? string_agrees(node->attrs.vals[a], w, end) : NULL;
    }
    return w != NULL;
}

/* Its outputs have the shape's recorded descs, and it the shape's device. */
static bool outputs_agree(const deft_cut_shape_t *s, int first, int nout, const deft_node_t *node,
                          const deft_record_t *rec) {
    if (node->num_outputs != nout || !deft_device_equal(rec->device, s->devices[first]))
        return false;
    for (int k = 0; k < nout; k++)
        if (!same_desc(&rec->desc[k], &s->desc[first + k])) return false;
    return true;
}

/* Node `node` stands for node i of the shape (as a walk would number it): its record agrees with
 * the words the signature holds for i. */
static bool node_agrees(const deft_cut_shape_t *s, int i, const deft_node_t *node,
                        const deft_record_t *rec) {
    int first = s->row_ptr[i], nout = s->row_ptr[i + 1] - first;
    bool gradient = s->kind == DEFT_CUT_NEEDS_GRADIENT;
    if (s->leaf[i])
        return gradient ? !rec->requires_grad && outputs_agree(s, first, nout, node, rec)
                        : rec->computed && node->num_outputs == nout;
    if ((gradient ? !rec->requires_grad : rec->computed) || node->op != s->ops[i] ||
        node->num_inputs != s->in_ptr[i + 1] - s->in_ptr[i] || rec->save_in != s->save_in[i] ||
        !outputs_agree(s, first, nout, node, rec))
        return false;
    return !gradient || attrs_agree(node, s->words + s->attr_at[i], s->words + s->num_words);
}

/* Node `node` is the one node i of the shape stands for: the first to claim i marks the node
 * (a node claimed for another i, or i claimed by another node, is a different graph). */
static bool claim(int i, const deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    if (!rec) return false;
    if (rec->walk == epoch) return rec->walk_id == i && cut.nodes[i] == node;
    if (cut.nodes[i]) return false;
    rec->walk = epoch, rec->walk_id = i;
    cut.nodes[i] = (deft_node_t *)node;
    return true;
}

/* From the last node to the first (consumers before producers): each node claimed by a root
 * or a consumer agrees, and claims its inputs. */
static bool follow(const deft_cut_shape_t *s) {
    for (int i = s->num_nodes - 1; i >= 0; i--) {
        const deft_node_t *node = cut.nodes[i];
        if (!node || !node_agrees(s, i, node, deft_record_of(node))) return false;
        for (int k = 0, r = s->in_ptr[i]; !s->leaf[i] && k < node->num_inputs; k++, r++) {
            int src = s->in_node[r];
            if (node->inputs[k].index != s->in_entry[r] - s->row_ptr[src] ||
                !claim(src, node->inputs[k].node))
                return false;
        }
    }
    return true;
}

static void copy_tables(const deft_cut_shape_t *s) {
    int n = s->num_nodes;
    for (int i = 0; i < n; i++) cut.leaf[i] = s->leaf[i];
    memcpy(cut.row_ptr, s->row_ptr, (size_t)(n + 1) * sizeof(int));
    memcpy(cut.in_ptr, s->in_ptr, (size_t)(n + 1) * sizeof(int));
    memcpy(cut.consumers, s->consumers, (size_t)n * sizeof(int));
    memcpy(cut.in_entry, s->in_entry, (size_t)s->num_inputs * sizeof(int));
    cut.num_nodes = n, cut.num_entries = s->num_entries, cut.num_inputs = s->num_inputs;
}

bool deft_cut_match(const deft_cut_shape_t *s, int n, const deft_entry_t *roots, deft_cut_t **out) {
    /* out of memory: the walk will say so */
    if (n != s->num_roots || reserve_nodes(s->num_nodes) || reserve_inputs(s->num_inputs))
        return false;
    epoch++;
    cut.kind = s->kind;
    cut.sig_len = 0, cut.hash = 0;
    memset(cut.nodes, 0, (size_t)s->num_nodes * sizeof *cut.nodes);
    for (int r = 0; r < n; r++) {
        int src = s->root_node[r];
        if (roots[r].index != s->roots[r] - s->row_ptr[src] || !claim(src, roots[r].node))
            return false;
    }
    if (!follow(s)) return false;
    copy_tables(s);
    *out = &cut;
    return true;
}
