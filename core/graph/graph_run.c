#define _GNU_SOURCE /* clock_gettime (spin.h) */
/*
 * A graph run: each node's kernel on per-entry tensors, in the graph's
 * order, or with independent nodes two at a time (branches.h). The
 * executor (executor.c) and deferred compute's trigger runs both come here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/base/profiler.h"
#include "core/base/spin.h"
#include "core/graph/branches.h"
#include "core/graph/executor.h"

/* A kernel's failure, its message kept (deft_error_restore names the run's caller). */
static int kernel_failed(void) {
    char detail[DEFT_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s", deft_error_message());
    return deft_error_restore(deft_error_kind(), detail);
}

/* Node i on a GPU, or while the profiler records: its device's kernel, timed. */
static int run_node_slow(const deft_graph_t *g, int i, const deft_tensor_t *in, deft_tensor_t *out,
                         uint64_t unwanted) {
    const deft_node_t *node = g->nodes[i];
    const deft_op_t *op = node->op->op;
    deft_device_t dev = node->num_outputs ? out->device : deft_device_cpu();
    deft_forward_fn forward = dev.type == DEFT_DEV_GPU ? op->forward_gpu : op->forward;
    if (!forward)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "node '%s' (%s) has no GPU kernel",
                          deft_graph_name(g, i), op->name);
    double start = deft_profiling(DEFT_PROF_SYMBOLIC) ? deft_profiler_now() : 0;
    void *timer = start != 0 ? deft_device_timer_start(dev, op->name) : NULL;
    deft_op_set_unwanted(unwanted);
    int status = forward(op, node->params, node->num_inputs, in, node->num_outputs, out);
    deft_op_set_unwanted(0);
    if (timer) deft_device_timer_stop(dev, timer);
    if (status) return kernel_failed();
    if (start != 0)
        deft_profiler_op_span("graph", op->name, deft_profiler_device_name(dev), start,
                              deft_profiler_now());
    return 0;
}

/* Node i's kernel: the common node (on the CPU, the profiler off) takes the short path, and a
 * node of one input reads its tensor in place rather than a copy (a tensor is 104 bytes). */
static inline __attribute__((always_inline)) int run_node(const deft_graph_t *g, int i,
                                                          const deft_node_t *node, const int *from,
                                                          deft_tensor_t *t, deft_tensor_t *out,
                                                          uint64_t mask) {
    deft_tensor_t copies[DEFT_OP_MAX_INPUTS]; /* no node has more (node.c checks) */
    int nin = node->num_inputs;
    const deft_tensor_t *in = nin == 1 ? &t[from[0]] : copies;
    for (int k = 0; nin > 1 && k < nin; k++) copies[k] = t[from[k]];
    const deft_op_t *op = node->op->op;
    bool on_cpu = node->num_outputs == 0 || out->device.type != DEFT_DEV_GPU;
    if (!on_cpu || !op->forward || deft_profiling(DEFT_PROF_SYMBOLIC))
        return run_node_slow(g, i, in, out, mask);
    /* Between kernels no output is unwanted (deft_graph_run clears it, a kernel running a graph
     * of its own may have set it): the common node, all wanted, saves two calls (6% of the
     * 100-node chain's run, callgrind). */
    if (mask) deft_op_set_unwanted(mask);
    int status = op->forward(op, node->params, nin, in, node->num_outputs, out);
    if (mask) deft_op_set_unwanted(0);
    return status ? kernel_failed() : 0;
}

/*
 * The executor's per-node cost is this loop (bench_graph's chains of 1-element
 * nodes time it). With deft_flat_run's lean tiny path, the 100-node chain's run
 * went from 13.7 to 10.0 ns/node (min).
 */
static int graph_forward(const deft_graph_t *g, deft_tensor_t *t) {
    const uint64_t *unwanted = deft_graph_unwanted_outputs(g); /* NULL: all wanted */
    /* The graph's tables in locals: the kernels' stores could alias them, so the
     * compiler would reload every field after each call. */
    const deft_node_t *const *nodes = (const deft_node_t *const *)g->nodes;
    const bool *leaf = g->leaf;
    const int *row_ptr = g->row_ptr, *in_ptr = g->in_ptr, *in_entry = g->in_entry;
    for (int i = 0, n = g->num_nodes; i < n; i++) {
        const deft_node_t *node = nodes[i];
        if (!node->op || (leaf && leaf[i])) continue; /* deft_graph_is_leaf */
        if (run_node(g, i, node, &in_entry[in_ptr[i]], t, &t[row_ptr[i]],
                     unwanted ? unwanted[i] : 0))
            return -1;
    }
    return 0;
}

/* A node run on a parallel-for helper, with the caller's thread state. */
typedef struct branch_task {
    const deft_graph_t *g;
    deft_tensor_t *t;
    int i, status;
    uint64_t mask;
    bool training;
    const deft_vouched_t *vouched;
    int num_vouched;
    const char *function; /* the API call errors name */
    deft_error_kind_t kind;
    char message[DEFT_ERROR_MAX];
} branch_task_t;

