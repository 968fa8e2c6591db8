/* Elementwise operators against references computed here with plain loops and libm. */
#include <float.h>

#include "core/op/half_compute.h"
#include "core/op/simd.h"
#include "op_helpers.h"

static const double float_inputs[] = {-3.5, -1, -0.25, 0,        0.5,      1,
                                      2.75, 50, NAN,   INFINITY, -INFINITY};
#define NUM_FLOAT_INPUTS 11

static double ref_sigmoid(double x) {
    return 1 / (1 + exp(-x));
}
static double ref_relu(double x) {
    return isnan(x) ? x : x > 0 ? x : 0;
}
static double ref_softrelu(double x) {
    return isinf(x) && x > 0 ? x : log(1 + exp(x));
}
static double ref_gelu(double x) {
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}
static double ref_sign(double x) {
    return isnan(x) ? x : (x > 0) - (x < 0);
}
static double ref_negative(double x) {
    return -x;
}
static double ref_square(double x) {
    return x * x;
}
static double ref_rsqrt(double x) {
    return 1 / sqrt(x);
}

static double ref_softsign(double x) {
    return x / (1 + fabs(x));
}
static double ref_reciprocal(double x) {
    return 1 / x;
}
static double ref_rcbrt(double x) {
    return 1 / cbrt(x);
}
static double ref_degrees(double x) {
    return x * (180 / 3.14159265358979323846);
}
static double ref_radians(double x) {
    return x * (3.14159265358979323846 / 180);
}
/* MXNet's rint takes the lower neighbour on a tie; fix rounds towards zero */
static double ref_rint(double x) {
    return x - floor(x) <= ceil(x) - x ? floor(x) : ceil(x);
}
static double ref_logical_not(double x) {
    return x == 0;
}

static const struct {
    const char *name;
    double (*ref)(double);
} unary_float_cases[] = {
    {"softsign", ref_softsign},
    {"log1p", log1p},
    {"expm1", expm1},
    {"log2", log2},
    {"log10", log10},
    {"reciprocal", ref_reciprocal},
    {"cbrt", cbrt},
    {"rcbrt", ref_rcbrt},
    {"tan", tan},
    {"arcsin", asin},
    {"arccos", acos},
    {"arctan", atan},
    {"sinh", sinh},
    {"cosh", cosh},
    {"arcsinh", asinh},
    {"arccosh", acosh},
    {"arctanh", atanh},
    {"degrees", ref_degrees},
    {"radians", ref_radians},
    {"round", round},
    {"rint", ref_rint},
    {"ceil", ceil},
    {"floor", floor},
    {"trunc", trunc},
    {"fix", trunc},
    {"logical_not", ref_logical_not},
    {"negative", ref_negative},
    {"abs", fabs},
    {"sign", ref_sign},
    {"exp", exp},
    {"log", log},
    {"sqrt", sqrt},
    {"square", ref_square},
    {"rsqrt", ref_rsqrt},
    {"sin", sin},
    {"cos", cos},
    {"tanh", tanh},
    {"sigmoid", ref_sigmoid},
    {"relu", ref_relu},
    {"softrelu", ref_softrelu},
    {"erf", erf},
    {"gelu", ref_gelu},
};

START_TEST(test_unary_float_ops_match_libm) {
    for (size_t c = 0; c < sizeof unary_float_cases / sizeof unary_float_cases[0]; c++) {
        for (int d = 0; d < 2; d++) {
            int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
            DeftNDArrayHandle x = make(dtype, 1, SHAPE(NUM_FLOAT_INPUTS), float_inputs);
            DeftNDArrayHandle y = call1(unary_float_cases[c].name, 1, &x, NO_PARAMS);
            double want[NUM_FLOAT_INPUTS];
            for (int i = 0; i < NUM_FLOAT_INPUTS; i++) {
                double in = dtype == DEFT_FLOAT32 ? (float)float_inputs[i] : float_inputs[i];
                want[i] = unary_float_cases[c].ref(in);
                if (dtype == DEFT_FLOAT32) want[i] = (float)want[i];
            }
            int64_t n;
            double *got = read_all(y, &n);
            for (int i = 0; i < NUM_FLOAT_INPUTS; i++)
                ck_assert_msg(close_enough(got[i], want[i], dtype == DEFT_FLOAT32 ? 4e-6 : 1e-13),
                              "%s(%g) as dtype %d is %.17g, expected %.17g",
                              unary_float_cases[c].name, float_inputs[i], dtype, got[i], want[i]);
            free(got);
            free_all(2, (DeftNDArrayHandle[]){x, y});
        }
    }
}
END_TEST

START_TEST(test_unary_integer_ops_wrap_like_twos_complement) {
    const double i32_in[] = {-2147483648.0, -7, -1, 0, 3, 46341, 2147483647.0};
    const double i32_neg[] = {-2147483648.0, 7, 1, 0, -3, -46341, -2147483647.0};
    const double i32_abs[] = {-2147483648.0, 7, 1, 0, 3, 46341, 2147483647.0};
    const double i32_sign[] = {-1, -1, -1, 0, 1, 1, 1};
    const double i32_relu[] = {0, 0, 0, 0, 3, 46341, 2147483647.0};
    double i32_sq[7];
    for (int i = 0; i < 7; i++) {
        int64_t v = (int64_t)i32_in[i];
        i32_sq[i] = (double)(int32_t)(uint32_t)((uint64_t)v * (uint64_t)v);
    }
    DeftNDArrayHandle x = make(DEFT_INT32, 1, SHAPE(7), i32_in);
    const char *names[] = {"negative", "abs", "sign", "relu", "square"};
    const double *wants[] = {i32_neg, i32_abs, i32_sign, i32_relu, i32_sq};
    for (int k = 0; k < 5; k++) {
        DeftNDArrayHandle y = call1(names[k], 1, &x, NO_PARAMS);
        assert_values(y, 7, wants[k], 0);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    DeftNDArrayHandle u = make(DEFT_UINT8, 1, SHAPE(4), VALUES(0, 1, 200, 255));
    DeftNDArrayHandle un = call1("negative", 1, &u, NO_PARAMS);
    assert_values(un, 4, VALUES(0, 255, 56, 1), 0);
    DeftNDArrayHandle us = call1("square", 1, &u, NO_PARAMS);
    assert_values(us, 4, VALUES(0, 1, 64, 1), 0);
    DeftNDArrayHandle l = make(DEFT_INT64, 1, SHAPE(2), VALUES(-5, 4));
    DeftNDArrayHandle la = call1("abs", 1, &l, NO_PARAMS);
    assert_values(la, 2, VALUES(5, 4), 0);
    ck_assert_call_fails("exp", 1, &x, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator 'exp': input 0 has dtype int32, expected float32 or float64");
    free_all(6, (DeftNDArrayHandle[]){x, u, un, us, l, la});
}
END_TEST

START_TEST(test_activation_and_clip) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(-2, -0.5, 0, 0.5, 2, NAN));
    const char *acts[] = {"relu", "sigmoid", "softrelu", "tanh"};
    for (int a = 0; a < 4; a++) {
        DeftNDArrayHandle via_act = call1("Activation", 1, &x, P("act_type", acts[a]));
        DeftNDArrayHandle direct = call1(acts[a], 1, &x, NO_PARAMS);
        int64_t n;
        double *want = read_all(direct, &n);
        assert_values(via_act, n, want, 0);
        free(want);
        free_all(2, (DeftNDArrayHandle[]){via_act, direct});
    }
    DeftNDArrayHandle c = call1("clip", 1, &x, P("a_min", "-1", "a_max", "0.25"));
    assert_values(c, 6, VALUES(-1, -0.5, 0, 0.25, 0.25, NAN), 0);
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(-10, 5, 10));
    DeftNDArrayHandle ic = call1("clip", 1, &i, P("a_min", "-2.5", "a_max", "1e20"));
    assert_values(ic, 3, VALUES(-2, 5, 10), 0);
    ck_assert_call_fails("clip", 1, &x, P("a_min", "1", "a_max", "0"), DEFT_ERROR_VALUE,
                         "a_min (1) must not be greater than a_max (0)");
    free_all(4, (DeftNDArrayHandle[]){x, c, i, ic});
}
END_TEST

