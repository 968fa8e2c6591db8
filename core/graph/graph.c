#define _POSIX_C_SOURCE 200809L
#include "core/graph/graph.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/hash.h"
#include "core/base/records.h"
#include "core/base/tls.h"

static size_t hash_pointer(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return (size_t)(x ^ (x >> 33));
}

/* ---- the walk's map: node -> id while a graph is built ----
 *
 * A build walks the nodes with a map of its own thread, kept between builds
 * and emptied by a new generation number, not by zeroing: growing a fresh
 * map per build (four callocs and rehashes for 100 nodes, twice for a one-off
 * graph's export and executor) cost more than the walk. The graph's own map
 * (deft_graph_node_id) is made only when first asked for; the executor and
 * export paths ask by entry ids instead. */

typedef struct walk_slot {
    const deft_node_t *key;
    int id;
    unsigned gen; /* the slot is empty unless gen is the map's */
} walk_slot_t;

typedef struct walk_map {
    walk_slot_t *slots;
    size_t capacity; /* a power of two */
    int count;
    unsigned gen;
    bool busy; /* a build is using it (a leaf test that built a graph would find it so) */
} walk_map_t;

/* Maps kept past a build hold at most this many slots (1 MiB). */
#define WALK_KEEP_SLOTS ((size_t)1 << 16)

static DEFT_TLS_FAST walk_map_t *walk_tls;
static pthread_key_t walk_key;
static pthread_once_t walk_once = PTHREAD_ONCE_INIT;

static void walk_free(void *arg) {
    walk_map_t *m = arg;
    if (m) free(m->slots);
    free(m);
}

static void walk_key_make(void) {
    pthread_key_create(&walk_key, walk_free);
}

/* This thread's map, emptied, or a map of the caller's own (then *own) when
 * the thread's is in use or cannot be registered. NULL: out of memory. */
static walk_map_t *walk_begin(bool *own) {
    walk_map_t *m = walk_tls;
    *own = false;
    if (!m || m->busy) {
        if (!(m = calloc(1, sizeof *m))) return NULL;
        *own = walk_tls != NULL;
        if (!*own) {
            pthread_once(&walk_once, walk_key_make);
            if (pthread_setspecific(walk_key, m) == 0)
                walk_tls = m;
            else
                *own = true;
        }
    }
    if (++m->gen == 0) { /* wrapped: old stamps could read as live */
        for (size_t i = 0; i < m->capacity; i++) m->slots[i].gen = 0;
        m->gen = 1;
    }
    m->count = 0;
    m->busy = true;
    return m;
}

static void walk_end(walk_map_t *m, bool own) {
    if (own) {
        walk_free(m);
        return;
    }
    m->busy = false;
    if (m->capacity > WALK_KEEP_SLOTS) {
        free(m->slots);
        m->slots = NULL, m->capacity = 0;
    }
}

static int walk_find(const walk_map_t *m, const deft_node_t *node) {
    if (m->count == 0) return -1;
    size_t mask = m->capacity - 1;
    for (size_t i = hash_pointer(node) & mask;; i = (i + 1) & mask) {
        const walk_slot_t *slot = &m->slots[i];
        if (slot->gen != m->gen) return -1;
        if (slot->key == node) return slot->id;
    }
}

/* The slot of a node known to be in the map. */
static walk_slot_t *walk_slot(const walk_map_t *m, const deft_node_t *node) {
    size_t mask = m->capacity - 1, i = hash_pointer(node) & mask;
    while (m->slots[i].key != node) i = (i + 1) & mask;
    return &m->slots[i];
}

/* Room for one more node: the map grows at half full (moving its slots). */
static int walk_reserve(walk_map_t *m) {
    if (2 * ((size_t)m->count + 1) <= m->capacity) return 0;
    size_t cap = m->capacity ? 4 * m->capacity : 256, mask = cap - 1;
    walk_slot_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < m->capacity; i++) {
        if (m->slots[i].gen != m->gen) continue;
        size_t at = hash_pointer(m->slots[i].key) & mask;
        while (slots[at].gen == m->gen) at = (at + 1) & mask;
        slots[at] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots, m->capacity = cap;
    return 0;
}

/* The node's slot: found, or made with id -2 (then *made); the map has room
 * (walk_reserve). One probe where a find and a put took two. */
