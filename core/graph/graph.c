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

static size_t hash_pointer(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return (size_t)(x ^ (x >> 33));
}

static int map_find(const deft_graph_t *g, const deft_node_t *node) {
    size_t mask = (size_t)g->map_capacity - 1;
    for (size_t i = hash_pointer(node) & mask;; i = (i + 1) & mask) {
        if (!g->map[i].key) return -1;
        if (g->map[i].key == node) return g->map[i].id;
    }
}

static void map_put(deft_graph_t *g, const deft_node_t *node, int id) {
    size_t mask = (size_t)g->map_capacity - 1;
    size_t i = hash_pointer(node) & mask;
    while (g->map[i].key) i = (i + 1) & mask;
    g->map[i].key = node;
    g->map[i].id = id;
}

int deft_graph_node_id(const deft_graph_t *graph, const deft_node_t *node) {
    return map_find(graph, node);
}

/* Grow the node array and map so `count` more nodes fit. */
static int reserve(deft_graph_t *g, int count, int *capacity) {
    if (count <= *capacity && 2 * count <= g->map_capacity) return 0;
    if (count > *capacity) {
        int cap = *capacity;
        while (cap < count) cap *= 2;
        bool inline_list = g->nodes == g->small_nodes;
        deft_node_t **nodes = realloc(inline_list ? NULL : g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) return -1;
        if (inline_list) memcpy(nodes, g->small_nodes, sizeof g->small_nodes);
        g->nodes = nodes;
        *capacity = cap;
    }
    if (2 * count <= g->map_capacity) return 0;
    int map_cap = g->map_capacity;
    while (map_cap < 2 * count) map_cap *= 2;
    deft_graph_slot_t *map = calloc((size_t)map_cap, sizeof *map);
    if (!map) return -1;
    deft_graph_slot_t *old = g->map;
    int old_cap = g->map_capacity;
    g->map = map, g->map_capacity = map_cap;
    for (int i = 0; i < old_cap; i++)
        if (old[i].key) map_put(g, old[i].key, old[i].id);
    if (old != g->small_map) free(old);
    return 0;
}

/* Whether input k of node n is updated in place. */
static bool mutates(const deft_node_t *n, int k) {
    return deft_op_mutates(n->op->op, n->num_inputs, k);
}

/* The map's ids after the node list was reordered. */
static void renumber(deft_graph_t *g) {
    size_t mask = (size_t)g->map_capacity - 1;
    for (int id = 0; id < g->num_nodes; id++)
        for (size_t i = hash_pointer(g->nodes[id]) & mask;; i = (i + 1) & mask)
            if (g->map[i].key == g->nodes[id]) {
                g->map[i].id = id;
                break;
            }
}

static int by_rank(const void *a, const void *b) {
    int ra = (*(deft_node_t *const *)a)->arg_rank, rb = (*(deft_node_t *const *)b)->arg_rank;
    return (ra > rb) - (ra < rb);
}

/* Ranked variables move to the front, by rank; the rest keep their order.
 * Variables have no inputs, so the order stays topological. */
static void put_ranked_first(deft_graph_t *g) {
    int ranked = 0;
    for (int i = 0; i < g->num_nodes; i++) ranked += !g->nodes[i]->op && g->nodes[i]->arg_rank > 0;
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
    renumber(g);
}

/* Post-order over everything the outputs reach, without recursion; the
 * inputs of nodes that is_leaf accepts are not followed. */
