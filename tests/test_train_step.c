#define _GNU_SOURCE
/* Training-step graphs (DeftSymbolTrainStep): one executor run per step
 * gives the same losses and weights as eager autograd plus the optimizer
 * operators, whatever order the parameters are listed in. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_helpers.h"
#include "symbol_helpers.h"

enum { BATCH = 4, IN = 3, HIDDEN = 5, OUT = 2, PARAMS = 4, STEPS = 3 };
static const char *const param_names[PARAMS] = {"w1", "b1", "w2", "b2"};
static const int64_t param_shapes[PARAMS][2] = {{HIDDEN, IN}, {HIDDEN, 0}, {OUT, HIDDEN}, {OUT, 0}};

/* Per-sample squared error of a 2-layer tanh MLP, as a symbol. */
static DeftSymbolHandle mlp_loss(DeftSymbolHandle *made) {
    DeftSymbolHandle x = var("x"), t = var("t"), w1 = var("w1"), b1 = var("b1"), w2 = var("w2"),
                     b2 = var("b2");
    DeftSymbolHandle h =
        apply("FullyConnected", "fc1", 3, (DeftSymbolHandle[]){x, w1, b1}, P("num_hidden", "5"));
    DeftSymbolHandle a = apply("tanh", "act", 1, &h, NO_PARAMS);
    DeftSymbolHandle y =
        apply("FullyConnected", "fc2", 3, (DeftSymbolHandle[]){a, w2, b2}, P("num_hidden", "2"));
    DeftSymbolHandle d = apply("elemwise_sub", "err", 2, (DeftSymbolHandle[]){y, t}, NO_PARAMS);
    DeftSymbolHandle sq = apply("square", "sq", 1, &d, NO_PARAMS);
    DeftSymbolHandle l = apply("sum", "loss", 1, &sq, P("axis", "1"));
    DeftSymbolHandle all[] = {x, t, w1, b1, w2, b2, h, a, y, d, sq};
    memcpy(made, all, sizeof all);
    return l;
}

static DeftNDArrayHandle param_array(int p, double scale) {
    int ndim = param_shapes[p][1] ? 2 : 1;
    int64_t n = param_shapes[p][0] * (ndim == 2 ? param_shapes[p][1] : 1);
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = scale * sin(1.0 + (double)(p * 31 + i));
    DeftNDArrayHandle h = make(DEFT_FLOAT64, ndim, param_shapes[p], v);
    free(v);
    return h;
}

static DeftNDArrayHandle zeros_like_param(int p) {
    int ndim = param_shapes[p][1] ? 2 : 1;
    return make(DEFT_FLOAT64, ndim, param_shapes[p], NULL);
}

/* The eager reference: record, backward, then sgd_mom_update per parameter. */
static void eager_steps(DeftNDArrayHandle x, DeftNDArrayHandle t, DeftNDArrayHandle *w,
                        double *losses) {
    DeftNDArrayHandle grads[PARAMS], moms[PARAMS];
    for (int p = 0; p < PARAMS; p++) grads[p] = zeros_like_param(p), moms[p] = zeros_like_param(p);
    ck_assert_ok(DeftAutogradMarkVariables(PARAMS, w, NULL, grads));
    for (int s = 0; s < STEPS; s++) {
        ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle h =
            call1("FullyConnected", 3, (DeftNDArrayHandle[]){x, w[0], w[1]}, P("num_hidden", "5"));
        DeftNDArrayHandle a = call1("tanh", 1, &h, NO_PARAMS);
        DeftNDArrayHandle y =
            call1("FullyConnected", 3, (DeftNDArrayHandle[]){a, w[2], w[3]}, P("num_hidden", "2"));
        DeftNDArrayHandle d = call1("elemwise_sub", 2, (DeftNDArrayHandle[]){y, t}, NO_PARAMS);
        DeftNDArrayHandle sq = call1("square", 1, &d, NO_PARAMS);
        DeftNDArrayHandle l = call1("sum", 1, &sq, P("axis", "1"));
        ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
        ck_assert_ok(DeftAutogradBackward(1, &l, NULL, 0, 0));
        int64_t n;
        double *lv = read_all(l, &n);
        losses[s] = lv[0] + lv[1] + lv[2] + lv[3];
        free(lv);
        for (int p = 0; p < PARAMS; p++) {
            DeftNDArrayHandle out[1] = {w[p]};
            int nout = 1;
            ck_assert_ok(call(
                "sgd_mom_update", 3, (DeftNDArrayHandle[]){w[p], grads[p], moms[p]}, &nout, out,
                P("lr", "0.05", "momentum", "0.9", "wd", "0.01", "rescale_grad", "0.25")));
        }
        free_all(6, (DeftNDArrayHandle[]){h, a, y, d, sq, l});
    }
    free_all(PARAMS, grads), free_all(PARAMS, moms);
}

