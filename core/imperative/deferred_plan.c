/* Trigger plans of deferred compute (deferred_plan.h). */
#include "core/imperative/deferred_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/imperative/record.h"

/* ---- the walk's scratch: grown as needed, kept between triggers, under the lock ---- */

typedef struct frame {
    deft_node_t *node;
    int k; /* the next input to visit */
} frame_t;

static struct {
    uint64_t epoch; /* marks the records the current walk has reached */
    int cap_nodes, cap_inputs, cap_entries, cap_sig;
    deft_node_t **nodes;
    frame_t *frames;
    int *row_ptr, *in_ptr, *consumers; /* per node */
    int *in_entry;                     /* per input slot */
    unsigned char *why;                /* per entry: DEFT_OUT_* */
    deft_ndarray_t **live;             /* per entry: the live array, retained for the run */
    deft_ndarray_t **taken;            /* per destination: the cut's live arrays */
    uint64_t *sig;
    int num_nodes, num_inputs, num_entries, sig_len;
} s;

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
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred compute run");
}

static int reserve_nodes(int need) {
    if (need + 1 <= s.cap_nodes) return 0;
    int cap = next_cap(s.cap_nodes, need + 1);
    if (resize(&s.nodes, cap, sizeof *s.nodes) || resize(&s.frames, cap, sizeof *s.frames) ||
        resize(&s.row_ptr, cap, sizeof *s.row_ptr) || resize(&s.in_ptr, cap, sizeof *s.in_ptr) ||
        resize(&s.consumers, cap, sizeof *s.consumers))
        return oom();
    s.cap_nodes = cap;
    return 0;
}

static int reserve_inputs(int need) {
    if (need <= s.cap_inputs) return 0;
    int cap = next_cap(s.cap_inputs, need);
    if (resize(&s.in_entry, cap, sizeof *s.in_entry)) return oom();
    s.cap_inputs = cap;
    return 0;
}

static int reserve_entries(int need) {
    if (need <= s.cap_entries) return 0;
    int cap = next_cap(s.cap_entries, need);
    if (resize(&s.why, cap, sizeof *s.why) || resize(&s.live, cap, sizeof *s.live) ||
        resize(&s.taken, cap, sizeof *s.taken))
        return oom();
    s.cap_entries = cap;
    return 0;
}

static int reserve_sig(int need) {
    if (need <= s.cap_sig) return 0;
    int cap = next_cap(s.cap_sig, need);
    if (resize(&s.sig, cap, sizeof *s.sig)) return oom();
    s.cap_sig = cap;
    return 0;
}

/* ---- the walk: post-order, each node once (its record marked), leaves = computed nodes ----
 *
 * Each node's structural words are written to the signature as it is finished
 * (its inputs are then numbered): operator, counts and device, input entries
 * (and whether the node saves them for backward), output shapes and dtypes. */

static inline void put(uint64_t w, uint64_t *h) {
    s.sig[s.sig_len++] = w;
    /* rotate-xor of independent products: cheap, and collisions only cost a comparison */
    *h = (*h << 7 | *h >> 57) ^ (w * 0x9E3779B97F4A7C15ull);
}

/* Room for a node's entries, inputs and words, reserved as it is finished. */
static int reserve_finish(const deft_node_t *node) {
    int words = 2 + node->num_inputs + node->num_outputs * (1 + DEFT_SHAPE_MAX_NDIM);
    return reserve_inputs(s.num_inputs + node->num_inputs) || reserve_sig(s.sig_len + words) ? -1
                                                                                             : 0;
}

static int finish(deft_node_t *node, deft_record_t *rec, uint64_t *h) {
    if (reserve_finish(node)) return -1;
    int id = s.num_nodes++;
    rec->walk_id = id;
    s.nodes[id] = node;
    s.row_ptr[id] = s.num_entries;
    s.in_ptr[id] = s.num_inputs;
    s.consumers[id] = 0;
    s.num_entries += node->num_outputs;
    if (rec->computed) {
        put((uint64_t)node->num_outputs << 1 | 1, h);
        return 0;
    }
    put((uint64_t)(uintptr_t)node->op, h);
    put((uint64_t)node->num_inputs | (uint64_t)node->num_outputs << 16 |
            (uint64_t)rec->device.type << 32 | (uint64_t)rec->device.id << 40,
        h);
    for (int k = 0; k < node->num_inputs; k++) {
        int src = deft_record_of(node->inputs[k].node)->walk_id;
        int e = s.row_ptr[src] + node->inputs[k].index;
        s.in_entry[s.num_inputs++] = e;
        s.consumers[src]++;
        put((uint64_t)e << 1 | (rec->save_in >> k & 1), h);
    }
    for (int k = 0; k < node->num_outputs; k++) {
        const deft_desc_t *d = &rec->desc[k];
        put((uint64_t)d->shape.ndim | (uint64_t)d->dtype << 8, h);
        for (int j = 0; j < d->shape.ndim; j++) put((uint64_t)d->shape.dims[j], h);
    }
    return 0;
}

