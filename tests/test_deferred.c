#define _POSIX_C_SOURCE 200809L
/*
 * Deferred compute, modelled on the cases of MXNet's test_deferred_compute.py.
 * Every case runs three times from the same inputs and must agree bit for
 * bit with the imperative result: lazy outputs read directly, read through a
 * normal operator, and exported -> JSON -> reloaded -> run by an executor.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "check_helpers.h"
#include "capi/src/api.h"
#include "core/graph/symbol.h"
#include "core/imperative/deferred_plan.h"
#include "core/imperative/record.h"
#include "op_helpers.h"
#include "symbol_helpers.h"

#define MAX_IO 8

static const char *current_case = ""; /* named in failures */

typedef int (*build_fn)(DeftNDArrayHandle *in, DeftNDArrayHandle *out);

static void set_deferred(int on) {
    ck_assert_ok(DeftSetIsDeferredCompute(on, NULL));
}

static int is_lazy(DeftNDArrayHandle h) {
    int status = -1;
    ck_assert_ok(DeftNDArrayGetIsDeferredCompute(&h, 1, &status));
    return status;
}

static void *raw_bytes(DeftNDArrayHandle h, size_t *nbytes) {
    ck_assert_ok(DeftNDArrayGetNBytes(h, nbytes));
    void *buf = malloc(*nbytes ? *nbytes : 1);
    ck_assert_ok(DeftNDArrayCopyToHost(h, buf, *nbytes));
    return buf;
}

static void assert_same_bytes(DeftNDArrayHandle got, DeftNDArrayHandle want, const char *how,
                              int k) {
    int got_dtype, want_dtype;
    ck_assert_ok(DeftNDArrayGetDType(got, &got_dtype));
    ck_assert_ok(DeftNDArrayGetDType(want, &want_dtype));
    ck_assert_int_eq(got_dtype, want_dtype);
    int64_t shape[DEFT_MAX_NDIM];
    int ndim;
    ck_assert_ok(DeftNDArrayGetShape(want, shape, DEFT_MAX_NDIM, &ndim));
    assert_shape(got, ndim, shape);
    size_t n1, n2;
    void *a = raw_bytes(got, &n1), *b = raw_bytes(want, &n2);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "%s: output %d differs when %s", current_case,
                  k, how);
    free(a), free(b);
}

static const char *json_of(DeftSymbolHandle sym) {
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    return json;
}

static DeftSymbolHandle export_symbol(int nin, DeftNDArrayHandle *in, int nout,
                                      DeftNDArrayHandle *out) {
    static const char *in_names[] = {"in0", "in1", "in2", "in3", "in4", "in5", "in6", "in7"};
    static const char *out_names[] = {"out0", "out1", "out2", "out3",
                                      "out4", "out5", "out6", "out7"};
    DeftSymbolHandle sym;
    ck_assert_ok(
        DeftNDArrayGetDeferredComputeSymbol(in, out, in_names, out_names, nin, nout, &sym));
    int count;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(sym, &count, &names));
    ck_assert_int_eq(count, nin);
    for (int i = 0; i < nin; i++) ck_assert_str_eq(names[i], in_names[i]);
    return sym;
}

/* Run a saved symbol in an executor on the inputs; compare with the reference outputs. */
static void check_executor(const char *json, int nin, DeftNDArrayHandle *in, int nout,
                           DeftNDArrayHandle *ref) {
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &sym));
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    DeftNDArrayHandle out[MAX_IO] = {NULL};
    int produced = MAX_IO;
    ck_assert_ok(DeftCachedOpInvoke(exec, nin, in, &produced, out));
    ck_assert_int_eq(produced, nout);
    for (int k = 0; k < nout; k++) assert_same_bytes(out[k], ref[k], "run by the executor", k);
    free_all(nout, out);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
}

/* The three readings of a case (see the top of the file). */
static void check_case(int nin, DeftNDArrayHandle *in, build_fn build) {
    DeftNDArrayHandle ref[MAX_IO], lazy[MAX_IO], again[MAX_IO];
    int nout = build(in, ref);

    set_deferred(1);
    ck_assert_int_eq(build(in, lazy), nout);
    set_deferred(0);
    for (int k = 0; k < nout; k++) {
        int64_t shape[DEFT_MAX_NDIM];
        int ndim;
        ck_assert_ok(DeftNDArrayGetShape(ref[k], shape, DEFT_MAX_NDIM, &ndim));
        assert_shape(lazy[k], ndim, shape); /* known without computing */
        ck_assert_int_eq(is_lazy(lazy[k]), 1);
    }
    DeftSymbolHandle before = export_symbol(nin, in, nout, lazy);
    char *json = strdup(json_of(before));
    for (int k = 0; k < nout; k++) assert_same_bytes(lazy[k], ref[k], "read directly", k);
    for (int k = 0; k < nout; k++) ck_assert_int_eq(is_lazy(lazy[k]), 0);
    DeftSymbolHandle after = export_symbol(nin, in, nout, lazy);
    ck_assert_str_eq(json_of(after), json); /* the graph stays after computing */

    set_deferred(1);
    ck_assert_int_eq(build(in, again), nout);
    set_deferred(0);
    for (int k = 0; k < nout; k++) {
        DeftNDArrayHandle pair[2] = {again[k], again[k]};
        DeftNDArrayHandle copy = call1("reshape_like", 2, pair, NO_PARAMS);
        assert_same_bytes(copy, ref[k], "read through an operator", k);
        ck_assert_ok(DeftNDArrayFree(copy));
    }

    check_executor(json, nin, in, nout, ref);
    free(json);
    ck_assert_ok(DeftSymbolFree(before));
    ck_assert_ok(DeftSymbolFree(after));
    free_all(nout, ref), free_all(nout, lazy), free_all(nout, again);
}

/* ---- the cases ---- */

static DeftNDArrayHandle ramp(int dtype, int ndim, const int64_t *shape, double scale) {
    int64_t n = count_of(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = (double)(i % 17) * scale - 3;
    DeftNDArrayHandle h = make(dtype, ndim, shape, v);
    free(v);
    return h;
}

static int build_no_inputs(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    (void)in;
    DeftNDArrayHandle a = call1("_arange", 0, NULL, P("start", "0", "stop", "6"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &a, P("scalar", "2.5"));
    DeftNDArrayHandle c = call1("_plus_scalar", 1, &b, P("scalar", "1"));
    out[0] = call1("Reshape", 1, &c, P("shape", "(2,3)"));
    free_all(1, &a), free_all(1, &b), free_all(1, &c);
    return 1;
}

static int build_views(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    out[0] = call1("Reshape", 1, &in[0], P("shape", "(6,4)"));
    out[1] = call1("slice", 1, &out[0], P("begin", "(1,0)", "end", "(5,2)"));
    DeftNDArrayHandle e = call1("slice_axis", 1, &in[0], P("axis", "1", "begin", "2", "end", "5"));
    out[2] = call1("exp", 1, &e, NO_PARAMS);
    free_all(1, &e);
    return 3;
}

static int build_split_subset(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    DeftNDArrayHandle parts[3] = {NULL, NULL, NULL};
    int n = 3;
    ck_assert_ok(call("split", 1, in, &n, parts, P("num_outputs", "3", "axis", "1")));
    out[0] = parts[2];
    out[1] = call1("tanh", 1, &parts[0], NO_PARAMS);
    free_all(2, parts); /* parts[1] is never used: its value need not be kept */
    return 2;
}

static int build_input_is_output(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    DeftNDArrayHandle y = call1("_plus_scalar", 1, &in[0], P("scalar", "1"));
    out[0] = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){y, in[1]}, NO_PARAMS);
    out[1] = call1("reshape_like", 2, (DeftNDArrayHandle[]){in[0], in[0]}, NO_PARAMS);
    free_all(1, &y);
    return 2;
}

static int build_dtype_change(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    DeftNDArrayHandle f = call1("Cast", 1, in, P("dtype", "float64"));
    out[0] = call1("_mul_scalar", 1, &f, P("scalar", "0.5"));
    out[1] = call1("Cast", 1, &out[0], P("dtype", "uint8"));
    free_all(1, &f);
    return 2;
}

static int build_zero_size(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    out[0] = call1("_plus_scalar", 1, in, P("scalar", "1"));
    out[1] = call1("sum", 1, &out[0], P("axis", "0"));
    return 2;
}

static int build_mlp(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    DeftNDArrayHandle h = call1("FullyConnected", 3, in, P("num_hidden", "8"));
    DeftNDArrayHandle a = call1("relu", 1, &h, NO_PARAMS);
    DeftNDArrayHandle o =
        call1("FullyConnected", 3, (DeftNDArrayHandle[]){a, in[3], in[4]}, P("num_hidden", "3"));
    out[0] = call1("softmax", 1, &o, NO_PARAMS);
    out[1] = call1("sum", 1, &a, NO_PARAMS);
    free_all(1, &h), free_all(1, &a), free_all(1, &o);
    return 2;
}

/* in[1] is reached first by the graph walk; list_arguments still follows the listing. */
static int build_reordered(DeftNDArrayHandle *in, DeftNDArrayHandle *out) {
    DeftNDArrayHandle twice = call1("_mul_scalar", 1, &in[1], P("scalar", "2"));
    out[0] = call1("elemwise_sub", 2, (DeftNDArrayHandle[]){twice, in[0]}, NO_PARAMS);
    free_all(1, &twice);
    return 1;
}