/* ---- binary with broadcasting ---- */

/* Flat index into an input broadcast to out_shape. */
static int64_t source_index(int64_t flat, int ndim, const int64_t *out_shape, int in_ndim,
                            const int64_t *in_shape) {
    int64_t index = 0, stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t coord = flat % out_shape[d];
        flat /= out_shape[d];
        int id = d - (ndim - in_ndim);
        if (id >= 0) {
            if (in_shape[id] != 1) index += coord * stride;
            stride *= in_shape[id];
        }
    }
    return index;
}

static double ref_binary(const char *op, double a, double b, int dtype) {
    bool integer = dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64;
    double r;
    if (!strcmp(op, "add"))
        r = a + b;
    else if (!strcmp(op, "sub"))
        r = a - b;
    else if (!strcmp(op, "mul"))
        r = a * b;
    else if (!strcmp(op, "div"))
        r = integer ? (b == 0 ? 0 : trunc(a / b)) : a / b;
    else if (!strcmp(op, "power"))
        r = pow(a, b);
    else if (!strcmp(op, "maximum"))
        r = isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    else if (!strcmp(op, "minimum"))
        r = isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    else if (!strcmp(op, "equal"))
        r = a == b;
    else if (!strcmp(op, "not_equal"))
        r = a != b;
    else if (!strcmp(op, "greater"))
        r = a > b;
    else if (!strcmp(op, "greater_equal"))
        r = a >= b;
    else if (!strcmp(op, "lesser"))
        r = a < b;
    else
        r = a <= b;
    if (dtype == DEFT_FLOAT32) r = (float)r;
    if (dtype == DEFT_UINT8) r = (double)(uint8_t)(int64_t)r;
    return r;
}

static const char *const binary_names[] = {
    "add",   "sub",       "mul",     "div",           "power",  "maximum",     "minimum",
    "equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal"};

typedef struct bcast_case {
    int ndim_a, ndim_b, ndim_out;
    int64_t a[4], b[4], out[4];
} bcast_case_t;

static const bcast_case_t bcast_cases[] = {
    {2, 2, 2, {2, 3}, {2, 3}, {2, 3}},
    {2, 1, 2, {2, 3}, {3}, {2, 3}},
    {2, 2, 2, {2, 1}, {1, 3}, {2, 3}},
    {3, 2, 3, {4, 1, 3}, {2, 1}, {4, 2, 3}},
    {0, 2, 2, {0}, {2, 2}, {2, 2}},
    {2, 0, 2, {3, 2}, {0}, {3, 2}},
    {2, 2, 2, {0, 3}, {1, 3}, {0, 3}},
    {1, 1, 1, {1}, {5}, {5}},
    {4, 4, 4, {2, 1, 3, 1}, {1, 2, 1, 2}, {2, 2, 3, 2}},
};

