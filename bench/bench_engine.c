/*
 * Engine benchmarks, each against a reference measured in the same run:
 *   - a dependent chain of 1-element operations: threaded engine vs naive
 *     engine (measured in a forked child, which reads DEFT_ENGINE afresh) vs
 *     the bare kernel loop;
 *   - the same chain forced through the queue (its head blocked by a large
 *     operation), so every operation is scheduled and run by a worker;
 *   - ten mid-size calls in a chain, after a pause: threaded vs naive (which
 *     runs everything on the caller, the best case for a chain);
 *   - two independent chains of queued operations vs one chain (both cores).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <deft/c_api.h>

#include "bench_util.h"

#define CHAIN 100000

/* x = x + 1, n times, each result a new array; returns seconds. */
static double chain(DeftNDArrayHandle start, int n);

/* Mid-size calls: ten _plus_scalar in a chain on 16 Ki floats (128 KiB a
 * call with its output) and a wait, after a pause in which idle threads fall
 * asleep, as a host program doing other work between steps; min us. */
static double mid_chain_us(void) {
    const int64_t shape[1] = {16384};
    DeftNDArrayHandle x;
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    double best = 1e30;
    for (int r = 0; r < 200; r++) {
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
        double t = chain(x, 10);
        best = t < best ? t : best;
    }
    CHECK(DeftNDArrayFree(x));
    return best * 1e6;
}

static double chain(DeftNDArrayHandle start, int n) {
    DeftOpHandle plus = op("_plus_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    DeftNDArrayHandle cur = start;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        DeftNDArrayHandle out[1] = {NULL};
        int nout = 1;
        CHECK(DeftImperativeInvoke(plus, 1, &cur, &nout, out, 1, keys, vals));
        if (cur != start) CHECK(DeftNDArrayFree(cur));
        cur = out[0];
    }
    CHECK(DeftNDArrayWaitToRead(cur));
    double t = now() - t0;
    CHECK(DeftNDArrayFree(cur));
    return t;
}

static double best_chain_ns(void) {
    const int64_t shape[1] = {1};
    DeftNDArrayHandle x;
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        double t = chain(x, CHAIN);
        best = t < best ? t : best;
    }
    CHECK(DeftNDArrayFree(x));
    return best / CHAIN * 1e9;
}

/* A measurement made in a child process running the naive engine. */
static double naive(double (*measure)(void)) {
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t child = fork();
    if (child == 0) {
        setenv("DEFT_ENGINE", "naive", 1);
        double value = measure();
        if (write(fds[1], &value, sizeof value) != sizeof value) _exit(1);
        _exit(0);
    }
    close(fds[1]); /* a child that fails then ends the read instead of hanging it */
    double value = -1;
    if (read(fds[0], &value, sizeof value) != sizeof value) value = -1;
    waitpid(child, NULL, 0);
    close(fds[0]);
    return value;
}

static volatile float sink;

static double bare_loop_ns(void) {
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        float x = 0;
        double t0 = now();
        for (int i = 0; i < CHAIN; i++) {
            volatile float one = 1.0f;
            x = x + one;
        }
        sink = x;
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best / CHAIN * 1e9;
}

/*
 * The chain behind a large operation, so every call is queued and later run
 * by a worker. Measured in a child with one worker, so the host pushes on a
 * core of its own: push cost per call on the host, then execution cost per
 * call on the worker, from the moment the head finished to the last result.
 */
