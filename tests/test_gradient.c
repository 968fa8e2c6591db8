/*
 * Gradients of operators against central finite differences in float64:
 * for y = op(x...), the gradient graph's d/dx of sum(y * w), with w the head
 * gradient, must match (f(x + h e_j) - f(x - h e_j)) / 2h with f = sum(y * w),
 * to a relative error under 1e-6.
 */
#include "op_helpers.h"

typedef struct grad_case {
    const char *op;
    const char *const *params;
    int nin;
    int ndim[3];
    int64_t shape[3][4];
    double lo, hi;        /* inputs drawn from [lo, hi) */
    unsigned fixed;       /* bit k: input k is not differentiated (labels, indices) */
    const double *values; /* exact values for fixed inputs, if any (in order) */
} grad_case_t;

#define S(...)                                                                                     \
    { __VA_ARGS__ }

static DeftSymbolHandle var(const char *name) {
    DeftSymbolHandle s;
    ck_assert_ok(DeftSymbolCreateVariable(name, &s));
    return s;
}

static double uniform(uint64_t *state, double lo, double hi) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(*state >> 11) / 9007199254740992.0;
}

/* f(inputs) = sum(op(inputs) * w), evaluated by the executor. */
static double objective(DeftCachedOpHandle forward, int nin, DeftNDArrayHandle *in, const double *w,
                        int64_t nw) {
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_msg(DeftCachedOpInvoke(forward, nin, in, &nout, out) == 0, "%s", DeftGetLastError());
    int64_t n;
    double *y = read_all(out[0], &n), f = 0;
    ck_assert_int_eq(n, nw);
    for (int64_t i = 0; i < n; i++) f += y[i] * w[i];
    free(y);
    ck_assert_ok(DeftNDArrayFree(out[0]));
    return f;
}