static void check_broadcast_case(const bcast_case_t *bc, const char *op, int dtype) {
    int64_t na = count_of(bc->ndim_a, bc->a), nb = count_of(bc->ndim_b, bc->b);
    int64_t nout = count_of(bc->ndim_out, bc->out);
    double va[64], vb[64], want[64];
    bool uns = dtype == DEFT_UINT8;
    for (int64_t i = 0; i < na; i++) va[i] = uns ? (double)(i % 5 + 1) : (double)(i % 7) - 3;
    for (int64_t i = 0; i < nb; i++) vb[i] = uns ? (double)(i % 3) : (double)(i % 5) - 2;
    if (!strcmp(op, "power") && dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64)
        for (int64_t i = 0; i < nb; i++) vb[i] = fabs(vb[i]);
    for (int64_t i = 0; i < nout; i++)
        want[i] = ref_binary(op, va[source_index(i, bc->ndim_out, bc->out, bc->ndim_a, bc->a)],
                             vb[source_index(i, bc->ndim_out, bc->out, bc->ndim_b, bc->b)], dtype);
    DeftNDArrayHandle a = make(dtype, bc->ndim_a, bc->a, va),
                      b = make(dtype, bc->ndim_b, bc->b, vb);
    char name[64];
    snprintf(name, sizeof name, "broadcast_%s", op);
    DeftNDArrayHandle y = call1(name, 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    assert_shape(y, bc->ndim_out, bc->out);
    assert_values(y, nout, want, tol_for(dtype));
    free_all(3, (DeftNDArrayHandle[]){a, b, y});
}

START_TEST(test_broadcast_ops_every_dtype_and_shape_pattern) {
    for (size_t o = 0; o < sizeof binary_names / sizeof binary_names[0]; o++)
        for (int d = 0; d < NUM_ARITH_DTYPES; d++)
            for (size_t c = 0; c < sizeof bcast_cases / sizeof bcast_cases[0]; c++)
                check_broadcast_case(&bcast_cases[c], binary_names[o], arith_dtypes[d]);
}
END_TEST

START_TEST(test_broadcast_rejects_incompatible_shapes) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 2, SHAPE(4, 3), NULL);
    DeftNDArrayHandle ab[2] = {a, b};
    ck_assert_call_fails("broadcast_mul", 2, ab, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'broadcast_mul': input shapes (2,3) and (4,3) cannot be "
                         "broadcast together (axis -2: 2 vs 4)");
    ck_assert_call_fails("elemwise_add", 2, ab, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 1 has shape (4,3), expected (2,3)");
    DeftNDArrayHandle f = make(DEFT_INT8, 1, SHAPE(3), NULL);
    DeftNDArrayHandle ff[2] = {f, f};
    ck_assert_call_fails("broadcast_add", 2, ff, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype int8, which has no kernel (expected float32, float64, "
                         "int32, int64 or uint8; float16, bfloat16 through float32)");
    free_all(3, (DeftNDArrayHandle[]){a, b, f});
}
END_TEST

START_TEST(test_special_values_propagate) {
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(NAN, 1, 1, -1));
    DeftNDArrayHandle b = make(DEFT_FLOAT64, 1, SHAPE(4), VALUES(1, NAN, 0, 0));
    DeftNDArrayHandle ab[2] = {a, b};
    DeftNDArrayHandle mx = call1("broadcast_maximum", 2, ab, NO_PARAMS);
    assert_values(mx, 4, VALUES(NAN, NAN, 1, 0), 0);
    DeftNDArrayHandle mn = call1("broadcast_minimum", 2, ab, NO_PARAMS);
    assert_values(mn, 4, VALUES(NAN, NAN, 0, -1), 0);
    DeftNDArrayHandle dv = call1("broadcast_div", 2, ab, NO_PARAMS);
    assert_values(dv, 4, VALUES(NAN, NAN, INFINITY, -INFINITY), 0);
    DeftNDArrayHandle eq = call1("broadcast_equal", 2, (DeftNDArrayHandle[]){a, a}, NO_PARAMS);
    assert_values(eq, 4, VALUES(0, 1, 1, 1), 0);

    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(-2147483648.0, 7, -7));
    DeftNDArrayHandle j = make(DEFT_INT32, 1, SHAPE(3), VALUES(-1, 0, 2));
    DeftNDArrayHandle q = call1("broadcast_div", 2, (DeftNDArrayHandle[]){i, j}, NO_PARAMS);
    assert_values(q, 3, VALUES(-2147483648.0, 0, -3), 0);
    DeftNDArrayHandle pw = call1("_rpower_scalar", 1, &j, P("scalar", "2"));
    assert_values(pw, 3, VALUES(0, 1, 4), 0);
    free_all(9, (DeftNDArrayHandle[]){a, b, mx, mn, dv, eq, i, j, q});
    ck_assert_ok(DeftNDArrayFree(pw));
}
END_TEST

START_TEST(test_scalar_ops_and_reversed_forms) {
    static const struct {
        const char *name;
        double scalar, want[3];
    } cases[] = {
        {"_plus_scalar", 2, {3, 4, 6}},    {"_minus_scalar", 2, {-1, 0, 2}},
        {"_rminus_scalar", 10, {9, 8, 6}}, {"_mul_scalar", 3, {3, 6, 12}},
        {"_div_scalar", 2, {0.5, 1, 2}},   {"_rdiv_scalar", 8, {8, 4, 2}},
        {"_power_scalar", 2, {1, 4, 16}},  {"_rpower_scalar", 2, {2, 4, 16}},
        {"_maximum_scalar", 2, {2, 2, 4}}, {"_minimum_scalar", 2, {1, 2, 2}},
        {"_equal_scalar", 2, {0, 1, 0}},   {"_not_equal_scalar", 2, {1, 0, 1}},
        {"_greater_scalar", 2, {0, 0, 1}}, {"_greater_equal_scalar", 2, {0, 1, 1}},
        {"_lesser_scalar", 2, {1, 0, 0}},  {"_lesser_equal_scalar", 2, {1, 1, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int d = 0; d < NUM_ARITH_DTYPES; d++) {
            int dtype = arith_dtypes[d];
            DeftNDArrayHandle x = make(dtype, 1, SHAPE(3), VALUES(1, 2, 4));
            char text[32];
            snprintf(text, sizeof text, "%g", cases[c].scalar);
            DeftNDArrayHandle y = call1(cases[c].name, 1, &x, P("scalar", text));
            double want[3];
            for (int i = 0; i < 3; i++) {
                want[i] = cases[c].want[i];
                if (dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64) want[i] = trunc(want[i]);
                if (dtype == DEFT_UINT8) want[i] = (uint8_t)(int64_t)want[i];
            }
            assert_values(y, 3, want, tol_for(dtype));
            free_all(2, (DeftNDArrayHandle[]){x, y});
        }
    }
}
END_TEST

START_TEST(test_large_arrays_use_the_parallel_path_correctly) {
    const int64_t n = 1000003;
    double *va = malloc(sizeof(double) * n), *vb = malloc(sizeof(double) * n);
    double *want = malloc(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) {
        va[i] = (double)(i % 1000) * 0.5;
        vb[i] = (double)(i % 17);
        want[i] = (float)(va[i] * vb[i]);
    }
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, &n, va), b = make(DEFT_FLOAT32, 1, &n, vb);
    DeftNDArrayHandle y = call1("broadcast_mul", 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    assert_values(y, n, want, 0);
    const int64_t rows[2] = {1001, 999};
    DeftNDArrayHandle m = make(DEFT_FLOAT64, 2, rows, va);
    DeftNDArrayHandle r = make(DEFT_FLOAT64, 1, SHAPE(999), vb);
    DeftNDArrayHandle s = call1("broadcast_sub", 2, (DeftNDArrayHandle[]){m, r}, NO_PARAMS);
    int64_t got_n;
    double *got = read_all(s, &got_n);
    for (int64_t i = 0; i < got_n; i++) ck_assert_double_eq(got[i], va[i] - vb[i % 999]);
    free(got);
    free(va), free(vb), free(want);
    free_all(6, (DeftNDArrayHandle[]){a, b, y, m, r, s});
}
END_TEST

START_TEST(test_cast_between_dtypes) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(6), VALUES(-1e10, -3.7, 0.5, 300, NAN, 1e10));
    DeftNDArrayHandle i32 = call1("Cast", 1, &x, P("dtype", "int32"));
    assert_values(i32, 6, VALUES(-2147483648.0, -3, 0, 300, 0, 2147483647.0), 0);
    DeftNDArrayHandle u8 = call1("cast", 1, &x, P("dtype", "uint8"));
    assert_values(u8, 6, VALUES(0, 0, 0, 255, 0, 255), 0);
    DeftNDArrayHandle b = call1("Cast", 1, &x, P("dtype", "bool"));
    assert_values(b, 6, VALUES(1, 1, 1, 1, 1, 1), 0);
    DeftNDArrayHandle small =
        make(DEFT_FLOAT32, 1, SHAPE(5), VALUES(1.5, -2.25, 65504, 1e-7, 70000));
    DeftNDArrayHandle h = call1("Cast", 1, &small, P("dtype", "float16"));
    DeftNDArrayHandle back = call1("Cast", 1, &h, P("dtype", "float32"));
    assert_values(back, 5, VALUES(1.5, -2.25, 65504, 1.1920928955078125e-07, INFINITY), 0);
    DeftNDArrayHandle bf = call1("Cast", 1, &small, P("dtype", "bfloat16"));
    DeftNDArrayHandle bf_back = call1("Cast", 1, &bf, P("dtype", "float64"));
    assert_values(bf_back, 5, VALUES(1.5, -2.25, 65536, 1.0011717677116394e-07, 70144), 0);
    free_all(9, (DeftNDArrayHandle[]){x, i32, u8, b, small, h, back, bf, bf_back});
}
END_TEST

