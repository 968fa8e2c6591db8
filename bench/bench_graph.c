#define _POSIX_C_SOURCE 200809L
/*
 * Executor benchmark: a 10,000-node chain of 1-element _plus_scalar run by
 * the executor (one engine operation for the whole graph, memory planned),
 * against the same chain of imperative calls, in the same run.
 */
#include <deft/c_api.h>

#include "bench_util.h"

#define NODES 10000

static DeftSymbolHandle chain_symbol(void) {
    DeftSymbolHandle cur;
    CHECK(DeftSymbolCreateVariable("x", &cur));
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    for (int i = 0; i < NODES; i++) {
        DeftSymbolHandle next;
        CHECK(DeftSymbolCreateAtomic(op("_plus_scalar"), 1, keys, vals, &next));
        CHECK(DeftSymbolCompose(next, NULL, 1, NULL, &cur));
        CHECK(DeftSymbolFree(cur));
        cur = next;
    }
    return cur;
}

static double run_executor(DeftCachedOpHandle exec, DeftNDArrayHandle x) {
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    double t0 = now();
    CHECK(DeftCachedOpInvoke(exec, 1, &x, &nout, out));
    CHECK(DeftNDArrayWaitToRead(out[0]));
    double t = now() - t0;
    CHECK(DeftNDArrayFree(out[0]));
    return t;
}

static double run_imperative(DeftNDArrayHandle x) {
    DeftOpHandle plus = op("_plus_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    DeftNDArrayHandle cur = x;
    double t0 = now();
    for (int i = 0; i < NODES; i++) {
        DeftNDArrayHandle out[1] = {NULL};
        int nout = 1;
        CHECK(DeftImperativeInvoke(plus, 1, &cur, &nout, out, 1, keys, vals));
        if (cur != x) CHECK(DeftNDArrayFree(cur));
        cur = out[0];
    }
    CHECK(DeftNDArrayWaitToRead(cur));
    double t = now() - t0;
    CHECK(DeftNDArrayFree(cur));
    return t;
}

int main(void) {
    printf("deft graph benchmarks\n");
    double t0 = now();
    DeftSymbolHandle sym = chain_symbol();
    double build = now() - t0;
    DeftCachedOpHandle exec;
    CHECK(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle x;
    const int64_t shape[1] = {1};
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    t0 = now();
    run_executor(exec, x); /* the first run infers and plans */
    double first = now() - t0;
    double best_exec = 1e30, best_imp = 1e30;
    for (int r = 0; r < 20; r++) {
        double e = run_executor(exec, x), i = run_imperative(x);
        best_exec = e < best_exec ? e : best_exec;
        best_imp = i < best_imp ? i : best_imp;
    }
    int64_t arena, naive;
    CHECK(DeftCachedOpGetPlanStat(exec, DEFT_PLAN_ARENA_BYTES, &arena));
    CHECK(DeftCachedOpGetPlanStat(exec, DEFT_PLAN_NAIVE_BYTES, &naive));
    printf("chain of %d 1-element _plus_scalar nodes:\n"
           "    executor %.1f ns/node, imperative %.1f ns/call (imperative/executor %.1f)\n"
           "    graph build %.0f ns/node (symbol API), first run with inference and planning "
           "%.0f ns/node\n"
           "    memory plan: arena %lld bytes, naive %lld bytes\n",
           NODES, best_exec / NODES * 1e9, best_imp / NODES * 1e9, best_imp / best_exec,
           build / NODES * 1e9, first / NODES * 1e9, (long long)arena, (long long)naive);
    CHECK(DeftNDArrayFree(x));
    CHECK(DeftCachedOpFree(exec));
    CHECK(DeftSymbolFree(sym));
    return 0;
}
