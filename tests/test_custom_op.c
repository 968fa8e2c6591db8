/* Custom operators: a cube written with the C API's callbacks, used the ways
 * operators are, differentiated, failing, and profiled. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "check_helpers.h"
#include "symbol_helpers.h"

static pthread_t api_thread;
static int forward_calls, forward_on_api_thread;

static int cube_infer(void *user, int nin, const int *in_ndims, const int64_t *in_shapes,
                      const int *in_dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype) {
    (void)user, (void)nin;
    *out_ndim = in_ndims[0];
    for (int d = 0; d < in_ndims[0]; d++) out_shape[d] = in_shapes[d];
    *out_dtype = in_dtypes[0];
    return 0;
}

/* y = x * x * x, through deft operators the callback calls. */
static int cube_forward(void *user, int nin, const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                        int is_train) {
    (void)user, (void)nin, (void)is_train;
    __atomic_add_fetch(&forward_calls, 1, __ATOMIC_RELAXED);
    if (pthread_equal(pthread_self(), api_thread)) forward_on_api_thread = 1;
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){in[0], in[0]}, NO_PARAMS);
    DeftNDArrayHandle given[1] = {out};
    int nout = 1;
    int status = call("elemwise_mul", 2, (DeftNDArrayHandle[]){sq, in[0]}, &nout, given, NO_PARAMS);
    DeftNDArrayFree(sq);
    return status;
}

/* dx = dy * 3 x^2 */
static int cube_backward(void *user, DeftNDArrayHandle dy, int nin, const DeftNDArrayHandle *in,
                         DeftNDArrayHandle y, const DeftNDArrayHandle *dx) {
    (void)user, (void)nin, (void)y;
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){in[0], in[0]}, NO_PARAMS);
    DeftNDArrayHandle three = call1("_mul_scalar", 1, &sq, P("scalar", "3"));
    DeftNDArrayHandle given[1] = {dx[0]};
    int nout = 1;
    int status = call("elemwise_mul", 2, (DeftNDArrayHandle[]){three, dy}, &nout, given, NO_PARAMS);
    DeftNDArrayFree(sq), DeftNDArrayFree(three);
    return status;
}

static int failing_forward(void *user, int nin, const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                           int is_train) {
    (void)user, (void)nin, (void)in, (void)out, (void)is_train;
    DeftCustomOpSetError("the host raised ZeroDivisionError");
    return 1;
}

static int failing_infer(void *user, int nin, const int *in_ndims, const int64_t *in_shapes,
                         const int *in_dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype) {
    (void)user, (void)nin, (void)in_ndims, (void)in_shapes, (void)in_dtypes, (void)out_ndim;
    (void)out_shape, (void)out_dtype;
    DeftCustomOpSetError("the host raised ValueError");
    return 1;
}

/* Gives its output the shape (2, -5), or (2^40, 2^40) when user is not NULL. */
static int bad_shape_infer(void *user, int nin, const int *in_ndims, const int64_t *in_shapes,
                           const int *in_dtypes, int *out_ndim, int64_t *out_shape,
                           int *out_dtype) {
    (void)nin, (void)in_ndims, (void)in_shapes;
    *out_ndim = 2;
    out_shape[0] = user ? INT64_C(1) << 40 : 2;
    out_shape[1] = user ? INT64_C(1) << 40 : -5;
    *out_dtype = in_dtypes[0];
    return 0;
}

/* A backward that frees an array it made before failing, as a host would. */
static int failing_backward(void *user, DeftNDArrayHandle dy, int nin, const DeftNDArrayHandle *in,
                            DeftNDArrayHandle y, const DeftNDArrayHandle *dx) {
    (void)user, (void)nin, (void)y, (void)dx;
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){in[0], dy}, NO_PARAMS);
    DeftNDArrayFree(sq);
    DeftCustomOpSetError("the host raised KeyError");
    return 1;
}

static void count_release(void *user) {
    ++*(int *)user;
}

