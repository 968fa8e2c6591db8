#define _POSIX_C_SOURCE 200809L
/*
 * Deferred compute and autograd benchmark, all in one run:
 *  - cost per call of recording (deferred, and imperative with autograd on)
 *    against the same imperative call without recording, for a 1-element
 *    sum (libccv NNC measured ~450 ns recording, ~150-350 ns no-grad, on
 *    another machine: bench/python/bench_recording.py scales these times to
 *    it by timing np.add in the same run);
 *  - backward of a 1-op and a 32-op graph called again and again (NNC
 *    rebuilds each time: ~9 us and ~450 us);
 *  - the cost of triggering a lazy array;
 *  - (x+5)*(x+5) chains and a small MLP, recorded once by deferred compute,
 *    exported and run by the executor, against running them imperatively.
 */
#include <string.h>

#include "bench_util.h"

static DeftNDArrayHandle array(int64_t rows, int64_t cols, float value) {
    int64_t shape[2] = {rows, cols};
    size_t n = (size_t)(rows * cols);
    float *data = malloc(n * sizeof *data);
    for (size_t i = 0; i < n; i++) data[i] = value * (float)((i % 7) + 1) / 7.0f;
    DeftNDArrayHandle h;
    CHECK(
        DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, data, n * sizeof *data, &h));
    free(data);
    return h;
}

static DeftNDArrayHandle call(const char *name, int nin, DeftNDArrayHandle *in, const char *key,
                              const char *val) {
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    CHECK(DeftImperativeInvoke(op(name), nin, in, &nout, &out, key ? 1 : 0, &key, &val));
    return out;
}

/* ---- recording cost ---- */

/* The modes alternate in short batches and each keeps its best batch, so a
 * noisy neighbour slows them alike instead of skewing the ratios. */
static void recording_cost(void) {
    DeftNDArrayHandle x = array(1, 1, 1), g = array(1, 1, 0);
    CHECK(DeftAutogradMarkVariables(1, &x, NULL, &g));
    double best[3] = {1e30, 1e30, 1e30};
    sum_call_ns(x, CALL_PLAIN, 20000); /* warm up */
    for (int rep = 0; rep < 40; rep++)
        for (int m = 0; m < 3; m++) {
            double t = sum_call_ns(x, (call_mode_t)m, 20000);
            if (t < best[m]) best[m] = t;
        }
    printf("recording, 1-element sum (ns per call; NNC: ~450 recording, ~150-350 no-grad)\n");
    printf("  imperative, not recording %8.0f ns\n", best[CALL_PLAIN]);
    printf("  deferred (recorded only)  %8.0f ns  %.2fx the imperative call\n", best[CALL_DEFERRED],
           best[CALL_DEFERRED] / best[CALL_PLAIN]);
    printf("  imperative + autograd     %8.0f ns  %.2fx the imperative call\n",
           best[CALL_RECORDING], best[CALL_RECORDING] / best[CALL_PLAIN]);
    CHECK(DeftNDArrayFree(x));
    CHECK(DeftNDArrayFree(g));
}

/* ---- backward ---- */

/* Record `ops` calls of x*1.01 + 0 ... on a marked x, then backward: microseconds per round. */
static double backward_us(DeftNDArrayHandle x, int ops, double *record_us) {
    const int rounds = 2000;
    double rec = 0, total = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        CHECK(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle cur = x;
        for (int i = 0; i < ops; i++) {
            DeftNDArrayHandle next =
                call(i % 2 ? "_mul_scalar" : "tanh", 1, &cur, i % 2 ? "scalar" : NULL, "1.01");
            if (cur != x) CHECK(DeftNDArrayFree(cur));
            cur = next;
        }
        CHECK(DeftAutogradSetIsRecording(0, NULL));
        double t1 = now();
        CHECK(DeftAutogradBackward(1, &cur, NULL, 0, 0));
        CHECK(DeftWaitAll());
        double t2 = now();
        CHECK(DeftNDArrayFree(cur));
        if (r >= rounds / 10) rec += t1 - t0, total += t2 - t1; /* after warm-up */
    }
    int counted = rounds - rounds / 10;
    *record_us = rec / counted * 1e6;
    return total / counted * 1e6;
}

