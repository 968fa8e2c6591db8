/*
 * Pooling benchmark: the poolings of issue 25's CNNs, float32, forward
 * (Pooling) and backward (_backward_Pooling), through the C API:
 * LeNet's two 2x2/2 max pools at batch 32 (and an average pool of the
 * first shape), ResNet-18's 3x3/2 pad 1 max pool at 112x112 (batch 1 and
 * 16) and its global average pool at batch 16.
 *
 * Pooling moves little data per flop, so each case prints GB/s: the bytes
 * the operation must move at least (forward: input and output; backward of
 * max: dy, x, y and dx; of average: dy and dx), over the time.
 *
 * PyTorch, the peer: when DEFT_TORCH_PYTHON names a Python that has torch, a
 * child process of it times the same cases (max_pool2d, avg_pool2d,
 * adaptive_avg_pool2d and their aten backward kernels, under no_grad), its
 * rounds alternating with deft's, and each case prints deft's time over
 * PyTorch's (below 1: deft is faster). PyTorch's times include its Python
 * call (some microseconds), deft's its C API call.
 *
 * Threads: DEFT_NUM_THREADS for both (the child sets torch's threads to it).
 * DEFT_BENCH_CASES, when set, runs only the cases whose name contains it.
 * Prints min and median over DEFT_BENCH_ROUNDS rounds (7 by default) and
 * the load average.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <deft/c_api.h>

#include "bench_util.h"

enum { MAX_ROUNDS = 64, NCASES = 6 };

typedef struct pool_case {
    const char *name, *type; /* type: max or avg */
    int64_t n, c, h, w;
    int k, s, p; /* square windows; k 0: global pooling */
} pool_case_t;

static const pool_case_t cases[NCASES] = {
    {"LeNet pool 1", "max", 32, 6, 24, 24, 2, 2, 0},
    {"LeNet pool 2", "max", 32, 16, 8, 8, 2, 2, 0},
    {"LeNet pool 1, avg", "avg", 32, 6, 24, 24, 2, 2, 0},
    {"ResNet-18 stem pool", "max", 1, 64, 112, 112, 3, 2, 1},
    {"ResNet-18 stem pool", "max", 16, 64, 112, 112, 3, 2, 1},
    {"ResNet-18 global pool", "avg", 16, 512, 7, 7, 0, 1, 0},
};

/* The PyTorch side: reads "case backward iters" lines, answers seconds. */
static const char torch_script[] =
    "import sys, time, torch\n"
    "import torch.nn.functional as F\n"
    "torch.set_num_threads(int(sys.argv[1]))\n"
    "aten = torch.ops.aten\n"
    "runs = []\n"
    "for spec in sys.argv[2:]:\n"
    "    t, n, c, h, w, k, s, p = spec.split(',')\n"
    "    n, c, h, w, k, s, p = map(int, (n, c, h, w, k, s, p))\n"
    "    x = torch.randn(n, c, h, w)\n"
    "    if k == 0:\n"
    "        f = lambda x=x: F.adaptive_avg_pool2d(x, 1)\n"
    "        dy = torch.randn(f().shape)\n"
    "        b = lambda x=x, dy=dy: aten._adaptive_avg_pool2d_backward(dy, x)\n"
    "    elif t == 'max':\n"
    "        f = lambda x=x, k=k, s=s, p=p: F.max_pool2d(x, k, s, p)\n"
    "        y, i = F.max_pool2d(x, k, s, p, return_indices=True)\n"
    "        dy = torch.randn(y.shape)\n"
    "        b = lambda x=x, dy=dy, i=i, k=k, s=s, p=p: aten.max_pool2d_with_indices_backward(\n"
    "            dy, x, [k, k], [s, s], [p, p], [1, 1], False, i)\n"
    "    else:\n"
    "        f = lambda x=x, k=k, s=s, p=p: F.avg_pool2d(x, k, s, p)\n"
    "        dy = torch.randn(f().shape)\n"
    "        b = lambda x=x, dy=dy, k=k, s=s, p=p: aten.avg_pool2d_backward(\n"
    "            dy, x, [k, k], [s, s], [p, p], False, True, None)\n"
    "    runs.append((f, b))\n"
    "with torch.no_grad():\n"
    "    for line in sys.stdin:\n"
    "        i, back, iters = map(int, line.split())\n"
    "        fn = runs[i][back]\n"
    "        fn()\n"
    "        t0 = time.perf_counter()\n"
    "        for _ in range(iters):\n"
    "            fn()\n"
    "        print(time.perf_counter() - t0, flush=True)\n";

