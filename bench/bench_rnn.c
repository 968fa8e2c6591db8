/*
 * RNN on the CPU: a 2-layer LSTM (input 128, hidden 256, 35 steps, batch 32),
 * forward alone in predict mode and forward + backward (the gradient graph:
 * _backward_RNN) in training mode, through cached ops, as inference and a
 * training loop run them. Rounds alternate the two,
 * min and median reported, with the load average (a shared machine's figures
 * need it). DEFT_NUM_THREADS sets the threads. bench/python/bench_rnn.py times
 * PyTorch's nn.LSTM and MXNet's fused LSTM in the same run, with the Pythons
 * DEFT_TORCH_PYTHON and DEFT_MXNET_PYTHON name (python3 by default).
 *
 *   DEFT_NUM_THREADS=1 DEFT_TORCH_PYTHON=... DEFT_MXNET_PYTHON=... build/bench/bench_rnn [rounds]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include <deft/autograd.h>

enum { T = 35, N = 32, I = 128, H = 256, L = 2 };

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static DeftNDArrayHandle filled(int ndim, const int64_t *shape, float scale) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc(sizeof(float) * (size_t)n);
    uint32_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = scale * ((float)(s >> 8) / 16777216.0f - 0.5f);
    }
    DeftNDArrayHandle h;
    CHECK(DeftNDArrayCreate(shape, ndim, DEFT_FLOAT32, DEFT_CPU, 0, &h));
    CHECK(DeftNDArrayCopyFromHost(h, v, (size_t)n * sizeof(float)));
    free(v);
    return h;
}

/* Run a cached op once, in training mode or predict mode, and free its outputs. */
static double run(DeftCachedOpHandle op, int training, int nin, DeftNDArrayHandle *in) {
    DeftNDArrayHandle out[8] = {NULL};
    int nout = 8;
    CHECK(DeftAutogradSetIsTraining(training, NULL));
    double t0 = now();
    CHECK(DeftCachedOpInvoke(op, nin, in, &nout, out));
    CHECK(DeftWaitAll());
    double t = now() - t0;
    for (int k = 0; k < nout; k++) CHECK(DeftNDArrayFree(out[k]));
    return t;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const char *names[5] = {"data", "parameters", "state", "state_cell", "rnn_output_head_grad"};
    DeftSymbolHandle vars[4], rnn;
    for (int k = 0; k < 4; k++) CHECK(DeftSymbolCreateVariable(names[k], &vars[k]));
    const char *keys[] = {"state_size", "num_layers", "mode"}, *vals[] = {"256", "2", "lstm"};
    CHECK(DeftSymbolCreateAtomic(op("RNN"), 3, keys, vals, &rnn));
    CHECK(DeftSymbolCompose(rnn, "rnn", 4, NULL, vars));
    DeftSymbolHandle grad;
    CHECK(DeftSymbolGradient(rnn, 3, names, &grad));
    DeftCachedOpHandle forward, backward;
    CHECK(DeftCachedOpCreate(rnn, 0, &forward));
    CHECK(DeftCachedOpCreate(grad, 0, &backward));

    int64_t params = 4 * H * (I + H) + 4 * H * (H + H) + L * 2 * 4 * H;
    DeftNDArrayHandle in[5] = {
        filled(3, (int64_t[]){T, N, I}, 2.0f), filled(1, (int64_t[]){params}, 0.1f),
        filled(3, (int64_t[]){L, N, H}, 1.0f), filled(3, (int64_t[]){L, N, H}, 1.0f),
        filled(3, (int64_t[]){T, N, H}, 1.0f)};
    run(forward, 0, 4, in), run(backward, 1, 5, in); /* warm up: pools, plans */
    double *fw = malloc(sizeof(double) * (size_t)rounds),
           *fb = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        fw[r] = run(forward, 0, 4, in);  /* inference */
        fb[r] = run(backward, 1, 5, in); /* a training step */
    }
    qsort(fw, (size_t)rounds, sizeof(double), compare);
    qsort(fb, (size_t)rounds, sizeof(double), compare);
    const char *threads = getenv("DEFT_NUM_THREADS");
    printf("LSTM %d layers, input %d, hidden %d, seq %d, batch %d; threads %s; load %.2f\n", L, I,
           H, T, N, threads ? threads : "(all)", load_average());
    printf("deft     forward          min %7.2f ms  median %7.2f ms\n", fw[0] * 1e3,
           fw[rounds / 2] * 1e3);
    printf("deft     forward+backward min %7.2f ms  median %7.2f ms\n", fb[0] * 1e3,
           fb[rounds / 2] * 1e3);
    fflush(stdout);
    /* the peers' fused LSTMs on the same sizes, in this run, where they are installed */
    const char *peers[][3] = {{"DEFT_TORCH_PYTHON", "torch", "PyTorch"},
                              {"DEFT_MXNET_PYTHON", "mxnet", "MXNet"}};
    for (int k = 0; k < 2; k++) {
        const char *python = getenv(peers[k][0]);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s -c 'import %s' >/dev/null 2>&1", python ? python : "python3",
                 peers[k][1]);
        if (system(cmd) != 0) {
            printf("%s: not importable (set %s to a Python that has it)\n", peers[k][2],
                   peers[k][0]);
            continue;
        }
        snprintf(cmd, sizeof cmd, "%s %s/python/bench_rnn.py %s %s %d %g",
                 python ? python : "python3", BENCH_DIR, peers[k][1], threads ? threads : "0",
                 rounds, fb[0] * 1e3);
        if (system(cmd) != 0) fprintf(stderr, "bench_rnn.py (%s) failed\n", peers[k][2]);
    }
    free(fw), free(fb);
    for (int k = 0; k < 5; k++) CHECK(DeftNDArrayFree(in[k]));
    CHECK(DeftCachedOpFree(forward));
    CHECK(DeftCachedOpFree(backward));
    CHECK(DeftSymbolFree(grad));
    CHECK(DeftSymbolFree(rnn));
    for (int k = 0; k < 4; k++) CHECK(DeftSymbolFree(vars[k]));
    return 0;
}