static walk_slot_t *walk_claim(walk_map_t *m, const deft_node_t *node, bool *made) {
    size_t mask = m->capacity - 1, i = hash_pointer(node) & mask;
    for (;; i = (i + 1) & mask) {
        walk_slot_t *slot = &m->slots[i];
        if (slot->gen != m->gen) {
            *slot = (walk_slot_t){node, -2, m->gen};
            m->count++;
            *made = true;
            return slot;
        }
        if (slot->key == node) {
            *made = false;
            return slot;
        }
    }
}

/* ---- the graph's own map, made on first use ---- */

static size_t map_capacity(int num_nodes) {
    size_t cap = 16;
    while (cap < 2 * (size_t)num_nodes + 2) cap *= 2;
    return cap;
}

static void *make_map(const deft_graph_t *g) {
    size_t cap = map_capacity(g->num_nodes), mask = cap - 1;
    deft_graph_slot_t *map = calloc(cap, sizeof *map);
    for (int id = 0; map && id < g->num_nodes; id++) {
        size_t i = hash_pointer(g->nodes[id]) & mask;
        while (map[i].key) i = (i + 1) & mask;
        map[i] = (deft_graph_slot_t){g->nodes[id], id};
    }
    return map;
}

static void *lazy_table(const deft_graph_t *g, _Atomic(void *) *slot,
                        void *(*make)(const deft_graph_t *g));

/* Tables that say nothing, shared instead of made: the use table of a graph where
 * no node updates an input in place (most graphs: no value is updated, which is
 * all its readers ask), the unwanted outputs of one where every output is wanted. */
static unsigned char no_updates;
static uint64_t all_wanted;

static void free_table(void *table) {
    if (table != &no_updates && table != &all_wanted) free(table);
}

/* Id of a node, or -1; by a scan when the map cannot be made (out of memory). */
static int map_find(const deft_graph_t *g, const deft_node_t *node) {
    const deft_graph_slot_t *map = lazy_table(g, &((deft_graph_t *)g)->map, make_map);
    if (!map) { /* out of memory: a scan, slower but right */
        for (int id = 0; id < g->num_nodes; id++)
            if (g->nodes[id] == node) return id;
        return -1;
    }
    size_t mask = map_capacity(g->num_nodes) - 1;
    for (size_t i = hash_pointer(node) & mask;; i = (i + 1) & mask) {
        if (!map[i].key) return -1;
        if (map[i].key == node) return map[i].id;
    }
}

int deft_graph_node_id(const deft_graph_t *graph, const deft_node_t *node) {
    return map_find(graph, node);
}

int deft_graph_output_entry(const deft_graph_t *g, int o) {
    int id = g->output_ids ? g->output_ids[o] : map_find(g, g->outputs[o].node);
    return g->row_ptr[id] + g->outputs[o].index;
}

/* Grow the node array so `count` nodes fit. */
static int reserve(deft_graph_t *g, int count, int *capacity) {
    if (count <= *capacity) return 0;
    int cap = *capacity < 64 ? 64 : *capacity; /* past the inline list: few reallocs */
    while (cap < count) cap *= 2;
    bool inline_list = g->nodes == g->small_nodes;
    deft_node_t **nodes = realloc(inline_list ? NULL : g->nodes, (size_t)cap * sizeof *nodes);
    if (!nodes) return -1;
    if (inline_list) memcpy(nodes, g->small_nodes, sizeof g->small_nodes);
    g->nodes = nodes;
    *capacity = cap;
    return 0;
}

/* Whether input k of node n is updated in place. */
static bool mutates(const deft_node_t *n, int k) {
    return deft_op_mutates(n->op->op, n->num_inputs, k);
}

/* The walk's ids after the node list was reordered. */
static void renumber(deft_graph_t *g, walk_map_t *m) {
    for (int id = 0; id < g->num_nodes; id++) walk_slot(m, g->nodes[id])->id = id;
}

static int by_rank(const void *a, const void *b) {
    int ra = (*(deft_node_t *const *)a)->arg_rank, rb = (*(deft_node_t *const *)b)->arg_rank;
    return (ra > rb) - (ra < rb);
}

/* Ranked variables (`ranked` of them) move to the front, by rank; the rest keep
 * their order. Variables have no inputs, so the order stays topological. */
