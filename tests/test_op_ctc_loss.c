/*
 * CTCLoss (core/op/ctc_loss.c) against -log of the sum over every alignment:
 * every path of classes over the steps that collapses (repeats merged, then
 * blanks dropped) to the label, with the blank first or last, lengths given
 * or read from the padding; the infinite loss of a label too long for its
 * steps; MXNet's names; and the errors. The gradient is test_gradient's
 * (tests/gradients/ctc_loss.inc).
 */
#include <math.h>

#include "op_helpers.h"

enum { T = 4, N = 3, C = 3, L = 3 };

/* -log p(label | data[:t_len, n]) by enumerating all C^t_len paths. */
static double brute_force(const double *data, int n, int t_len, const int *label, int l_len,
                          int blank) {
    double total = 0;
    int paths = 1;
    for (int t = 0; t < t_len; t++) paths *= C;
    for (int code = 0; code < paths; code++) {
        int path[T], collapsed[T], m = 0;
        double log_p = 0;
        for (int t = 0, rest = code; t < t_len; t++, rest /= C) path[t] = rest % C;
        for (int t = 0; t < t_len; t++) {
            const double *row = data + ((size_t)t * N + n) * C;
            double sum = 0;
            for (int k = 0; k < C; k++) sum += exp(row[k]);
            log_p += row[path[t]] - log(sum);
            if (path[t] != blank && (t == 0 || path[t] != path[t - 1])) collapsed[m++] = path[t];
        }
        bool same = m == l_len;
        for (int j = 0; same && j < m; j++) same = collapsed[j] == label[j];
        if (same) total += exp(log_p);
    }
    return -log(total);
}

static const double *activations(void) {
    static double data[T * N * C];
    for (int i = 0; i < T * N * C; i++) data[i] = sin(1.7 * i + 0.3) * 2;
    return data;
}

START_TEST(test_loss_is_the_sum_over_alignments) {
    bool first = _i == 0;
    int blank = first ? 0 : C - 1, pad = first ? 0 : -1, shift = first ? 1 : 0;
    /* labels: [a, b], [a, a] (needs a blank between), [] */
    int labels[N][L] = {{0, 1, pad}, {1, 1, pad}, {pad, pad, pad}}, lens[N] = {2, 2, 0};
    double label[N * L];
    for (int n = 0; n < N; n++)
        for (int j = 0; j < L; j++) {
            if (j < lens[n]) labels[n][j] += shift;
            label[n * L + j] = labels[n][j];
        }
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT64, 3, SHAPE(T, N, C), activations()),
                               make(DEFT_FLOAT32, 2, SHAPE(N, L), label)};
    DeftNDArrayHandle loss = call1(first ? "CTCLoss" : "_contrib_ctc_loss", 2, in,
                                   P("blank_label", first ? "first" : "last"));
    assert_shape(loss, 1, SHAPE(N));
    double want[N];
    for (int n = 0; n < N; n++)
        want[n] = brute_force(activations(), n, T, labels[n], lens[n], blank);
    assert_values(loss, N, want, 1e-12);
    free_all(3, (DeftNDArrayHandle[]){in[0], in[1], loss});
}
END_TEST

START_TEST(test_lengths_are_read_when_asked) {
    /* blank last; data lengths 2, 4, 3; label lengths 1, 2, 2 (the padding ignored) */
    int labels[N][L] = {{1, 0, 0}, {0, 1, 1}, {1, 1, 0}}, lens[N] = {1, 2, 2}, steps[N] = {2, 4, 3};
    double label[N * L], data_lengths[N], label_lengths[N];
    for (int n = 0; n < N; n++) {
        data_lengths[n] = steps[n], label_lengths[n] = lens[n];
        for (int j = 0; j < L; j++) label[n * L + j] = labels[n][j];
    }
    DeftNDArrayHandle in[4] = {make(DEFT_FLOAT64, 3, SHAPE(T, N, C), activations()),
                               make(DEFT_INT32, 2, SHAPE(N, L), label),
                               make(DEFT_FLOAT32, 1, SHAPE(N), data_lengths),
                               make(DEFT_INT64, 1, SHAPE(N), label_lengths)};
    DeftNDArrayHandle loss =
        call1("ctc_loss", 4, in,
              P("use_data_lengths", "true", "use_label_lengths", "true", "blank_label", "last"));
    double want[N];
    for (int n = 0; n < N; n++)
        want[n] = brute_force(activations(), n, steps[n], labels[n], lens[n], C - 1);
    assert_values(loss, N, want, 1e-12);
    /* label lengths alone: the third input */
    DeftNDArrayHandle three[3] = {in[0], in[1], in[3]};
    DeftNDArrayHandle loss3 =
        call1("_contrib_CTCLoss", 3, three, P("use_label_lengths", "true", "blank_label", "last"));
    for (int n = 0; n < N; n++)
        want[n] = brute_force(activations(), n, T, labels[n], lens[n], C - 1);
    assert_values(loss3, N, want, 1e-12);
    free_all(6, (DeftNDArrayHandle[]){in[0], in[1], in[2], in[3], loss, loss3});
}
END_TEST

