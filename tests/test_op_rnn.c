/*
 * RNN against a plain-C reference (every mode, one and two layers, both
 * directions, final states, sequence lengths, LSTM clipping), parameter and
 * state shape inference, bad parameters and shapes, zero sizes, dropout
 * between layers, and _rnn_param_concat.
 */
#include "symbol_helpers.h"

#include "deft/autograd.h"

enum { RELU, TANH, LSTM, GRU };
static const char *const mode_names[] = {"rnn_relu", "rnn_tanh", "lstm", "gru"};

typedef struct cfg {
    int mode, L, D;
    int64_t T, N, I, H;
    bool state_outputs;
    const double *lengths; /* NULL: all T steps */
    double clip;           /* > 0: LSTM cell clipped to [-clip, clip] */
} cfg_t;

static int gates(int mode) {
    return mode == LSTM ? 4 : mode == GRU ? 3 : 1;
}

static int64_t layer_in(const cfg_t *c, int l) {
    return l ? c->D * c->H : c->I;
}

/* MXNet's flat layout: every (W_i2h, W_h2h) per layer-direction, then every (b_i2h, b_h2h). */
static int64_t weight_at(const cfg_t *c, int ld) {
    int64_t at = 0, GH = gates(c->mode) * c->H;
    for (int k = 0; k < ld; k++) at += GH * (layer_in(c, k / c->D) + c->H);
    return at;
}

static int64_t param_size(const cfg_t *c) {
    return weight_at(c, c->L * c->D) + c->L * c->D * 2 * gates(c->mode) * c->H;
}

static double sigmoid(double x) {
    return 1 / (1 + exp(-x));
}

/* The naive forward: y (T, N, D H), hy and cy (L D, N, H). */
static void reference(const cfg_t *c, const double *x, const double *w, const double *hx,
                      const double *cx, double *y, double *hy, double *cy) {
    int64_t T = c->T, N = c->N, H = c->H, G = gates(c->mode), DH = c->D * H;
    double *input = malloc(sizeof(double) * (size_t)(T * N * (c->I > DH ? c->I : DH) + 1));
    double *out = malloc(sizeof(double) * (size_t)(T * N * DH + 1));
    double *h = malloc(sizeof(double) * (size_t)(N * H + 1)),
           *cell = malloc(sizeof(double) * (size_t)(N * H + 1));
    double *ax = malloc(sizeof(double) * (size_t)(G * H)),
           *ah = malloc(sizeof(double) * (size_t)(G * H));
    memcpy(input, x, sizeof(double) * (size_t)(T * N * c->I));
    for (int l = 0; l < c->L; l++) {
        int64_t in = layer_in(c, l);
        for (int d = 0; d < c->D; d++) {
            int ld = l * c->D + d;
            const double *wi = w + weight_at(c, ld), *wh = wi + G * H * in;
            const double *bi = w + weight_at(c, c->L * c->D) + ld * 2 * G * H, *bh = bi + G * H;
            memcpy(h, hx + ld * N * H, sizeof(double) * (size_t)(N * H));
            if (c->mode == LSTM) memcpy(cell, cx + ld * N * H, sizeof(double) * (size_t)(N * H));
            for (int64_t i = 0; i < T; i++) {
                int64_t t = d ? T - 1 - i : i;
                for (int64_t b = 0; b < N; b++) {
                    double *yo = out + (t * N + b) * DH + d * H;
                    if (c->lengths && t >= c->lengths[b]) {
                        for (int64_t k = 0; k < H; k++) yo[k] = 0;
                        continue;
                    }
                    for (int64_t r = 0; r < G * H; r++) {
                        ax[r] = bi[r], ah[r] = bh[r];
                        for (int64_t j = 0; j < in; j++)
                            ax[r] += wi[r * in + j] * input[(t * N + b) * in + j];
                        for (int64_t j = 0; j < H; j++) ah[r] += wh[r * H + j] * h[b * H + j];
                    }
                    for (int64_t k = 0; k < H; k++) {
                        double *hk = &h[b * H + k], *ck = &cell[b * H + k];
                        if (c->mode == LSTM) {
                            double ig = sigmoid(ax[k] + ah[k]), fg = sigmoid(ax[H + k] + ah[H + k]);
                            double gg = tanh(ax[2 * H + k] + ah[2 * H + k]);
                            double og = sigmoid(ax[3 * H + k] + ah[3 * H + k]);
                            *ck = fg * *ck + ig * gg;
                            if (c->clip > 0) *ck = fmin(fmax(*ck, -c->clip), c->clip);
                            *hk = og * tanh(*ck);
                        } else if (c->mode == GRU) {
                            double r = sigmoid(ax[k] + ah[k]), z = sigmoid(ax[H + k] + ah[H + k]);
                            double n = tanh(ax[2 * H + k] + r * ah[2 * H + k]);
                            *hk = (1 - z) * n + z * *hk;
                        } else {
                            double s = ax[k] + ah[k];
                            *hk = c->mode == RELU ? fmax(s, 0) : tanh(s);
                        }
                        yo[k] = *hk;
                    }
                }
            }
            memcpy(hy + ld * N * H, h, sizeof(double) * (size_t)(N * H));
            if (c->mode == LSTM) memcpy(cy + ld * N * H, cell, sizeof(double) * (size_t)(N * H));
        }
        memcpy(input, out, sizeof(double) * (size_t)(T * N * DH));
    }
    memcpy(y, out, sizeof(double) * (size_t)(T * N * DH));
    free(input), free(out), free(h), free(cell), free(ax), free(ah);
}

