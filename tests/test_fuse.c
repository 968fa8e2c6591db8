#define _POSIX_C_SOURCE 200809L
/* Fusion: which nodes fuse, identical results, gradients through fused nodes. */
#include "symbol_helpers.h"

/* How many nodes of `sym` use operator `op`. */
static int count_op(DeftSymbolHandle sym, const char *op) {
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"op\":\t\"%s\"", op); /* cJSON_Print layout */
    return count_text(json, quoted);
}

static DeftSymbolHandle fused(DeftSymbolHandle sym) {
    DeftSymbolHandle out;
    ck_assert_msg(DeftSymbolApplyPasses(sym, "CSE,Fuse", &out) == 0, "%s", DeftGetLastError());
    return out;
}

/* Run `sym` on `in` (by argument order) and return output `index`. */
static DeftNDArrayHandle run(DeftSymbolHandle sym, int nin, DeftNDArrayHandle *in, int index) {
    DeftCachedOpHandle op;
    DeftNDArrayHandle out[4] = {NULL};
    int nout = 4;
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &op));
    ck_assert_msg(DeftCachedOpInvoke(op, nin, in, &nout, out) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftCachedOpFree(op));
    for (int o = 0; o < nout; o++)
        if (o != index) ck_assert_ok(DeftNDArrayFree(out[o]));
    return out[index];
}

static void assert_identical(DeftNDArrayHandle a, DeftNDArrayHandle b, double tol) {
    int64_t na, nb;
    double *va = read_all(a, &na), *vb = read_all(b, &nb);
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++)
        ck_assert_msg(close_enough(va[i], vb[i], tol), "element %lld: %.17g vs %.17g", (long long)i,
                      va[i], vb[i]);
    free(va), free(vb);
}

/* (x + 5) * (x + 5) * 0.5 - x, with x + 5 written twice (CSE makes it one value read twice). */
static DeftSymbolHandle benchmark_expr(DeftSymbolHandle x) {
    DeftSymbolHandle a = apply("_plus_scalar", NULL, 1, &x, P("scalar", "5"));
    DeftSymbolHandle a2 = apply("_plus_scalar", NULL, 1, &x, P("scalar", "5"));
    DeftSymbolHandle b = apply("elemwise_mul", NULL, 2, (DeftSymbolHandle[]){a, a2}, NO_PARAMS);
    DeftSymbolHandle c = apply("_mul_scalar", NULL, 1, &b, P("scalar", "0.5"));
    DeftSymbolHandle d = apply("elemwise_sub", NULL, 2, (DeftSymbolHandle[]){c, x}, NO_PARAMS);
    DeftSymbolHandle tmp[] = {a, a2, b, c};
    for (int i = 0; i < 4; i++) ck_assert_ok(DeftSymbolFree(tmp[i]));
    return d;
}

START_TEST(test_chain_becomes_one_node_with_identical_results) {
    DeftSymbolHandle x = var("x"), y = benchmark_expr(x), f = fused(y);
    ck_assert_int_eq(count_op(f, "_fused_elemwise"), 1);
    ck_assert_int_eq(count_op(f, "elemwise_mul"), 0);
    ck_assert_int_eq(count_op(f, "_plus_scalar"), 0);
    /* sizes below one tile, across tiles with a ragged end, and over many parallel chunks */
    const int64_t sizes[] = {1, 4095, 4096 * 3 + 17, 300001};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            ck_assert_ok(DeftRandomSeed(3));
            char shape[32];
            snprintf(shape, sizeof shape, "(%lld,)", (long long)sizes[s]);
            DeftNDArrayHandle in = call1(
                "_random_uniform", 0, NULL,
                P("shape", shape, "low", "-9", "high", "9", "dtype", d ? "float64" : "float32"));
            DeftNDArrayHandle want = run(y, 1, &in, 0), got = run(f, 1, &in, 0);
            assert_identical(got, want, 0);
            free_all(3, (DeftNDArrayHandle[]){in, want, got});
        }
    DeftSymbolHandle syms[] = {x, y, f};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* A value that is a graph output, or is read outside the chain, ends a group. */
