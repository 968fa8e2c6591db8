/* SequenceMask, SequenceLast and SequenceReverse against plain loops over (steps, batch, rest). */
#include "op_helpers.h"

enum { L = 4, B = 3, R = 2 };

/* Element (t, b, r) of data laid out for the sequence axis (0: (L, B, R); 1: (B, L, R)). */
static int64_t at(int axis, int t, int b, int r) {
    return axis == 0 ? ((int64_t)t * B + b) * R + r : ((int64_t)b * L + t) * R + r;
}

/* Both axes, lengths as float32 and int64, data as float32, float64 and int32. */
START_TEST(test_sequence_ops_match_loops) {
    int axis = _i % 2, dtype = _i / 2 == 0 ? DEFT_FLOAT32 : _i / 2 == 1 ? DEFT_FLOAT64 : DEFT_INT32;
    int len_dtype = _i / 2 == 1 ? DEFT_INT64 : DEFT_FLOAT32;
    double x[L * B * R];
    for (int j = 0; j < L * B * R; j++) x[j] = j * 3 % 17 - 5;
    const double lengths[B] = {2, 1, 4};
    int64_t shape[3] = {axis ? B : L, axis ? L : B, R};
    DeftNDArrayHandle data = make(dtype, 3, shape, x);
    DeftNDArrayHandle len = make(len_dtype, 1, SHAPE(B), lengths);
    DeftNDArrayHandle in[2] = {data, len};
    const char *ax = axis ? "1" : "0";
    double mask[L * B * R], last[B * R], last_full[B * R], reverse[L * B * R],
        reverse_full[L * B * R];
    for (int t = 0; t < L; t++)
        for (int b = 0; b < B; b++)
            for (int r = 0; r < R; r++) {
                int n = (int)lengths[b];
                mask[at(axis, t, b, r)] = t >= n ? -7 : x[at(axis, t, b, r)];
                last[b * R + r] = x[at(axis, n - 1, b, r)];
                last_full[b * R + r] = x[at(axis, L - 1, b, r)];
                reverse[at(axis, t, b, r)] = x[at(axis, t < n ? n - 1 - t : t, b, r)];
                reverse_full[at(axis, t, b, r)] = x[at(axis, L - 1 - t, b, r)];
            }
    DeftNDArrayHandle m =
        call1("SequenceMask", 2, in, P("use_sequence_length", "true", "value", "-7", "axis", ax));
    DeftNDArrayHandle m0 = call1("SequenceMask", 1, in, P("axis", ax));
    DeftNDArrayHandle s = call1("SequenceLast", 2, in, P("use_sequence_length", "1", "axis", ax));
    DeftNDArrayHandle s0 = call1("SequenceLast", 1, in, P("axis", ax));
    assert_values(m, L * B * R, mask, 0);
    assert_values(m0, L * B * R, x, 0);
    assert_shape(s, 2, SHAPE(B, R));
    assert_values(s, B * R, last, 0);
    assert_values(s0, B * R, last_full, 0);
    free_all(4, (DeftNDArrayHandle[]){m, m0, s, s0});
    if (axis == 0) { /* SequenceReverse has only axis 0, as in MXNet */
        DeftNDArrayHandle v = call1("SequenceReverse", 2, in, P("use_sequence_length", "true"));
        DeftNDArrayHandle v0 = call1("SequenceReverse", 1, in, NO_PARAMS);
        assert_values(v, L * B * R, reverse, 0);
        assert_values(v0, L * B * R, reverse_full, 0);
        free_all(2, (DeftNDArrayHandle[]){v, v0});
    }
    free_all(2, (DeftNDArrayHandle[]){data, len});
}
END_TEST

/* MXNet's documented example of SequenceMask. */
START_TEST(test_sequence_mask_example) {
    double x[18];
    for (int j = 0; j < 18; j++) x[j] = j + 1;
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 3, SHAPE(3, 2, 3), x);
    DeftNDArrayHandle len = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(2, 3));
    DeftNDArrayHandle m = call1("SequenceMask", 2, ((DeftNDArrayHandle[]){data, len}),
                                P("use_sequence_length", "True", "value", "1"));
    assert_values(m, 18, VALUES(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 1, 1, 16, 17, 18), 0);
    free_all(3, (DeftNDArrayHandle[]){data, len, m});
}
END_TEST