START_TEST(test_where_broadcasts_condition_and_branches) {
    DeftNDArrayHandle cond = make(DEFT_INT32, 2, SHAPE(2, 1), VALUES(1, 0));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle y = make(DEFT_FLOAT32, 0, NULL, VALUES(-1));
    DeftNDArrayHandle w = call1("where", 3, (DeftNDArrayHandle[]){cond, x, y}, NO_PARAMS);
    assert_shape(w, 2, SHAPE(2, 3));
    assert_values(w, 6, VALUES(1, 2, 3, -1, -1, -1), 0);
    DeftNDArrayHandle yd = make(DEFT_FLOAT64, 0, NULL, VALUES(-1));
    ck_assert_call_fails("where", 3, ((DeftNDArrayHandle[]){cond, x, yd}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "operator 'where': input 1 has dtype float64");
    free_all(5, (DeftNDArrayHandle[]){cond, x, y, w, yd});
}
END_TEST

/* exp, tanh and sigmoid in float32 are deft's own (vectorised) polynomials:
 * within 4 ulp of double-precision libm over the whole float range (1 to 2
 * measured), exact at the special values. Results below FLT_MIN need only
 * stay below it (sigmoid of very negative x underflows to 0, as
 * 1 / (1 + expf(-x)) does). */
static double ulp_error(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got)) return got == (float)want ? 0 : INFINITY;
    if (fabs(want) < FLT_MIN) return fabs(got) < FLT_MIN ? 0 : INFINITY;
    double err = fabs((double)got - want);
    return err / (nextafterf((float)fabs(want), INFINITY) - (float)fabs(want));
}

static double reference(int op, double v) {
    return op == 0 ? exp(v) : op == 1 ? tanh(v) : 1 / (1 + exp(-v));
}

START_TEST(test_float32_exp_tanh_sigmoid_accuracy) {
    enum { SWEEP = 200001, SPECIAL = 12 };
    static float x[SWEEP + SPECIAL], y[SWEEP + SPECIAL];
    for (int i = 0; i < SWEEP; i++) x[i] = -110.0f + 220.0f * (float)i / (SWEEP - 1);
    const float special[SPECIAL] = {0.0f,       -0.0f,    1e-30f,   -1e-30f,   88.72283f, 88.72284f,
                                    -87.33654f, -103.97f, INFINITY, -INFINITY, NAN,       1e-8f};
    memcpy(x + SWEEP, special, sizeof special);
    const int64_t shape[1] = {SWEEP + SPECIAL};
    DeftNDArrayHandle in;
    ck_assert_ok(DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, x, sizeof x, &in));
    const char *ops[3] = {"exp", "tanh", "sigmoid"};
    for (int o = 0; o < 3; o++) {
        DeftNDArrayHandle out = call1(ops[o], 1, &in, NO_PARAMS);
        ck_assert_ok(DeftNDArrayCopyToHost(out, y, sizeof y));
        double worst = 0;
        int at = 0;
        for (int i = 0; i < SWEEP + SPECIAL; i++) {
            double e = ulp_error(y[i], reference(o, x[i]));
            if (e > worst) worst = e, at = i;
        }
        ck_assert_msg(worst <= 4, "%s(%.9g) is %.9g, %.1f ulp from %.9g", ops[o], x[at], y[at],
                      worst, reference(o, x[at]));
        ck_assert_ok(DeftNDArrayFree(out));
    }
    ck_assert_ok(DeftNDArrayFree(in));
}
END_TEST

START_TEST(test_rounding_ties_follow_mxnet) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(6), VALUES(2.5, -2.5, 0.5, -0.5, 1.5, -1.7));
    static const struct {
        const char *name;
        double want[6];
    } cases[] = {
        {"round", {3, -3, 1, -1, 2, -2}}, {"rint", {2, -3, 0, -1, 1, -2}},
        {"fix", {2, -2, 0, 0, 1, -1}},    {"trunc", {2, -2, 0, 0, 1, -1}},
        {"floor", {2, -3, 0, -1, 1, -2}}, {"ceil", {3, -2, 1, 0, 2, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DeftNDArrayHandle y = call1(cases[c].name, 1, &x, NO_PARAMS);
        assert_values(y, 6, cases[c].want, 0);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(0, 3, -2));
    DeftNDArrayHandle n = call1("logical_not", 1, &i, NO_PARAMS);
    assert_values(n, 3, VALUES(1, 0, 0), 0);
    ck_assert_call_fails("round", 1, &i, NO_PARAMS, DEFT_ERROR_TYPE,
                         "operator 'round': input 0 has dtype int32, expected float32 or float64");
    DeftNDArrayHandle e = make(DEFT_FLOAT64, 2, SHAPE(0, 3), NULL);
    DeftNDArrayHandle ez = call1("expm1", 1, &e, NO_PARAMS);
    assert_shape(ez, 2, SHAPE(0, 3));
    free_all(5, (DeftNDArrayHandle[]){x, i, n, e, ez});
}
END_TEST

/* The same-shape binary forms, hypot and the logical operators, against C. */
static double ref_math2(const char *op, double a, double b) {
    if (!strcmp(op, "_maximum")) return isnan(a) || a > b ? a : b;
    if (!strcmp(op, "_minimum")) return isnan(a) || a < b ? a : b;
    if (!strcmp(op, "_power")) return pow(a, b);
    if (!strcmp(op, "_hypot") || !strcmp(op, "broadcast_hypot")) return hypot(a, b);
    if (!strcmp(op, "_equal")) return a == b;
    if (!strcmp(op, "_not_equal")) return a != b;
    if (!strcmp(op, "_greater")) return a > b;
    if (!strcmp(op, "_greater_equal")) return a >= b;
    if (!strcmp(op, "_lesser")) return a < b;
    if (!strcmp(op, "_lesser_equal")) return a <= b;
    if (strstr(op, "logical_and")) return a != 0 && b != 0;
    if (strstr(op, "logical_or")) return a != 0 || b != 0;
    return (a != 0) != (b != 0); /* logical_xor */
}

START_TEST(test_same_shape_binary_forms_match_c) {
    const char *ops[] = {"_maximum",    "_minimum",      "_power",       "_hypot",
                         "_equal",      "_not_equal",    "_greater",     "_greater_equal",
                         "_lesser",     "_lesser_equal", "_logical_and", "_logical_or",
                         "_logical_xor"};
    const double a[6] = {0.5, -1, 2, 0, 3, 1.5}, b[6] = {2, -1, 0.5, 0, -0.25, 1.5};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int d = 0; d < 2; d++) {
            int dtype = d ? DEFT_FLOAT64 : DEFT_FLOAT32;
            DeftNDArrayHandle in[2] = {make(dtype, 2, SHAPE(2, 3), a),
                                       make(dtype, 2, SHAPE(2, 3), b)};
            DeftNDArrayHandle y = call1(ops[o], 2, in, NO_PARAMS);
            double want[6];
            for (int i = 0; i < 6; i++) want[i] = ref_math2(ops[o], a[i], b[i]);
            assert_values(y, 6, want, d ? 1e-15 : 1e-6);
            free_all(3, (DeftNDArrayHandle[]){in[0], in[1], y});
        }
    }
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    DeftNDArrayHandle z = make(DEFT_FLOAT32, 1, SHAPE(2), NULL);
    DeftNDArrayHandle xz[2] = {x, z};
    ck_assert_call_fails("_maximum", 2, xz, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator '_maximum': input 1 has shape (2,), expected (3,)");
    free_all(2, xz);
}
END_TEST

