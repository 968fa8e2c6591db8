/* Trigger plans of deferred compute (deferred_plan.h). */
#include "core/imperative/deferred_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/imperative/cut.h"
#include "core/imperative/record.h"

/* Per entry of the last walk (under the record lock): why it outlives the run, and why as its own
 * record says (deft_cut_outlives), its live array. */
static unsigned char *why, *own;
static deft_ndarray_t **live;  /* retained for the run */
static deft_ndarray_t **taken; /* per destination of the plan: the live arrays handed out */
static int cap_entries;
static deft_cut_t *c; /* the last walk */

static int oom(void) {
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a deferred compute run");
}

static int reserve_entries(int need) {
    if (need <= cap_entries) return 0;
    int cap = cap_entries ? cap_entries : 64;
    while (cap < need) cap *= 2;
    unsigned char *w = realloc(why, (size_t)cap);
    if (w) why = w;
    unsigned char *o = w ? realloc(own, (size_t)cap) : NULL;
    if (o) own = o;
    deft_ndarray_t **l = o ? realloc(live, (size_t)cap * sizeof *l) : NULL;
    if (l) live = l;
    deft_ndarray_t **t = l ? realloc(taken, (size_t)cap * sizeof *t) : NULL;
    if (!t) return oom();
    taken = t;
    cap_entries = cap;
    return 0;
}

/* Output k's live lazy array, retained, or NULL. Freed meanwhile on another thread: its last
 * reference is gone (try_retain fails), and the freeing waits for this walk before the memory
 * goes (record.c). */
static deft_ndarray_t *retain_live(const deft_record_t *rec, int k) {
    deft_ndarray_t *arr = __atomic_load_n(&rec->live[k], __ATOMIC_SEQ_CST);
    return arr ? deft_ndarray_try_retain(arr) : NULL;
}

static void drop_live(void) {
    for (int e = 0; e < c->num_entries; e++) deft_ndarray_release(live[e]);
}

/* Per entry, why it outlives the run (its consumers all counted now); live arrays are retained
 * for the run. */
static int outliving(void) {
    if (reserve_entries(c->num_entries + 8)) return -1;
    for (int i = 0; i < c->num_nodes; i++) {
        const deft_node_t *node = c->nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        int first = c->row_ptr[i];
        if (c->leaf[i]) {
            for (int k = 0; k < node->num_outputs; k++)
                why[first + k] = own[first + k] = 0, live[first + k] = NULL;
            continue;
        }
        unsigned char needed = deft_cut_needed(node, c->consumers[i]);
        for (int k = 0; k < node->num_outputs; k++) {
            deft_ndarray_t *arr = retain_live(rec, k);
            live[first + k] = arr;
            own[first + k] = why[first + k] = deft_cut_outlives(rec, needed, k, arr);
        }
        for (int k = 0; rec->save_in && k < node->num_inputs; k++)
            if (rec->save_in >> k & 1) why[c->in_entry[c->in_ptr[i] + k]] |= DEFT_OUT_SAVED;
    }
    return 0;
}

/* Why each entry outlives the run, into the signature: 8 entries a word. */
static int sign_outliving(void) {
    if (outliving()) return -1;
    memset(why + c->num_entries, 0, 8);
    uint64_t words[64];
    for (int e = 0; e < c->num_entries;) {
        int n = 0;
        for (; n < 64 && e < c->num_entries; n++, e += 8) memcpy(&words[n], why + e, 8);
        if (deft_cut_sign(c, n, words)) {
            drop_live();
            return -1;
        }
    }
    return 0;
}

/* ---- the cache: a short list, most recently used first ---- */

static deft_trigger_plan_t *cache;
static int cached, capacity = 64;
static long hits, misses, matched;

void deft_trigger_plan_release(deft_trigger_plan_t *p) {
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    deft_memory_plan_free(&p->memory);
    free(atomic_load(&p->graph.unwanted));
    free(atomic_load(&p->spare_run));
    free(p);
}