/* Reached for the first time: mark it; a leaf is finished at once. 1: visit its inputs. */
static int reach(deft_node_t *node, int depth, uint64_t *h) {
    deft_record_t *rec = deft_record_of(node);
    if (!rec) return deft_error(DEFT_ERR_INTERNAL, "a recorded call has an input with no record");
    if (rec->walk == s.epoch) return 0;
    rec->walk = s.epoch;
    if (reserve_nodes(s.num_nodes + depth + 1)) return -1;
    if (rec->computed) return finish(node, rec, h);
    s.frames[depth] = (frame_t){node, 0};
    return 1;
}

static int walk_from(deft_node_t *start, uint64_t *h) {
    int top = reach(start, 0, h);
    if (top < 0) return -1;
    while (top > 0) {
        deft_node_t *node = s.frames[top - 1].node;
        int pushed = 0;
        while (!pushed && s.frames[top - 1].k < node->num_inputs) { /* reach may move frames */
            pushed = reach(node->inputs[s.frames[top - 1].k++].node, top, h);
            if (pushed < 0) return -1;
        }
        if (pushed) {
            top++;
            continue;
        }
        top--;
        if (finish(node, deft_record_of(node), h)) return -1;
    }
    return 0;
}

static int walk(int n, const deft_entry_t *roots, uint64_t *h) {
    s.epoch++;
    s.num_nodes = s.num_inputs = s.num_entries = s.sig_len = 0;
    for (int i = 0; i < n; i++)
        if (walk_from(roots[i].node, h)) return -1;
    s.row_ptr[s.num_nodes] = s.num_entries;
    s.in_ptr[s.num_nodes] = s.num_inputs;
    return 0;
}

/* Per entry, why it outlives the run (its consumers all counted now), 8 entries a word;
 * live arrays are retained for the run. */
static int sign_outliving(uint64_t *h) {
    if (reserve_entries(s.num_entries + 8) || reserve_sig(s.sig_len + s.num_entries / 8 + 1))
        return -1;
    for (int i = 0; i < s.num_nodes; i++) {
        const deft_node_t *node = s.nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        int first = s.row_ptr[i];
        if (rec->computed) {
            for (int k = 0; k < node->num_outputs; k++)
                s.why[first + k] = 0, s.live[first + k] = NULL;
            continue;
        }
        unsigned char needed = rec->pending > s.consumers[i] ? DEFT_OUT_NEEDED : 0;
        for (int k = 0; k < node->num_outputs; k++) {
            deft_ndarray_t *live = rec->live[k] ? deft_ndarray_try_retain(rec->live[k]) : NULL;
            s.live[first + k] = live;
            s.why[first + k] = (unsigned char)(needed | (live ? DEFT_OUT_LIVE : 0) |
                                               (rec->save_out >> k & 1 ? DEFT_OUT_SAVED : 0));
        }
        for (int k = 0; rec->save_in && k < node->num_inputs; k++)
            if (rec->save_in >> k & 1) s.why[s.in_entry[s.in_ptr[i] + k]] |= DEFT_OUT_SAVED;
    }
    memset(s.why + s.num_entries, 0, 8);
    for (int e = 0; e < s.num_entries; e += 8) {
        uint64_t w;
        memcpy(&w, s.why + e, sizeof w);
        put(w, h);
    }
    return 0;
}

static void drop_live(void) {
    for (int e = 0; e < s.num_entries; e++) deft_ndarray_release(s.live[e]);
}

/* ---- the cache: a short list, most recently used first ---- */

static deft_trigger_plan_t *cache;
static int cached, capacity = 64;
static long hits, misses;

void deft_trigger_plan_release(deft_trigger_plan_t *p) {
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    deft_memory_plan_free(&p->memory);
    free(atomic_load(&p->graph.unwanted));
    free(p);
}

static deft_trigger_plan_t *cache_find(uint64_t hash) {
    for (deft_trigger_plan_t **at = &cache; *at; at = &(*at)->next) {
        deft_trigger_plan_t *p = *at;
        if (p->hash != hash || p->sig_len != s.sig_len ||
            memcmp(p->sig, s.sig, (size_t)s.sig_len * sizeof *s.sig))
            continue;
        *at = p->next;
        p->next = cache;
        cache = p;
        return p;
    }
    return NULL;
}

