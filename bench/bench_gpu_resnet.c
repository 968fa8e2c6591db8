#define _POSIX_C_SOURCE 200809L
/*
 * ResNet-18 v1 on the GPU against PyTorch on the same GPU, same run: the
 * inference (predict mode, batch 1 and 32) and a training step (SoftmaxOutput
 * loss, gradient and SGD with momentum as one graph, DeftSymbolTrainStep(),
 * batch 32), each one executor run on 224x224 float32 inputs.
 *
 * The network is MXNet 1.9.1's model-zoo resnet18_v1, from the symbol file
 * given as the first argument (tests/mxnet/corpus/model_resnet18_v1-symbol.json),
 * on random weights. PyTorch's times come from the file DEFT_GPU_PEERS names
 * (bench/python/bench_gpu_peers.py, lines "name<TAB>ms") for the same network
 * in plain torch.nn: without cuDNN (the goal's reference, since deft does not
 * use cuDNN: it is not among our dependencies), with cuDNN in strict float32,
 * and with PyTorch's defaults (cuDNN convolutions in TF32), so the output says
 * what cuDNN would add.
 *
 *     bench_gpu_resnet SYMBOL.json [cpu]
 *
 * "cpu" runs the same cases on the CPU at batch 2 (a check of the harness on
 * a machine without a GPU). Without a GPU and without "cpu", it says so and
 * exits 0.
 */
#include <string.h>

#include "bench_util.h"

enum { SIZE = 224, CLASSES = 1000, MAX_INPUTS = 320 };
static const double GOAL = 0.5; /* deft's speed / PyTorch's without cuDNN */

/* Every input made so far, by name: the training step shares the
 * inference's weights and adds its label, momenta and hyper-parameters. */
typedef struct inputs {
    int dev, n;
    char *names[MAX_INPUTS];
    DeftNDArrayHandle arrays[MAX_INPUTS];
} inputs_t;

static DeftNDArrayHandle made(const char *op_name, int np, const char **keys, const char **vals) {
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    CHECK(DeftImperativeInvoke(op(op_name), 0, NULL, &nout, &out, np, keys, vals));
    return out;
}

