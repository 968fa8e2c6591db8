/*
 * Loss heads (core/op/loss_heads.c): forward values, and gradients through
 * autograd against the closed forms MXNet 1.9.1 uses (computed here with
 * plain loops), which are not the derivatives of the forward outputs: a
 * head ignores the gradient arriving at it unless out_grad says otherwise.
 */
#include "symbol_helpers.h"

static const int float_dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64};

/* Softmax of `rows` lines of n values spaced `inner` apart (line = (o, i)). */
static void ref_softmax(const double *x, double *y, int64_t outer, int64_t n, int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double max = -INFINITY, sum = 0;
            for (int64_t k = 0; k < n; k++) max = fmax(max, x[(o * n + k) * inner + i]);
            for (int64_t k = 0; k < n; k++) sum += exp(x[(o * n + k) * inner + i] - max);
            for (int64_t k = 0; k < n; k++)
                y[(o * n + k) * inner + i] = exp(x[(o * n + k) * inner + i] - max) / sum;
        }
}

static void fill(double *x, int64_t n, double seed) {
    for (int64_t i = 0; i < n; i++) x[i] = sin(seed + 1.7 * (double)i) * 2;
}

/* d in[0] of op(in...) by autograd, with head gradient `head` (NULL: ones). */
static DeftNDArrayHandle grad_of(const char *op, int nin, DeftNDArrayHandle *in,
                                 const char *const *params, DeftNDArrayHandle head,
                                 DeftNDArrayHandle *out) {
    int dtype, ndim, req = DEFT_GRAD_WRITE;
    int64_t shape[DEFT_MAX_NDIM];
    ck_assert_ok(DeftNDArrayGetDType(in[0], &dtype));
    ck_assert_ok(DeftNDArrayGetShape(in[0], shape, DEFT_MAX_NDIM, &ndim));
    DeftNDArrayHandle g = make(dtype, ndim, shape, NULL), dx;
    ck_assert_ok(DeftAutogradMarkVariables(1, in, &req, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1(op, nin, in, params);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    ck_assert_msg(DeftAutogradComputeGradient(1, &y, head ? &head : NULL, 1, in, 0, 0, &dx) == 0,
                  "%s: %s", op, DeftGetLastError());
    free_all(1, &g);
    if (out)
        *out = y;
    else
        free_all(1, &y);
    return dx;
}

/* ---- SoftmaxOutput ---- */

START_TEST(test_softmax_output_forward_views) {
    int dtype = float_dtypes[_i];
    double x[12], want[12];
    fill(x, 12, 0.3);
    DeftNDArrayHandle X = make(dtype, 3, SHAPE(2, 3, 2), x);
    DeftNDArrayHandle L2 = make(dtype, 2, SHAPE(2, 3), VALUES(0, 1, 2, 0, 1, 2));
    /* default: each row (sample) flattened, one softmax over its 6 values */
    DeftNDArrayHandle Y = call1("SoftmaxOutput", 2, (DeftNDArrayHandle[]){X, L2}, NO_PARAMS);
    ref_softmax(x, want, 2, 6, 1);
    assert_shape(Y, 3, SHAPE(2, 3, 2));
    assert_values(Y, 12, want, tol_for(dtype));
    DeftNDArrayHandle A = call1("Softmax", 2, (DeftNDArrayHandle[]){X, L2}, NO_PARAMS);
    assert_values(A, 12, want, tol_for(dtype));
    /* preserve_shape: along the last axis */
    DeftNDArrayHandle P =
        call1("SoftmaxOutput", 2, (DeftNDArrayHandle[]){X, L2}, P("preserve_shape", "true"));
    ref_softmax(x, want, 6, 2, 1);
    assert_values(P, 12, want, tol_for(dtype));
    /* multi_output: along axis 1, a label per (sample, position) */
    DeftNDArrayHandle L = make(dtype, 2, SHAPE(2, 2), VALUES(0, 1, 2, 0));
    DeftNDArrayHandle M =
        call1("SoftmaxOutput", 2, (DeftNDArrayHandle[]){X, L}, P("multi_output", "1"));
    ref_softmax(x, want, 2, 3, 2);
    assert_values(M, 12, want, tol_for(dtype));
    free_all(7, (DeftNDArrayHandle[]){X, L2, Y, A, P, L, M});
}
END_TEST

/* MXNet's closed form for class labels, one row per sample. */
static void ref_softmax_output_grad(const double *p, const double *label, double *g, int64_t rows,
                                    int64_t c, double scale, double alpha, bool use_ignore,
                                    double ignore) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < c; k++) {
            double onehot = k == (int64_t)label[r] ? 1 - alpha : alpha / (double)(c - 1);
            bool skip = use_ignore && label[r] == ignore;
            g[r * c + k] = skip ? 0 : (p[r * c + k] - onehot) * scale;
        }
}