static void register_ops(void) {
    static int done;
    if (done) return;
    done = 1;
    DeftCustomOpCallbacks cube = {1, cube_infer, cube_forward, cube_backward, NULL, NULL};
    ck_assert_ok(DeftCustomOpRegister("test_cube", &cube));
    DeftCustomOpCallbacks bad = {1, cube_infer, failing_forward, NULL, NULL, NULL};
    ck_assert_ok(DeftCustomOpRegister("test_failing", &bad));
}

START_TEST(imperative_deferred_and_exported) {
    api_thread = pthread_self();
    register_ops();
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, 2, -3));
    DeftNDArrayHandle y = call1("test_cube", 1, &x, NO_PARAMS);
    assert_values(y, 3, VALUES(1, 8, -27), 0);
    ck_assert_int_eq(forward_on_api_thread, 0); /* a callback thread ran it */
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle lazy = call1("test_cube", 1, &x, NO_PARAMS);
    DeftNDArrayHandle plus = call1("_plus_scalar", 1, &lazy, P("scalar", "1"));
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    DeftSymbolHandle sym, loaded;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, &plus, (const char *[]){"x"},
                                                     (const char *[]){"y"}, 1, 1, &sym));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    ck_assert_ptr_nonnull(strstr(json, "test_cube"));
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &loaded));
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(loaded, 0, &exec));
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &out));
    assert_values(out, 3, VALUES(2, 9, -26), 0);
    assert_values(plus, 3, VALUES(2, 9, -26), 0); /* the lazy reading */
    ck_assert_int_eq(forward_on_api_thread, 0);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftSymbolFree(loaded));
    DeftNDArrayHandle all[] = {x, y, lazy, plus, out};
    free_all(5, all);
}
END_TEST

START_TEST(gradient_matches_finite_differences) {
    register_ops();
    const double xs[3] = {0.5, -1.25, 2};
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(3), NULL);
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(3), xs);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("test_cube", 1, &x, NO_PARAMS);
    DeftNDArrayHandle s = call1("sum", 1, &y, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    double expected[3];
    for (int i = 0; i < 3; i++) {
        double h = 1e-5, up = xs[i] + h, down = xs[i] - h;
        expected[i] = (up * up * up - down * down * down) / (2 * h);
    }
    assert_values(g, 3, expected, 1e-6);
    DeftNDArrayHandle all[] = {g, x, y, s};
    free_all(4, all);
}
END_TEST

/* A hybridized block's call recorded by autograd keeps the values its
 * gradient reads: backward runs the cube's forward callback no second time. */
START_TEST(recorded_graph_call_keeps_its_activations) {
    register_ops();
    DeftSymbolHandle sx = var("x"), sy = apply("test_cube", "cube", 1, &sx, NO_PARAMS);
    DeftSymbolHandle ss = apply("_plus_scalar", "plus", 1, &sy, P("scalar", "1"));
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(ss, 0, &exec));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(2), NULL);
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(2, -1));
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    int before = __atomic_load_n(&forward_calls, __ATOMIC_RELAXED);
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &y));
    ck_assert_int_eq(nout, 1); /* the kept values are not the caller's */
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
    assert_values(g, 2, VALUES(12, 3), 0);
    assert_values(y, 2, VALUES(9, 0), 0);
    ck_assert_int_eq(__atomic_load_n(&forward_calls, __ATOMIC_RELAXED) - before, 1);
    ck_assert_ok(DeftCachedOpFree(exec));
    DeftSymbolHandle syms[] = {sx, sy, ss};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
    DeftNDArrayHandle all[] = {g, x, y};
    free_all(3, all);
}
END_TEST

