#define _POSIX_C_SOURCE 200809L
/* The executor: results equal imperative invoke, with and without memory planning. */
#include "symbol_helpers.h"

#include <stdatomic.h>
#include <time.h>

#include "capi/src/api.h"
#include "core/engine/engine.h"
#include "core/graph/executor.h"

#include "core/op/op.h"

static DeftNDArrayHandle run1(DeftCachedOpHandle op, int nin, DeftNDArrayHandle *in) {
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_msg(DeftCachedOpInvoke(op, nin, in, &nout, out) == 0, "%s", DeftGetLastError());
    ck_assert_int_eq(nout, 1);
    return out[0];
}

static void assert_same(DeftNDArrayHandle a, DeftNDArrayHandle b) {
    int64_t na, nb;
    double *va = read_all(a, &na), *vb = read_all(b, &nb);
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) /* per element: only a difference reaches Check */
        if (va[i] != vb[i]) ck_abort_msg("element %lld differs", (long long)i);
    free(va), free(vb);
}

/* A 4-layer MLP (FC, tanh) as a graph and as imperative calls on the same data. */
START_TEST(test_mlp_matches_imperative_with_and_without_planning) {
    const int layers = 4;
    DeftSymbolHandle h = var("x"), syms[16];
    int ns = 0;
    syms[ns++] = h;
    for (int l = 0; l < layers; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l);
        DeftSymbolHandle fc = apply("FullyConnected", name, 1, &h, P("num_hidden", "16"));
        h = apply("Activation", NULL, 1, &fc, P("act_type", "tanh"));
        syms[ns++] = fc, syms[ns++] = h;
    }
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(h, &nargs, &names));
    ck_assert_int_eq(nargs, 1 + 2 * layers);
    ck_assert_ok(DeftRandomSeed(7));
    DeftNDArrayHandle args[9];
    args[0] = call1("_random_normal", 0, NULL, P("shape", "(8,12)"));
    for (int l = 0; l < layers; l++) {
        args[1 + 2 * l] = call1("_random_normal", 0, NULL,
                                P("shape", l == 0 ? "(16,12)" : "(16,16)", "scale", "0.3"));
        args[2 + 2 * l] = call1("_random_uniform", 0, NULL, P("shape", "(16,)"));
    }
    /* imperative reference */
    DeftNDArrayHandle x = args[0];
    DeftNDArrayHandle held[8];
    for (int l = 0; l < layers; l++) {
        DeftNDArrayHandle fc =
            call1("FullyConnected", 3, (DeftNDArrayHandle[]){x, args[1 + 2 * l], args[2 + 2 * l]},
                  P("num_hidden", "16"));
        x = call1("Activation", 1, &fc, P("act_type", "tanh"));
        held[2 * l] = fc, held[2 * l + 1] = x;
    }
    DeftCachedOpHandle planned, naive;
    ck_assert_ok(DeftCachedOpCreate(h, 0, &planned));
    ck_assert_ok(DeftCachedOpCreate(h, DEFT_CACHED_OP_NO_MEMORY_PLAN, &naive));
    DeftNDArrayHandle y1 = run1(planned, 9, args), y2 = run1(naive, 9, args);
    DeftNDArrayHandle y3 = run1(planned, 9, args); /* the cached plan again */
    assert_same(y1, x);
    assert_same(y2, x);
    assert_same(y3, x);
    int64_t arena, naive_bytes, inplace, sharing;
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_ARENA_BYTES, &arena));
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_NAIVE_BYTES, &naive_bytes));
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_INPLACE_ONLY_BYTES, &inplace));
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_SHARING_ONLY_BYTES, &sharing));
    /* 7 intermediates of 8x16 floats (512 bytes); tanh writes over its input. */
    ck_assert_int_eq(naive_bytes, 7 * 512);
    ck_assert_int_eq(inplace, 4 * 512);
    ck_assert_int_le(arena, 2 * 512);
    ck_assert_int_le(sharing, 2 * 512);
    ck_assert_ok(DeftCachedOpGetPlanStat(naive, DEFT_PLAN_ARENA_BYTES, &arena));
    ck_assert_int_eq(arena, naive_bytes);
    free_all(9, args);
    free_all(8, held);
    free_all(3, (DeftNDArrayHandle[]){y1, y2, y3});
    ck_assert_ok(DeftCachedOpFree(planned));
    ck_assert_ok(DeftCachedOpFree(naive));
    for (int i = 0; i < ns; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* In place never overwrites an input that is still read: a = exp(x) is read by
 * relu (in-place candidate) and later by the final add. */
START_TEST(test_in_place_respects_later_readers) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle a = apply("exp", "a", 1, &x, NO_PARAMS);
    DeftSymbolHandle r = apply("negative", "r", 1, &a, NO_PARAMS);
    DeftSymbolHandle s = apply("_plus_scalar", "s", 1, &r, P("scalar", "1"));
    DeftSymbolHandle y = apply("elemwise_add", "y", 2, (DeftSymbolHandle[]){s, a}, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &op));
    DeftNDArrayHandle in = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(0, 1, -2));
    DeftNDArrayHandle out = run1(op, 1, &in);
    double want[3];
    const double xs[3] = {0, 1, -2};
    for (int i = 0; i < 3; i++) want[i] = (-exp(xs[i]) + 1) + exp(xs[i]);
    assert_values(out, 3, want, 1e-15);
    free_all(2, (DeftNDArrayHandle[]){in, out});
    ck_assert_ok(DeftCachedOpFree(op));
    DeftSymbolHandle all[] = {x, a, r, s, y};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* The sweep of match ranges goes on while the range refuses a free block: a
 * 512-byte block is free when b + b needs 256 bytes, which a range of 1
 * refuses (a block of its own: 1024 bytes in all) and a range of 2 takes
 * (768 bytes). */