static void cache_trim(int limit) {
    deft_trigger_plan_t **at = &cache;
    for (int n = 0; *at && n < limit; n++) at = &(*at)->next;
    while (*at) {
        deft_trigger_plan_t *p = *at;
        *at = p->next;
        cached--;
        deft_trigger_plan_release(p);
    }
}

static void cache_add(deft_trigger_plan_t *p) {
    if (capacity == 0) return;
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    p->next = cache;
    cache = p;
    cached++;
    cache_trim(capacity);
}

void deft_trigger_plan_stats(long *h, long *m, int *c) {
    deft_record_lock();
    if (h) *h = hits;
    if (m) *m = misses;
    if (c) *c = cached;
    deft_record_unlock();
}

void deft_trigger_plan_set_capacity(int cap, int *prev) {
    deft_record_lock();
    if (prev) *prev = capacity;
    capacity = cap < 0 ? 0 : cap;
    cache_trim(capacity);
    deft_record_unlock();
}

/* ---- making a plan ---- */

static deft_trigger_plan_t *plan_alloc(uint64_t hash) {
    size_t n = (size_t)s.num_nodes + 1, e = (size_t)s.num_entries + 1,
           in = (size_t)s.num_inputs + 1;
    size_t head = (sizeof(deft_trigger_plan_t) + 15) & ~(size_t)15;
    size_t bytes = head + (size_t)s.sig_len * sizeof(uint64_t) + 2 * n * sizeof(int) +
                   in * sizeof(int) + n * (sizeof(bool) + sizeof(char *)) +
                   e * (sizeof(deft_desc_t) + sizeof(bool) + sizeof(deft_device_t) +
                        4 * sizeof(int) + 2 * sizeof(deft_plan_value_t) + 1) +
                   16 * 16;
    deft_trigger_plan_t *p = calloc(1, bytes);
    if (!p) return NULL;
    char *at = (char *)p + head;
    atomic_init(&p->refs, 1);
    p->hash = hash;
    p->sig_len = s.sig_len;
    p->sig = deft_carve(&at, (size_t)s.sig_len, sizeof *p->sig);
    memcpy(p->sig, s.sig, (size_t)s.sig_len * sizeof *p->sig);
    deft_graph_t *g = &p->graph;
    g->num_nodes = s.num_nodes;
    g->row_ptr = memcpy(deft_carve(&at, n, sizeof(int)), s.row_ptr, n * sizeof(int));
    g->in_ptr = memcpy(deft_carve(&at, n, sizeof(int)), s.in_ptr, n * sizeof(int));
    g->in_entry = deft_carve(&at, in, sizeof(int));
    if (s.num_inputs) memcpy(g->in_entry, s.in_entry, (size_t)s.num_inputs * sizeof(int));
    g->leaf = deft_carve(&at, n, sizeof *g->leaf);
    g->names = deft_carve(&at, n, sizeof *g->names);
    p->types.num_entries = s.num_entries;
    p->types.desc = deft_carve(&at, e, sizeof *p->types.desc);
    p->types.known = deft_carve(&at, e, sizeof *p->types.known);
    p->devices = deft_carve(&at, e, sizeof *p->devices);
    p->arena = deft_carve(&at, e, sizeof *p->arena);
    p->dest_of = deft_carve(&at, e, sizeof *p->dest_of);
    p->leaf_of = deft_carve(&at, e, sizeof *p->leaf_of);
    p->dest = deft_carve(&at, e, sizeof *p->dest);
    p->leaf = deft_carve(&at, e, sizeof *p->leaf);
    p->arena_slot = deft_carve(&at, e, sizeof *p->arena_slot);
    return p;
}

/* Per node: the names of errors (its operator's), leaves, and what the types say. */
static void describe(deft_trigger_plan_t *p) {
    deft_graph_t *g = &p->graph;
    for (int i = 0; i < s.num_nodes; i++) {
        const deft_node_t *node = s.nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        g->leaf[i] = rec->computed;
        g->names[i] = (char *)(node->op ? node->op->op->name : "variable");
        p->blocking = p->blocking || (!rec->computed && node->op->op->blocking);
        p->mutates = p->mutates || (!rec->computed && node->op->op->mutate_inputs);
        p->saves = p->saves || (!rec->computed && (rec->save_in | rec->save_out));
        for (int k = 0; k < node->num_outputs; k++) {
            int e = s.row_ptr[i] + k;
            p->types.desc[e] = rec->desc[k];
            p->types.known[e] = true;
            p->devices[e] = rec->device;
            p->dest_of[e] = p->leaf_of[e] = -1;
        }
    }
}