/* A random array: normal with scale @p a, or uniform in [a, b) when b > a. */
static DeftNDArrayHandle random_input(const int64_t *shape, int ndim, int dev, double a, double b) {
    char text[96], av[32], bv[32];
    int n = snprintf(text, sizeof text, "(");
    for (int d = 0; d < ndim; d++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%lld,", (long long)shape[d]);
    snprintf(text + n, sizeof text - (size_t)n, ")");
    snprintf(av, sizeof av, "%g", a);
    snprintf(bv, sizeof bv, "%g", b);
    const char *ctx = dev == DEFT_GPU ? "gpu(0)" : "cpu(0)";
    if (b > a) {
        const char *keys[4] = {"shape", "ctx", "low", "high"}, *vals[4] = {text, ctx, av, bv};
        return made("_random_uniform", 4, keys, vals);
    }
    const char *keys[3] = {"shape", "ctx", "scale"}, *vals[3] = {text, ctx, av};
    return made("_random_normal", 3, keys, vals);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* A plausible value for an input by its name: scales and variances near 1,
 * shifts and means near 0, momenta 0, labels whole class numbers, SGD with
 * momentum's hyper-parameters, weights small. */
static DeftNDArrayHandle input_for(const char *name, const int64_t *shape, int ndim, int dev,
                                   int batch) {
    if (ends_with(name, "gamma") || ends_with(name, "var"))
        return random_input(shape, ndim, dev, 0.5, 1.5);
    if (ends_with(name, "beta") || ends_with(name, "mean") || ends_with(name, "bias"))
        return random_input(shape, ndim, dev, 0.01, 0);
    if (strcmp(name, "data") == 0) return random_input(shape, ndim, dev, 1, 0);
    DeftNDArrayHandle out;
    CHECK(DeftNDArrayCreate(shape, ndim, DEFT_FLOAT32, dev, 0, &out));
    int64_t size = 1;
    for (int d = 0; d < ndim; d++) size *= shape[d];
    float *host = calloc((size_t)size, sizeof *host);
    if (ends_with(name, "label")) {
        for (int64_t i = 0; i < size; i++) host[i] = (float)((i * 7919) % CLASSES);
    } else if (strcmp(name, "step_hyper") == 0) {
        /* lr, wd, rescale_grad, clip (none), momentum, beta2, epsilon */
        const float hyper[7] = {0.01f, 1e-4f, 1.0f / (float)batch, -1, 0.9f, 0, 0};
        memcpy(host, hyper, sizeof hyper);
    } else if (!ends_with(name, "_mom")) {
        free(host);
        CHECK(DeftNDArrayFree(out));
        return random_input(shape, ndim, dev, 0.05, 0);
    }
    CHECK(DeftNDArrayCopyFromHost(out, host, (size_t)size * sizeof *host));
    free(host);
    return out;
}

static DeftNDArrayHandle input_named(inputs_t *ins, const char *name, DeftSymbolHandle sym,
                                     int group, int index, int batch) {
    for (int k = 0; k < ins->n; k++)
        if (strcmp(ins->names[k], name) == 0) return ins->arrays[k];
    int64_t shape[8];
    int ndim, dtype;
    CHECK(DeftSymbolGetInferredShape(sym, group, index, shape, 8, &ndim, &dtype));
    /* Read by the step, not inferred: the hyper-parameters, and each
     * parameter's momentum, of the parameter's shape. */
    if (strcmp(name, "step_hyper") == 0) ndim = 1, shape[0] = 7;
    if (ndim < 0 && ends_with(name, "_mom")) {
        char param[256];
        snprintf(param, sizeof param, "%.*s", (int)(strlen(name) - 4), name);
        for (int k = 0; k < ins->n; k++)
            if (strcmp(ins->names[k], param) == 0)
                CHECK(DeftNDArrayGetShape(ins->arrays[k], shape, 8, &ndim));
    }
    if (ndim < 0 || ins->n == MAX_INPUTS) {
        fprintf(stderr, "bench_gpu_resnet: no shape for input '%s', or too many inputs\n", name);
        exit(1);
    }
    ins->names[ins->n] = strdup(name);
    return ins->arrays[ins->n++] = input_for(name, shape, ndim, ins->dev, batch);
}

/* The inputs of @p sym in an executor's order (arguments, then auxiliary
 * states), its data of batch @p batch. Returns their number. */
static int bind(inputs_t *ins, DeftSymbolHandle sym, int batch, DeftNDArrayHandle *in) {
    const char *names[2] = {"data", "softmax_label"};
    const int ndims[2] = {4, 1};
    const int64_t dims[5] = {batch, 3, SIZE, SIZE, batch};
    int complete = 0, count = 0, n;
    const char *const *list;
    CHECK(DeftSymbolListArguments(sym, &n, &list));
    int labelled = 0;
    for (int i = 0; i < n; i++) labelled |= strcmp(list[i], "softmax_label") == 0;
    CHECK(DeftSymbolInferShape(sym, 1 + labelled, names, ndims, dims, NULL, &complete));
    const int groups[2] = {DEFT_ARGUMENTS, DEFT_AUXILIARY_STATES};
    for (int g = 0; g < 2; g++) {
        if (groups[g] == DEFT_ARGUMENTS)
            CHECK(DeftSymbolListArguments(sym, &n, &list));
        else
            CHECK(DeftSymbolListAuxiliaryStates(sym, &n, &list));
        for (int i = 0; i < n; i++)
            in[count++] = input_named(ins, list[i], sym, groups[g], i, batch);
    }
    return count;
}

/* The best of 3 rounds of @p runs executor runs, in ms per run. */
static double run_ms(DeftCachedOpHandle exec, int nin, DeftNDArrayHandle *in, int runs) {
    double best = 1e30;
    for (int round = 0; round < 4; round++) {
        double t0 = now();
        for (int r = 0; r < runs; r++) {
            DeftNDArrayHandle out[4] = {NULL, NULL, NULL, NULL};
            int nout = 4;
            CHECK(DeftCachedOpInvoke(exec, nin, in, &nout, out));
            for (int k = 0; k < nout; k++) CHECK(DeftNDArrayFree(out[k]));
        }
        CHECK(DeftWaitAll());
        double t = (now() - t0) / runs * 1e3;
        if (round > 0 && t < best) best = t; /* round 0 warms up: plans, pools, cuBLAS */
    }
    return best;
}

static void report(const char *what, int batch, double ms) {
    char name[64];
    printf("  %-9s batch %2d: deft %8.2f ms", what, batch, ms);
    snprintf(name, sizeof name, "resnet18_%s_b%d_nocudnn", what, batch);
    double plain = peer_ms(name);
    snprintf(name, sizeof name, "resnet18_%s_b%d_cudnn", what, batch);
    double cudnn = peer_ms(name);
    snprintf(name, sizeof name, "resnet18_%s_b%d_tf32", what, batch);
    double tf32 = peer_ms(name);
    if (plain <= 0) {
        printf(", PyTorch not measured\n");
        return;
    }
    printf(", PyTorch without cuDNN %7.2f ms: deft at %.2fx its speed (goal >= %.1f: %s)\n", plain,
           plain / ms, GOAL, plain / ms >= GOAL ? "met" : "NOT met");
    if (cudnn > 0)
        printf(
            "      cuDNN would add: PyTorch with cuDNN %.2f ms in float32 (%.2fx faster), %.2f ms"
            " with its TF32 default; deft at %.2fx cuDNN float32's speed\n",
            cudnn, plain / cudnn, tf32, cudnn / ms);
}

/* The training step of ResNet-18 with a SoftmaxOutput loss and SGD with momentum. */
static DeftSymbolHandle train_step(DeftSymbolHandle net) {
    DeftSymbolHandle label, loss, step;
    CHECK(DeftSymbolCreateVariable("softmax_label", &label));
    CHECK(DeftSymbolCreateAtomic(op("SoftmaxOutput"), 0, NULL, NULL, &loss));
    CHECK(DeftSymbolCompose(loss, "softmax", 2, NULL, (DeftSymbolHandle[]){net, label}));
    int n;
    const char *const *list;
    CHECK(DeftSymbolListArguments(loss, &n, &list));
    char **params = malloc((size_t)n * sizeof *params);
    int np = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], "data") != 0 && strcmp(list[i], "softmax_label") != 0)
            params[np++] = strdup(list[i]);
    CHECK(DeftSymbolTrainStep(loss, np, (const char *const *)params, "sgd_mom", &step));
    for (int i = 0; i < np; i++) free(params[i]);
    free(params);
    CHECK(DeftSymbolFree(label));
    CHECK(DeftSymbolFree(loss));
    return step;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gpu_resnet SYMBOL.json [cpu]\n");
        return 2;
    }
    int cpu = argc > 2 && strcmp(argv[2], "cpu") == 0, gpus = 0;
    CHECK(DeftGetGPUCount(&gpus));
    if (!cpu && gpus == 0) {
        printf("bench_gpu_resnet: skipped: no GPU (no CUDA device or driver on this machine)\n");
        return 0;
    }
    DeftSymbolHandle net, step;
    CHECK(DeftSymbolCreateFromFile(argv[1], &net));
    step = train_step(net);
    const int batches[2] = {1, cpu ? 2 : 32}, runs = cpu ? 1 : 10;
    printf("ResNet-18 v1, 224x224 float32, on %s; PyTorch on the same device, same run\n",
           cpu ? "the CPU (harness check)" : "gpu(0)");
    inputs_t ins = {.dev = cpu ? DEFT_CPU : DEFT_GPU};
    DeftNDArrayHandle in[MAX_INPUTS];
    DeftCachedOpHandle infer, train;
    CHECK(DeftCachedOpCreate(net, 0, &infer));
    CHECK(DeftCachedOpCreate(step, 0, &train));
    int prev;
    CHECK(DeftAutogradSetIsTraining(0, &prev));
    for (int b = 0; b < 2; b++) {
        int nin = bind(&ins, net, batches[b], in);
        report("inference", batches[b], run_ms(infer, nin, in, runs));
        for (int k = 0; k < ins.n; k++)
            if (strcmp(ins.names[k], "data") == 0) { /* the next batch makes its own */
                CHECK(DeftNDArrayFree(ins.arrays[k]));
                ins.names[k][0] = '\0';
            }
    }
    CHECK(DeftAutogradSetIsTraining(1, NULL));
    int nin = bind(&ins, step, batches[1], in);
    report("train", batches[1], run_ms(train, nin, in, runs));
    CHECK(DeftAutogradSetIsTraining(prev, NULL));
    CHECK(DeftCachedOpFree(infer));
    CHECK(DeftCachedOpFree(train));
    for (int k = 0; k < ins.n; k++) {
        if (ins.names[k][0]) CHECK(DeftNDArrayFree(ins.arrays[k]));
        free(ins.names[k]);
    }
    CHECK(DeftSymbolFree(step));
    CHECK(DeftSymbolFree(net));
    return 0;
}
