/*
 * Backward through the recorded graph.
 *
 * The part of the recorded graph between the heads and the variables (a
 * graph cut at nodes that need no gradient) goes through the gradient pass;
 * the backward nodes are copied into a symbol whose arguments are the
 * forward values they read (saved by the recorded nodes) and the head
 * gradients, and an executor runs it. The symbol and its executor (with its
 * memory plan) are kept in a small cache keyed by the forward graph's
 * shape, so a training loop builds its backward once, not once per step;
 * and the shapes of the last few cuts are kept, so its forward graph is
 * matched to a seen shape node by node (cut.h), not walked and signed again.
 * The cache is bounded like an executor's plans (executor.h): at most
 * DEFT_PLAN_CACHE_SIZE plans and DEFT_PLAN_CACHE_BYTES bytes of arenas in
 * all, least recently used dropped first; DeftMemoryReleaseCached drops the
 * executors' arenas (they are planned again on the next backward).
 * With create_graph the backward nodes run as recorded imperative calls
 * instead, so their results can be differentiated again.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/hash.h"
#include "core/graph/gradient.h"
#include "core/imperative/view.h"
#include "core/imperative/autograd.h"
#include "core/imperative/cached_call.h"
#include "core/imperative/cut.h"
#include "core/imperative/deferred_plan.h"
#include "core/imperative/deferred.h"
#include "core/imperative/invoke.h"
#include "core/imperative/record.h"

/* ---- the forward graph and its key ---- */

static bool needs_no_gradient(const deft_node_t *node, void *ctx) {
    (void)ctx;
    const deft_record_t *rec = deft_record_of(node);
    return !rec || !rec->requires_grad;
}

/* A plan's key: the words of the forward cut's signature (cut.h), then the heads' entries and
 * the differentiated nodes. */
typedef struct key {
    unsigned char *bytes;
    size_t len;
} key_t;

/* ---- plans ---- */

typedef struct plan {
    uint64_t hash;
    size_t key_len;
    unsigned char *key;
    deft_symbol_t *sym; /* arguments "f<entry>" (forward values) and "h<head>" */
    deft_cached_op_t *exec;
    int num_inputs;
    int *bind; /* per executor input: forward entry id, or -1 - head index */
    struct plan *next;
} plan_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static plan_t *cache;
static _Atomic long plans_built, plan_hits;

long deft_autograd_plans_built(void) {
    return plans_built;
}

long deft_autograd_plan_hits(void) {
    return plan_hits;
}

static void plan_free(plan_t *p) {
    if (!p) return;
    free(p->key);
    deft_symbol_free(p->sym);
    deft_cached_op_release(p->exec);
    free(p->bind);
    free(p);
}

/* The cached plan for this key (moved to the front), or NULL. */
static plan_t *cache_find(uint64_t hash, const key_t *k) {
    plan_t **at = &cache;
    for (; *at; at = &(*at)->next) {
        plan_t *p = *at;
        if (p->hash != hash || p->key_len != k->len || memcmp(p->key, k->bytes, k->len)) continue;
        *at = p->next;
        p->next = cache;
        cache = p;
        return p;
    }
    return NULL;
}

/* Under the lock: drop least recently used plans while the cache is over
 * its bounds, never `keep` (the one just run). A dropped plan's executor
 * stays alive while runs queued on it need it (they hold it). */
static void cache_trim(const plan_t *keep) {
    size_t max_bytes;
    int max_plans;
    deft_plan_cache_limits(&max_bytes, &max_plans);
    for (;;) {
        int n = 0;
        size_t bytes = 0;
        plan_t **oldest = NULL;
        for (plan_t **at = &cache; *at; at = &(*at)->next) {
            n++;
            bytes += deft_cached_op_cached_bytes((*at)->exec);
            if (*at != keep) oldest = at;
        }
        if ((n <= max_plans && bytes <= max_bytes) || !oldest) return;
        plan_t *p = *oldest;
        *oldest = p->next;
        plan_free(p);
    }
}

/* ---- building a plan: the backward nodes as a standalone symbol ---- */

typedef struct copier {
    const deft_graph_t *fwd; /* the forward graph */
    deft_graph_t *bwd;       /* the backward nodes, cut at forward nodes */
    deft_node_t **copies;    /* per bwd node */
    deft_node_t **fvars;     /* per forward entry: its variable, made on first use */
    int status;
} copier_t;

static bool is_forward(const deft_node_t *node, void *ctx) {
    return deft_graph_node_id(ctx, node) >= 0;
}

/* The recorded shape and dtype of forward entry e. */
static const deft_desc_t *entry_desc(const deft_graph_t *fwd, int e) {
    int id = deft_graph_entry_node(fwd, e);
    return &deft_record_of(fwd->nodes[id])->desc[e - fwd->row_ptr[id]];
}

/* The variable standing for forward entry e. */
static deft_entry_t forward_var(copier_t *c, int e) {
    if (!c->fvars[e] && !c->status) {
        char name[32];
        snprintf(name, sizeof name, "f%d", e);
        c->status = deft_node_new_variable(name, NULL, 0, NULL, NULL, &c->fvars[e]);
    }
    return (deft_entry_t){c->fvars[e], 0};
}