/* The step graph's inputs by name: data, parameters, hyper-parameters, states. */
static DeftNDArrayHandle input_named(const char *name, DeftNDArrayHandle x, DeftNDArrayHandle t,
                                     DeftNDArrayHandle *w, DeftNDArrayHandle hyper,
                                     DeftNDArrayHandle *moms) {
    if (!strcmp(name, "x")) return x;
    if (!strcmp(name, "t")) return t;
    if (!strcmp(name, "step_hyper")) return hyper;
    for (int p = 0; p < PARAMS; p++) {
        char mom[32];
        snprintf(mom, sizeof mom, "%s_mom", param_names[p]);
        if (!strcmp(name, param_names[p])) return w[p];
        if (!strcmp(name, mom)) return moms[p];
    }
    ck_abort_msg("unexpected input '%s'", name);
    return NULL;
}

static void step_runs(DeftSymbolHandle step, DeftNDArrayHandle x, DeftNDArrayHandle t,
                      DeftNDArrayHandle *w, double *losses) {
    int nargs, naux;
    const char *const *args, *const *aux;
    ck_assert_ok(DeftSymbolListArguments(step, &nargs, &args));
    char *names[16]; /* copies: the next list call reuses the buffer */
    for (int i = 0; i < nargs; i++) names[i] = strdup(args[i]);
    ck_assert_ok(DeftSymbolListAuxiliaryStates(step, &naux, &aux));
    for (int i = 0; i < naux; i++) names[nargs + i] = strdup(aux[i]);
    ck_assert_int_eq(nargs, 7); /* x, t, four parameters, step_hyper */
    ck_assert_int_eq(naux, PARAMS);
    DeftNDArrayHandle moms[PARAMS], in[16];
    for (int p = 0; p < PARAMS; p++) moms[p] = zeros_like_param(p);
    DeftNDArrayHandle hyper =
        make(DEFT_FLOAT64, 1, SHAPE(7), VALUES(0.05, 0.01, 0.25, -1, 0.9, 0, 0));
    for (int i = 0; i < nargs + naux; i++) {
        in[i] = input_named(names[i], x, t, w, hyper, moms);
        free(names[i]);
    }
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(step, 0, &exec));
    for (int s = 0; s < STEPS; s++) {
        DeftNDArrayHandle out[2] = {NULL, NULL};
        int nout = 2;
        ck_assert_ok(DeftCachedOpInvoke(exec, nargs + naux, in, &nout, out));
        ck_assert_int_eq(nout, 2);
        int64_t n;
        double *lv = read_all(out[0], &n);
        ck_assert_int_eq(n, BATCH);
        losses[s] = lv[0] + lv[1] + lv[2] + lv[3];
        free(lv);
        free_all(2, out);
    }
    ck_assert_ok(DeftCachedOpFree(exec));
    free_all(PARAMS, moms), free_all(1, &hyper);
}