START_TEST(test_hypot_and_logical_broadcast_and_scalar_forms) {
    DeftNDArrayHandle a = make(DEFT_FLOAT64, 2, SHAPE(2, 2), VALUES(3, -5, 0, 1e300));
    DeftNDArrayHandle b = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(4, 12));
    DeftNDArrayHandle ab[2] = {a, b};
    DeftNDArrayHandle h = call1("broadcast_hypot", 2, ab, NO_PARAMS);
    assert_values(h, 4, VALUES(5, 13, 4, 1e300), 1e-15); /* no overflow */
    DeftNDArrayHandle hs = call1("_hypot_scalar", 1, &a, P("scalar", "4", "is_int", "False"));
    assert_values(hs, 4, VALUES(5, sqrt(41), 4, 1e300), 1e-15);
    DeftNDArrayHandle i = make(DEFT_INT32, 2, SHAPE(2, 2), VALUES(3, 0, -2, 0));
    DeftNDArrayHandle j = make(DEFT_INT32, 1, SHAPE(2), VALUES(0, 7));
    DeftNDArrayHandle ij[2] = {i, j};
    DeftNDArrayHandle land = call1("broadcast_logical_and", 2, ij, NO_PARAMS);
    assert_values(land, 4, VALUES(0, 0, 0, 0), 0);
    DeftNDArrayHandle lor = call1("broadcast_logical_or", 2, ij, NO_PARAMS);
    assert_values(lor, 4, VALUES(1, 1, 1, 1), 0);
    DeftNDArrayHandle lxor = call1("broadcast_logical_xor", 2, ij, NO_PARAMS);
    assert_values(lxor, 4, VALUES(1, 1, 1, 1), 0);
    DeftNDArrayHandle sand = call1("_logical_and_scalar", 1, &i, P("scalar", "1"));
    assert_values(sand, 4, VALUES(1, 0, 1, 0), 0);
    DeftNDArrayHandle sor = call1("_logical_or_scalar", 1, &i, P("scalar", "0"));
    assert_values(sor, 4, VALUES(1, 0, 1, 0), 0);
    DeftNDArrayHandle sxor = call1("_logical_xor_scalar", 1, &i, P("scalar", "2"));
    assert_values(sxor, 4, VALUES(0, 1, 0, 1), 0);
    DeftNDArrayHandle ih = call1("_hypot", 2, (DeftNDArrayHandle[]){i, i}, NO_PARAMS);
    assert_values(ih, 4, VALUES(4, 0, 2, 0), 0); /* sqrt(18), sqrt(8) truncated */
    ck_assert_call_fails("_hypot_scalar", 1, &a, P("is_int", "maybe"), DEFT_ERROR_PARSE,
                         "parameter 'is_int' is 'maybe', expected true or false");
    free_all(12, (DeftNDArrayHandle[]){a, b, h, hs, i, j, land, lor, lxor, sand, sor, sxor});
    ck_assert_ok(DeftNDArrayFree(ih));
}
END_TEST

/* ---- NumPy's operators: floor division, remainder, bitwise, shifts, bool comparisons ---- */

/* The array's dtype code. */
START_TEST(test_floor_divide_and_mod_follow_python) {
    DeftNDArrayHandle a = make(DEFT_INT32, 1, SHAPE(6), VALUES(7, -7, 7, -7, 0, 5));
    DeftNDArrayHandle b = make(DEFT_INT32, 1, SHAPE(6), VALUES(2, 2, -2, -2, 3, 0));
    DeftNDArrayHandle ab[2] = {a, b};
    DeftNDArrayHandle q = call1("_npi_floor_divide", 2, ab, NO_PARAMS);
    assert_values(q, 6, VALUES(3, -4, -4, 3, 0, 0), 0); /* x // 0 is 0, as NumPy's */
    DeftNDArrayHandle r = call1("_npi_mod", 2, ab, NO_PARAMS);
    assert_values(r, 6, VALUES(1, 1, -1, -1, 0, 0), 0);
    DeftNDArrayHandle qs = call1("_npi_floor_divide_scalar", 1, &a, P("scalar", "-3"));
    assert_values(qs, 6, VALUES(-3, 2, -3, 2, 0, -2), 0);
    DeftNDArrayHandle rq = call1("_npi_rfloor_divide_scalar", 1, &b, P("scalar", "-7"));
    assert_values(rq, 6, VALUES(-4, -4, 3, 3, -3, 0), 0);
    DeftNDArrayHandle f = make(DEFT_FLOAT64, 1, SHAPE(6), VALUES(7, -7, 7.5, -7.5, 1, 7));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(6), VALUES(2, 2, -2, -2, 0, 0.7));
    DeftNDArrayHandle fg[2] = {f, g};
    DeftNDArrayHandle fq = call1("_npi_floor_divide", 2, fg, NO_PARAMS);
    assert_values(fq, 6, VALUES(3, -4, -4, 3, INFINITY, 10), 0); /* 7 // 0.7 is 10, as Python */
    DeftNDArrayHandle fr = call1("_npi_mod", 2, fg, NO_PARAMS);
    assert_values(fr, 6, VALUES(1, 1, -0.5, -1.5, NAN, fmod(7, 0.7)), 1e-15);
    DeftNDArrayHandle mx = call1("broadcast_mod", 2, fg, NO_PARAMS); /* MXNet's: x mod 0 is 0 */
    assert_values(mx, 6, VALUES(1, 1, -0.5, -1.5, 0, fmod(7, 0.7)), 1e-15);
    free_all(11, (DeftNDArrayHandle[]){a, b, q, r, qs, rq, f, g, fq, fr, mx});
}
END_TEST