/* Zeros of forward entry e's shape and device, made without its value. */
static deft_node_t *zeros_of(copier_t *c, int e) {
    const deft_desc_t *d = entry_desc(c->fwd, e);
    deft_device_t dev = deft_record_of(c->fwd->nodes[deft_graph_entry_node(c->fwd, e)])->device;
    char shape[DEFT_SHAPE_STR_MAX], ctx[DEFT_DEVICE_STR_MAX];
    deft_device_format(dev, ctx, sizeof ctx);
    const char *keys[] = {"dtype", "shape", "ctx"};
    const char *vals[] = {deft_dtype_name(d->dtype),
                          deft_shape_format(&d->shape, shape, sizeof shape), ctx};
    deft_node_t *node = NULL;
    if (!c->status)
        c->status =
            deft_node_new_op(deft_registry_find("_zeros"), NULL, 3, keys, vals, 0, NULL, &node);
    return node;
}

static deft_entry_t substitute(copier_t *c, const deft_entry_t *e) {
    int id = deft_graph_node_id(c->fwd, e->node);
    if (id >= 0) return forward_var(c, c->fwd->row_ptr[id] + e->index);
    return (deft_entry_t){c->copies[deft_graph_node_id(c->bwd, e->node)], e->index};
}

static void copy_node(copier_t *c, int i) {
    const deft_node_t *node = c->bwd->nodes[i];
    if (!node->op) { /* a head gradient variable: shared, it has no record */
        c->copies[i] = deft_node_retain((deft_node_t *)node);
        return;
    }
    deft_entry_t inputs[DEFT_OP_MAX_INPUTS];
    for (int k = 0; k < node->num_inputs; k++) inputs[k] = substitute(c, &node->inputs[k]);
    if (!c->status)
        c->status = deft_node_new_op(
            node->op, NULL, node->attrs.count, (const char *const *)node->attrs.keys,
            (const char *const *)node->attrs.vals, node->num_inputs, inputs, &c->copies[i]);
}

/* The symbol computing the gradient of each wrt node of fwd, its outputs in wrt order. */
static int backward_symbol(const deft_graph_t *fwd, int nwrt, const int *wrt, deft_symbol_t **out) {
    copier_t c = {.fwd = fwd};
    int nheads = fwd->num_outputs;
    deft_node_t **heads = calloc((size_t)nheads + 1, sizeof *heads);
    deft_entry_t *head_entries = calloc((size_t)nheads + 1, sizeof *head_entries);
    deft_entry_t *grads = calloc((size_t)nwrt + 1, sizeof *grads);
    deft_entry_t *result = calloc((size_t)nwrt + 1, sizeof *result);
    deft_node_t **zeros = calloc((size_t)nwrt + 1, sizeof *zeros);
    c.fvars = calloc((size_t)deft_graph_num_entries(fwd) + 1, sizeof *c.fvars);
    if (!heads || !head_entries || !grads || !result || !zeros || !c.fvars)
        c.status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward graph");
    for (int o = 0; !c.status && o < nheads; o++) {
        char name[32];
        snprintf(name, sizeof name, "h%d", o);
        c.status = deft_node_new_variable(name, NULL, 0, NULL, NULL, &heads[o]);
        head_entries[o] = (deft_entry_t){heads[o], 0};
    }
    if (!c.status) c.status = deft_gradient_entries(fwd, head_entries, nwrt, wrt, grads);
    int ngrads = 0;
    deft_entry_t *reached = calloc((size_t)nwrt + 1, sizeof *reached);
    for (int w = 0; reached && w < nwrt; w++)
        if (grads[w].node) reached[ngrads++] = grads[w];
    if (!reached && !c.status) c.status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    if (!c.status)
        c.status = deft_graph_build_cut(ngrads, reached, is_forward, (void *)fwd, &c.bwd);
    if (!c.status && !(c.copies = calloc((size_t)c.bwd->num_nodes + 1, sizeof *c.copies)))
        c.status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward graph");
    for (int i = 0; !c.status && i < c.bwd->num_nodes; i++)
        if (!is_forward(c.bwd->nodes[i], (void *)fwd)) copy_node(&c, i);
    for (int w = 0; !c.status && w < nwrt; w++) {
        if (grads[w].node) {
            result[w] = substitute(&c, &grads[w]);
        } else { /* no head depends on it */
            zeros[w] = zeros_of(&c, fwd->row_ptr[wrt[w]]);
            result[w] = (deft_entry_t){zeros[w], 0};
        }
    }
    if (!c.status) c.status = deft_symbol_from_entries(nwrt, result, out);
    for (int i = 0; c.copies && i < c.bwd->num_nodes; i++) deft_node_release(c.copies[i]);
    for (int e = 0; c.fvars && e < deft_graph_num_entries(fwd); e++) deft_node_release(c.fvars[e]);
    for (int w = 0; w < nwrt; w++) {
        if (grads) deft_node_release(grads[w].node);
        if (zeros) deft_node_release(zeros[w]);
    }
    for (int o = 0; heads && o < nheads; o++) deft_node_release(heads[o]);
    deft_graph_free(c.bwd);
    free(heads), free(head_entries), free(grads), free(result), free(zeros), free(reached);
    free(c.copies), free(c.fvars);
    return c.status;
}