static void backward_cost(void) {
    DeftNDArrayHandle x = array(1, 16, 0.5), g = array(1, 16, 0);
    CHECK(DeftAutogradMarkVariables(1, &x, NULL, &g));
    printf(
        "backward, repeated on the same graph shape (NNC rebuilds: ~9 us 1-op, ~450 us 32-op)\n");
    for (int ops = 1; ops <= 32; ops *= 32) {
        double record, back = backward_us(x, ops, &record);
        printf("  %2d-op graph: backward %7.1f us   (recording it: %6.1f us)\n", ops, back, record);
    }
    CHECK(DeftNDArrayFree(x));
    CHECK(DeftNDArrayFree(g));
}

/* ---- trigger ---- */

static void trigger_cost(void) {
    DeftNDArrayHandle x = array(1, 1, 1);
    const int n = 100000;
    double best_lazy = 1e30, best_plain = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (int i = 0; i < n; i++) {
            CHECK(DeftSetIsDeferredCompute(1, NULL));
            DeftNDArrayHandle y = call("_plus_scalar", 1, &x, "scalar", "1");
            CHECK(DeftSetIsDeferredCompute(0, NULL));
            CHECK(DeftNDArrayWaitToRead(y));
            CHECK(DeftNDArrayFree(y));
        }
        double t1 = now();
        for (int i = 0; i < n; i++) {
            DeftNDArrayHandle y = call("_plus_scalar", 1, &x, "scalar", "1");
            CHECK(DeftNDArrayWaitToRead(y));
            CHECK(DeftNDArrayFree(y));
        }
        double t2 = now();
        if ((t1 - t0) / n < best_lazy) best_lazy = (t1 - t0) / n;
        if ((t2 - t1) / n < best_plain) best_plain = (t2 - t1) / n;
    }
    printf("trigger: record 1 op + compute + read %6.0f ns, imperative call + read %5.0f ns "
           "(%.2fx)\n",
           best_lazy * 1e9, best_plain * 1e9, best_lazy / best_plain);
    CHECK(DeftNDArrayFree(x));
}

/* ---- deferred + export + executor against imperative ---- */

typedef DeftNDArrayHandle (*model_fn)(DeftNDArrayHandle *params);

/* (x+5)*(x+5) repeated `chain_len` times on a small array. */
enum { CHAIN_LEN = 50 };
static DeftNDArrayHandle square_chain(DeftNDArrayHandle *p) {
    DeftNDArrayHandle cur = p[0];
    for (int i = 0; i < CHAIN_LEN; i++) {
        DeftNDArrayHandle a = call("_plus_scalar", 1, &cur, "scalar", "5");
        DeftNDArrayHandle b = call("_plus_scalar", 1, &cur, "scalar", "5");
        DeftNDArrayHandle c = call("elemwise_mul", 2, (DeftNDArrayHandle[]){a, b}, NULL, NULL);
        DeftNDArrayHandle d = call("_mul_scalar", 1, &c, "scalar", "0.001");
        CHECK(DeftNDArrayFree(a));
        CHECK(DeftNDArrayFree(b));
        CHECK(DeftNDArrayFree(c));
        if (cur != p[0]) CHECK(DeftNDArrayFree(cur));
        cur = d;
    }
    return cur;
}