START_TEST(test_a_label_too_long_has_an_infinite_loss) {
    /* [1, 1, 1] needs 5 steps (blanks between repeats), and there are 4 */
    double label[N * L] = {1, 1, 1, 1, 2, 0, 2, 0, 0};
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT32, 3, SHAPE(T, N, C), activations()),
                               make(DEFT_FLOAT32, 2, SHAPE(N, L), label)};
    DeftNDArrayHandle loss = call1("CTCLoss", 2, in, NO_PARAMS);
    int64_t n;
    double *got = read_all(loss, &n);
    ck_assert(isinf(got[0]) && got[0] > 0);
    ck_assert(isfinite(got[1]) && isfinite(got[2]));
    free(got);
    free_all(3, (DeftNDArrayHandle[]){in[0], in[1], loss});
}
END_TEST

START_TEST(test_errors_name_the_input) {
    double label[N * L] = {1, 2, 0, 3, 0, 0, 1, 0, 0};
    DeftNDArrayHandle data = make(DEFT_FLOAT32, 3, SHAPE(T, N, C), activations());
    DeftNDArrayHandle bad = make(DEFT_FLOAT32, 2, SHAPE(N, L), label);
    ck_assert_run_fails(
        "CTCLoss", 2, ((DeftNDArrayHandle[]){data, bad}), NO_PARAMS, DEFT_ERROR_VALUE,
        "item 1: labels must be in [1, 3) (class 0 is the blank), got label[0] = 3");
    DeftNDArrayHandle lengths = make(DEFT_FLOAT32, 1, SHAPE(N), VALUES(1, 5, 2));
    ck_assert_run_fails("CTCLoss", 3, ((DeftNDArrayHandle[]){data, bad, lengths}),
                        P("use_data_lengths", "true"), DEFT_ERROR_VALUE,
                        "data_lengths[1] is 5, expected an integer in [1, 4]");
    ck_assert_call_fails("CTCLoss", 2, ((DeftNDArrayHandle[]){data, bad}),
                         P("use_label_lengths", "true"), DEFT_ERROR_VALUE,
                         "expected 3: data, label, label_lengths");
    DeftNDArrayHandle flat = make(DEFT_FLOAT32, 2, SHAPE(T, C), NULL);
    ck_assert_call_fails("CTCLoss", 2, ((DeftNDArrayHandle[]){flat, bad}), NO_PARAMS,
                         DEFT_ERROR_VALUE,
                         "data is (4,3) and label (3,3), expected (steps, batch, classes)");
    DeftNDArrayHandle ints = make(DEFT_INT32, 3, SHAPE(T, N, C), NULL);
    ck_assert_call_fails("CTCLoss", 2, ((DeftNDArrayHandle[]){ints, bad}), NO_PARAMS,
                         DEFT_ERROR_TYPE, "input 0 has dtype int32, expected float32 or float64");
    free_all(5, (DeftNDArrayHandle[]){data, bad, lengths, flat, ints});
}
END_TEST

int main(void) {
    Suite *s = suite_create("CTC loss");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_loss_is_the_sum_over_alignments, 0, 2);
    tcase_add_test(tc, test_lengths_are_read_when_asked);
    tcase_add_test(tc, test_a_label_too_long_has_an_infinite_loss);
    tcase_add_test(tc, test_errors_name_the_input);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