typedef struct peer {
    FILE *to, *from;
} peer_t;

/* Start the PyTorch child; false (and a message) when there is none. */
static bool peer_start(peer_t *peer, int threads) {
    const char *python = getenv("DEFT_TORCH_PYTHON");
    if (!python || !*python) {
        printf("PyTorch: set DEFT_TORCH_PYTHON to a Python that has torch to compare with it\n");
        return false;
    }
    char *argv[NCASES + 5], specs[NCASES][96], nthreads[16];
    snprintf(nthreads, sizeof nthreads, "%d", threads);
    int argc = 0;
    argv[argc++] = (char *)python, argv[argc++] = "-c", argv[argc++] = (char *)torch_script;
    argv[argc++] = nthreads;
    for (int i = 0; i < NCASES; i++) {
        const pool_case_t *c = &cases[i];
        snprintf(specs[i], sizeof specs[i], "%s,%lld,%lld,%lld,%lld,%d,%d,%d", c->type,
                 (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, c->k, c->s,
                 c->p);
        argv[argc++] = specs[i];
    }
    argv[argc] = NULL;
    int down[2], up[2];
    if (pipe(down) || pipe(up)) return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(down[0], 0), dup2(up[1], 1);
        close(down[1]), close(up[0]);
        execvp(python, argv);
        _exit(127);
    }
    close(down[0]), close(up[1]);
    peer->to = fdopen(down[1], "w"), peer->from = fdopen(up[0], "r");
    return pid > 0 && peer->to && peer->from;
}

/* Seconds per call of PyTorch's case i over `iters` calls; -1 when the child failed. */
static double peer_time(peer_t *peer, int i, int backward, int iters) {
    char line[64];
    fprintf(peer->to, "%d %d %d\n", i, backward, iters);
    fflush(peer->to);
    if (!fgets(line, sizeof line, peer->from)) return -1;
    return atof(line) / iters;
}

typedef struct arrays {
    DeftNDArrayHandle x, y, dy, dx;
    char kernel[32], stride[32], pad[32];
} arrays_t;

static DeftNDArrayHandle filled(const int64_t *shape, int seed) {
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = (float)(((i + seed) * 7919) % 2003) / 200.0f - 5;
    DeftNDArrayHandle h;
    CHECK(DeftNDArrayCreateFromData(shape, 4, DEFT_FLOAT32, DEFT_CPU, 0, v,
                                    (size_t)n * sizeof(float), &h));
    free(v);
    return h;
}

static int64_t out_len(const pool_case_t *c, int64_t size) {
    return c->k ? (size + 2 * c->p - c->k) / c->s + 1 : 1;
}

static void call(const pool_case_t *c, arrays_t *a, int backward) {
    const char *keys[5] = {"pool_type", "kernel", "stride", "pad", "global_pool"};
    const char *vals[5] = {c->type, a->kernel, a->stride, a->pad, c->k ? "false" : "true"};
    int nout = 1;
    if (backward) {
        DeftNDArrayHandle in[3] = {a->dy, a->x, a->y};
        CHECK(DeftImperativeInvoke(op("_backward_Pooling"), 3, in, &nout, &a->dx, 5, keys, vals));
    } else {
        CHECK(DeftImperativeInvoke(op("Pooling"), 1, &a->x, &nout, &a->y, 5, keys, vals));
    }
}