typedef struct so_case {
    const char *const *params;
    double scale, alpha;
    bool use_ignore;
} so_case_t;

START_TEST(test_softmax_output_gradient_closed_forms) {
    double x[20], p[20], want[20], head[20];
    const double label[] = {0, 2, 1, 4, 2};
    fill(x, 20, 1.1);
    fill(head, 20, 2.9);
    ref_softmax(x, p, 5, 4, 1); /* label 4 is no class: nothing subtracted, as MXNet */
    const so_case_t cases[] = {
        {NO_PARAMS, 1, 0, false},
        {P("grad_scale", "0.5"), 0.5, 0, false},
        {P("normalization", "batch", "grad_scale", "2"), 2.0 / 5, 0, false},
        /* label 2 ignored: two rows zero; 'valid' counts the other three */
        {P("use_ignore", "true", "ignore_label", "2", "normalization", "valid"), 1.0 / 3, 0, true},
        /* 'valid' counts labels other than ignore_label even without use_ignore */
        {P("ignore_label", "2", "normalization", "valid"), 1.0 / 3, 0, false},
        {P("smooth_alpha", "0.3"), 1, 0.3, false},
        {P("smooth_alpha", "0.3", "use_ignore", "1", "ignore_label", "0"), 1, 0.3, true},
    };
    const double ignores[] = {-1, -1, -1, 2, 2, -1, 0};
    for (int dt = 0; dt < 2; dt++) {
        int dtype = float_dtypes[dt];
        DeftNDArrayHandle in[2] = {make(dtype, 2, SHAPE(5, 4), x), make(dtype, 1, SHAPE(5), label)};
        DeftNDArrayHandle H = make(dtype, 2, SHAPE(5, 4), head);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            ref_softmax_output_grad(p, label, want, 5, 4, cases[c].scale, cases[c].alpha,
                                    cases[c].use_ignore, ignores[c]);
            DeftNDArrayHandle g1 = grad_of("SoftmaxOutput", 2, in, cases[c].params, NULL, NULL);
            assert_values(g1, 20, want, tol_for(dtype));
            /* the head gradient is ignored */
            DeftNDArrayHandle g2 = grad_of("Softmax", 2, in, cases[c].params, H, NULL);
            assert_values(g2, 20, want, tol_for(dtype));
            free_all(2, (DeftNDArrayHandle[]){g1, g2});
        }
        free_all(3, (DeftNDArrayHandle[]){in[0], in[1], H});
    }
}
END_TEST

START_TEST(test_softmax_output_out_grad_and_probability_labels) {
    double x[6], p[6], head[6], prob[6], want[6];
    fill(x, 6, 0.2);
    fill(head, 6, 4.0);
    ref_softmax(x, p, 2, 3, 1);
    ref_softmax(head, prob, 2, 3, 1);
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT64, 2, SHAPE(2, 3), x),
                               make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 0))};
    DeftNDArrayHandle H = make(DEFT_FLOAT64, 2, SHAPE(2, 3), head);
    /* out_grad: the gradient times the head gradient */
    DeftNDArrayHandle g =
        grad_of("SoftmaxOutput", 2, in, P("out_grad", "true", "grad_scale", "3"), H, NULL);
    const double label[] = {1, 0};
    ref_softmax_output_grad(p, label, want, 2, 3, 3, 0, false, -1);
    for (int i = 0; i < 6; i++) want[i] *= head[i];
    assert_values(g, 6, want, 1e-13);
    /* a label of the data's shape holds probabilities: grad_scale (out - label), never normalised
     */
    DeftNDArrayHandle Q = make(DEFT_FLOAT64, 2, SHAPE(2, 3), prob);
    DeftNDArrayHandle pin[2] = {in[0], Q};
    DeftNDArrayHandle gq = grad_of(
        "SoftmaxOutput", 2, pin,
        P("grad_scale", "0.5", "normalization", "batch", "use_ignore", "1", "ignore_label", "0"),
        NULL, NULL);
    for (int i = 0; i < 6; i++) want[i] = (p[i] - prob[i]) * 0.5;
    assert_values(gq, 6, want, 1e-13);
    free_all(6, (DeftNDArrayHandle[]){in[0], in[1], H, g, Q, gq});
}
END_TEST