START_TEST(test_plan_takes_a_larger_free_block_when_that_is_smaller) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle a =
        apply("Concat", "a", 2, (DeftSymbolHandle[]){x, x}, P("num_args", "2", "dim", "0"));
    DeftSymbolHandle b = apply("slice_axis", "b", 1, &a, P("axis", "0", "begin", "0", "end", "64"));
    DeftSymbolHandle c = apply("elemwise_add", "c", 2, (DeftSymbolHandle[]){b, b}, NO_PARAMS);
    DeftSymbolHandle y = apply("elemwise_mul", "y", 2, (DeftSymbolHandle[]){c, b}, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &op));
    double values[64], want[64];
    for (int i = 0; i < 64; i++) values[i] = i - 20, want[i] = 2 * values[i] * values[i];
    DeftNDArrayHandle in = make(DEFT_FLOAT32, 1, SHAPE(64), values);
    DeftNDArrayHandle out = run1(op, 1, &in);
    assert_values(out, 64, want, 0);
    int64_t arena, sharing;
    ck_assert_ok(DeftCachedOpGetPlanStat(op, DEFT_PLAN_ARENA_BYTES, &arena));
    ck_assert_ok(DeftCachedOpGetPlanStat(op, DEFT_PLAN_SHARING_ONLY_BYTES, &sharing));
    ck_assert_int_eq(arena, 512 + 256);
    ck_assert_int_eq(sharing, 512 + 256);
    free_all(2, (DeftNDArrayHandle[]){in, out});
    ck_assert_ok(DeftCachedOpFree(op));
    DeftSymbolHandle all[] = {x, a, b, c, y};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* An output nobody reads is freed once its node has run: the next value takes its block.
 * split's second half goes unread; exp(first half) cannot be in place (the first half is
 * read again), so it needs a block of 128 bytes, the second half's. */
START_TEST(test_plan_frees_outputs_nobody_reads) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle parts = apply("split", "sp", 1, &x, P("num_outputs", "2", "axis", "0"));
    DeftSymbolHandle first;
    ck_assert_ok(DeftSymbolGetOutput(parts, 0, &first));
    DeftSymbolHandle e = apply("exp", "e", 1, &first, NO_PARAMS);
    DeftSymbolHandle y = apply("elemwise_add", "y", 2, (DeftSymbolHandle[]){e, first}, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &op));
    double values[64], want[32];
    for (int i = 0; i < 64; i++) values[i] = (i - 30) / 16.0;
    for (int i = 0; i < 32; i++) want[i] = exp(values[i]) + values[i];
    DeftNDArrayHandle in = make(DEFT_FLOAT32, 1, SHAPE(64), values);
    DeftNDArrayHandle out = run1(op, 1, &in);
    assert_values(out, 32, want, 1e-6);
    int64_t arena;
    ck_assert_ok(DeftCachedOpGetPlanStat(op, DEFT_PLAN_ARENA_BYTES, &arena));
    ck_assert_int_eq(arena, 2 * 32 * 4); /* the halves; exp's value in the second's block */
    free_all(2, (DeftNDArrayHandle[]){in, out});
    ck_assert_ok(DeftCachedOpFree(op));
    DeftSymbolHandle all[] = {x, parts, first, e, y};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