/* Seconds per call of deft's case over `iters` calls. */
static double deft_time(const pool_case_t *c, arrays_t *a, int backward, int iters) {
    double t0 = now();
    for (int i = 0; i < iters; i++) call(c, a, backward);
    CHECK(DeftWaitAll());
    return (now() - t0) / iters;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int env_int(const char *name) {
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : 0;
}

static void print_load(const char *when) {
    printf("load average %s: %.2f\n", when, load_average());
}

static void run_case(int i, int rounds, peer_t *peer) {
    const pool_case_t *c = &cases[i];
    arrays_t a;
    int64_t xs[4] = {c->n, c->c, c->h, c->w},
            ys[4] = {c->n, c->c, out_len(c, c->h), out_len(c, c->w)};
    snprintf(a.kernel, sizeof a.kernel, "(%d,%d)", c->k ? c->k : 1, c->k ? c->k : 1);
    snprintf(a.stride, sizeof a.stride, "(%d,%d)", c->s, c->s);
    snprintf(a.pad, sizeof a.pad, "(%d,%d)", c->p, c->p);
    a.x = filled(xs, 1), a.dy = filled(ys, 2);
    CHECK(DeftNDArrayCreate(ys, 4, DEFT_FLOAT32, DEFT_CPU, 0, &a.y));
    CHECK(DeftNDArrayCreate(xs, 4, DEFT_FLOAT32, DEFT_CPU, 0, &a.dx));
    double in = (double)(xs[0] * xs[1] * xs[2] * xs[3]) * 4,
           out = (double)(ys[0] * ys[1] * ys[2] * ys[3]) * 4;
    bool max = !strcmp(c->type, "max");
    for (int backward = 0; backward < 2; backward++) {
        double bytes = backward ? (max ? 2 * in + 2 * out : in + out) : in + out;
        call(c, &a, backward); /* warm: pages touched */
        double once = deft_time(c, &a, backward, 3);
        int iters = once > 0.004 ? 1 : (int)(0.004 / (once + 1e-9)) + 1;
        double mine[MAX_ROUNDS], theirs[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            mine[r] = deft_time(c, &a, backward, iters);
            theirs[r] = peer ? peer_time(peer, i, backward, iters) : -1;
        }
        qsort(mine, (size_t)rounds, sizeof *mine, by_value);
        qsort(theirs, (size_t)rounds, sizeof *theirs, by_value);
        char what[128];
        snprintf(what, sizeof what, "%s %lldx%lldx%lldx%lld %s %s%s", c->name, (long long)c->n,
                 (long long)c->c, (long long)c->h, (long long)c->w, c->type,
                 c->k ? a.kernel : "global", backward ? " backward" : " forward");
        printf("%-58s deft min %8.1f us median %8.1f us %6.1f GB/s", what, mine[0] * 1e6,
               mine[rounds / 2] * 1e6, bytes / mine[0] * 1e-9);
        if (theirs[0] > 0)
            printf(" | PyTorch min %8.1f us %6.1f GB/s | deft/PyTorch %.2f", theirs[0] * 1e6,
                   bytes / theirs[0] * 1e-9, mine[0] / theirs[0]);
        printf("\n");
    }
    DeftNDArrayHandle all[4] = {a.x, a.y, a.dy, a.dx};
    for (int k = 0; k < 4; k++) CHECK(DeftNDArrayFree(all[k]));
}

int main(void) {
    int rounds = env_int("DEFT_BENCH_ROUNDS") ? env_int("DEFT_BENCH_ROUNDS") : 7;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    int threads = env_int("DEFT_NUM_THREADS") ? env_int("DEFT_NUM_THREADS") : 1;
    printf("Pooling, float32, NCHW; DEFT_NUM_THREADS=%d; min and median of %d rounds\n", threads,
           rounds);
    print_load("before");
    signal(SIGPIPE, SIG_IGN); /* a PyTorch child that died: its times read as missing */
    peer_t peer;
    bool have_peer = peer_start(&peer, threads);
    const char *only = getenv("DEFT_BENCH_CASES");
    for (int i = 0; i < NCASES; i++)
        if (!only || strstr(cases[i].name, only)) run_case(i, rounds, have_peer ? &peer : NULL);
    if (have_peer) fclose(peer.to), fclose(peer.from);
    print_load("after");
    return 0;
}
