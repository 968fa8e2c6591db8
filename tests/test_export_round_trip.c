#define _POSIX_C_SOURCE 200809L
/*
 * Every operator case of the gradient suite (tests/gradients/<family>.inc)
 * through a deferred-compute round trip: the call, recorded in deferred compute,
 * exported as a symbol, saved to JSON, loaded back and run by an executor,
 * and the recorded call computed in place, must both give what the same
 * call gives imperatively (deferred compute off). Each of the three runs
 * starts from fresh inputs of the same values (an operator may update one in
 * place, BatchNorm's moving statistics: the updated inputs must agree too),
 * in the case's training mode, from the same random seed. Floating-point
 * values agree to 1e-12, relative (an executor may evaluate a chain in
 * another order), integers exactly.
 *
 * Operators the gradient cases leave out have cases here (more_cases), and
 * test_every_operator_has_a_round_trip fails for an operator without one.
 *
 * Then the inference export: a graph recorded in predict mode exports
 * without its Dropout nodes that drop in training only.
 */
#include "grad_cases.h"
#include "symbol_helpers.h"

#include "core/op/registry.h"

#define MAX_OUT 8
#define SEED    20251126u

static const grad_case_t cases[] = {
#include "gradient_cases.inc"
};

/* The operators executors' FoldBatchNorm pass makes (test_op_conv runs them): they refuse calls. */
#define CONV_BN_CASE(op)                                                                           \
    {                                                                                              \
        op, P("kernel", "(3,3)", "num_filter", "2"), 6, {4, 4, 1, 1, 1, 1},                        \
            {{1, 2, 4, 4}, {2, 2, 3, 3}, {2}, {2}, {2}, {2}}, 0.5, 1, 0, NULL                      \
    }