static void check_order(const char *const *order) {
    double xs[BATCH * IN], ts[BATCH * OUT];
    for (int i = 0; i < BATCH * IN; i++) xs[i] = cos(0.7 * i);
    for (int i = 0; i < BATCH * OUT; i++) ts[i] = sin(0.3 * i);
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(BATCH, IN), xs);
    DeftNDArrayHandle t = make(DEFT_FLOAT64, 2, SHAPE(BATCH, OUT), ts);
    DeftNDArrayHandle eager[PARAMS], stepped[PARAMS];
    for (int p = 0; p < PARAMS; p++)
        eager[p] = param_array(p, 0.5), stepped[p] = param_array(p, 0.5);
    double eager_loss[STEPS], step_loss[STEPS];
    eager_steps(x, t, eager, eager_loss);
    DeftSymbolHandle made[11], loss = mlp_loss(made), step;
    ck_assert_ok(DeftSymbolTrainStep(loss, PARAMS, order, "sgd_mom", &step));
    step_runs(step, x, t, stepped, step_loss);
    for (int s = 0; s < STEPS; s++) ck_assert_double_eq_tol(step_loss[s], eager_loss[s], 1e-12);
    ck_assert_double_lt(step_loss[STEPS - 1], step_loss[0]);
    for (int p = 0; p < PARAMS; p++) {
        int64_t n;
        double *want = read_all(eager[p], &n);
        assert_values(stepped[p], n, want, 1e-12);
        free(want);
    }
    ck_assert_ok(DeftSymbolFree(step));
    ck_assert_ok(DeftSymbolFree(loss));
    for (int i = 0; i < 11; i++) ck_assert_ok(DeftSymbolFree(made[i]));
    free_all(PARAMS, eager), free_all(PARAMS, stepped), free_all(2, (DeftNDArrayHandle[]){x, t});
}

/* Listed first to last, the first layer's update follows its whole backward. */
START_TEST(step_matches_eager_training) {
    check_order(param_names);
}
END_TEST

/* Listed last layer first: w2's update must still wait for the backward to
 * read w2 for the first layer's gradient (the chain of updates sees to it). */
START_TEST(update_waits_for_every_read_of_the_old_weight) {
    check_order((const char *const[]){"w2", "b2", "w1", "b1"});
}
END_TEST

START_TEST(bad_steps_name_what_is_wrong) {
    DeftSymbolHandle made[11], loss = mlp_loss(made), step = NULL;
    ck_assert_fails(DeftSymbolTrainStep(loss, 1, (const char *[]){"w1"}, "lbfgs", &step),
                    DEFT_ERROR_VALUE, "optimizer is 'lbfgs', expected one of sgd, sgd_mom");
    ck_assert_fails(DeftSymbolTrainStep(loss, 1, (const char *[]){"w9"}, "sgd", &step),
                    DEFT_ERROR_VALUE, "params[0] is 'w9', which is not an argument of the loss");
    ck_assert_fails(DeftSymbolTrainStep(loss, 2, (const char *[]){"w1", "w1"}, "adam", &step),
                    DEFT_ERROR_VALUE, "params[0] and params[1] are both 'w1'");
    ck_assert_fails(DeftSymbolTrainStep(loss, 0, NULL, "sgd", &step), DEFT_ERROR_VALUE,
                    "at least one parameter");
    ck_assert_fails(DeftSymbolTrainStep(loss, 1, (const char *[]){"w1"}, NULL, &step),
                    DEFT_ERROR_VALUE, "optimizer is '(NULL)'");
    ck_assert_ptr_null(step);
    /* a hyper tensor too short is refused by the update operator */
    ck_assert_ok(DeftSymbolTrainStep(loss, 1, (const char *[]){"b2"}, "sgd", &step));
    DeftNDArrayHandle w = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle short_hyper = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, 2, 3)), out = NULL;
    int nout = 1;
    ck_assert_fails(
        call("_step_sgd", 3, (DeftNDArrayHandle[]){w, g, short_hyper}, &nout, &out, NO_PARAMS),
        DEFT_ERROR_VALUE, "input 2 (hyper) has shape (3,), expected (7,)");
    free_all(3, (DeftNDArrayHandle[]){w, g, short_hyper});
    ck_assert_ok(DeftSymbolFree(step));
    ck_assert_ok(DeftSymbolFree(loss));
    for (int i = 0; i < 11; i++) ck_assert_ok(DeftSymbolFree(made[i]));
}
END_TEST

