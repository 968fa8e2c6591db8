/* LeakyReLU in each act_type against formulas written here; relu's backward,
 * _backward_relu, against MXNet's values and against the product it replaced. */
#include <string.h>

#include "symbol_helpers.h"

static const double inputs[6] = {-2, -0.5, 0, 0.25, 1.5, -1e-3};
#define SELU_ALPHA  1.6732632423543772848170429916717
#define SELU_LAMBDA 1.0507009873554804934193349852946

static double ref_act(const char *type, double x, double slope) {
    if (!strcmp(type, "elu")) return x > 0 ? x : slope * expm1(x);
    if (!strcmp(type, "selu")) return SELU_LAMBDA * (x > 0 ? x : SELU_ALPHA * expm1(x));
    if (!strcmp(type, "gelu")) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    return x > 0 ? x : slope * x; /* leaky, rrelu */
}

START_TEST(test_leaky_relu_types_match_formulas) {
    static const struct {
        const char *type, *slope;
        double used_slope;
    } cases[] = {{"leaky", "0.1", 0.1}, {"leaky", NULL, 0.25},
                 {"elu", "0.7", 0.7},   {"selu", NULL, 0},
                 {"gelu", NULL, 0},     {"rrelu", NULL, (0.125f + 0.334f) / 2.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int d = 0; d < 2; d++) {
            int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
            DeftNDArrayHandle x = make(dtype, 2, SHAPE(2, 3), inputs);
            const char *params[] = {"act_type", cases[c].type, cases[c].slope ? "slope" : NULL,
                                    cases[c].slope, NULL};
            DeftNDArrayHandle out[2] = {NULL, NULL};
            int nout = 2;
            ck_assert_msg(call("LeakyReLU", 1, &x, &nout, out, params) == 0, "%s",
                          DeftGetLastError());
            ck_assert_int_eq(nout, strcmp(cases[c].type, "rrelu") ? 1 : 2);
            double want[6];
            for (int i = 0; i < 6; i++) {
                double in = d ? inputs[i] : (float)inputs[i];
                want[i] = ref_act(cases[c].type, in, cases[c].used_slope);
            }
            assert_values(out[0], 6, want, d ? 1e-15 : 1e-6);
            if (nout == 2) { /* prediction mode: the mask holds the mean slope */
                double mask[6];
                for (int i = 0; i < 6; i++) mask[i] = (float)cases[c].used_slope;
                assert_values(out[1], 6, mask, 0);
                ck_assert_ok(DeftNDArrayFree(out[1]));
            }
            free_all(2, (DeftNDArrayHandle[]){x, out[0]});
        }
    }
}
END_TEST

START_TEST(test_prelu_gamma_per_channel_or_scalar) {
    const double x[12] = {-1, 2, -3, 4, -5, 6, 7, -8, 9, -10, 11, -12};
    DeftNDArrayHandle data = make(DEFT_FLOAT64, 3, SHAPE(2, 3, 2), x);
    DeftNDArrayHandle gamma = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(0.5, 2, -1));
    DeftNDArrayHandle in[2] = {data, gamma};
    DeftNDArrayHandle y = call1("LeakyReLU", 2, in, P("act_type", "prelu"));
    double want[12];
    for (int i = 0; i < 12; i++) {
        double g = (double[]){0.5, 2, -1}[(i / 2) % 3];
        want[i] = x[i] > 0 ? x[i] : g * x[i];
    }
    assert_values(y, 12, want, 0);
    DeftNDArrayHandle one = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(0.1));
    DeftNDArrayHandle in1[2] = {data, one};
    DeftNDArrayHandle y1 = call1("LeakyReLU", 2, in1, P("act_type", "prelu"));
    for (int i = 0; i < 12; i++) want[i] = x[i] > 0 ? x[i] : 0.1 * x[i];
    assert_values(y1, 12, want, 1e-15);
    /* (2,) would match axis 0, as in MXNet; (4,) matches neither */
    DeftNDArrayHandle wrong = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(1, 1, 1, 1));
    DeftNDArrayHandle bad[2] = {data, wrong};
    ck_assert_call_fails("LeakyReLU", 2, bad, P("act_type", "prelu"), DEFT_ERROR_VALUE,
                         "operator 'LeakyReLU': input 1 (gamma) has shape (4,), which does not "
                         "match axis 1 (or 0 and 1) of the data's (2,3,2)");
    ck_assert_call_fails("LeakyReLU", 1, &data, P("act_type", "prelu"), DEFT_ERROR_VALUE,
                         "got 1 inputs, expected 2 for act_type=prelu");
    ck_assert_call_fails("LeakyReLU", 1, &data, P("act_type", "swish"), DEFT_ERROR_PARSE,
                         "parameter 'act_type' is 'swish', expected one of: rrelu, leaky, elu, "
                         "selu, gelu, prelu");
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(2), VALUES(1, -1));
    ck_assert_call_fails("LeakyReLU", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE, "input 0 has dtype int32");
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle eg = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 1, 1));
    DeftNDArrayHandle ein[2] = {e, eg};
    DeftNDArrayHandle ey = call1("LeakyReLU", 2, ein, P("act_type", "prelu"));
    assert_shape(ey, 2, SHAPE(0, 3));
    free_all(10, (DeftNDArrayHandle[]){data, gamma, y, one, y1, wrong, i, e, eg, ey});
}
END_TEST