/* Operators that the gradient cases leave out (no gradient, or a zero one). */
static const grad_case_t more_cases[] = {
    /* data with rows 2 and 0 overwritten (no gradient: setitem's operator) */
    {"_scatter_set_nd", NO_PARAMS, 3, {2, 2, 2}, {{3, 4}, {2, 4}, {1, 2}}, -1, 1, 4, VALUES(2, 0)},
    CONV_BN_CASE("_conv_bn"),
    CONV_BN_CASE("_conv_bn_relu"),
    /* the Fuse pass's softmax cross-entropy gradient (test_fuse runs it in its graph) */
    {"_backward_pick_log_softmax",
     P("axis", "1", "mode", "wrap"),
     3,
     {1, 1, 2},
     {{3}, {3}, {3, 4}},
     -1,
     1,
     2,
     VALUES(0, 5, -1)},
    BINARY("_equal", -1, 1),
    {"_equal", NO_PARAMS, 2, {1, 1}, {{3}, {3}}, -1, 1, 3, VALUES(1, 2, 3, 1, 0, 3)},
    BINARY("_not_equal", -1, 1),
    BINARY("_greater", -1, 1),
    BINARY("_greater_equal", -1, 1),
    BINARY("_lesser", -1, 1),
    BINARY("_lesser_equal", -1, 1),
    BINARY("_logical_and", -1, 1),
    BINARY("_logical_or", -1, 1),
    BINARY("_logical_xor", -1, 1),
    SCALAR("_equal_scalar", "0.5", -1, 1),
    SCALAR("_not_equal_scalar", "0.5", -1, 1),
    SCALAR("_greater_scalar", "0", -1, 1),
    SCALAR("_greater_equal_scalar", "0", -1, 1),
    SCALAR("_lesser_scalar", "0", -1, 1),
    SCALAR("_lesser_equal_scalar", "0", -1, 1),
    SCALAR("_logical_and_scalar", "1", -1, 1),
    SCALAR("_logical_or_scalar", "0", -1, 1),
    SCALAR("_logical_xor_scalar", "1", -1, 1),
    BCAST("broadcast_equal", -1, 1),
    BCAST("broadcast_not_equal", -1, 1),
    BCAST("broadcast_greater", -1, 1),
    BCAST("broadcast_greater_equal", -1, 1),
    BCAST("broadcast_lesser", -1, 1),
    BCAST("broadcast_lesser_equal", -1, 1),
    BCAST("broadcast_logical_and", -1, 1),
    BCAST("broadcast_logical_or", -1, 1),
    BCAST("broadcast_logical_xor", -1, 1),
    /* NumPy's: bool comparisons, floor division (the integer-only bitwise operators are
     * in not_recorded) */
    BCAST("_npi_equal", -1, 1),
    {"_npi_equal", NO_PARAMS, 2, {1, 1}, {{3}, {3}}, -1, 1, 3, VALUES(1, 2, 3, 1, 0, 3)},
    BCAST("_npi_not_equal", -1, 1),
    BCAST("_npi_greater", -1, 1),
    BCAST("_npi_greater_equal", -1, 1),
    BCAST("_npi_less", -1, 1),
    BCAST("_npi_less_equal", -1, 1),
    SCALAR("_npi_equal_scalar", "0.5", -1, 1),
    SCALAR("_npi_not_equal_scalar", "0.5", -1, 1),
    SCALAR("_npi_greater_scalar", "0", -1, 1),
    SCALAR("_npi_greater_equal_scalar", "0", -1, 1),
    SCALAR("_npi_less_scalar", "0", -1, 1),
    SCALAR("_npi_less_equal_scalar", "0", -1, 1),
    BCAST("_npi_floor_divide", 0.5, 3),
    SCALAR("_npi_floor_divide_scalar", "-0.7", -3, 3),
    SCALAR("_npi_rfloor_divide_scalar", "5", 0.5, 3),
    UNARY("ceil", -3, 3),
    UNARY("floor", -3, 3),
    UNARY("fix", -3, 3),
    UNARY("rint", -3, 3),
    UNARY("round", -3, 3),
    UNARY("trunc", -3, 3),
    UNARY("sign", -3, 3),
    UNARY("logical_not", -1, 1),
    UNARY("zeros_like", -1, 1),
    UNARY("ones_like", -1, 1),
    UNARY("BlockGrad", -1, 1),
    UNARY("_contrib_arange_like", -1, 1),
    {"argmax", P("axis", "1"), 1, {2}, {{2, 3}}, -1, 1},
    {"argmin", P("axis", "0"), 1, {2}, {{2, 3}}, -1, 1},
    {"argsort", P("axis", "-1"), 1, {2}, {{2, 3}}, -1, 1},
    {"one_hot", P("depth", "4"), 1, {1}, {{3}}, -1, 1, 1, VALUES(0, 3, 1)},
    {"_split_like", P("dim", "1"), 3, {2, 2, 2}, {{2, 4}, {2, 1}, {2, 3}}, -1, 1},
    {"_slice_assign", P("begin", "(0,1)", "end", "(2,3)"), 2, {2, 2}, {{3, 4}, {2, 2}}, -1, 1},
    /* creation: no inputs */
    {"_zeros", P("shape", "(2,3)"), 0},
    {"_ones", P("shape", "(2,3)", "dtype", "float64"), 0},
    {"_full", P("shape", "(2,3)", "value", "1.5"), 0},
    {"_arange", P("start", "1", "stop", "7", "step", "1.5"), 0},
    {"_random_uniform", P("shape", "(2,3)", "low", "-1", "high", "2"), 0},
    {"_random_normal", P("shape", "(5,)", "dtype", "float64"), 0},
    /* optimizers update their state inputs in place */
    {"sgd_update", P("lr", "0.1"), 2, {1, 1}, {{4}, {4}}, -1, 1},
    {"sgd_mom_update", P("lr", "0.1", "momentum", "0.9"), 3, {1, 1, 1}, {{4}, {4}, {4}}, -1, 1},
    {"adam_update",
     P("lr", "0.01"),
     4,
     {1, 1, 1, 1},
     {{2}, {2}, {2}, {2}},
     -1,
     1,
     8,
     VALUES(0.1, 0.3)},
    /* a training step's updates (weight, grad, states, hyper: positive values) */
    {"_step_sgd", NO_PARAMS, 3, {1, 1, 1}, {{4}, {4}, {7}}, 0.1, 0.9},
    {"_step_sgd_mom", NO_PARAMS, 4, {1, 1, 1, 1}, {{4}, {4}, {4}, {7}}, 0.1, 0.9},
    {"_step_adam", NO_PARAMS, 5, {1, 1, 1, 1, 1}, {{2}, {2}, {2}, {2}, {7}}, 0.1, 0.9},
    {"_step_adamw", NO_PARAMS, 5, {1, 1, 1, 1, 1}, {{2}, {2}, {2}, {2}, {8}}, 0.1, 0.9},
    {"_step_nag", NO_PARAMS, 4, {1, 1, 1, 1}, {{4}, {4}, {4}, {7}}, 0.1, 0.9},
    {"_step_rmsprop", NO_PARAMS, 4, {1, 1, 1, 1}, {{4}, {4}, {4}, {7}}, 0.1, 0.9},
    /* mean squares over the squared mean gradients: n - g^2 stays positive */
    {"_step_rmsprop_centered",
     NO_PARAMS,
     6,
     {1, 1, 1, 1, 1, 1},
     {{2}, {2}, {2}, {2}, {2}, {7}},
     0.1,
     0.9,
     (1u << 2) | (1u << 3),
     VALUES(2, 3, 0.1, -0.2)},
    {"_step_adagrad", NO_PARAMS, 4, {1, 1, 1, 1}, {{4}, {4}, {4}, {7}}, 0.1, 0.9},
    {"_step_adadelta", NO_PARAMS, 5, {1, 1, 1, 1, 1}, {{2}, {2}, {2}, {2}, {7}}, 0.1, 0.9},
    {"_step_lamb", NO_PARAMS, 5, {1, 1, 1, 1, 1}, {{2}, {2}, {2}, {2}, {11}}, 0.1, 0.9},
    /* loss heads: their forward */
    {"SoftmaxOutput", NO_PARAMS, 2, {2, 1}, {{2, 3}, {2}}, -1, 1, 2, VALUES(0, 2)},
    BINARY("LinearRegressionOutput", -1, 1),
    BINARY("LogisticRegressionOutput", -1, 1),
    BINARY("MAERegressionOutput", -1, 1),
    UNARY("MakeLoss", -1, 1),
    UNARY("make_loss", -1, 1),
};

