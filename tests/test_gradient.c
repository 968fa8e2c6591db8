/*
 * Gradients of operators against central finite differences in float64:
 * for y = op(x...), the gradient graph's d/dx of sum(y * w), with w the head
 * gradient, must match (f(x + h e_j) - f(x - h e_j)) / 2h with f = sum(y * w),
 * to a relative error under 1e-6.
 *
 * Every family keeps its cases in tests/gradients/<family>.inc (a list of
 * grad_case_t initialisers, grad_cases.h), which CMake collects into
 * gradient_cases.inc; test_export_round_trip runs the same cases. Every
 * operator with a gradient must have a case here (or say why not in
 * `untested`): test_every_gradient_has_a_case fails otherwise.
 */
#include "grad_cases.h"
#include "symbol_helpers.h"

#include "core/op/registry.h"

#define MAX_OUT 4

/* f(inputs) = sum over outputs of sum(output * w), evaluated by the executor. */
static double objective(DeftCachedOpHandle forward, int nin, DeftNDArrayHandle *in,
                        double *const *w, const int64_t *nw, int nouts) {
    DeftNDArrayHandle out[MAX_OUT] = {NULL};
    int nout = MAX_OUT;
    ck_assert_msg(DeftCachedOpInvoke(forward, nin, in, &nout, out) == 0, "%s", DeftGetLastError());
    ck_assert_int_eq(nout, nouts);
    double f = 0;
    for (int o = 0; o < nout; o++) {
        int64_t n;
        double *y = read_all(out[o], &n);
        ck_assert_int_eq(n, nw[o]);
        for (int64_t i = 0; i < n; i++) f += y[i] * w[o][i];
        free(y);
        ck_assert_ok(DeftNDArrayFree(out[o]));
    }
    return f;
}

static DeftSymbolHandle build_op(const grad_case_t *c, DeftSymbolHandle *vars) {
    int np = count_params(c->params);
    const char *keys[16], *vals[16];
    for (int i = 0; i < np; i++) keys[i] = c->params[2 * i], vals[i] = c->params[2 * i + 1];
    DeftSymbolHandle y;
    ck_assert_ok(DeftSymbolCreateAtomic(op_named(c->op), np, keys, vals, &y));
    ck_assert_msg(DeftSymbolCompose(y, "y", c->nin, NULL, vars) == 0, "%s: %s", c->op,
                  DeftGetLastError());
    return y;
}

/* Compare d/d input i of the objective, analytic against central differences. */
static void compare_input(const grad_case_t *c, int i, DeftCachedOpHandle forward,
                          DeftNDArrayHandle *in, double *x, int64_t count, const double *analytic,
                          double *const *w, const int64_t *nw, int nouts) {
    for (int64_t j = 0; j < count; j++) {
        const double h = 1e-5 * (1 + fabs(x[j]));
        double saved = x[j];
        x[j] = saved + h;
        set_values(in[i], count, x);
        double up = objective(forward, c->nin, in, w, nw, nouts);
        x[j] = saved - h;
        set_values(in[i], count, x);
        double down = objective(forward, c->nin, in, w, nw, nouts);
        x[j] = saved;
        set_values(in[i], count, x);
        double numeric = (up - down) / (2 * h);
        double scale = fmax(1.0, fmax(fabs(numeric), fabs(analytic[j])));
        ck_assert_msg(fabs(numeric - analytic[j]) <= 1e-6 * scale,
                      "%s: d/d in%d[%lld] is %.12g, finite differences give %.12g", c->op, i,
                      (long long)j, analytic[j], numeric);
    }
}