START_TEST(test_sequence_ops_reject_bad_inputs) {
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 3, SHAPE(L, B, R), NULL);
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 1, SHAPE(L), NULL);
    DeftNDArrayHandle short_len = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 1));
    DeftNDArrayHandle u8 = make(DEFT_UINT8, 1, SHAPE(B), VALUES(1, 1, 1));
    DeftNDArrayHandle half = make(DEFT_FLOAT32, 1, SHAPE(B), VALUES(1, 2.5, 1));
    DeftNDArrayHandle long_len = make(DEFT_INT32, 1, SHAPE(B), VALUES(1, 5, 1));
    DeftNDArrayHandle zero = make(DEFT_FLOAT64, 1, SHAPE(B), VALUES(1, 0, 1));
    DeftNDArrayHandle neg = make(DEFT_FLOAT32, 1, SHAPE(B), VALUES(1, -1, 1));
    const char *const *with_len = P("use_sequence_length", "true");
    ck_assert_call_fails("SequenceLast", 1, &flat, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'SequenceLast': input 0 (data) has 1 dimensions, expected 2");
    ck_assert_call_fails("SequenceMask", 1, &data, P("axis", "2"), DEFT_ERROR_VALUE,
                         "operator 'SequenceMask': axis is 2, expected 0 or 1");
    ck_assert_call_fails("SequenceReverse", 1, &data, P("axis", "1"), DEFT_ERROR_VALUE,
                         "axis is 1, expected 0");
    ck_assert_call_fails("SequenceMask", 1, &data, with_len, DEFT_ERROR_VALUE, "1 input");
    ck_assert_call_fails("SequenceMask", 2, ((DeftNDArrayHandle[]){data, short_len}), with_len,
                         DEFT_ERROR_VALUE,
                         "input 1 (sequence_length) has shape (2,), expected (3,) (the batch)");
    ck_assert_call_fails("SequenceLast", 2, ((DeftNDArrayHandle[]){data, short_len}),
                         P("use_sequence_length", "true", "axis", "1"), DEFT_ERROR_VALUE,
                         "expected (4,)");
    ck_assert_call_fails("SequenceReverse", 2, ((DeftNDArrayHandle[]){data, u8}), with_len,
                         DEFT_ERROR_TYPE, "input 1 holds indices and has dtype uint8");
    ck_assert_run_fails("SequenceMask", 2, ((DeftNDArrayHandle[]){data, half}), with_len,
                        DEFT_ERROR_VALUE,
                        "operator 'SequenceMask': input 1 (sequence_length) has 2.5 at position "
                        "1, expected a whole number");
    ck_assert_run_fails("SequenceMask", 2, ((DeftNDArrayHandle[]){data, neg}), with_len,
                        DEFT_ERROR_INDEX, "has -1 at position 1, expected a whole number in [0, ");
    ck_assert_run_fails("SequenceLast", 2, ((DeftNDArrayHandle[]){data, long_len}), with_len,
                        DEFT_ERROR_INDEX,
                        "operator 'SequenceLast': input 1 (sequence_length) has 5 at position 1, "
                        "expected a whole number in [1, 4]");
    ck_assert_run_fails("SequenceLast", 2, ((DeftNDArrayHandle[]){data, zero}), with_len,
                        DEFT_ERROR_INDEX, "has 0 at position 1, expected a whole number in [1, 4]");
    ck_assert_run_fails("SequenceReverse", 2, ((DeftNDArrayHandle[]){data, long_len}), with_len,
                        DEFT_ERROR_INDEX, "has 5 at position 1, expected a whole number in [0, 4]");
    /* lengths past the axis leave nothing to mask (as in MXNet) */
    DeftNDArrayHandle m = call1("SequenceMask", 2, ((DeftNDArrayHandle[]){data, long_len}),
                                P("use_sequence_length", "true", "value", "1"));
    DeftNDArrayHandle sum = call1("sum", 1, &m, NO_PARAMS);
    assert_values(sum, 1, VALUES(2 * 3 * R), 0); /* batches 0 and 2: 3 steps of ones */
    free_all(10,
             (DeftNDArrayHandle[]){data, flat, short_len, u8, half, long_len, zero, neg, m, sum});
}
END_TEST

START_TEST(test_sequence_ops_of_zero_size_arrays) {
    DeftNDArrayHandle no_batch = make(DEFT_FLOAT32, 3, SHAPE(L, 0, R), NULL);
    DeftNDArrayHandle no_len = make(DEFT_FLOAT32, 1, SHAPE(0), NULL);
    DeftNDArrayHandle in[2] = {no_batch, no_len};
    const char *const *with_len = P("use_sequence_length", "true");
    DeftNDArrayHandle m = call1("SequenceMask", 2, in, with_len);
    DeftNDArrayHandle s = call1("SequenceLast", 2, in, with_len);
    DeftNDArrayHandle v = call1("SequenceReverse", 2, in, with_len);
    assert_shape(m, 3, SHAPE(L, 0, R));
    assert_shape(s, 2, SHAPE(0, R));
    assert_shape(v, 3, SHAPE(L, 0, R));
    DeftNDArrayHandle no_steps = make(DEFT_FLOAT32, 3, SHAPE(0, B, R), NULL);
    DeftNDArrayHandle m2 = call1("SequenceMask", 1, &no_steps, NO_PARAMS);
    assert_shape(m2, 3, SHAPE(0, B, R));
    ck_assert_call_fails(
        "SequenceLast", 1, &no_steps, NO_PARAMS, DEFT_ERROR_VALUE,
        "the sequence axis (0) of input 0 (data) has size 0: there is no last step");
    free_all(7, (DeftNDArrayHandle[]){no_batch, no_len, m, s, v, no_steps, m2});
}
END_TEST

static Suite *sequence_suite(void) {
    Suite *suite = suite_create("sequence ops");
    TCase *tc = tcase_create("sequence");
    tcase_add_loop_test(tc, test_sequence_ops_match_loops, 0, 6);
    tcase_add_test(tc, test_sequence_mask_example);
    tcase_add_test(tc, test_sequence_ops_reject_bad_inputs);
    tcase_add_test(tc, test_sequence_ops_of_zero_size_arrays);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(sequence_suite());
}