typedef struct input_spec {
    int dtype, ndim;
    int64_t shape[2];
    double scale;
} input_spec_t;

static const struct {
    const char *name;
    build_fn build;
    int nin;
    input_spec_t in[5];
} cases[] = {
    {"no inputs (arange)", build_no_inputs, 0, {{0}}},
    {"reshape and slice", build_views, 1, {{DEFT_FLOAT32, 2, {4, 6}, 0.25}}},
    {"a subset of split's outputs", build_split_subset, 1, {{DEFT_FLOAT32, 2, {2, 6}, 0.5}}},
    {"an input that is an output",
     build_input_is_output,
     2,
     {{DEFT_FLOAT64, 1, {5}, 0.1}, {DEFT_FLOAT64, 1, {5}, -0.3}}},
    {"dtype changes", build_dtype_change, 1, {{DEFT_INT32, 2, {3, 3}, 7}}},
    {"inputs used in another order than listed",
     build_reordered,
     2,
     {{DEFT_FLOAT32, 1, {4}, 1}, {DEFT_FLOAT32, 1, {4}, 10}}},
    {"zero-size dimensions", build_zero_size, 1, {{DEFT_FLOAT32, 2, {0, 3}, 1}}},
    {"an MLP with parameters",
     build_mlp,
     5,
     {{DEFT_FLOAT32, 2, {4, 5}, 0.1},
      {DEFT_FLOAT32, 2, {8, 5}, 0.05},
      {DEFT_FLOAT32, 1, {8}, 0.2},
      {DEFT_FLOAT32, 2, {3, 8}, -0.04},
      {DEFT_FLOAT32, 1, {3}, 0.3}}},
};

START_TEST(three_readings) {
    DeftNDArrayHandle in[5];
    current_case = cases[_i].name;
    for (int i = 0; i < cases[_i].nin; i++) {
        const input_spec_t *spec = &cases[_i].in[i];
        in[i] = ramp(spec->dtype, spec->ndim, spec->shape, spec->scale);
    }
    check_case(cases[_i].nin, in, cases[_i].build);
    free_all(cases[_i].nin, in);
}
END_TEST

/* The MLP case's recording, exported as JSON text (the caller frees it). */
static char *mlp_json(void) {
    const int mlp = (int)(sizeof cases / sizeof cases[0]) - 1;
    DeftNDArrayHandle in[5], out[MAX_IO];
    for (int i = 0; i < cases[mlp].nin; i++) {
        const input_spec_t *spec = &cases[mlp].in[i];
        in[i] = ramp(spec->dtype, spec->ndim, spec->shape, spec->scale);
    }
    set_deferred(1);
    int nout = build_mlp(in, out);
    set_deferred(0);
    DeftSymbolHandle sym = export_symbol(cases[mlp].nin, in, nout, out);
    char *json = strdup(json_of(sym));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(nout, out), free_all(cases[mlp].nin, in);
    return json;
}

/* The same program gives the same text: nothing of the process's state (addresses,
 * counters, what was recorded before) shows in an export. */
START_TEST(export_is_deterministic) {
    char *first = mlp_json();
    void *keep_apart = malloc(12345); /* other addresses for the second recording */
    for (int i = 0; i < 3; i++) {     /* other recordings in between */
        DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1), y;
        set_deferred(1);
        y = call1("exp", 1, &x, NO_PARAMS);
        set_deferred(0);
        free_all(1, &y), free_all(1, &x);
    }
    char *second = mlp_json();
    ck_assert_str_eq(second, first);
    free(first), free(second), free(keep_apart);
}
END_TEST

/* ---- what is computed, and when ---- */

START_TEST(shape_without_compute) {
    int64_t before = mem_stat(DEFT_MEM_LIVE_BYTES);
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 2, SHAPE(64, 64), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("dot", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle z = call1("sum", 1, &y, P("axis", "1"));
    set_deferred(0);
    assert_shape(z, 1, SHAPE(64));
    size_t nbytes;
    ck_assert_ok(DeftNDArrayGetNBytes(z, &nbytes));
    ck_assert_uint_eq(nbytes, 64 * 4);
    int dtype;
    ck_assert_ok(DeftNDArrayGetDType(z, &dtype));
    ck_assert_int_eq(dtype, DEFT_FLOAT32);
    ck_assert_int_eq(is_lazy(y), 1);
    ck_assert_int_eq(is_lazy(z), 1);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - before, 64 * 64 * 4); /* only x has storage */
    ck_assert_ok(DeftNDArrayWaitToRead(z));                                /* trigger by waiting */
    ck_assert_int_eq(is_lazy(z), 0);
    ck_assert_int_eq(is_lazy(y), 0); /* live, so it got its value in the same run */
    free_all(1, &x), free_all(1, &y), free_all(1, &z);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), before);
}
END_TEST

/* A normal input is kept by the recording until the call is computed, then let go. */
START_TEST(captured_inputs_released_after_compute) {
    int64_t before = mem_stat(DEFT_MEM_LIVE_BYTES);
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(1024), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("sum", 1, &x, NO_PARAMS);
    set_deferred(0);
    free_all(1, &x);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - before, 1024 * 8); /* held for y */
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&y, 1));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - before, 8); /* y only */
    DeftSymbolHandle sym; /* the structure stays: y still exports, x as a variable */
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol(NULL, &y, NULL, NULL, 0, 1, &sym),
                    DEFT_ERROR_VALUE, "input 0 of a recorded 'sum' is an array that is not bound");
    free_all(1, &y);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), before);
}
END_TEST

START_TEST(only_what_is_needed) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(8), 1);
    set_deferred(1);
    DeftNDArrayHandle a = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    set_deferred(0);
    assert_values(a, 8, VALUES(-2, -1, 0, 1, 2, 3, 4, 5), 0); /* trigger by reading */
    ck_assert_int_eq(is_lazy(b), 1);
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&b, 1));
    ck_assert_int_eq(is_lazy(b), 0);
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&b, 1)); /* computed: nothing to do */
    assert_values(b, 8, VALUES(-6, -4, -2, 0, 2, 4, 6, 8), 0);
    free_all(1, &x), free_all(1, &a), free_all(1, &b);
}
END_TEST

/* A random node computed twice would give its two consumers different numbers. */
START_TEST(each_node_once) {
    set_deferred(1);
    DeftNDArrayHandle r = call1("_random_uniform", 0, NULL, P("shape", "(32)"));
    DeftNDArrayHandle a = call1("_plus_scalar", 1, &r, P("scalar", "0"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &r, P("scalar", "1"));
    set_deferred(0);
    free_all(1, &r); /* nothing holds its value but the recorded consumers */
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&a, 1));
    ck_assert_int_eq(is_lazy(b), 1);
    assert_same_bytes(a, b, "one random draw feeds both", 0);
    free_all(1, &a), free_all(1, &b);
}
END_TEST

START_TEST(lazy_input_to_normal_op) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("square", 1, &x, NO_PARAMS);
    set_deferred(0);
    DeftNDArrayHandle z = call1("elemwise_add", 2, (DeftNDArrayHandle[]){y, x}, NO_PARAMS);
    assert_values(z, 4, VALUES(6, 2, 0, 0), 0);
    ck_assert_int_eq(is_lazy(y), 0);
    free_all(1, &x), free_all(1, &y), free_all(1, &z);
}
END_TEST

START_TEST(deferred_invoke_records_in_any_mode) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    DeftNDArrayHandle y = NULL;
    int nout = 1, on = -1;
    const char *keys[] = {"scalar"}, *vals[] = {"3"};
    ck_assert_ok(
        DeftImperativeDeferredInvoke(op_named("_plus_scalar"), 1, &x, &nout, &y, 1, keys, vals));
    ck_assert_ok(DeftIsDeferredCompute(&on));
    ck_assert_int_eq(on, 0); /* the mode is restored */
    ck_assert_int_eq(is_lazy(y), 1);
    assert_values(y, 4, VALUES(0, 1, 2, 3), 0);
    DeftNDArrayHandle given = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    nout = 1;
    ck_assert_fails(
        DeftImperativeDeferredInvoke(op_named("_plus_scalar"), 1, &x, &nout, &given, 1, keys, vals),
        DEFT_ERROR_VALUE, "output 0 is given");
    free_all(1, &x), free_all(1, &y), free_all(1, &given);
}
END_TEST

/* ---- errors ---- */

START_TEST(writing_lazy_is_rejected) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("exp", 1, &x, NO_PARAMS);
    DeftNDArrayHandle m = call1("zeros_like", 1, &x, NO_PARAMS);
    ck_assert_call_fails("sgd_mom_update", 3, ((DeftNDArrayHandle[]){x, x, m}), P("lr", "0.1"),
                         DEFT_ERROR_VALUE, "input 2 is a lazy array");
    set_deferred(0);
    DeftNDArrayHandle out[1] = {y};
    int nout = 1;
    ck_assert_fails(call("_copyto", 1, &x, &nout, out, NO_PARAMS), DEFT_ERROR_VALUE,
                    "output 0 is a lazy array");
    ck_assert_fails(call("sgd_mom_update", 3, (DeftNDArrayHandle[]){x, x, m}, &nout,
                         (DeftNDArrayHandle[]){NULL}, P("lr", "0.1")),
                    DEFT_ERROR_VALUE, "input 2 is a lazy array");
    float four[4] = {0};
    ck_assert_fails(DeftNDArrayCopyFromHost(y, four, sizeof four), DEFT_ERROR_VALUE,
                    "cannot be overwritten");
    ck_assert_int_eq(is_lazy(y), 1); /* nothing was computed by the failed calls */
    assert_values(y, 4, VALUES(exp(-3.0), exp(-2.0), exp(-1.0), 1), 2e-6);
    free_all(1, &x), free_all(1, &y), free_all(1, &m);
}
END_TEST