static void check_case(const grad_case_t *c) {
    uint64_t rng = GRAD_SEED;
    DeftSymbolHandle vars[GRAD_MAX_IN], grad;
    char names[GRAD_MAX_IN][16];
    int was_training;
    ck_assert_ok(DeftAutogradSetIsTraining(c->train, &was_training));
    for (int i = 0; i < c->nin; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        vars[i] = var(names[i]);
    }
    DeftSymbolHandle y = build_op(c, vars);
    const char *wrt[GRAD_MAX_IN];
    int nwrt = 0;
    for (int i = 0; i < c->nin; i++)
        if (!(c->fixed & (1u << i))) wrt[nwrt++] = names[i];
    ck_assert_msg(DeftSymbolGradient(y, nwrt, wrt, &grad) == 0, "%s: %s", c->op,
                  DeftGetLastError());

    DeftNDArrayHandle in[GRAD_MAX_IN];
    double *x[GRAD_MAX_IN];
    int64_t count[GRAD_MAX_IN];
    grad_case_values(c, &rng, x, count);
    for (int i = 0; i < c->nin; i++) in[i] = make(DEFT_FLOAT64, c->ndim[i], c->shape[i], x[i]);
    DeftCachedOpHandle forward, backward;
    ck_assert_ok(DeftCachedOpCreate(y, 0, &forward));
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &backward));
    /* the outputs' shapes, for the head gradients (one weight array per output) */
    DeftNDArrayHandle y0[MAX_OUT] = {NULL};
    int nouts = MAX_OUT;
    ck_assert_msg(DeftCachedOpInvoke(forward, c->nin, in, &nouts, y0) == 0, "%s: %s", c->op,
                  DeftGetLastError());
    double *w[MAX_OUT];
    int64_t nw[MAX_OUT];
    DeftNDArrayHandle heads[MAX_OUT];
    for (int o = 0; o < nouts; o++) {
        int64_t yshape[DEFT_MAX_NDIM];
        int yndim;
        ck_assert_ok(DeftNDArrayGetShape(y0[o], yshape, DEFT_MAX_NDIM, &yndim));
        nw[o] = count_of(yndim, yshape);
        w[o] = malloc(sizeof(double) * (size_t)(nw[o] ? nw[o] : 1));
        for (int64_t j = 0; j < nw[o]; j++) w[o][j] = uniform(&rng, -1, 1);
        heads[o] = make(DEFT_FLOAT64, yndim, yshape, w[o]);
    }
    /* analytic: inputs in the gradient symbol's argument order (head gradients last),
     * then its auxiliary states (BatchNorm's moving statistics); each List call
     * replaces the names the last one returned */
    int nargs = 0, h = 0;
    DeftNDArrayHandle grad_in[GRAD_MAX_IN + MAX_OUT];
    for (int group = 0; group < 2; group++) {
        int n;
        const char *const *group_names;
        ck_assert_ok(group ? DeftSymbolListAuxiliaryStates(grad, &n, &group_names)
                           : DeftSymbolListArguments(grad, &n, &group_names));
        ck_assert_int_le(nargs + n, c->nin + nouts);
        for (int a = 0; a < n; a++, nargs++) {
            grad_in[nargs] = NULL;
            for (int i = 0; i < c->nin && i < GRAD_MAX_IN; i++)
                if (strcmp(group_names[a], names[i]) == 0) grad_in[nargs] = in[i];
            if (!grad_in[nargs]) grad_in[nargs] = heads[h++];
        }
    }
    ck_assert_int_eq(nargs, c->nin + nouts);
    DeftNDArrayHandle results[GRAD_MAX_IN + MAX_OUT] = {NULL};
    int nout = GRAD_MAX_IN + MAX_OUT;
    ck_assert_msg(DeftCachedOpInvoke(backward, nargs, grad_in, &nout, results) == 0, "%s: %s",
                  c->op, DeftGetLastError());
    ck_assert_int_eq(nout, nouts + nwrt);
    for (int i = 0, r = nouts; i < c->nin; i++) {
        if (c->fixed & (1u << i)) continue;
        int64_t n;
        double *analytic = read_all(results[r++], &n);
        ck_assert_int_eq(n, count[i]);
        compare_input(c, i, forward, in, x[i], count[i], analytic, w, nw, nouts);
        free(analytic);
    }
    for (int i = 0; i < c->nin; i++) {
        free(x[i]);
        ck_assert_ok(DeftNDArrayFree(in[i]));
        ck_assert_ok(DeftSymbolFree(vars[i]));
    }
    for (int k = 0; k < nouts + nwrt; k++) ck_assert_ok(DeftNDArrayFree(results[k]));
    for (int o = 0; o < nouts; o++) {
        free(w[o]);
        free_all(2, (DeftNDArrayHandle[]){heads[o], y0[o]});
    }
    ck_assert_ok(DeftCachedOpFree(forward));
    ck_assert_ok(DeftCachedOpFree(backward));
    ck_assert_ok(DeftSymbolFree(y));
    ck_assert_ok(DeftSymbolFree(grad));
    ck_assert_ok(DeftAutogradSetIsTraining(was_training, NULL));
}

static const grad_case_t cases[] = {
#include "gradient_cases.inc"
};