static void put_ranked_first(deft_graph_t *g, walk_map_t *m, int ranked) {
    if (ranked == 0) return;
    deft_node_t **front = malloc((size_t)ranked * sizeof *front);
    if (!front) return; /* the plain order is still a valid one */
    int f = 0, rest = g->num_nodes;
    for (int i = g->num_nodes - 1; i >= 0; i--) { /* others slide to the back, in order */
        deft_node_t *n = g->nodes[i];
        if (!n->op && n->arg_rank > 0)
            front[f++] = n;
        else
            g->nodes[--rest] = n;
    }
    qsort(front, (size_t)ranked, sizeof *front, by_rank);
    memcpy(g->nodes, front, (size_t)ranked * sizeof *front);
    free(front);
    renumber(g, m);
}

typedef struct frame {
    deft_node_t *node;
    int next_input;
    bool leaf;         /* is_leaf accepted it: its inputs are not followed */
    walk_slot_t *slot; /* the node's, where its id goes when it is done */
} frame_t;

/* The nodes a cut walk kept as leaves (few: a cut graph's given values), found as the
 * walk meets them: asking is_leaf again of every node for the graph's table was a tenth
 * of an export's walk. */
typedef struct leaf_list {
    int count, capacity;
    const deft_node_t **nodes;
    const deft_node_t *room[16];
} leaf_list_t;