static double *uniform_values(int64_t n, uint64_t *state) {
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = -1 + 2 * (double)(*state >> 11) / 9007199254740992.0;
    }
    return v;
}

/* RNN's parameters for a configuration (strings live in static buffers). */
static const char **params_of(const cfg_t *c) {
    static char h[16], l[16];
    static const char *p[20];
    snprintf(h, sizeof h, "%lld", (long long)c->H);
    snprintf(l, sizeof l, "%d", c->L);
    int n = 0;
    p[n++] = "state_size", p[n++] = h, p[n++] = "num_layers", p[n++] = l;
    p[n++] = "mode", p[n++] = mode_names[c->mode];
    p[n++] = "bidirectional", p[n++] = c->D == 2 ? "true" : "false";
    p[n++] = "state_outputs", p[n++] = c->state_outputs ? "true" : "false";
    if (c->lengths) p[n++] = "use_sequence_length", p[n++] = "true";
    if (c->clip > 0) p[n++] = "lstm_state_clip_min", p[n++] = "-0.25";
    if (c->clip > 0) p[n++] = "lstm_state_clip_max", p[n++] = "0.25";
    p[n] = NULL;
    return p;
}

static void check_against_reference(const cfg_t *c, int dtype, double tol) {
    uint64_t rng = 99;
    int64_t LD = c->L * c->D, np = param_size(c), ns = LD * c->N * c->H;
    double *x = uniform_values(c->T * c->N * c->I, &rng), *w = uniform_values(np, &rng);
    double *hx = uniform_values(ns, &rng), *cx = uniform_values(ns, &rng);
    /* Weights in [-1, 1] make a wide recurrence chaotic: each step multiplies rounding
     * differences by up to sqrt(H), so float32 results would depend on the BLAS kernel's
     * summation order. Scaled by 1/sqrt(H) the recurrence contracts, as trained ones do. */
    for (int64_t k = 0; k < np; k++) w[k] /= sqrt((double)c->H);
    int64_t ny = c->T * c->N * c->D * c->H;
    double *y = malloc(sizeof(double) * (size_t)(ny + 1));
    double *hy = malloc(sizeof(double) * (size_t)(ns + 1)),
           *cy = malloc(sizeof(double) * (size_t)(ns + 1));
    reference(c, x, w, hx, cx, y, hy, cy);
    DeftNDArrayHandle in[5];
    int nin = 0;
    in[nin++] = make(dtype, 3, SHAPE(c->T, c->N, c->I), x);
    in[nin++] = make(dtype, 1, SHAPE(np), w);
    in[nin++] = make(dtype, 3, SHAPE(LD, c->N, c->H), hx);
    if (c->mode == LSTM) in[nin++] = make(dtype, 3, SHAPE(LD, c->N, c->H), cx);
    if (c->lengths) in[nin++] = make(DEFT_INT32, 1, SHAPE(c->N), c->lengths);
    DeftNDArrayHandle out[3] = {NULL};
    int nout = 3;
    ck_assert_msg(call("RNN", nin, in, &nout, out, params_of(c)) == 0, "%s", DeftGetLastError());
    ck_assert_int_eq(nout, c->state_outputs ? (c->mode == LSTM ? 3 : 2) : 1);
    assert_shape(out[0], 3, SHAPE(c->T, c->N, c->D * c->H));
    assert_values(out[0], ny, y, tol);
    if (c->state_outputs) assert_values(out[1], ns, hy, tol);
    if (c->state_outputs && c->mode == LSTM) assert_values(out[2], ns, cy, tol);
    free_all(nin, in);
    free_all(nout, out);
    free(x), free(w), free(hx), free(cx), free(y), free(hy), free(cy);
}