START_TEST(test_new_shapes_new_plan_and_errors) {
    DeftSymbolHandle x = var("x"), w = var("w");
    DeftSymbolHandle d = apply("dot", "d", 2, (DeftSymbolHandle[]){x, w}, NO_PARAMS);
    DeftSymbolHandle parts = apply("split", "sp", 1, &d, P("num_outputs", "2", "axis", "1"));
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(parts, 0, &op));
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 2, SHAPE(3, 2), VALUES(1, 0, 0, 1, 1, 1));
    DeftNDArrayHandle outs[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(DeftCachedOpInvoke(op, 2, (DeftNDArrayHandle[]){a, b}, &nout, outs));
    assert_values(outs[0], 2, VALUES(4, 10), 0);
    assert_values(outs[1], 2, VALUES(5, 11), 0);
    DeftNDArrayHandle c = make(DEFT_FLOAT32, 2, SHAPE(1, 3), VALUES(1, 1, 1));
    DeftNDArrayHandle outs2[2] = {NULL, NULL};
    ck_assert_ok(DeftCachedOpInvoke(op, 2, (DeftNDArrayHandle[]){c, b}, &nout, outs2));
    assert_values(outs2[0], 1, VALUES(2), 0);
    DeftNDArrayHandle none[2] = {NULL, NULL};
    ck_assert_fails(DeftCachedOpInvoke(op, 1, &a, &nout, none), DEFT_ERROR_VALUE,
                    "DeftCachedOpInvoke: got 1 inputs, expected 2");
    ck_assert_fails(DeftCachedOpInvoke(op, 2, (DeftNDArrayHandle[]){a, a}, &nout, none),
                    DEFT_ERROR_VALUE, "node 'd': operator 'dot': input 1 has shape (2,3)");
    nout = 1;
    ck_assert_fails(DeftCachedOpInvoke(op, 2, (DeftNDArrayHandle[]){a, b}, &nout, none),
                    DEFT_ERROR_VALUE, "the graph has 2 outputs, but there is room for 1");
    ck_assert_ptr_null(none[0]);
    int64_t v;
    DeftCachedOpHandle fresh;
    ck_assert_ok(DeftCachedOpCreate(parts, 0, &fresh));
    ck_assert_fails(DeftCachedOpGetPlanStat(fresh, DEFT_PLAN_ARENA_BYTES, &v), DEFT_ERROR_VALUE,
                    "has not run yet");
    ck_assert_fails(DeftCachedOpCreate(parts, 8, &fresh), DEFT_ERROR_VALUE, "flags is 8");
    ck_assert_ok(DeftCachedOpFree(fresh));
    ck_assert_ok(DeftCachedOpFree(op)); /* freed while its outputs are still held */
    ck_assert_fails(DeftCachedOpFree(op), DEFT_ERROR_VALUE,
                    "a CachedOp handle that was already freed");
    free_all(7, (DeftNDArrayHandle[]){a, b, c, outs[0], outs[1], outs2[0], outs2[1]});
    DeftSymbolHandle all[] = {x, w, d, parts};
    for (int i = 0; i < 4; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* A 10-layer MLP training graph (forward and backward): the plan needs at
 * most 60% of one-buffer-per-entry, and planning changes no result. */
START_TEST(test_mlp_training_graph_plan) {
    const int layers = 10;
    DeftSymbolHandle h = var("x"), label = var("label"), made[32];
    int nmade = 0;
    made[nmade++] = h, made[nmade++] = label;
    for (int l = 0; l < layers; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l);
        DeftSymbolHandle fc =
            apply("FullyConnected", name, 1, &h, P("num_hidden", l == layers - 1 ? "10" : "32"));
        made[nmade++] = fc;
        h = fc;
        if (l < layers - 1)
            made[nmade++] = h = apply("Activation", NULL, 1, &fc, P("act_type", "relu"));
    }
    DeftSymbolHandle loss =
        apply("softmax_cross_entropy", "loss", 2, (DeftSymbolHandle[]){h, label}, NO_PARAMS);
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(loss, &nargs, &names));
    const char *wrt[32];
    int nwrt = 0;
    for (int a = 0; a < nargs; a++)
        if (strcmp(names[a], "x") && strcmp(names[a], "label")) wrt[nwrt++] = strdup(names[a]);
    DeftSymbolHandle train;
    ck_assert_ok(DeftSymbolGradient(loss, nwrt, wrt, &train));
    ck_assert_ok(DeftSymbolListArguments(train, &nargs, &names));
    /* inputs: x (16, 20), labels, weights and biases, and the loss's head gradient */
    ck_assert_ok(DeftRandomSeed(3));
    DeftNDArrayHandle args[40];
    for (int a = 0; a < nargs; a++) {
        const char *n = names[a];
        if (!strcmp(n, "x"))
            args[a] = call1("_random_normal", 0, NULL, P("shape", "(16,20)"));
        else if (!strcmp(n, "label"))
            args[a] = call1("_arange", 0, NULL, P("start", "16", "dtype", "float32"));
        else if (strstr(n, "head_grad"))
            args[a] = call1("_ones", 0, NULL, P("shape", "(1,)"));
        else if (strstr(n, "bias"))
            args[a] =
                call1("_zeros", 0, NULL, P("shape", !strcmp(n, "fc9_bias") ? "(10,)" : "(32,)"));
        else {
            const char *shape = !strcmp(n, "fc0_weight")   ? "(32,20)"
                                : !strcmp(n, "fc9_weight") ? "(10,32)"
                                                           : "(32,32)";
            args[a] = call1("_random_normal", 0, NULL, P("shape", shape, "scale", "0.2"));
        }
    }
    /* labels 0..15 exceed 10 classes: wrap them into range */
    for (int a = 0; a < nargs; a++)
        if (!strcmp(names[a], "label")) {
            DeftNDArrayHandle wrapped = call1("_minimum_scalar", 1, &args[a], P("scalar", "9"));
            ck_assert_ok(DeftNDArrayFree(args[a]));
            args[a] = wrapped;
        }
    DeftCachedOpHandle planned, naive;
    ck_assert_ok(DeftCachedOpCreate(train, 0, &planned));
    ck_assert_ok(DeftCachedOpCreate(train, DEFT_CACHED_OP_NO_MEMORY_PLAN, &naive));
    DeftNDArrayHandle a_out[32] = {NULL}, b_out[32] = {NULL};
    int na = 32, nb = 32;
    ck_assert_msg(DeftCachedOpInvoke(planned, nargs, args, &na, a_out) == 0, "%s",
                  DeftGetLastError());
    ck_assert_ok(DeftCachedOpInvoke(naive, nargs, args, &nb, b_out));
    ck_assert_int_eq(na, 1 + nwrt);
    for (int k = 0; k < na; k++) assert_same(a_out[k], b_out[k]);
    int64_t arena, naive_bytes, inplace, sharing;
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_ARENA_BYTES, &arena));
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_NAIVE_BYTES, &naive_bytes));
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_INPLACE_ONLY_BYTES, &inplace));
    ck_assert_ok(DeftCachedOpGetPlanStat(planned, DEFT_PLAN_SHARING_ONLY_BYTES, &sharing));
    ck_assert_msg(arena * 10 <= naive_bytes * 6, "planned %lld of naive %lld bytes",
                  (long long)arena, (long long)naive_bytes);
    ck_assert_int_le(arena, inplace);
    ck_assert_int_le(arena, sharing);
    free_all(na, a_out);
    free_all(nb, b_out);
    free_all(nargs, args);
    for (int w = 0; w < nwrt; w++) free((char *)wrt[w]);
    ck_assert_ok(DeftCachedOpFree(planned));
    ck_assert_ok(DeftCachedOpFree(naive));
    ck_assert_ok(DeftSymbolFree(loss));
    ck_assert_ok(DeftSymbolFree(train));
    for (int i = 0; i < nmade; i++) ck_assert_ok(DeftSymbolFree(made[i]));
}
END_TEST