static deft_trigger_plan_t *cache_find(uint64_t hash) {
    for (deft_trigger_plan_t **at = &cache; *at; at = &(*at)->next) {
        deft_trigger_plan_t *p = *at;
        if (p->hash != hash || p->sig_len != c->sig_len ||
            memcmp(p->sig, c->sig, (size_t)c->sig_len * sizeof *c->sig))
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

long deft_trigger_plan_matched(void) {
    deft_record_lock();
    long m = matched;
    deft_record_unlock();
    return m;
}

void deft_trigger_plan_set_capacity(int cap, int *prev) {
    deft_record_lock();
    if (prev) *prev = capacity;
    capacity = cap < 0 ? 0 : cap;
    cache_trim(capacity);
    deft_record_unlock();
}

/* ---- making a plan ---- */

static deft_trigger_plan_t *plan_alloc(uint64_t hash, int nroots) {
    size_t n = (size_t)c->num_nodes + 1, e = (size_t)c->num_entries + 1,
           in = (size_t)c->num_inputs + 1;
    size_t head = (sizeof(deft_trigger_plan_t) + 15) & ~(size_t)15;
    size_t bytes =
        head + (size_t)c->sig_len * sizeof(uint64_t) + 3 * n * sizeof(int) + 2 * in * sizeof(int) +
        n * (sizeof(bool) + 2 * sizeof(char *)) + n * sizeof(uint64_t) +
        2 * (size_t)nroots * sizeof(int) +
        e * (sizeof(deft_desc_t) + sizeof(deft_tensor_t) + sizeof(bool) + sizeof(deft_device_t) +
             4 * sizeof(int) + 2 * sizeof(deft_plan_value_t) + 2) +
        16 * 24;
    deft_trigger_plan_t *p = calloc(1, bytes);
    if (!p) return NULL;
    char *at = (char *)p + head;
    atomic_init(&p->refs, 1);
    atomic_init(&p->spare_run, NULL);
    p->hash = hash;
    p->sig_len = c->sig_len;
    p->sig = deft_carve(&at, (size_t)c->sig_len, sizeof *p->sig);
    memcpy(p->sig, c->sig, (size_t)c->sig_len * sizeof *p->sig);
    deft_graph_t *g = &p->graph;
    g->num_nodes = c->num_nodes;
    g->row_ptr = memcpy(deft_carve(&at, n, sizeof(int)), c->row_ptr, n * sizeof(int));
    g->in_ptr = memcpy(deft_carve(&at, n, sizeof(int)), c->in_ptr, n * sizeof(int));
    g->in_entry = deft_carve(&at, in, sizeof(int));
    if (c->num_inputs) memcpy(g->in_entry, c->in_entry, (size_t)c->num_inputs * sizeof(int));
    g->leaf = deft_carve(&at, n, sizeof *g->leaf);
    g->names = deft_carve(&at, n, sizeof *g->names);
    p->types.num_entries = c->num_entries;
    p->types.desc = deft_carve(&at, e, sizeof *p->types.desc);
    p->types.known = deft_carve(&at, e, sizeof *p->types.known);
    p->devices = deft_carve(&at, e, sizeof *p->devices);
    p->arena = deft_carve(&at, e, sizeof *p->arena);
    p->tensors = deft_carve(&at, e, sizeof *p->tensors);
    p->dest_of = deft_carve(&at, e, sizeof *p->dest_of);
    p->leaf_of = deft_carve(&at, e, sizeof *p->leaf_of);
    p->dest = deft_carve(&at, e, sizeof *p->dest);
    p->leaf = deft_carve(&at, e, sizeof *p->leaf);
    p->arena_slot = deft_carve(&at, e, sizeof *p->arena_slot);
    deft_cut_shape_t *s = &p->shape;
    s->outlives = deft_carve(&at, e, sizeof *s->outlives);
    s->ops = deft_carve(&at, n, sizeof *s->ops);
    s->save_in = deft_carve(&at, n, sizeof *s->save_in);
    s->consumers = deft_carve(&at, n, sizeof *s->consumers);
    s->in_node = deft_carve(&at, in, sizeof *s->in_node);
    s->roots = deft_carve(&at, (size_t)nroots, sizeof *s->roots);
    s->root_node = deft_carve(&at, (size_t)nroots, sizeof *s->root_node);
    return p;
}

/* The cut's shape, for matching later graphs against it (cut.h): the tables the plan has, the
 * walk's per-node words, the roots, and why each entry outlives the run by its own record (why it
 * does by its consumers' records follows from their saved inputs, which the match compares). */
static void keep_shape(deft_trigger_plan_t *p, int nroots, const deft_entry_t *roots) {
    deft_cut_shape_t *s = &p->shape;
    const deft_graph_t *g = &p->graph;
    *s = (deft_cut_shape_t){.kind = DEFT_CUT_UNCOMPUTED,
                            .num_nodes = c->num_nodes,
                            .num_entries = c->num_entries,
                            .num_inputs = c->num_inputs,
                            .num_roots = nroots,
                            .row_ptr = g->row_ptr,
                            .in_ptr = g->in_ptr,
                            .in_entry = g->in_entry,
                            .consumers = s->consumers,
                            .in_node = s->in_node,
                            .roots = s->roots,
                            .root_node = s->root_node,
                            .leaf = g->leaf,
                            .ops = s->ops,
                            .save_in = s->save_in,
                            .desc = p->types.desc,
                            .devices = p->devices,
                            .outlives = s->outlives};
    memcpy((int *)s->consumers, c->consumers, (size_t)c->num_nodes * sizeof(int));
    deft_cut_fill_shape(c, nroots, roots, (const deft_op_entry_t **)s->ops, (uint64_t *)s->save_in,
                        (int *)s->in_node, (int *)s->roots, (int *)s->root_node);
    memcpy((unsigned char *)s->outlives, own, (size_t)c->num_entries);
}

/* Per node: the names of errors (its operator's), leaves, and what the types say. */
static void describe(deft_trigger_plan_t *p) {
    deft_graph_t *g = &p->graph;
    for (int i = 0; i < c->num_nodes; i++) {
        const deft_node_t *node = c->nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        g->leaf[i] = c->leaf[i];
        g->names[i] = (char *)(node->op ? node->op->op->name : "variable");
        p->blocking = p->blocking || (!rec->computed && node->op->op->blocking);
        p->mutates = p->mutates || (!rec->computed && deft_op_mutates_any(node->op->op));
        p->saves = p->saves || (!rec->computed && (rec->save_in | rec->save_out));
        p->draws = p->draws || (!rec->computed && node->op->op->nondeterministic);
        for (int k = 0; k < node->num_outputs; k++) {
            int e = c->row_ptr[i] + k;
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
    bool *pinned = calloc((size_t)c->num_entries + 1, sizeof *pinned);
    if (!pinned) return oom();
    bool transient = false;
    for (int i = 0; i < g->num_nodes; i++)
        for (int e = g->row_ptr[i]; !g->leaf[i] && e < g->row_ptr[i + 1]; e++)
            transient = transient || !(pinned[e] = why[e] != 0);
    g->nodes = c->nodes; /* the planner looks at the operators */
    int status = transient ? deft_plan_memory(g, &p->types, true, pinned, &p->memory) : 0;
    g->nodes = NULL;
    free(pinned);
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        for (int e = g->row_ptr[i]; !g->leaf[i] && e < g->row_ptr[i + 1]; e++) {
            const deft_desc_t *d = &p->types.desc[e];
            size_t nbytes; /* checked when recorded: this cannot fail, but says so */
            if (deft_shape_nbytes(&d->shape, deft_dtype_size(d->dtype), &nbytes)) return -1;
            if (why[e]) {
                p->dest_of[e] = p->num_dest;
                p->dest[p->num_dest++] =
                    (deft_plan_value_t){e, i, e - g->row_ptr[i], why[e], nbytes};
                p->own_bytes += nbytes;
                continue;
            }
            int slot = 0;
            while (slot < p->num_slots && !deft_device_equal(p->slot_device[slot], p->devices[e]))
                slot++;
            if (slot == p->num_slots) p->slot_device[p->num_slots++] = p->devices[e];
            p->arena_slot[p->num_arena] = (unsigned char)slot;
            p->arena[p->num_arena++] = e;
            p->tensors[e] = (deft_tensor_t){d->shape, d->dtype, p->devices[e], NULL,
                                            (size_t)p->memory.offset[e]};
        }
    }
    p->own_bytes += (size_t)p->num_slots * p->memory.arena_bytes;
    return status;
}

/* Per node, bit k: output k is read by no node and kept by nobody, so its kernel may skip it. */
static int mark_unwanted(deft_trigger_plan_t *p) {
    deft_graph_t *g = &p->graph;
    uint64_t *unwanted = calloc((size_t)g->num_nodes + 1, sizeof *unwanted);
    bool *read = calloc((size_t)c->num_entries + 1, sizeof *read);
    if (!unwanted || !read) {
        free(unwanted), free(read);
        return oom();
    }
    for (int r = 0; r < g->in_ptr[g->num_nodes]; r++) read[g->in_entry[r]] = true;
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; !g->leaf[i] && k < g->row_ptr[i + 1] - g->row_ptr[i] && k < 64; k++)
            if (!read[g->row_ptr[i] + k] && !why[g->row_ptr[i] + k]) unwanted[i] |= 1ull << k;
    free(read);
    atomic_store(&g->unwanted, unwanted);
    return 0;
}

static int plan_make(uint64_t hash, int nroots, const deft_entry_t *roots,
                     deft_trigger_plan_t **out) {
    deft_trigger_plan_t *p = plan_alloc(hash, nroots);
    if (!p) return oom();
    describe(p);
    keep_shape(p, nroots, roots);
    list_leaf_reads(p);
    if (place_values(p) || mark_unwanted(p)) {
        deft_trigger_plan_release(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* How many of the most recently used plans a trigger matches before it walks. */
enum { MATCH_TRIES = 4 };

/* The live arrays of plan p's values outside the arena, retained into `taken` (the matched cut
 * c said which exist): false, none retained, when one was freed meanwhile. */
static bool take_live(const deft_trigger_plan_t *p) {
    for (int d = 0; d < p->num_dest; d++) {
        const deft_plan_value_t *v = &p->dest[d];
        taken[d] = v->why & DEFT_OUT_LIVE ? retain_live(deft_record_of(c->nodes[v->node]), v->index)
                                          : NULL;
        if (!taken[d] && v->why & DEFT_OUT_LIVE) {
            while (d > 0) deft_ndarray_release(taken[--d]);
            return false;
        }
    }
    return true;
}

/* The first of the most recently used plans whose shape the graph behind the roots has, with
 * the same values outliving the run (the cut, and `taken` its live arrays; moved to the front),
 * or NULL. */
static deft_trigger_plan_t *match_recent(int n, const deft_entry_t *roots) {
    int tries = 0;
    for (deft_trigger_plan_t **at = &cache; *at && tries < MATCH_TRIES;
         at = &(*at)->next, tries++) {
        deft_trigger_plan_t *p = *at;
        if (!deft_cut_match(&p->shape, n, roots, &c)) continue;
        if (reserve_entries(p->num_dest) || !take_live(p)) return NULL; /* the walk will see */
        *at = p->next;
        p->next = cache;
        cache = p;
        return p;
    }
    return NULL;
}

/* Walk the graph behind the roots and find or make the plan of its signature. 1: nothing to
 * compute. */
static int walk_and_plan(int n, const deft_entry_t *roots, deft_trigger_plan_t **plan) {
    if (deft_cut_walk(DEFT_CUT_UNCOMPUTED, n, roots, &c)) return -1;
    if (c->num_nodes == 0) return 1;
    if (sign_outliving()) return -1; /* nothing left retained */
    uint64_t hash = deft_cut_hash(c);
    deft_trigger_plan_t *p = cache_find(hash);
    if (p) {
        hits++;
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    } else {
        misses++;
        if (plan_make(hash, n, roots, &p)) {
            drop_live();
            return -1;
        }
        cache_add(p);
    }
    *plan = p;
    return 0;
}

int deft_trigger_plan_get(int n, const deft_entry_t *roots, deft_trigger_cut_t *cut,
                          deft_trigger_plan_t **plan) {
    deft_trigger_plan_t *p = match_recent(n, roots);
    if (p) {
        hits++, matched++;
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    } else {
        int status = walk_and_plan(n, roots, &p);
        if (status) return status;
        for (int d = 0; d < p->num_dest; d++) taken[d] = live[p->dest[d].entry];
    }
    cut->num_nodes = c->num_nodes;
    cut->nodes = c->nodes;
    cut->live = taken;
    *plan = p;
    return 0;
}