static const cfg_t forward_cases[] = {
    {RELU, 1, 1, 4, 3, 5, 6, true, NULL, 0},  {TANH, 1, 2, 4, 3, 5, 6, true, NULL, 0},
    {TANH, 2, 2, 3, 2, 4, 3, false, NULL, 0}, {RELU, 2, 1, 3, 2, 4, 3, true, NULL, 0},
    {LSTM, 1, 1, 5, 3, 4, 7, true, NULL, 0},  {LSTM, 2, 1, 4, 2, 3, 5, true, NULL, 0},
    {LSTM, 2, 2, 4, 3, 3, 5, true, NULL, 0},  {LSTM, 1, 2, 3, 2, 6, 4, false, NULL, 0},
    {GRU, 1, 1, 5, 3, 4, 7, true, NULL, 0},   {GRU, 2, 2, 4, 3, 3, 5, true, NULL, 0},
    {GRU, 2, 1, 3, 2, 2, 3, false, NULL, 0},  {LSTM, 1, 1, 6, 2, 3, 4, true, NULL, 0.25},
};

START_TEST(test_forward_matches_reference) {
    check_against_reference(&forward_cases[_i], DEFT_FLOAT64, 1e-12);
    check_against_reference(&forward_cases[_i], DEFT_FLOAT32, 2e-5);
}
END_TEST

/* Sizes where the CPU splits the batch between threads (with two or more) and runs the cells'
 * vector loops with a scalar tail (H = 100 is six 16-wide vectors and 4 more). */
static const cfg_t wide_cases[] = {
    {LSTM, 2, 2, 3, 10, 5, 100, true, NULL, 0},
    {GRU, 1, 2, 3, 10, 5, 100, true, NULL, 0},
    {TANH, 2, 1, 6, 10, 5, 100, true, NULL, 0},
    {LSTM, 1, 1, 4, 10, 5, 100, true, NULL, 0.25},
};

START_TEST(test_wide_forward_matches_reference) {
    check_against_reference(&wide_cases[_i], DEFT_FLOAT64, 1e-12);
    /* sums of 200 float32 products over six steps */
    check_against_reference(&wide_cases[_i], DEFT_FLOAT32, 2e-5);
}
END_TEST

/* The gradients of every input of RNN through autograd, head gradient `head`, the forward in
 * training mode (it keeps the gates) or predict mode (an LSTM's backward runs it again). */
