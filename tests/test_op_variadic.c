/*
 * MXNet's variadic operators (Concat, stack, add_n, ElementWiseSum) and
 * num_args: checked against the inputs when given, taken from them when
 * not, written on export (MXNet cannot load these operators without it),
 * and read back from MXNet's JSON.
 */
#define _POSIX_C_SOURCE 200809L
#include "symbol_helpers.h"

static const char *const variadic_ops[] = {"Concat", "stack", "add_n", "ElementWiseSum"};

START_TEST(test_num_args_is_checked_against_the_inputs) {
    const char *op = variadic_ops[_i];
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT32, 2, SHAPE(1, 2), VALUES(1, 2)),
                               make(DEFT_FLOAT32, 2, SHAPE(1, 2), VALUES(3, 4))};
    DeftNDArrayHandle given = call1(op, 2, in, P("num_args", "2"));
    DeftNDArrayHandle counted = call1(op, 2, in, NO_PARAMS);
    int64_t n;
    double *a = read_all(given, &n);
    assert_values(counted, n, a, 0);
    free(a);
    char want[96];
    /* ElementWiseSum is add_n's alias: errors name the operator */
    snprintf(want, sizeof want, "operator '%s': num_args is 3 but 2 inputs were given",
             strcmp(op, "ElementWiseSum") ? op : "add_n");
    ck_assert_call_fails(op, 2, in, P("num_args", "3"), DEFT_ERROR_VALUE, want);
    free_all(4, (DeftNDArrayHandle[]){in[0], in[1], given, counted});
}
END_TEST

/* The attribute as written for the operator node of a saved symbol. */
static bool saved_has(DeftSymbolHandle s, const char *text) {
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(s, &json));
    return strstr(json, text) != NULL;
}

START_TEST(test_export_writes_num_args) {
    const char *op = variadic_ops[_i];
    DeftSymbolHandle in[3] = {var("a"), var("b"), var("c")};
    DeftSymbolHandle counted = apply(op, "counted", 3, in, NO_PARAMS);
    ck_assert(saved_has(counted, "\"num_args\":\t\"3\""));
    /* given: written once, as given */
    DeftSymbolHandle given = apply(op, "given", 2, in, P("num_args", "2"));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(given, &json));
    ck_assert_int_eq(count_text(json, "num_args"), 1);
    /* and the written graph loads and saves back the same */
    char *first = strdup(json);
    DeftSymbolHandle loaded;
    ck_assert_msg(DeftSymbolCreateFromJSON(first, &loaded) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftSymbolSaveToJSON(loaded, &json));
    ck_assert_str_eq(first, json);
    free(first);
    ck_assert_ok(DeftSymbolFree(loaded));
    ck_assert_ok(DeftSymbolFree(given));
    ck_assert_ok(DeftSymbolFree(counted));
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(in[i]));
}
END_TEST

/* A graph as MXNet 1.9.1 writes it: add_n with its num_args. */
START_TEST(test_mxnet_json_with_num_args_loads) {
    const char *json = "{\"nodes\": [{\"op\": \"null\", \"name\": \"a\", \"inputs\": []},"
                       "{\"op\": \"null\", \"name\": \"b\", \"inputs\": []},"
                       "{\"op\": \"add_n\", \"name\": \"sum\", \"attrs\": {\"num_args\": \"2\"},"
                       " \"inputs\": [[0, 0, 0], [1, 0, 0]]}],"
                       "\"arg_nodes\": [0, 1], \"heads\": [[2, 0, 0]],"
                       "\"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";
    DeftSymbolHandle s;
    ck_assert_msg(DeftSymbolCreateFromJSON(json, &s) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftSymbolFree(s));
    /* a count that disagrees with the inputs is refused when the graph runs */
    const char *bad = "{\"nodes\": [{\"op\": \"null\", \"name\": \"a\", \"inputs\": []},"
                      "{\"op\": \"null\", \"name\": \"b\", \"inputs\": []},"
                      "{\"op\": \"Concat\", \"name\": \"cat\", \"attrs\": {\"num_args\": \"3\"},"
                      " \"inputs\": [[0, 0, 0], [1, 0, 0]]}],"
                      "\"arg_nodes\": [0, 1], \"heads\": [[2, 0, 0]]}";
    ck_assert_msg(DeftSymbolCreateFromJSON(bad, &s) == 0, "%s", DeftGetLastError());
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT32, 2, SHAPE(1, 2), VALUES(1, 2)),
                               make(DEFT_FLOAT32, 2, SHAPE(1, 2), VALUES(3, 4))};
    DeftCachedOpHandle graph;
    ck_assert_ok(DeftCachedOpCreate(s, 0, &graph));
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_fails(DeftCachedOpInvoke(graph, 2, in, &nout, out), DEFT_ERROR_VALUE,
                    "operator 'Concat': num_args is 3 but 2 inputs were given");
    ck_assert_ok(DeftCachedOpFree(graph));
    ck_assert_ok(DeftSymbolFree(s));
    free_all(2, in);
}
END_TEST

static Suite *variadic_suite(void) {
    Suite *suite = suite_create("variadic ops");
    TCase *tc = tcase_create("num_args");
    tcase_add_loop_test(tc, test_num_args_is_checked_against_the_inputs, 0, 4);
    tcase_add_loop_test(tc, test_export_writes_num_args, 0, 4);
    tcase_add_test(tc, test_mxnet_json_with_num_args_loads);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(variadic_suite());
}