/* The forward+backward flag runs the gradient graph: same values as building it
 * with DeftSymbolGradient(), with and without fusion. */
START_TEST(test_forward_backward_mode) {
    DeftSymbolHandle x = var("x"), label = var("label");
    DeftSymbolHandle fc0 = apply("FullyConnected", "fc0", 1, &x, P("num_hidden", "6"));
    DeftSymbolHandle t = apply("tanh", "t", 1, &fc0, NO_PARAMS);
    DeftSymbolHandle m = apply("_mul_scalar", "m", 1, &t, P("scalar", "0.5"));
    DeftSymbolHandle h = apply("_plus_scalar", "h", 1, &m, P("scalar", "1"));
    DeftSymbolHandle fc1 = apply("FullyConnected", "fc1", 1, &h, P("num_hidden", "3"));
    DeftSymbolHandle loss =
        apply("softmax_cross_entropy", "loss", 2, (DeftSymbolHandle[]){fc1, label}, NO_PARAMS);
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(loss, &nargs, &names));
    ck_assert_int_eq(nargs, 6); /* x, fc0 weight and bias, fc1 weight and bias, label */
    DeftSymbolHandle grad;
    ck_assert_ok(DeftSymbolGradient(loss, nargs, names, &grad));
    ck_assert_ok(DeftRandomSeed(11));
    DeftNDArrayHandle in[7];
    const char *shapes[] = {"(4,5)", "(6,5)", "(6,)", "(3,6)", "(3,)"};
    for (int i = 0; i < 5; i++)
        in[i] = call1("_random_normal", 0, NULL, P("shape", shapes[i], "dtype", "float64"));
    in[5] = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(0, 2, 1, 2));
    in[6] = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(1)); /* the head gradient of the loss */
    DeftCachedOpHandle reference, both, fused;
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &reference));
    ck_assert_ok(DeftCachedOpCreate(loss, DEFT_CACHED_OP_BACKWARD, &both));
    ck_assert_ok(DeftCachedOpCreate(loss, DEFT_CACHED_OP_BACKWARD | DEFT_CACHED_OP_FUSE, &fused));
    DeftNDArrayHandle want[7] = {NULL}, got[7] = {NULL}, got_fused[7] = {NULL};
    int n1 = 7, n2 = 7, n3 = 7;
    ck_assert_ok(DeftCachedOpInvoke(reference, 7, in, &n1, want));
    ck_assert_ok(DeftCachedOpInvoke(both, 7, in, &n2, got));
    ck_assert_ok(DeftCachedOpInvoke(fused, 7, in, &n3, got_fused));
    ck_assert_int_eq(n1, 7); /* the loss, then six gradients */
    ck_assert_int_eq(n2, 7);
    ck_assert_int_eq(n3, 7);
    for (int o = 0; o < 7; o++) {
        assert_same(got[o], want[o]);
        int64_t n;
        double *w = read_all(want[o], &n);
        assert_values(got_fused[o], n, w, 1e-12);
        free(w);
    }
    free_all(7, in), free_all(7, want), free_all(7, got), free_all(7, got_fused);
    ck_assert_ok(DeftCachedOpFree(reference));
    ck_assert_ok(DeftCachedOpFree(both));
    ck_assert_ok(DeftCachedOpFree(fused));
    DeftSymbolHandle all[] = {x, label, fc0, t, m, h, fc1, loss, grad};
    for (int i = 0; i < 9; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* The PlanMemory pass writes the executor's plan into the graph. */
/* ---- outputs nobody reads ---- */

/* A test operator reporting which of its two outputs its caller wanted. */
static int wanted_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin, (void)in;
    out[0] = out[1] = (deft_desc_t){{1, {2}}, DEFT_DT_FLOAT32};
    *nout = 2;
    return 0;
}

static int wanted_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)in, (void)nout;
    float *flags = deft_tensor_data(&out[0]), *second = deft_tensor_data(&out[1]);
    flags[0] = deft_op_output_wanted(0), flags[1] = deft_op_output_wanted(1);
    if (deft_op_output_wanted(1)) second[0] = second[1] = 7;
    return 0;
}

static int two_outputs(const deft_param_value_t *p, int nin) {
    (void)p, (void)nin;
    return 2;
}

static const deft_op_t wanted_ops[] = {{.name = "_test_wanted_outputs",
                                        .description = "reports deft_op_output_wanted",
                                        .min_inputs = 1,
                                        .max_inputs = 1,
                                        .infer = wanted_infer,
                                        .forward = wanted_forward,
                                        .num_outputs = two_outputs,
                                        .inplace_input = -1}};
DEFT_OP_FAMILY(deft_family_test_wanted, wanted_ops);

/* A graph run tells a kernel which outputs someone reads; a call, all. */
START_TEST(test_kernels_know_which_outputs_are_read) {
    DeftSymbolHandle x = var("x"), both = apply("_test_wanted_outputs", "w", 1, &x, NO_PARAMS);
    DeftSymbolHandle first;
    ck_assert_ok(DeftSymbolGetOutput(both, 0, &first));
    DeftNDArrayHandle in = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(0));
    double want[2][4] = {{1, 0}, {1, 1, 7, 7}};
    DeftSymbolHandle graphs[2] = {first, both};
    for (int c = 0; c < 2; c++) {
        DeftCachedOpHandle op;
        ck_assert_ok(DeftCachedOpCreate(graphs[c], 0, &op));
        DeftNDArrayHandle out[2] = {NULL, NULL};
        int nout = 2;
        ck_assert_ok(DeftCachedOpInvoke(op, 1, &in, &nout, out));
        ck_assert_int_eq(nout, c + 1);
        assert_values(out[0], 2, want[c], 0);
        if (c == 1) assert_values(out[1], 2, want[c] + 2, 0);
        free_all(nout, out);
        ck_assert_ok(DeftCachedOpFree(op));
    }
    DeftNDArrayHandle out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("_test_wanted_outputs", 1, &in, &nout, out, NO_PARAMS));
    assert_values(out[0], 2, VALUES(1, 1), 0);
    free_all(2, out), free_all(1, &in);
    DeftSymbolHandle syms[] = {x, both, first};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