static int add_leaf(leaf_list_t *l, const deft_node_t *node) {
    if (l->count == l->capacity) {
        int cap = 2 * l->capacity;
        const deft_node_t **grown = l->nodes == l->room
                                        ? malloc((size_t)cap * sizeof *grown)
                                        : realloc(l->nodes, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        if (l->nodes == l->room) memcpy(grown, l->room, sizeof l->room);
        l->nodes = grown, l->capacity = cap;
    }
    l->nodes[l->count++] = node;
    return 0;
}

/* A frame for node `node`, its slot `slot`: is_leaf asked once, here. */
static frame_t new_frame(deft_node_t *node, walk_slot_t *slot, deft_graph_leaf_fn is_leaf,
                         void *ctx) {
    bool leaf = is_leaf && is_leaf(node, ctx);
    return (frame_t){node, leaf ? node->num_inputs : 0, leaf, slot};
}

/* After the map grew: the stack's slots, found again. */
static void refresh_slots(const walk_map_t *m, frame_t *stack, int depth) {
    for (int d = 0; d < depth; d++) stack[d].slot = walk_slot(m, stack[d].node);
}

/* The slot of a node to visit, claimed (made: new to the walk); NULL when out of memory. */
static walk_slot_t *claim(walk_map_t *m, const deft_node_t *node, frame_t *stack, int depth,
                          bool *made) {
    if (2 * ((size_t)m->count + 1) > m->capacity) { /* rare: the map grows */
        if (walk_reserve(m)) return NULL;
        refresh_slots(m, stack, depth);
    }
    return walk_claim(m, node, made);
}

/* Post-order over everything the outputs reach, without recursion; the
 * inputs of nodes that is_leaf accepts are not followed. Nodes on the stack
 * are in the map with id -2. *inputs: the nodes' inputs in all, counted as
 * each node is numbered (while it is at hand: a pass of its own over the
 * nodes cost a tenth of the walk). */
static int topo_sort(deft_graph_t *g, walk_map_t *m, deft_graph_leaf_fn is_leaf, void *ctx,
                     size_t *inputs, leaf_list_t *leaves) {
    /* Shallow graphs (most runs) walk on the C stack (3 KiB: a recorded chain of a hundred
     * calls is as deep as it is long), deep ones move to the heap. */
    frame_t small[128];
    int capacity = DEFT_GRAPH_SMALL, stack_cap = 128, depth = 0;
    frame_t *stack = small;
    bool made;
    int ranked = 0;
    *inputs = 0;
    for (int o = 0; o < g->num_outputs; o++) {
        deft_node_t *root = g->outputs[o].node;
        walk_slot_t *slot = claim(m, root, stack, depth, &made);
        if (!slot) goto oom;
        if (!made) continue;
        stack[depth++] = new_frame(root, slot, is_leaf, ctx);
        while (depth > 0) {
            frame_t *top = &stack[depth - 1];
            if (top->next_input < top->node->num_inputs) {
                deft_node_t *in = top->node->inputs[top->next_input++].node;
                if (!(slot = claim(m, in, stack, depth, &made))) goto oom;
                if (!made) continue; /* done, or on the stack (no cycles exist) */
                if (depth == stack_cap) {
                    frame_t *grown = stack == small
                                         ? malloc(2 * sizeof small)
                                         : realloc(stack, (size_t)stack_cap * 2 * sizeof *stack);
                    if (!grown) goto oom;
                    if (stack == small) memcpy(grown, small, sizeof small);
                    stack = grown, stack_cap *= 2;
                }
                stack[depth++] = new_frame(in, slot, is_leaf, ctx);
                continue;
            }
            /* every node claimed (numbered, or on the stack) is a node of the graph: room
             * for them all at once (a chain's walk has claimed every node by its first) */
            if (g->num_nodes == capacity &&
                reserve(g, m->count > g->num_nodes ? m->count : g->num_nodes + 1, &capacity))
                goto oom;
            if (top->leaf && add_leaf(leaves, top->node)) goto oom;
            top->slot->id = g->num_nodes; /* now numbered */
            *inputs += (size_t)top->node->num_inputs;
            ranked += !top->node->op && top->node->arg_rank > 0;
            g->nodes[g->num_nodes++] = g->borrowed ? top->node : deft_node_retain(top->node);
            depth--;
        }
    }
    if (stack != small) free(stack);
    put_ranked_first(g, m, ranked);
    return 0;
oom:
    if (stack != small) free(stack);
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph index");
}

/* ---- names ---- */

typedef struct name_set {
    int capacity, count;
    const char **names;
    /* next number to try per base name, so naming n nodes "op0".."opN" is linear */
    const char **bases;
    long *next;
} name_set_t;

static size_t hash_string(const char *s) {
    return (size_t)deft_hash_bytes(s, strlen(s));
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t set_slot(const name_set_t *set, const char *name) {
    size_t mask = (size_t)set->capacity - 1, i = hash_string(name) & mask;
    while (set->names[i] && strcmp(set->names[i], name) != 0) i = (i + 1) & mask;
    return i;
}

/* Add a name not in the set yet (false: it is there already). */
static bool set_add(name_set_t *set, const char *name) {
    size_t i = set_slot(set, name);
    if (set->names[i]) return false;
    set->names[i] = name;
    set->count++;
    return true;
}

/* The counter slot of a base name (bases are few: one per operator type). */
static long *base_counter(name_set_t *set, const char *base) {
    size_t mask = (size_t)set->capacity - 1;
    size_t i = hash_string(base) & mask;
    while (set->bases[i] && strcmp(set->bases[i], base) != 0) i = (i + 1) & mask;
    if (!set->bases[i]) {
        if (!(set->bases[i] = strdup(base))) return NULL;
        set->next[i] = 0;
    }
    return &set->next[i];
}

/* The decimal digits of k >= 0 and a NUL at `at`: written by hand, as snprintf
 * took half the time of indexing a graph of a thousand unnamed nodes. */
static void append_number(char *at, long k) {
    char digits[24];
    int n = 0;
    do digits[n++] = (char)('0' + k % 10);
    while ((k /= 10) > 0);
    while (n > 0) *at++ = digits[--n];
    *at = '\0';
}

/* A name not yet used, now in the set: `base`, else base + "0", "1", ... (always numbered
 * when `numbered`). */
static char *unique_name(name_set_t *set, const char *base, bool numbered) {
    size_t len = strlen(base) + 24;
    char *name = malloc(len);
    long *k = base_counter(set, base);
    if (!name || !k) {
        free(name);
        return NULL;
    }
    size_t at = len - 24;
    memcpy(name, base, at + 1);
    if (!numbered) {
        if (set_add(set, name)) return name;
        name[at++] = '_';
    }
    for (;; (*k)++) {
        append_number(name + at, *k);
        if (set_add(set, name)) {
            (*k)++; /* taken now: the next node of this base starts past it */
            return name;
        }
    }
}

static void free_set(name_set_t *set) {
    for (int i = 0; set->bases && i < set->capacity; i++) /* mostly empty: no call for those */
        if (set->bases[i]) free((char *)set->bases[i]);
    free(set->bases), free(set->next), free(set->names);
}

static void default_base(const deft_node_t *node, char *buf, size_t len) {
    const char *op = node->op->op->name;
    while (*op == '_') op++;
    size_t i = 0;
    for (; op[i] && i + 1 < len; i++) buf[i] = (char)tolower((unsigned char)op[i]);
    buf[i] = '\0';
}

/* Whether every node has its own name (then naming has nothing to make). */
static bool all_named(const deft_graph_t *g) {
    for (int i = 0; i < g->num_nodes; i++)
        if (!g->nodes[i]->name) return false;
    return true;
}

/* Under naming_lock: the names of g's nodes (a new array of the nodes' own
 * names, default names written into the nodes that had none), or NULL. */
static char **name_nodes(const deft_graph_t *g) {
    char **names = malloc((size_t)(g->num_nodes ? g->num_nodes : 1) * sizeof *names);
    if (!names) goto oom;
    if (all_named(g)) { /* a graph named before, or of named nodes: no name set */
        for (int i = 0; i < g->num_nodes; i++) names[i] = g->nodes[i]->name;
        return names;
    }
    name_set_t set = {.capacity = 16};
    while (set.capacity < 2 * g->num_nodes + 2) set.capacity *= 2;
    set.names = calloc((size_t)set.capacity, sizeof *set.names);
    set.bases = calloc((size_t)set.capacity, sizeof *set.bases);
    set.next = calloc((size_t)set.capacity, sizeof *set.next);
    if (!set.names || !set.bases || !set.next) goto oom_set;
    for (int i = 0; i < g->num_nodes; i++) {
        const char *own = g->nodes[i]->name;
        if (own) set_add(&set, own);
    }
    /* Operator nodes first (in order), so variables can take their consumer's name. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->num_nodes; i++) {
            deft_node_t *node = g->nodes[i];
            if ((node->op != NULL) != (pass == 0)) continue;
            if (node->name) { /* fixed once set, and the graph holds the node */
                names[i] = node->name;
                continue;
            }
            char base[160] = "var";
            bool numbered = true;
            if (node->op) {
                default_base(node, base, sizeof base);
            } else if (node->input_role) {
                for (int c = i + 1; c < g->num_nodes; c++) {
                    const deft_node_t *consumer = g->nodes[c];
                    bool uses = false;
                    for (int k = 0; k < consumer->num_inputs; k++)
                        uses = uses || consumer->inputs[k].node == node;
                    if (uses) {
                        snprintf(base, sizeof base, "%s_%s", names[c], node->input_role);
                        numbered = false;
                        break;
                    }
                }
            }
            if (!(names[i] = unique_name(&set, base, numbered))) goto oom_set;
            /* The name sticks: later views of this node (children, internals, a
             * bigger graph) see the same name. */
            node->name = names[i];
        }
    }
    free_set(&set);
    return names;