/* multi_output: data (2, 3, 2), labels per (sample, position). */
START_TEST(test_softmax_output_multi_output_gradient) {
    double x[12], p[12], want[12];
    const double label[] = {0, 2, 1, 1}; /* (sample, position) */
    fill(x, 12, 0.7);
    ref_softmax(x, p, 2, 3, 2);
    struct {
        const char *const *params;
        double scale;
        bool ignore_one;
    } cases[] = {
        {NO_PARAMS, 1.0 / 2, false}, /* 'null' still divides by the positions */
        {P("normalization", "batch", "grad_scale", "4"), 4.0 / 2 / 2, false},
        {P("normalization", "valid", "use_ignore", "1", "ignore_label", "1"), 1.0 / 2, true},
        {P("smooth_alpha", "0.5"), 1.0 / 2, false}, /* no smoothing with multi_output */
    };
    DeftNDArrayHandle X = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 2), x);
    DeftNDArrayHandle labels[3] = {make(DEFT_FLOAT64, 2, SHAPE(2, 2), label),
                                   make(DEFT_FLOAT64, 3, SHAPE(2, 1, 2), label),
                                   make(DEFT_FLOAT64, 1, SHAPE(4), label)};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int o = 0; o < 2; o++)
            for (int k = 0; k < 3; k++)
                for (int i = 0; i < 2; i++) {
                    double l = label[o * 2 + i];
                    double v = p[(o * 3 + k) * 2 + i] - (k == (int)l);
                    want[(o * 3 + k) * 2 + i] =
                        cases[c].ignore_one && l == 1 ? 0 : v * cases[c].scale;
                }
        const char *kv[16];
        int n = 0;
        for (; cases[c].params[n]; n++) kv[n] = cases[c].params[n];
        kv[n++] = "multi_output", kv[n++] = "true", kv[n] = NULL;
        for (int l = 0; l < 2; l++) { /* (2, 2) and (2, 1, 2) are both accepted */
            DeftNDArrayHandle g =
                grad_of("SoftmaxOutput", 2, (DeftNDArrayHandle[]){X, labels[l]}, kv, NULL, NULL);
            assert_values(g, 12, want, 1e-13);
            free_all(1, &g);
        }
    }
    ck_assert_call_fails("SoftmaxOutput", 2, ((DeftNDArrayHandle[]){X, labels[2]}),
                         P("multi_output", "true"), DEFT_ERROR_VALUE,
                         "input 1 (label) has shape (4,), expected (2,2) or the data's shape "
                         "without axis 1");
    free_all(4, (DeftNDArrayHandle[]){X, labels[0], labels[1], labels[2]});
}
END_TEST

/* In a graph, the gradient needs no head gradient: the gradient symbol's
 * arguments are the data and the label only. */
START_TEST(test_softmax_output_gradient_graph) {
    double x[6], p[6], want[6];
    const double label[] = {2, 0};
    fill(x, 6, 0.5);
    ref_softmax(x, p, 2, 3, 1);
    ref_softmax_output_grad(p, label, want, 2, 3, 0.5, 0, false, -1);
    DeftSymbolHandle in[2] = {var("data"), var("label")}, grad;
    DeftSymbolHandle y = apply("SoftmaxOutput", "y", 2, in, P("normalization", "batch"));
    ck_assert_ok(DeftSymbolGradient(y, 1, (const char *const[]){"data"}, &grad));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(grad, &nargs, &names));
    ck_assert_int_eq(nargs, 2);
    ck_assert_str_eq(names[0], "data");
    ck_assert_str_eq(names[1], "label");
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &exec));
    DeftNDArrayHandle args[2] = {make(DEFT_FLOAT64, 2, SHAPE(2, 3), x),
                                 make(DEFT_FLOAT64, 1, SHAPE(2), label)};
    DeftNDArrayHandle outs[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_msg(DeftCachedOpInvoke(exec, 2, args, &nout, outs) == 0, "%s", DeftGetLastError());
    ck_assert_int_eq(nout, 2); /* the output, then d data */
    assert_values(outs[0], 6, p, 1e-13);
    assert_values(outs[1], 6, want, 1e-13);
    free_all(4, (DeftNDArrayHandle[]){args[0], args[1], outs[0], outs[1]});
    ck_assert_ok(DeftCachedOpFree(exec));
    for (int i = 0; i < 2; i++) ck_assert_ok(DeftSymbolFree(in[i]));
    ck_assert_ok(DeftSymbolFree(y));
    ck_assert_ok(DeftSymbolFree(grad));
}
END_TEST