/* The leaf values the run reads, each once. */
static void list_leaf_reads(deft_trigger_plan_t *p) {
    const deft_graph_t *g = &p->graph;
    for (int i = 0; i < g->num_nodes; i++) {
        for (int r = g->in_ptr[i]; !g->leaf[i] && r < g->in_ptr[i + 1]; r++) {
            int e = g->in_entry[r], src = deft_graph_entry_node(g, e);
            if (!g->leaf[src] || p->leaf_of[e] >= 0) continue;
            p->leaf_of[e] = p->num_leaf;
            p->leaf[p->num_leaf++] = (deft_plan_value_t){e, src, e - g->row_ptr[src], 0, 0};
        }
    }
}

/* Values outside the arena, and the arena's entries and devices. */
static int place_values(deft_trigger_plan_t *p) {
    deft_graph_t *g = &p->graph;
    bool *pinned = calloc((size_t)s.num_entries + 1, sizeof *pinned);
    if (!pinned) return oom();
    bool transient = false;
    for (int i = 0; i < g->num_nodes; i++)
        for (int e = g->row_ptr[i]; !g->leaf[i] && e < g->row_ptr[i + 1]; e++)
            transient = transient || !(pinned[e] = s.why[e] != 0);
    g->nodes = s.nodes; /* the planner looks at the operators */
    int status = transient ? deft_plan_memory(g, &p->types, true, pinned, &p->memory) : 0;
    g->nodes = NULL;
    free(pinned);
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        for (int e = g->row_ptr[i]; !g->leaf[i] && e < g->row_ptr[i + 1]; e++) {
            const deft_desc_t *d = &p->types.desc[e];
            size_t nbytes; /* checked when recorded: this cannot fail, but says so */
            if (deft_shape_nbytes(&d->shape, deft_dtype_size(d->dtype), &nbytes)) return -1;
            if (s.why[e]) {
                p->dest_of[e] = p->num_dest;
                p->dest[p->num_dest++] =
                    (deft_plan_value_t){e, i, e - g->row_ptr[i], s.why[e], nbytes};
                p->own_bytes += nbytes;
                continue;
            }
            int slot = 0;
            while (slot < p->num_slots && !deft_device_equal(p->slot_device[slot], p->devices[e]))
                slot++;
            if (slot == p->num_slots) p->slot_device[p->num_slots++] = p->devices[e];
            p->arena_slot[p->num_arena] = (unsigned char)slot;
            p->arena[p->num_arena++] = e;
        }
    }
    p->own_bytes += (size_t)p->num_slots * p->memory.arena_bytes;
    return status;
}

/* Per node, bit k: output k is read by no node and kept by nobody, so its kernel may skip it. */
static int mark_unwanted(deft_trigger_plan_t *p) {
    deft_graph_t *g = &p->graph;
    uint64_t *unwanted = calloc((size_t)g->num_nodes + 1, sizeof *unwanted);
    bool *read = calloc((size_t)s.num_entries + 1, sizeof *read);
    if (!unwanted || !read) {
        free(unwanted), free(read);
        return oom();
    }
    for (int r = 0; r < g->in_ptr[g->num_nodes]; r++) read[g->in_entry[r]] = true;
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; !g->leaf[i] && k < g->row_ptr[i + 1] - g->row_ptr[i] && k < 64; k++)
            if (!read[g->row_ptr[i] + k] && !s.why[g->row_ptr[i] + k]) unwanted[i] |= 1ull << k;
    free(read);
    atomic_store(&g->unwanted, unwanted);
    return 0;
}

static int plan_make(uint64_t hash, deft_trigger_plan_t **out) {
    deft_trigger_plan_t *p = plan_alloc(hash);
    if (!p) return oom();
    describe(p);
    list_leaf_reads(p);
    if (place_values(p) || mark_unwanted(p)) {
        deft_trigger_plan_release(p);
        return -1;
    }
    *out = p;
    return 0;
}

int deft_trigger_plan_get(int n, const deft_entry_t *roots, deft_cut_t *cut,
                          deft_trigger_plan_t **plan) {
    uint64_t hash = 0;
    if (walk(n, roots, &hash)) return -1;
    if (s.num_nodes == 0) return 1;
    if (sign_outliving(&hash)) return -1; /* nothing retained yet */
    hash ^= hash >> 29;
    deft_trigger_plan_t *p = cache_find(hash);
    if (p) {
        hits++;
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    } else {
        misses++;
        if (plan_make(hash, &p)) {
            drop_live();
            return -1;
        }
        cache_add(p);
    }
    for (int d = 0; d < p->num_dest; d++) s.taken[d] = s.live[p->dest[d].entry];
    cut->num_nodes = s.num_nodes;
    cut->nodes = s.nodes;
    cut->live = s.taken;
    *plan = p;
    return 0;
}