static void check_case(const grad_case_t *c) {
    uint64_t rng = 12345;
    DeftSymbolHandle vars[3], y, grad;
    char names[3][8];
    for (int i = 0; i < c->nin; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        vars[i] = var(names[i]);
    }
    int np = count_params(c->params);
    const char *keys[16], *vals[16];
    for (int i = 0; i < np; i++) keys[i] = c->params[2 * i], vals[i] = c->params[2 * i + 1];
    ck_assert_ok(DeftSymbolCreateAtomic(op_named(c->op), np, keys, vals, &y));
    ck_assert_msg(DeftSymbolCompose(y, "y", c->nin, NULL, vars) == 0, "%s: %s", c->op,
                  DeftGetLastError());
    const char *wrt[3];
    int nwrt = 0;
    for (int i = 0; i < c->nin; i++)
        if (!(c->fixed & (1u << i))) wrt[nwrt++] = names[i];
    ck_assert_msg(DeftSymbolGradient(y, nwrt, wrt, &grad) == 0, "%s: %s", c->op,
                  DeftGetLastError());

    DeftNDArrayHandle in[3];
    double *x[3];
    int64_t count[3];
    const double *fixed_values = c->values;
    for (int i = 0; i < c->nin; i++) {
        count[i] = count_of(c->ndim[i], c->shape[i]);
        x[i] = malloc(sizeof(double) * (size_t)(count[i] ? count[i] : 1));
        for (int64_t j = 0; j < count[i]; j++)
            x[i][j] = (c->fixed & (1u << i)) && fixed_values ? *fixed_values++
                                                             : uniform(&rng, c->lo, c->hi);
        in[i] = make(DEFT_FLOAT64, c->ndim[i], c->shape[i], x[i]);
    }
    DeftCachedOpHandle forward, backward;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &forward));
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &backward));
    /* the output's shape, for the head gradient */
    DeftNDArrayHandle y0[1] = {NULL};
    int nout = 1;
    ck_assert_msg(DeftCachedOpInvoke(forward, c->nin, in, &nout, y0) == 0, "%s: %s", c->op,
                  DeftGetLastError());
    int64_t yshape[DEFT_MAX_NDIM], nw;
    int yndim;
    ck_assert_ok(DeftNDArrayGetShape(y0[0], yshape, DEFT_MAX_NDIM, &yndim));
    nw = count_of(yndim, yshape);
    double *w = malloc(sizeof(double) * (size_t)(nw ? nw : 1));
    for (int64_t j = 0; j < nw; j++) w[j] = uniform(&rng, -1, 1);
    DeftNDArrayHandle head = make(DEFT_FLOAT64, yndim, yshape, w);
    /* analytic: inputs in the gradient symbol's argument order */
    int nargs;
    const char *const *arg_names;
    ck_assert_ok(DeftSymbolListArguments(grad, &nargs, &arg_names));
    ck_assert_int_eq(nargs, c->nin + 1);
    DeftNDArrayHandle grad_in[4];
    for (int a = 0; a < nargs; a++) {
        grad_in[a] = head;
        for (int i = 0; i < c->nin; i++)
            if (strcmp(arg_names[a], names[i]) == 0) grad_in[a] = in[i];
    }
    DeftNDArrayHandle results[4] = {NULL, NULL, NULL, NULL};
    nout = 4;
    ck_assert_msg(DeftCachedOpInvoke(backward, nargs, grad_in, &nout, results) == 0, "%s: %s",
                  c->op, DeftGetLastError());
    ck_assert_int_eq(nout, 1 + nwrt);
    int r = 1;
    for (int i = 0; i < c->nin; i++) {
        if (c->fixed & (1u << i)) continue;
        int64_t n;
        double *analytic = read_all(results[r++], &n);
        ck_assert_int_eq(n, count[i]);
        for (int64_t j = 0; j < count[i]; j++) {
            const double h = 1e-5 * (1 + fabs(x[i][j]));
            double saved = x[i][j];
            x[i][j] = saved + h;
            set_values(in[i], count[i], x[i]);
            double up = objective(forward, c->nin, in, w, nw);
            x[i][j] = saved - h;
            set_values(in[i], count[i], x[i]);
            double down = objective(forward, c->nin, in, w, nw);
            x[i][j] = saved;
            set_values(in[i], count[i], x[i]);
            double numeric = (up - down) / (2 * h);
            double scale = fmax(1.0, fmax(fabs(numeric), fabs(analytic[j])));
            ck_assert_msg(fabs(numeric - analytic[j]) <= 1e-6 * scale,
                          "%s: d/d in%d[%lld] is %.12g, finite differences give %.12g", c->op, i,
                          (long long)j, analytic[j], numeric);
        }
        free(analytic);
    }
    for (int i = 0; i < c->nin; i++) {
        free(x[i]);
        ck_assert_ok(DeftNDArrayFree(in[i]));
        ck_assert_ok(DeftSymbolFree(vars[i]));
    }
    for (int k = 0; k < 1 + nwrt; k++) ck_assert_ok(DeftNDArrayFree(results[k]));
    free(w);
    free_all(2, (DeftNDArrayHandle[]){head, y0[0]});
    ck_assert_ok(DeftCachedOpFree(forward));
    ck_assert_ok(DeftCachedOpFree(backward));
    ck_assert_ok(DeftSymbolFree(y));
    ck_assert_ok(DeftSymbolFree(grad));
}

#define UNARY(name, lo, hi)                                                                        \
    { name, NO_PARAMS, 1, {2}, {{2, 3}}, lo, hi, 0, NULL }
#define BINARY(name, lo, hi)                                                                       \
    { name, NO_PARAMS, 2, {2, 2}, {{2, 3}, {2, 3}}, lo, hi, 0, NULL }
#define BCAST(name, lo, hi)                                                                        \
    { name, NO_PARAMS, 2, {2, 1}, {{2, 3}, {3}}, lo, hi, 0, NULL }