/* Operators without a round trip here, and why. */
static const char *const not_recorded[] = {
    "_CachedOp",       /* a recorded graph: export inlines it (test_deferred) */
    "_copy_to_device", /* needs a second device (test_gpu) */
    /* integer and bool inputs only, which the cases here do not make (test_op_elemwise) */
    "_npi_bitwise_and",
    "_npi_bitwise_and_scalar",
    "_npi_bitwise_or",
    "_npi_bitwise_or_scalar",
    "_npi_bitwise_xor",
    "_npi_bitwise_xor_scalar",
    "_npi_bitwise_not",
    "_npi_bitwise_left_shift",
    "_npi_bitwise_left_shift_scalar",
    "_npi_rbitwise_left_shift_scalar",
    "_npi_bitwise_right_shift",
    "_npi_bitwise_right_shift_scalar",
    "_npi_rbitwise_right_shift_scalar",
    NULL,
};

static const char *const in_names[GRAD_MAX_IN] = {"in0", "in1", "in2", "in3", "in4", "in5"};
static const char *const out_names[MAX_OUT] = {"out0", "out1", "out2", "out3",
                                               "out4", "out5", "out6", "out7"};

/* One run of a case: its inputs (fresh arrays of the case's values) and outputs. */
typedef struct run {
    DeftNDArrayHandle in[GRAD_MAX_IN];
    DeftNDArrayHandle out[MAX_OUT];
    int nout;
} run_t;

static void make_inputs(const grad_case_t *c, double *const *x, run_t *r) {
    for (int i = 0; i < c->nin; i++) r->in[i] = make(DEFT_FLOAT64, c->ndim[i], c->shape[i], x[i]);
    r->nout = 0;
}

static void free_run(const grad_case_t *c, run_t *r) {
    free_all(c->nin, r->in);
    free_all(r->nout, r->out);
}

/* The case's call, imperative or recorded (by the thread's mode), into r->out. */
static void invoke(const grad_case_t *c, run_t *r) {
    DeftNDArrayHandle out[MAX_OUT] = {NULL};
    int nout = MAX_OUT;
    ck_assert_ok(DeftRandomSeed(SEED));
    ck_assert_msg(call(c->op, c->nin, r->in, &nout, out, c->params) == 0, "%s: %s", c->op,
                  DeftGetLastError());
    for (int k = 0; k < nout; k++) r->out[k] = out[k];
    r->nout = nout;
}