/* An input updated in place (sgd_mom_update's mom, as BatchNorm's moving
 * statistics) is recorded as an auxiliary state: the exported graph's
 * executor updates the array it is given, computing the lazy result updates
 * the array recorded, and neither happens before. */
START_TEST(update_in_place_is_recorded) {
    DeftNDArrayHandle w = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1),
                      g = ramp(DEFT_FLOAT32, 1, SHAPE(4), 0.5);
    DeftNDArrayHandle mom = ramp(DEFT_FLOAT32, 1, SHAPE(4), 0.25);
    DeftNDArrayHandle mom2 = ramp(DEFT_FLOAT32, 1, SHAPE(4), 0.25);
    set_deferred(1);
    DeftNDArrayHandle y = call1("sgd_mom_update", 3, ((DeftNDArrayHandle[]){w, g, mom}),
                                P("lr", "0.1", "momentum", "0.9"));
    set_deferred(0);
    DeftSymbolHandle sym;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){w, g, mom}, &y,
                                                     (const char *[]){"weight", "grad", "mom"},
                                                     (const char *[]){"step"}, 3, 1, &sym));
    int count;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(sym, &count, &names));
    ck_assert_int_eq(count, 2);
    ck_assert_str_eq(names[1], "grad");
    ck_assert_ok(DeftSymbolListAuxiliaryStates(sym, &count, &names));
    ck_assert_int_eq(count, 1);
    ck_assert_str_eq(names[0], "mom");
    assert_values(mom, 4, VALUES(-3, -2.75, -2.5, -2.25), 0); /* recorded, not run */
    /* mom = 0.9 mom - 0.1 grad; the result is weight + mom */
    const double new_mom[] = {-2.4, -2.225, -2.05, -1.875};
    check_executor(json_of(sym), 3, (DeftNDArrayHandle[]){w, g, mom2}, 1, &y);
    assert_values(mom2, 4, new_mom, 1e-6);
    assert_values(mom, 4, new_mom, 1e-6); /* computing y (above) updated the recorded mom */
    assert_values(y, 4, VALUES(-5.4, -4.225, -3.05, -1.875), 1e-6);
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(1, &w), free_all(1, &g), free_all(1, &mom), free_all(1, &mom2), free_all(1, &y);
}
END_TEST

/* A recorded shape whose byte size does not fit is refused when recorded, as
 * an imperative call refuses it, not written past its buffer when computed. */
START_TEST(recording_refuses_an_overflowing_byte_size) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 0, SHAPE(1), VALUES(1.5));
    const char *huge = "(2305843009213693953,)"; /* 2^61 + 1 elements of 8 bytes */
    ck_assert_call_fails("broadcast_to", 1, &x, P("shape", huge), DEFT_ERROR_VALUE, "bytes");
    set_deferred(1);
    ck_assert_call_fails("broadcast_to", 1, &x, P("shape", huge), DEFT_ERROR_VALUE,
                         "operator 'broadcast_to': output 0: shape (2305843009213693953,) with "
                         "8-byte elements needs more than");
    set_deferred(0);
    free_all(1, &x);
}
END_TEST

/* Every output keeps its name: one array listed under two names, and an
 * input listed as an output, are outputs of their own. */
START_TEST(export_keeps_every_output_name) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(3), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("exp", 1, &x, NO_PARAMS);
    set_deferred(0);
    DeftSymbolHandle sym, loaded;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(
        &x, (DeftNDArrayHandle[]){y, y, x}, (const char *[]){"x"},
        (const char *[]){"first", "second", "same"}, 1, 3, &sym));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &loaded));
    DeftSymbolHandle both[2] = {sym, loaded};
    for (int s = 0; s < 2; s++) {
        int n;
        const char *const *names;
        ck_assert_ok(DeftSymbolListOutputs(both[s], &n, &names));
        ck_assert_int_eq(n, 3);
        ck_assert_str_eq(names[0], "first_output");
        ck_assert_str_eq(names[1], "second_output");
        ck_assert_str_eq(names[2], "same_output");
        DeftCachedOpHandle exec;
        ck_assert_ok(DeftCachedOpCreate(both[s], 0, &exec));
        DeftNDArrayHandle out[3] = {NULL, NULL, NULL};
        int nout = 3;
        ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, out));
        ck_assert_int_eq(nout, 3);
        assert_same_bytes(out[0], y, "first", 0);
        assert_same_bytes(out[1], y, "second", 1);
        assert_same_bytes(out[2], x, "same", 2);
        free_all(3, out);
        ck_assert_ok(DeftCachedOpFree(exec));
    }
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftSymbolFree(loaded));
    free_all(1, &y), free_all(1, &x);
}
END_TEST

/* A backward inside a deferred-compute scope computes through the lazy
 * forward values (it used to run its kernels on their missing buffers). */
START_TEST(backward_inside_deferred_compute_computes) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, -2, 0.5));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(3), NULL);
    int req = DEFT_GRAD_WRITE;
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, &req, &g));
    set_deferred(1);
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle cube = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle y = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){cube, x}, NO_PARAMS);
    DeftNDArrayHandle s = call1("sum", 1, &y, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    ck_assert_int_eq(is_lazy(s), 1);
    ck_assert_int_eq(is_lazy(cube), 1);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 1, 0)); /* retain: differentiated twice */
    assert_values(g, 3, VALUES(3, 12, 0.75), 1e-12);
    DeftNDArrayHandle dx = NULL;
    ck_assert_ok(DeftAutogradComputeGradient(1, &s, NULL, 1, &x, 0, 0, &dx));
    ck_assert_int_eq(is_lazy(dx), 0);
    assert_values(dx, 3, VALUES(3, 12, 0.75), 1e-12);
    int deferred = 0;
    ck_assert_ok(DeftIsDeferredCompute(&deferred));
    ck_assert_int_eq(deferred, 1); /* the scope goes on */
    set_deferred(0);
    assert_values(s, 1, VALUES(1 - 8 + 0.125), 1e-12);
    free_all(6, (DeftNDArrayHandle[]){x, g, cube, y, s, dx});
}
END_TEST

START_TEST(export_errors) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    DeftNDArrayHandle w = ramp(DEFT_FLOAT32, 1, SHAPE(4), 2);
    DeftNDArrayHandle unused = ramp(DEFT_FLOAT32, 1, SHAPE(4), 3);
    set_deferred(1);
    DeftNDArrayHandle y = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, w}, NO_PARAMS);
    set_deferred(0);
    DeftSymbolHandle sym = NULL;
    const char *names[] = {"x", "w", "u"}, *outs[] = {"y", "y"};
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol(&x, &y, names, outs, 1, 1, &sym),
                    DEFT_ERROR_VALUE,
                    "input 1 of a recorded 'elemwise_mul' is an array that is neither computed "
                    "from the inputs nor listed");
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){x, w, unused}, &y,
                                                        names, outs, 3, 1, &sym),
                    DEFT_ERROR_VALUE, "inputs[2] ('u') is connected to no output");
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){x, w}, &y,
                                                        (const char *[]){"x", "x"}, outs, 2, 1,
                                                        &sym),
                    DEFT_ERROR_VALUE, "both named 'x'");
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){x, w},
                                                        (DeftNDArrayHandle[]){y, y}, names, outs, 2,
                                                        2, &sym),
                    DEFT_ERROR_VALUE, "both named 'y'");
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){x, x}, &y, names,
                                                        outs, 2, 1, &sym),
                    DEFT_ERROR_VALUE, "the same array");
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol(&x, &w, names, outs, 1, 1, &sym),
                    DEFT_ERROR_VALUE, "outputs[0] was not recorded");
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol(NULL, &y, NULL, outs, 0, 1, &sym),
                    DEFT_ERROR_VALUE, "not bound to a variable");
    ck_assert_ptr_null(sym);
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){x, w}, &y, names, outs,
                                                     2, 1, &sym));
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftNDArrayClearDeferredCompute(&y, 1));
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol((DeftNDArrayHandle[]){x, w}, &y, names,
                                                        outs, 2, 1, &sym),
                    DEFT_ERROR_VALUE, "outputs[0] was not recorded");
    assert_values(y, 4, VALUES(9, 2, -1, 0), 0); /* cleared after computing */
    free_all(1, &x), free_all(1, &w), free_all(1, &unused), free_all(1, &y);
}
END_TEST

/* A computed result freed leaves its record for the next small array
 * (ndarray.c's spare), which must come without the old history. */
START_TEST(freed_result_lends_no_history) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    set_deferred(0);
    ck_assert_ok(DeftNDArrayWaitToRead(y));
    ck_assert_ok(DeftNDArrayFree(y));
    DeftNDArrayHandle z = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    ck_assert_int_eq(is_lazy(z), 0);
    DeftSymbolHandle sym = NULL;
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol(&x, &z, (const char *[]){"x"},
                                                        (const char *[]){"z"}, 1, 1, &sym),
                    DEFT_ERROR_VALUE, "outputs[0] was not recorded");
    free_all(1, &z), free_all(1, &x);
}
END_TEST