oom_set:
    free_set(&set);
oom:
    free(names);
    deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate node names");
    return NULL;
}

/* Bytes of the graph and its outputs, the start of its block. */
static size_t graph_head(int num_outputs) {
    return sizeof(deft_graph_t) + (size_t)num_outputs * sizeof(deft_entry_t);
}

/* Whether a graph with this many outputs lives in a record (else in malloc'd memory). */
static bool in_record(int num_outputs) {
    return graph_head(num_outputs) <= DEFT_RECORD_SIZE;
}

/* The per-node tables, together: in the rest of the graph's record when they
 * fit, else one allocation. in_entry is sized for every input (`inputs`, of
 * all the nodes), which the leaves' (not followed) may leave partly unused. */
static int alloc_tables(deft_graph_t *g, bool cut, size_t inputs) {
    size_t n = (size_t)g->num_nodes + 1, outs = (size_t)g->num_outputs;
    inputs++;
    size_t bytes = (2 * n + inputs + outs) * sizeof(int) + (cut ? n : 0) * sizeof(bool);
    size_t head = graph_head(g->num_outputs);
    bool fits = in_record(g->num_outputs) && head + bytes <= DEFT_RECORD_SIZE;
    int *ints = fits ? (int *)((char *)g + head) : (g->tables = malloc(bytes));
    if (!ints) return -1;
    g->row_ptr = ints, g->in_ptr = ints + n, g->in_entry = ints + 2 * n;
    g->output_ids = ints + 2 * n + inputs;
    g->leaf = cut ? (bool *)(ints + 2 * n + inputs + outs) : NULL;
    return 0;
}

/* Entry ids of outputs (row_ptr) and of what each input reads (in_ptr,
 * in_entry), and the graph outputs' node ids, from the walk's map. */