START_TEST(test_bitwise_and_shifts_follow_numpy) {
    DeftNDArrayHandle a = make(DEFT_INT32, 1, SHAPE(4), VALUES(12, -1, 5, -8));
    DeftNDArrayHandle b = make(DEFT_INT32, 1, SHAPE(4), VALUES(10, 3, 0, 1));
    DeftNDArrayHandle ab[2] = {a, b};
    DeftNDArrayHandle band = call1("_npi_bitwise_and", 2, ab, NO_PARAMS);
    assert_values(band, 4, VALUES(8, 3, 0, 0), 0);
    DeftNDArrayHandle bor = call1("_npi_bitwise_or", 2, ab, NO_PARAMS);
    assert_values(bor, 4, VALUES(14, -1, 5, -7), 0);
    DeftNDArrayHandle bxor = call1("_npi_bitwise_xor", 2, ab, NO_PARAMS);
    assert_values(bxor, 4, VALUES(6, -4, 5, -7), 0);
    DeftNDArrayHandle bnot = call1("_npi_bitwise_not", 1, &a, NO_PARAMS);
    assert_values(bnot, 4, VALUES(-13, 0, -6, 7), 0);
    /* counts of the width or more, and negative ones, give 0 (or -1 shifting a negative right) */
    DeftNDArrayHandle n = make(DEFT_INT32, 1, SHAPE(4), VALUES(1, 31, 32, -1));
    DeftNDArrayHandle an[2] = {a, n};
    DeftNDArrayHandle ls = call1("_npi_bitwise_left_shift", 2, an, NO_PARAMS);
    assert_values(ls, 4, VALUES(24, -2147483648.0, 0, 0), 0);
    DeftNDArrayHandle rs = call1("_npi_bitwise_right_shift", 2, an, NO_PARAMS);
    assert_values(rs, 4, VALUES(6, -1, 0, -1), 0);
    DeftNDArrayHandle ls1 = call1("_npi_bitwise_left_shift_scalar", 1, &a, P("scalar", "2"));
    assert_values(ls1, 4, VALUES(48, -4, 20, -32), 0);
    DeftNDArrayHandle rls = call1("_npi_rbitwise_left_shift_scalar", 1, &b, P("scalar", "1"));
    assert_values(rls, 4, VALUES(1024, 8, 1, 2), 0);
    DeftNDArrayHandle rrs = call1("_npi_rbitwise_right_shift_scalar", 1, &b, P("scalar", "-64"));
    assert_values(rrs, 4, VALUES(-1, -8, -64, -32), 0);
    DeftNDArrayHandle u = make(DEFT_UINT8, 1, SHAPE(2), VALUES(0, 200));
    DeftNDArrayHandle unot = call1("_npi_bitwise_not", 1, &u, NO_PARAMS);
    assert_values(unot, 2, VALUES(255, 55), 0);
    DeftNDArrayHandle urs = call1("_npi_bitwise_right_shift_scalar", 1, &u, P("scalar", "9"));
    assert_values(urs, 2, VALUES(0, 0), 0);
    free_all(15, (DeftNDArrayHandle[]){a, b, band, bor, bxor, bnot, n, ls, rs, ls1, rls, rrs, u,
                                       unot, urs});
}
END_TEST

START_TEST(test_bitwise_ops_on_bool_are_logical_and_floats_are_refused) {
    DeftNDArrayHandle p = make(DEFT_BOOL, 1, SHAPE(4), VALUES(1, 1, 0, 0));
    DeftNDArrayHandle q = make(DEFT_BOOL, 1, SHAPE(4), VALUES(1, 0, 1, 0));
    DeftNDArrayHandle pq[2] = {p, q};
    const char *names[3] = {"_npi_bitwise_and", "_npi_bitwise_or", "_npi_bitwise_xor"};
    const double want[3][4] = {{1, 0, 0, 0}, {1, 1, 1, 0}, {0, 1, 1, 0}};
    for (int k = 0; k < 3; k++) {
        DeftNDArrayHandle r = call1(names[k], 2, pq, NO_PARAMS);
        ck_assert_int_eq(dtype_of(r), DEFT_BOOL);
        assert_values(r, 4, want[k], 0);
        ck_assert_ok(DeftNDArrayFree(r));
    }
    DeftNDArrayHandle inv = call1("_npi_bitwise_not", 1, &p, NO_PARAMS);
    ck_assert_int_eq(dtype_of(inv), DEFT_BOOL);
    assert_values(inv, 4, VALUES(0, 0, 1, 1), 0); /* logical, not 254 */
    DeftNDArrayHandle ps = call1("_npi_bitwise_or_scalar", 1, &p, P("scalar", "2"));
    assert_values(ps, 4, VALUES(1, 1, 1, 1), 0); /* the scalar as a bool */
    ck_assert_call_fails("_npi_bitwise_left_shift", 2, pq, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype bool, which has no kernel (expected int32, int64 or "
                         "uint8)");
    DeftNDArrayHandle f = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_call_fails("_npi_bitwise_and", 2, ((DeftNDArrayHandle[]){f, f}), NO_PARAMS,
                         DEFT_ERROR_TYPE,
                         "input 0 has dtype float32, which has no kernel (expected int32, int64, "
                         "uint8 or bool)");
    ck_assert_call_fails("_npi_bitwise_not", 1, &f, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype float32, expected int32, int64, uint8 or bool");
    ck_assert_call_fails("broadcast_add", 2, pq, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype bool, which has no kernel");
    free_all(5, (DeftNDArrayHandle[]){p, q, inv, ps, f});
}
END_TEST

START_TEST(test_numpy_comparisons_give_bool_and_compare_scalars_exactly) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, NAN));
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(2, 2));
    DeftNDArrayHandle ab[2] = {a, b};
    const char *names[6] = {"_npi_equal", "_npi_not_equal",     "_npi_greater",
                            "_npi_less",  "_npi_greater_equal", "_npi_less_equal"};
    const double want[6][4] = {{0, 1, 0, 0}, {1, 0, 1, 1}, {0, 0, 1, 0},
                               {1, 0, 0, 0}, {0, 1, 1, 0}, {1, 1, 0, 0}};
    for (int k = 0; k < 6; k++) {
        DeftNDArrayHandle r = call1(names[k], 2, ab, NO_PARAMS);
        ck_assert_int_eq(dtype_of(r), DEFT_BOOL);
        assert_values(r, 4, want[k], 0);
        ck_assert_ok(DeftNDArrayFree(r));
    }
    /* MXNet's comparison keeps the input's dtype */
    DeftNDArrayHandle mx = call1("broadcast_greater", 2, ab, NO_PARAMS);
    ck_assert_int_eq(dtype_of(mx), DEFT_FLOAT32);
    /* an integer array against 2.5 is not truncated; int64 against an integer above 2^53 is exact
     */
    DeftNDArrayHandle i = make(DEFT_INT32, 1, SHAPE(3), VALUES(2, 3, -3));
    DeftNDArrayHandle ge = call1("_npi_greater_equal_scalar", 1, &i, P("scalar", "2.5"));
    assert_values(ge, 3, VALUES(0, 1, 0), 0);
    DeftNDArrayHandle big;
    int64_t value = (1LL << 53) + 1;
    ck_assert_ok(DeftNDArrayCreateFromData(SHAPE(1), 1, DEFT_INT64, DEFT_CPU, 0, &value,
                                           sizeof value, &big));
    DeftNDArrayHandle eq = call1("_npi_equal_scalar", 1, &big, P("scalar", "9007199254740992"));
    assert_values(eq, 1, VALUES(0), 0); /* as doubles, both are 2^53 */
    DeftNDArrayHandle bl = make(DEFT_BOOL, 1, SHAPE(2), VALUES(1, 0));
    DeftNDArrayHandle bls = call1("_npi_less_scalar", 1, &bl, P("scalar", "0.5"));
    assert_values(bls, 2, VALUES(0, 1), 0);
    ck_assert_call_fails("_npi_equal", 2, ((DeftNDArrayHandle[]){a, i}), NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 1 has dtype int32, expected float32");
    free_all(9, (DeftNDArrayHandle[]){a, b, mx, i, ge, big, eq, bl, bls});
}
END_TEST