static void rnn_gradients(const cfg_t *c, int dtype, bool train, const double *const *values,
                          const double *head, double **grads) {
    int64_t LD = c->L * c->D;
    int64_t shapes[4][3] = {
        {c->T, c->N, c->I}, {param_size(c)}, {LD, c->N, c->H}, {LD, c->N, c->H}};
    int ndims[4] = {3, 1, 3, 3}, nin = c->mode == LSTM ? 4 : 3;
    DeftNDArrayHandle in[4], g[4];
    int req[4];
    for (int k = 0; k < nin; k++) {
        in[k] = make(dtype, ndims[k], shapes[k], values[k]);
        g[k] = make(dtype, ndims[k], shapes[k], NULL);
        req[k] = DEFT_GRAD_WRITE;
    }
    ck_assert_ok(DeftAutogradMarkVariables(nin, in, req, g));
    ck_assert_ok(DeftAutogradSetIsTraining(train, NULL));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle out[3] = {NULL};
    int nout = 3;
    ck_assert_msg(call("RNN", nin, in, &nout, out, params_of(c)) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    ck_assert_ok(DeftAutogradSetIsTraining(0, NULL));
    DeftNDArrayHandle dy = make(dtype, 3, SHAPE(c->T, c->N, c->D * c->H), head);
    ck_assert_ok(DeftAutogradBackward(1, &out[0], &dy, 0, 0));
    for (int k = 0; k < nin; k++) {
        int64_t n;
        grads[k] = read_all(g[k], &n);
    }
    free_all(nin, in);
    free_all(nin, g);
    free_all(nout, out);
    free_all(1, &dy);
}

/* Rows [b, b + 1) of a (lead, N, width) array into dst (lead, 1, width), or back (to_rows). */
static void batch_row(const cfg_t *c, int64_t lead, int64_t width, int64_t b, double *rows,
                      double *one, bool to_rows) {
    for (int64_t i = 0; i < lead; i++)
        for (int64_t k = 0; k < width; k++) {
            double *full = &rows[(i * c->N + b) * width + k], *single = &one[i * width + k];
            if (to_rows)
                *full = *single;
            else
                *single = *full;
        }
}

/* The gradients of the whole batch from batches of one row each (one thread, no split): the
 * rows' data and state gradients side by side, their parameter gradients summed. */
static void gradients_row_by_row(const cfg_t *c, const double *const *values, const double *head,
                                 double **want) {
    cfg_t one = *c;
    one.N = 1;
    int64_t LD = c->L * c->D, DH = c->D * c->H, np = param_size(c);
    int64_t widths[4] = {c->I, 0, c->H, c->H}, leads[4] = {c->T, 0, LD, LD};
    double *v[4], *h1 = malloc(sizeof(double) * (size_t)(c->T * DH));
    for (int k = 0; k < 4; k++) {
        want[k] = calloc((size_t)(k == 1 ? np : leads[k] * c->N * widths[k]), sizeof(double));
        v[k] =
            k == 1 ? (double *)values[1] : malloc(sizeof(double) * (size_t)(leads[k] * widths[k]));
    }
    for (int64_t b = 0; b < c->N; b++) {
        double *g[4] = {NULL};
        for (int k = 0; k < 4; k++)
            if (k != 1) batch_row(c, leads[k], widths[k], b, (double *)values[k], v[k], false);
        batch_row(c, c->T, DH, b, (double *)head, h1, false);
        rnn_gradients(&one, DEFT_FLOAT64, true, (const double *const *)v, h1, g);
        for (int k = 0; k < (c->mode == LSTM ? 4 : 3); k++)
            if (k == 1)
                for (int64_t i = 0; i < np; i++) want[1][i] += g[1][i];
            else
                batch_row(c, leads[k], widths[k], b, want[k], g[k], true);
        for (int k = 0; k < 4; k++) free(g[k]);
    }
    for (int k = 0; k < 4; k++)
        if (k != 1) free(v[k]);
    free(h1);
}

static void assert_gradients_close(const cfg_t *c, const int64_t *sizes, double *const *got,
                                   double *const *want, double tol, const char *what) {
    for (int k = 0; k < (c->mode == LSTM ? 4 : 3); k++) {
        double scale = 0;
        for (int64_t i = 0; i < sizes[k]; i++) scale = fmax(scale, fabs(want[k][i]));
        for (int64_t i = 0; i < sizes[k]; i++)
            ck_assert_msg(fabs(got[k][i] - want[k][i]) <= tol * (1 + scale),
                          "%s: gradient of input %d, element %lld: %.10g, expected %.10g", what, k,
                          (long long)i, got[k][i], want[k][i]);
    }
}

/* The batch split between threads and the vectorised cells: float64's gradients of the whole
 * batch are the rows' (each a batch of one, computed whole), and float32's agree with them,
 * after a forward in training mode and in predict mode. */
START_TEST(test_wide_backward_matches_row_by_row) {
    const cfg_t *c = &wide_cases[_i];
    uint64_t rng = 7;
    int64_t LD = c->L * c->D, ns = LD * c->N * c->H, ny = c->T * c->N * c->D * c->H;
    int64_t sizes[4] = {c->T * c->N * c->I, param_size(c), ns, ns};
    double *values[4], *head = uniform_values(ny, &rng);
    double *want[4] = {NULL};
    for (int k = 0; k < 4; k++) values[k] = uniform_values(sizes[k], &rng);
    for (int64_t i = 0; i < sizes[1]; i++) values[1][i] *= 0.3; /* keep the cells unsaturated */
    const double *const *v = (const double *const *)values;
    gradients_row_by_row(c, v, head, want);
    for (int train = 0; train < 2; train++) {
        double *g64[4] = {NULL}, *g32[4] = {NULL};
        rnn_gradients(c, DEFT_FLOAT64, train, v, head, g64);
        rnn_gradients(c, DEFT_FLOAT32, train, v, head, g32);
        assert_gradients_close(c, sizes, g64, want, 1e-12, train ? "float64" : "float64, predict");
        assert_gradients_close(c, sizes, g32, want, 1e-4, train ? "float32" : "float32, predict");
        for (int k = 0; k < 4; k++) free(g64[k]), free(g32[k]);
    }
    for (int k = 0; k < 4; k++) free(values[k]), free(want[k]);
    free(head);
}
END_TEST

/* Sequences of lengths 4, 1, 0 and 3 of 4 steps: outputs past the end are zero, the final
 * state is the one at each sequence's end (and the initial one for an empty sequence). */
START_TEST(test_sequence_lengths) {
    static const double lengths[] = {4, 1, 0, 3};
    const cfg_t cases[] = {
        {LSTM, 2, 2, 4, 4, 3, 5, true, lengths, 0},
        {GRU, 1, 2, 4, 4, 3, 5, true, lengths, 0},
        {TANH, 1, 1, 4, 4, 3, 5, true, lengths, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        check_against_reference(&cases[k], DEFT_FLOAT64, 1e-12);
}
END_TEST

/* A graph with only the data's shape infers parameters, state and state_cell. */
START_TEST(test_shapes_are_inferred) {
    DeftSymbolHandle in[4] = {var("data"), var("parameters"), var("state"), var("state_cell")};
    DeftSymbolHandle r = apply("RNN", "rnn", 4, in,
                               P("state_size", "5", "num_layers", "2", "mode", "lstm",
                                 "bidirectional", "true", "state_outputs", "true"));
    const char *names[] = {"data"};
    int complete;
    ck_assert_ok(
        DeftSymbolInferShape(r, 1, names, (const int[]){3}, SHAPE(7, 3, 4), NULL, &complete));
    ck_assert_int_eq(complete, 1);
    int64_t dims[DEFT_MAX_NDIM];
    int ndim, dtype;
    /* layer 0: 4 (5) (4 + 5) + 2 (4 5) = 220 per direction; layer 1: 20 (10 + 5) + 40 = 340 */
    ck_assert_ok(
        DeftSymbolGetInferredShape(r, DEFT_ARGUMENTS, 1, dims, DEFT_MAX_NDIM, &ndim, &dtype));
    ck_assert_int_eq(ndim, 1);
    ck_assert_int_eq(dims[0], 2 * 220 + 2 * 340);
    for (int k = 2; k < 4; k++) {
        ck_assert_ok(
            DeftSymbolGetInferredShape(r, DEFT_ARGUMENTS, k, dims, DEFT_MAX_NDIM, &ndim, &dtype));
        ck_assert_int_eq(ndim, 3);
        ck_assert(dims[0] == 4 && dims[1] == 3 && dims[2] == 5);
    }
    ck_assert_ok(
        DeftSymbolGetInferredShape(r, DEFT_OUTPUTS, 0, dims, DEFT_MAX_NDIM, &ndim, &dtype));
    ck_assert(ndim == 3 && dims[0] == 7 && dims[1] == 3 && dims[2] == 10);
    /* MXNet's output names */
    int n;
    const char *const *outs;
    ck_assert_ok(DeftSymbolListOutputs(r, &n, &outs));
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(outs[0], "rnn_output");
    ck_assert_str_eq(outs[1], "rnn_state_output");
    ck_assert_str_eq(outs[2], "rnn_statecell_output");
    ck_assert_ok(DeftSymbolFree(r));
    for (int k = 0; k < 4; k++) ck_assert_ok(DeftSymbolFree(in[k]));
}
END_TEST

START_TEST(test_bad_parameters_and_shapes) {
    double zeros[64] = {0};
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 3, SHAPE(2, 1, 2), zeros);
    DeftNDArrayHandle w =
        make(DEFT_FLOAT32, 1, SHAPE(12), zeros); /* rnn_tanh, H = 2: 2 (2 + 2) + 4 */
    DeftNDArrayHandle s = make(DEFT_FLOAT32, 3, SHAPE(1, 1, 2), zeros);
    DeftNDArrayHandle in[4] = {x, w, s, s};
#define BASE "state_size", "2", "num_layers", "1"
    ck_assert_call_fails("RNN", 3, in, P(BASE, "mode", "rnn_tanh", "p", "1"), DEFT_ERROR_VALUE,
                         "p is 1, expected a dropout rate in [0, 1)");
    ck_assert_call_fails("RNN", 3, in, P("state_size", "0", "num_layers", "1", "mode", "gru"),
                         DEFT_ERROR_VALUE, "state_size is 0, expected >= 1");
    ck_assert_call_fails("RNN", 3, in, P("state_size", "2", "num_layers", "0", "mode", "gru"),
                         DEFT_ERROR_VALUE, "num_layers is 0");
    ck_assert_call_fails("RNN", 4, in, P(BASE, "mode", "lstm", "projection_size", "1"),
                         DEFT_ERROR_NOT_IMPLEMENTED, "projection_size (LSTM with projection)");
    ck_assert_call_fails(
        "RNN", 3, in,
        P(BASE, "mode", "gru", "lstm_state_clip_min", "0", "lstm_state_clip_max", "1"),
        DEFT_ERROR_VALUE, "state clipping is only supported for LSTM");
    ck_assert_call_fails("RNN", 4, in, P(BASE, "mode", "lstm", "lstm_state_clip_min", "0"),
                         DEFT_ERROR_VALUE, "must be given together");
    ck_assert_call_fails(
        "RNN", 4, in,
        P(BASE, "mode", "lstm", "lstm_state_clip_min", "1", "lstm_state_clip_max", "0"),
        DEFT_ERROR_VALUE, "greater than or equal to lstm_state_clip_min");
    ck_assert_call_fails("RNN", 3, in, P(BASE, "mode", "rnn_tanh", "bidirectional", "true"),
                         DEFT_ERROR_VALUE, "input 1 (parameters) has shape (12,), expected (24,)");
    ck_assert_call_fails("RNN", 3, in, P("state_size", "2", "num_layers", "2", "mode", "rnn_tanh"),
                         DEFT_ERROR_VALUE, "input 1 (parameters) has shape (12,), expected (24,)");
    DeftNDArrayHandle state_bad[3] = {x, w, w}, data_bad[3] = {w, w, s};
    ck_assert_call_fails("RNN", 3, state_bad, P(BASE, "mode", "rnn_tanh"), DEFT_ERROR_VALUE,
                         "input 2 (state) has shape (12,), expected (1,1,2)");
    ck_assert_call_fails("RNN", 3, data_bad, P(BASE, "mode", "rnn_tanh"), DEFT_ERROR_VALUE,
                         "input 0 (data) has shape (12,), expected (sequence");
    DeftNDArrayHandle s64 = make(DEFT_FLOAT64, 3, SHAPE(1, 1, 2), zeros);
    DeftNDArrayHandle dtype_bad[3] = {x, w, s64};
    ck_assert_call_fails("RNN", 3, dtype_bad, P(BASE, "mode", "rnn_tanh"), DEFT_ERROR_TYPE,
                         "input 2 (state) is float64, expected float32");
    DeftNDArrayHandle bad_len = make(DEFT_INT32, 1, SHAPE(1), VALUES(3));
    /* (LSTM: without state_cell, RNN's input names put "state_cell" at sequence_length's place) */
    DeftNDArrayHandle w_lstm = make(DEFT_FLOAT32, 1, SHAPE(48), zeros);
    DeftNDArrayHandle with_length[5] = {x, w_lstm, s, s, bad_len};
    ck_assert_run_fails("RNN", 5, with_length,
                        P(BASE, "mode", "lstm", "use_sequence_length", "true"), DEFT_ERROR_INDEX,
                        "input 4 (sequence_length) has 3 at position 0");
    free_all(6, (DeftNDArrayHandle[]){x, w, s, s64, bad_len, w_lstm});
#undef BASE
}
END_TEST

/* A batch of zero and a sequence of zero steps: empty outputs, final states the initial ones. */
START_TEST(test_zero_sizes) {
    cfg_t empty_batch = {LSTM, 2, 2, 3, 0, 4, 3, true, NULL, 0};
    check_against_reference(&empty_batch, DEFT_FLOAT32, 1e-6);
    cfg_t no_steps = {GRU, 2, 2, 0, 2, 4, 3, true, NULL, 0};
    check_against_reference(&no_steps, DEFT_FLOAT64, 0);
}
END_TEST

/* Dropout between layers acts in training mode only; a seed repeats it. */
START_TEST(test_dropout_between_layers) {
    cfg_t c = {LSTM, 2, 1, 5, 4, 3, 8, false, NULL, 0};
    uint64_t rng = 5;
    int64_t np = param_size(&c), ns = 2 * c.N * c.H, ny = c.T * c.N * c.H;
    double *x = uniform_values(c.T * c.N * c.I, &rng), *w = uniform_values(np, &rng);
    double *h = uniform_values(ns, &rng);
    DeftNDArrayHandle in[4] = {
        make(DEFT_FLOAT64, 3, SHAPE(c.T, c.N, c.I), x), make(DEFT_FLOAT64, 1, SHAPE(np), w),
        make(DEFT_FLOAT64, 3, SHAPE(2, c.N, c.H), h), make(DEFT_FLOAT64, 3, SHAPE(2, c.N, c.H), h)};
    const char *const *dropped =
        P("state_size", "8", "num_layers", "2", "mode", "lstm", "p", "0.5");
    DeftNDArrayHandle plain =
        call1("RNN", 4, in, P("state_size", "8", "num_layers", "2", "mode", "lstm"));
    DeftNDArrayHandle predict = call1("RNN", 4, in, dropped);
    int64_t n;
    double *want = read_all(plain, &n);
    assert_values(predict, ny, want, 0);
    ck_assert_ok(DeftAutogradSetIsTraining(1, NULL));
    ck_assert_ok(DeftRandomSeed(3));
    DeftNDArrayHandle a = call1("RNN", 4, in, dropped);
    ck_assert_ok(DeftRandomSeed(3));
    DeftNDArrayHandle b = call1("RNN", 4, in, dropped);
    ck_assert_ok(DeftAutogradSetIsTraining(0, NULL));
    double *av = read_all(a, &n);
    assert_values(b, ny, av, 0);
    int differ = 0;
    for (int64_t i = 0; i < ny; i++) differ += av[i] != want[i];
    ck_assert_msg(differ > ny / 2, "only %d of %lld outputs changed", differ, (long long)ny);
    free(x), free(w), free(h), free(want), free(av);
    free_all(4, in);
    free_all(4, (DeftNDArrayHandle[]){plain, predict, a, b});
}
END_TEST

/* _rnn_param_concat joins like Concat and fills an unknown input's shape from the output's. */
START_TEST(test_param_concat) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(3, 4, 5));
    DeftNDArrayHandle y =
        call1("_rnn_param_concat", 2, (DeftNDArrayHandle[]){a, b}, P("dim", "0", "num_args", "2"));
    assert_values(y, 5, VALUES(1, 2, 3, 4, 5), 0);
    free_all(3, (DeftNDArrayHandle[]){a, b, y});

    DeftSymbolHandle in[3] = {var("a"), var("b"), var("c")};
    DeftSymbolHandle cat = apply("_rnn_param_concat", "cat", 3, in, P("dim", "0", "num_args", "3"));
    DeftSymbolHandle d = var("d");
    DeftSymbolHandle sum = apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){cat, d}, NO_PARAMS);
    const char *names[] = {"a", "b", "d"};
    int complete;
    ck_assert_ok(DeftSymbolInferShape(sum, 3, names, (const int[]){1, 1, 1}, SHAPE(4, 6, 20), NULL,
                                      &complete));
    ck_assert_int_eq(complete, 1);
    int64_t dims[DEFT_MAX_NDIM];
    int ndim, dtype;
    ck_assert_ok(
        DeftSymbolGetInferredShape(sum, DEFT_ARGUMENTS, 2, dims, DEFT_MAX_NDIM, &ndim, &dtype));
    ck_assert_int_eq(ndim, 1);
    ck_assert_int_eq(dims[0], 10);
    for (int k = 0; k < 3; k++) ck_assert_ok(DeftSymbolFree(in[k]));
    ck_assert_ok(DeftSymbolFree(cat));
    ck_assert_ok(DeftSymbolFree(d));
    ck_assert_ok(DeftSymbolFree(sum));
}
END_TEST

static Suite *rnn_suite(void) {
    Suite *suite = suite_create("RNN");
    TCase *tc = tcase_create("rnn");
    tcase_add_loop_test(tc, test_forward_matches_reference, 0,
                        (int)(sizeof forward_cases / sizeof forward_cases[0]));
    int wide = (int)(sizeof wide_cases / sizeof wide_cases[0]);
    tcase_add_loop_test(tc, test_wide_forward_matches_reference, 0, wide);
    tcase_add_loop_test(tc, test_wide_backward_matches_row_by_row, 0, wide);
    tcase_add_test(tc, test_sequence_lengths);
    tcase_add_test(tc, test_shapes_are_inferred);
    tcase_add_test(tc, test_bad_parameters_and_shapes);
    tcase_add_test(tc, test_zero_sizes);
    tcase_add_test(tc, test_dropout_between_layers);
    tcase_add_test(tc, test_param_concat);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(rnn_suite());
}