START_TEST(test_outputs_and_outside_readers_stay_unfused) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle a = apply("exp", NULL, 1, &x, NO_PARAMS);
    DeftSymbolHandle b = apply("negative", NULL, 1, &a, NO_PARAMS);
    DeftSymbolHandle c = apply("sigmoid", NULL, 1, &b, NO_PARAMS);
    DeftSymbolHandle t = apply("tanh", NULL, 1, &x, NO_PARAMS);
    DeftSymbolHandle s = apply("sum", NULL, 1, &t, NO_PARAMS); /* tanh is read by a reduction */
    DeftSymbolHandle u = apply("broadcast_add", NULL, 2, (DeftSymbolHandle[]){t, s}, NO_PARAMS);
    DeftSymbolHandle v = apply("square", NULL, 1, &u, NO_PARAMS);
    DeftSymbolHandle g;
    ck_assert_ok(DeftSymbolCreateGroup(3, (DeftSymbolHandle[]){a, c, v}, &g));
    DeftSymbolHandle f = fused(g);
    /* exp is an output; negative+sigmoid fuse; broadcast_add+square fuse; tanh feeds sum */
    ck_assert_int_eq(count_op(f, "_fused_elemwise"), 2);
    ck_assert_int_eq(count_op(f, "exp"), 1);
    ck_assert_int_eq(count_op(f, "tanh"), 1);
    ck_assert_int_eq(count_op(f, "sigmoid"), 0);
    ck_assert_ok(DeftRandomSeed(5));
    DeftNDArrayHandle in = call1("_random_normal", 0, NULL, P("shape", "(7,9)"));
    for (int o = 0; o < 3; o++) {
        DeftNDArrayHandle want = run(g, 1, &in, o), got = run(f, 1, &in, o);
        assert_identical(got, want, 0);
        free_all(2, (DeftNDArrayHandle[]){want, got});
    }
    ck_assert_ok(DeftNDArrayFree(in));
    DeftSymbolHandle syms[] = {x, a, b, c, t, s, u, v, g, f};
    for (int i = 0; i < 10; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* Broadcasting inside the chain (3x1 against 1x4) takes the whole-array path. */
START_TEST(test_broadcasting_chain) {
    DeftSymbolHandle x = var("x"), z = var("z");
    DeftSymbolHandle d = apply("broadcast_sub", NULL, 2, (DeftSymbolHandle[]){x, z}, NO_PARAMS);
    DeftSymbolHandle r = apply("relu", NULL, 1, &d, NO_PARAMS);
    DeftSymbolHandle m = apply("broadcast_mul", NULL, 2, (DeftSymbolHandle[]){r, z}, NO_PARAMS);
    DeftSymbolHandle f = fused(m);
    ck_assert_int_eq(count_op(f, "_fused_elemwise"), 1);
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT32, 2, SHAPE(3, 1), VALUES(1, 2, 3)),
                               make(DEFT_FLOAT32, 2, SHAPE(1, 4), VALUES(0.5, 1.5, 2.5, 3.5))};
    DeftNDArrayHandle got = run(f, 2, in, 0);
    assert_shape(got, 2, SHAPE(3, 4));
    assert_values(got, 12, VALUES(0.25, 0, 0, 0, 0.75, 0.75, 0, 0, 1.25, 2.25, 1.25, 0), 0);
    free_all(3, (DeftNDArrayHandle[]){in[0], in[1], got});
    DeftSymbolHandle syms[] = {x, z, d, r, m, f};
    for (int i = 0; i < 6; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* Gradients of a fused graph equal those of the graph before fusion. */
START_TEST(test_gradient_through_fused_graph) {
    DeftSymbolHandle x = var("x"), y = benchmark_expr(x);
    DeftSymbolHandle t = apply("tanh", NULL, 1, &y, NO_PARAMS), f = fused(t);
    ck_assert_int_eq(count_op(f, "_fused_elemwise"), 1);
    DeftSymbolHandle gu, gf;
    const char *wrt[] = {"x"};
    ck_assert_ok(DeftSymbolGradient(t, 1, wrt, &gu));
    ck_assert_msg(DeftSymbolGradient(f, 1, wrt, &gf) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftRandomSeed(9));
    DeftNDArrayHandle in[2];
    in[0] = call1("_random_normal", 0, NULL, P("shape", "(5,6)", "dtype", "float64"));
    in[1] = call1("_random_normal", 0, NULL, P("shape", "(5,6)", "dtype", "float64"));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(gf, &nargs, &names));
    ck_assert_int_eq(nargs, 2); /* x and the head gradient, in that order */
    ck_assert_str_eq(names[0], "x");
    DeftNDArrayHandle want = run(gu, 2, in, 0), got = run(gf, 2, in, 0);
    assert_identical(got, want, 1e-12);
    /* fusing the gradient graph too changes nothing */
    DeftSymbolHandle gff = fused(gf);
    DeftNDArrayHandle again = run(gff, 2, in, 0);
    assert_identical(again, want, 1e-12);
    free_all(5, (DeftNDArrayHandle[]){in[0], in[1], want, got, again});
    DeftSymbolHandle syms[] = {x, y, t, f, gu, gf, gff};
    for (int i = 0; i < 7; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* relu's gradient node, _backward_relu, joins the elementwise chain of the
 * gradient graph (here with _mul_scalar's), and the fused graph gives the same bits. */
START_TEST(test_relu_gradient_fuses) {
    DeftSymbolHandle x = var("x"), s = apply("_mul_scalar", NULL, 1, &x, P("scalar", "3"));
    DeftSymbolHandle r = apply("relu", NULL, 1, &s, NO_PARAMS), g;
    ck_assert_ok(DeftSymbolGradient(r, 1, (const char *const[]){"x"}, &g));
    DeftSymbolHandle f = fused(g);
    ck_assert_int_eq(count_op(g, "_backward_relu"), 1);
    ck_assert_int_eq(count_op(f, "_backward_relu"), 0);
    ck_assert_int_ge(count_op(f, "_fused_elemwise"), 1);
    ck_assert_ok(DeftRandomSeed(5));
    DeftNDArrayHandle in[2];
    for (int i = 0; i < 2; i++)
        in[i] = call1("_random_normal", 0, NULL, P("shape", "(4099,)", "dtype", "float32"));
    DeftNDArrayHandle want = run(g, 2, in, 1), got = run(f, 2, in, 1);
    assert_identical(got, want, 0);
    free_all(4, (DeftNDArrayHandle[]){in[0], in[1], want, got});
    DeftSymbolHandle syms[] = {x, s, r, g, f};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* Convolution -> relu -> max pooling and its gradient: Fuse makes the
 * convolution and its relu one _conv_relu node, the pooling's gradient and
 * relu's after it one _backward_Pooling_relu, and the outputs (the pooling
 * and the gradients of data, weight and bias) keep their bits: in float32
 * on the small-channel kernels (LeNet's second layer), float64 on the
 * general ones; a 2x2 and a 3x3 stride-2 pooling. */
static DeftSymbolHandle conv_relu_pool(const char *kernel, const char *stride) {
    DeftSymbolHandle in[3] = {var("x"), var("w"), var("b")};
    DeftSymbolHandle c =
        apply("Convolution", NULL, 3, in, P("kernel", "(5,5)", "num_filter", "16"));
    DeftSymbolHandle r = apply("Activation", NULL, 1, &c, P("act_type", "relu"));
    DeftSymbolHandle p =
        apply("Pooling", NULL, 1, &r, P("kernel", kernel, "stride", stride, "pool_type", "max"));
    DeftSymbolHandle g;
    ck_assert_ok(DeftSymbolGradient(p, 3, (const char *const[]){"x", "w", "b"}, &g));
    DeftSymbolHandle syms[] = {in[0], in[1], in[2], c, r, p};
    for (int i = 0; i < 6; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
    return g;
}

START_TEST(test_conv_relu_pool_layers_fuse) {
    const char *const pools[][2] = {{"(2,2)", "(2,2)"}, {"(3,3)", "(2,2)"}};
    for (int k = 0; k < 2; k++) {
        DeftSymbolHandle g = conv_relu_pool(pools[k][0], pools[k][1]), f = fused(g);
        ck_assert_int_eq(count_op(f, "_conv_relu"), 1);
        ck_assert_int_eq(count_op(f, "_backward_Pooling_relu"), 1);
        ck_assert_int_eq(count_op(f, "Convolution") + count_op(f, "_backward_Pooling"), 0);
        ck_assert_int_eq(count_op(f, "_backward_relu") + count_op(f, "Activation"), 0);
        for (int d = 0; d < 2; d++) {
            const char *dt = d ? "float64" : "float32";
            ck_assert_ok(DeftRandomSeed(11));
            DeftNDArrayHandle in[4] = {
                call1("_random_normal", 0, NULL, P("shape", "(3,6,12,12)", "dtype", dt)),
                call1("_random_normal", 0, NULL, P("shape", "(16,6,5,5)", "dtype", dt)),
                call1("_random_normal", 0, NULL, P("shape", "(16,)", "dtype", dt)),
                call1("_random_normal", 0, NULL,
                      P("shape", k ? "(3,16,3,3)" : "(3,16,4,4)", "dtype", dt))};
            for (int o = 0; o < 4; o++) {
                DeftNDArrayHandle want = run(g, 4, in, o), got = run(f, 4, in, o);
                assert_identical(got, want, 0);
                free_all(2, (DeftNDArrayHandle[]){want, got});
            }
            free_all(4, in);
        }
        ck_assert_ok(DeftSymbolFree(g));
        ck_assert_ok(DeftSymbolFree(f));
    }
}
END_TEST

/* A fused forward graph differentiates as the unfused one: _conv_relu's
 * gradient is relu's, then the convolution's. */
START_TEST(test_gradient_through_fused_conv_relu) {
    DeftSymbolHandle in[3] = {var("x"), var("w"), var("b")};
    DeftSymbolHandle c = apply("Convolution", NULL, 3, in, P("kernel", "(3,3)", "num_filter", "4"));
    DeftSymbolHandle r = apply("Activation", NULL, 1, &c, P("act_type", "relu"));
    DeftSymbolHandle f = fused(r), gu, gf;
    ck_assert_int_eq(count_op(f, "_conv_relu"), 1);
    const char *const wrt[] = {"x", "w", "b"};
    ck_assert_ok(DeftSymbolGradient(r, 3, wrt, &gu));
    ck_assert_msg(DeftSymbolGradient(f, 3, wrt, &gf) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftRandomSeed(13));
    DeftNDArrayHandle x[4] = {call1("_random_normal", 0, NULL, P("shape", "(2,3,7,7)")),
                              call1("_random_normal", 0, NULL, P("shape", "(4,3,3,3)")),
                              call1("_random_normal", 0, NULL, P("shape", "(4,)")),
                              call1("_random_normal", 0, NULL, P("shape", "(2,4,5,5)"))};
    for (int o = 0; o < 4; o++) {
        DeftNDArrayHandle want = run(gu, 4, x, o), got = run(gf, 4, x, o);
        assert_identical(got, want, 0);
        free_all(2, (DeftNDArrayHandle[]){want, got});
    }
    free_all(4, x);
    DeftSymbolHandle syms[] = {in[0], in[1], in[2], c, r, f, gu, gf};
    for (int i = 0; i < 8; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* A convolution whose output is read by more than its relu, or a pooling
 * gradient that relu's gradient takes at another value, stays as it is. */
START_TEST(test_layers_with_other_readers_stay_unfused) {
    DeftSymbolHandle in[3] = {var("x"), var("w"), var("b")};
    DeftSymbolHandle c = apply("Convolution", NULL, 3, in, P("kernel", "(3,3)", "num_filter", "4"));
    DeftSymbolHandle r = apply("Activation", NULL, 1, &c, P("act_type", "relu"));
    DeftSymbolHandle both, f;
    ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){c, r}, &both));
    f = fused(both);
    ck_assert_int_eq(count_op(f, "_conv_relu"), 0);
    ck_assert_int_eq(count_op(f, "Convolution"), 1);
    DeftSymbolHandle y = var("y"), d = var("d"), p = var("p");
    DeftSymbolHandle u = apply("_backward_Pooling", NULL, 3, (DeftSymbolHandle[]){d, y, p},
                               P("kernel", "(2,2)", "stride", "(2,2)", "pool_type", "max"));
    DeftSymbolHandle z = var("z");
    DeftSymbolHandle rg = apply("_backward_relu", NULL, 2, (DeftSymbolHandle[]){u, z}, NO_PARAMS);
    DeftSymbolHandle f2 = fused(rg);
    ck_assert_int_eq(count_op(f2, "_backward_Pooling_relu"), 0);
    ck_assert_int_eq(count_op(f2, "_backward_Pooling"), 1);
    DeftSymbolHandle syms[] = {in[0], in[1], in[2], c, r, both, f, y, d, p, u, z, rg, f2};
    for (int i = 0; i < 14; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

static void assert_program_fails(const char *program, int nin, int kind, const char *text) {
    DeftSymbolHandle vars[2] = {var("a"), var("b")};
    DeftSymbolHandle s = apply("_fused_elemwise", NULL, nin, vars, P("program", program));
    int complete;
    const int ndims[] = {1, 1};
    const int64_t dims[] = {4, 4};
    ck_assert_fails(
        DeftSymbolInferShape(s, nin, (const char *[]){"a", "b"}, ndims, dims, NULL, &complete),
        kind, text);
    DeftSymbolHandle syms[] = {vars[0], vars[1], s};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}

START_TEST(test_bad_programs_and_imperative_use) {
    assert_program_fails("exp i3", 1, DEFT_ERROR_VALUE, "argument 'i3'");
    assert_program_fails("exp t0", 1, DEFT_ERROR_VALUE, "argument 't0'");
    assert_program_fails("nosuch i0", 1, DEFT_ERROR_VALUE,
                         "'nosuch' is not an elementwise operator");
    assert_program_fails("sum i0", 1, DEFT_ERROR_VALUE, "'sum' is not an elementwise operator");
    assert_program_fails("exp i0 i1", 2, DEFT_ERROR_VALUE, "exp takes 1 argument(s), got 2");
    assert_program_fails("elemwise_add i0 i0 i1", 2, DEFT_ERROR_VALUE, "more than 2 arguments");
    assert_program_fails(" ; ", 1, DEFT_ERROR_VALUE, "step 0 is empty");
    assert_program_fails("", 1, DEFT_ERROR_VALUE, "no steps");
    assert_program_fails("_plus_scalar i0 scalar=x", 1, DEFT_ERROR_PARSE, "scalar");
    assert_program_fails("_plus_scalar i0 bogus=1", 1, DEFT_ERROR_VALUE, "bogus");
    DeftNDArrayHandle in = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_call_fails("_fused_elemwise", 1, &in, P("program", "exp i0"),
                         DEFT_ERROR_NOT_IMPLEMENTED, "only inside a graph executor");
    ck_assert_ok(DeftNDArrayFree(in));
}
END_TEST

/* A chain longer than one fused node holds splits into several. */
START_TEST(test_long_chain_splits) {
    DeftSymbolHandle x = var("x"), cur = x, made[40];
    for (int i = 0; i < 40; i++)
        cur = made[i] = apply("_plus_scalar", NULL, 1, &cur, P("scalar", "1"));
    DeftSymbolHandle f = fused(cur);
    ck_assert_int_eq(count_op(f, "_fused_elemwise"), 2); /* 32 steps, then 8 */
    ck_assert_int_eq(count_op(f, "_plus_scalar"), 0);
    DeftNDArrayHandle in = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(0, 1, 2));
    DeftNDArrayHandle got = run(f, 1, &in, 0);
    assert_values(got, 3, VALUES(40, 41, 42), 0);
    free_all(2, (DeftNDArrayHandle[]){in, got});
    for (int i = 0; i < 40; i++) ck_assert_ok(DeftSymbolFree(made[i]));
    ck_assert_ok(DeftSymbolFree(x));
    ck_assert_ok(DeftSymbolFree(f));
}
END_TEST

/* More fused programs than a thread caches, used in turn: each still runs its own. */
START_TEST(test_many_programs_in_turn) {
    enum { N = 20 };
    DeftSymbolHandle x = var("x"), graphs[N], parts[2 * N];
    for (int i = 0; i < N; i++) {
        char s[16];
        snprintf(s, sizeof s, "%d", i);
        parts[2 * i] = apply("_plus_scalar", NULL, 1, &x, P("scalar", s));
        parts[2 * i + 1] = apply("square", NULL, 1, &parts[2 * i], NO_PARAMS);
        graphs[i] = fused(parts[2 * i + 1]);
    }
    DeftNDArrayHandle in = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, -1));
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            DeftNDArrayHandle got = run(graphs[i], 1, &in, 0);
            assert_values(got, 2, VALUES((1.0 + i) * (1.0 + i), (i - 1.0) * (i - 1.0)), 0);
            ck_assert_ok(DeftNDArrayFree(got));
        }
    ck_assert_ok(DeftNDArrayFree(in));
    for (int i = 0; i < N; i++) ck_assert_ok(DeftSymbolFree(graphs[i]));
    for (int i = 0; i < 2 * N; i++) ck_assert_ok(DeftSymbolFree(parts[i]));
    ck_assert_ok(DeftSymbolFree(x));
}
END_TEST

/* ---- the softmax cross-entropy loss's gradient ---- */

/* The gradient, with respect to x, of -pick(log_softmax(x), label) along
 * `axis` (nn.SoftmaxCrossEntropyLoss's loss); its arguments are x, label
 * and the head gradient. */
static DeftSymbolHandle loss_gradient(const char *axis, const char *mode) {
    DeftSymbolHandle x = var("x"), label = var("label");
    DeftSymbolHandle y = apply("log_softmax", NULL, 1, &x, P("axis", axis));
    DeftSymbolHandle p =
        apply("pick", NULL, 2, (DeftSymbolHandle[]){y, label}, P("axis", axis, "mode", mode));
    DeftSymbolHandle l = apply("negative", NULL, 1, &p, NO_PARAMS), g;
    ck_assert_ok(DeftSymbolGradient(l, 1, (const char *const[]){"x"}, &g));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(g, &nargs, &names));
    ck_assert_int_eq(nargs, 3);
    ck_assert_str_eq(names[0], "x");
    ck_assert_str_eq(names[1], "label");
    DeftSymbolHandle syms[] = {x, label, y, p, l};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
    return g;
}

/* Labels for `n` lines of `classes`, some outside [0, classes) (clip and
 * wrap both take them). */
static DeftNDArrayHandle loss_labels(int dtype, int ndim, const int64_t *shape, int64_t classes) {
    int64_t n = count_of(ndim, shape);
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 7) % (classes + 5) - 2);
    DeftNDArrayHandle h = make(dtype, ndim, shape, v);
    free(v);
    return h;
}