/* One output of a multi-output call listed as an input, another used: the
 * call cannot be cut in two. */
START_TEST(export_half_of_a_split) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    DeftNDArrayHandle parts[2] = {NULL, NULL};
    int n = 2;
    set_deferred(1);
    ck_assert_ok(call("split", 1, &x, &n, parts, P("num_outputs", "2", "axis", "0")));
    DeftNDArrayHandle y = call1("elemwise_add", 2, parts, NO_PARAMS);
    set_deferred(0);
    DeftSymbolHandle sym = NULL;
    ck_assert_fails(DeftNDArrayGetDeferredComputeSymbol(&parts[0], &y, (const char *[]){"a"},
                                                        (const char *[]){"y"}, 1, 1, &sym),
                    DEFT_ERROR_VALUE,
                    "input 1 of a recorded 'elemwise_add' is output 1 of a 'split' whose other "
                    "output is an input; list that output as an input too");
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(parts, &y, (const char *[]){"a", "b"},
                                                     (const char *[]){"y"}, 2, 1, &sym));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(2, parts), free_all(1, &y), free_all(1, &x);
}
END_TEST

START_TEST(bound_variables) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 2, SHAPE(2, 3), 1);
    DeftNDArrayHandle w = ramp(DEFT_FLOAT32, 2, SHAPE(4, 3), 0.5);
    DeftSymbolHandle vx = var("data"), vw = var("weight"), other = var("other");
    ck_assert_ok(DeftNDArraySetDeferredComputeVariable((DeftNDArrayHandle[]){x, w},
                                                       (DeftSymbolHandle[]){vx, vw}, 2));
    ck_assert_ok(DeftNDArraySetDeferredComputeVariable(&x, &vx, 1)); /* same name again: fine */
    ck_assert_fails(DeftNDArraySetDeferredComputeVariable(&x, &other, 1), DEFT_ERROR_VALUE,
                    "already bound to variable 'data'");
    set_deferred(1);
    DeftNDArrayHandle y = call1("FullyConnected", 2, (DeftNDArrayHandle[]){x, w},
                                P("num_hidden", "4", "no_bias", "true"));
    set_deferred(0);
    ck_assert_fails(DeftNDArraySetDeferredComputeVariable(&y, &other, 1), DEFT_ERROR_VALUE,
                    "result of a recorded operation");
    DeftSymbolHandle sym;
    ck_assert_ok(
        DeftNDArrayGetDeferredComputeSymbol(NULL, &y, NULL, (const char *[]){"fc"}, 0, 1, &sym));
    int count;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(sym, &count, &names));
    ck_assert_int_eq(count, 2);
    ck_assert_str_eq(names[0], "data");
    ck_assert_str_eq(names[1], "weight");
    ck_assert_ok(DeftSymbolListOutputs(sym, &count, &names));
    ck_assert_str_eq(names[0], "fc_output");
    check_executor(json_of(sym), 2, (DeftNDArrayHandle[]){x, w}, 1, &y);
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftSymbolFree(vx));
    ck_assert_ok(DeftSymbolFree(vw));
    ck_assert_ok(DeftSymbolFree(other));
    free_all(1, &x), free_all(1, &w), free_all(1, &y);
}
END_TEST

/* ---- threads and long chains ---- */

static void *record_on_thread(void *arg) {
    double scalar = *(double *)arg;
    char text[32];
    snprintf(text, sizeof text, "%g", scalar);
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(16), 1);
    for (int round = 0; round < 200; round++) {
        set_deferred(1);
        DeftNDArrayHandle y = call1("_mul_scalar", 1, &x, P("scalar", text));
        DeftNDArrayHandle z = call1("_plus_scalar", 1, &y, P("scalar", text));
        set_deferred(0);
        int on = 1;
        ck_assert_ok(DeftIsDeferredCompute(&on));
        ck_assert_int_eq(on, 0);
        int64_t n;
        double *v = read_all(z, &n);
        for (int64_t i = 0; i < n; i++)
            ck_assert_double_eq(v[i], ((double)(i % 17) - 3) * scalar + scalar);
        free(v);
        free_all(1, &y), free_all(1, &z);
    }
    free_all(1, &x);
    return NULL;
}

START_TEST(two_threads) {
    pthread_t t[2];
    double scalars[2] = {2, 3};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, record_on_thread, &scalars[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}
END_TEST

/* One lazy array, read on one thread while another records a call on it: the
 * call keeps the value the read computes, whichever comes first. */
typedef struct shared_lazy {
    DeftNDArrayHandle lazy, out;
    pthread_barrier_t start;
    int delay; /* spins before recording: the rounds sweep over the read's duration */
} shared_lazy_t;

static void *read_lazy_on_thread(void *arg) {
    shared_lazy_t *s = arg;
    pthread_barrier_wait(&s->start);
    ck_assert_ok(DeftNDArrayWaitToRead(s->lazy));
    return NULL;
}

static void *record_on_lazy_on_thread(void *arg) {
    shared_lazy_t *s = arg;
    pthread_barrier_wait(&s->start);
    for (volatile int i = 0; i < s->delay; i++) continue;
    set_deferred(1);
    s->out = call1("_plus_scalar", 1, &s->lazy, P("scalar", "1"));
    set_deferred(0);
    return NULL;
}

START_TEST(threads_record_on_and_read_one_lazy_array) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(4), 1);
    for (int round = 0; round < 1000; round++) {
        set_deferred(1);
        shared_lazy_t s = {.lazy = call1("_mul_scalar", 1, &x, P("scalar", "2"))};
        set_deferred(0);
        s.delay = round % 100 * 30;
        pthread_barrier_init(&s.start, NULL, 2);
        pthread_t reader, recorder;
        pthread_create(&reader, NULL, read_lazy_on_thread, &s);
        pthread_create(&recorder, NULL, record_on_lazy_on_thread, &s);
        pthread_join(reader, NULL);
        pthread_join(recorder, NULL);
        pthread_barrier_destroy(&s.start);
        free_all(1, &s.lazy); /* the recorded call alone keeps its input's value now */
        assert_values(s.out, 4, VALUES(-5, -3, -1, 1), 0);
        free_all(1, &s.out);
    }
    free_all(1, &x);
}
END_TEST

/* One thread reads the end of a recorded chain while another frees the array
 * in its middle, which the read's walk may be looking at. */
typedef struct freed_middle {
    DeftNDArrayHandle middle, end;
    pthread_barrier_t start;
    int delay;
} freed_middle_t;

static void *read_end_on_thread(void *arg) {
    freed_middle_t *s = arg;
    pthread_barrier_wait(&s->start);
    ck_assert_ok(DeftNDArrayWaitToRead(s->end));
    return NULL;
}

static void *free_middle_on_thread(void *arg) {
    freed_middle_t *s = arg;
    pthread_barrier_wait(&s->start);
    for (volatile int i = 0; i < s->delay; i++) continue;
    ck_assert_ok(DeftNDArrayFree(s->middle));
    return NULL;
}

START_TEST(threads_free_and_read_one_recorded_graph) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(4), 1);
    for (int round = 0; round < 1000; round++) {
        freed_middle_t s = {.delay = round % 100 * 30};
        set_deferred(1);
        s.middle = call1("_mul_scalar", 1, &x, P("scalar", "2"));
        s.end = call1("_plus_scalar", 1, &s.middle, P("scalar", "3"));
        set_deferred(0);
        pthread_barrier_init(&s.start, NULL, 2);
        pthread_t reader, freer;
        pthread_create(&reader, NULL, read_end_on_thread, &s);
        pthread_create(&freer, NULL, free_middle_on_thread, &s);
        pthread_join(reader, NULL);
        pthread_join(freer, NULL);
        pthread_barrier_destroy(&s.start);
        assert_values(s.end, 4, VALUES(-3, -1, 1, 3), 0);
        free_all(1, &s.end);
    }
    free_all(1, &x);
}
END_TEST

/* Two threads record on one parameter (given its variable by whichever comes
 * first), each freeing its results as it goes. */
static void *record_on_parameter(void *arg) {
    DeftNDArrayHandle w = arg;
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(4), 1);
    for (int round = 0; round < 300; round++) {
        set_deferred(1);
        DeftNDArrayHandle y = call1("elemwise_add", 2, (DeftNDArrayHandle[]){x, w}, NO_PARAMS);
        DeftNDArrayHandle z = call1("_mul_scalar", 1, &y, P("scalar", "2"));
        set_deferred(0);
        free_all(1, &y);
        assert_values(z, 4, VALUES(-12, -8, -4, 0), 0);
        free_all(1, &z);
    }
    free_all(1, &x);
    return NULL;
}

/* Odd rounds: the parameter is made by a call recorded for autograd, so it is no
 * live output of its node, and its node keeps its value only while some
 * recorded call needs it: the threads' calls fill and empty that slot in turn. */