static int topo_sort(deft_graph_t *g, deft_graph_leaf_fn is_leaf, void *ctx) {
    typedef struct frame {
        deft_node_t *node;
        int next_input;
    } frame_t;
    /* Shallow graphs (most runs) walk on the C stack; deep ones move to the heap. */
    frame_t small[64];
    int capacity = DEFT_GRAPH_SMALL, stack_cap = 64, depth = 0;
    frame_t *stack = small;
    for (int o = 0; o < g->num_outputs; o++) {
        deft_node_t *root = g->outputs[o].node;
        if (map_find(g, root) >= 0) continue;
        map_put(g, root, -2); /* on the stack */
        stack[depth++] = (frame_t){root, is_leaf && is_leaf(root, ctx) ? root->num_inputs : 0};
        while (depth > 0) {
            frame_t *top = &stack[depth - 1];
            if (top->next_input < top->node->num_inputs) {
                deft_node_t *in = top->node->inputs[top->next_input++].node;
                if (map_find(g, in) != -1) continue; /* done, or on the stack (no cycles exist) */
                if (depth == stack_cap) {
                    frame_t *grown = stack == small
                                         ? malloc(2 * sizeof small)
                                         : realloc(stack, (size_t)stack_cap * 2 * sizeof *stack);
                    if (!grown) goto oom;
                    if (stack == small) memcpy(grown, small, sizeof small);
                    stack = grown, stack_cap *= 2;
                }
                if (reserve(g, g->num_nodes + depth + 1, &capacity)) goto oom;
                map_put(g, in, -2);
                stack[depth++] = (frame_t){in, is_leaf && is_leaf(in, ctx) ? in->num_inputs : 0};
                continue;
            }
            if (reserve(g, g->num_nodes + depth + 1, &capacity)) goto oom;
            /* now numbered: overwrite the -2 mark */
            size_t mask = (size_t)g->map_capacity - 1;
            for (size_t i = hash_pointer(top->node) & mask;; i = (i + 1) & mask) {
                if (g->map[i].key == top->node) {
                    g->map[i].id = g->num_nodes;
                    break;
                }
            }
            g->nodes[g->num_nodes++] = deft_node_retain(top->node);
            depth--;
        }
    }
    if (stack != small) free(stack);
    put_ranked_first(g);
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

static int name_nodes(deft_graph_t *g) {
    name_set_t set = {.capacity = 16};
    while (set.capacity < 2 * g->num_nodes + 2) set.capacity *= 2;
    set.names = calloc((size_t)set.capacity, sizeof *set.names);
    set.bases = calloc((size_t)set.capacity, sizeof *set.bases);
    set.next = calloc((size_t)set.capacity, sizeof *set.next);
    g->names = calloc((size_t)(g->num_nodes ? g->num_nodes : 1), sizeof *g->names);
    if (!set.names || !set.bases || !set.next || !g->names) goto oom;
    for (int i = 0; i < g->num_nodes; i++) {
        const char *own = g->nodes[i]->name;
        if (own) set_add(&set, own);
    }
    /* Operator nodes first (in order), so variables can take their consumer's name. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->num_nodes; i++) {
            const deft_node_t *node = g->nodes[i];
            if ((node->op != NULL) != (pass == 0)) continue;
            if (node->name) { /* fixed once set, and the graph holds the node */
                g->names[i] = node->name;
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
                        snprintf(base, sizeof base, "%s_%s", g->names[c], node->input_role);
                        numbered = false;
                        break;
                    }
                }
            }
            if (!(g->names[i] = unique_name(&set, base, numbered))) goto oom;
            /* The name sticks: later views of this node (children, internals, a
             * bigger graph) see the same name. */
            g->nodes[i]->name = g->names[i];
        }
    }
    free_set(&set);
    return 0;
oom:
    free_set(&set);
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate node names");
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
 * fit, else one allocation. in_entry is sized for every input, which the
 * leaves' (not followed) may leave partly unused. */
static int alloc_tables(deft_graph_t *g, bool cut) {
    size_t n = (size_t)g->num_nodes + 1, inputs = 1;
    for (int i = 0; i < g->num_nodes; i++) inputs += (size_t)g->nodes[i]->num_inputs;
    size_t bytes = (2 * n + inputs) * sizeof(int) + (cut ? n : 0) * sizeof(bool);
    size_t head = graph_head(g->num_outputs);
    bool fits = in_record(g->num_outputs) && head + bytes <= DEFT_RECORD_SIZE;
    int *ints = fits ? (int *)((char *)g + head) : (g->tables = malloc(bytes));
    if (!ints) return -1;
    g->row_ptr = ints, g->in_ptr = ints + n, g->in_entry = ints + 2 * n;
    g->leaf = cut ? (bool *)(ints + 2 * n + inputs) : NULL;
    return 0;
}

/* Entry ids of outputs (row_ptr) and of what each input reads (in_ptr, in_entry). */
static void index_entries(deft_graph_t *g) {
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
            int src = map_find(g, node->inputs[k].node);
            g->in_entry[g->in_ptr[i] + k] = g->row_ptr[src] + node->inputs[k].index;
        }
    }
}