/* Normal draws of that shape in that float dtype (float16 through float32). */
static DeftNDArrayHandle random_as(const char *shape, int dtype) {
    DeftNDArrayHandle r = call1("_random_normal", 0, NULL, P("shape", shape, "dtype", "float32"));
    const char *dt = dtype == DEFT_FLOAT64 ? "float64" : dtype == DEFT_FLOAT16 ? "float16" : NULL;
    if (!dt) return r;
    DeftNDArrayHandle c = call1("Cast", 1, &r, P("dtype", dt));
    ck_assert_ok(DeftNDArrayFree(r));
    return c;
}

/* The six nodes of the loss's gradient become one _backward_pick_log_softmax
 * node, which gives the unfused graph's values: the same bits along the last
 * axis in float32 and in float64, within rounding elsewhere (float16 too); labels float or
 * int, clipped or wrapped, the head gradient different per line. */
START_TEST(test_loss_gradient_fuses) {
    static const struct {
        const char *axis, *mode, *shape, *line_shape;
        int dtype, label_dtype, ndim;
        int64_t lines[2], classes;
        double tol;
    } cases[] = {
        {"-1", "clip", "(32,10)", "(32,)", DEFT_FLOAT32, DEFT_INT64, 1, {32}, 10, 0},
        {"-1", "wrap", "(5,7)", "(5,)", DEFT_FLOAT64, DEFT_FLOAT32, 1, {5}, 7, 0},
        {"1", "wrap", "(2,5,3)", "(2,3)", DEFT_FLOAT32, DEFT_INT32, 2, {2, 3}, 5, 1e-6},
        {"0", "clip", "(6,4)", "(4,)", DEFT_FLOAT64, DEFT_FLOAT64, 1, {4}, 6, 0},
        /* float16 in double, rounded once: within a rounding of the nodes' */
        {"-1", "wrap", "(4,6)", "(4,)", DEFT_FLOAT16, DEFT_INT32, 1, {4}, 6, 2e-3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DeftSymbolHandle g = loss_gradient(cases[c].axis, cases[c].mode), f = fused(g);
        ck_assert_int_eq(count_op(g, "_backward_pick"), 1);
        ck_assert_int_eq(count_op(f, "_backward_pick_log_softmax"), 1);
        ck_assert_int_eq(count_op(f, "_backward_pick") + count_op(f, "broadcast_mul"), 0);
        ck_assert_ok(DeftRandomSeed(17));
        DeftNDArrayHandle in[3] = {
            random_as(cases[c].shape, cases[c].dtype),
            loss_labels(cases[c].label_dtype, cases[c].ndim, cases[c].lines, cases[c].classes),
            random_as(cases[c].line_shape, cases[c].dtype)};
        int nout;
        ck_assert_ok(DeftSymbolGetNumOutputs(g, &nout));
        for (int o = 0; o < nout; o++) {
            DeftNDArrayHandle want = run(g, 3, in, o), got = run(f, 3, in, o);
            ck_assert_int_eq(dtype_of(got), cases[c].dtype);
            assert_identical(got, want, cases[c].tol);
            free_all(2, (DeftNDArrayHandle[]){want, got});
        }
        free_all(3, in);
        ck_assert_ok(DeftSymbolFree(g));
        ck_assert_ok(DeftSymbolFree(f));
    }
}
END_TEST

/* The gradient's nodes written out: a = _backward_pick(negative(h), label,
 * y), then a - exp(y) sum(a), with one thing changed per `variant`: 0
 * nothing, 1 a also an output, 2 the sum along another axis, 3 the exp of
 * another value, 4 no negative, 5 the sum without keepdims (broadcast_mul
 * would then refuse: only the pass's matching is looked at). */
static DeftSymbolHandle loss_gradient_nodes(int variant) {
    DeftSymbolHandle h = var("h"), label = var("label"), y = var("y"), z = var("z");
    DeftSymbolHandle n = variant == 4 ? h : apply("negative", NULL, 1, &h, NO_PARAMS);
    DeftSymbolHandle a =
        apply("_backward_pick", NULL, 3, (DeftSymbolHandle[]){n, label, y}, P("axis", "-1"));
    DeftSymbolHandle s =
        apply("sum", NULL, 1, &a,
              P("axis", variant == 2 ? "0" : "-1", "keepdims", variant == 5 ? "false" : "true"));
    DeftSymbolHandle e = apply("exp", NULL, 1, variant == 3 ? &z : &y, NO_PARAMS);
    DeftSymbolHandle m = apply("broadcast_mul", NULL, 2, (DeftSymbolHandle[]){e, s}, NO_PARAMS);
    DeftSymbolHandle d = apply("elemwise_sub", NULL, 2, (DeftSymbolHandle[]){a, m}, NO_PARAMS);
    DeftSymbolHandle out = d;
    if (variant == 1) ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){d, a}, &out));
    DeftSymbolHandle syms[] = {h, label, y, z, a, s, e, m};
    for (int i = 0; i < 8; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
    if (variant != 4) ck_assert_ok(DeftSymbolFree(n));
    if (out != d) ck_assert_ok(DeftSymbolFree(d));
    return out;
}