/* A 2-layer MLP on a batch of 32: 64 -> 128 -> 10, softmax. */
static DeftNDArrayHandle mlp(DeftNDArrayHandle *p) {
    DeftNDArrayHandle h =
        call("FullyConnected", 3, (DeftNDArrayHandle[]){p[0], p[1], p[2]}, "num_hidden", "128");
    DeftNDArrayHandle a = call("relu", 1, &h, NULL, NULL);
    DeftNDArrayHandle o =
        call("FullyConnected", 3, (DeftNDArrayHandle[]){a, p[3], p[4]}, "num_hidden", "10");
    DeftNDArrayHandle s = call("softmax", 1, &o, NULL, NULL);
    CHECK(DeftNDArrayFree(h));
    CHECK(DeftNDArrayFree(a));
    CHECK(DeftNDArrayFree(o));
    return s;
}

static double time_imperative(model_fn model, DeftNDArrayHandle *p, int rounds) {
    double t0 = now();
    for (int r = 0; r < rounds; r++) {
        DeftNDArrayHandle y = model(p);
        CHECK(DeftNDArrayWaitToRead(y));
        CHECK(DeftNDArrayFree(y));
    }
    return (now() - t0) / rounds;
}

static double time_executor(model_fn model, DeftNDArrayHandle *p, int np, int rounds) {
    static const char *names[] = {"p0", "p1", "p2", "p3", "p4"};
    CHECK(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle lazy = model(p);
    CHECK(DeftSetIsDeferredCompute(0, NULL));
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    CHECK(DeftNDArrayGetDeferredComputeSymbol(p, &lazy, names, (const char *[]){"y"}, np, 1, &sym));
    CHECK(DeftCachedOpCreate(sym, 0, &exec));
    double t0 = now();
    for (int r = 0; r < rounds; r++) {
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        CHECK(DeftCachedOpInvoke(exec, np, p, &nout, &y));
        CHECK(DeftNDArrayWaitToRead(y));
        CHECK(DeftNDArrayFree(y));
    }
    double t = (now() - t0) / rounds;
    CHECK(DeftCachedOpFree(exec));
    CHECK(DeftSymbolFree(sym));
    CHECK(DeftNDArrayFree(lazy));
    return t;
}

static void compare(const char *what, model_fn model, DeftNDArrayHandle *p, int np, int rounds) {
    time_imperative(model, p, rounds / 10 + 1);
    double imp = 1e30, exe = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double a = time_imperative(model, p, rounds), b = time_executor(model, p, np, rounds);
        if (a < imp) imp = a;
        if (b < exe) exe = b;
    }
    printf("  %-34s imperative %8.1f us, executor %8.1f us: %.2fx faster\n", what, imp * 1e6,
           exe * 1e6, imp / exe);
}

int main(void) {
    recording_cost();
    backward_cost();
    trigger_cost();
    printf("deferred compute -> export -> executor, against imperative calls\n");
    DeftNDArrayHandle x = array(1, 16, 0.1f);
    compare("(x+5)*(x+5) chain, 200 calls, 16 el", square_chain, &x, 1, 2000);
    DeftNDArrayHandle p[5] = {array(32, 64, 0.5f), array(128, 64, 0.02f), array(1, 128, 0.1f),
                              array(10, 128, 0.03f), array(1, 10, 0.1f)};
    int64_t b1[1] = {128}, b2[1] = {10};
    DeftNDArrayHandle bias1, bias2;
    CHECK(DeftNDArrayCreate(b1, 1, DEFT_FLOAT32, DEFT_CPU, 0, &bias1));
    CHECK(DeftNDArrayCreate(b2, 1, DEFT_FLOAT32, DEFT_CPU, 0, &bias2));
    CHECK(DeftNDArrayFree(p[2]));
    CHECK(DeftNDArrayFree(p[4]));
    p[2] = bias1, p[4] = bias2;
    compare("MLP 32x64 -> 128 -> 10, softmax", mlp, p, 5, 2000);
    for (int i = 0; i < 5; i++) CHECK(DeftNDArrayFree(p[i]));
    CHECK(DeftNDArrayFree(x));
    return 0;
}