static void run_task(void *arg) {
    branch_task_t *k = arg;
    const deft_graph_t *g = k->g;
    bool was_training;
    const deft_vouched_t *was_vouched;
    int was_num;
    deft_op_set_training(k->training, &was_training);
    deft_op_set_vouched(k->vouched, k->num_vouched, &was_vouched, &was_num);
    const char *was_function = deft_error_swap_function(k->function);
    k->status = run_node(g, k->i, g->nodes[k->i], &g->in_entry[g->in_ptr[k->i]], k->t,
                         &k->t[g->row_ptr[k->i]], k->mask);
    if (k->status) {
        k->kind = deft_error_kind();
        snprintf(k->message, sizeof k->message, "%s", deft_error_message());
    }
    deft_error_swap_function(was_function);
    deft_op_set_vouched(was_vouched, was_num, NULL, NULL);
    deft_op_set_training(was_training, NULL);
}

/* Nodes i and j at once, j on a helper when one is free; the first failure's error. */
static int run_pair(const deft_graph_t *g, deft_tensor_t *t, int i, int j,
                    const uint64_t *unwanted) {
    branch_task_t task[2];
    for (int k = 0; k < 2; k++) {
        task[k] = (branch_task_t){.g = g, .t = t, .i = k ? j : i, .training = deft_op_training()};
        task[k].mask = unwanted ? unwanted[task[k].i] : 0;
        deft_op_vouched(&task[k].vouched, &task[k].num_vouched);
        task[k].function = deft_error_swap_function(NULL);
        deft_error_swap_function(task[k].function);
    }
    deft_parallel_pair(run_task, &task[0], run_task, &task[1]);
    const branch_task_t *failed = task[0].status ? &task[0] : task[1].status ? &task[1] : NULL;
    return failed ? deft_error_restore(failed->kind, failed->message) : 0;
}

/* Node i alone, timed for the branches when `timing` (the short path only). */
static int run_timed(const deft_graph_t *g, deft_tensor_t *t, int i, uint64_t mask,
                     deft_branches_t *b, bool timing) {
    const deft_node_t *node = g->nodes[i];
    int64_t start = timing ? deft_spin_clock_ns() : 0;
    unsigned long jobs = deft_parallel_jobs();
    deft_tensor_t *out = &t[g->row_ptr[i]];
    if (run_node(g, i, node, &g->in_entry[g->in_ptr[i]], t, out, mask)) return -1;
    bool short_path = (node->num_outputs == 0 || out->device.type != DEFT_DEV_GPU) &&
                      node->op->op->forward && !deft_profiling(DEFT_PROF_SYMBOLIC);
    if (timing && short_path)
        deft_branches_time(b, i, deft_spin_clock_ns() - start, deft_parallel_jobs() != jobs);
    return 0;
}

/* The loop of a graph whose branches are being timed, or that has pairs to run at once. */
static int graph_forward_branches(const deft_graph_t *g, deft_tensor_t *t, deft_branches_t *b,
                                  bool timing) {
    const uint64_t *unwanted = deft_graph_unwanted_outputs(g);
    bool paired = !timing && !deft_profiling(DEFT_PROF_SYMBOLIC);
    unsigned char room[1024], *ran = room; /* per node: it has run */
    if (g->num_nodes > (int)sizeof room && !(ran = malloc((size_t)g->num_nodes)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a %d-node run", g->num_nodes);
    memset(ran, 0, (size_t)g->num_nodes);
    int status = 0;
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        if (ran[i] || !g->nodes[i]->op || deft_graph_is_leaf(g, i)) continue;
        int j = paired ? deft_branches_partner(b, i) : -1;
        if (j > i && !ran[j] && deft_branches_ready(b, g, t, i, j, ran)) {
            status = run_pair(g, t, i, j, unwanted);
            ran[j] = 1;
        } else {
            status = run_timed(g, t, i, unwanted ? unwanted[i] : 0, b, timing);
        }
        ran[i] = 1;
    }
    if (ran != room) free(ran);
    return status;
}

int deft_graph_run(const deft_graph_t *g, deft_tensor_t *t, bool training, deft_branches_t *b) {
    bool was_training;
    deft_op_set_training(training, &was_training);
    deft_op_set_unwanted(0); /* run_node's start: a run inside a kernel finds its node's mask */
    deft_parallel_hot_begin();
    bool timing = b && !deft_profiling(DEFT_PROF_SYMBOLIC) && deft_branches_run_begin(b);
    int status = timing || (b && deft_branches_any(b)) ? graph_forward_branches(g, t, b, timing)
                                                       : graph_forward(g, t);
    if (timing) deft_branches_run_end(b, g);
    deft_parallel_hot_end();
    deft_op_set_training(was_training, NULL);
    return status;
}

int deft_graph_forward(const deft_graph_t *g, deft_tensor_t *t, bool training) {
    return deft_graph_run(g, t, training, NULL);
}