static DeftNDArrayHandle shared_parameter(int round, DeftNDArrayHandle *v, DeftNDArrayHandle *g) {
    DeftNDArrayHandle w = ramp(DEFT_FLOAT64, 1, SHAPE(4), 1); /* no history yet */
    if (round % 2 == 0) return w;
    *v = w, *g = ramp(DEFT_FLOAT64, 1, SHAPE(4), 0);
    ck_assert_ok(DeftAutogradMarkVariables(1, v, NULL, g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    w = call1("_mul_scalar", 1, v, P("scalar", "1"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    return w;
}

START_TEST(threads_record_on_one_parameter) {
    for (int round = 0; round < 20; round++) {
        DeftNDArrayHandle v = NULL, g = NULL, w = shared_parameter(round, &v, &g);
        pthread_t t[2];
        for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, record_on_parameter, w);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        free_all(1, &w);
        if (v) free_all(1, &v), free_all(1, &g);
    }
}
END_TEST

START_TEST(million_op_chain) {
    int64_t before = mem_stat(DEFT_MEM_LIVE_BYTES);
    DeftNDArrayHandle x = ramp(DEFT_INT64, 1, SHAPE(2), 1);
    DeftNDArrayHandle y = x;
    DeftOpHandle plus = op_named("_plus_scalar");
    const char *key = "scalar", *val = "1";
    int failures = 0;
    set_deferred(1);
    for (int i = 0; i < loop_ops(); i++) { /* no assertion per call: Check logs each one */
        DeftNDArrayHandle next = NULL;
        int nout = 1;
        failures += DeftImperativeInvoke(plus, 1, &y, &nout, &next, 1, &key, &val) != 0;
        if (y != x) failures += DeftNDArrayFree(y) != 0;
        y = next;
    }
    ck_assert_int_eq(failures, 0);
    set_deferred(0);
    ck_assert_int_eq(is_lazy(y), 1);
    assert_values(y, 2, VALUES(loop_ops() - 3, loop_ops() - 2), 0);
    free_all(1, &y), free_all(1, &x);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), before); /* the whole chain was released */
}
END_TEST

/* A lazy array freed before it was computed is kept whole by its thread for the
 * next lazy array it records (ndarray.c): the next one has its own shape, dtype,
 * history and value, whatever the freed one had. */
START_TEST(freed_lazy_array_leaves_nothing_to_the_next) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    set_deferred(1);
    DeftNDArrayHandle a = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    free_all(1, &a);
    DeftNDArrayHandle b = call1("sum", 1, &x, P("axis", "1"));
    free_all(1, &b);
    DeftNDArrayHandle c = call1("Cast", 1, &x, P("dtype", "int32"));
    DeftNDArrayHandle d = call1("sum", 1, &c, P("axis", "0"));
    set_deferred(0);
    ck_assert_int_eq(is_lazy(d), 1);
    assert_shape(d, 1, SHAPE(3));
    ck_assert_int_eq(dtype_of(d), DEFT_INT32);
    assert_values(d, 3, VALUES(5, 7, 9), 0);
    DeftSymbolHandle sym = export_symbol(1, &x, 1, &d); /* Cast, then sum: nothing freed */
    const char *json = json_of(sym);
    ck_assert_ptr_nonnull(strstr(json, "\"Cast\""));
    ck_assert_ptr_null(strstr(json, "_plus_scalar"));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(3, (DeftNDArrayHandle[]){c, d, x});
}
END_TEST

/* A call with many inputs has a node too large to hold its record (node.c makes it
 * apart), with its parameters shared from the cache or at their defaults. */
START_TEST(many_input_call_records_its_parameters) {
    enum { N = 24 };
    DeftNDArrayHandle in[N];
    for (int i = 0; i < N; i++) in[i] = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(i));
    set_deferred(1);
    DeftNDArrayHandle cat = call1("Concat", N, in, P("num_args", "24", "dim", "0"));
    DeftNDArrayHandle sum = call1("add_n", N, in, NO_PARAMS);
    set_deferred(0);
    ck_assert_int_eq(is_lazy(cat), 1);
    assert_shape(cat, 1, SHAPE(N));
    double want[N];
    for (int i = 0; i < N; i++) want[i] = i;
    assert_values(cat, N, want, 0);
    assert_values(sum, 1, VALUES(276), 0);
    free_all(N, in), free_all(1, &cat), free_all(1, &sum);
}
END_TEST

/* A thread's kept lazy array goes when the thread exits (a sanitizer build sees a leak
 * otherwise); recording goes on on other threads. */
static void *record_and_free_lazy(void *arg) {
    DeftNDArrayHandle x = arg;
    set_deferred(1);
    DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    set_deferred(0);
    free_all(1, &y);
    return NULL;
}

START_TEST(thread_exit_drops_its_lazy_spare) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 2));
    for (int round = 0; round < 4; round++) {
        pthread_t t;
        pthread_create(&t, NULL, record_and_free_lazy, x);
        pthread_join(t, NULL);
    }
    set_deferred(1);
    DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", "2"));
    set_deferred(0);
    assert_values(y, 2, VALUES(3, 4), 0);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

/* Call k of the case below: _plus_scalar with its keys out of order, or Pad, whose
 * pad_width the kernel reads as text, each with parameters of its own. */
static DeftNDArrayHandle parameter_call(DeftNDArrayHandle x, int k) {
    char text[48];
    if (k < 4) {
        snprintf(text, sizeof text, "%d.5", 11 + k);
        return call1("_plus_scalar", 1, &x, P("is_int", "false", "scalar", text));
    }
    snprintf(text, sizeof text, "(0,0,0,0,%d,0,0,1)", k - 3);
    return call1("Pad", 1, &x, P("pad_width", text, "mode", "constant", "constant_value", "-2"));
}

/* A recorded node shares its parameters with the parameter cache's slot: after the
 * slots are reused for other calls, the node's values, strings and sorted attributes
 * are still its own (computed, and exported and run by an executor). */
START_TEST(recorded_parameters_outlive_their_cache_slot) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 4, SHAPE(1, 1, 2, 2), 1), lazy[8], ref[8];
    set_deferred(1);
    for (int k = 0; k < 8; k++) lazy[k] = parameter_call(x, k);
    set_deferred(0);
    for (int s = 0; s < 16; s++) { /* every slot of this thread's cache, twice over */
        char text[16];
        snprintf(text, sizeof text, "%d.25", 40 + s);
        DeftNDArrayHandle y = call1("_mul_scalar", 1, &x, P("scalar", text));
        free_all(1, &y);
    }
    for (int k = 0; k < 8; k++) ck_assert_ok(DeftNDArrayWaitToRead(lazy[k]));
    for (int k = 0; k < 8; k++) ref[k] = parameter_call(x, k);
    for (int k = 0; k < 8; k++) assert_same_bytes(lazy[k], ref[k], "recorded", k);
    DeftSymbolHandle sym = export_symbol(1, &x, 8, lazy);
    check_executor(json_of(sym), 1, &x, 8, ref);
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(8, lazy), free_all(8, ref), free_all(1, &x);
}
END_TEST

/* ---- trigger plans ---- */

/* ((x + a) * 2) - x on a float64 ramp of n elements, recorded and read. */
static double *chain_values(int64_t n, const char *a, const char *mul_op) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(n), 1);
    set_deferred(1);
    DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", a));
    DeftNDArrayHandle z = call1(mul_op, 1, &y, P("scalar", "2"));
    DeftNDArrayHandle w = call1("elemwise_sub", 2, (DeftNDArrayHandle[]){z, x}, NO_PARAMS);
    set_deferred(0);
    free_all(1, &y), free_all(1, &z);
    int64_t count;
    double *v = read_all(w, &count);
    ck_assert_int_eq(count, n);
    free_all(1, &w), free_all(1, &x);
    return v;
}

static void stats(long *hits, long *misses) {
    deft_trigger_plan_stats(hits, misses, NULL);
}

START_TEST(trigger_reuses_plan_of_seen_shape) {
    long h0, m0, h1, m1;
    double *first = chain_values(5, "1", "_mul_scalar");
    stats(&h0, &m0);
    double *again = chain_values(5, "1", "_mul_scalar");
    stats(&h1, &m1);
    ck_assert_int_eq(h1, h0 + 1); /* the same shape: planned once */
    ck_assert_int_eq(m1, m0);
    for (int i = 0; i < 5; i++) ck_assert_double_eq(again[i], first[i]);
    for (int i = 0; i < 5; i++)
        ck_assert_double_eq(first[i], ((i % 17) - 3 + 1) * 2.0 - ((i % 17) - 3));
    /* Parameters are not part of a plan: a new value reuses it, and is used. */
    double *other = chain_values(5, "7", "_mul_scalar");
    stats(&h0, &m0);
    ck_assert_int_eq(h0, h1 + 1);
    for (int i = 0; i < 5; i++)
        ck_assert_double_eq(other[i], ((i % 17) - 3 + 7) * 2.0 - ((i % 17) - 3));
    /* A new shape or operator is a new plan. */
    free(chain_values(6, "1", "_mul_scalar"));
    stats(&h1, &m1);
    ck_assert_int_eq(m1, m0 + 1);
    double *divided = chain_values(5, "1", "_div_scalar");
    stats(&h0, &m0);
    ck_assert_int_eq(m0, m1 + 1);
    for (int i = 0; i < 5; i++)
        ck_assert_double_eq(divided[i], ((i % 17) - 3 + 1) / 2.0 - ((i % 17) - 3));
    free(first), free(again), free(other), free(divided);
}
END_TEST

