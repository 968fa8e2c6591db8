/* Embedding: rows of the weight by index (clipped), shapes, the inferred weight, errors. */
#include "symbol_helpers.h"

static const double table[] = {0, 1, 10, 11, 20, 21}; /* 3 rows of 2 */

START_TEST(test_rows_by_index_clipped) {
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 2, SHAPE(3, 2), table);
    DeftNDArrayHandle idx = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(2, 0, -1, 7));
    DeftNDArrayHandle y = call1("Embedding", 2, (DeftNDArrayHandle[]){idx, w},
                                P("input_dim", "3", "output_dim", "2"));
    assert_shape(y, 3, SHAPE(2, 2, 2));
    assert_values(y, 8, VALUES(20, 21, 0, 1, 0, 1, 20, 21), 0);
    free_all(3, (DeftNDArrayHandle[]){w, idx, y});
}
END_TEST

START_TEST(test_int_indices_and_float64) {
    DeftNDArrayHandle w = make(DEFT_FLOAT64, 2, SHAPE(3, 2), table);
    DeftNDArrayHandle idx = make(DEFT_INT32, 1, SHAPE(3), VALUES(1, 1, 2));
    DeftNDArrayHandle y = call1("Embedding", 2, (DeftNDArrayHandle[]){idx, w},
                                P("input_dim", "3", "output_dim", "2", "dtype", "float64"));
    assert_values(y, 6, VALUES(10, 11, 10, 11, 20, 21), 0);
    free_all(3, (DeftNDArrayHandle[]){w, idx, y});
}
END_TEST

START_TEST(test_zero_size_data) {
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 2, SHAPE(3, 2), table);
    DeftNDArrayHandle idx = make(DEFT_FLOAT32, 2, SHAPE(0, 4), NULL);
    DeftNDArrayHandle y = call1("Embedding", 2, (DeftNDArrayHandle[]){idx, w},
                                P("input_dim", "3", "output_dim", "2"));
    assert_shape(y, 3, SHAPE(0, 4, 2));
    free_all(3, (DeftNDArrayHandle[]){w, idx, y});
}
END_TEST

START_TEST(test_bad_weight_and_parameters) {
    DeftNDArrayHandle w = make(DEFT_FLOAT32, 2, SHAPE(3, 2), table);
    DeftNDArrayHandle idx = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 1));
    DeftNDArrayHandle in[2] = {idx, w};
    ck_assert_call_fails("Embedding", 2, in, P("input_dim", "4", "output_dim", "2"),
                         DEFT_ERROR_VALUE,
                         "operator 'Embedding': weight has shape (3,2), expected (input_dim, "
                         "output_dim) = (4, 2)");
    ck_assert_call_fails("Embedding", 2, in, P("input_dim", "0", "output_dim", "2"),
                         DEFT_ERROR_VALUE, "input_dim is 0 and output_dim 2, expected both >= 1");
    ck_assert_call_fails("Embedding", 2, in,
                         P("input_dim", "3", "output_dim", "2", "dtype", "float64"),
                         DEFT_ERROR_TYPE, "weight is float32, but dtype is float64");
    ck_assert_call_fails("Embedding", 2, in, P("output_dim", "2"), DEFT_ERROR_VALUE, "input_dim");
    free_all(2, in);
}
END_TEST

/* A graph with only the data's shape infers the weight's from the parameters. */
START_TEST(test_weight_shape_is_inferred) {
    DeftSymbolHandle data = var("data"), w = var("embed_weight");
    DeftSymbolHandle e = apply("Embedding", "embed", 2, (DeftSymbolHandle[]){data, w},
                               P("input_dim", "10", "output_dim", "4"));
    const char *names[] = {"data"};
    int complete;
    ck_assert_ok(DeftSymbolInferShape(e, 1, names, (const int[]){2}, SHAPE(5, 7), NULL, &complete));
    ck_assert_int_eq(complete, 1);
    int64_t dims[DEFT_MAX_NDIM];
    int ndim, dtype;
    ck_assert_ok(
        DeftSymbolGetInferredShape(e, DEFT_ARGUMENTS, 1, dims, DEFT_MAX_NDIM, &ndim, &dtype));
    ck_assert_int_eq(ndim, 2);
    ck_assert_int_eq(dims[0], 10);
    ck_assert_int_eq(dims[1], 4);
    ck_assert_int_eq(dtype, DEFT_FLOAT32);
    ck_assert_ok(
        DeftSymbolGetInferredShape(e, DEFT_OUTPUTS, 0, dims, DEFT_MAX_NDIM, &ndim, &dtype));
    ck_assert_int_eq(ndim, 3);
    ck_assert_int_eq(dims[2], 4);
    ck_assert_ok(DeftSymbolFree(e));
    ck_assert_ok(DeftSymbolFree(w));
    ck_assert_ok(DeftSymbolFree(data));
}
END_TEST

static Suite *embedding_suite(void) {
    Suite *suite = suite_create("Embedding");
    TCase *tc = tcase_create("embedding");
    tcase_add_test(tc, test_rows_by_index_clipped);
    tcase_add_test(tc, test_int_indices_and_float64);
    tcase_add_test(tc, test_zero_size_data);
    tcase_add_test(tc, test_bad_weight_and_parameters);
    tcase_add_test(tc, test_weight_shape_is_inferred);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(embedding_suite());
}
