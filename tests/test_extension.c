/* Extension libraries: loading, registering, running passes, and their failures. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#define DEFT_TESTS_PUBLIC_ONLY  /* built as an extension is: the public headers alone */
#include <deft/lib_api.h>

#include "check_helpers.h"
#include "op_helpers.h"
#include "symbol_helpers.h"

static int64_t count_ops(DeftSymbolHandle sym) {
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    return count_text(json, "\"op\":\t\"_") + count_text(json, "\"op\":\"_");
}

/* y = ((x * 1) + 0) * 3 - 0, recorded and exported. */
static DeftSymbolHandle identity_laden(DeftNDArrayHandle x, DeftNDArrayHandle *y) {
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle a = call1("_mul_scalar", 1, &x, P("scalar", "1"));
    DeftNDArrayHandle b = call1("_plus_scalar", 1, &a, P("scalar", "0"));
    DeftNDArrayHandle c = call1("_mul_scalar", 1, &b, P("scalar", "3"));
    *y = call1("_minus_scalar", 1, &c, P("scalar", "0"));
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    DeftSymbolHandle sym;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, y, (const char *[]){"x"},
                                                     (const char *[]){"y"}, 1, 1, &sym));
    DeftNDArrayHandle temps[] = {a, b, c};
    free_all(3, temps);
    return sym;
}

START_TEST(fold_pass_rewrites_and_keeps_results) {
    ck_assert_ok(DeftLoadLib(DEFT_FOLD_PASS_LIB, 0));
    ck_assert_ok(DeftLoadLib(DEFT_FOLD_PASS_LIB, 0)); /* twice: nothing more */
    int n;
    const char *const *names;
    ck_assert_ok(DeftLibListPasses(&n, &names));
    int found = 0;
    for (int i = 0; i < n; i++) found += !strcmp(names[i], "fold_identity");
    ck_assert_int_eq(found, 1);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)), y;
    DeftSymbolHandle sym = identity_laden(x, &y), folded;
    ck_assert_int_eq(count_ops(sym), 4);
    ck_assert_ok(DeftSymbolOptimizeFor(sym, "fold_identity", 1, (const char *[]){"verbose"},
                                       (const char *[]){"0"}, &folded));
    ck_assert_int_eq(count_ops(folded), 1); /* only the x * 3 is left */
    ck_assert_int_eq(count_ops(sym), 4);    /* the original is untouched */
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(folded, 0, &exec));
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &out));
    assert_values(out, 3, VALUES(3, 6, 9), 0);
    assert_values(y, 3, VALUES(3, 6, 9), 0);
    ck_assert_fails(DeftSymbolOptimizeFor(sym, "fold_identity", 1, (const char *[]){"speed"},
                                          (const char *[]){"11"}, &folded),
                    DEFT_ERROR_VALUE, "unknown option 'speed'");
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(folded));
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {x, y, out};
    free_all(3, all);
}
END_TEST

START_TEST(built_in_passes_by_the_same_call) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)), y;
    DeftSymbolHandle sym = identity_laden(x, &y), out;
    ck_assert_ok(DeftSymbolOptimizeFor(sym, "CSE", 0, NULL, NULL, &out));
    ck_assert_ok(DeftSymbolFree(out));
    ck_assert_fails(
        DeftSymbolOptimizeFor(sym, "CSE", 1, (const char *[]){"a"}, (const char *[]){"b"}, &out),
        DEFT_ERROR_VALUE, "takes no options");
    ck_assert_fails(DeftSymbolOptimizeFor(sym, "no_such_pass", 0, NULL, NULL, &out),
                    DEFT_ERROR_VALUE, "unknown pass 'no_such_pass'");
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {x, y};
    free_all(2, all);
}
END_TEST