START_TEST(trigger_plans_off_and_bounded) {
    int prev;
    double *cached = chain_values(4, "3", "_mul_scalar");
    deft_trigger_plan_set_capacity(0, &prev);
    long h0, m0, h1, m1;
    int count;
    deft_trigger_plan_stats(&h0, &m0, &count);
    ck_assert_int_eq(count, 0); /* emptied */
    double *uncached = chain_values(4, "3", "_mul_scalar");
    free(chain_values(4, "3", "_mul_scalar"));
    stats(&h1, &m1);
    ck_assert_int_eq(h1, h0); /* nothing kept, nothing hit */
    ck_assert_int_eq(m1, m0 + 2);
    for (int i = 0; i < 4; i++) ck_assert_double_eq(uncached[i], cached[i]);
    deft_trigger_plan_set_capacity(1, NULL); /* two shapes in turn: each evicts the other */
    for (int round = 0; round < 2; round++) {
        free(chain_values(4, "3", "_mul_scalar"));
        free(chain_values(3, "3", "_mul_scalar"));
    }
    deft_trigger_plan_stats(&h0, &m0, &count);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(h0, h1);
    ck_assert_int_eq(m0, m1 + 4);
    deft_trigger_plan_set_capacity(prev, NULL);
    free(cached), free(uncached);
}
END_TEST

static void *trigger_on_thread(void *arg) {
    (void)arg;
    for (int round = 0; round < 300; round++) {
        double *v = chain_values(8, "2", "_mul_scalar");
        for (int i = 0; i < 8; i++)
            ck_assert_double_eq(v[i], ((i % 17) - 3 + 2) * 2.0 - ((i % 17) - 3));
        free(v);
    }
    return NULL;
}

START_TEST(two_threads_trigger_one_shape) {
    long h0, h1;
    stats(&h0, NULL);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, trigger_on_thread, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    stats(&h1, NULL);
    ck_assert_int_ge(h1 - h0, 598); /* one plan for both threads (at most the first two miss) */
}
END_TEST

/* A plan made while a value was needed later does not serve a run where it is not. */
START_TEST(trigger_plan_tells_kept_values_apart) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(3), 1);
    for (int keep = 0; keep < 2; keep++) {
        set_deferred(1);
        DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", "1"));
        DeftNDArrayHandle z = call1("_mul_scalar", 1, &y, P("scalar", "2"));
        DeftNDArrayHandle later = keep ? call1("_mul_scalar", 1, &y, P("scalar", "3")) : NULL;
        set_deferred(0);
        free_all(1, &y);
        assert_values(z, 3, VALUES(-2 * 2, -1 * 2, 0), 0); /* later still needs y's value */
        if (later) assert_values(later, 3, VALUES(-2 * 3, -1 * 3, 0), 0), free_all(1, &later);
        free_all(1, &z);
    }
    free_all(1, &x);
}
END_TEST

/* c = b - a, or c = b - x, with a = x + 1 and b = a * 2 (a and b freed before the read):
 * the same operators, shapes and node order, wired differently. */
static void read_rewired(int wire_x, const double *want) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(7), 1);
    set_deferred(1);
    DeftNDArrayHandle a = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &a, P("scalar", "2"));
    DeftNDArrayHandle c =
        call1("elemwise_sub", 2, (DeftNDArrayHandle[]){b, wire_x ? x : a}, NO_PARAMS);
    set_deferred(0);
    free_all(1, &a), free_all(1, &b);
    assert_values(c, 7, want, 0);
    free_all(1, &c), free_all(1, &x);
}

/* Two graphs that differ only in which entry a node reads get a plan each. */
START_TEST(trigger_plans_tell_wiring_apart) {
    const double *minus_a = VALUES(-2, -1, 0, 1, 2, 3, 4); /* (x + 1) * 2 - (x + 1) */
    const double *minus_x = VALUES(-1, 0, 1, 2, 3, 4, 5);  /* (x + 1) * 2 - x */
    long h0, m0, h1, m1;
    read_rewired(0, minus_a);
    stats(&h0, &m0);
    read_rewired(1, minus_x);
    stats(&h1, &m1);
    ck_assert_int_eq(m1, m0 + 1); /* not the first graph's plan */
    for (int round = 0; round < 2; round++) read_rewired(0, minus_a), read_rewired(1, minus_x);
    stats(&h0, &m0);
    ck_assert_int_eq(h0, h1 + 4); /* each found its own */
    ck_assert_int_eq(m0, m1);
}
END_TEST

/* t * t with t = exp(x), or exp(x) * exp(y): the same operators, one node shared or two. */
static void read_square_or_product(int shared, DeftNDArrayHandle x, DeftNDArrayHandle y,
                                   const double *want) {
    set_deferred(1);
    DeftNDArrayHandle a = call1("exp", 1, &x, NO_PARAMS);
    DeftNDArrayHandle b = shared ? a : call1("exp", 1, &y, NO_PARAMS);
    DeftNDArrayHandle c = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){a, b}, NO_PARAMS);
    set_deferred(0);
    free_all(1, &a);
    if (!shared) free_all(1, &b);
    assert_values(c, 3, want, 1e-12);
    free_all(1, &c);
}

/* A graph of a seen shape is matched without a walk; one that shares nodes or leaves
 * differently from every plan's graph is not. */
START_TEST(trigger_match_tells_sharing_apart) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(3), 1);
    DeftNDArrayHandle y = ramp(DEFT_FLOAT64, 1, SHAPE(3), 2);
    double square[3], product[3], square_y[3]; /* x = i - 3, y = 2 i - 3 */
    for (int i = 0; i < 3; i++)
        square[i] = exp(2.0 * (i - 3)), product[i] = exp((i - 3) + (2.0 * i - 3)),
        square_y[i] = exp(2.0 * (2.0 * i - 3));
    long m0 = deft_trigger_plan_matched(), h0, h1, miss0, miss1;
    stats(&h0, &miss0);
    for (int round = 0; round < 2; round++) {
        read_square_or_product(1, x, x, square);
        read_square_or_product(0, x, y, product);
        read_square_or_product(1, y, y, square_y);
    }
    stats(&h1, &miss1);
    ck_assert_int_le(miss1 - miss0, 2); /* a plan each (unless cached already) */
    ck_assert_int_eq(h1 - h0 + miss1 - miss0, 6);
    ck_assert_int_ge(deft_trigger_plan_matched() - m0, 4); /* the seen shapes, matched */
    free_all(1, &x), free_all(1, &y);
}
END_TEST

/* Half k of a split of x, doubled: the graphs of both halves differ only in the output read. */
static void read_half(int k) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(4), 1), parts[2] = {NULL, NULL};
    set_deferred(1);
    int n = 2;
    ck_assert_ok(call("split", 1, &x, &n, parts, P("num_outputs", "2", "axis", "0")));
    DeftNDArrayHandle y = call1("_mul_scalar", 1, &parts[k], P("scalar", "2"));
    set_deferred(0);
    free_all(2, parts);
    assert_values(y, 2, k ? VALUES(-2, 0) : VALUES(-6, -4), 0);
    free_all(1, &y), free_all(1, &x);
}

START_TEST(trigger_match_tells_outputs_apart) {
    for (int round = 0; round < 3; round++) read_half(0), read_half(1);
}
END_TEST

/* A node computed since its plan was made is no longer part of the run: a random node
 * recomputed would draw new values. */
START_TEST(trigger_match_skips_computed_nodes) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(4), 1);
    for (int read_b = 0; read_b < 3; read_b++) {
        set_deferred(1);
        DeftNDArrayHandle a =
            call1("_random_uniform", 0, NULL, P("shape", "(4,)", "dtype", "float64"));
        DeftNDArrayHandle b = call1("_mul_scalar", 1, &a, P("scalar", "2"));
        DeftNDArrayHandle c = call1("elemwise_sub", 2, (DeftNDArrayHandle[]){b, x}, NO_PARAMS);
        set_deferred(0);
        free_all(1, &a);
        int64_t n;
        double *bv = read_b ? read_all(b, &n) : NULL; /* computes a and b */
        free_all(1, &b);
        double *cv = read_all(c, &n);
        for (int i = 0; bv && i < 4; i++) ck_assert_double_eq(cv[i], bv[i] - ((i % 17) - 3));
        free(bv), free(cv);
        free_all(1, &c);
    }
    free_all(1, &x);
}
END_TEST

/* An output nobody in the run reads is still computed when a live array holds it:
 * _backward_Convolution skips the outputs a graph does not want, and a trigger of
 * its weight gradient alone once skipped the data gradient held by dx. */
START_TEST(live_output_not_read_is_computed) {
    DeftNDArrayHandle dy = ramp(DEFT_FLOAT32, 4, SHAPE(1, 1, 3, 3), 1);
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 4, SHAPE(1, 1, 3, 3), 2);
    DeftNDArrayHandle w = ramp(DEFT_FLOAT32, 4, SHAPE(1, 1, 1, 1), 5);
    DeftNDArrayHandle in[3] = {dy, x, w}, want[2] = {NULL}, got[2] = {NULL};
    const char *const *params = P("kernel", "(1,1)", "num_filter", "1", "no_bias", "True");
    int nparams = 0;
    while (params[2 * nparams]) nparams++;
    const char *keys[3], *vals[3];
    for (int i = 0; i < nparams; i++) keys[i] = params[2 * i], vals[i] = params[2 * i + 1];
    int nout = 2;
    DeftOpHandle bwd = op_named("_backward_Convolution");
    ck_assert_ok(DeftImperativeInvoke(bwd, 3, in, &nout, want, nparams, keys, vals));
    set_deferred(1);
    nout = 2;
    ck_assert_ok(DeftImperativeInvoke(bwd, 3, in, &nout, got, nparams, keys, vals));
    set_deferred(0);
    ck_assert_ok(DeftNDArrayWaitToRead(got[1])); /* the weight gradient alone */
    assert_same_bytes(got[0], want[0], "the data gradient was held but not read", 0);
    assert_same_bytes(got[1], want[1], "read", 1);
    DeftNDArrayHandle all[] = {dy, x, w, want[0], want[1], got[0], got[1]};
    free_all(7, all);
}
END_TEST