/* d gamma sums g x over the elements below 0 of each channel. */
START_TEST(test_prelu_backward_sums_over_channels) {
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(-1, 5, -2, -3));
    DeftNDArrayHandle gamma = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0.5, 0.25));
    DeftNDArrayHandle in[3] = {g, x, gamma};
    DeftNDArrayHandle out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("_backward_LeakyReLU", 3, in, &nout, out, P("act_type", "prelu")));
    assert_values(out[0], 4, VALUES(0.5, 2, 1.5, 1), 0);
    assert_values(out[1], 2, VALUES(-1 - 6, -12), 0);
    free_all(5, (DeftNDArrayHandle[]){g, x, gamma, out[0], out[1]});
}
END_TEST

/* ---- _backward_relu: relu's gradient as one node ---- */

static const int float_dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_FLOAT16, DEFT_BFLOAT16};

/* Equal as stored: NaN to NaN, and the sign of a zero too. */
static void assert_same_values(const double *got, const double *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (isnan(want[i]) ? !isnan(got[i])
                           : got[i] != want[i] || signbit(got[i]) != signbit(want[i]))
            ck_abort_msg("element %lld is %g, expected %g", (long long)i, got[i], want[i]);
}

/* _backward_relu(dy, v) of v = x and of v = relu(x): the same, and MXNet 1.9.1's
 * (mx.nd._internal._backward_relu, printed by the oracle): dy where x > 0, NaN
 * where x is NaN, else dy * 0 (-0 for a negative dy, NaN for an infinite one). */
START_TEST(test_backward_relu_is_mxnets) {
    const double dy[9] = {1, -2, 3, -4, 5, INFINITY, -INFINITY, NAN, 7};
    const double x[9] = {1, -1, 0, -0.0, NAN, -1, 2, 3, NAN};
    const double mxnet[9] = {1, -0.0, 0, -0.0, NAN, NAN, -INFINITY, NAN, NAN};
    for (size_t d = 0; d < sizeof float_dtypes / sizeof float_dtypes[0]; d++) {
        DeftNDArrayHandle g = make(float_dtypes[d], 1, SHAPE(9), dy);
        DeftNDArrayHandle in = make(float_dtypes[d], 1, SHAPE(9), x);
        DeftNDArrayHandle out = call1("relu", 1, &in, NO_PARAMS);
        for (int v = 0; v < 2; v++) {
            DeftNDArrayHandle dx =
                call1("_backward_relu", 2, (DeftNDArrayHandle[]){g, v ? out : in}, NO_PARAMS);
            ck_assert_int_eq(dtype_of(dx), float_dtypes[d]);
            int64_t n;
            double *got = read_all(dx, &n);
            ck_assert_int_eq(n, 9);
            assert_same_values(got, mxnet, 9);
            free(got);
            free_all(1, &dx);
        }
        free_all(3, (DeftNDArrayHandle[]){g, in, out});
    }
}
END_TEST

/* Lengths around the vector widths (16 floats, 8 doubles), and one of two
 * parallel grains and more, split between threads where deft has two or more
 * (DEFT_NUM_THREADS, or the cores), in every float dtype. */