#define SCALAR(name, s, lo, hi)                                                                    \
    { name, P("scalar", s), 1, {2}, {{2, 3}}, lo, hi, 0, NULL }

static const grad_case_t cases[] = {
    UNARY("negative", -2, 2),
    UNARY("abs", 0.2, 2),
    UNARY("exp", -1, 1),
    UNARY("log", 0.5, 2),
    UNARY("sqrt", 0.5, 2),
    UNARY("square", -2, 2),
    UNARY("rsqrt", 0.5, 2),
    UNARY("sin", -2, 2),
    UNARY("cos", -2, 2),
    UNARY("tanh", -1, 1),
    UNARY("sigmoid", -2, 2),
    UNARY("relu", 0.1, 1),
    UNARY("softrelu", -2, 2),
    UNARY("erf", -1, 1),
    UNARY("gelu", -2, 2),
    {"Activation", P("act_type", "tanh"), 1, {2}, {{2, 3}}, -1, 1, 0, NULL},
    {"Activation", P("act_type", "softrelu"), 1, {2}, {{2, 3}}, -1, 1, 0, NULL},
    {"clip", P("a_min", "-0.5", "a_max", "0.5"), 1, {1}, {{6}}, -0.4, 0.4, 0, NULL},
    BINARY("elemwise_add", -1, 1),
    BINARY("elemwise_sub", -1, 1),
    BINARY("elemwise_mul", -1, 1),
    BINARY("elemwise_div", 0.5, 2),
    BCAST("broadcast_add", -1, 1),
    BCAST("broadcast_sub", -1, 1),
    BCAST("broadcast_mul", -1, 1),
    BCAST("broadcast_div", 0.5, 2),
    BCAST("broadcast_power", 0.5, 2),
    {"broadcast_maximum", NO_PARAMS, 2, {2, 2}, {{2, 3}, {1, 3}}, -1, 1, 0, NULL},
    {"broadcast_minimum", NO_PARAMS, 2, {2, 2}, {{2, 3}, {2, 1}}, -1, 1, 0, NULL},
    SCALAR("_plus_scalar", "2", -1, 1),
    SCALAR("_minus_scalar", "2", -1, 1),
    SCALAR("_rminus_scalar", "2", -1, 1),
    SCALAR("_mul_scalar", "3", -1, 1),
    SCALAR("_div_scalar", "4", -1, 1),
    SCALAR("_rdiv_scalar", "2", 0.5, 2),
    SCALAR("_power_scalar", "3", 0.5, 2),
    SCALAR("_rpower_scalar", "2", -1, 1),
    SCALAR("_maximum_scalar", "0", 0.1, 1),
    SCALAR("_minimum_scalar", "0", 0.1, 1),
};

START_TEST(test_gradient_matches_finite_differences) {
    check_case(&cases[_i]);
}
END_TEST

START_TEST(test_gradient_errors) {
    DeftSymbolHandle x = var("x"), grad = NULL, y;
    ck_assert_ok(DeftSymbolCreateAtomic(op_named("argmax"), 0, NULL, NULL, &y));
    ck_assert_ok(DeftSymbolCompose(y, "am", 1, NULL, &x));
    ck_assert_fails(DeftSymbolGradient(y, 1, (const char *const[]){"x"}, &grad),
                    DEFT_ERROR_NOT_IMPLEMENTED, "operator 'argmax' (node 'am') has no gradient");
    ck_assert_fails(DeftSymbolGradient(y, 1, (const char *const[]){"z"}, &grad), DEFT_ERROR_VALUE,
                    "wrt[0] is 'z', which is not an argument");
    ck_assert_ptr_null(grad);
    ck_assert_ok(DeftSymbolFree(y));
    ck_assert_ok(DeftSymbolFree(x));
}
END_TEST

static Suite *gradient_suite(void) {
    Suite *suite = suite_create("gradients");
    TCase *tc = tcase_create("gradient");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_gradient_matches_finite_differences, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_gradient_errors);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(gradient_suite());
}