static void queued_chain_child(int fd) {
    setenv("DEFT_NUM_THREADS", "1", 1);
    const int64_t big[1] = {16 << 20};
    const int n = 2000;
    DeftNDArrayHandle large, x;
    CHECK(DeftNDArrayCreate(big, 1, DEFT_FLOAT32, DEFT_CPU, 0, &large));
    const int64_t one[1] = {1}; /* sum's result: shape (1,) */
    CHECK(DeftNDArrayCreate(one, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    DeftOpHandle exp_op = op("exp"), sum = op("sum"), plus = op("_plus_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    double result[2] = {1e30, 1e30};
    for (int r = 0; r < 5; r++) {
        DeftNDArrayHandle e[1] = {NULL}, head[1] = {x};
        int nout = 1;
        CHECK(DeftImperativeInvoke(exp_op, 1, &large, &nout, e, 0, NULL, NULL));
        CHECK(DeftImperativeInvoke(sum, 1, e, &nout, head, 0, NULL, NULL)); /* x waits on it */
        double t0 = now();
        DeftNDArrayHandle cur = x;
        for (int i = 0; i < n; i++) {
            DeftNDArrayHandle out[1] = {NULL};
            CHECK(DeftImperativeInvoke(plus, 1, &cur, &nout, out, 1, keys, vals));
            if (cur != x) CHECK(DeftNDArrayFree(cur));
            cur = out[0];
        }
        double t1 = now();
        CHECK(DeftNDArrayWaitToRead(x));
        double t2 = now();
        CHECK(DeftNDArrayWaitToRead(cur));
        double t3 = now();
        if (t2 - t1 < 1e-4) continue; /* the head finished before the pushes: not measured */
        result[0] = (t1 - t0) / n * 1e9 < result[0] ? (t1 - t0) / n * 1e9 : result[0];
        result[1] = (t3 - t2) / n * 1e9 < result[1] ? (t3 - t2) / n * 1e9 : result[1];
        CHECK(DeftNDArrayFree(cur));
        CHECK(DeftNDArrayFree(e[0]));
    }
    if (write(fd, result, sizeof result) != sizeof result) _exit(1);
    _exit(0);
}

static void queued_chain(double *push_ns, double *run_ns) {
    int fds[2];
    *push_ns = *run_ns = -1;
    if (pipe(fds)) return;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) queued_chain_child(fds[1]);
    close(fds[1]); /* as in naive() */
    double result[2];
    if (read(fds[0], result, sizeof result) == sizeof result)
        *push_ns = result[0], *run_ns = result[1];
    waitpid(child, NULL, 0);
    close(fds[0]);
}

/* `chains` independent chains of `steps` _plus_scalar calls on 40 Ki floats; calls per second. */
static double plus_chains(int chains, int steps) {
    const int64_t shape[1] = {40 << 10};
    DeftNDArrayHandle x[2];
    DeftOpHandle plus = op("_plus_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    for (int c = 0; c < chains; c++)
        CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x[c]));
    CHECK(DeftWaitAll());
    double t0 = now();
    for (int s = 0; s < steps; s++)
        for (int c = 0; c < chains; c++) {
            DeftNDArrayHandle in[1] = {x[c]}, y[1] = {NULL};
            int nout = 1;
            CHECK(DeftImperativeInvoke(plus, 1, in, &nout, y, 1, keys, vals));
            CHECK(DeftNDArrayFree(x[c]));
            x[c] = y[0];
        }
    CHECK(DeftWaitAll());
    double t = now() - t0;
    for (int c = 0; c < chains; c++) CHECK(DeftNDArrayFree(x[c]));
    return chains * steps / t;
}

/* `chains` independent chains of `steps` size x size GEMMs; returns GEMMs per second. */
static double gemm_chains(int chains, int steps, int64_t size) {
    const int64_t shape[2] = {size, size};
    DeftNDArrayHandle w, x[4];
    DeftOpHandle dot = op("dot"), scale = op("_mul_scalar");
    const char *keys[1] = {"scalar"}, *vals[1] = {"0.01"};
    CHECK(DeftNDArrayCreate(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &w));
    for (int c = 0; c < chains; c++)
        CHECK(DeftNDArrayCreate(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &x[c]));
    CHECK(DeftWaitAll());
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        for (int c = 0; c < chains; c++) {
            DeftNDArrayHandle in[2] = {x[c], w}, y[1] = {NULL}, z[1] = {x[c]};
            int nout = 1;
            CHECK(DeftImperativeInvoke(dot, 2, in, &nout, y, 0, NULL, NULL));
            CHECK(DeftImperativeInvoke(scale, 1, y, &nout, z, 1, keys, vals));
            CHECK(DeftNDArrayFree(y[0]));
        }
    }
    CHECK(DeftWaitAll());
    double t = now() - t0;
    for (int c = 0; c < chains; c++) CHECK(DeftNDArrayFree(x[c]));
    CHECK(DeftNDArrayFree(w));
    return chains * steps / t;
}

int main(void) {
    printf("deft engine benchmarks\n");
    /* Children first: they must start before this process makes any deft call. */
    double naive_ns = naive(best_chain_ns), naive_mid_us = naive(mid_chain_us), push_ns, run_ns;
    queued_chain(&push_ns, &run_ns);
    double threaded = best_chain_ns(), bare = bare_loop_ns();
    printf("dependent chain of 1-element _plus_scalar (new array per call):\n"
           "    threaded engine %.0f ns/op, naive engine %.0f ns/op (threaded/naive %.2f), "
           "bare kernel loop %.1f ns/op\n",
           threaded, naive_ns, threaded / naive_ns, bare);
    double mid_us = mid_chain_us();
    printf(
        "10 chained _plus_scalar on 16Ki floats then a wait, after a pause (idle threads asleep):\n"
        "    threaded engine %.1f us, naive engine (all on the caller) %.1f us "
        "(threaded/naive %.2f)\n",
        mid_us, naive_mid_us, mid_us / naive_mid_us);
    printf("the same chain queued behind a large operation (one worker):\n"
           "    push %.0f ns/op on the host, then %.0f ns/op on the worker\n",
           push_ns, run_ns);
    /* Chains of _plus_scalar on 40 Ki floats: queued (320 KiB a call, above the size
     * run on the caller) but not split across threads (under two grains), so
     * all parallelism between two chains comes from the engine: its worker
     * and the host, which runs queued work while it waits for all of it. */
    plus_chains(2, 400); /* warm-up: the pool gets the blocks the queued calls hold */
    double one = plus_chains(1, 400), two = plus_chains(2, 400);
    printf("independent chains of _plus_scalar on 40Ki floats: 1 chain %.0f calls/s, 2 chains %.0f "
           "calls/s "
           "(speed-up %.2f)\n",
           one, two, two / one);
    /* 512x512 dot: split across both cores already, so a second chain has no
     * idle core to use. */
    one = gemm_chains(1, 100, 512), two = gemm_chains(2, 100, 512);
    printf("independent chains of 512x512 dot + scale: 1 chain %.0f dot/s, 2 chains %.0f dot/s "
           "(speed-up %.2f)\n",
           one, two, two / one);
    return 0;
}
