/* Independent branches of one graph on two cores (branches.h). */
#include "core/graph/branches.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/op/op.h"

#define FIRST_TIMED 2 /* the first run packs weights and touches fresh memory */
#define TIMED_RUNS  DEFT_BRANCH_TIMED_RUNS
#define WINDOW      8 /* how far after node i its partner may be */
#define UNTIMED     INT64_MAX

struct deft_branches {
    int num_nodes;
    int64_t min_ns;       /* DEFT_BRANCH_NS; negative: never pair */
    atomic_int runs;      /* begun */
    atomic_int timed;     /* timing runs ended */
    atomic_bool chosen;   /* partner[] is final */
    atomic_llong *ns;     /* per node: the shortest time seen, or UNTIMED */
    atomic_bool *split;   /* per node: its kernel split its work between threads */
    int *partner;         /* per node: its pair's later node, or -1 */
    int pairs;            /* chosen */
    atomic_long together; /* paired runs that passed the memory check */
};

static int64_t branch_ns(void) {
    const char *env = getenv("DEFT_BRANCH_NS");
    return env && *env ? strtoll(env, NULL, 10) : 20000;
}

deft_branches_t *deft_branches_new(const deft_graph_t *g) {
    int n = g->num_nodes;
    deft_branches_t *b = calloc(1, sizeof *b);
    if (b) {
        b->ns = malloc(((size_t)n + 1) * sizeof *b->ns);
        b->split = malloc(((size_t)n + 1) * sizeof *b->split);
        b->partner = malloc(((size_t)n + 1) * sizeof *b->partner);
    }
    if (!b || !b->ns || !b->split || !b->partner) {
        deft_branches_free(b);
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the branches of a %d-node graph", n);
        return NULL;
    }
    b->num_nodes = n;
    b->min_ns = branch_ns();
    for (int i = 0; i < n; i++) {
        atomic_init(&b->ns[i], UNTIMED);
        atomic_init(&b->split[i], false);
        b->partner[i] = -1;
    }
    return b;
}

void deft_branches_free(deft_branches_t *b) {
    if (!b) return;
    free(b->ns), free(b->split), free(b->partner);
    free(b);
}

bool deft_branches_run_begin(deft_branches_t *b) {
    if (b->min_ns < 0 || atomic_load_explicit(&b->chosen, memory_order_acquire) ||
        deft_parallel_threads() < 2)
        return false;
    int run = atomic_fetch_add_explicit(&b->runs, 1, memory_order_relaxed) + 1;
    return run >= FIRST_TIMED && run < FIRST_TIMED + TIMED_RUNS;
}

void deft_branches_time(deft_branches_t *b, int i, int64_t ns, bool split) {
    long long seen = atomic_load_explicit(&b->ns[i], memory_order_relaxed);
    while (ns < seen && !atomic_compare_exchange_weak_explicit(
                            &b->ns[i], &seen, ns, memory_order_relaxed, memory_order_relaxed)) {
    }
    if (split) atomic_store_explicit(&b->split[i], true, memory_order_relaxed);
}

/* Node i may be half of a pair: timed, long enough, on its own thread, and free of effects
 * whose order matters. */
static bool eligible(const deft_branches_t *b, const deft_graph_t *g, int i) {
    const deft_node_t *node = g->nodes[i];
    if (deft_graph_is_leaf(g, i) || !node->op) return false;
    const deft_op_t *op = node->op->op;
    int64_t ns = atomic_load_explicit(&b->ns[i], memory_order_relaxed);
    return ns != UNTIMED && ns >= b->min_ns &&
           !atomic_load_explicit(&b->split[i], memory_order_relaxed) && !op->nondeterministic &&
           !op->blocking && !op->any_device && !deft_op_mutates_any(op);
}

/* Whether node j reads a value that an operator in [i, j) not yet run makes, or one updates in
 * place (variables between them hold values from before the run). */
static bool depends(const deft_graph_t *g, int i, int j, const unsigned char *ran) {
    for (int k = 0; k < g->nodes[j]->num_inputs; k++) {
        int e = deft_graph_input_entry(g, j, k);
        for (int m = i; m < j; m++) {
            const deft_node_t *node = g->nodes[m];
            if (ran[m] || deft_graph_is_leaf(g, m) || !node->op) continue;
            if (e >= g->row_ptr[m] && e < g->row_ptr[m + 1]) return true;
            for (int u = 0; deft_op_mutates_any(node->op->op) && u < node->num_inputs; u++)
                if (deft_op_mutates(node->op->op, node->num_inputs, u) &&
                    deft_graph_input_entry(g, m, u) == e)
                    return true;
        }
    }
    return false;
}

/* Node i's partner: the first eligible node of the next WINDOW operators not run yet that
 * depends on nothing from i on; -1 when none. */