static void index_entries(deft_graph_t *g, const walk_map_t *m) {
    g->row_ptr[0] = g->in_ptr[0] = 0;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        bool leaf = g->leaf && g->leaf[i];
        g->row_ptr[i + 1] = g->row_ptr[i] + node->num_outputs;
        g->in_ptr[i + 1] = g->in_ptr[i] + (leaf ? 0 : node->num_inputs);
    }
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        for (int k = 0; k < g->in_ptr[i + 1] - g->in_ptr[i]; k++) {
            /* The walk finishes a node's last new input just before the node: in a chain,
             * every input is the node before, found without a lookup. */
            const deft_node_t *in = node->inputs[k].node;
            int src = i > 0 && g->nodes[i - 1] == in ? i - 1 : walk_find(m, in);
            g->in_entry[g->in_ptr[i] + k] = g->row_ptr[src] + node->inputs[k].index;
        }
    }
    for (int o = 0; o < g->num_outputs; o++) g->output_ids[o] = walk_find(m, g->outputs[o].node);
}

/* An empty graph holding its outputs (retained unless `borrowed`); NULL when out of memory. */
static deft_graph_t *graph_new(int num_outputs, const deft_entry_t *outputs, bool borrowed) {
    deft_graph_t *g =
        in_record(num_outputs) ? deft_record_alloc() : malloc(graph_head(num_outputs));
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    g->outputs = (deft_entry_t *)(g + 1);
    g->nodes = g->small_nodes;
    g->borrowed = borrowed;
    for (int o = 0; o < num_outputs; o++)
        g->outputs[g->num_outputs++] = (deft_entry_t){
            borrowed ? outputs[o].node : deft_node_retain(outputs[o].node), outputs[o].index};
    return g;
}