/* The AVX-512 and AVX2 (F16C) float16 conversions agree with the bit versions: every float16
 * widened, and float32 values around every rounding case narrowed (ties,
 * carries into the exponent, overflow to infinity, float16 denormals,
 * float32 denormals, infinities, NaN), bit for bit (NaNs: both NaN). */
static bool same_half(uint16_t a, uint16_t b) {
    bool nan_a = (a & 0x7C00) == 0x7C00 && (a & 0x3FF),
         nan_b = (b & 0x7C00) == 0x7C00 && (b & 0x3FF);
    return nan_a || nan_b ? nan_a && nan_b : a == b;
}

START_TEST(test_float16_conversions_agree_across_simd_variants) {
    enum { N = 1 << 16 };
    static uint16_t halves[N], narrow[3][N];
    static float wide[3][N], floats[N];
    for (int i = 0; i < N; i++) halves[i] = (uint16_t)i;
    uint32_t state = 12345;
    for (int i = 0; i < N; i++) { /* float32 bit patterns near float16's range, and some anywhere */
        state = state * 1664525u + 1013904223u;
        uint32_t bits = i % 4 ? (state & 0x80001FFFu) | ((uint32_t)(96 + i % 48) << 23) |
                                    ((uint32_t)i << 13 & 0x7FE000u)
                              : state;
        memcpy(&floats[i], &bits, sizeof bits);
    }
    for (int level = DEFT_SIMD_BASELINE; level <= DEFT_SIMD_AVX512; level++) {
        deft_simd_cap(level);
        deft_half_widen(halves, 1, false, wide[level], N);
        deft_half_narrow(floats, false, narrow[level], 1, N);
    }
    deft_simd_cap(DEFT_SIMD_AVX512);
    for (int level = DEFT_SIMD_AVX2; level <= DEFT_SIMD_AVX512; level++)
        for (int i = 0; i < N; i++) {
            uint32_t a, b;
            memcpy(&a, &wide[0][i], sizeof a), memcpy(&b, &wide[level][i], sizeof b);
            ck_assert_msg(a == b || (isnan(wide[0][i]) && isnan(wide[level][i])),
                          "float16 0x%04x widens to 0x%08x, SIMD level %d to 0x%08x", i, a, level,
                          b);
            ck_assert_msg(same_half(narrow[0][i], narrow[level][i]),
                          "%.9g narrows to 0x%04x, SIMD level %d to 0x%04x", floats[i],
                          narrow[0][i], level, narrow[level][i]);
        }
}
END_TEST