/* An executor of an exported graph takes the recorded shapes for inputs shaped as recorded,
 * and infers them for others: the same executor runs both. */
/* y = x * 2 and z = sum(y, axis=1) recorded, exported (*sym) and made an executor. */
static DeftCachedOpHandle export_scaled_sum(DeftNDArrayHandle x, DeftNDArrayHandle *y,
                                            DeftNDArrayHandle *z, DeftSymbolHandle *sym) {
    set_deferred(1);
    *y = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    *z = call1("sum", 1, y, P("axis", "1"));
    set_deferred(0);
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, z, (const char *[]){"x"},
                                                     (const char *[]){"z"}, 1, 1, sym));
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(*sym, 0, &op));
    return op;
}

START_TEST(exported_executor_runs_other_shapes) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6)), y, z;
    DeftSymbolHandle sym;
    DeftCachedOpHandle op = export_scaled_sum(x, &y, &z, &sym);
    DeftNDArrayHandle wide = make(DEFT_FLOAT32, 2, SHAPE(3, 2), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle runs[2] = {x, wide}, out[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        int nout = 1;
        ck_assert_ok(DeftCachedOpInvoke(op, 1, &runs[r], &nout, &out[r]));
    }
    assert_values(out[0], 2, VALUES(12, 30), 0);
    assert_values(out[1], 3, VALUES(6, 14, 22), 0);
    ck_assert_ok(DeftCachedOpFree(op));
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(6, (DeftNDArrayHandle[]){x, y, z, wide, out[0], out[1]});
}
END_TEST

/* An exported symbol's executor plans from the types its recording knew after the
 * symbol and the recorded arrays are freed: the executor keeps them (its plans read them
 * in place). */
START_TEST(exported_executor_plans_after_its_symbol_is_freed) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6)), y, z;
    DeftSymbolHandle sym;
    DeftCachedOpHandle op = export_scaled_sum(x, &y, &z, &sym);
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(2, (DeftNDArrayHandle[]){y, z});
    DeftNDArrayHandle out[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        int nout = 1;
        ck_assert_ok(DeftCachedOpInvoke(op, 1, &x, &nout, &out[r]));
        assert_values(out[r], 2, VALUES(12, 30), 0);
    }
    ck_assert_ok(DeftCachedOpFree(op));
    free_all(3, (DeftNDArrayHandle[]){x, out[0], out[1]});
}
END_TEST

/* The types an export records (symbol.h) list the walk's nodes in its order, each with the
 * descriptions inference gives its outputs from the inputs' (the variables first). */
static void assert_types_are_inferences(const deft_symbol_t *sym, const deft_graph_t *g) {
    const deft_symbol_types_t *t = sym->types;
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->num_nodes, g->num_nodes);
    deft_desc_t given[16];
    bool known[16] = {false};
    ck_assert_int_le(g->num_nodes, 16);
    for (int i = 0; i < g->num_nodes; i++) /* the variables: the inputs, as recorded */
        if (!g->nodes[i]->op) given[i] = t->desc[t->first[i]], known[i] = true;
    deft_graph_types_t inferred;
    ck_assert_ok(deft_graph_infer(g, given, known, &inferred));
    for (int i = 0; i < g->num_nodes; i++) {
        ck_assert_ptr_eq(t->nodes[i], g->nodes[i]);
        ck_assert_int_eq(t->first[i], g->row_ptr[i]);
    }
    ck_assert_int_eq(t->first[g->num_nodes], deft_graph_num_entries(g));
    for (int e = 0; e < deft_graph_num_entries(g); e++) {
        ck_assert(inferred.known[e]);
        ck_assert_int_eq(t->desc[e].dtype, inferred.desc[e].dtype);
        ck_assert(deft_shape_equal(&t->desc[e].shape, &inferred.desc[e].shape));
    }
    deft_graph_types_free(&inferred);
}

/* The index an export makes of its symbol's graph (taken by the first executor) is the one a
 * walk of the symbol makes: the same nodes in the same order, entries and outputs. */
static void assert_index_is_the_walks(DeftSymbolHandle handle) {
    deft_symbol_t *sym;
    ck_assert_ok(api_symbol_get(handle, "sym", &sym));
    deft_graph_t *made = deft_symbol_take_graph(sym), *walked;
    ck_assert_ptr_nonnull(made);
    ck_assert_ptr_null(deft_symbol_take_graph(sym)); /* taken once */
    ck_assert_ok(deft_graph_build_unnamed(sym->num_outputs, sym->outputs, &walked));
    ck_assert_int_eq(made->num_nodes, walked->num_nodes);
    for (int i = 0; i < walked->num_nodes; i++) {
        ck_assert_ptr_eq(made->nodes[i], walked->nodes[i]);
        ck_assert_int_eq(made->row_ptr[i + 1], walked->row_ptr[i + 1]);
        ck_assert_int_eq(made->in_ptr[i + 1], walked->in_ptr[i + 1]);
    }
    for (int x = 0; x < walked->in_ptr[walked->num_nodes]; x++)
        ck_assert_int_eq(made->in_entry[x], walked->in_entry[x]);
    for (int o = 0; o < walked->num_outputs; o++)
        ck_assert_int_eq(deft_graph_output_entry(made, o), deft_graph_output_entry(walked, o));
    assert_types_are_inferences(sym, walked);
    /* and its tables of unwanted outputs and updated values say what the walk's do */
    const uint64_t *unwanted = deft_graph_unwanted_outputs(made);
    const uint64_t *walked_unwanted = deft_graph_unwanted_outputs(walked);
    ck_assert_int_eq(unwanted == NULL, walked_unwanted == NULL);
    for (int i = 0; i < walked->num_nodes; i++) {
        ck_assert(!unwanted || unwanted[i] == walked_unwanted[i]);
        ck_assert_int_eq(deft_graph_is_updated_at(made, i), deft_graph_is_updated_at(walked, i));
    }
    deft_graph_free(made), deft_graph_free(walked);
}

START_TEST(export_indexes_its_graph_as_a_walk_does) {
    DeftNDArrayHandle a = ramp(DEFT_FLOAT32, 2, SHAPE(2, 4), 1);
    DeftNDArrayHandle b = ramp(DEFT_FLOAT32, 2, SHAPE(2, 4), 2);
    set_deferred(1);
    /* two inputs given in the other order than met, a node read twice, a split's outputs
     * read apart, two outputs of one node among the outputs */
    DeftNDArrayHandle e = call1("exp", 1, &b, NO_PARAMS);
    DeftNDArrayHandle s = call1("elemwise_add", 2, (DeftNDArrayHandle[]){e, a}, NO_PARAMS);
    DeftNDArrayHandle m = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){s, s}, NO_PARAMS);
    DeftNDArrayHandle parts[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("split", 1, &m, &nout, parts, P("num_outputs", "2", "axis", "1")));
    DeftNDArrayHandle t =
        call1("elemwise_sub", 2, (DeftNDArrayHandle[]){parts[1], parts[0]}, NO_PARAMS);
    set_deferred(0);
    DeftSymbolHandle sym;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(
        (DeftNDArrayHandle[]){b, a}, (DeftNDArrayHandle[]){t, parts[0], parts[1]},
        (const char *[]){"b", "a"}, (const char *[]){"t", "p0", "p1"}, 2, 3, &sym));
    assert_index_is_the_walks(sym);
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(7, (DeftNDArrayHandle[]){a, b, e, s, m, parts[0], parts[1]});
    free_all(1, &t);
}
END_TEST

/* A recorded call's value kept for a consumer goes when the last consumer that needs it
 * is freed, though another consumer (computed) still holds its node: freeing a consumer
 * uncounts it in its inputs unless it held the input alone (record.c, drop_inputs). */
START_TEST(freed_consumer_drops_a_value_kept_for_it) {
    int64_t before = mem_stat(DEFT_MEM_LIVE_BYTES);
    DeftNDArrayHandle x = ramp(DEFT_FLOAT64, 1, SHAPE(1024), 1);
    set_deferred(1);
    DeftNDArrayHandle a = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &a, P("scalar", "2"));
    DeftNDArrayHandle c = call1("_mul_scalar", 1, &a, P("scalar", "3"));
    set_deferred(0);
    free_all(1, &a);
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&b, 1));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - before, 3 * 1024 * 8); /* x, b, a for c */
    free_all(1, &c); /* a's node is still b's input */
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - before, 2 * 1024 * 8);
    free_all(1, &b), free_all(1, &x);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), before);
}
END_TEST

static void *free_first_half(void *arg) {
    free_all(50, arg);
    return NULL;
}

/* Recorded nodes share their cache slot's parameter set; freed on the recording thread they
 * give their references back to that slot (registry.c), elsewhere they drop them. Once the
 * slot is reused, the set is held by nobody but the test. */