START_TEST(test_plan_memory_pass) {
    DeftSymbolHandle x = var("x"), bad = NULL, planned;
    DeftSymbolHandle u = apply("exp", "u", 1, &x, NO_PARAMS);
    ck_assert_fails(DeftSymbolApplyPasses(u, "CSE,PlanMemory", &bad), DEFT_ERROR_VALUE,
                    "PlanMemory: the shape of 'x' is unknown");
    ck_assert_ptr_null(bad);
    ck_assert_ok(DeftSymbolSetAttr(x, "__shape__", "(4,8)"));
    DeftSymbolHandle a = apply("exp", "a", 1, &x, NO_PARAMS);
    DeftSymbolHandle b = apply("negative", "b", 1, &a, NO_PARAMS);
    DeftSymbolHandle c = apply("sum", "c", 1, &b, NO_PARAMS);
    ck_assert_ok(DeftSymbolApplyPasses(c, "InferShape,CSE,PlanMemory", &planned));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(planned, &json));
    /* a at 0, b written over it in place, c an output outside the arena */
    const char *at0 = "\"__storage_offset__\":\t\"0\"";
    ck_assert_ptr_nonnull(strstr(strstr(json, at0) + 1, at0));
    ck_assert_ptr_nonnull(strstr(json, "\"__storage_offset__\":\t\"-1\""));
    DeftSymbolHandle all[] = {x, u, a, b, c, planned};
    for (int i = 0; i < 6; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* A symbol with n arguments "a<i>", each read by one node: a tree of add_n
 * nodes of up to 64 inputs. Every symbol made goes into syms (returned). */
static DeftSymbolHandle *sum_tree(int n, int *count) {
    DeftSymbolHandle *syms = malloc(((size_t)n * 2 + 8) * sizeof *syms);
    ck_assert_ptr_nonnull(syms);
    int ns = 0;
    for (int i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "a%d", i);
        syms[ns++] = var(name);
    }
    int start = 0, level = n;
    while (level > 1) {
        int next = ns;
        for (int i = 0; i < level; i += 64)
            syms[ns++] =
                apply("add_n", NULL, level - i < 64 ? level - i : 64, &syms[start + i], NO_PARAMS);
        start = next, level = ns - next;
    }
    *count = ns;
    return syms;
}

/* An executor over n arguments (no cap on the count): argument a<i> holds
 * (i, 1), so the two sums are n(n-1)/2 and n, run twice (the cached plan). */
static void run_many_arguments(int n) {
    int ns;
    DeftSymbolHandle *syms = sum_tree(n, &ns);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(syms[ns - 1], 0, &op));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(syms[ns - 1], &nargs, &names));
    ck_assert_int_eq(nargs, n);
    DeftNDArrayHandle *in = malloc((size_t)n * sizeof *in);
    ck_assert_ptr_nonnull(in);
    for (int a = 0; a < n; a++)
        in[a] = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(atoi(names[a] + 1), 1));
    for (int round = 0; round < 2; round++) {
        DeftNDArrayHandle out = run1(op, n, in);
        assert_values(out, 2, VALUES((double)n * (n - 1) / 2, n), 0);
        free_all(1, &out);
    }
    free_all(n, in);
    free(in);
    ck_assert_ok(DeftCachedOpFree(op));
    for (int i = 0; i < ns; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
    free(syms);
}

START_TEST(test_executor_takes_300_arguments) {
    run_many_arguments(300);
}
END_TEST

/* 100,000 arguments: creation and runs are linear in the graph (this used to
 * take minutes: each variable scanned every node to see if it was auxiliary). */
START_TEST(test_executor_takes_100000_arguments) {
    run_many_arguments(100000);
}
END_TEST

/* A group of 300 outputs x * i: any number of outputs runs (the room used to
 * be cut at 256). Recorded for autograd the call would be one node with 300
 * outputs, more than a node has: its operators are recorded one by one (it
 * used to be refused; before that, a stack overrun). */
