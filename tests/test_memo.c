/* Memoisation of imperative calls: hits, staleness after writes, the bound, what is excluded. */
#include "check_helpers.h"
#include "op_helpers.h"

static void stats(int64_t *hits, int64_t *misses) {
    ck_assert_ok(DeftGetMemoizationStats(hits, misses));
}

START_TEST(off_by_default) {
    int prev = -1;
    ck_assert_ok(DeftSetMemoization(0, &prev));
    ck_assert_int_eq(prev, 0);
    ck_assert_fails(DeftSetMemoization(-1, NULL), DEFT_ERROR_VALUE, "capacity is -1");
    int64_t h0, m0, h1, m1;
    stats(&h0, &m0);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle a = call1("exp", 1, &x, NO_PARAMS), b = call1("exp", 1, &x, NO_PARAMS);
    stats(&h1, &m1);
    ck_assert_int_eq(h1, h0);
    ck_assert_int_eq(m1, m0);
    free_all(1, &x), free_all(1, &a), free_all(1, &b);
}
END_TEST

START_TEST(hits_and_staleness) {
    ck_assert_ok(DeftSetMemoization(8, NULL));
    int64_t h0, m0, h, m;
    stats(&h0, &m0);
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle a = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    stats(&h, &m);
    ck_assert_int_eq(h - h0, 1);
    ck_assert_int_eq(m - m0, 1);
    assert_values(b, 3, VALUES(2, 4, 6), 0);
    DeftNDArrayHandle c = call1("_mul_scalar", 1, &x, P("scalar", "3")); /* other parameters */
    stats(&h, &m);
    ck_assert_int_eq(h - h0, 1);
    ck_assert_int_eq(m - m0, 2);
    set_values(x, 3, VALUES(5, 5, 5)); /* the input changed: computed again */
    DeftNDArrayHandle d = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    assert_values(d, 3, VALUES(10, 10, 10), 0);
    set_values(d, 3, VALUES(0, 0, 0)); /* the cached result changed: computed again */
    DeftNDArrayHandle e = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    assert_values(e, 3, VALUES(10, 10, 10), 0);
    stats(&h, &m);
    ck_assert_int_eq(h - h0, 1);
    ck_assert_int_eq(m - m0, 4);
    ck_assert_ok(DeftSetMemoization(0, NULL));
    DeftNDArrayHandle all[] = {x, a, b, c, d, e};
    free_all(6, all);
}
END_TEST

/* A freed array's record comes back for the next small array (ndarray.c's
 * spare): a new array, not the old input with its memoised results. */
START_TEST(reused_array_is_a_new_input) {
    ck_assert_ok(DeftSetMemoization(8, NULL));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(1));
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(2));
    DeftNDArrayHandle exp_x = call1("exp", 1, &x, NO_PARAMS);
    ck_assert_ok(DeftNDArrayFree(x));
    DeftNDArrayHandle w = call1("_mul_scalar", 1, &b, P("scalar", "3"));
    DeftNDArrayHandle exp_w = call1("exp", 1, &w, NO_PARAMS);
    assert_values(exp_w, 1, VALUES(403.428793), 1e-5);
    ck_assert_ok(DeftSetMemoization(0, NULL));
    free_all(4, (DeftNDArrayHandle[]){b, exp_x, w, exp_w});
}
END_TEST

/* Memory shared through DLPack changes where deft cannot see it. */
START_TEST(dlpack_shared_memory_is_not_trusted) {
    ck_assert_ok(DeftSetMemoization(8, NULL));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DLManagedTensor *shared_x;
    ck_assert_ok(DeftNDArrayToDLPack(x, &shared_x));
    DeftNDArrayHandle a = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    ((float *)shared_x->dl_tensor.data)[0] = 10; /* a write deft does not see */
    DeftNDArrayHandle b = call1("_mul_scalar", 1, &x, P("scalar", "2"));
    assert_values(b, 3, VALUES(20, 4, 6), 0);
    /* a cached result exported afterwards is not handed out again */
    DeftNDArrayHandle y = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle c = call1("_mul_scalar", 1, &y, P("scalar", "2"));
    DLManagedTensor *shared_c;
    ck_assert_ok(DeftNDArrayToDLPack(c, &shared_c));
    ((float *)shared_c->dl_tensor.data)[1] = 0;
    DeftNDArrayHandle d = call1("_mul_scalar", 1, &y, P("scalar", "2"));
    assert_values(d, 3, VALUES(2, 4, 6), 0);
    ck_assert_ok(DeftSetMemoization(0, NULL));
    shared_x->deleter(shared_x), shared_c->deleter(shared_c);
    DeftNDArrayHandle all[] = {x, a, b, y, c, d};
    free_all(6, all);
}
END_TEST

START_TEST(bounded_and_selective) {
    ck_assert_ok(DeftSetMemoization(2, NULL));
    int64_t h0, m0, h, m;
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle r[6];
    r[0] = call1("exp", 1, &x, NO_PARAMS);
    r[1] = call1("tanh", 1, &x, NO_PARAMS);
    r[2] = call1("sin", 1, &x, NO_PARAMS); /* evicts exp */
    stats(&h0, &m0);
    r[3] = call1("exp", 1, &x, NO_PARAMS);
    stats(&h, &m);
    ck_assert_int_eq(h - h0, 0);
    ck_assert_int_eq(m - m0, 1);
    r[4] = call1("_random_uniform", 0, NULL, P("shape", "(4)")); /* never memoised */
    r[5] = call1("_random_uniform", 0, NULL, P("shape", "(4)"));
    int64_t n;
    double *u = read_all(r[4], &n), *v = read_all(r[5], &n);
    ck_assert(memcmp(u, v, sizeof(double) * 4) != 0);
    free(u), free(v);
    stats(&h, &m);
    ck_assert_int_eq(m - m0, 1);
    ck_assert_ok(DeftSetMemoization(0, NULL));
    free_all(1, &x), free_all(6, r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("memo");
    TCase *tc = tcase_create("memo");
    tcase_add_test(tc, off_by_default);
    tcase_add_test(tc, hits_and_staleness);
    tcase_add_test(tc, bounded_and_selective);
    tcase_add_test(tc, dlpack_shared_memory_is_not_trusted);
    tcase_add_test(tc, reused_array_is_a_new_input);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
