/*
 * A small parallel-for for kernels: splits [0, n) into chunks run by the
 * calling thread and a pool of helper threads. Work smaller than a few grains
 * stays on the caller, because waking a sleeping thread costs 10-50 us.
 */
#ifndef DEFT_CORE_PARALLEL_H
#define DEFT_CORE_PARALLEL_H

#include <stdint.h>

/* Elements per parallel chunk for simple elementwise work: below two of these
 * a kernel stays on its calling thread. */
#define DEFT_PARALLEL_GRAIN 32768

typedef void (*deft_range_fn)(void *ctx, int64_t begin, int64_t end);

/*
 * Run fn over [0, n) in chunks of at least `grain` items, in parallel when
 * n spans two grains or more. Returns when every chunk is done. Nested or
 * concurrent calls from other threads run serially on their caller.
 */
void deft_parallel_for(int64_t n, int64_t grain, deft_range_fn fn, void *ctx);

/*
 * Fork-join of two independent pieces of work: a(ctx_a) and b(ctx_b), on two
 * threads when the budget allows (else one after the other on the caller).
 * Returns when both are done. Worth it when each takes at least a few
 * microseconds (two branches of a graph: dW and dX of one layer). Each piece
 * runs wholly on one thread; a nested parallel-for inside runs serially.
 */
typedef void (*deft_task_fn)(void *ctx);
void deft_parallel_pair(deft_task_fn a, void *ctx_a, deft_task_fn b, void *ctx_b);

/*
 * A graph run is under way (nested and concurrent runs count). Its kernels
 * come microseconds apart, so between its parallel jobs the helpers keep
 * polling, up to DEFT_SPIN_HOT_NS without a job, instead of sleeping after
 * DEFT_SPIN_NS: a wake-up costs the caller a system call and the helper
 * 10-50 us, more than most of the gaps (LeNet's training step, 2 threads:
 * 0.67 -> 0.57 ms). Outside graph runs an idle helper sleeps as before, and
 * leaves the core to the host thread.
 */
void deft_parallel_hot_begin(void);
void deft_parallel_hot_end(void);

/* Parallel jobs the calling thread has shared with helpers so far: a runner reads it around a
 * kernel to tell whether the kernel split its work (core/graph/branches.h). */
unsigned long deft_parallel_jobs(void);

/* Threads a parallel-for may use: DEFT_NUM_THREADS, or the number of cores. */
int deft_parallel_threads(void);

/*
 * The thread policy. DEFT_NUM_THREADS is the number of cores deft may keep
 * busy, the calling (host) thread included: the engine has one worker fewer
 * (core/engine/engine.c), and this pool one helper fewer, since the thread
 * that calls a parallel-for runs chunks too. The engine counts the large
 * operations running at once; a kernel that runs alone may use every thread
 * (its own parallel-for, or a GEMM split into row blocks, OpenBLAS itself
 * being kept to one thread), while concurrent operations share them, so
 * engine workers, kernel helpers and OpenBLAS never oversubscribe the cores.
 */
void deft_parallel_op_begin(void);
void deft_parallel_op_end(void);
/* Threads the calling kernel may use now, at least 1. */
int deft_parallel_budget(void);

#endif