START_TEST(test_half_arithmetic_computes_through_float32) {
    const int dtypes[2] = {DEFT_FLOAT16, DEFT_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        DeftNDArrayHandle a = make(dtypes[k], 1, SHAPE(4), VALUES(1, 2.5, -3, 0.25));
        DeftNDArrayHandle b = make(dtypes[k], 1, SHAPE(1), VALUES(2));
        DeftNDArrayHandle ab[2] = {a, b};
        DeftNDArrayHandle sum = call1("broadcast_add", 2, ab, NO_PARAMS);
        ck_assert_int_eq(dtype_of(sum), k == 0 ? DEFT_FLOAT16 : DEFT_BFLOAT16);
        assert_values(sum, 4, VALUES(3, 4.5, -1, 2.25), 0);
        DeftNDArrayHandle quot = call1("_div_scalar", 1, &a, P("scalar", "4"));
        assert_values(quot, 4, VALUES(0.25, 0.625, -0.75, 0.0625), 0);
        DeftNDArrayHandle sq = call1("square", 1, &a, NO_PARAMS);
        assert_values(sq, 4, VALUES(1, 6.25, 9, 0.0625), 0);
        DeftNDArrayHandle total = call1("sum", 1, &a, NO_PARAMS);
        assert_values(total, 1, VALUES(0.75), 0);
        DeftNDArrayHandle top = call1("max", 1, &a, NO_PARAMS);
        assert_values(top, 1, VALUES(2.5), 0);
        DeftNDArrayHandle avg = call1("mean", 1, &a, NO_PARAMS);
        assert_values(avg, 1, VALUES(0.1875), 0);
        free_all(8, (DeftNDArrayHandle[]){a, b, sum, quot, sq, total, top, avg});
    }
    /* one rounding, of the float32 result: 2049 is not a float16, 2048 + 1 rounds to even */
    DeftNDArrayHandle big = make(DEFT_FLOAT16, 1, SHAPE(1), VALUES(2048));
    DeftNDArrayHandle plus = call1("_plus_scalar", 1, &big, P("scalar", "1"));
    assert_values(plus, 1, VALUES(2048), 0);
    DeftNDArrayHandle plus3 = call1("_plus_scalar", 1, &big, P("scalar", "3"));
    assert_values(plus3, 1, VALUES(2052), 0);
    /* a float16 row long enough to cross the conversion blocks and broadcast */
    double values[600];
    for (int i = 0; i < 600; i++) values[i] = i % 7;
    DeftNDArrayHandle row = make(DEFT_FLOAT16, 1, SHAPE(600), values);
    DeftNDArrayHandle three = make(DEFT_FLOAT16, 1, SHAPE(1), VALUES(3));
    DeftNDArrayHandle times =
        call1("broadcast_mul", 2, (DeftNDArrayHandle[]){three, row}, NO_PARAMS);
    double want[600];
    for (int i = 0; i < 600; i++) want[i] = 3 * (i % 7);
    assert_values(times, 600, want, 0);
    DeftNDArrayHandle total = call1("sum", 1, &row, NO_PARAMS);
    double expect = 0;
    for (int i = 0; i < 600; i++) expect += i % 7;
    assert_values(total, 1, VALUES(expect), 0); /* 1795: exact in float16 */
    /* bfloat16 over the threads' split (the parallel path), against float32 rounded once */
    const int64_t n = 200003;
    double *v = malloc(sizeof(double) * n), *w = malloc(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(i % 256) / 4, w[i] = v[i] - 0.5;
    DeftNDArrayHandle f = make(DEFT_FLOAT32, 1, &n, v);
    DeftNDArrayHandle large = call1("Cast", 1, &f, P("dtype", "bfloat16"));
    DeftNDArrayHandle minus = call1("_minus_scalar", 1, &large, P("scalar", "0.5"));
    assert_values(minus, (int)n, w, 0); /* k / 4, k < 256: exact in bfloat16 */
    free(v), free(w);
    free_all(10,
             (DeftNDArrayHandle[]){big, plus, plus3, row, three, times, total, f, large, minus});
}
END_TEST

START_TEST(test_bool_reductions_and_where_condition) {
    DeftNDArrayHandle m = make(DEFT_BOOL, 2, SHAPE(2, 2), VALUES(1, 0, 0, 0));
    DeftNDArrayHandle any = call1("max", 1, &m, P("axis", "1"));
    ck_assert_int_eq(dtype_of(any), DEFT_BOOL);
    assert_values(any, 2, VALUES(1, 0), 0);
    DeftNDArrayHandle all = call1("min", 1, &m, NO_PARAMS);
    assert_values(all, 1, VALUES(0), 0);
    DeftNDArrayHandle count = call1("sum", 1, &m, NO_PARAMS); /* NumPy's: an int64 count */
    ck_assert_int_eq(dtype_of(count), DEFT_INT64);
    assert_values(count, 1, VALUES(1), 0);
    ck_assert_call_fails("argmax", 1, &m, NO_PARAMS, DEFT_ERROR_TYPE, "input 0 has dtype bool");
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle y = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(-1));
    DeftNDArrayHandle w = call1("where", 3, (DeftNDArrayHandle[]){m, x, y}, NO_PARAMS);
    assert_values(w, 4, VALUES(1, -1, -1, -1), 0);
    /* MXNet's functions exact on 0 and 1 take bool and give bool */
    DeftNDArrayHandle r = make(DEFT_BOOL, 1, SHAPE(2), VALUES(0, 1));
    DeftNDArrayHandle mr[2] = {m, r};
    const char *names[4] = {"broadcast_maximum", "broadcast_logical_and", "broadcast_equal",
                            "broadcast_lesser"};
    const double want[4][4] = {{1, 1, 0, 1}, {0, 0, 0, 0}, {0, 0, 1, 0}, {0, 1, 0, 1}};
    for (int k = 0; k < 4; k++) {
        DeftNDArrayHandle h = call1(names[k], 2, mr, NO_PARAMS);
        ck_assert_int_eq(dtype_of(h), DEFT_BOOL);
        assert_values(h, 4, want[k], 0);
        ck_assert_ok(DeftNDArrayFree(h));
    }
    DeftNDArrayHandle n = call1("logical_not", 1, &m, NO_PARAMS);
    ck_assert_int_eq(dtype_of(n), DEFT_BOOL);
    assert_values(n, 4, VALUES(0, 1, 1, 1), 0);
    ck_assert_call_fails("broadcast_mul", 2, mr, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 0 has dtype bool, which has no kernel");
    free_all(9, (DeftNDArrayHandle[]){m, any, all, x, y, w, r, n, count});
}
END_TEST

static Suite *elemwise_suite(void) {
    Suite *suite = suite_create("elementwise ops");
    TCase *tc = tcase_create("elemwise");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_unary_float_ops_match_libm);
    tcase_add_test(tc, test_floor_divide_and_mod_follow_python);
    tcase_add_test(tc, test_bitwise_and_shifts_follow_numpy);
    tcase_add_test(tc, test_bitwise_ops_on_bool_are_logical_and_floats_are_refused);
    tcase_add_test(tc, test_numpy_comparisons_give_bool_and_compare_scalars_exactly);
    tcase_add_test(tc, test_half_arithmetic_computes_through_float32);
    tcase_add_test(tc, test_float16_conversions_agree_across_simd_variants);
    tcase_add_test(tc, test_bool_reductions_and_where_condition);
    tcase_add_test(tc, test_float32_exp_tanh_sigmoid_accuracy);
    tcase_add_test(tc, test_unary_integer_ops_wrap_like_twos_complement);
    tcase_add_test(tc, test_activation_and_clip);
    tcase_add_test(tc, test_broadcast_ops_every_dtype_and_shape_pattern);
    tcase_add_test(tc, test_broadcast_rejects_incompatible_shapes);
    tcase_add_test(tc, test_special_values_propagate);
    tcase_add_test(tc, test_scalar_ops_and_reversed_forms);
    tcase_add_test(tc, test_large_arrays_use_the_parallel_path_correctly);
    tcase_add_test(tc, test_cast_between_dtypes);
    tcase_add_test(tc, test_where_broadcasts_condition_and_branches);
    tcase_add_test(tc, test_rounding_ties_follow_mxnet);
    tcase_add_test(tc, test_same_shape_binary_forms_match_c);
    tcase_add_test(tc, test_hypot_and_logical_broadcast_and_scalar_forms);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(elemwise_suite());
}