START_TEST(freed_nodes_leave_their_parameter_set_counted_right) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(1), 1), y[100];
    set_deferred(1);
    for (int i = 0; i < 100; i++) y[i] = call1("_plus_scalar", 1, &x, P("scalar", "7.5"));
    set_deferred(0);
    deft_ndarray_t *arr;
    ck_assert_ok(api_ndarray(y[99], "y", &arr));
    deft_param_set_t *set = deft_param_set_retain(arr->entry.node->param_set);
    pthread_t other;
    ck_assert_int_eq(pthread_create(&other, NULL, free_first_half, y), 0);
    ck_assert_int_eq(pthread_join(other, NULL), 0);
    free_all(50, y + 50);
    const deft_op_entry_t *entry = deft_registry_find("_plus_scalar");
    for (int s = 0; s < 9; s++) { /* every slot reused: the set's slot lets it go */
        char text[16];
        snprintf(text, sizeof text, "%d.25", s);
        const char *key = "scalar", *val = text;
        const deft_params_t *params;
        ck_assert_ok(deft_op_parse_params(entry, 1, &key, &val, &params));
    }
    int refs = atomic_load(&set->refs);
    ck_assert_int_eq(refs, 1);
    ck_assert_double_eq(set->v[0].f, 7.5);
    deft_param_set_release(set);
    free_all(1, &x);
}
END_TEST

static void add_count_tests(Suite *s); /* at the end of the file */
/* ---- a node's unwanted outputs (trig3) ---- */

/* Two data-and-weight gradients in a row: the first's data gradient is read by nobody (the run
 * lets its kernel skip it), the second's by a live array. The second's kernel must not inherit
 * the first's mask: its data gradient equals the one computed eagerly. */
static void two_conv_gradients(int deferred, int free_first, DeftNDArrayHandle *dx,
                               DeftNDArrayHandle *dw) {
    const int64_t xs[4] = {1, 1, 3, 3}, ws[4] = {1, 1, 2, 2};
    const double xv[9] = {1, -2, 3, 0.5, 4, -1, 2, 1, -3}, wv[4] = {0.5, -1, 2, 1.5},
                 dyv[4] = {1, 2, -1, 0.25};
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 4, xs, xv), w = make(DEFT_FLOAT32, 4, ws, wv),
                      dy = make(DEFT_FLOAT32, 4, ws, dyv);
    const char *params[] = {"kernel", "(2,2)", "num_filter", "1", "no_bias", "true", NULL};
    set_deferred(deferred);
    DeftNDArrayHandle a[2] = {NULL, NULL}, b[2] = {NULL, NULL};
    int na = 2, nb = 2;
    ck_assert_ok(call("_backward_Convolution", 3, (DeftNDArrayHandle[]){dy, x, w}, &na, a, params));
    if (free_first) {
        ck_assert_ok(DeftNDArrayFree(a[0]));
        a[0] = NULL;
    }
    ck_assert_ok(
        call("_backward_Convolution", 3, (DeftNDArrayHandle[]){a[1], x, w}, &nb, b, params));
    set_deferred(0);
    ck_assert_ok(DeftNDArrayWaitToRead(b[0]));
    *dx = b[0], *dw = b[1];
    DeftNDArrayHandle rest[5] = {a[0], a[1], x, w, dy};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftNDArrayFree(rest[i]));
}

START_TEST(unwanted_output_mask_stays_with_its_node) {
    DeftNDArrayHandle want_dx, want_dw, dx, dw;
    two_conv_gradients(0, 0, &want_dx, &want_dw);
    int64_t n;
    double *want = read_all(want_dx, &n);
    for (int round = 0; round < 2; round++) { /* a new plan, then a matched one */
        two_conv_gradients(1, 1, &dx, &dw);
        assert_values(dx, n, want, 1e-6);
        ck_assert_ok(DeftNDArrayFree(dx));
        ck_assert_ok(DeftNDArrayFree(dw));
    }
    free(want);
    ck_assert_ok(DeftNDArrayFree(want_dx));
    ck_assert_ok(DeftNDArrayFree(want_dw));
}
END_TEST

Suite *deferred_suite(void) {
    Suite *s = suite_create("deferred");
    TCase *tc = tcase_create("three readings");
    tcase_add_loop_test(tc, three_readings, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, export_is_deterministic);
    tcase_add_test(tc, exported_executor_runs_other_shapes);
    tcase_add_test(tc, export_indexes_its_graph_as_a_walk_does);
    tcase_add_test(tc, exported_executor_plans_after_its_symbol_is_freed);
    suite_add_tcase(s, tc);
    TCase *when = tcase_create("when");
    tcase_add_test(when, shape_without_compute);
    tcase_add_test(when, captured_inputs_released_after_compute);
    tcase_add_test(when, only_what_is_needed);
    tcase_add_test(when, each_node_once);
    tcase_add_test(when, lazy_input_to_normal_op);
    tcase_add_test(when, deferred_invoke_records_in_any_mode);
    tcase_add_test(when, update_in_place_is_recorded);
    tcase_add_test(when, recorded_parameters_outlive_their_cache_slot);
    tcase_add_test(when, freed_lazy_array_leaves_nothing_to_the_next);
    tcase_add_test(when, thread_exit_drops_its_lazy_spare);
    tcase_add_test(when, many_input_call_records_its_parameters);
    tcase_add_test(when, trigger_reuses_plan_of_seen_shape);
    tcase_add_test(when, trigger_plans_off_and_bounded);
    tcase_add_test(when, trigger_plan_tells_kept_values_apart);
    tcase_add_test(when, trigger_plans_tell_wiring_apart);
    tcase_add_test(when, trigger_match_tells_sharing_apart);
    tcase_add_test(when, trigger_match_skips_computed_nodes);
    tcase_add_test(when, trigger_match_tells_outputs_apart);
    tcase_add_test(when, live_output_not_read_is_computed);
    suite_add_tcase(s, when);
    TCase *errors = tcase_create("errors");
    tcase_add_test(errors, writing_lazy_is_rejected);
    tcase_add_test(errors, export_errors);
    tcase_add_test(errors, recording_refuses_an_overflowing_byte_size);
    tcase_add_test(when, export_keeps_every_output_name);
    tcase_add_test(when, backward_inside_deferred_compute_computes);
    tcase_add_test(errors, export_half_of_a_split);
    tcase_add_test(errors, freed_result_lends_no_history);
    tcase_add_test(errors, bound_variables);
    suite_add_tcase(s, errors);
    TCase *scale = tcase_create("scale");
    tcase_set_timeout(scale, 120);
    tcase_add_test(scale, two_threads);
    tcase_add_test(scale, two_threads_trigger_one_shape);
    tcase_add_test(scale, threads_record_on_and_read_one_lazy_array);
    tcase_add_test(scale, threads_record_on_one_parameter);
    tcase_add_test(scale, threads_free_and_read_one_recorded_graph);
    tcase_add_test(scale, million_op_chain);
    suite_add_tcase(s, scale);
    TCase *freeing = tcase_create("freeing");
    tcase_add_test(freeing, freed_consumer_drops_a_value_kept_for_it);
    tcase_add_test(freeing, freed_nodes_leave_their_parameter_set_counted_right);
    suite_add_tcase(s, freeing);
    add_count_tests(s);
    TCase *unwanted = tcase_create("unwanted outputs");
    tcase_add_test(unwanted, unwanted_output_mask_stays_with_its_node);
    suite_add_tcase(s, unwanted);
    return s;
}

int main(void) {
    return run_suite(deferred_suite());
}

/* ---- a node's counts: references and pending consumers in one word (node.h) ---- */

static deft_node_t *node_of(DeftNDArrayHandle h) {
    deft_ndarray_t *arr;
    ck_assert_ok(api_ndarray(h, "h", &arr));
    return arr->entry.node;
}

static void assert_counts(const deft_node_t *node, int refs, int pending) {
    ck_assert_int_eq((int)deft_node_refs(node), refs);
    ck_assert_int_eq(deft_record_pending(node), pending);
}

/* Each recorded consumer holds a reference to its input's node and counts there as pending until
 * it is computed or freed; the input's own array holds a reference and counts as nothing. */
START_TEST(recorded_consumers_count_in_their_input_until_computed_or_freed) {
    DeftNDArrayHandle x = ramp(DEFT_FLOAT32, 1, SHAPE(4), 1);
    set_deferred(1);
    DeftNDArrayHandle a = call1("_plus_scalar", 1, &x, P("scalar", "1"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &a, P("scalar", "2"));
    DeftNDArrayHandle c = call1("_mul_scalar", 1, &a, P("scalar", "3"));
    set_deferred(0);
    deft_node_t *xn = node_of(x), *an = node_of(a);
    assert_counts(xn, 2, 1); /* x's array, a's node */
    assert_counts(an, 3, 2); /* a's array; b's and c's nodes */
    free_all(1, &a);
    assert_counts(an, 2, 2);
    ck_assert_ok(DeftNDArrayTriggerDeferredCompute(&b, 1)); /* computes a's node and b's */
    assert_counts(xn, 2, 0);
    assert_counts(an, 2, 1);
    free_all(1, &c);
    assert_counts(an, 1, 0);
    free_all(1, &b), free_all(1, &x);
}
END_TEST

static void add_count_tests(Suite *s) {
    TCase *counts = tcase_create("counts");
    tcase_add_test(counts, recorded_consumers_count_in_their_input_until_computed_or_freed);
    suite_add_tcase(s, counts);
}
