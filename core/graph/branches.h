/*
 * Independent branches of one graph run on two cores.
 *
 * A graph run is one engine operation, so without this a graph's independent
 * branches (a layer's weight gradient beside its data gradient, one layer's
 * update beside the next layer's backward) take turns on one core. The
 * executor pairs nodes instead: node i and a later node j that reads nothing
 * made at or after i run at once, i on the calling thread and j on a
 * parallel-for helper (deft_parallel_pair), and the nodes between them run
 * after the pair.
 *
 * Which pairs pay is measured, not guessed: an executor's runs 2 to 6 (the
 * first packs weights and touches fresh memory) time each node on the CPU's
 * short path, keeping its fastest, and note whether its kernel already split
 * its work between threads. A pair is made of two nodes that each took at
 * least DEFT_BRANCH_NS (environment, default 20000 ns), neither of which
 * split (a kernel that uses every
 * thread gains nothing from a second branch and would lose its own split),
 * updates an input in place, draws random numbers (a different thread would
 * not change them, but the order of draws is part of their contract), waits
 * for a host callback or copies between devices; and both read and write
 * host memory only (a GPU kernel queues on its thread's stream). DEFT_BRANCH_NS=0 pairs every such
 * pair, for tests; a negative value never pairs.
 *
 * Why 20 us and not the hand-off's cost (well under a microsecond to a
 * helper that polls): a helper woken for a pair then polls for 20 us
 * (DEFT_SPIN_NS) after it, and outside a busy graph run that poll takes the
 * core of the thread that feeds the engine. An eager MLP step at two threads
 * (bench_mlp_step.py) whose backward graph paired its 1-3 us products went
 * from 64-74 to 98-107 us; a pair of nodes of 20 us or more saves at least
 * what the poll costs.
 *
 * Pairs are chosen in the order a run meets them: j, run early, is skipped
 * where it stands, and the nodes between i and j may pair with later nodes
 * in turn (two chains side by side pair step by step).
 *
 * The memory plan shares arena bytes between values whose lives do not
 * overlap in the graph's order, and a pair changes that order: j runs before
 * the nodes between i and j that have not run. So before each paired run the
 * executor checks, on the run's own tensors, that j writes no byte that i or
 * such a node reads or writes, and that i writes none that j reads (it may
 * not, as planned, but a caller's output may alias a caller's input), and
 * that what j reads is made (an earlier pair may have been refused); where
 * that fails the two run in order.
 */
#ifndef DEFT_CORE_BRANCHES_H
#define DEFT_CORE_BRANCHES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph/graph.h"

typedef struct deft_branches deft_branches_t;

/* Runs timed, and runs before the pairs are chosen (the first is not timed). */
#define DEFT_BRANCH_TIMED_RUNS    5
#define DEFT_BRANCH_LEARNING_RUNS (1 + DEFT_BRANCH_TIMED_RUNS)

/* What a graph's branch state learnt so far, for tests: runs timed, and pairs made. */
typedef struct deft_branch_stat {
    int timed_runs, pairs;
    long paired_runs; /* pairs that ran at once (the memory check passed) */
} deft_branch_stat_t;

/* The branch state of graph g (an executor's); NULL with the error set on failure. */
deft_branches_t *deft_branches_new(const deft_graph_t *g);
void deft_branches_free(deft_branches_t *b);

/* A run begins: true when it should time its nodes (deft_branches_time). */
bool deft_branches_run_begin(deft_branches_t *b);
/* Node i took ns nanoseconds; `split`: its kernel shared its work between threads. */
void deft_branches_time(deft_branches_t *b, int i, int64_t ns, bool split);
/* A timing run ended: after the last one, the pairs are chosen. */
void deft_branches_run_end(deft_branches_t *b, const deft_graph_t *g);

/* The node paired with node i (later than i), or -1; every node -1 before pairs are chosen. */
int deft_branches_partner(const deft_branches_t *b, int i);
/* Whether any pair was chosen (a run without one takes the plain loop). */
bool deft_branches_any(const deft_branches_t *b);
/* Whether nodes i and j (a pair) may run at once on tensors t, ran[k] saying which nodes have
 * run (see above); counts the runs. */
bool deft_branches_ready(deft_branches_t *b, const deft_graph_t *g, const deft_tensor_t *t, int i,
                         int j, const unsigned char *ran);

void deft_branches_stat(const deft_branches_t *b, deft_branch_stat_t *out);

#endif