START_TEST(test_backward_relu_every_length) {
    const int64_t lengths[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 1000, 2 * 32768 + 17};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int64_t n = lengths[l];
        double *dy = malloc(sizeof(double) * (size_t)n), *x = malloc(sizeof(double) * (size_t)n),
               *want = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            dy[i] = (double)(i % 7) - 3.5;
            x[i] = i % 11 == 5 ? NAN : i % 13 == 0 ? 0.0 : i % 17 == 3 ? -0.0 : (i % 5) - 2.25;
            want[i] = x[i] > 0 ? dy[i] : isnan(x[i]) ? NAN : dy[i] * 0.0;
        }
        for (size_t d = 0; d < sizeof float_dtypes / sizeof float_dtypes[0]; d++) {
            DeftNDArrayHandle in[2] = {make(float_dtypes[d], 1, SHAPE(n), dy),
                                       make(float_dtypes[d], 1, SHAPE(n), x)};
            DeftNDArrayHandle dx = call1("_backward_relu", 2, in, NO_PARAMS);
            int64_t got_n;
            double *got = read_all(dx, &got_n);
            ck_assert_int_eq(got_n, n);
            assert_same_values(got, want, n);
            free(got);
            free_all(3, (DeftNDArrayHandle[]){in[0], in[1], dx});
        }
        free(dy), free(x), free(want);
    }
}
END_TEST

/* Integers as MXNet's (dy where y > 0, else 0), so that relu's integer autograd
 * keeps working; bool and other shapes are refused. */
START_TEST(test_backward_relu_integers_and_errors) {
    const int ints[] = {DEFT_INT32, DEFT_INT64, DEFT_UINT8};
    for (int d = 0; d < 3; d++) {
        bool u8 = ints[d] == DEFT_UINT8;
        DeftNDArrayHandle in[2] = {make(ints[d], 1, SHAPE(4), VALUES(5, u8 ? 3 : -3, 7, 2)),
                                   make(ints[d], 1, SHAPE(4), VALUES(1, 0, u8 ? 0 : -2, 3))};
        DeftNDArrayHandle dx = call1("_backward_relu", 2, in, NO_PARAMS);
        ck_assert_int_eq(dtype_of(dx), ints[d]);
        assert_values(dx, 4, VALUES(5, 0, 0, 2), 0);
        free_all(3, (DeftNDArrayHandle[]){in[0], in[1], dx});
    }
    DeftNDArrayHandle t = make(DEFT_BOOL, 1, SHAPE(2), VALUES(1, 0));
    ck_assert_call_fails("_backward_relu", 2, ((DeftNDArrayHandle[]){t, t}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "operator '_backward_relu': input 0 has dtype bool");
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    ck_assert_call_fails("_backward_relu", 2, ((DeftNDArrayHandle[]){a, b}), NO_PARAMS,
                         DEFT_ERROR_VALUE, "operator '_backward_relu': input 1 has shape (3,)");
    free_all(3, (DeftNDArrayHandle[]){t, a, b});
}
END_TEST

/* ---- relu's gradient through autograd and graphs ---- */

/* How many nodes of operator `op` a symbol has (cJSON_Print's layout). */
static int count_op(DeftSymbolHandle sym, const char *op) {
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"op\":\t\"%s\"", op);
    return count_text(json, quoted);
}

/* Two arrays hold the same bytes. */
static void assert_same_bytes(DeftNDArrayHandle a, DeftNDArrayHandle b) {
    size_t na, nb;
    ck_assert_ok(DeftNDArrayGetNBytes(a, &na));
    ck_assert_ok(DeftNDArrayGetNBytes(b, &nb));
    ck_assert_uint_eq(na, nb);
    char *ba = malloc(na + 1), *bb = malloc(nb + 1);
    ck_assert_ok(DeftNDArrayCopyToHost(a, ba, na));
    ck_assert_ok(DeftNDArrayCopyToHost(b, bb, nb));
    ck_assert_msg(memcmp(ba, bb, na) == 0, "the arrays differ");
    free(ba), free(bb);
}

/* The inputs of the gradient tests: x with both zeros, dy with negatives (whose
 * products with 0 are -0) and infinities where x < 0 (inf * 0 is NaN). No NaN
 * in x: the product replaced gave 0 there, _backward_relu NaN (as MXNet's relu). */