/* Which forward entry or head each executor input stands for, from its name. */
static int bind_inputs(plan_t *p) {
    p->num_inputs = deft_cached_op_num_inputs(p->exec);
    if (!(p->bind = malloc(((size_t)p->num_inputs + 1) * sizeof *p->bind)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward plan");
    for (int i = 0; i < p->num_inputs; i++) {
        const char *name = deft_cached_op_input_name(p->exec, i);
        int index = atoi(name + 1);
        p->bind[i] = name[0] == 'f' ? index : -1 - index;
    }
    return 0;
}

static int build_plan(const deft_graph_t *fwd, int nwrt, const int *wrt, key_t *k, uint64_t hash,
                      plan_t **out) {
    plan_t *p = calloc(1, sizeof *p);
    if (!p) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward plan");
    p->hash = hash, p->key = k->bytes, p->key_len = k->len;
    k->bytes = NULL;
    if (backward_symbol(fwd, nwrt, wrt, &p->sym) || deft_cached_op_new(p->sym, true, &p->exec) ||
        bind_inputs(p)) {
        plan_free(p);
        return -1;
    }
    plans_built++;
    *out = p;
    return 0;
}

/* ---- running ---- */

typedef struct backward {
    deft_graph_t *fwd; /* as walked (a view, heads retained), or indexed when create_graph */
    bool view;
    uint64_t *key; /* the plan's key so far (owned), with room for the wrt ids */
    int key_len;
    uint64_t hash;
    int nwrt;
    int *wrt;                /* node ids of the variables */
    deft_ndarray_t **values; /* per forward entry: the value kept for backward (retained) */
    deft_ndarray_t **heads;  /* per head: its gradient (owned) */
    deft_ndarray_t **grads;  /* per variable: the result (owned) */
} backward_t;

/* Under the lock: the walked cut as a forward graph of this backward's own (the tables copied,
 * the heads' nodes retained: they hold every node of it). */
static int view_of(const deft_cut_t *c, int nheads, const deft_entry_t *roots, deft_graph_t **out) {
    size_t n = (size_t)c->num_nodes + 1, in = (size_t)c->num_inputs + 1;
    size_t head = (sizeof(deft_graph_t) + 15) & ~(size_t)15;
    size_t bytes = head + n * (sizeof(deft_node_t *) + 2 * sizeof(int) + sizeof(bool)) +
                   in * sizeof(int) + ((size_t)nheads + 1) * sizeof(deft_entry_t) + 6 * 16;
    deft_graph_t *g = calloc(1, bytes);
    if (!g) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward");
    char *at = (char *)g + head;
    g->num_nodes = c->num_nodes;
    g->nodes = memcpy(deft_carve(&at, n, sizeof *g->nodes), c->nodes,
                      (size_t)c->num_nodes * sizeof *g->nodes);
    g->row_ptr = memcpy(deft_carve(&at, n, sizeof(int)), c->row_ptr, n * sizeof(int));
    g->in_ptr = memcpy(deft_carve(&at, n, sizeof(int)), c->in_ptr, n * sizeof(int));
    g->in_entry = deft_carve(&at, in, sizeof(int));
    if (c->num_inputs) memcpy(g->in_entry, c->in_entry, (size_t)c->num_inputs * sizeof(int));
    g->leaf = memcpy(deft_carve(&at, n, sizeof *g->leaf), c->leaf, (size_t)c->num_nodes);
    g->outputs = deft_carve(&at, (size_t)nheads + 1, sizeof *g->outputs);
    for (int o = 0; o < nheads; o++)
        g->outputs[g->num_outputs++] =
            (deft_entry_t){deft_node_retain(roots[o].node), roots[o].index};
    *out = g;
    return 0;
}

static void view_free(deft_graph_t *g) {
    for (int o = 0; g && o < g->num_outputs; o++) deft_node_release(g->outputs[o].node);
    free(g);
}

static void backward_free(backward_t *b) {
    for (int o = 0; b->heads && b->fwd && o < b->fwd->num_outputs; o++)
        deft_ndarray_release(b->heads[o]);
    for (int w = 0; b->grads && w < b->nwrt; w++) deft_ndarray_release(b->grads[w]);
    if (b->view)
        view_free(b->fwd);
    else
        deft_graph_free(b->fwd);
    free(b->key), free(b->wrt), free(b->values), free(b->heads), free(b->grads);
}

/* Under the lock: the values the recorded nodes kept, by forward entry. */
static int collect_values(backward_t *b) {
    const deft_graph_t *g = b->fwd;
    for (int i = 0; i < g->num_nodes; i++) {
        if (deft_graph_is_leaf(g, i)) continue;
        const deft_node_t *node = g->nodes[i];
        const deft_record_t *rec = deft_record_of(node);
        if (rec->saved_released)
            return deft_error(DEFT_ERR_VALUE,
                              "the graph was already differentiated and its saved values "
                              "released; pass retain_graph to differentiate it again");
        for (int k = 0; k < node->num_inputs + node->num_outputs; k++)
            if (rec->saved[k] && rec->saved[k]->kept_version != deft_ndarray_version(rec->saved[k]))
                return deft_error(DEFT_ERR_VALUE,
                                  "%s %d of a recorded '%s' was overwritten in place after it was "
                                  "recorded, and its gradient needs the old value",
                                  k < node->num_inputs ? "input" : "output",
                                  k < node->num_inputs ? k : k - node->num_inputs,
                                  node->op->op->name);
        for (int k = 0; k < node->num_inputs; k++)
            if (rec->saved[k]) b->values[deft_graph_input_entry(g, i, k)] = rec->saved[k];
        for (int k = 0; k < node->num_outputs; k++)
            if (rec->saved[node->num_inputs + k])
                b->values[g->row_ptr[i] + k] = rec->saved[node->num_inputs + k];
    }
    return 0;
}

/* Run a recorded-free imperative call (internal bookkeeping, never recorded). */
static int run_op(const char *name, int nin, deft_ndarray_t *const *in, deft_ndarray_t **out,
                  int nparams, const char *const *keys, const char *const *vals) {
    bool recording;
    deft_autograd_set_recording(false, &recording);
    int nout = 1;
    int status = deft_invoke(deft_registry_find(name), nin, in, &nout, out, nparams, keys, vals);
    deft_autograd_set_recording(recording, NULL);
    return status;
}

/* ---- the cut behind the heads: matched against a recent one, or walked ---- */

/* A recent cut's shape (cut.h) and the start of its plan's key, as forward_cut wrote it. A
 * training loop differentiates the same graph shape every step: its cut is matched, node by
 * node, instead of walked, signed and hashed again. Under the record lock, like the walk. */
typedef struct recent {
    deft_cut_shape_t shape;
    int key_len; /* the words of shape.words: the signature, then -2 and the heads' entries */
    uint64_t hash;
    struct recent *next;
} recent_t;

/* How many recent shapes are kept and matched, most recently used first. */
enum { RECENT_SHAPES = 4 };

static recent_t *recents;
static _Atomic long cuts_matched;

long deft_autograd_cuts_matched(void) {
    return cuts_matched;
}

/* One block holding the shape of walked cut c, whose key starts with key[0..key_len). */
static recent_t *recent_new(const deft_cut_t *c, int nroots, const deft_entry_t *roots,
                            const uint64_t *key, int key_len, uint64_t hash) {
    size_t n = (size_t)c->num_nodes + 1, in = (size_t)c->num_inputs + 1, e = (size_t)c->num_entries;
    size_t bytes = ((sizeof(recent_t) + 15) & ~(size_t)15) + n * (6 * sizeof(int) + 16) +
                   2 * in * sizeof(int) + 2 * (size_t)nroots * sizeof(int) +
                   e * (sizeof(deft_desc_t) + sizeof(deft_device_t)) +
                   (size_t)key_len * sizeof *key + 16 * 16;
    recent_t *r = malloc(bytes);
    if (!r) return NULL;
    char *at = (char *)r + ((sizeof(recent_t) + 15) & ~(size_t)15);
    deft_cut_shape_t *s = &r->shape;
    *s = (deft_cut_shape_t){.kind = DEFT_CUT_NEEDS_GRADIENT,
                            .num_nodes = c->num_nodes,
                            .num_entries = c->num_entries,
                            .num_inputs = c->num_inputs,
                            .num_roots = nroots};
    size_t nodes = (size_t)c->num_nodes, inputs = (size_t)c->num_inputs;
    s->row_ptr = memcpy(deft_carve(&at, n, sizeof(int)), c->row_ptr, n * sizeof(int));
    s->in_ptr = memcpy(deft_carve(&at, n, sizeof(int)), c->in_ptr, n * sizeof(int));
    s->in_entry = memcpy(deft_carve(&at, in, sizeof(int)), c->in_entry, inputs * sizeof(int));
    s->consumers = memcpy(deft_carve(&at, n, sizeof(int)), c->consumers, nodes * sizeof(int));
    s->attr_at = memcpy(deft_carve(&at, n, sizeof(int)), c->attr_at, nodes * sizeof(int));
    s->leaf = memcpy(deft_carve(&at, n, sizeof(bool)), c->leaf, nodes * sizeof(bool));
    s->words =
        memcpy(deft_carve(&at, (size_t)key_len, sizeof *key), key, (size_t)key_len * sizeof *key);
    s->num_words = r->key_len = key_len;
    r->hash = hash;
    int *in_node = deft_carve(&at, in, sizeof(int)),
        *root_node = deft_carve(&at, (size_t)nroots, sizeof(int)),
        *root = deft_carve(&at, (size_t)nroots, sizeof(int));
    const deft_op_entry_t **ops = deft_carve(&at, n, sizeof *ops);
    uint64_t *save_in = deft_carve(&at, n, sizeof *save_in);
    deft_desc_t *desc = deft_carve(&at, e, sizeof *desc);
    deft_device_t *devices = deft_carve(&at, e, sizeof *devices);
    deft_cut_fill_shape(c, nroots, roots, ops, save_in, in_node, root, root_node);
    for (int i = 0; i < c->num_nodes; i++) { /* a leaf's too: they are signed */
        const deft_record_t *rec = deft_record_of(c->nodes[i]);
        for (int k = 0; k < c->row_ptr[i + 1] - c->row_ptr[i]; k++)
            desc[c->row_ptr[i] + k] = rec->desc[k], devices[c->row_ptr[i] + k] = rec->device;
    }
    s->in_node = in_node, s->root_node = root_node, s->roots = root, s->ops = ops;
    s->save_in = save_in, s->desc = desc, s->devices = devices;
    return r;
}

/* Keep the shape of the cut just walked, first; the least recently used goes. Out of memory,
 * nothing is kept: the next backward walks. */
static void remember(const deft_cut_t *c, int nroots, const deft_entry_t *roots,
                     const backward_t *b) {
    recent_t *r = recent_new(c, nroots, roots, b->key, b->key_len, b->hash), **at = &recents;
    if (!r) return;
    r->next = recents;
    recents = r;
    for (int kept = 0; *at && kept < RECENT_SHAPES; kept++) at = &(*at)->next;
    for (recent_t *old = *at, *next; old; old = next) next = old->next, free(old);
    *at = NULL;
}

/* The recent shape the cut behind the roots has (moved to the front; *c its cut), or NULL. */
static const recent_t *match_recent(int nroots, const deft_entry_t *roots, deft_cut_t **c) {
    for (recent_t **at = &recents; *at; at = &(*at)->next) {
        recent_t *r = *at;
        if (!deft_cut_match(&r->shape, nroots, roots, c)) continue;
        *at = r->next;
        r->next = recents;
        recents = r;
        cuts_matched++;
        return r;
    }
    return NULL;
}

/* Room for the key: its start, then -3 and the differentiated nodes' ids (run_plan). */
static int key_room(backward_t *b, int start, int nvars, int num_nodes) {
    int room = start + 1 + (nvars > num_nodes ? nvars : num_nodes);
    if (!(b->key = malloc((size_t)room * sizeof *b->key)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward key");
    return 0;
}

/* Under the lock: the cut behind the heads, matched or walked, and the start of its plan's
 * key: the cut's signature, -2, the heads' entries. */
static int forward_cut(backward_t *b, int nheads, const deft_entry_t *roots, int nvars) {
    deft_cut_t *c;
    const recent_t *r = match_recent(nheads, roots, &c);
    if (r) {
        if (view_of(c, nheads, roots, &b->fwd) || key_room(b, r->key_len, nvars, c->num_nodes))
            return -1;
        b->view = true;
        memcpy(b->key, r->shape.words, (size_t)r->key_len * sizeof *b->key);
        b->key_len = r->key_len, b->hash = r->hash;
        return 0;
    }
    if (deft_cut_walk(DEFT_CUT_NEEDS_GRADIENT, nheads, roots, &c) ||
        view_of(c, nheads, roots, &b->fwd))
        return -1;
    b->view = true;
    if (key_room(b, c->sig_len + 1 + nheads, nvars, c->num_nodes)) return -1;
    memcpy(b->key, c->sig, (size_t)c->sig_len * sizeof *b->key);
    b->key_len = c->sig_len;
    b->hash = c->hash;
    b->key[b->key_len++] = (uint64_t)-2;
    for (int o = 0; o < nheads; o++)
        b->key[b->key_len++] =
            (uint64_t)(b->fwd->row_ptr[deft_cut_id(roots[o].node)] + roots[o].index);
    for (int i = c->sig_len; i < b->key_len; i++) b->hash = deft_cut_mix(b->hash, b->key[i]);
    remember(c, nheads, roots, b);
    return 0;
}

/* Under the lock: the forward graph behind the heads (walked, or indexed for create_graph,
 * which replays the gradient pass's graph), the variables, their values. */
static int prepare(backward_t *b, int nheads, deft_ndarray_t *const *heads, int nvars,
                   deft_ndarray_t *const *vars, bool into_marked, bool create) {
    deft_entry_t *roots = malloc(((size_t)nheads + 1) * sizeof *roots);
    if (!roots) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward");
    for (int o = 0; o < nheads; o++) {
        const deft_node_t *node = heads[o]->entry.node;
        if (!node || !deft_record_of(node) || !deft_record_of(node)->requires_grad) {
            free(roots);
            return deft_error(DEFT_ERR_VALUE,
                              "heads[%d] does not depend on any variable marked for gradients "
                              "(DeftAutogradMarkVariables) through calls recorded while "
                              "recording was on",
                              o);
        }
        roots[o] = heads[o]->entry;
    }
    int status = create ? deft_graph_build_cut(nheads, roots, needs_no_gradient, NULL, &b->fwd)
                        : forward_cut(b, nheads, roots, nvars);
    free(roots);
    if (status) return -1;
    const deft_graph_t *g = b->fwd;
    int room = into_marked ? g->num_nodes : nvars;
    b->wrt = malloc(((size_t)room + 1) * sizeof *b->wrt);
    b->values = calloc((size_t)deft_graph_num_entries(g) + 1, sizeof *b->values);
    if (!b->wrt || !b->values) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    for (int i = 0; into_marked && i < g->num_nodes; i++) {
        const deft_record_t *rec = deft_record_of(g->nodes[i]);
        if (!g->nodes[i]->op && rec->requires_grad && rec->grad) b->wrt[b->nwrt++] = i;
    }
    for (int w = 0; !into_marked && w < nvars; w++) {
        const deft_node_t *node = vars[w]->entry.node;
        if (!node || node->op || !deft_record_of(node)->requires_grad)
            return deft_error(DEFT_ERR_VALUE,
                              "variables[%d] is not marked for gradients "
                              "(DeftAutogradMarkVariables)",
                              w);
        /* -1: the heads do not use it */
        b->wrt[b->nwrt++] = b->view ? deft_cut_id(node) : deft_graph_node_id(g, node);
    }
    return collect_values(b);
}

/* Keep the values (and graph) alive outside the lock: another thread may release them. */
static void retain_values(backward_t *b) {
    for (int e = 0; e < deft_graph_num_entries(b->fwd); e++)
        if (b->values[e]) deft_ndarray_retain(b->values[e]);
}

static void release_values(backward_t *b) {
    for (int e = 0; b->fwd && b->values && e < deft_graph_num_entries(b->fwd); e++)
        deft_ndarray_release(b->values[e]);
}

static int head_gradients(backward_t *b, int nheads, deft_ndarray_t *const *heads,
                          deft_ndarray_t *const *head_grads) {
    if (!(b->heads = calloc((size_t)nheads + 1, sizeof *b->heads)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate head gradients");
    for (int o = 0; o < nheads; o++) {
        const deft_tensor_t *h = &heads[o]->tensor;
        if (!head_grads || !head_grads[o]) {
            if (run_op("ones_like", 1, &heads[o], &b->heads[o], 0, NULL, NULL)) return -1;
            continue;
        }
        const deft_tensor_t *hg = &head_grads[o]->tensor;
        if (!deft_shape_equal(&h->shape, &hg->shape) || h->dtype != hg->dtype) {
            char hs[DEFT_SHAPE_STR_MAX], gs[DEFT_SHAPE_STR_MAX];
            return deft_error(
                DEFT_ERR_VALUE, "head_grads[%d] has shape %s %s, expected %s %s", o,
                deft_shape_format(&hg->shape, gs, sizeof gs), deft_dtype_name(hg->dtype),
                deft_shape_format(&h->shape, hs, sizeof hs), deft_dtype_name(h->dtype));
        }
        if (!deft_device_equal(h->device, hg->device)) {
            char hd[32], gd[32];
            return deft_error(DEFT_ERR_VALUE, "head_grads[%d] is on %s, expected %s like the head",
                              o, deft_device_format(hg->device, gd, sizeof gd),
                              deft_device_format(h->device, hd, sizeof hd));
        }
        b->heads[o] = deft_ndarray_retain(head_grads[o]);
    }
    return 0;
}

/* Forward entry e's value, or, where no node kept it because only its shape
 * is read (op.h, shape_inputs), a placeholder of that shape. Borrowed. */
static int forward_value(backward_t *b, int e, deft_ndarray_t **out) {
    if (!b->values[e]) {
        const deft_record_t *rec = deft_record_of(b->fwd->nodes[deft_graph_entry_node(b->fwd, e)]);
        if (deft_ndarray_new_placeholder(entry_desc(b->fwd, e), rec->device, &b->values[e]))
            return -1;
    }
    *out = b->values[e];
    return 0;
}

/* The executor's inputs: forward values and head gradients, as the plan binds them. */
static int plan_inputs(const plan_t *p, backward_t *b, deft_ndarray_t **in) {
    for (int i = 0; i < p->num_inputs; i++) {
        if (p->bind[i] < 0)
            in[i] = b->heads[-1 - p->bind[i]];
        else if (forward_value(b, p->bind[i], &in[i]))
            return -1;
    }
    return 0;
}

/* A plan made on the forward graph indexed as the gradient pass needs it, its inputs then bound
 * to the walked graph's entries (the key's numbering). */
static int build_walked_plan(backward_t *b, int n, const int *ids, key_t *k, uint64_t hash,
                             plan_t **out) {
    const deft_graph_t *fwd = b->fwd;
    deft_graph_t *g = NULL;
    int *walk_of = NULL, *real = malloc(((size_t)n + 1) * sizeof *real);
    int status =
        real ? deft_graph_build_cut(fwd->num_outputs, fwd->outputs, needs_no_gradient, NULL, &g)
             : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward plan");
    if (!status && !(walk_of = malloc(((size_t)g->num_nodes + 1) * sizeof *walk_of)))
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward plan");
    for (int i = 0; !status && i < fwd->num_nodes; i++) {
        int id = deft_graph_node_id(g, fwd->nodes[i]); /* the same nodes, in another order */
        if (id < 0)
            status = deft_error(DEFT_ERR_INTERNAL, "a backward's two forward graphs differ");
        else
            walk_of[id] = i;
    }
    for (int j = 0; !status && j < n; j++) real[j] = deft_graph_node_id(g, fwd->nodes[ids[j]]);
    if (!status) status = build_plan(g, n, real, k, hash, out);
    for (int i = 0; !status && i < (*out)->num_inputs; i++) {
        int e = (*out)->bind[i];
        if (e < 0) continue;
        int id = deft_graph_entry_node(g, e);
        (*out)->bind[i] = fwd->row_ptr[walk_of[id]] + e - g->row_ptr[id];
    }
    deft_graph_free(g);
    free(real), free(walk_of);
    return status;
}

/* Gradients of nodes ids[0..n) of the forward graph by the cached executor:
 * into given[j] where not NULL, else into new arrays; out[j] owns a reference. */
static int run_plan(backward_t *b, int n, const int *ids, deft_ndarray_t *const *given,
                    deft_ndarray_t **out) {
    uint64_t hash = b->hash;
    b->key[b->key_len++] = (uint64_t)-3;
    for (int j = 0; j < n; j++) b->key[b->key_len++] = (uint64_t)ids[j];
    for (int i = b->key_len - n - 1; i < b->key_len; i++) hash = deft_cut_mix(hash, b->key[i]);
    hash ^= hash >> 29;
    key_t k = {(unsigned char *)b->key, (size_t)b->key_len * sizeof *b->key};
    pthread_mutex_lock(&cache_lock); /* the plan stays ours until pushed */
    plan_t *p = cache_find(hash, &k);
    int status = 0;
    if (p) plan_hits++;
    if (!p && (status = build_walked_plan(b, n, ids, &k, hash, &p)) == 0) {
        p->next = cache;
        cache = p;
    }
    if (!k.bytes) b->key = NULL; /* the plan keeps it */
    deft_ndarray_t **in = status ? NULL : malloc(((size_t)p->num_inputs + 1) * sizeof *in);
    if (status == 0 && !in) status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a run");
    if (status == 0) status = plan_inputs(p, b, in);
    for (int j = 0; j < n; j++) out[j] = given[j];
    int nout = n;
    /* Gradient kernels run in training mode, as MXNet's backward(train_mode=True),
     * its default: BatchNorm's gradient goes through the batch's statistics. */
    bool was_training;
    deft_op_set_training(true, &was_training);
    if (status == 0) status = deft_cached_op_invoke(p->exec, p->num_inputs, in, &nout, out);
    deft_op_set_training(was_training, NULL);
    if (p) cache_trim(p);
    pthread_mutex_unlock(&cache_lock);
    for (int j = 0; j < n; j++)
        if (given[j]) out[j] = status ? NULL : deft_ndarray_retain(given[j]);
    free(in);
    return status;
}

/* An array holding forward entry e's value whose history is that entry, so
 * calls recorded on it connect to the forward graph. */
static int forward_array(backward_t *b, int e, deft_ndarray_t **out) {
    deft_ndarray_t *value;
    if (forward_value(b, e, &value) || deft_ndarray_alias(value, out)) return -1;
    int id = deft_graph_entry_node(b->fwd, e);
    deft_record_lock();
    deft_record_set_entry(*out, (deft_entry_t){b->fwd->nodes[id], e - b->fwd->row_ptr[id]});
    deft_record_unlock();
    return 0;
}

static int replay_node(backward_t *b, const deft_graph_t *g, int i, deft_ndarray_t **arrays) {
    const deft_node_t *node = g->nodes[i];
    int first = g->row_ptr[i];
    if (!node->op) {
        int index = atoi(g->names[i] + 1);
        if (g->names[i][0] == 'h') {
            arrays[first] = deft_ndarray_retain(b->heads[index]);
            return 0;
        }
        return forward_array(b, index, &arrays[first]);
    }
    deft_ndarray_t *in[DEFT_OP_MAX_INPUTS];
    for (int k = 0; k < node->num_inputs; k++) in[k] = arrays[deft_graph_input_entry(g, i, k)];
    int nout = node->num_outputs;
    return deft_invoke(node->op, node->num_inputs, in, &nout, &arrays[first], node->attrs.count,
                       (const char *const *)node->attrs.keys,
                       (const char *const *)node->attrs.vals);
}

/* create_graph: run the backward symbol as recorded imperative calls. */
static int replay(backward_t *b, int n, const int *ids, deft_ndarray_t **out) {
    deft_symbol_t *sym = NULL;
    deft_graph_t *g = NULL;
    int status = backward_symbol(b->fwd, n, ids, &sym) ||
                 deft_graph_build(sym->num_outputs, sym->outputs, &g);
    deft_ndarray_t **arrays =
        status ? NULL : calloc((size_t)deft_graph_num_entries(g) + 1, sizeof *arrays);
    if (status == 0 && !arrays) status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    bool recording;
    deft_autograd_set_recording(true, &recording);
    for (int i = 0; status == 0 && i < g->num_nodes; i++) status = replay_node(b, g, i, arrays);
    deft_autograd_set_recording(recording, NULL);
    for (int j = 0; j < n; j++) {
        int e = status ? -1
                       : deft_graph_entry_id(g, deft_graph_node_id(g, g->outputs[j].node),
                                             g->outputs[j].index);
        out[j] = e >= 0 ? deft_ndarray_retain(arrays[e]) : NULL;
    }
    for (int e = 0; arrays && e < deft_graph_num_entries(g); e++) deft_ndarray_release(arrays[e]);
    free(arrays);
    deft_graph_free(g);
    deft_symbol_free(sym);
    return status;
}

/* Store a variable's gradient by its grad_req (recording the store too when create_graph). */
static int store_gradient(deft_ndarray_t *var_grad, int req, deft_ndarray_t *grad, bool create) {
    if (req == DEFT_GRAD_REQ_WRITE && !create) return 0; /* the executor wrote it in place */
    deft_ndarray_t *value = grad, *sum = NULL;
    if (req == DEFT_GRAD_REQ_ADD) {
        bool recording;
        deft_autograd_set_recording(create, &recording);
        deft_ndarray_t *in[2] = {var_grad, grad};
        int nout = 1, status = deft_invoke(deft_registry_find("elemwise_add"), 2, in, &nout, &sum,
                                           0, NULL, NULL);
        deft_autograd_set_recording(recording, NULL);
        if (status) return -1;
        value = sum;
    }
    deft_ndarray_t *target = var_grad;
    int status = run_op("_copyto", 1, &value, &target, 0, NULL, NULL);
    if (status == 0 && create && value->entry.node) {
        deft_record_lock();
        deft_record_set_entry(var_grad, value->entry);
        deft_record_unlock();
    }
    deft_ndarray_release(sum);
    return status;
}

/* Release what backward kept, unless the graph is to be differentiated again. */
static void release_saved(const backward_t *b) {
    deft_record_lock();
    for (int i = 0; i < b->fwd->num_nodes; i++) {
        if (deft_graph_is_leaf(b->fwd, i)) continue;
        deft_record_drop_saved(b->fwd->nodes[i]);
        deft_record_of(b->fwd->nodes[i])->saved_released = true;
    }
    deft_record_unlock();
}

static int compute(backward_t *b, bool into_marked, bool create) {
    int *ids = malloc(((size_t)b->nwrt + 1) * sizeof *ids);
    deft_ndarray_t **given = calloc((size_t)b->nwrt + 1, sizeof *given);
    deft_ndarray_t **out = calloc((size_t)b->nwrt + 1, sizeof *out);
    b->grads = calloc((size_t)b->nwrt + 1, sizeof *b->grads);
    int n = 0, status = 0;
    if (!ids || !given || !out || !b->grads)
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward");
    for (int w = 0; status == 0 && w < b->nwrt; w++) {
        if (b->wrt[w] < 0) continue;
        const deft_record_t *rec = deft_record_of(b->fwd->nodes[b->wrt[w]]);
        given[n] =
            into_marked && !create && rec->grad_req == DEFT_GRAD_REQ_WRITE ? rec->grad : NULL;
        ids[n++] = b->wrt[w];
    }
    if (status == 0 && n > 0)
        status = create ? replay(b, n, ids, out) : run_plan(b, n, ids, given, out);
    for (int w = 0, j = 0; status == 0 && w < b->nwrt; w++)
        if (b->wrt[w] >= 0) b->grads[w] = out[j++];
    free(ids), free(given), free(out);
    return status;
}

/* Saved values recorded in deferred compute are lazy: computed now, together. */
static int compute_lazy_values(backward_t *b) {
    int n = 0, entries = deft_graph_num_entries(b->fwd);
    deft_ndarray_t **lazy = malloc(((size_t)entries + 1) * sizeof *lazy);
    if (!lazy) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a backward");
    for (int e = 0; e < entries; e++)
        if (b->values[e] && deft_ndarray_is_lazy(b->values[e])) lazy[n++] = b->values[e];
    int status = n ? deft_deferred_compute(n, lazy) : 0;
    free(lazy);
    return status;
}

static int backward_now(int nheads, deft_ndarray_t *const *heads, deft_ndarray_t *const *head_grads,
                        int nvars, deft_ndarray_t *const *vars, bool retain_graph,
                        bool create_graph, deft_ndarray_t **out_grads) {
    bool into_marked = out_grads == NULL;
    if (deft_deferred_compute(nheads, heads) ||
        (head_grads && deft_deferred_compute(nheads, head_grads)))
        return -1;
    backward_t b = {0};
    deft_record_lock();
    int status = prepare(&b, nheads, heads, nvars, vars, into_marked, create_graph);
    if (b.values) retain_values(&b);
    deft_record_unlock();
    if (status == 0) status = compute_lazy_values(&b);
    if (status == 0) status = head_gradients(&b, nheads, heads, head_grads);
    if (status == 0) status = compute(&b, into_marked, create_graph);
    for (int w = 0; status == 0 && w < b.nwrt; w++) {
        if (!into_marked) {
            status = b.grads[w] ? 0 : run_op("zeros_like", 1, &vars[w], &b.grads[w], 0, NULL, NULL);
            continue;
        }
        const deft_record_t *rec = deft_record_of(b.fwd->nodes[b.wrt[w]]);
        status = store_gradient(rec->grad, rec->grad_req, b.grads[w], create_graph);
    }
    if (status == 0 && !into_marked)
        for (int w = 0; w < b.nwrt; w++) out_grads[w] = b.grads[w], b.grads[w] = NULL;
    if (status == 0 && !retain_graph && !create_graph) release_saved(&b);
    release_values(&b);
    backward_free(&b);
    return status;
}

/* A backward inside a deferred-compute scope computes (through the lazy
 * forward values) instead of recording: gradients are values either way. */
int deft_autograd_backward(int nheads, deft_ndarray_t *const *heads,
                           deft_ndarray_t *const *head_grads, int nvars,
                           deft_ndarray_t *const *vars, bool retain_graph, bool create_graph,
                           deft_ndarray_t **out_grads) {
    if (head_grads &&
        deft_check_no_views(nheads, head_grads, "head_grads", "backward reads dense arrays"))
        return -1;
    bool deferred;
    deft_deferred_set(false, &deferred);
    int status =
        backward_now(nheads, heads, head_grads, nvars, vars, retain_graph, create_graph, out_grads);
    deft_deferred_set(deferred, NULL);
    return status;
}