START_TEST(failures_and_registration_errors) {
    register_ops();
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle y = call1("test_failing", 1, &x, NO_PARAMS); /* fails on the engine */
    ck_assert_fails(DeftNDArrayWaitToRead(y), DEFT_ERROR_VALUE,
                    "the forward callback failed: the host raised ZeroDivisionError");
    static int released;
    DeftCustomOpCallbacks cube = {1, cube_infer, cube_forward, NULL, &released, count_release};
    ck_assert_fails(DeftCustomOpRegister("a::b", &cube), DEFT_ERROR_VALUE, "contains '::'");
    ck_assert_int_eq(released, 1); /* a failed registration gives the user data back */
    ck_assert_fails(DeftCustomOpRegister("test_cube", &cube), DEFT_ERROR_VALUE, "exists already");
    ck_assert_fails(DeftCustomOpRegister("exp", &cube), DEFT_ERROR_VALUE, "exists already");
    cube.num_inputs = 0;
    ck_assert_fails(DeftCustomOpRegister("no_inputs", &cube), DEFT_ERROR_VALUE, "1 to");
    cube.num_inputs = 1, cube.forward = NULL;
    ck_assert_fails(DeftCustomOpRegister("no_forward", &cube), DEFT_ERROR_VALUE, "needs");
    /* no gradient: recording refuses with the operator's name */
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 1, SHAPE(2), NULL), out[1] = {NULL};
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    int nout = 1;
    ck_assert_fails(call("test_failing", 1, &x, &nout, out, NO_PARAMS), DEFT_ERROR_NOT_IMPLEMENTED,
                    "test_failing");
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    DeftWaitAll(); /* reports (and clears) the failure of test_failing above */
    DeftNDArrayHandle all[] = {x, y, g};
    free_all(3, all);
}
END_TEST

/* A failed callback is reported as the custom operator's, naming the callback
 * (not an API function the callback, or deft on its behalf, called last). */
