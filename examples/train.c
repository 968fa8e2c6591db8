/*
 * Train a small MLP with a symbolic graph: the executor runs forward and
 * backward in one memory-planned, fused run; SGD updates the weights in
 * place. The task (XOR of the signs of two coordinates) needs the hidden
 * layer, so the accuracy climbing to ~100% shows the gradients are right.
 */
#include <stdio.h>

#include <deft/c_api.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "error: %s\n", DeftGetLastError());                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

enum { BATCH = 256, HIDDEN = 16, STEPS = 600 };

static DeftOpHandle op(const char *name) {
    DeftOpHandle h = NULL;
    if (DeftGetOperator(name, &h)) fprintf(stderr, "error: %s\n", DeftGetLastError());
    return h;
}

/* name = op(inputs...) with one parameter (or none when key is NULL). */
static int layer(const char *name, const char *opname, int nin, DeftSymbolHandle *in,
                 const char *key, const char *value, DeftSymbolHandle *out) {
    CHECK(DeftSymbolCreateAtomic(op(opname), key ? 1 : 0, &key, &value, out));
    CHECK(DeftSymbolCompose(*out, name, nin, NULL, in));
    return 0;
}

static int call(const char *opname, int nin, DeftNDArrayHandle *in, DeftNDArrayHandle *out, int np,
                const char *const *keys, const char *const *vals) {
    int one = 1;
    CHECK(DeftImperativeInvoke(op(opname), nin, in, &one, out, np, keys, vals));
    return 0;
}

/* Points in [-1, 1)^2 and their class: 1 where the two coordinates' signs differ. */
static int make_data(DeftNDArrayHandle *x, DeftNDArrayHandle *label, float *labels) {
    const char *k[3] = {"shape", "low", "high"}, *v[3] = {"(256,2)", "-1", "1"};
    *x = NULL;
    if (call("_random_uniform", 0, NULL, x, 3, k, v)) return 1;
    float points[BATCH * 2];
    CHECK(DeftNDArrayCopyToHost(*x, points, sizeof points));
    for (int i = 0; i < BATCH; i++) labels[i] = (points[2 * i] > 0) != (points[2 * i + 1] > 0);
    const int64_t shape[1] = {BATCH};
    CHECK(DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, labels,
                                    sizeof(float) * BATCH, label));
    return 0;
}

static double accuracy(DeftNDArrayHandle scores, const float *labels) {
    float s[BATCH * 2];
    if (DeftNDArrayCopyToHost(scores, s, sizeof s)) return -1;
    int right = 0;
    for (int i = 0; i < BATCH; i++) right += (s[2 * i + 1] > s[2 * i]) == (labels[i] > 0.5f);
    return (double)right / BATCH;
}

int main(void) {
    CHECK(DeftRandomSeed(42));
    DeftSymbolHandle x, label, fc1, act, fc2, loss;
    CHECK(DeftSymbolCreateVariable("x", &x));
    CHECK(DeftSymbolCreateVariable("label", &label));
    if (layer("fc1", "FullyConnected", 1, &x, "num_hidden", "16", &fc1) ||
        layer("act", "tanh", 1, &fc1, NULL, NULL, &act) ||
        layer("fc2", "FullyConnected", 1, &act, "num_hidden", "2", &fc2) ||
        layer("loss", "softmax_cross_entropy", 2, (DeftSymbolHandle[]){fc2, label}, NULL, NULL,
              &loss))
        return 1;
    int nargs;
    const char *const *names;
    CHECK(DeftSymbolListArguments(loss, &nargs, &names));
    printf("graph arguments:");
    for (int a = 0; a < nargs; a++) printf(" %s", names[a]);
    printf("\n");

    /* inputs: x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, label, loss head gradient */
    DeftNDArrayHandle in[7] = {NULL};
    float labels[BATCH];
    if (make_data(&in[0], &in[5], labels)) return 1;
    const char *shapes[4] = {"(16,2)", "(16,)", "(2,16)", "(2,)"};
    for (int p = 0; p < 4; p++) {
        const char *k[2] = {"shape", "scale"}, *v[2] = {shapes[p], p % 2 ? "0.1" : "1"};
        if (call("_random_normal", 0, NULL, &in[1 + p], 2, k, v)) return 1;
    }
    const int64_t one[1] = {1};
    const float head = 1.0f / BATCH; /* the mean loss's gradient */
    CHECK(DeftNDArrayCreateFromData(one, 1, DEFT_FLOAT32, DEFT_CPU, 0, &head, sizeof head, &in[6]));

    DeftCachedOpHandle step, predict;
    CHECK(DeftCachedOpCreate(loss, DEFT_CACHED_OP_BACKWARD | DEFT_CACHED_OP_FUSE, &step));
    CHECK(DeftCachedOpCreate(fc2, 0, &predict));
    const char *lr_key[1] = {"lr"}, *lr[1] = {"0.5"};
    for (int s = 0; s <= STEPS; s++) {
        DeftNDArrayHandle out[7] = {NULL};
        int nout = 7;
        CHECK(DeftCachedOpInvoke(step, 7, in, &nout, out));
        for (int p = 1; p <= 4; p++) /* out[1 + k] is the gradient of argument k */
            if (call("sgd_update", 2, (DeftNDArrayHandle[]){in[p], out[1 + p]}, &in[p], 1, lr_key,
                     lr))
                return 1;
        if (s % 100 == 0) {
            float total;
            CHECK(DeftNDArrayCopyToHost(out[0], &total, sizeof total));
            DeftNDArrayHandle scores = NULL;
            int n1 = 1;
            CHECK(DeftCachedOpInvoke(predict, 5, in, &n1, &scores));
            printf("step %3d: mean loss %.4f, accuracy %.1f%%\n", s, total / BATCH,
                   100 * accuracy(scores, labels));
            CHECK(DeftNDArrayFree(scores));
        }
        for (int o = 0; o < nout; o++) CHECK(DeftNDArrayFree(out[o]));
    }
    int64_t arena;
    CHECK(DeftCachedOpGetPlanStat(step, DEFT_PLAN_ARENA_BYTES, &arena));
    printf("one training step plans %lld bytes of intermediates\n", (long long)arena);
    for (int i = 0; i < 7; i++) CHECK(DeftNDArrayFree(in[i]));
    CHECK(DeftCachedOpFree(step));
    CHECK(DeftCachedOpFree(predict));
    DeftSymbolHandle all[] = {x, label, fc1, act, fc2, loss};
    for (int i = 0; i < 6; i++) CHECK(DeftSymbolFree(all[i]));
    return 0;
}