/* The step operators against their formulas: SGD, AdamW's decoupled decay. */
START_TEST(update_operators_follow_their_formulas) {
    DeftNDArrayHandle w = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, -2));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(4, 8));
    DeftNDArrayHandle m = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0, 0));
    DeftNDArrayHandle v = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(0, 0));
    /* lr 0.1, wd 0.5, rescale 0.5, clip 3: g' = clip(0.5 g) = (2, 3) */
    DeftNDArrayHandle hyper =
        make(DEFT_FLOAT64, 1, SHAPE(7), VALUES(0.1, 0.5, 0.5, 3, 0.9, 0.99, 1e-8));
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(call("_step_sgd", 3, (DeftNDArrayHandle[]){w, g, hyper}, &nout, &out, NO_PARAMS));
    assert_shape(out, 1, SHAPE(0));
    /* w - lr (g' + wd w) = 1 - 0.1 (2 + 0.5), -2 - 0.1 (3 - 1) */
    assert_values(w, 2, VALUES(0.75, -2.2), 1e-15);
    ck_assert_ok(DeftNDArrayFree(out));
    out = NULL;
    ck_assert_ok(
        call("_step_adamw", 5, (DeftNDArrayHandle[]){w, g, m, v, hyper}, &nout, &out, NO_PARAMS));
    /* mean = 0.1 g', var = 0.01 g'^2: mean / sqrt(var) = 1 (to 1e-8); w - lr (1 + wd w) */
    assert_values(w, 2, VALUES(0.75 - 0.1 * (1 + 0.5 * 0.75), -2.2 - 0.1 * (1 - 0.5 * 2.2)), 1e-7);
    assert_values(m, 2, VALUES(0.2, 0.3), 1e-15);
    assert_values(v, 2, VALUES(0.04, 0.09), 1e-15);
    free_all(6, (DeftNDArrayHandle[]){w, g, m, v, hyper, out});
}
END_TEST

/* The step kinds, their states, and a hyper tensor every kind reads:
 * lr, wd, rescale, clip, momentum / beta1 / rho, beta2 / gamma2, epsilon,
 * LAMB's bias corrections (as after one step of beta 0.9, 0.99), no bounds. */
static const struct {
    const char *name;
    int states;
} step_kinds[] = {{"_step_sgd", 0},
                  {"_step_sgd_mom", 1},
                  {"_step_adam", 2},
                  {"_step_adamw", 2},
                  {"_step_nag", 1},
                  {"_step_rmsprop", 1},
                  {"_step_rmsprop_centered", 3},
                  {"_step_adagrad", 1},
                  {"_step_adadelta", 2},
                  {"_step_lamb", 2}};
enum { NUM_KINDS = sizeof step_kinds / sizeof step_kinds[0], HYPER = 11 };

static DeftNDArrayHandle hyper_of(double clip) {
    return make(DEFT_FLOAT64, 1, SHAPE(HYPER),
                VALUES(0.05, 0.01, 0.5, clip, 0.9, 0.99, 1e-8, 0.1, 1 - 0.99, -1, -1));
}

/* One call of step kind k on w, g and states s[0..2]; returns nothing. */
static void run_step(int k, DeftNDArrayHandle w, DeftNDArrayHandle g, DeftNDArrayHandle *s,
                     DeftNDArrayHandle hyper) {
    DeftNDArrayHandle in[6] = {w, g}, out = NULL;
    int nin = 2, nout = 1;
    for (int a = 0; a < step_kinds[k].states; a++) in[nin++] = s[a];
    in[nin++] = hyper;
    ck_assert_msg(call(step_kinds[k].name, nin, in, &nout, &out, NO_PARAMS) == 0, "%s: %s",
                  step_kinds[k].name, DeftGetLastError());
    ck_assert_ok(DeftNDArrayFree(out));
}

/* Every step kind in float32 (the vectorised loops, with their tails) gives
 * the float64 step's numbers to float rounding, clipping or not. */