static int find_partner(const deft_branches_t *b, const deft_graph_t *g, int i,
                        const unsigned char *ran) {
    for (int j = i + 1, seen = 0; j < g->num_nodes && seen < WINDOW; j++) {
        if (ran[j] || deft_graph_is_leaf(g, j) || !g->nodes[j]->op) continue;
        seen++;
        if (eligible(b, g, j) && !depends(g, i, j, ran)) return j;
    }
    return -1;
}

/* The pairs, in the order a run meets them: a node run early with an earlier one is skipped
 * where it stands, and the nodes between may pair with later ones in turn. */
static int choose(deft_branches_t *b, const deft_graph_t *g) {
    unsigned char *ran = calloc((size_t)g->num_nodes + 1, 1);
    if (!ran) return -1;
    for (int i = 0; i < g->num_nodes; i++) {
        if (ran[i]) continue;
        int j = eligible(b, g, i) ? find_partner(b, g, i, ran) : -1;
        ran[i] = 1;
        if (j < 0) continue;
        b->partner[i] = j;
        ran[j] = 1;
        b->pairs++;
    }
    free(ran);
    return 0;
}

void deft_branches_run_end(deft_branches_t *b, const deft_graph_t *g) {
    if (atomic_fetch_add_explicit(&b->timed, 1, memory_order_acq_rel) + 1 != TIMED_RUNS) return;
    if (choose(b, g)) { /* no room to choose: no pairs, as without a second thread */
        for (int i = 0; i < g->num_nodes; i++) b->partner[i] = -1;
        b->pairs = 0;
    }
    atomic_store_explicit(&b->chosen, true, memory_order_release);
}

int deft_branches_partner(const deft_branches_t *b, int i) {
    return b->partner[i];
}

bool deft_branches_any(const deft_branches_t *b) {
    return atomic_load_explicit(&b->chosen, memory_order_acquire) && b->pairs > 0;
}

static bool overlap(const deft_tensor_t *x, const deft_tensor_t *y) {
    size_t nx = deft_tensor_nbytes(x), ny = deft_tensor_nbytes(y);
    if (!x->storage || !y->storage || nx == 0 || ny == 0) return false;
    const char *px = deft_tensor_data(x), *py = deft_tensor_data(y);
    return px < py + ny && py < px + nx;
}

/* Whether any input or output of node k overlaps w. */
static bool touches(const deft_graph_t *g, const deft_tensor_t *t, int k, const deft_tensor_t *w) {
    if (deft_graph_is_leaf(g, k) || !g->nodes[k]->op) return false;
    for (int u = 0; u < g->nodes[k]->num_inputs; u++)
        if (overlap(&t[deft_graph_input_entry(g, k, u)], w)) return true;
    for (int e = g->row_ptr[k]; e < g->row_ptr[k + 1]; e++)
        if (overlap(&t[e], w)) return true;
    return false;
}

/* Whether every input and output of node k is in host memory: a kernel on a GPU queues on its
 * thread's stream, which a helper thread does not share. */
static bool on_host(const deft_graph_t *g, const deft_tensor_t *t, int k) {
    for (int u = 0; u < g->nodes[k]->num_inputs; u++)
        if (t[deft_graph_input_entry(g, k, u)].device.type != DEFT_DEV_CPU) return false;
    for (int e = g->row_ptr[k]; e < g->row_ptr[k + 1]; e++)
        if (t[e].device.type != DEFT_DEV_CPU) return false;
    return true;
}

bool deft_branches_ready(deft_branches_t *b, const deft_graph_t *g, const deft_tensor_t *t, int i,
                         int j, const unsigned char *ran) {
    if (!on_host(g, t, i) || !on_host(g, t, j)) return false;
    for (int u = 0; u < g->nodes[j]->num_inputs; u++) { /* a pair before may have been refused */
        int m = deft_graph_entry_node(g, deft_graph_input_entry(g, j, u));
        if (m >= i && !ran[m] && !deft_graph_is_leaf(g, m) && g->nodes[m]->op) return false;
    }
    for (int e = g->row_ptr[j]; e < g->row_ptr[j + 1]; e++) {
        for (int k = i; k < j; k++)
            if (!ran[k] && touches(g, t, k, &t[e])) return false;
    }
    for (int e = g->row_ptr[i]; e < g->row_ptr[i + 1]; e++) {
        for (int u = 0; u < g->nodes[j]->num_inputs; u++)
            if (overlap(&t[deft_graph_input_entry(g, j, u)], &t[e])) return false;
    }
    atomic_fetch_add_explicit(&b->together, 1, memory_order_relaxed);
    return true;
}

void deft_branches_stat(const deft_branches_t *b, deft_branch_stat_t *out) {
    int timed = atomic_load_explicit(&b->timed, memory_order_acquire);
    out->timed_runs = timed < TIMED_RUNS ? timed : TIMED_RUNS;
    out->pairs = atomic_load_explicit(&b->chosen, memory_order_acquire) ? b->pairs : 0;
    out->paired_runs = atomic_load_explicit(&b->together, memory_order_relaxed);
}