/* got agrees with want: dtype, shape, and values (to 1e-12 in floating point). */
static void assert_agrees(const grad_case_t *c, DeftNDArrayHandle got, DeftNDArrayHandle want,
                          const char *what, int k) {
    int got_dtype, want_dtype, ndim;
    int64_t shape[DEFT_MAX_NDIM], n, want_n;
    ck_assert_ok(DeftNDArrayGetDType(got, &got_dtype));
    ck_assert_ok(DeftNDArrayGetDType(want, &want_dtype));
    ck_assert_msg(got_dtype == want_dtype, "%s: %s %d has dtype %d, the imperative call's %d",
                  c->op, what, k, got_dtype, want_dtype);
    ck_assert_ok(DeftNDArrayGetShape(want, shape, DEFT_MAX_NDIM, &ndim));
    assert_shape(got, ndim, shape);
    double *a = read_all(got, &n), *b = read_all(want, &want_n);
    double tol = got_dtype == DEFT_FLOAT64 || got_dtype == DEFT_FLOAT32 ? 1e-12 : 0;
    for (int64_t i = 0; i < n; i++)
        if (!close_enough(a[i], b[i], tol))
            ck_abort_msg("%s: %s %d, element %lld, is %.17g; the imperative call gives %.17g",
                         c->op, what, k, (long long)i, a[i], b[i]);
    free(a), free(b);
}

/* A run's outputs and (possibly updated) inputs against the imperative run's. */
static void assert_run_agrees(const grad_case_t *c, const run_t *got, const run_t *want,
                              const char *how) {
    char what[64];
    ck_assert_int_eq(got->nout, want->nout);
    snprintf(what, sizeof what, "output, %s,", how);
    for (int k = 0; k < want->nout; k++) assert_agrees(c, got->out[k], want->out[k], what, k);
    snprintf(what, sizeof what, "input, after the call %s,", how);
    for (int i = 0; i < c->nin; i++) assert_agrees(c, got->in[i], want->in[i], what, i);
}

/* Record the call and export it: the symbol's JSON, in a new string. */
static char *record_and_export(const grad_case_t *c, run_t *r) {
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    invoke(c, r);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    int lazy[MAX_OUT];
    ck_assert_ok(DeftNDArrayGetIsDeferredCompute(r->out, r->nout, lazy));
    for (int k = 0; k < r->nout; k++) ck_assert_msg(lazy[k], "%s: output %d is not lazy", c->op, k);
    DeftSymbolHandle sym;
    ck_assert_msg(DeftNDArrayGetDeferredComputeSymbol(r->in, r->out, in_names, out_names, c->nin,
                                                      r->nout, &sym) == 0,
                  "%s: %s", c->op, DeftGetLastError());
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    char *copy = strdup(json);
    ck_assert_ok(DeftSymbolFree(sym));
    return copy;
}

/* The reloaded symbol run by an executor on r's inputs, passed by name:
 * its arguments, then its auxiliary states. */
static void run_executor(const grad_case_t *c, const char *json, run_t *r) {
    DeftSymbolHandle sym;
    ck_assert_msg(DeftSymbolCreateFromJSON(json, &sym) == 0, "%s: %s", c->op, DeftGetLastError());
    DeftNDArrayHandle args[GRAD_MAX_IN];
    int nargs = 0;
    for (int group = 0; group < 2; group++) {
        int n;
        const char *const *names;
        ck_assert_ok(group ? DeftSymbolListAuxiliaryStates(sym, &n, &names)
                           : DeftSymbolListArguments(sym, &n, &names));
        for (int a = 0; a < n; a++) {
            ck_assert_int_lt(nargs, c->nin);
            int i = 0;
            while (i < c->nin && strcmp(names[a], in_names[i]) != 0) i++;
            ck_assert_msg(i < c->nin, "%s: the export has an argument '%s'", c->op, names[a]);
            args[nargs++] = r->in[i];
        }
    }
    ck_assert_int_eq(nargs, c->nin);
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    r->nout = MAX_OUT;
    for (int k = 0; k < MAX_OUT; k++) r->out[k] = NULL;
    ck_assert_ok(DeftRandomSeed(SEED));
    ck_assert_msg(DeftCachedOpInvoke(exec, nargs, args, &r->nout, r->out) == 0, "%s: %s", c->op,
                  DeftGetLastError());
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
}