START_TEST(float32_steps_match_float64) {
    enum { N = 1003 };
    double w0[N], g0[N], s0[3][N];
    for (int i = 0; i < N; i++)
        w0[i] = sin(i * 0.37), g0[i] = 3 * cos(i * 0.11), s0[1][i] = 0.1 * sin(i * 0.05),
        s0[0][i] = 0.5 + 0.4 * cos(i * 0.03), s0[2][i] = 0.01 * cos(i * 0.2);
    for (int clip = 0; clip < 2; clip++)
        for (int k = 0; k < NUM_KINDS; k++) {
            int states = step_kinds[k].states;
            double *got[2][4];
            for (int t = 0; t < 2; t++) {
                int dtype = t ? DEFT_FLOAT64 : DEFT_FLOAT32;
                DeftNDArrayHandle w = make(dtype, 1, SHAPE(N), w0),
                                  g = make(dtype, 1, SHAPE(N), g0), s[3];
                for (int a = 0; a < 3; a++) s[a] = make(dtype, 1, SHAPE(N), s0[a]);
                DeftNDArrayHandle hyper = hyper_of(clip ? 1 : -1); /* 1: about half clipped */
                DeftNDArrayHandle updated[4] = {w, s[0], s[1], s[2]};
                run_step(k, w, g, s, hyper);
                int64_t n;
                for (int a = 0; a <= states; a++) got[t][a] = read_all(updated[a], &n);
                free_all(6, (DeftNDArrayHandle[]){w, g, s[0], s[1], s[2], hyper});
            }
            for (int a = 0; a <= states; a++) {
                for (int i = 0; i < N; i++)
                    if (fabs(got[0][a][i] - got[1][a][i]) > 2e-6 * (1 + fabs(got[1][a][i])))
                        ck_abort_msg(
                            "%s (clip %d): float32 array %d element %d is %.9g, float64 %.9g",
                            step_kinds[k].name, clip, a, i, got[0][a][i], got[1][a][i]);
                free(got[0][a]), free(got[1][a]);
            }
        }
}
END_TEST

/* The kinds' formulas, written out here for one element (h as hyper_of). */
static double clipped(double g, double clip) {
    g *= 0.5;
    return clip < 0 ? g : g > clip ? clip : g < -clip ? -clip : g;
}

static double reference_step(const char *kind, double clip, double w, double g, double *s) {
    const double lr = 0.05, wd = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8;
    double c = clipped(g, clip), e = c + wd * w; /* plain, and with the decay */
    if (!strcmp(kind, "_step_nag")) {
        s[0] = b1 * s[0] + e;
        return w - lr * (e + b1 * s[0]);
    }
    if (!strcmp(kind, "_step_rmsprop")) {
        s[0] = b1 * s[0] + (1 - b1) * e * e;
        return w - lr * e / sqrt(s[0] + eps);
    }
    if (!strcmp(kind, "_step_rmsprop_centered")) {
        s[0] = b1 * s[0] + (1 - b1) * e * e;
        s[1] = b1 * s[1] + (1 - b1) * e;
        s[2] = b2 * s[2] - lr * e / sqrt(s[0] - s[1] * s[1] + eps);
        return w + s[2];
    }
    if (!strcmp(kind, "_step_adagrad")) {
        s[0] += c * c;
        return w - lr * (c / sqrt(s[0] + eps) + wd * w);
    }
    /* adadelta */
    s[0] = b1 * s[0] + (1 - b1) * c * c;
    double d = sqrt(s[1] + eps) / sqrt(s[0] + eps) * c;
    s[1] = b1 * s[1] + (1 - b1) * d * d;
    return w - lr * (d + wd * w);
}

/* The element-wise kinds added after SGD and Adam against their formulas
 * over three steps, float64. */