START_TEST(test_softmax_output_rejects_bad_inputs) {
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 2, SHAPE(4, 3), NULL);
    DeftNDArrayHandle L = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    DeftNDArrayHandle L3 = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    DeftNDArrayHandle Li = make(DEFT_INT32, 1, SHAPE(4), NULL);
    DeftNDArrayHandle Xi = make(DEFT_INT32, 2, SHAPE(4, 3), NULL);
    DeftNDArrayHandle V = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    DeftNDArrayHandle S = make(DEFT_FLOAT32, 0, SHAPE(1), NULL);
    ck_assert_call_fails("SoftmaxOutput", 2, ((DeftNDArrayHandle[]){X, L3}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "operator 'SoftmaxOutput': input 1 (label) has shape (3,), expected (4,) "
                         "(or (4,3), the data's shape, for probabilities)");
    ck_assert_call_fails("SoftmaxOutput", 2, ((DeftNDArrayHandle[]){X, Li}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "input 1 (label) has dtype int32, expected float32");
    ck_assert_call_fails("Softmax", 2, ((DeftNDArrayHandle[]){Xi, Li}), NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator 'SoftmaxOutput': input 0 has dtype int32");
    ck_assert_call_fails("SoftmaxOutput", 2, ((DeftNDArrayHandle[]){X, L}),
                         P("smooth_alpha", "1.5"), DEFT_ERROR_VALUE,
                         "smooth_alpha is 1.5, expected a value in [0, 1]");
    ck_assert_call_fails(
        "SoftmaxOutput", 2, ((DeftNDArrayHandle[]){X, L}), P("normalization", "mean"),
        DEFT_ERROR_PARSE,
        "parameter 'normalization' is 'mean', expected one of: null, batch, valid");
    ck_assert_call_fails("SoftmaxOutput", 2, ((DeftNDArrayHandle[]){V, L3}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "input 0 (data) has shape (4,): class labels need");
    ck_assert_call_fails("SoftmaxOutput", 2, ((DeftNDArrayHandle[]){S, S}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "input 0 (data) is a scalar");
    ck_assert_call_fails("SoftmaxOutput", 1, &X, NO_PARAMS, DEFT_ERROR_VALUE, "SoftmaxOutput");
    free_all(7, (DeftNDArrayHandle[]){X, L, L3, Li, Xi, V, S});
}
END_TEST

static void assert_inferred(DeftSymbolHandle s, int group, int index, int ndim,
                            const int64_t *shape) {
    int64_t dims[DEFT_MAX_NDIM];
    int got, dtype;
    ck_assert_ok(DeftSymbolGetInferredShape(s, group, index, dims, DEFT_MAX_NDIM, &got, &dtype));
    ck_assert_int_eq(got, ndim);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(dims[d], shape[d]);
    ck_assert_int_eq(dtype, DEFT_FLOAT64);
}

/* The label's shape and dtype follow from the data's in a graph, as in MXNet. */
static void check_label_inferred(const char *op, const char *const *params, int ndim,
                                 const int64_t *data, int lndim, const int64_t *label) {
    DeftSymbolHandle in[2] = {var("data"), var("label")};
    DeftSymbolHandle y = apply(op, "y", 2, in, params);
    int complete;
    ck_assert_ok(DeftSymbolInferShape(y, 1, (const char *const[]){"data"}, &ndim, data,
                                      (const int[]){DEFT_FLOAT64}, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(y, DEFT_ARGUMENTS, 1, lndim, label);
    assert_inferred(y, DEFT_OUTPUTS, 0, ndim, data);
    for (int i = 0; i < 2; i++) ck_assert_ok(DeftSymbolFree(in[i]));
    ck_assert_ok(DeftSymbolFree(y));
}

START_TEST(test_label_shapes_are_inferred) {
    check_label_inferred("SoftmaxOutput", NO_PARAMS, 2, SHAPE(4, 3), 1, SHAPE(4));
    check_label_inferred("SoftmaxOutput", NO_PARAMS, 3, SHAPE(4, 3, 5), 2, SHAPE(4, 3));
    check_label_inferred("SoftmaxOutput", P("multi_output", "true"), 4, SHAPE(2, 3, 4, 5), 2,
                         SHAPE(2, 20));
    check_label_inferred("LinearRegressionOutput", NO_PARAMS, 2, SHAPE(5, 1), 1, SHAPE(5));
    check_label_inferred("LogisticRegressionOutput", NO_PARAMS, 2, SHAPE(5, 2), 2, SHAPE(5, 2));
    check_label_inferred("MAERegressionOutput", NO_PARAMS, 1, SHAPE(5), 1, SHAPE(5));
}
END_TEST

START_TEST(test_zero_size_heads) {
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle L = make(DEFT_FLOAT32, 1, SHAPE(0), NULL);
    DeftNDArrayHandle in[2] = {X, L};
    const char *const *params[] = {P("normalization", "valid"), P("multi_output", "true"),
                                   P("normalization", "batch")};
    for (int c = 0; c < 3; c++) {
        DeftNDArrayHandle y, g = grad_of("SoftmaxOutput", 2, in, params[c], NULL, &y);
        assert_shape(y, 2, SHAPE(0, 3));
        assert_shape(g, 2, SHAPE(0, 3));
        free_all(2, (DeftNDArrayHandle[]){y, g});
    }
    DeftNDArrayHandle R = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    DeftNDArrayHandle R2 = make(DEFT_FLOAT32, 2, SHAPE(0, 2), NULL);
    const char *heads[] = {"LinearRegressionOutput", "LogisticRegressionOutput",
                           "MAERegressionOutput"};
    for (int h = 0; h < 3; h++) {
        DeftNDArrayHandle g =
            grad_of(heads[h], 2, (DeftNDArrayHandle[]){R, R2}, NO_PARAMS, NULL, NULL);
        assert_shape(g, 2, SHAPE(0, 2));
        free_all(1, &g);
    }
    DeftNDArrayHandle E = make(DEFT_FLOAT64, 1, SHAPE(0), NULL);
    const char *const *ml[] = {P("normalization", "valid"), P("normalization", "batch")};
    for (int c = 0; c < 2; c++) {
        DeftNDArrayHandle g = grad_of("MakeLoss", 1, &E, ml[c], NULL, NULL);
        assert_shape(g, 1, SHAPE(0));
        free_all(1, &g);
    }
    DeftNDArrayHandle s = call1("smooth_l1", 1, &E, NO_PARAMS);
    assert_shape(s, 1, SHAPE(0));
    free_all(6, (DeftNDArrayHandle[]){X, L, R, R2, E, s});
}
END_TEST

/* ---- regression outputs ---- */

START_TEST(test_regression_outputs_forward_and_gradient) {
    int dtype = float_dtypes[_i];
    double x[6], label[6], head[6], want[6];
    fill(x, 6, 0.1);
    fill(label, 6, 5.0);
    fill(head, 6, 3.0);
    label[4] = x[4]; /* MAE: sign(0) is -1 in MXNet */
    DeftNDArrayHandle X = make(dtype, 2, SHAPE(2, 3), x), Lb = make(dtype, 2, SHAPE(2, 3), label);
    DeftNDArrayHandle H = make(dtype, 2, SHAPE(2, 3), head);
    const char *names[] = {"LinearRegressionOutput", "LogisticRegressionOutput",
                           "MAERegressionOutput"};
    for (int h = 0; h < 3; h++) {
        DeftNDArrayHandle y,
            g = grad_of(names[h], 2, (DeftNDArrayHandle[]){X, Lb}, P("grad_scale", "1.5"), H, &y);
        double out[6];
        for (int i = 0; i < 6; i++) out[i] = h == 1 ? 1 / (1 + exp(-x[i])) : x[i];
        assert_values(y, 6, out, tol_for(dtype));
        for (int i = 0; i < 6; i++) { /* grad_scale over 3 outputs per sample */
            double d = out[i] - label[i];
            want[i] = (h == 2 ? (d > 0 ? 1 : -1) : d) * 1.5 / 3;
        }
        assert_values(g, 6, want, tol_for(dtype));
        free_all(2, (DeftNDArrayHandle[]){y, g});
    }
    free_all(3, (DeftNDArrayHandle[]){X, Lb, H});
}
END_TEST

START_TEST(test_regression_label_shapes) {
    double x[4] = {0.5, -1, 2, 0}, label[4] = {1, 1, 1, 1};
    DeftNDArrayHandle X = make(DEFT_FLOAT64, 2, SHAPE(4, 1), x);
    DeftNDArrayHandle L = make(DEFT_FLOAT64, 1, SHAPE(4), label); /* (n,) for (n, 1) */
    DeftNDArrayHandle g =
        grad_of("LinearRegressionOutput", 2, (DeftNDArrayHandle[]){X, L}, NO_PARAMS, NULL, NULL);
    assert_values(g, 4, VALUES(-0.5, -2, 1, -1), 1e-15);
    DeftNDArrayHandle Y = make(DEFT_FLOAT64, 2, SHAPE(2, 2), x);
    DeftNDArrayHandle Lf = make(DEFT_FLOAT32, 1, SHAPE(4), label);
    ck_assert_call_fails("LinearRegressionOutput", 2, ((DeftNDArrayHandle[]){Y, L}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "operator 'LinearRegressionOutput': input 1 (label) has shape (4,), "
                         "expected the first dimension and element count of the data's (2,2)");
    ck_assert_call_fails("MAERegressionOutput", 2, ((DeftNDArrayHandle[]){X, Lf}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "input 1 (label) has dtype float32, expected float64");
    ck_assert_call_fails("LogisticRegressionOutput", 2, ((DeftNDArrayHandle[]){X, L}),
                         P("grad_scale", "x"), DEFT_ERROR_PARSE, "grad_scale");
    free_all(5, (DeftNDArrayHandle[]){X, L, g, Y, Lf});
}
END_TEST

/* ---- MakeLoss, make_loss, stop_gradient ---- */

START_TEST(test_make_loss_gradients) {
    double x[24];
    fill(x, 24, 0.4);
    int above = 0;
    for (int i = 0; i < 24; i++) above += x[i] > 0.5;
    ck_assert_int_gt(above, 1);
    DeftNDArrayHandle X = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 4), x);
    DeftNDArrayHandle V = make(DEFT_FLOAT32, 1, SHAPE(5), x);
    DeftNDArrayHandle H = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 4), x);
    struct {
        DeftNDArrayHandle in;
        const char *const *params;
        double want;
        int n;
    } cases[] = {
        {X, NO_PARAMS, 1, 24},
        {X, P("grad_scale", "3"), 3, 24},
        {X, P("normalization", "batch", "grad_scale", "3"), 3.0 / 6, 24}, /* rows of (6, 4) */
        {V, P("normalization", "batch", "grad_scale", "3"), 3, 5},        /* a 1-D loss: 1 row */
        {X, P("normalization", "valid", "valid_thresh", "0.5"), 1.0 / above, 24},
        {X, P("normalization", "valid", "valid_thresh", "100"), 1, 24}, /* none: divide by 1 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DeftNDArrayHandle y, g = grad_of("MakeLoss", 1, &cases[c].in, cases[c].params,
                                         cases[c].in == X ? H : NULL, &y);
        double want[24];
        for (int i = 0; i < cases[c].n; i++) want[i] = cases[c].want;
        assert_values(g, cases[c].n, want, 1e-7);
        assert_values(y, cases[c].n, x, cases[c].in == V ? 1e-7 : 0);
        free_all(2, (DeftNDArrayHandle[]){y, g});
    }
    /* make_loss: ones, whatever the head gradient */
    DeftNDArrayHandle g = grad_of("make_loss", 1, &X, NO_PARAMS, H, NULL);
    double ones[24];
    for (int i = 0; i < 24; i++) ones[i] = 1;
    assert_values(g, 24, ones, 0);
    DeftNDArrayHandle I = make(DEFT_INT32, 1, SHAPE(2), NULL);
    ck_assert_call_fails("MakeLoss", 1, &I, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator 'MakeLoss': input 0 has dtype int32");
    ck_assert_call_fails("MakeLoss", 1, &X, P("normalization", "all"), DEFT_ERROR_PARSE,
                         "parameter 'normalization' is 'all'");
    free_all(5, (DeftNDArrayHandle[]){X, V, H, g, I});
}
END_TEST

START_TEST(test_stop_gradient_blocks_like_block_grad) {
    DeftNDArrayHandle X = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, -2, 3)), G, dx;
    int req = DEFT_GRAD_WRITE;
    G = make(DEFT_FLOAT64, 1, SHAPE(3), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &X, &req, &G));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle s = call1("stop_gradient", 1, &X, NO_PARAMS);
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){X, s}, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    assert_values(s, 3, VALUES(1, -2, 3), 0);
    ck_assert_ok(DeftAutogradComputeGradient(1, &sq, NULL, 1, &X, 0, 0, &dx));
    assert_values(dx, 3, VALUES(1, -2, 3), 0); /* d(x * const)/dx, not 2x */
    free_all(5, (DeftNDArrayHandle[]){X, G, s, sq, dx});
}
END_TEST

/* ---- smooth_l1 ---- */

static double ref_smooth_l1(double x, double sigma) {
    double s2 = sigma * sigma;
    return fabs(x) < 1 / s2 ? 0.5 * s2 * x * x : fabs(x) - 0.5 / s2;
}

START_TEST(test_smooth_l1_values) {
    DeftNDArrayHandle A = make(DEFT_FLOAT32, 1, SHAPE(4), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle Y = call1("smooth_l1", 1, &A, NO_PARAMS); /* MXNet's documented example */
    assert_values(Y, 4, VALUES(0.5, 1.5, 2.5, 3.5), 0);
    double x[7] = {-3, -0.3, -0.1, 0, 0.2, 0.24, 1.5}, want[7];
    for (int i = 0; i < 7; i++) want[i] = ref_smooth_l1(x[i], 2);
    for (int dt = 0; dt < 2; dt++) {
        DeftNDArrayHandle X = make(float_dtypes[dt], 1, SHAPE(7), x);
        DeftNDArrayHandle S = call1("smooth_l1", 1, &X, P("scalar", "2", "is_int", "false"));
        assert_values(S, 7, want, tol_for(float_dtypes[dt]));
        free_all(2, (DeftNDArrayHandle[]){X, S});
    }
    DeftNDArrayHandle I = make(DEFT_INT32, 1, SHAPE(3), VALUES(-3, 0, 5));
    DeftNDArrayHandle Si = call1("smooth_l1", 1, &I, NO_PARAMS);
    assert_values(Si, 3, VALUES(2, 0, 4), 0); /* 2.5, 0, 4.5 truncated */
    DeftNDArrayHandle B = make(DEFT_BOOL, 1, SHAPE(1), NULL);
    ck_assert_call_fails("smooth_l1", 1, &B, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator 'smooth_l1': input 0 has dtype bool");
    free_all(5, (DeftNDArrayHandle[]){A, Y, I, Si, B});
}
END_TEST

static Suite *loss_heads_suite(void) {
    Suite *suite = suite_create("loss heads");
    TCase *tc = tcase_create("loss_heads");
    tcase_add_loop_test(tc, test_softmax_output_forward_views, 0, 2);
    tcase_add_test(tc, test_softmax_output_gradient_closed_forms);
    tcase_add_test(tc, test_softmax_output_out_grad_and_probability_labels);
    tcase_add_test(tc, test_softmax_output_multi_output_gradient);
    tcase_add_test(tc, test_softmax_output_gradient_graph);
    tcase_add_test(tc, test_softmax_output_rejects_bad_inputs);
    tcase_add_test(tc, test_label_shapes_are_inferred);
    tcase_add_test(tc, test_zero_size_heads);
    tcase_add_loop_test(tc, test_regression_outputs_forward_and_gradient, 0, 2);
    tcase_add_test(tc, test_regression_label_shapes);
    tcase_add_test(tc, test_make_loss_gradients);
    tcase_add_test(tc, test_stop_gradient_blocks_like_block_grad);
    tcase_add_test(tc, test_smooth_l1_values);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(loss_heads_suite());
}