enum { GN = 1003 };
static void gradient_inputs(DeftNDArrayHandle *x, DeftNDArrayHandle *dy) {
    double xs[GN], dys[GN];
    for (int i = 0; i < GN; i++) {
        xs[i] = i % 9 == 4 ? -0.0 : (double)(i % 5) - 2.0 + (i % 3) * 0.125;
        dys[i] = i == 15 ? INFINITY : i == 16 ? -INFINITY : (double)(i % 7) - 3.25;
    }
    *x = make(DEFT_FLOAT32, 1, SHAPE(GN), xs);
    *dy = make(DEFT_FLOAT32, 1, SHAPE(GN), dys);
}

/* What relu's gradient was before _backward_relu: dy * (x > 0), two kernels. */
static DeftNDArrayHandle product_gradient(DeftNDArrayHandle x, DeftNDArrayHandle dy) {
    DeftNDArrayHandle mask = call1("_greater_scalar", 1, &x, P("scalar", "0"));
    DeftNDArrayHandle dx = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){dy, mask}, NO_PARAMS);
    free_all(1, &mask);
    return dx;
}

static const char *const relu_params[] = {"act_type", "relu", NULL};
#define RELU_PARAMS(k) ((k) ? relu_params : NO_PARAMS)
#define RELU_OP(k)     ((k) ? "Activation" : "relu")

/* Eager autograd of relu and Activation(relu): the product's bits exactly. */
START_TEST(test_relu_eager_gradient_is_the_products) {
    for (int k = 0; k < 2; k++) {
        DeftNDArrayHandle x, dy, grad = make(DEFT_FLOAT32, 1, SHAPE(GN), NULL);
        gradient_inputs(&x, &dy);
        int req = DEFT_GRAD_WRITE;
        ck_assert_ok(DeftAutogradMarkVariables(1, &x, &req, &grad));
        ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle y = call1(RELU_OP(k), 1, &x, RELU_PARAMS(k));
        ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
        ck_assert_ok(DeftAutogradBackward(1, &y, &dy, 0, 0));
        DeftNDArrayHandle want = product_gradient(x, dy);
        assert_same_bytes(grad, want);
        free_all(5, (DeftNDArrayHandle[]){x, dy, grad, y, want});
    }
}
END_TEST

/* A graph's gradient of relu and of Activation(relu) is one _backward_relu node
 * (not a comparison and a product), which reads relu's output, not its input;
 * run as a CachedOp it gives the product's bits. */
START_TEST(test_relu_graph_gradient_is_one_node) {
    for (int k = 0; k < 2; k++) {
        DeftSymbolHandle xv = var("x"), y = apply(RELU_OP(k), "y", 1, &xv, RELU_PARAMS(k)), grad;
        ck_assert_ok(DeftSymbolGradient(y, 1, (const char *const[]){"x"}, &grad));
        ck_assert_int_eq(count_op(grad, "_backward_relu"), 1);
        ck_assert_int_eq(count_op(grad, "_greater_scalar"), 0);
        ck_assert_int_eq(count_op(grad, "elemwise_mul"), 0);
        DeftNDArrayHandle x, dy, out[2] = {NULL, NULL};
        gradient_inputs(&x, &dy);
        int nargs, nout = 2;
        const char *const *names;
        ck_assert_ok(DeftSymbolListArguments(grad, &nargs, &names));
        ck_assert_int_eq(nargs, 2);
        DeftNDArrayHandle args[2] = {strcmp(names[0], "x") ? dy : x,
                                     strcmp(names[0], "x") ? x : dy};
        DeftCachedOpHandle exec;
        ck_assert_ok(DeftCachedOpCreate(grad, 0, &exec));
        ck_assert_msg(DeftCachedOpInvoke(exec, 2, args, &nout, out) == 0, "%s", DeftGetLastError());
        ck_assert_int_eq(nout, 2); /* y and dx */
        DeftNDArrayHandle want = product_gradient(x, dy);
        assert_same_bytes(out[1], want);
        free_all(5, (DeftNDArrayHandle[]){x, dy, out[0], out[1], want});
        ck_assert_ok(DeftCachedOpFree(exec));
        DeftSymbolHandle syms[] = {xv, y, grad};
        for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
    }
}
END_TEST

/* relu's recorded gradient keeps its output, not its input: x2 = 2x, freed by
 * the caller after y = relu(x2), is not kept (y, which the gradient reads, is). */