static int build(int num_outputs, const deft_entry_t *outputs, deft_graph_leaf_fn is_leaf,
                 void *ctx, bool borrowed, deft_graph_t **out) {
    deft_graph_t *g = graph_new(num_outputs, outputs, borrowed);
    if (!g) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
    bool own;
    walk_map_t *m = walk_begin(&own);
    size_t inputs = 0;
    leaf_list_t leaves = {.capacity = 16};
    leaves.nodes = leaves.room;
    int status = m ? topo_sort(g, m, is_leaf, ctx, &inputs, &leaves)
                   : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph index");
    if (status == 0 && alloc_tables(g, is_leaf != NULL, inputs))
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
    if (status == 0 && is_leaf) { /* by node: the walk may have renumbered (put_ranked_first) */
        memset(g->leaf, 0, (size_t)g->num_nodes * sizeof *g->leaf);
        for (int l = 0; l < leaves.count; l++) g->leaf[walk_find(m, leaves.nodes[l])] = true;
    }
    if (leaves.nodes != leaves.room) free(leaves.nodes);
    if (status == 0) index_entries(g, m);
    if (m) walk_end(m, own);
    if (status) {
        deft_graph_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int deft_graph_from_order(int num_nodes, deft_node_t *const *nodes, const int *in_entry,
                          int num_outputs, const deft_entry_t *outputs, const int *output_ids,
                          deft_graph_t **out) {
    deft_graph_t *g = graph_new(num_outputs, outputs, false);
    int capacity = DEFT_GRAPH_SMALL;
    if (!g || reserve(g, num_nodes, &capacity)) {
        deft_graph_free(g);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
    }
    memcpy(g->nodes, nodes, (size_t)num_nodes * sizeof *nodes); /* their references: now g's */
    g->num_nodes = num_nodes;
    size_t inputs = 0;
    for (int i = 0; i < num_nodes; i++) inputs += (size_t)nodes[i]->num_inputs;
    if (alloc_tables(g, false, inputs)) {
        g->num_nodes = 0; /* the references stay the caller's */
        deft_graph_free(g);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
    }
    g->row_ptr[0] = g->in_ptr[0] = 0;
    bool several = false, updates = false;
    for (int i = 0; i < num_nodes; i++) {
        const deft_node_t *node = nodes[i];
        g->row_ptr[i + 1] = g->row_ptr[i] + node->num_outputs;
        g->in_ptr[i + 1] = g->in_ptr[i] + node->num_inputs;
        several |= node->num_outputs > 1;
        updates |= node->op && deft_op_mutates_any(node->op->op);
    }
    memcpy(g->in_entry, in_entry, (size_t)g->in_ptr[num_nodes] * sizeof *in_entry);
    memcpy(g->output_ids, output_ids, (size_t)num_outputs * sizeof *output_ids);
    /* The tables that say nothing, known from this pass (an executor asks for both:
     * a pass of each over the nodes to find them so). */
    if (!several) atomic_store_explicit(&g->unwanted, &all_wanted, memory_order_relaxed);
    if (!updates) atomic_store_explicit(&g->uses, &no_updates, memory_order_relaxed);
    *out = g;
    return 0;
}

/* Naming writes names into nodes: one graph at a time. */
static pthread_mutex_t naming_lock = PTHREAD_MUTEX_INITIALIZER;

int deft_graph_build(int num_outputs, const deft_entry_t *outputs, deft_graph_t **out) {
    deft_graph_t *g;
    if (build(num_outputs, outputs, NULL, NULL, false, &g)) return -1;
    pthread_mutex_lock(&naming_lock);
    char **names = name_nodes(g);
    pthread_mutex_unlock(&naming_lock);
    if (!names) {
        deft_graph_free(g);
        return -1;
    }
    g->names = names;
    *out = g;
    return 0;
}

int deft_graph_build_unnamed(int num_outputs, const deft_entry_t *outputs, deft_graph_t **out) {
    return build(num_outputs, outputs, NULL, NULL, false, out);
}

int deft_graph_build_cut(int num_outputs, const deft_entry_t *outputs, deft_graph_leaf_fn is_leaf,
                         void *ctx, deft_graph_t **out) {
    return build(num_outputs, outputs, is_leaf, ctx, false, out);
}

int deft_graph_build_cut_borrowed(int num_outputs, const deft_entry_t *outputs,
                                  deft_graph_leaf_fn is_leaf, void *ctx, deft_graph_t **out) {
    return build(num_outputs, outputs, is_leaf, ctx, true, out);
}

const char *deft_graph_name(const deft_graph_t *g, int id) {
    char **names = __atomic_load_n(&g->names, __ATOMIC_ACQUIRE);
    if (names) return names[id];
    pthread_mutex_lock(&naming_lock);
    names = __atomic_load_n(&g->names, __ATOMIC_ACQUIRE); /* named meanwhile? */
    if (!names && (names = name_nodes(g)) != NULL)
        __atomic_store_n(&((deft_graph_t *)g)->names, names, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&naming_lock);
    if (names) return names[id];
    /* out of memory: the node's own name if it has one, else its operator's */
    const deft_node_t *node = g->nodes[id];
    return node->name ? node->name : node->op ? node->op->op->name : "variable";
}

void deft_graph_free(deft_graph_t *g) {
    if (!g) return;
    for (int i = 0; !g->borrowed && i < g->num_nodes; i++)
        deft_node_release(g->nodes[i]); /* names: theirs */
    for (int o = 0; !g->borrowed && o < g->num_outputs; o++) deft_node_release(g->outputs[o].node);
    if (g->nodes != g->small_nodes) free(g->nodes);
    free(g->names), free(g->tables), free(atomic_load(&g->map));
    free_table(atomic_load(&g->uses)), free_table(atomic_load(&g->unwanted));
    if (in_record(g->num_outputs))
        deft_record_free(g);
    else
        free(g);
}

int deft_graph_entry_node(const deft_graph_t *g, int e) {
    int lo = 0, hi = g->num_nodes - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (g->row_ptr[mid] <= e)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* How a value is used: bits of these. */
enum { USE_UPDATED = 1, USE_READ = 2 };

/* Whether a node of g may update an input in place. */
static bool any_mutates(const deft_graph_t *g) {
    for (int i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->op && deft_op_mutates_any(g->nodes[i]->op->op)) return true;
    return false;
}

/* Per entry, its uses (USE_* bits), through the entry ids of the inputs: a
 * map lookup per input was most of an executor's list of its inputs. The
 * leaves of a cut graph have no entry ids for their inputs (not followed):
 * those that are in the graph are looked up. &no_updates when nothing is
 * updated: a one-off graph's executor asked for a table per input that only
 * ever said "read". */
static void *make_use_table(const deft_graph_t *g) {
    if (!any_mutates(g)) return &no_updates;
    unsigned char *use = calloc((size_t)deft_graph_num_entries(g) + 1, 1);
    for (int i = 0; use && i < g->num_nodes; i++) {
        const deft_node_t *n = g->nodes[i];
        bool followed = g->in_ptr[i + 1] - g->in_ptr[i] == n->num_inputs;
        for (int k = 0; k < n->num_inputs; k++) {
            int e = followed ? deft_graph_input_entry(g, i, k) : -1;
            if (!followed) {
                int src = map_find(g, n->inputs[k].node);
                if (src < 0) continue; /* behind a leaf of a cut graph */
                e = g->row_ptr[src] + n->inputs[k].index;
            }
            use[e] |= mutates(n, k) ? USE_UPDATED : USE_READ;
        }
    }
    return use;
}

/* A scan of every node for one variable: only when the table cannot be allocated. */
static unsigned char scan_use(const deft_graph_t *g, const deft_node_t *var) {
    unsigned char use = 0;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *n = g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++)
            if (n->inputs[k].node == var) use |= mutates(n, k) ? USE_UPDATED : USE_READ;
    }
    return use;
}

/* A table of g's made on first use: graphs are read by several threads, and
 * the first table published wins. NULL when it cannot be made. */
static void *lazy_table(const deft_graph_t *g, _Atomic(void *) *slot,
                        void *(*make)(const deft_graph_t *g)) {
    void *table = atomic_load_explicit(slot, memory_order_acquire), *expected = NULL;
    if (table) return table;
    void *made = make(g);
    if (!made) return NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, made, memory_order_acq_rel,
                                                memory_order_acquire))
        return made;
    free_table(made);
    return expected;
}