/* Operators made by graph passes (the fusion pass's _fused_elemwise) refuse
 * imperative calls, so nothing records them (test_fuse exports and runs
 * their graphs): their cases check the refusal. */
static void check_refused(const grad_case_t *c, double *const *x) {
    run_t r;
    make_inputs(c, x, &r);
    ck_assert_call_fails(c->op, c->nin, r.in, c->params, DEFT_ERROR_NOT_IMPLEMENTED,
                         "runs only inside a graph executor");
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    ck_assert_call_fails(c->op, c->nin, r.in, c->params, DEFT_ERROR_NOT_IMPLEMENTED,
                         "runs only inside a graph executor");
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    free_run(c, &r);
}

/* The three runs of a case from its input values x. */
static void check_round_trip(const grad_case_t *c, double *const *x) {
    run_t plain, recorded, loaded;
    make_inputs(c, x, &plain);
    invoke(c, &plain);

    make_inputs(c, x, &recorded);
    char *json = record_and_export(c, &recorded);
    ck_assert_ok(DeftRandomSeed(SEED));
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(recorded.out, recorded.nout));
    assert_run_agrees(c, &recorded, &plain, "recorded and computed");

    make_inputs(c, x, &loaded);
    run_executor(c, json, &loaded);
    assert_run_agrees(c, &loaded, &plain, "exported, reloaded and run");

    free_run(c, &plain), free_run(c, &recorded), free_run(c, &loaded);
    free(json);
}

static const grad_case_t *case_at(int i) {
    int n = (int)(sizeof cases / sizeof cases[0]);
    return i < n ? &cases[i] : &more_cases[i - n];
}

START_TEST(test_case_round_trip) {
    const grad_case_t *c = case_at(_i);
    int was_training;
    ck_assert_ok(DeftAutogradSetIsTraining(c->train, &was_training));
    uint64_t rng = GRAD_SEED;
    double *x[GRAD_MAX_IN];
    int64_t count[GRAD_MAX_IN];
    grad_case_values(c, &rng, x, count);
    if (deft_registry_find(c->op)->op->graph_only)
        check_refused(c, x);
    else
        check_round_trip(c, x);
    for (int i = 0; i < c->nin; i++) free(x[i]);
    ck_assert_ok(DeftAutogradSetIsTraining(was_training, NULL));
}
END_TEST

static bool has_case(const char *name) {
    int n = (int)(sizeof cases / sizeof cases[0] + sizeof more_cases / sizeof more_cases[0]);
    for (int i = 0; i < n; i++)
        if (strcmp(case_at(i)->op, name) == 0) return true;
    for (int i = 0; not_recorded[i]; i++)
        if (strcmp(not_recorded[i], name) == 0) return true;
    return false;
}

/* Gradient operators (_backward_*) are left out: gradient graphs run them. */
START_TEST(test_every_operator_has_a_round_trip) {
    char missing[4096] = "";
    for (int i = 0; i < deft_registry_count(); i++) {
        const char *name = deft_registry_at(i)->op->name;
        if (strncmp(name, "_backward_", 10) != 0 && !has_case(name) &&
            strlen(missing) + strlen(name) + 3 < sizeof missing)
            strcat(strcat(missing, " "), name);
    }
    ck_assert_msg(missing[0] == 0,
                  "operators without a round trip (a case in tests/gradients or more_cases):%s",
                  missing);
}
END_TEST

/* ---- the inference export ---- */

static DeftNDArrayHandle dropout(DeftNDArrayHandle x, const char *mode) {
    return call1("Dropout", 1, &x, P("p", "0.5", "mode", mode));
}

/*
 * y = relu(dropout(x)) and z = dropout(y, mode=always) + dropout(x), the
 * last dropout an output of its own, recorded in the given mode: its export
 * as JSON, and the outputs computed in that mode.
 */