START_TEST(new_kinds_follow_their_formulas) {
    static const char *const kinds[] = {"_step_nag", "_step_rmsprop", "_step_rmsprop_centered",
                                        "_step_adagrad", "_step_adadelta"};
    enum { N = 5 };
    const double w0[N] = {1, -2, 0.5, 0, 3}, g0[N] = {4, 8, -1, 0.3, -6};
    for (int clip = 0; clip < 2; clip++)
        for (int k = 0; k < 5; k++) {
            int at = 0;
            while (strcmp(step_kinds[at].name, kinds[k])) at++;
            double want_w[N], want_s[N][3] = {{0}};
            memcpy(want_w, w0, sizeof want_w);
            DeftNDArrayHandle w = make(DEFT_FLOAT64, 1, SHAPE(N), w0),
                              g = make(DEFT_FLOAT64, 1, SHAPE(N), g0), s[3];
            for (int a = 0; a < 3; a++) s[a] = make(DEFT_FLOAT64, 1, SHAPE(N), NULL);
            DeftNDArrayHandle hyper = hyper_of(clip ? 1 : -1);
            for (int step = 0; step < 3; step++) {
                run_step(at, w, g, s, hyper);
                for (int i = 0; i < N; i++)
                    want_w[i] =
                        reference_step(kinds[k], clip ? 1 : -1, want_w[i], g0[i], want_s[i]);
            }
            int64_t n;
            double *got = read_all(w, &n);
            for (int i = 0; i < N; i++)
                ck_assert_msg(fabs(got[i] - want_w[i]) <= 1e-12 * (1 + fabs(want_w[i])),
                              "%s (clip %d): weight %d is %.15g, expected %.15g", kinds[k], clip, i,
                              got[i], want_w[i]);
            free(got);
            free_all(6, (DeftNDArrayHandle[]){w, g, s[0], s[1], s[2], hyper});
        }
}
END_TEST

/* LAMB in one call over a float32 parameter of several blocks and a
 * float64 one: each takes its own trust ratio |w| / |u| (the formula here
 * in double); a zero weight takes ratio 1, and the bounds clamp |w|. */
START_TEST(lamb_scales_each_parameter_by_its_trust_ratio) {
    enum { A = 40000, B = 7 };
    double *a = malloc(A * sizeof *a), *ga = malloc(A * sizeof *ga), b[B], gb[B];
    for (int i = 0; i < A; i++) a[i] = sin(i * 0.1), ga[i] = cos(i * 0.3);
    for (int i = 0; i < B; i++) b[i] = 0, gb[i] = i - 3.0; /* b = 0: ratio 1 */
    for (int bounded = 0; bounded < 2; bounded++) {
        /* lower 1000 (over |a| ~ 141): the ratio uses 1000 for |w|; upper 0.5 leaves 0 */
        DeftNDArrayHandle hyper = make(DEFT_FLOAT64, 1, SHAPE(HYPER),
                                       VALUES(0.05, 0.01, 1, -1, 0.9, 0.99, 1e-6, 0.1, 0.01,
                                              bounded ? 1000 : -1, bounded ? 0.5 : -1));
        DeftNDArrayHandle in[9] = {make(DEFT_FLOAT32, 1, SHAPE(A), a),
                                   make(DEFT_FLOAT32, 1, SHAPE(A), ga),
                                   make(DEFT_FLOAT32, 1, SHAPE(A), NULL),
                                   make(DEFT_FLOAT32, 1, SHAPE(A), NULL),
                                   make(DEFT_FLOAT64, 1, SHAPE(B), b),
                                   make(DEFT_FLOAT64, 1, SHAPE(B), gb),
                                   make(DEFT_FLOAT64, 1, SHAPE(B), NULL),
                                   make(DEFT_FLOAT64, 1, SHAPE(B), NULL),
                                   hyper},
                          out = NULL;
        int nout = 1;
        ck_assert_ok(call("_step_lamb", 9, in, &nout, &out, NO_PARAMS));
        for (int p = 0; p < 2; p++) {
            int n = p ? B : A;
            const double *w = p ? b : a, *g = p ? gb : ga;
            double w_sq = 0, u_sq = 0, *u = malloc((size_t)n * sizeof *u);
            for (int i = 0; i < n; i++) { /* one step from zero moments */
                double mean = 0.1 * g[i] / 0.1, var = 0.01 * g[i] * g[i] / 0.01;
                u[i] = mean / (sqrt(var) + 1e-6) + 0.01 * w[i];
                w_sq += w[i] * w[i], u_sq += u[i] * u[i];
            }
            double r1 = sqrt(w_sq);
            if (bounded) r1 = r1 < 1000 ? 1000 : r1, r1 = r1 > 0.5 ? 0.5 : r1;
            double ratio = r1 == 0 ? 1 : r1 / sqrt(u_sq);
            int64_t got_n;
            double *got = read_all(in[4 * p], &got_n);
            for (int i = 0; i < n; i++) {
                double want = w[i] - 0.05 * ratio * u[i];
                if (fabs(got[i] - want) > (p ? 1e-12 : 2e-6) * (1 + fabs(want)))
                    ck_abort_msg("lamb (bounded %d) parameter %d element %d: %.9g, expected %.9g",
                                 bounded, p, i, got[i], want);
            }
            free(got), free(u);
        }
        free_all(9, in);
        ck_assert_ok(DeftNDArrayFree(out));
    }
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 1, SHAPE(2), NULL), short_hyper = hyper_of(-1);
    DeftNDArrayHandle seven = make(DEFT_FLOAT64, 1, SHAPE(7), NULL), out = NULL;
    int nout = 1;
    ck_assert_fails(
        call("_step_lamb", 5, (DeftNDArrayHandle[]){w, w, w, w, seven}, &nout, &out, NO_PARAMS),
        DEFT_ERROR_VALUE, "input 4 (hyper) has shape (7,), expected (11,)");
    free_all(3, (DeftNDArrayHandle[]){w, short_hyper, seven});
    free(a), free(ga);
}
END_TEST