/* The uses of node id's outputs together. */
static unsigned char use_at(const deft_graph_t *g, int id) {
    unsigned char *table = lazy_table(g, &((deft_graph_t *)g)->uses, make_use_table);
    if (!table) return scan_use(g, g->nodes[id]);
    if (table == &no_updates) return USE_READ; /* or none: not updated either way */
    unsigned char use = 0;
    for (int e = g->row_ptr[id]; e < g->row_ptr[id + 1]; e++) use |= table[e];
    return use;
}

bool deft_graph_is_auxiliary(const deft_graph_t *g, const deft_node_t *var) {
    int id = map_find(g, var);
    return id >= 0 && use_at(g, id) == USE_UPDATED;
}

bool deft_graph_is_updated(const deft_graph_t *g, const deft_node_t *var) {
    int id = map_find(g, var);
    return id >= 0 && (use_at(g, id) & USE_UPDATED);
}

bool deft_graph_is_auxiliary_at(const deft_graph_t *g, int id) {
    return use_at(g, id) == USE_UPDATED;
}

bool deft_graph_is_updated_at(const deft_graph_t *g, int id) {
    return use_at(g, id) & USE_UPDATED;
}

/* Per node, the outputs nobody reads (deft_graph_unwanted_outputs); &all_wanted when
 * no node has two outputs: a graph holds only nodes its outputs reach, through an
 * output of theirs, so a node's only output is read or returned (made per one-off
 * graph, the table cost two allocations and three passes to say nothing). */
static void *make_unwanted_table(const deft_graph_t *g) {
    bool several = false;
    for (int i = 0; !several && i < g->num_nodes; i++)
        several = g->row_ptr[i + 1] - g->row_ptr[i] > 1;
    if (!several) return &all_wanted;
    int entries = deft_graph_num_entries(g);
    bool *read = calloc((size_t)entries + 1, sizeof *read);
    uint64_t *unwanted = calloc((size_t)g->num_nodes + 1, sizeof *unwanted);
    for (int i = 0; read && unwanted && i < g->num_nodes; i++)
        for (int k = 0; k < g->in_ptr[i + 1] - g->in_ptr[i]; k++)
            read[deft_graph_input_entry(g, i, k)] = true;
    for (int o = 0; read && unwanted && o < g->num_outputs; o++)
        read[deft_graph_output_entry(g, o)] = true;
    for (int i = 0; read && unwanted && i < g->num_nodes; i++)
        for (int k = 0; k < g->row_ptr[i + 1] - g->row_ptr[i] && k < 64; k++)
            if (!read[g->row_ptr[i] + k]) unwanted[i] |= (uint64_t)1 << k;
    free(read);
    if (!read) free(unwanted), unwanted = NULL;
    return unwanted;
}

const uint64_t *deft_graph_unwanted_outputs(const deft_graph_t *g) {
    /* no table (out of memory): NULL, every output wanted, only slower */
    const uint64_t *table = lazy_table(g, &((deft_graph_t *)g)->unwanted, make_unwanted_table);
    return table == &all_wanted ? NULL : table;
}