/* Operators with a gradient but no finite-difference case, and why. */
static const char *const untested[] = {
    "_CachedOp",       /* a recorded graph: its gradient is its graph's (test_autograd) */
    "_copy_to_device", /* needs a second device (test_gpu) */
    /* gradient is the loss head's, not the derivative of the output: test_op_loss_heads */
    "SoftmaxOutput",
    "Softmax",
    "LinearRegressionOutput",
    "LogisticRegressionOutput",
    "MAERegressionOutput",
    "MakeLoss",
    "make_loss",
    NULL,
};

static bool has_case(const char *name) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].op, name) == 0) return true;
    for (int i = 0; untested[i]; i++)
        if (strcmp(untested[i], name) == 0) return true;
    return false;
}

START_TEST(test_every_gradient_has_a_case) {
    char missing[4096] = "";
    for (int i = 0; i < deft_registry_count(); i++) {
        const deft_op_t *op = deft_registry_at(i)->op;
        /* piecewise constant (comparisons, argmax, sign): nothing flows back by construction */
        bool zero = op->gradient == deft_gradient_zero;
        if (op->gradient && !zero && !has_case(op->name) &&
            strlen(missing) + strlen(op->name) + 3 < sizeof missing)
            strcat(strcat(missing, " "), op->name);
    }
    ck_assert_msg(missing[0] == 0, "operators with a gradient but no case in tests/gradients:%s",
                  missing);
}
END_TEST

START_TEST(test_gradient_matches_finite_differences) {
    check_case(&cases[_i]);
}
END_TEST

/* Second order: differentiate the gradient graph again and compare with the
 * closed-form second derivative times the first head gradient. */
static double second_sin(double x) {
    return -sin(x);
}
static double second_tanh(double x) {
    return -2 * tanh(x) * (1 - tanh(x) * tanh(x));
}
static double second_exp(double x) {
    return exp(x);
}
static double second_square(double x) {
    (void)x;
    return 2;
}

START_TEST(test_second_order_gradients) {
    static const struct {
        const char *op;
        double (*second)(double);
    } ops[] = {
        {"sin", second_sin}, {"tanh", second_tanh}, {"exp", second_exp}, {"square", second_square}};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        DeftSymbolHandle x = var("x"), y, g1, gx, g2;
        ck_assert_ok(DeftSymbolCreateAtomic(op_named(ops[o].op), 0, NULL, NULL, &y));
        ck_assert_ok(DeftSymbolCompose(y, "y", 1, NULL, &x));
        ck_assert_ok(DeftSymbolGradient(y, 1, (const char *const[]){"x"}, &g1));
        ck_assert_ok(DeftSymbolGetOutput(g1, 1, &gx));
        ck_assert_ok(DeftSymbolGradient(gx, 1, (const char *const[]){"x"}, &g2));
        const double xs[4] = {-1.2, -0.3, 0.4, 1.1}, w[4] = {0.5, -1.0, 2.0, 0.25};
        DeftNDArrayHandle xa = make(DEFT_FLOAT64, 1, SHAPE(4), xs);
        DeftNDArrayHandle head1 = make(DEFT_FLOAT64, 1, SHAPE(4), w);
        DeftNDArrayHandle head2 = call1("ones_like", 1, &xa, NO_PARAMS);
        int nargs;
        const char *const *names;
        ck_assert_ok(DeftSymbolListArguments(g2, &nargs, &names));
        ck_assert_int_eq(nargs, 3);
        DeftNDArrayHandle args[3];
        for (int a = 0; a < 3; a++)
            args[a] = !strcmp(names[a], "x")                    ? xa
                      : !strcmp(names[a], "y_output_head_grad") ? head1
                                                                : head2;
        DeftCachedOpHandle exec;
        ck_assert_ok(DeftCachedOpCreate(g2, 0, &exec));
        DeftNDArrayHandle out[2] = {NULL, NULL};
        int nout = 2;
        ck_assert_msg(DeftCachedOpInvoke(exec, 3, args, &nout, out) == 0, "%s", DeftGetLastError());
        double want[4];
        for (int i = 0; i < 4; i++) want[i] = w[i] * ops[o].second(xs[i]);
        assert_values(out[1], 4, want, 1e-12);
        free_all(5, (DeftNDArrayHandle[]){xa, head1, head2, out[0], out[1]});
        ck_assert_ok(DeftCachedOpFree(exec));
        DeftSymbolHandle all[] = {x, y, g1, gx, g2};
        for (int i = 0; i < 5; i++) ck_assert_ok(DeftSymbolFree(all[i]));
    }
}
END_TEST