START_TEST(test_relu_gradient_keeps_the_output_only) {
    for (int k = 0; k < 2; k++) {
        DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(1024), NULL);
        DeftNDArrayHandle grad = make(DEFT_FLOAT64, 1, SHAPE(1024), NULL);
        int req = DEFT_GRAD_WRITE;
        ck_assert_ok(DeftAutogradMarkVariables(1, &x, &req, &grad));
        int64_t base = mem_stat(DEFT_MEM_LIVE_BYTES);
        ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle x2 = call1("_mul_scalar", 1, &x, P("scalar", "2"));
        DeftNDArrayHandle y = call1(RELU_OP(k), 1, &x2, RELU_PARAMS(k));
        ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
        free_all(1, &x2);
        ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - base, 1024 * 8); /* y only */
        ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
        free_all(3, (DeftNDArrayHandle[]){x, grad, y});
    }
}
END_TEST

/* Second order through graphs: the gradient of dx = _backward_relu(g, relu(x))
 * with respect to g is the new head times (x > 0); nothing flows to x. */
START_TEST(test_relu_second_order_through_the_graph) {
    DeftSymbolHandle xv = var("x"), y = apply("relu", "y", 1, &xv, NO_PARAMS), g1, gx, g2;
    ck_assert_ok(DeftSymbolGradient(y, 1, (const char *const[]){"x"}, &g1));
    ck_assert_ok(DeftSymbolGetOutput(g1, 1, &gx));
    const char *const wrt[] = {"x", "y_output_head_grad"};
    ck_assert_msg(DeftSymbolGradient(gx, 2, wrt, &g2) == 0, "%s", DeftGetLastError());
    ck_assert_int_eq(count_op(g2, "_backward_relu"), 2); /* the first order's, and its own */
    const double xs[5] = {-1.2, -0.3, 0.4, 1.1, 0}, w[5] = {0.5, -1, 2, 0.25, 3},
                 v[5] = {1.5, 2, -3, 4, 5};
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(5), xs),
                      head1 = make(DEFT_FLOAT64, 1, SHAPE(5), w),
                      head2 = make(DEFT_FLOAT64, 1, SHAPE(5), v), args[3], out[3] = {NULL};
    int nargs, nout = 3;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(g2, &nargs, &names));
    ck_assert_int_eq(nargs, 3);
    for (int a = 0; a < 3; a++)
        args[a] = !strcmp(names[a], "x")                    ? x
                  : !strcmp(names[a], "y_output_head_grad") ? head1
                                                            : head2;
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(g2, 0, &exec));
    ck_assert_msg(DeftCachedOpInvoke(exec, 3, args, &nout, out) == 0, "%s", DeftGetLastError());
    ck_assert_int_eq(nout, 3); /* dx, its gradient for x, for g */
    assert_values(out[0], 5, VALUES(0, 0, 2, 0.25, 0), 0);
    assert_values(out[1], 5, VALUES(0, 0, 0, 0, 0), 0);
    assert_values(out[2], 5, VALUES(0, 0, -3, 4, 0), 0);
    free_all(6, (DeftNDArrayHandle[]){x, head1, head2, out[0], out[1], out[2]});
    ck_assert_ok(DeftCachedOpFree(exec));
    DeftSymbolHandle syms[] = {xv, y, g1, gx, g2};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

static Suite *activation_suite(void) {
    Suite *suite = suite_create("activations");
    TCase *tc = tcase_create("LeakyReLU");
    tcase_add_test(tc, test_leaky_relu_types_match_formulas);
    tcase_add_test(tc, test_prelu_gamma_per_channel_or_scalar);
    tcase_add_test(tc, test_prelu_backward_sums_over_channels);
    suite_add_tcase(suite, tc);
    TCase *relu = tcase_create("relu backward");
    tcase_add_test(relu, test_backward_relu_is_mxnets);
    tcase_add_test(relu, test_backward_relu_every_length);
    tcase_add_test(relu, test_backward_relu_integers_and_errors);
    tcase_add_test(relu, test_relu_eager_gradient_is_the_products);
    tcase_add_test(relu, test_relu_graph_gradient_is_one_node);
    tcase_add_test(relu, test_relu_gradient_keeps_the_output_only);
    tcase_add_test(relu, test_relu_second_order_through_the_graph);
    suite_add_tcase(suite, relu);
    return suite;
}

int main(void) {
    return run_suite(activation_suite());
}