START_TEST(test_executor_returns_300_outputs) {
    enum { N = 300 };
    DeftSymbolHandle x = var("x"), parts[N], group;
    for (int i = 0; i < N; i++) {
        char scalar[16];
        snprintf(scalar, sizeof scalar, "%d", i);
        parts[i] = apply("_mul_scalar", NULL, 1, &x, P("scalar", scalar));
    }
    ck_assert_ok(DeftSymbolCreateGroup(N, parts, &group));
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(group, 0, &op));
    DeftNDArrayHandle in = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, -2)), out[N] = {NULL};
    int nout = N;
    ck_assert_ok(DeftCachedOpInvoke(op, 1, &in, &nout, out));
    ck_assert_int_eq(nout, N);
    for (int i = 0; i < N; i++) assert_values(out[i], 2, VALUES(i, -2.0 * i), 0);
    free_all(N, out);
    for (int i = 0; i < N; i++) out[i] = NULL;
    /* Too many outputs for one recorded node: recorded operator by operator. */
    DeftNDArrayHandle grad = make(DEFT_FLOAT64, 1, SHAPE(2), NULL);
    int req = DEFT_GRAD_WRITE;
    ck_assert_ok(DeftAutogradMarkVariables(1, &in, &req, &grad));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    nout = N;
    ck_assert_ok(DeftCachedOpInvoke(op, 1, &in, &nout, out));
    ck_assert_int_eq(nout, N);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    ck_assert_ok(DeftAutogradBackward(N, out, NULL, 0, 0)); /* d(sum of the outputs) */
    assert_values(grad, 2, VALUES(N * (N - 1) / 2, N * (N - 1) / 2), 0);
    free_all(N, out);
    free_all(2, (DeftNDArrayHandle[]){in, grad});
    ck_assert_ok(DeftCachedOpFree(op));
    for (int i = 0; i < N; i++) ck_assert_ok(DeftSymbolFree(parts[i]));
    ck_assert_ok(DeftSymbolFree(x));
    ck_assert_ok(DeftSymbolFree(group));
}
END_TEST

/* y = relu(-x) on n float64 values x[i] = i % 3 - 1: y is (1, 0, 0, 1, 0, 0, ...). */
static DeftNDArrayHandle run_neg_relu(DeftCachedOpHandle op, int64_t n) {
    double *xs = malloc((size_t)n * sizeof *xs), *want = malloc((size_t)n * sizeof *want);
    ck_assert_ptr_nonnull(xs);
    ck_assert_ptr_nonnull(want);
    for (int64_t i = 0; i < n; i++) xs[i] = (double)(i % 3) - 1, want[i] = i % 3 == 0;
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(n), xs);
    DeftNDArrayHandle y = run1(op, 1, &x);
    free_all(1, &x);
    free(xs);
    assert_values(y, n, want, 0);
    free(want);
    return y;
}

/* 100 input shapes, each planned with a 512 KiB arena (the negated input):
 * the executor keeps at most DEFT_PLAN_CACHE_BYTES (4 MiB, set by main) of
 * arenas, DeftMemoryReleaseCached drops them all, and evicted plans are made
 * again with the same results. Runs are queued while plans are dropped. */
START_TEST(test_executor_plan_cache_is_bounded_and_released) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle neg = apply("negative", "neg", 1, &x, NO_PARAMS);
    DeftSymbolHandle y = apply("relu", "y", 1, &neg, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &op));
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    int64_t base = mem_stat(DEFT_MEM_LIVE_BYTES), highest = 0;
    for (int s = 0; s < 100; s++) {
        DeftNDArrayHandle out = run_neg_relu(op, 65536 + 64 * s);
        free_all(1, &out);
        int64_t live = mem_stat(DEFT_MEM_LIVE_BYTES) - base;
        if (live > highest) highest = live;
    }
    ck_assert_msg(highest <= (4 << 20) + (65536 + 64 * 100) * 8,
                  "the plans kept %lld bytes of arenas", (long long)highest);
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
    DeftNDArrayHandle again[6];
    for (int k = 0; k < 6; k++) { /* release between queued runs */
        again[k] = run_neg_relu(op, k % 2 ? 65536 : 65536 + 64 * 99);
        ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    }
    free_all(6, again);
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
    ck_assert_ok(DeftCachedOpFree(op));
    DeftSymbolHandle all[] = {x, neg, y};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

static int64_t plan_stat(DeftCachedOpHandle op, int stat) {
    int64_t v;
    ck_assert_ok(DeftCachedOpGetPlanStat(op, stat, &v));
    return v;
}

/* The report's figures are planned when asked, for the last plan used: after a
 * run of another shape they are that shape's, and they outlive the plan when
 * DeftMemoryReleaseCached drops it. neg is the one intermediate: naive = its bytes (float64). */
START_TEST(test_plan_figures_follow_the_last_plan_and_outlive_it) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle neg = apply("negative", "neg", 1, &x, NO_PARAMS);
    DeftSymbolHandle y = apply("relu", "y", 1, &neg, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &op));
    int64_t v;
    ck_assert_int_eq(DeftCachedOpGetPlanStat(op, DEFT_PLAN_NAIVE_BYTES, &v), -1);
    const int sizes[] = {4096, 8192, 4096};
    for (int r = 0; r < 3; r++) {
        DeftNDArrayHandle out = run_neg_relu(op, sizes[r]);
        ck_assert_int_eq(plan_stat(op, DEFT_PLAN_NAIVE_BYTES), sizes[r] * 8);
        ck_assert_int_eq(plan_stat(op, DEFT_PLAN_SHARING_ONLY_BYTES), sizes[r] * 8);
        ck_assert_int_eq(plan_stat(op, DEFT_PLAN_ARENA_BYTES), sizes[r] * 8);
        free_all(1, &out);
    }
    DeftNDArrayHandle out = run_neg_relu(op, 8192); /* not asked before the plan goes */
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_int_eq(plan_stat(op, DEFT_PLAN_NAIVE_BYTES), 8192 * 8);
    ck_assert_int_eq(plan_stat(op, DEFT_PLAN_INPLACE_ONLY_BYTES), 8192 * 8);
    free_all(1, &out);
    ck_assert_ok(DeftCachedOpFree(op));
    DeftSymbolHandle all[] = {x, neg, y};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

static atomic_int run_gate_open;

static int wait_for_run_gate(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000 && !atomic_load(&run_gate_open); i++)
        nanosleep(&(struct timespec){0, 100000}, NULL);
    return 0;
}

/* A graph run queued behind a write of its input counts its arrays' bytes
 * (1 MiB in, 1 MiB out) against the engine's bound, as an operator call
 * does; it used to count none, so queued graph runs escaped the bound. */