/* Three terms meet: one ElementWiseSum. */
START_TEST(test_few_gradients_meet_in_one_sum) {
    DeftSymbolHandle x = var("x"), t[3], total, grad;
    const char *ops[3] = {"exp", "tanh", "square"};
    for (int i = 0; i < 3; i++) {
        ck_assert_ok(DeftSymbolCreateAtomic(op_named(ops[i]), 0, NULL, NULL, &t[i]));
        ck_assert_ok(DeftSymbolCompose(t[i], NULL, 1, NULL, &x));
    }
    ck_assert_ok(DeftSymbolCreateAtomic(op_named("add_n"), 0, NULL, NULL, &total));
    ck_assert_ok(DeftSymbolCompose(total, "total", 3, NULL, t));
    ck_assert_ok(DeftSymbolGradient(total, 1, (const char *const[]){"x"}, &grad));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(grad, &json));
    /* total's own add_n, and one more summing the three gradients (not a chain of _grad_add) */
    ck_assert_int_eq(count_text(json, "\"op\":\t\"add_n\""), 2);
    ck_assert_int_eq(count_text(json, "\"op\":\t\"_grad_add\""), 0);
    DeftSymbolHandle all[] = {x, t[0], t[1], t[2], total, grad};
    for (int i = 0; i < 6; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* x feeds 12 nodes (more than ElementWiseSum's 8 terms): its gradient is the sum of all. */
START_TEST(test_gradients_that_meet_are_summed) {
    DeftSymbolHandle x = var("x"), terms[12], total, grad;
    for (int i = 0; i < 12; i++) {
        char scalar[12]; /* room for any int: gcc -O1 checks the range it cannot bound */
        snprintf(scalar, sizeof scalar, "%d", i + 1);
        ck_assert_ok(DeftSymbolCreateAtomic(op_named("_mul_scalar"), 1,
                                            (const char *const[]){"scalar"},
                                            (const char *const[]){scalar}, &terms[i]));
        ck_assert_ok(DeftSymbolCompose(terms[i], NULL, 1, NULL, &x));
    }
    ck_assert_ok(DeftSymbolCreateAtomic(op_named("add_n"), 0, NULL, NULL, &total));
    ck_assert_ok(DeftSymbolCompose(total, "total", 12, NULL, terms));
    ck_assert_ok(DeftSymbolGradient(total, 1, (const char *const[]){"x"}, &grad));
    /* twelve terms: a chain of eleven _grad_add (MXNet's rule above eight) */
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(grad, &json));
    ck_assert_int_eq(count_text(json, "\"op\":\t\"_grad_add\""), 11);
    ck_assert_int_eq(count_text(json, "\"op\":\t\"ElementWiseSum\""), 0);
    DeftNDArrayHandle xa = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(3, -4));
    DeftNDArrayHandle head = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 2));
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &exec));
    DeftNDArrayHandle out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(DeftCachedOpInvoke(exec, 2, (DeftNDArrayHandle[]){xa, head}, &nout, out));
    assert_values(out[1], 2, VALUES(78, 156), 0); /* (1 + 2 + ... + 12) * head */
    free_all(4, (DeftNDArrayHandle[]){xa, head, out[0], out[1]});
    ck_assert_ok(DeftCachedOpFree(exec));
    for (int i = 0; i < 12; i++) ck_assert_ok(DeftSymbolFree(terms[i]));
    DeftSymbolHandle rest[] = {x, total, grad};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(rest[i]));
}
END_TEST

START_TEST(test_gradient_errors) {
    DeftSymbolHandle x = var("x"), grad = NULL, y;
    ck_assert_ok(DeftSymbolCreateAtomic(op_named("sgd_update"), 1, (const char *const[]){"lr"},
                                        (const char *const[]){"0.1"}, &y));
    ck_assert_ok(DeftSymbolCompose(y, "step", 1, NULL, &x));
    ck_assert_fails(DeftSymbolGradient(y, 1, (const char *const[]){"x"}, &grad),
                    DEFT_ERROR_NOT_IMPLEMENTED,
                    "operator 'sgd_update' (node 'step') has no gradient");
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
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_gradient_matches_finite_differences, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_second_order_gradients);
    tcase_add_test(tc, test_gradients_that_meet_are_summed);
    tcase_add_test(tc, test_few_gradients_meet_in_one_sum);
    tcase_add_test(tc, test_gradient_errors);
    tcase_add_test(tc, test_every_gradient_has_a_case);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(gradient_suite());
}
