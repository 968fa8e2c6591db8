#define _POSIX_C_SOURCE 200809L
/*
 * Executor benchmark: a 10,000-node chain of 1-element _plus_scalar run by
 * the executor (one engine operation for the whole graph, memory planned),
 * against the same chain of imperative calls, in the same run; the same chain
 * recorded by deferred compute and triggered (a shape seen before reuses its
 * plan), and recorded, exported and run once as a one-off graph.
 */
#include <string.h>

#include <cjson/cJSON.h>
#include <deft/c_api.h>

#include "bench_util.h"

#define NODES 10000

static DeftSymbolHandle chain_symbol(int nodes) {
    DeftSymbolHandle cur;
    CHECK(DeftSymbolCreateVariable("x", &cur));
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    for (int i = 0; i < nodes; i++) {
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
    double t0 = now();
    plus_scalar_chain(x, NODES);
    return now() - t0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The chain recorded by deferred compute, intermediates freed (the last result, lazy, returned);
 * *record: seconds spent recording. */
static DeftNDArrayHandle record_chain(DeftNDArrayHandle x, int nodes, double *record) {
    double t0 = now();
    DeftNDArrayHandle y = record_plus_scalar_chain(x, nodes);
    *record = now() - t0;
    return y;
}

/* Record, then trigger by reading: seconds of each. */
static void deferred_trigger(DeftNDArrayHandle x, int nodes, double *record, double *trigger) {
    DeftNDArrayHandle y = record_chain(x, nodes, record);
    double t0 = now();
    CHECK(DeftNDArrayWaitToRead(y));
    *trigger = now() - t0;
    CHECK(DeftNDArrayFree(y));
}

/* Record, export, make an executor, run it once: the seconds of all of it. */
static double one_off(DeftNDArrayHandle x, int nodes) {
    double record, t0 = now();
    DeftNDArrayHandle y = record_chain(x, nodes, &record);
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    CHECK(DeftNDArrayGetDeferredComputeSymbol(&x, &y, (const char *[]){"x"}, (const char *[]){"y"},
                                              1, 1, &sym));
    CHECK(DeftCachedOpCreate(sym, 0, &exec));
    run_executor(exec, x);
    double t = now() - t0;
    CHECK(DeftCachedOpFree(exec));
    CHECK(DeftSymbolFree(sym));
    CHECK(DeftNDArrayFree(y));
    return t;
}

/* Deferred compute of an n-node chain against its cached executor, rounds alternating: min and
 * median ns/node. */
static void deferred_chain(int nodes, int rounds) {
    DeftSymbolHandle sym = chain_symbol(nodes);
    DeftCachedOpHandle exec;
    CHECK(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle x;
    const int64_t shape[1] = {1};
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
    double *t[4]; /* executor run, record, trigger, one-off graph */
    for (int k = 0; k < 4; k++) t[k] = malloc((size_t)rounds * sizeof *t[k]);
    double record, trigger;
    run_executor(exec, x);
    deferred_trigger(x, nodes, &record, &trigger); /* the first trigger of the shape plans it */
    for (int r = 0; r < rounds; r++) {
        t[0][r] = run_executor(exec, x);
        deferred_trigger(x, nodes, &t[1][r], &t[2][r]);
        t[3][r] = one_off(x, nodes);
    }
    for (int k = 0; k < 4; k++) qsort(t[k], (size_t)rounds, sizeof(double), by_value);
    double per = 1e9 / nodes;
    int mid = rounds / 2;
    printf("deferred compute of a %d-node chain (ns/node, min / median of %d rounds):\n"
           "    executor run %.1f / %.1f; record %.1f / %.1f; trigger of a seen shape (compute "
           "and run) %.1f / %.1f = %.2fx the executor run (min)\n"
           "    one-off graph (record, export, executor, first run) %.0f / %.0f; first trigger "
           "of the shape %.0f\n",
           nodes, rounds, t[0][0] * per, t[0][mid] * per, t[1][0] * per, t[1][mid] * per,
           t[2][0] * per, t[2][mid] * per, t[2][0] / t[0][0], t[3][0] * per, t[3][mid] * per,
           trigger * per);
    for (int k = 0; k < 4; k++) free(t[k]);
    CHECK(DeftNDArrayFree(x));
    CHECK(DeftCachedOpFree(exec));
    CHECK(DeftSymbolFree(sym));
}

/* A graph replayed node by node through DeftImperativeInvoke: the same
 * operators and data as the executor runs, without planning or batching. */
typedef struct replay_node {
    DeftOpHandle op; /* NULL: a variable, bound to argument `arg` */
    int arg, nin, nparams;
    int in_node[8], in_index[8];
    const char *keys[8], *vals[8];
    DeftNDArrayHandle out[4];
} replay_node_t;

static int replay_load(cJSON *root, int nargs, const char *const *names, replay_node_t *nodes,
                       int cap) {
    cJSON *list = cJSON_GetObjectItem(root, "nodes"), *item;
    int n = 0;
    cJSON_ArrayForEach(item, list) {
        if (n == cap) exit(1);
        replay_node_t *r = &nodes[n++];
        memset(r, 0, sizeof *r);
        const char *opname = cJSON_GetObjectItem(item, "op")->valuestring;
        const char *name = cJSON_GetObjectItem(item, "name")->valuestring;
        if (!strcmp(opname, "null")) {
            for (r->arg = 0; r->arg < nargs && strcmp(names[r->arg], name); r->arg++) continue;
            continue;
        }
        r->op = op(opname);
        cJSON *attr, *input;
        cJSON_ArrayForEach(attr, cJSON_GetObjectItem(item, "attrs")) {
            r->keys[r->nparams] = attr->string;
            r->vals[r->nparams++] = attr->valuestring;
        }
        cJSON_ArrayForEach(input, cJSON_GetObjectItem(item, "inputs")) {
            r->in_node[r->nin] = cJSON_GetArrayItem(input, 0)->valueint;
            r->in_index[r->nin++] = cJSON_GetArrayItem(input, 1)->valueint;
        }
    }
    return n;
}

static void replay_run(replay_node_t *nodes, int n, DeftNDArrayHandle *args) {
    for (int i = 0; i < n; i++) {
        replay_node_t *r = &nodes[i];
        if (!r->op) {
            r->out[0] = args[r->arg];
            continue;
        }
        DeftNDArrayHandle in[8];
        for (int k = 0; k < r->nin; k++) in[k] = nodes[r->in_node[k]].out[r->in_index[k]];
        int nout = 4;
        CHECK(DeftImperativeInvoke(r->op, r->nin, in, &nout, r->out, r->nparams, r->keys, r->vals));
    }
    CHECK(DeftWaitAll());
    for (int i = 0; i < n; i++)
        for (int o = 0; nodes[i].op && o < 4 && nodes[i].out[o]; o++) {
            CHECK(DeftNDArrayFree(nodes[i].out[o]));
            nodes[i].out[o] = NULL;
        }
}

/* Best of five imperative replays of `sym` on `args`. */
static double replay_time(DeftSymbolHandle sym, int nargs, const char *const *names,
                          DeftNDArrayHandle *args) {
    char *kept[64]; /* the names die with the handle's next answer */
    for (int a = 0; a < nargs; a++) kept[a] = strdup(names[a]);
    const char *json;
    CHECK(DeftSymbolSaveToJSON(sym, &json));
    cJSON *root = cJSON_Parse(json);
    static replay_node_t nodes[512];
    int n = replay_load(root, nargs, (const char *const *)kept, nodes, 512);
    for (int a = 0; a < nargs; a++) free(kept[a]);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        replay_run(nodes, n, args);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    cJSON_Delete(root);
    return best;
}

/* The memory plan of a 10-layer MLP training graph (batch 64, 256 hidden units). */
static void mlp_training_plan(void) {
    DeftSymbolHandle h, label, keep[32];
    int nkeep = 0;
    CHECK(DeftSymbolCreateVariable("x", &h));
    CHECK(DeftSymbolCreateVariable("label", &label));
    keep[nkeep++] = h, keep[nkeep++] = label;
    for (int l = 0; l < 10; l++) {
        const char *k[1] = {"num_hidden"}, *v[1] = {l == 9 ? "10" : "256"};
        const char *ak[1] = {"act_type"}, *av[1] = {"relu"};
        h = keep[nkeep++] = apply("FullyConnected", NULL, 1, &h, 1, k, v);
        if (l < 9) h = keep[nkeep++] = apply("Activation", NULL, 1, &h, 1, ak, av);
    }
    DeftSymbolHandle loss =
        apply("softmax_cross_entropy", "loss", 2, (DeftSymbolHandle[]){h, label}, 0, NULL, NULL);
    int nargs;
    const char *const *names;
    CHECK(DeftSymbolListArguments(loss, &nargs, &names));
    const char *wrt[32];
    int nwrt = 0;
    for (int a = 0; a < nargs; a++)
        if (strcmp(names[a], "x") && strcmp(names[a], "label")) wrt[nwrt++] = names[a];
    DeftSymbolHandle train;
    CHECK(DeftSymbolGradient(loss, nwrt, wrt, &train));
    CHECK(DeftSymbolListArguments(train, &nargs, &names));
    DeftNDArrayHandle args[40];
    for (int a = 0; a < nargs; a++) {
        const char *n = names[a];
        int64_t shape[2] = {256, 256};
        int ndim = 2;
        if (!strcmp(n, "x"))
            shape[0] = 64, shape[1] = 784;
        else if (!strcmp(n, "label") || strstr(n, "head_grad"))
            ndim = 1, shape[0] = strstr(n, "head") ? 1 : 64;
        else if (strstr(n, "bias"))
            ndim = 1, shape[0] = strstr(n, "fullyconnected9") ? 10 : 256;
        else if (!strcmp(n, "fullyconnected0_weight"))
            shape[1] = 784;
        else if (!strcmp(n, "fullyconnected9_weight"))
            shape[0] = 10;
        CHECK(DeftNDArrayCreate(shape, ndim, DEFT_FLOAT32, DEFT_CPU, 0, &args[a]));
        if (strcmp(n, "label")) { /* labels stay class 0 */
            char dims[32];
            snprintf(dims, sizeof dims, ndim == 1 ? "(%lld,)" : "(%lld,%lld)", (long long)shape[0],
                     (long long)shape[1]);
            const char *k[3] = {"low", "high", "shape"}, *v[3] = {"-0.05", "0.05", dims};
            int one = 1;
            CHECK(DeftImperativeInvoke(op("_random_uniform"), 0, NULL, &one, &args[a], 3, k, v));
        }
    }
    DeftCachedOpHandle exec;
    CHECK(DeftCachedOpCreate(train, 0, &exec));
    DeftNDArrayHandle outs[32] = {NULL};
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        int nout = 32;
        double t0 = now();
        CHECK(DeftCachedOpInvoke(exec, nargs, args, &nout, outs));
        CHECK(DeftWaitAll());
        double t = now() - t0;
        best = t < best ? t : best;
        for (int o = 0; o < nout; o++) {
            CHECK(DeftNDArrayFree(outs[o]));
            outs[o] = NULL;
        }
    }
    double imperative = replay_time(train, nargs, names, args);
    int64_t arena, naive, inplace, sharing;
    CHECK(DeftCachedOpGetPlanStat(exec, DEFT_PLAN_ARENA_BYTES, &arena));
    CHECK(DeftCachedOpGetPlanStat(exec, DEFT_PLAN_NAIVE_BYTES, &naive));
    CHECK(DeftCachedOpGetPlanStat(exec, DEFT_PLAN_INPLACE_ONLY_BYTES, &inplace));
    CHECK(DeftCachedOpGetPlanStat(exec, DEFT_PLAN_SHARING_ONLY_BYTES, &sharing));
    printf("10-layer MLP training graph (batch 64, 784-256x9-10), forward and backward:\n"
           "    planned %lld bytes = %.0f%% of naive %lld; in-place only %lld (%.0f%%); sharing "
           "only %lld (%.0f%%)\n    one training step (forward and backward): executor %.2f ms, "
           "the same "
           "operators invoked imperatively %.2f ms (imperative/executor %.2f)\n",
           (long long)arena, 100.0 * arena / naive, (long long)naive, (long long)inplace,
           100.0 * inplace / naive, (long long)sharing, 100.0 * sharing / naive, best * 1e3,
           imperative * 1e3, imperative / best);
    for (int a = 0; a < nargs; a++) CHECK(DeftNDArrayFree(args[a]));
    CHECK(DeftCachedOpFree(exec));
    CHECK(DeftSymbolFree(train));
    CHECK(DeftSymbolFree(loss));
    for (int i = 0; i < nkeep; i++) CHECK(DeftSymbolFree(keep[i]));
}

static double best_run(DeftCachedOpHandle exec, DeftNDArrayHandle x, DeftNDArrayHandle y) {
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        int nout = 1;
        double t0 = now();
        CHECK(DeftCachedOpInvoke(exec, 1, &x, &nout, &y));
        CHECK(DeftWaitAll());
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* (x+5)*(x+5)*0.5 - x on 16M floats: four passes over memory unfused, one fused. */
static void fusion(void) {
    DeftSymbolHandle unfused, fused;
    fusion_graphs(&unfused, &fused);
    const int64_t shape[1] = {16 << 20};
    DeftNDArrayHandle in = NULL, out;
    const char *rk[3] = {"shape", "low", "high"}, *rv[3] = {"(16777216,)", "-1", "1"};
    int one = 1;
    CHECK(DeftImperativeInvoke(op("_random_uniform"), 0, NULL, &one, &in, 3, rk, rv));
    CHECK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &out));
    DeftCachedOpHandle e_unfused, e_fused;
    CHECK(DeftCachedOpCreate(unfused, 0, &e_unfused));
    CHECK(DeftCachedOpCreate(fused, 0, &e_fused));
    double tu = best_run(e_unfused, in, out), tf = best_run(e_fused, in, out);
    double gb = 2.0 * 4 * shape[0] / 1e9; /* one read and one write of x */
    printf("fusion, (x+5)*(x+5)*0.5 - x on 16M float32:\n"
           "    unfused %.2f ms, fused %.2f ms: fused is %.2fx faster (fused %.1f GB/s of "
           "input+output)\n",
           tu * 1e3, tf * 1e3, tu / tf, gb / tf);
    CHECK(DeftCachedOpFree(e_unfused));
    CHECK(DeftCachedOpFree(e_fused));
    CHECK(DeftNDArrayFree(in));
    CHECK(DeftNDArrayFree(out));
    CHECK(DeftSymbolFree(unfused));
    CHECK(DeftSymbolFree(fused));
}

/* One run of exec on (x, y), waited for: seconds. */
static double run2(DeftCachedOpHandle exec, DeftNDArrayHandle *in) {
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    double t0 = now();
    CHECK(DeftCachedOpInvoke(exec, 2, in, &nout, &out));
    CHECK(DeftNDArrayWaitToRead(out));
    double t = now() - t0;
    CHECK(DeftNDArrayFree(out));
    return t;
}

/* Two independent chains (sin, cos, sin, cos on 32K floats each, about 200 us a node here:
 * below two parallel-for grains, so each kernel runs on one thread, and over DEFT_BRANCH_NS),
 * summed: run in order, and with the executor pairing their nodes (core/graph/branches.h),
 * rounds alternating. */
static void branches(int rounds) {
    DeftSymbolHandle syms[10], h[2];
    int ns = 0;
    const char *ops[] = {"sin", "cos", "sin", "cos"};
    for (int c = 0; c < 2; c++) {
        CHECK(DeftSymbolCreateVariable(c ? "y" : "x", &h[c]));
        syms[ns++] = h[c];
        for (int k = 0; k < 4; k++) {
            DeftSymbolHandle next;
            CHECK(DeftSymbolCreateAtomic(op(ops[k]), 0, NULL, NULL, &next));
            CHECK(DeftSymbolCompose(next, NULL, 1, NULL, &h[c]));
            syms[ns++] = h[c] = next;
        }
    }
    DeftSymbolHandle sum;
    CHECK(DeftSymbolCreateAtomic(op("elemwise_add"), 0, NULL, NULL, &sum));
    CHECK(DeftSymbolCompose(sum, NULL, 2, NULL, h));
    DeftCachedOpHandle exec[2]; /* in order, paired */
    setenv("DEFT_BRANCH_NS", "-1", 1);
    CHECK(DeftCachedOpCreate(sum, 0, &exec[0]));
    unsetenv("DEFT_BRANCH_NS");
    CHECK(DeftCachedOpCreate(sum, 0, &exec[1]));
    DeftNDArrayHandle in[2] = {NULL, NULL};
    const char *rk[3] = {"shape", "low", "high"}, *rv[3] = {"(32768,)", "-1", "1"};
    for (int i = 0, one = 1; i < 2; i++)
        CHECK(DeftImperativeInvoke(op("_random_uniform"), 0, NULL, &one, &in[i], 3, rk, rv));
    for (int r = 0; r < 8; r++) /* the paired one learns which nodes pay (6 runs) */
        for (int k = 0; k < 2; k++) run2(exec[k], in);
    double *t[2] = {malloc((size_t)rounds * sizeof(double)),
                    malloc((size_t)rounds * sizeof(double))};
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) t[k][r] = run2(exec[k], in);
    for (int k = 0; k < 2; k++) qsort(t[k], (size_t)rounds, sizeof(double), by_value);
    const char *threads = getenv("DEFT_NUM_THREADS");
    printf("independent branches, two chains of sin, cos, sin, cos on 32K float32, summed "
           "(DEFT_NUM_THREADS %s; us, min / median of %d rounds):\n"
           "    in order %.1f / %.1f; paired %.1f / %.1f: paired is %.2fx as fast (min), %.2fx "
           "(median)\n",
           threads ? threads : "unset", rounds, t[0][0] * 1e6, t[0][rounds / 2] * 1e6,
           t[1][0] * 1e6, t[1][rounds / 2] * 1e6, t[0][0] / t[1][0],
           t[0][rounds / 2] / t[1][rounds / 2]);
    for (int k = 0; k < 2; k++) {
        free(t[k]);
        CHECK(DeftCachedOpFree(exec[k]));
    }
    for (int i = 0; i < 2; i++) CHECK(DeftNDArrayFree(in[i]));
    for (int i = 0; i < ns; i++) CHECK(DeftSymbolFree(syms[i]));
    CHECK(DeftSymbolFree(sum));
}

int main(void) {
    printf("deft graph benchmarks (load average %.2f)\n", load_average());
    double t0 = now();
    DeftSymbolHandle sym = chain_symbol(NODES);
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
    deferred_chain(100, 201);
    deferred_chain(NODES, 15);
    mlp_training_plan();
    fusion();
    branches(101);
    return 0;
}