START_TEST(test_queued_runs_count_their_bytes) {
    if (deft_engine_is_naive()) return; /* the gate would run inline, before the run is queued */
    atomic_store(&run_gate_open, 0);
    DeftNDArrayHandle x = call1("_zeros", 0, NULL, P("shape", "(262144,)"));
    deft_ndarray_t *arr;
    ck_assert_ok(api_ndarray(x, "x", &arr));
    deft_engine_op_desc_t gate = {.fn = wait_for_run_gate,
                                  .writes = &arr->var,
                                  .num_writes = 1,
                                  .name = "gate",
                                  .origin = "test"};
    ck_assert_int_eq(deft_engine_push(&gate), 0);
    DeftSymbolHandle v = var("x"), y = apply("_plus_scalar", "y", 1, &v, P("scalar", "1"));
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &exec));
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &out));
    long long queued = deft_engine_pending_bytes();
    atomic_store(&run_gate_open, 1);
    ck_assert_int_ge(queued, 2 << 20);
    int64_t n;
    double *values = read_all(out, &n);
    ck_assert_double_eq(values[0], 1);
    ck_assert_double_eq(values[n - 1], 1);
    free(values);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(y));
    ck_assert_ok(DeftSymbolFree(v));
    free_all(2, (DeftNDArrayHandle[]){x, out});
}
END_TEST

/* The names of a graph's unnamed nodes come from the first graph that is named (JSON,
 * listings, an error): making an executor names none, so a symbol named after one was made
 * is named as one never run. Here the group's post-order meets b before a. */
START_TEST(test_making_an_executor_names_no_node) {
    DeftSymbolHandle x = var("x"), y = var("y");
    DeftSymbolHandle a = apply("_plus_scalar", NULL, 1, &x, P("scalar", "1"));
    DeftSymbolHandle b = apply("_plus_scalar", NULL, 1, &y, P("scalar", "2"));
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(a, 0, &op));
    DeftNDArrayHandle in = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle out = run1(op, 1, &in);
    assert_values(out, 2, VALUES(2, 3), 0);
    DeftSymbolHandle group;
    ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){b, a}, &group));
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListOutputs(group, &n, &names));
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(names[0], "plus_scalar0_output");
    ck_assert_str_eq(names[1], "plus_scalar1_output");
    ck_assert_ok(DeftCachedOpFree(op));
    free_all(2, (DeftNDArrayHandle[]){in, out});
    DeftSymbolHandle all[] = {x, y, a, b, group};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* An executor's error names an unnamed node as the symbol's JSON then does: the executor
 * names its graph when the error asks, and the name sticks to the node. */
START_TEST(test_executor_errors_name_unnamed_nodes) {
    DeftSymbolHandle x = var("x"), w = var("w");
    DeftSymbolHandle d = apply("dot", NULL, 2, (DeftSymbolHandle[]){x, w}, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(d, 0, &op));
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle none[1] = {NULL};
    int nout = 1;
    ck_assert_fails(DeftCachedOpInvoke(op, 2, (DeftNDArrayHandle[]){a, a}, &nout, none),
                    DEFT_ERROR_VALUE, "node 'dot0': operator 'dot': input 1 has shape (2,3)");
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(d, &json));
    ck_assert_ptr_nonnull(strstr(json, "\"name\":\t\"dot0\""));
    ck_assert_ok(DeftCachedOpFree(op));
    ck_assert_ok(DeftNDArrayFree(a));
    DeftSymbolHandle all[] = {x, w, d};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* A symbol x -> _plus_scalar whose types (symbol.h) say (7) for the sum, which inference
 * would not: listed in the graph's order or the other way round. */
static deft_symbol_t *symbol_with_types(bool reversed) {
    deft_node_t *x, *y;
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    ck_assert_ok(deft_node_new_variable("x", NULL, 0, NULL, NULL, &x));
    ck_assert_ok(deft_node_new_op(deft_registry_find("_plus_scalar"), NULL, 1, keys, vals, 1,
                                  &(deft_entry_t){x, 0}, &y));
    deft_symbol_t *sym;
    ck_assert_ok(deft_symbol_from_entries(1, &(deft_entry_t){y, 0}, &sym));
    deft_node_release(x), deft_node_release(y);
    deft_symbol_types_t *t = deft_symbol_types_new(2, 2);
    ck_assert_ptr_nonnull(t);
    deft_desc_t dx = {.dtype = DEFT_DT_FLOAT32}, dy = dx;
    ck_assert_ok(deft_shape_init(&dx.shape, (const int64_t[]){2, 3}, 2, "x"));
    ck_assert_ok(deft_shape_init(&dy.shape, (const int64_t[]){7}, 1, "y"));
    t->nodes[0] = reversed ? y : x, t->nodes[1] = reversed ? x : y;
    t->first[0] = 0, t->first[1] = 1, t->first[2] = 2;
    t->desc[0] = reversed ? dy : dx, t->desc[1] = reversed ? dx : dy;
    sym->types = t;
    return sym;
}

/* An executor takes a symbol's types for inputs described as they say, in either order;
 * other inputs are inferred. */