/* 45 parameters, loss = sum of their squares: with momentum, 20 fit one
 * update node, so the step has 3 (20, 20, 5), and two steps give every
 * parameter 0.46 of its value (grad 2p, lr 0.1, momentum 0.9: 0.8p, then
 * 0.8p + 0.9 (-0.2p) - 0.1 (1.6p)). */
START_TEST(many_parameters_update_in_few_nodes) {
    enum { N = 45 };
    DeftSymbolHandle p[N], sums[N], made[2 * N];
    char names[N][16]; /* room for any int (gcc -O1 checks the range it cannot bound) */
    const char *list[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        list[i] = names[i];
        p[i] = var(names[i]);
        DeftSymbolHandle sq = apply("square", NULL, 1, &p[i], NO_PARAMS);
        sums[i] = apply("sum", NULL, 1, &sq, NO_PARAMS);
        made[2 * i] = sq, made[2 * i + 1] = sums[i];
    }
    DeftSymbolHandle loss = apply("add_n", "loss", N, sums, NO_PARAMS), step;
    ck_assert_ok(DeftSymbolTrainStep(loss, N, list, "sgd_mom", &step));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(step, &json));
    int updates = 0;
    for (const char *at = json; (at = strstr(at, "\"_step_sgd_mom\"")); at++) updates++;
    ck_assert_int_eq(updates, 3);

    int nargs, naux;
    const char *const *args, *const *aux;
    ck_assert_ok(DeftSymbolListArguments(step, &nargs, &args));
    ck_assert_int_eq(nargs, N + 1); /* the parameters, step_hyper */
    DeftNDArrayHandle in[2 * N + 1], w[N];
    for (int i = 0; i < nargs; i++) {
        int k = -1;
        sscanf(args[i], "p%d", &k);
        in[i] = k >= 0 ? (w[k] = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(k + 1, -k, 0.5)))
                       : make(DEFT_FLOAT64, 1, SHAPE(7), VALUES(0.1, 0, 1, -1, 0.9, 0, 0));
    }
    ck_assert_ok(DeftSymbolListAuxiliaryStates(step, &naux, &aux));
    ck_assert_int_eq(naux, N); /* a momentum each */
    for (int i = 0; i < naux; i++) in[nargs + i] = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(step, 0, &exec));
    for (int s = 0; s < 2; s++) {
        DeftNDArrayHandle out[2] = {NULL, NULL};
        int nout = 2;
        ck_assert_ok(DeftCachedOpInvoke(exec, nargs + naux, in, &nout, out));
        free_all(2, out);
    }
    for (int k = 0; k < N; k++)
        assert_values(w[k], 3, VALUES(0.46 * (k + 1), -0.46 * k, 0.23), 1e-6);
    ck_assert_ok(DeftCachedOpFree(exec));
    free_all(nargs + naux, in);
    ck_assert_ok(DeftSymbolFree(step));
    ck_assert_ok(DeftSymbolFree(loss));
    for (int i = 0; i < N; i++) ck_assert_ok(DeftSymbolFree(p[i]));
    for (int i = 0; i < 2 * N; i++) ck_assert_ok(DeftSymbolFree(made[i]));
}
END_TEST