START_TEST(failed_callbacks_name_the_operator_and_the_callback) {
    register_ops();
    static int done;
    if (!done) {
        done = 1;
        DeftCustomOpCallbacks bad_infer = {1, failing_infer, cube_forward, NULL, NULL, NULL};
        ck_assert_ok(DeftCustomOpRegister("test_bad_infer", &bad_infer));
        DeftCustomOpCallbacks bad_back = {1,    cube_infer, cube_forward, failing_backward,
                                          NULL, NULL};
        ck_assert_ok(DeftCustomOpRegister("test_bad_backward", &bad_back));
    }
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle y = call1("test_failing", 1, &x, NO_PARAMS); /* fails on the engine */
    ck_assert_fails(DeftNDArrayWaitToRead(y), DEFT_ERROR_VALUE,
                    "operator 'test_failing': the forward callback failed: the host raised "
                    "ZeroDivisionError");
    ck_assert_ptr_null(strstr(DeftGetLastError(), "DeftNDArrayFree"));
    /* shape inference runs in the caller's API call, which the message still names */
    ck_assert_call_fails("test_bad_infer", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "DeftImperativeInvoke: operator 'test_bad_infer': the shape inference "
                         "callback failed: the host raised ValueError");
    /* the backward callback, after API calls of its own */
    DeftNDArrayHandle g = make(DEFT_FLOAT32, 1, SHAPE(2), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle z = call1("test_bad_backward", 1, &x, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    int status = DeftAutogradBackward(1, &z, NULL, 0, 0);
    if (status == 0) status = DeftNDArrayWaitToRead(g);
    ck_assert_int_eq(status, -1);
    ck_assert_msg(strstr(DeftGetLastError(), "operator 'test_bad_backward': the backward callback "
                                             "failed: the host raised KeyError"),
                  "%s", DeftGetLastError());
    ck_assert_ptr_null(strstr(DeftGetLastError(), "DeftNDArrayFree"));
    DeftWaitAll();
    DeftNDArrayHandle all[] = {x, y, g, z};
    free_all(4, all);
}
END_TEST

/* A shape the inference callback makes up is checked, and refused as the callback's. */
START_TEST(inferred_shapes_are_checked_with_the_operator_named) {
    static int done;
    if (!done) {
        done = 1;
        DeftCustomOpCallbacks negative = {1, bad_shape_infer, cube_forward, NULL, NULL, NULL};
        ck_assert_ok(DeftCustomOpRegister("test_negative_dim", &negative));
        DeftCustomOpCallbacks huge = {1, bad_shape_infer, cube_forward, NULL, &done, NULL};
        ck_assert_ok(DeftCustomOpRegister("test_huge_shape", &huge));
    }
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_call_fails("test_negative_dim", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'test_negative_dim': the shape inference callback gave output 0 "
                         "an invalid shape: shape (2,-5): dimension 1 is -5, expected a dimension "
                         ">= 0");
    ck_assert_ptr_null(strstr(DeftGetLastError(), "bytes"));
    ck_assert_call_fails("test_huge_shape", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'test_huge_shape': the shape inference callback gave output 0 "
                         "an invalid shape: shape (1099511627776,1099511627776) has more elements "
                         "than fit in int64");
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

START_TEST(profiled_under_the_custom_domain) {
    register_ops();
    char path[64];
    snprintf(path, sizeof path, "/tmp/deft_custom_trace_%d.json", (int)getpid());
    ck_assert_ok(DeftProfilerSetConfig(2, (const char *[]){"filename", "profile_imperative"},
                                       (const char *[]){path, "true"}));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_ok(DeftProfilerSetState(1));
    DeftNDArrayHandle y = call1("test_cube", 1, &x, NO_PARAMS);
    ck_assert_ok(DeftNDArrayWaitToRead(y));
    ck_assert_ok(DeftProfilerSetState(0));
    ck_assert_ok(DeftProfilerDump(1));
    FILE *f = fopen(path, "r");
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    unlink(path);
    text[n] = '\0';
    cJSON *root = cJSON_Parse(text);
    ck_assert_ptr_nonnull(root);
    int callback = 0, inner = 0, outer = 0, misleading = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        const cJSON *name = cJSON_GetObjectItem(e, "name"), *cat = cJSON_GetObjectItem(e, "cat");
        if (!cat) continue;
        if (!strcmp(cat->valuestring, "Custom Operators") &&
            !strcmp(name->valuestring, "test_cube"))
            callback++;
        if (!strcmp(cat->valuestring, "Custom Operators") &&
            !strcmp(name->valuestring, "test_cube::elemwise_mul"))
            inner++;
        if (!strcmp(cat->valuestring, "operator") && !strcmp(name->valuestring, "test_cube"))
            outer++;
        misleading += strstr(name->valuestring, "Dummy") != NULL;
    }
    ck_assert_int_eq(callback, 1);
    ck_assert_int_eq(inner, 2);
    ck_assert_int_eq(outer, 1);
    ck_assert_int_eq(misleading, 0);
    cJSON_Delete(root);
    DeftNDArrayHandle all[] = {x, y};
    free_all(2, all);
}
END_TEST

/* What a callback that waits for its own operator saw. */
static struct {
    DeftNDArrayHandle target; /* the array the operator is asked to write */
    int wait_all, wait_own_output, wait_own_input;
    char wait_all_message[512], wait_message[512];
} self_wait;

static int forward_waiting_for_itself(void *user, int nin, const DeftNDArrayHandle *in,
                                      DeftNDArrayHandle out, int is_train) {
    (void)user, (void)nin, (void)is_train;
    self_wait.wait_all = DeftWaitAll();
    snprintf(self_wait.wait_all_message, sizeof self_wait.wait_all_message, "%s",
             DeftGetLastError());
    self_wait.wait_own_output = DeftNDArrayWaitToRead(self_wait.target);
    snprintf(self_wait.wait_message, sizeof self_wait.wait_message, "%s", DeftGetLastError());
    self_wait.wait_own_input = DeftNDArrayWaitToRead(in[0]); /* read, not written: fine */
    DeftNDArrayHandle given[1] = {out};
    int nout = 1;
    return call("_copyto", 1, in, &nout, given, NO_PARAMS);
}

/* A callback that waits for all work, or for the array its own operator
 * writes, gets an error at once instead of waiting forever. */
START_TEST(callback_waiting_for_its_own_operator_is_refused) {
    alarm(60); /* a hang fails the test instead of the whole run */
    DeftCustomOpCallbacks self = {1, cube_infer, forward_waiting_for_itself, NULL, NULL, NULL};
    ck_assert_ok(DeftCustomOpRegister("test_waits_for_itself", &self));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(3, 4));
    self_wait.target = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 0));
    DeftNDArrayHandle given[1] = {self_wait.target};
    int nout = 1;
    ck_assert_ok(call("test_waits_for_itself", 1, &x, &nout, given, NO_PARAMS));
    assert_values(self_wait.target, 2, VALUES(3, 4), 0);
    ck_assert_int_eq(self_wait.wait_all, -1);
    ck_assert_msg(strstr(self_wait.wait_all_message, "DeftWaitAll: waiting for all work from "
                                                     "inside the callback of operator "
                                                     "'test_waits_for_itself' would wait forever"),
                  "%s", self_wait.wait_all_message);
    ck_assert_int_eq(self_wait.wait_own_output, -1);
    ck_assert_msg(strstr(self_wait.wait_message, "DeftNDArrayWaitToRead: waiting for an array "
                                                 "that the operator writes"),
                  "%s", self_wait.wait_message);
    ck_assert_int_eq(self_wait.wait_own_input, 0);
    ck_assert_ok(DeftWaitAll());
    free_all(2, (DeftNDArrayHandle[]){x, self_wait.target});
    alarm(0);
}
END_TEST