START_TEST(test_executor_takes_the_symbols_types) {
    for (int reversed = 0; reversed < 2; reversed++) {
        deft_symbol_t *sym = symbol_with_types(reversed);
        deft_cached_op_t *op;
        ck_assert_ok(deft_cached_op_new(sym, true, &op));
        deft_desc_t in = {.dtype = DEFT_DT_FLOAT32}, out[1];
        int nout = 1;
        ck_assert_ok(deft_shape_init(&in.shape, (const int64_t[]){2, 3}, 2, "x"));
        ck_assert_ok(deft_cached_op_infer(op, 1, &in, &nout, out));
        ck_assert_int_eq(out[0].shape.ndim, 1); /* the types' (7), not inference's (2,3) */
        ck_assert_int_eq(out[0].shape.dims[0], 7);
        ck_assert_ok(deft_shape_init(&in.shape, (const int64_t[]){4}, 1, "x"));
        ck_assert_ok(deft_cached_op_infer(op, 1, &in, &nout, out));
        ck_assert_int_eq(out[0].shape.ndim, 1); /* inferred */
        ck_assert_int_eq(out[0].shape.dims[0], 4);
        deft_cached_op_release(op);
        deft_symbol_free(sym);
    }
}
END_TEST

/* A node placed on a device that is not there fails the run, naming the node, whether or
 * not the graph's other nodes follow their inputs. */
START_TEST(test_executor_checks_each_placed_node) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle y = apply("_plus_scalar", "y", 1, &x, P("scalar", "1"));
    DeftSymbolHandle z =
        apply("_plus_scalar", "z", 1, &y, P("scalar", "1", "__device__", "gpu(99)"));
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(z, 0, &op));
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2)), none[1] = {NULL};
    int nout = 1;
    /* no GPU, or no gpu(99): which error depends on the machine, the words do not */
    ck_assert_int_eq(DeftCachedOpInvoke(op, 1, &a, &nout, none), -1);
    ck_assert_ptr_nonnull(
        strstr(DeftGetLastError(), "the device of node 'z' (_plus_scalar) is gpu(99)"));
    ck_assert_ok(DeftCachedOpFree(op));
    ck_assert_ok(DeftNDArrayFree(a));
    DeftSymbolHandle all[] = {x, y, z};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* The operators of an executor's graph: whether one is `name`. */
static bool runs_operator(const deft_cached_op_t *op, const char *name) {
    const deft_graph_t *g = deft_cached_op_graph(op);
    for (int i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->op && strcmp(g->nodes[i]->op->op->name, name) == 0) return true;
    return false;
}

/* An executor folds a BatchNorm into the Convolution it alone reads; the symbol keeps both. */
START_TEST(test_executor_folds_batch_norm) {
    const char *names[6] = {"data", "weight", "gamma", "beta", "mean", "var"};
    DeftSymbolHandle v[6];
    for (int k = 0; k < 6; k++) v[k] = var(names[k]);
    DeftSymbolHandle conv = apply("Convolution", "conv", 2, v,
                                  P("kernel", "(3,3)", "num_filter", "4", "no_bias", "true"));
    DeftSymbolHandle bn_in[5] = {conv, v[2], v[3], v[4], v[5]};
    DeftSymbolHandle bn = apply("BatchNorm", "bn", 5, bn_in, NO_PARAMS);
    deft_symbol_t *sym;
    ck_assert_ok(api_symbol_get(bn, "bn", &sym));
    deft_cached_op_t *op;
    ck_assert_ok(deft_cached_op_new(sym, true, &op));
    ck_assert(runs_operator(op, "_conv_bn"));
    ck_assert(!runs_operator(op, "BatchNorm"));
    ck_assert_ptr_eq(deft_cached_op_source(op)->outputs[0].node, sym->outputs[0].node);
    deft_cached_op_release(op);
    ck_assert_ok(DeftSymbolFree(bn));
    ck_assert_ok(DeftSymbolFree(conv));
    for (int k = 0; k < 6; k++) ck_assert_ok(DeftSymbolFree(v[k]));
}
END_TEST

static Suite *executor_suite(void) {
    Suite *suite = suite_create("executor");
    TCase *tc = tcase_create("executor");
    tcase_add_test(tc, test_mlp_matches_imperative_with_and_without_planning);
    tcase_add_test(tc, test_in_place_respects_later_readers);
    tcase_add_test(tc, test_new_shapes_new_plan_and_errors);
    tcase_add_test(tc, test_plan_takes_a_larger_free_block_when_that_is_smaller);
    tcase_add_test(tc, test_plan_frees_outputs_nobody_reads);
    tcase_add_test(tc, test_mlp_training_graph_plan);
    tcase_add_test(tc, test_forward_backward_mode);
    tcase_add_test(tc, test_plan_memory_pass);
    tcase_add_test(tc, test_kernels_know_which_outputs_are_read);
    tcase_add_test(tc, test_executor_plan_cache_is_bounded_and_released);
    tcase_add_test(tc, test_plan_figures_follow_the_last_plan_and_outlive_it);
    tcase_add_test(tc, test_queued_runs_count_their_bytes);
    tcase_add_test(tc, test_making_an_executor_names_no_node);
    tcase_add_test(tc, test_executor_errors_name_unnamed_nodes);
    tcase_add_test(tc, test_executor_takes_the_symbols_types);
    tcase_add_test(tc, test_executor_checks_each_placed_node);
    tcase_add_test(tc, test_executor_folds_batch_norm);
    suite_add_tcase(suite, tc);
    TCase *large = tcase_create("large graphs");
    tcase_set_timeout(large, 300);
    tcase_add_test(large, test_executor_takes_300_arguments);
    tcase_add_test(large, test_executor_takes_100000_arguments);
    tcase_add_test(large, test_executor_returns_300_outputs);
    suite_add_tcase(suite, large);
    return suite;
}

int main(void) {
    /* A small bound on the arenas an executor keeps, which the cache test checks. */
    setenv("DEFT_PLAN_CACHE_BYTES", "4194304", 1);
    return run_suite(executor_suite());
}