/* One call updating groups of either dtype and any size gives each group
 * what a call of its own gives; a bad group is named. */
START_TEST(one_step_updates_every_group) {
    enum { A = 40000, B = 7 }; /* A spans parallel chunks; B is all tail */
    double *a = malloc(A * sizeof *a), b[B];
    for (int i = 0; i < A; i++) a[i] = sin(i * 0.1);
    for (int i = 0; i < B; i++) b[i] = cos(i * 0.7);
    DeftNDArrayHandle hyper = make(DEFT_FLOAT64, 1, SHAPE(7), VALUES(0.1, 0.01, 1, -1, 0.9, 0, 0));
    DeftNDArrayHandle w[2][2], g[2][2], m[2][2], out = NULL;
    for (int c = 0; c < 2; c++) { /* c 0: both groups in one call; c 1: a call each */
        w[c][0] = make(DEFT_FLOAT32, 1, SHAPE(A), a), w[c][1] = make(DEFT_FLOAT64, 1, SHAPE(B), b);
        g[c][0] = make(DEFT_FLOAT32, 1, SHAPE(A), a), g[c][1] = make(DEFT_FLOAT64, 1, SHAPE(B), b);
        m[c][0] = make(DEFT_FLOAT32, 1, SHAPE(A), a), m[c][1] = make(DEFT_FLOAT64, 1, SHAPE(B), b);
    }
    int nout = 1;
    DeftNDArrayHandle both[7] = {w[0][0], g[0][0], m[0][0], w[0][1], g[0][1], m[0][1], hyper};
    ck_assert_ok(call("_step_sgd_mom", 7, both, &nout, &out, NO_PARAMS));
    ck_assert_ok(DeftNDArrayFree(out));
    for (int j = 0; j < 2; j++) {
        out = NULL;
        ck_assert_ok(call("_step_sgd_mom", 4,
                          (DeftNDArrayHandle[]){w[1][j], g[1][j], m[1][j], hyper}, &nout, &out,
                          NO_PARAMS));
        ck_assert_ok(DeftNDArrayFree(out));
    }
    for (int j = 0; j < 2; j++) {
        int64_t n;
        double *want = read_all(w[1][j], &n), *mom = read_all(m[1][j], &n);
        assert_values(w[0][j], n, want, 0), assert_values(m[0][j], n, mom, 0);
        free(want), free(mom);
    }
    DeftNDArrayHandle bad[7] = {w[0][0], g[0][0], m[0][0], w[0][1], g[0][0], m[0][1], hyper};
    out = NULL;
    ck_assert_fails(call("_step_sgd_mom", 7, bad, &nout, &out, NO_PARAMS), DEFT_ERROR_VALUE,
                    "input 4 (the grad of parameter 1) is float32 (40000,), expected float64 (7,)");
    ck_assert_fails(call("_step_sgd_mom", 6, both, &nout, &out, NO_PARAMS), DEFT_ERROR_VALUE,
                    "got 6 inputs, expected groups of 3 (weight, grad, mom)");
    for (int c = 0; c < 2; c++)
        free_all(6, (DeftNDArrayHandle[]){w[c][0], w[c][1], g[c][0], g[c][1], m[c][0], m[c][1]});
    free_all(1, &hyper);
    free(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("training step");
    TCase *tc = tcase_create("step");
    tcase_add_test(tc, step_matches_eager_training);
    tcase_add_test(tc, update_waits_for_every_read_of_the_old_weight);
    tcase_add_test(tc, bad_steps_name_what_is_wrong);
    tcase_add_test(tc, update_operators_follow_their_formulas);
    tcase_add_test(tc, float32_steps_match_float64);
    tcase_add_test(tc, new_kinds_follow_their_formulas);
    tcase_add_test(tc, lamb_scales_each_parameter_by_its_trust_ratio);
    tcase_add_test(tc, many_parameters_update_in_few_nodes);
    tcase_add_test(tc, one_step_updates_every_group);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