/* y = x + 1 written through the address of the lent arrays; what the
 * stream and data accessors answered, for the test to check. */
static struct {
    int stream_status, stranger_status;
    char stream_message[512];
} direct;

static int direct_forward(void *user, int nin, const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                          int is_train) {
    (void)user, (void)nin, (void)is_train;
    void *stream = NULL, *x, *y, *data;
    direct.stream_status = DeftCustomOpGetStream(0, &stream); /* its arrays are on the CPU */
    snprintf(direct.stream_message, sizeof direct.stream_message, "%s", DeftGetLastError());
    DeftNDArrayHandle stranger = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(0));
    direct.stranger_status = DeftCustomOpGetData(stranger, &data);
    DeftNDArrayFree(stranger);
    int64_t n;
    if (DeftCustomOpGetData(in[0], &x) || DeftCustomOpGetData(out, &y) ||
        DeftNDArrayGetSize(out, &n))
        return 1;
    for (int64_t i = 0; i < n; i++) ((double *)y)[i] = ((const double *)x)[i] + 1;
    return 0;
}

/* The stream and the addresses are for the callbacks: refused elsewhere, and
 * the stream only for a GPU that one of the callback's arrays is on. */
START_TEST(callbacks_reach_their_arrays_memory_and_stream) {
    DeftCustomOpCallbacks cb = {1, cube_infer, direct_forward, NULL, NULL, NULL};
    static int registered;
    if (!registered++) ck_assert_ok(DeftCustomOpRegister("test_direct", &cb));
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, 2, -3));
    void *stream, *data;
    ck_assert_fails(DeftCustomOpGetStream(0, &stream), DEFT_ERROR_VALUE,
                    "no custom operator's forward or backward callback runs on this thread");
    ck_assert_fails(DeftCustomOpGetData(x, &data), DEFT_ERROR_VALUE,
                    "no custom operator's forward or backward callback runs on this thread");
    DeftNDArrayHandle y = call1("test_direct", 1, &x, NO_PARAMS);
    assert_values(y, 3, VALUES(2, 3, -2), 0);
    ck_assert_int_eq(direct.stream_status, -1);
    ck_assert_msg(strstr(direct.stream_message, "no array of 'test_direct' is on gpu(0)"), "%s",
                  direct.stream_message);
    ck_assert_int_eq(direct.stranger_status, -1);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

static Suite *custom_suite(void) {
    Suite *suite = suite_create("custom operators");
    TCase *tc = tcase_create("custom");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, imperative_deferred_and_exported);
    tcase_add_test(tc, gradient_matches_finite_differences);
    tcase_add_test(tc, recorded_graph_call_keeps_its_activations);
    tcase_add_test(tc, failures_and_registration_errors);
    tcase_add_test(tc, failed_callbacks_name_the_operator_and_the_callback);
    tcase_add_test(tc, inferred_shapes_are_checked_with_the_operator_named);
    tcase_add_test(tc, profiled_under_the_custom_domain);
    tcase_add_test(tc, callback_waiting_for_its_own_operator_is_refused);
    tcase_add_test(tc, callbacks_reach_their_arrays_memory_and_stream);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(custom_suite());
}