static char *record_dropouts(bool training, DeftNDArrayHandle x, DeftNDArrayHandle *out) {
    int was_training;
    ck_assert_ok(DeftAutogradSetIsTraining(training, &was_training));
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle d = dropout(x, "training");
    out[0] = call1("relu", 1, &d, NO_PARAMS);
    DeftNDArrayHandle kept = dropout(out[0], "always");
    out[2] = dropout(x, "training");
    out[1] = call1("elemwise_add", 2, (DeftNDArrayHandle[]){kept, out[2]}, NO_PARAMS);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    DeftSymbolHandle sym;
    ck_assert_msg(DeftNDArrayGetDeferredComputeSymbol(&x, out, in_names, out_names, 1, 3, &sym) ==
                      0,
                  "%s", DeftGetLastError());
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    char *copy = strdup(json);
    ck_assert_ok(DeftRandomSeed(SEED));
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(out, 3));
    ck_assert_ok(DeftNDArrayWaitToRead(out[1]));
    ck_assert_ok(DeftAutogradSetIsTraining(was_training, NULL));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(2, (DeftNDArrayHandle[]){d, kept});
    return copy;
}

/* The JSON run by an executor on x in the given mode, against the recorded outputs. */
static void check_export_runs(const char *json, bool training, DeftNDArrayHandle x,
                              DeftNDArrayHandle *want) {
    const grad_case_t c = {.op = "the dropout graph"};
    int was_training;
    ck_assert_ok(DeftAutogradSetIsTraining(training, &was_training));
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &sym));
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListOutputs(sym, &n, &names));
    ck_assert_int_eq(n, 3);
    for (int k = 0; k < 3; k++) { /* every output keeps its name, the dropped one too */
        char name[32];
        snprintf(name, sizeof name, "%s_output", out_names[k]);
        ck_assert_str_eq(names[k], name);
    }
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle out[3] = {NULL};
    int nout = 3;
    ck_assert_ok(DeftRandomSeed(SEED));
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, out));
    for (int k = 0; k < 3; k++) assert_agrees(&c, out[k], want[k], "output of the export", k);
    free_all(3, out);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftAutogradSetIsTraining(was_training, NULL));
}

START_TEST(test_predict_mode_export_drops_dropout) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(-1, 2, -3, 4, 5, -6)), y[3];
    char *json = record_dropouts(false, x, y);
    /* the mode=always one stays; the two of mode=training are gone */
    ck_assert_int_eq(count_text(json, "\"op\":\t\"Dropout\""), 1);
    ck_assert_int_eq(count_text(json, "\"mode\":\t\"always\""), 1);
    /* the dropped output is a copy of x under its own name */
    ck_assert_int_eq(count_text(json, "\"op\":\t\"_copy\""), 1);
    assert_values(y[2], 6, VALUES(-1, 2, -3, 4, 5, -6), 0); /* identity when recorded */
    check_export_runs(json, false, x, y);
    free(json);
    free_all(4, (DeftNDArrayHandle[]){x, y[0], y[1], y[2]});
}
END_TEST

START_TEST(test_training_mode_export_keeps_dropout) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(-1, 2, -3, 4, 5, -6)), y[3];
    char *json = record_dropouts(true, x, y);
    ck_assert_int_eq(count_text(json, "\"op\":\t\"Dropout\""), 3);
    ck_assert_int_eq(count_text(json, "\"op\":\t\"_copy\""), 0);
    /* the masks draw from the stream in the same order: the same values again */
    check_export_runs(json, true, x, y);
    free(json);
    free_all(4, (DeftNDArrayHandle[]){x, y[0], y[1], y[2]});
}
END_TEST

static Suite *round_trip_suite(void) {
    Suite *suite = suite_create("export round trip");
    TCase *tc = tcase_create("every case");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(
        tc, test_case_round_trip, 0,
        (int)(sizeof cases / sizeof cases[0] + sizeof more_cases / sizeof more_cases[0]));
    tcase_add_test(tc, test_every_operator_has_a_round_trip);
    suite_add_tcase(suite, tc);
    TCase *inference = tcase_create("inference export");
    tcase_add_test(inference, test_predict_mode_export_drops_dropout);
    tcase_add_test(inference, test_training_mode_export_keeps_dropout);
    suite_add_tcase(suite, inference);
    return suite;
}

int main(void) {
    return run_suite(round_trip_suite());
}