static int build(int num_outputs, const deft_entry_t *outputs, deft_graph_leaf_fn is_leaf,
                 void *ctx, deft_graph_t **out) {
    deft_graph_t *g =
        in_record(num_outputs) ? deft_record_alloc() : malloc(graph_head(num_outputs));
    if (!g) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
    memset(g, 0, sizeof *g);
    g->outputs = (deft_entry_t *)(g + 1);
    g->nodes = g->small_nodes;
    g->map = g->small_map, g->map_capacity = 2 * DEFT_GRAPH_SMALL;
    for (int o = 0; o < num_outputs; o++) {
        g->outputs[o] = outputs[o];
        deft_node_retain(outputs[o].node);
        g->num_outputs++;
    }
    int status = topo_sort(g, is_leaf, ctx);
    if (status == 0 && alloc_tables(g, is_leaf != NULL))
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
    for (int i = 0; status == 0 && is_leaf && i < g->num_nodes; i++)
        g->leaf[i] = is_leaf(g->nodes[i], ctx);
    if (status == 0) index_entries(g);
    if (status) {
        deft_graph_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

/* Naming writes names into nodes: one graph at a time. */
static pthread_mutex_t naming_lock = PTHREAD_MUTEX_INITIALIZER;

int deft_graph_build(int num_outputs, const deft_entry_t *outputs, deft_graph_t **out) {
    deft_graph_t *g;
    if (build(num_outputs, outputs, NULL, NULL, &g)) return -1;
    pthread_mutex_lock(&naming_lock);
    int status = name_nodes(g);
    pthread_mutex_unlock(&naming_lock);
    if (status) {
        deft_graph_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int deft_graph_build_cut(int num_outputs, const deft_entry_t *outputs, deft_graph_leaf_fn is_leaf,
                         void *ctx, deft_graph_t **out) {
    return build(num_outputs, outputs, is_leaf, ctx, out);
}

void deft_graph_free(deft_graph_t *g) {
    if (!g) return;
    for (int i = 0; i < g->num_nodes; i++) deft_node_release(g->nodes[i]); /* names: theirs */
    for (int o = 0; o < g->num_outputs; o++) deft_node_release(g->outputs[o].node);
    if (g->nodes != g->small_nodes) free(g->nodes);
    if (g->map != g->small_map) free(g->map);
    free(g->names), free(g->tables), free(atomic_load(&g->uses));
    free(atomic_load(&g->unwanted));
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

bool deft_graph_has_blocking(const deft_graph_t *g) {
    for (int i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->op && g->nodes[i]->op->op->blocking && !deft_graph_is_leaf(g, i))
            return true;
    return false;
}

/* How a value is used: bits of these. */
enum { USE_UPDATED = 1, USE_READ = 2 };

/* Per node, its uses (USE_* bits). */
static void *make_use_table(const deft_graph_t *g) {
    unsigned char *use = calloc((size_t)g->num_nodes + 1, 1);
    for (int i = 0; use && i < g->num_nodes; i++) {
        const deft_node_t *n = g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++) {
            int src = map_find(g, n->inputs[k].node);
            if (src < 0) continue; /* behind a leaf of a cut graph */
            use[src] |= mutates(n, k) ? USE_UPDATED : USE_READ;
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
    free(made);
    return expected;
}

static unsigned char use_of(const deft_graph_t *g, const deft_node_t *var) {
    int id = map_find(g, var);
    if (id < 0) return 0;
    unsigned char *table = lazy_table(g, &((deft_graph_t *)g)->uses, make_use_table);
    return table ? table[id] : scan_use(g, var);
}

bool deft_graph_is_auxiliary(const deft_graph_t *g, const deft_node_t *var) {
    return use_of(g, var) == USE_UPDATED;
}

bool deft_graph_is_updated(const deft_graph_t *g, const deft_node_t *var) {
    return use_of(g, var) & USE_UPDATED;
}

/* Per node, the outputs nobody reads (deft_graph_unwanted_outputs). */
static void *make_unwanted_table(const deft_graph_t *g) {
    int entries = deft_graph_num_entries(g);
    bool *read = calloc((size_t)entries + 1, sizeof *read);
    uint64_t *unwanted = calloc((size_t)g->num_nodes + 1, sizeof *unwanted);
    for (int i = 0; read && unwanted && i < g->num_nodes; i++)
        for (int k = 0; k < g->in_ptr[i + 1] - g->in_ptr[i]; k++)
            read[deft_graph_input_entry(g, i, k)] = true;
    for (int o = 0; read && unwanted && o < g->num_outputs; o++) {
        int id = map_find(g, g->outputs[o].node);
        if (id >= 0) read[g->row_ptr[id] + g->outputs[o].index] = true;
    }
    for (int i = 0; read && unwanted && i < g->num_nodes; i++)
        for (int k = 0; k < g->row_ptr[i + 1] - g->row_ptr[i] && k < 64; k++)
            if (!read[g->row_ptr[i] + k]) unwanted[i] |= (uint64_t)1 << k;
    free(read);
    if (!read) free(unwanted), unwanted = NULL;
    return unwanted;
}

const uint64_t *deft_graph_unwanted_outputs(const deft_graph_t *g) {
    /* no table (out of memory): NULL, every output wanted, only slower */
    return lazy_table(g, &((deft_graph_t *)g)->unwanted, make_unwanted_table);
}