START_TEST(failures_leave_the_graph_alone) {
    ck_assert_ok(DeftLoadLib(DEFT_TESTING_PASS_LIB, 0));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)), y;
    DeftSymbolHandle sym = identity_laden(x, &y), out = NULL;
    const char *before;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &before));
    char *copy = strdup(before);
    ck_assert_fails(DeftSymbolOptimizeFor(sym, "always_fail", 0, NULL, NULL, &out),
                    DEFT_ERROR_VALUE, "pass 'always_fail' failed: this pass always fails");
    ck_assert_fails(DeftSymbolOptimizeFor(sym, "garbage", 0, NULL, NULL, &out), DEFT_ERROR_VALUE,
                    "pass 'garbage' returned a malformed graph");
    ck_assert_ptr_null(out);
    const char *after;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &after));
    ck_assert_str_eq(after, copy);
    free(copy);
    /* the library's custom operator is an operator like any other */
    DeftNDArrayHandle twice = call1("lib_double", 1, &x, NO_PARAMS);
    assert_values(twice, 3, VALUES(2, 4, 6), 0);
    ck_assert_ok(DeftNDArrayFree(twice));
    ck_assert_fails(DeftLoadLib(DEFT_REFUSING_PASS_LIB, 0), DEFT_ERROR_VALUE,
                    "refused to initialize");
    int n;
    const char *const *names;
    ck_assert_ok(DeftLibListPasses(&n, &names));
    for (int i = 0; i < n; i++) ck_assert_str_ne(names[i], "from_a_refusing_library");
    ck_assert_fails(DeftLoadLib("/nonexistent/libnothing.so", 0), DEFT_ERROR_VALUE,
                    "cannot load '/nonexistent/libnothing.so'");
    ck_assert_fails(DeftLibRegisterPass("late", NULL, NULL, NULL), DEFT_ERROR_VALUE,
                    "only from deft_lib_initialize");
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {x, y};
    free_all(2, all);
}
END_TEST

/* Occurrences of `c` at the end of `text`. */
static size_t trailing(const char *text, char c) {
    size_t n = strlen(text), run = 0;
    while (run < n && text[n - 1 - run] == c) run++;
    return run;
}

START_TEST(pass_error_filling_the_whole_buffer_is_cut_not_overread) {
    ck_assert_ok(DeftLoadLib(DEFT_TESTING_PASS_LIB, 0));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)), y;
    DeftSymbolHandle sym = identity_laden(x, &y), out = NULL;
    ck_assert_fails(DeftSymbolOptimizeFor(sym, "fill_error", 0, NULL, NULL, &out), DEFT_ERROR_VALUE,
                    "pass 'fill_error' failed: xxxxxxxx");
    /* all but the last byte of the library's buffer (512 bytes), and nothing read beyond it */
    ck_assert_uint_eq(trailing(DeftGetLastError(), 'x'), 511);
    ck_assert_ptr_null(out);
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {x, y};
    free_all(2, all);
}
END_TEST

START_TEST(malformed_pass_result_names_the_api_function_once) {
    ck_assert_ok(DeftLoadLib(DEFT_TESTING_PASS_LIB, 0));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)), y;
    DeftSymbolHandle sym = identity_laden(x, &y), out = NULL;
    ck_assert_fails(DeftSymbolOptimizeFor(sym, "garbage", 0, NULL, NULL, &out), DEFT_ERROR_VALUE,
                    "DeftSymbolOptimizeFor: pass 'garbage' returned a malformed graph: invalid "
                    "JSON");
    ck_assert_int_eq(count_text(DeftGetLastError(), "DeftSymbolOptimizeFor"), 1);
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {x, y};
    free_all(2, all);
}
END_TEST

/* The refusing library registers a pass before refusing: the refusal is still DeftLoadLib's. */
START_TEST(load_lib_refusal_is_reported_by_load_lib) {
    ck_assert_fails(DeftLoadLib(DEFT_REFUSING_PASS_LIB, 0), DEFT_ERROR_VALUE,
                    "DeftLoadLib: '" DEFT_REFUSING_PASS_LIB "' refused to initialize");
    ck_assert_ptr_null(strstr(DeftGetLastError(), "DeftLibRegisterPass"));
}
END_TEST

static Suite *extension_suite(void) {
    Suite *suite = suite_create("extension");
    TCase *tc = tcase_create("extension");
    tcase_add_test(tc, fold_pass_rewrites_and_keeps_results);
    tcase_add_test(tc, built_in_passes_by_the_same_call);
    tcase_add_test(tc, failures_leave_the_graph_alone);
    tcase_add_test(tc, pass_error_filling_the_whole_buffer_is_cut_not_overread);
    tcase_add_test(tc, malformed_pass_result_names_the_api_function_once);
    tcase_add_test(tc, load_lib_refusal_is_reported_by_load_lib);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(extension_suite());
}