/* The pass fuses only where the identity holds and nothing else reads the
 * nodes it removes. */
START_TEST(test_loss_gradient_fuses_only_its_pattern) {
    for (int variant = 0; variant < 6; variant++) {
        DeftSymbolHandle g = loss_gradient_nodes(variant), f = fused(g);
        ck_assert_msg(count_op(f, "_backward_pick_log_softmax") == (variant == 0), "variant %d",
                      variant);
        ck_assert_int_eq(count_op(f, "_backward_pick"), variant != 0);
        ck_assert_ok(DeftSymbolFree(g));
        ck_assert_ok(DeftSymbolFree(f));
    }
}
END_TEST

/* A label that is not a whole number fails the fused node as it fails
 * pick's gradient; bad inputs to the operator itself are named. */
START_TEST(test_loss_gradient_errors) {
    DeftSymbolHandle g = loss_gradient("-1", "clip"), f = fused(g);
    ck_assert_int_eq(count_op(f, "_backward_pick_log_softmax"), 1);
    DeftNDArrayHandle in[3] = {make(DEFT_FLOAT32, 2, (int64_t[]){2, 3}, NULL),
                               make(DEFT_FLOAT32, 1, (int64_t[]){2}, (double[]){1, 1.5}),
                               make(DEFT_FLOAT32, 1, (int64_t[]){2}, (double[]){1, 1})};
    DeftCachedOpHandle op;
    DeftNDArrayHandle out[4] = {NULL};
    int nout = 4;
    ck_assert_ok(DeftCachedOpCreate(f, 0, &op));
    /* reported by the call, or by the first read when the graph ran asynchronously */
    const char *bad_label = "input 1 (index) has 1.5 at position 1";
    if (DeftCachedOpInvoke(op, 3, in, &nout, out) == 0) {
        ck_assert_fails(DeftNDArrayWaitToRead(out[0]), DEFT_ERROR_VALUE, bad_label);
        free_all(nout, out);
    } else {
        ck_assert_fails(-1, DEFT_ERROR_VALUE, bad_label);
    }
    ck_assert_ok(DeftCachedOpFree(op));
    DeftNDArrayHandle yi = make(DEFT_INT32, 2, (int64_t[]){2, 3}, NULL);
    DeftNDArrayHandle bad[3] = {in[2], in[1], yi};
    ck_assert_call_fails("_backward_pick_log_softmax", 3, bad, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator '_backward_pick_log_softmax': input 2");
    DeftNDArrayHandle y[3] = {in[2], in[1], in[0]};
    ck_assert_run_fails("_backward_pick_log_softmax", 3, y, NO_PARAMS, DEFT_ERROR_VALUE,
                        "operator '_backward_pick_log_softmax': input 1 (index) has 1.5");
    DeftNDArrayHandle wide[3] = {in[0], in[1], in[0]};
    ck_assert_call_fails("_backward_pick_log_softmax", 3, wide, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 0 (grad) is (2,3) float32, expected pick's (2,) float32");
    free_all(4, (DeftNDArrayHandle[]){in[0], in[1], in[2], yi});
    ck_assert_ok(DeftSymbolFree(g));
    ck_assert_ok(DeftSymbolFree(f));
}
END_TEST

static Suite *fuse_suite(void) {
    Suite *s = suite_create("fuse");
    TCase *tc = tcase_create("fuse");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_chain_becomes_one_node_with_identical_results);
    tcase_add_test(tc, test_outputs_and_outside_readers_stay_unfused);
    tcase_add_test(tc, test_broadcasting_chain);
    tcase_add_test(tc, test_gradient_through_fused_graph);
    tcase_add_test(tc, test_relu_gradient_fuses);
    tcase_add_test(tc, test_conv_relu_pool_layers_fuse);
    tcase_add_test(tc, test_layers_with_other_readers_stay_unfused);
    tcase_add_test(tc, test_gradient_through_fused_conv_relu);
    tcase_add_test(tc, test_bad_programs_and_imperative_use);
    tcase_add_test(tc, test_long_chain_splits);
    tcase_add_test(tc, test_many_programs_in_turn);
    tcase_add_test(tc, test_loss_gradient_fuses);
    tcase_add_test(tc, test_loss_gradient_fuses_only_its_pattern);
    tcase_add_test(tc, test_loss_gradient_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return run_suite(fuse_suite());
}
