/* Pooling and _backward_Pooling against naive loops written from MXNet's definitions. */
#include "op_helpers.h"

#include "core/op/pool_cpu.h"
#include "core/op/pool_vec.h"
#include "core/op/simd.h"

/* The kernel choices the tests run, fastest first: the vector rows at
 * AVX-512 and at AVX2 (where the CPU has them), the plane kernels, the
 * general loops. choose(c) sets choice c; false: the CPU lacks it. */
enum { CHOICES = 4 };
static bool choose(int c) {
    static const deft_simd_level_t levels[] = {DEFT_SIMD_AVX512, DEFT_SIMD_AVX2};
    if (c < 2) {
        deft_pool_kernels_set(DEFT_POOL_VECTOR);
        return deft_simd_cap(levels[c]) == levels[c];
    }
    deft_simd_cap(DEFT_SIMD_AVX512);
    deft_pool_kernels_set(c == 2 ? DEFT_POOL_PLANES : DEFT_POOL_GENERAL);
    return true;
}

static void choose_default(void) {
    deft_simd_cap(DEFT_SIMD_AVX512);
    deft_pool_kernels_set(DEFT_POOL_VECTOR);
}

/* One pooling, as the test's reference sees it (spatial axes padded to 3 with size 1). */
typedef struct ref_pool {
    int nsp;                          /* spatial axes: 1, 2 or 3 */
    int64_t batch, ch, in[3];         /* data (batch, ch, in[3 - nsp] ...) */
    int64_t k[3], s[3], p[3], out[3]; /* out filled by ref_shape */
    const char *type;                 /* max avg sum lp */
    int power;
    bool include_pad;
    const char *convention;
} ref_pool_t;

static void ref_shape(ref_pool_t *r) {
    for (int a = 0; a < 3; a++) {
        double span = (double)(r->in[a] + 2 * r->p[a]);
        if (!strcmp(r->convention, "same"))
            r->out[a] = (int64_t)ceil(span / (double)r->s[a]);
        else if (!strcmp(r->convention, "full"))
            r->out[a] = 1 + (int64_t)ceil((span - (double)r->k[a]) / (double)r->s[a]);
        else
            r->out[a] = 1 + (int64_t)floor((span - (double)r->k[a]) / (double)r->s[a]);
    }
}

static int64_t ref_in_count(const ref_pool_t *r) {
    return r->batch * r->ch * r->in[0] * r->in[1] * r->in[2];
}

static int64_t ref_out_count(const ref_pool_t *r) {
    return r->batch * r->ch * r->out[0] * r->out[1] * r->out[2];
}

/* Visit the taps of output o of plane `plane`: pos inside the data or not, and whether a
 * padded average counts it (taps past the padded end never count). */
typedef struct tap {
    int64_t index; /* -1: in the padding */
    bool counted;  /* inside the padded input */
} tap_t;

static int ref_taps(const ref_pool_t *r, int64_t plane, const int64_t *o, tap_t *taps) {
    int n = 0;
    for (int64_t a = 0; a < r->k[0]; a++)
        for (int64_t b = 0; b < r->k[1]; b++)
            for (int64_t c = 0; c < r->k[2]; c++) {
                int64_t pos[3] = {o[0] * r->s[0] - r->p[0] + a, o[1] * r->s[1] - r->p[1] + b,
                                  o[2] * r->s[2] - r->p[2] + c};
                bool inside = true, counted = true;
                for (int d = 0; d < 3; d++) {
                    inside &= pos[d] >= 0 && pos[d] < r->in[d];
                    counted &= pos[d] < r->in[d] + r->p[d];
                }
                taps[n].index =
                    inside ? ((plane * r->in[0] + pos[0]) * r->in[1] + pos[1]) * r->in[2] + pos[2]
                           : -1;
                taps[n++].counted = counted;
            }
    return n;
}

static void out_position(const ref_pool_t *r, int64_t i, int64_t *plane, int64_t *o) {
    o[2] = i % r->out[2];
    o[1] = i / r->out[2] % r->out[1];
    o[0] = i / (r->out[2] * r->out[1]) % r->out[0];
    *plane = i / (r->out[0] * r->out[1] * r->out[2]);
}

static void ref_forward(const ref_pool_t *r, const double *x, double lowest, double *y) {
    tap_t taps[512];
    for (int64_t i = 0; i < ref_out_count(r); i++) {
        int64_t plane, o[3];
        out_position(r, i, &plane, o);
        int n = ref_taps(r, plane, o, taps), counted = 0, inside = 0;
        double max = lowest, sum = 0;
        for (int t = 0; t < n; t++) {
            counted += taps[t].counted;
            if (taps[t].index < 0) continue;
            double v = x[taps[t].index];
            inside++;
            if (v > max) max = v;
            sum += !strcmp(r->type, "lp") ? pow(v, r->power) : v;
        }
        if (!strcmp(r->type, "max"))
            y[i] = max;
        else if (!strcmp(r->type, "avg"))
            y[i] = inside ? sum / (r->include_pad ? counted : inside) : 0; /* empty: 0 */
        else if (!strcmp(r->type, "lp"))
            y[i] = r->power == 1 ? sum : r->power == 2 ? sqrt(sum) : cbrt(sum);
        else
            y[i] = sum;
    }
}

/* d data: max to the first maximal tap, the others spread (Lp through x/y powers). */
static void ref_backward(const ref_pool_t *r, const double *x, const double *y, const double *dy,
                         double *dx) {
    tap_t taps[512];
    memset(dx, 0, sizeof(double) * (size_t)ref_in_count(r));
    for (int64_t i = 0; i < ref_out_count(r); i++) {
        int64_t plane, o[3];
        out_position(r, i, &plane, o);
        int n = ref_taps(r, plane, o, taps), counted = 0, inside = 0;
        for (int t = 0; t < n; t++) counted += taps[t].counted, inside += taps[t].index >= 0;
        double size = !strcmp(r->type, "avg") ? (r->include_pad ? counted : inside) : 1;
        for (int t = 0; t < n; t++) {
            int64_t at = taps[t].index;
            if (at < 0) continue;
            if (!strcmp(r->type, "max")) {
                if (x[at] == y[i]) {
                    dx[at] += dy[i];
                    break;
                }
                continue;
            }
            double factor = 1;
            if (!strcmp(r->type, "lp") && r->power > 1)
                factor = y[i] == 0 ? 0 : pow(x[at] / y[i], r->power - 1);
            dx[at] += dy[i] * factor / size;
        }
    }
}

static void fill_distinct(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(((i + 3) * (7919 + seed * 104729)) % 2003) / 200.0 - 5;
}

static void tuple_text(char *buf, size_t size, const int64_t *v, int nsp) {
    int used = snprintf(buf, size, "(");
    for (int a = 3 - nsp; a < 3; a++)
        used += snprintf(buf + used, size - (size_t)used, "%lld,", (long long)v[a]);
    snprintf(buf + used, size - (size_t)used, ")");
}

/* Data with many equal values: max windows with ties, whose gradient goes to the first. */
static bool ties;

/* Run Pooling and _backward_Pooling on r in `dtype` and compare with the references. */
static void check_pool(ref_pool_t r, int dtype) {
    ref_shape(&r);
    int64_t shape[5] = {r.batch, r.ch}, oshape[5] = {r.batch, r.ch};
    for (int i = 0; i < r.nsp; i++)
        shape[2 + i] = r.in[3 - r.nsp + i], oshape[2 + i] = r.out[3 - r.nsp + i];
    int64_t nin = ref_in_count(&r), nout = ref_out_count(&r);
    double *x = malloc(sizeof(double) * (size_t)nin), *y = malloc(sizeof(double) * (size_t)nout);
    double *dy = malloc(sizeof(double) * (size_t)nout), *dx = malloc(sizeof(double) * (size_t)nin);
    fill_distinct(x, nin, 1);
    fill_distinct(dy, nout, 2);
    for (int64_t i = 0; ties && i < nin; i++) x[i] = floor(x[i] / 4);
    if (dtype == DEFT_FLOAT32)
        for (int64_t i = 0; i < nin; i++) x[i] = (float)x[i];
    char kernel[64], stride[64], pad[64], power[8];
    tuple_text(kernel, sizeof kernel, r.k, r.nsp);
    tuple_text(stride, sizeof stride, r.s, r.nsp);
    tuple_text(pad, sizeof pad, r.p, r.nsp);
    snprintf(power, sizeof power, "%d", r.power);
    const char *const *params = P(
        "kernel", kernel, "stride", stride, "pad", pad, "pool_type", r.type, "p_value", power,
        "count_include_pad", r.include_pad ? "true" : "false", "pooling_convention", r.convention);
    DeftNDArrayHandle X = make(dtype, 2 + r.nsp, shape, x);
    DeftNDArrayHandle Y = call1("Pooling", 1, &X, params);
    ref_forward(&r, x, dtype == DEFT_FLOAT32 ? -3.4028234663852886e38 : -1.7976931348623157e308, y);
    assert_shape(Y, 2 + r.nsp, oshape);
    assert_values(Y, nout, y, dtype == DEFT_FLOAT32 ? 1e-5 : 1e-12);
    double *got_y = read_all(Y, &nout); /* the backward sees the output as computed */
    DeftNDArrayHandle DY = make(dtype, 2 + r.nsp, oshape, dy);
    DeftNDArrayHandle DX = call1("_backward_Pooling", 3, (DeftNDArrayHandle[]){DY, X, Y}, params);
    ref_backward(&r, x, got_y, dy, dx);
    assert_shape(DX, 2 + r.nsp, shape);
    assert_values(DX, nin, dx, dtype == DEFT_FLOAT32 ? 1e-5 : 1e-12);
    free_all(4, (DeftNDArrayHandle[]){X, Y, DY, DX});
    free(x), free(y), free(dy), free(dx), free(got_y);
}

static const char *const types[] = {"max", "avg", "sum", "lp"};

/* Every type and convention, with and without counting the padding, 1-D to 3-D, both dtypes. */
START_TEST(test_pooling_matches_reference) {
    int dtype = _i % 2 ? DEFT_FLOAT64 : DEFT_FLOAT32;
    const char *convention = _i / 2 % 2 ? "full" : "valid";
    for (int t = 0; t < 4; t++)
        for (int include = 0; include < 2; include++) {
            for (int power = 1; power <= (t == 3 ? 3 : 1); power++) {
                ref_pool_t one = {1,         2,   3,        {1, 1, 11}, {1, 1, 3}, {1, 1, 2},
                                  {0, 0, 1}, {0}, types[t], power,      include,   convention};
                ref_pool_t two = {2,         2,   2,        {1, 7, 9}, {1, 3, 2}, {1, 2, 3},
                                  {0, 1, 1}, {0}, types[t], power,     include,   convention};
                ref_pool_t three = {3,         1,   2,        {5, 4, 6}, {2, 3, 2}, {2, 1, 2},
                                    {1, 1, 0}, {0}, types[t], power,     include,   convention};
                check_pool(one, dtype);
                check_pool(two, dtype);
                check_pool(three, dtype);
            }
        }
}
END_TEST

/* The float32 row kernel: wide rows with interior and border columns, strides 1 and 2. */
START_TEST(test_pooling_float32_rows_match_reference) {
    for (int t = 0; t < 2; t++)
        for (int s = 1; s <= 2; s++)
            for (int p = 0; p <= 2; p++) {
                ref_pool_t r = {2,         2,         3,         {1, 6, 41},
                                {1, 3, 3}, {1, s, s}, {0, 1, p}, {0},
                                types[t],  1,         p != 1,    s == 2 ? "full" : "valid"};
                check_pool(r, DEFT_FLOAT32);
            }
}
END_TEST

/*
 * The float32 plane kernels, with and without their vector rows, and the
 * general loops on float32, against the reference: the 2x2/2 windows that tile a plane, odd
 * sizes whose last row and column no window reads, 3x3/2 with padding, full
 * windows past the end, strides wider than the kernel, wide rows with vector
 * tails, 1-D, windows the size of the plane, and ties.
 */
START_TEST(test_pooling_float32_planes_match_reference) {
    static const struct {
        int nsp;
        int64_t in[3], k[3], s[3], p[3];
    } shapes[] = {
        {2, {1, 8, 10}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}},  /* LeNet's: tiles the plane */
        {2, {1, 7, 37}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}},  /* odd: last row, column unread */
        {2, {1, 13, 35}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}}, /* ResNet's stem pool */
        {2, {1, 9, 21}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}},  /* 3x3/1 */
        {2, {1, 10, 19}, {1, 2, 3}, {1, 3, 4}, {0, 1, 0}}, /* gaps between windows */
        {2, {1, 6, 5}, {1, 6, 5}, {1, 1, 1}, {0, 0, 0}},   /* one window: the plane */
        {2, {1, 5, 4}, {1, 3, 2}, {1, 1, 2}, {0, 2, 1}},   /* windows mostly padding */
        {1, {1, 1, 50}, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}},  /* 1-D */
    };
    static const char *const conventions[] = {"valid", "full"};
    for (int kernels = 0; kernels < CHOICES; kernels++) {
        if (!choose(kernels)) continue;
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
            for (int t = 0; t < 3; t++)
                for (int v = 0; v < 4; v++) {
                    ref_pool_t r = {.nsp = shapes[c].nsp,
                                    .batch = 2,
                                    .ch = 3,
                                    .type = types[t],
                                    .power = 1,
                                    .include_pad = v % 2,
                                    .convention = conventions[v / 2]};
                    memcpy(r.in, shapes[c].in, sizeof r.in), memcpy(r.k, shapes[c].k, sizeof r.k);
                    memcpy(r.s, shapes[c].s, sizeof r.s), memcpy(r.p, shapes[c].p, sizeof r.p);
                    ties = false;
                    check_pool(r, DEFT_FLOAT32);
                    ties = true;
                    check_pool(r, DEFT_FLOAT32);
                }
        /* 1-D 'same': windows run past the end without padding */
        ref_pool_t same = {.nsp = 1,
                           .batch = 2,
                           .ch = 2,
                           .in = {1, 1, 23},
                           .k = {1, 1, 3},
                           .s = {1, 1, 2},
                           .p = {0, 0, 0},
                           .type = "avg",
                           .power = 1,
                           .include_pad = true,
                           .convention = "same"};
        check_pool(same, DEFT_FLOAT32);
        same.type = "max";
        check_pool(same, DEFT_FLOAT32);
    }
    ties = false;
    choose_default();
}
END_TEST

/* NaN never wins a max window, and a window of NaNs alone gives float's lowest
 * value and passes no gradient, on both the plane kernels and the general loops. */
START_TEST(test_max_pooling_skips_nan) {
    float nan = NAN;
    for (int kernels = 0; kernels < CHOICES; kernels++) {
        if (!choose(kernels)) continue;
        DeftNDArrayHandle X =
            make(DEFT_FLOAT32, 4, SHAPE(1, 1, 2, 4), VALUES(nan, 1, nan, nan, 2, nan, nan, nan));
        DeftNDArrayHandle Y = call1("Pooling", 1, &X, P("kernel", "(2,2)", "stride", "(2,2)"));
        assert_values(Y, 2, VALUES(2, -3.4028234663852886e38), 0);
        DeftNDArrayHandle DY = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 1, 2), VALUES(5, 7));
        DeftNDArrayHandle DX = call1("_backward_Pooling", 3, (DeftNDArrayHandle[]){DY, X, Y},
                                     P("kernel", "(2,2)", "stride", "(2,2)"));
        assert_values(DX, 8, VALUES(0, 0, 0, 0, 5, 0, 0, 0), 0);
        free_all(4, (DeftNDArrayHandle[]){X, Y, DY, DX});
    }
    choose_default();
}
END_TEST

START_TEST(test_pooling_same_convention_and_global) {
    ref_pool_t same = {1,         1,   2,     {1, 1, 7}, {1, 1, 3}, {1, 1, 2},
                       {0, 0, 0}, {0}, "avg", 1,         true,      "same"};
    check_pool(same, DEFT_FLOAT64);
    double x[2 * 3 * 4];
    fill_distinct(x, 24, 3);
    DeftNDArrayHandle X = make(DEFT_FLOAT64, 4, SHAPE(1, 2, 3, 4), x);
    /* global pooling ignores kernel, stride and pad */
    DeftNDArrayHandle G = call1("Pooling", 1, &X,
                                P("global_pool", "true", "pool_type", "avg", "kernel", "(9,9)",
                                  "pad", "(5,5)", "stride", "(3,3)"));
    assert_shape(G, 4, SHAPE(1, 2, 1, 1));
    double mean[2] = {0, 0};
    for (int i = 0; i < 24; i++) mean[i / 12] += x[i] / 12;
    assert_values(G, 2, mean, 1e-12);
    DeftNDArrayHandle M = call1("Pooling", 1, &X, P("global_pool", "1", "layout", "NCHW"));
    double max[2] = {-1e300, -1e300};
    for (int i = 0; i < 24; i++) max[i / 12] = fmax(max[i / 12], x[i]);
    assert_values(M, 2, max, 0);
    /* cudnn_off is accepted; full rounds up where valid rounds down */
    DeftNDArrayHandle V = call1("Pooling", 1, &X, P("kernel", "(2,2)", "stride", "(2,3)"));
    assert_shape(V, 4, SHAPE(1, 2, 1, 1));
    DeftNDArrayHandle F = call1(
        "Pooling", 1, &X,
        P("kernel", "(2,2)", "stride", "(2,3)", "pooling_convention", "full", "cudnn_off", "true"));
    assert_shape(F, 4, SHAPE(1, 2, 2, 2));
    free_all(5, (DeftNDArrayHandle[]){X, G, M, V, F});
}
END_TEST

/* Max pooling's gradient goes to the first maximum of each window, as MXNet's. */
START_TEST(test_max_pooling_gradient_goes_to_the_first_maximum) {
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 3, SHAPE(1, 1, 4), VALUES(3, 3, 1, 3));
    DeftNDArrayHandle Y = call1("Pooling", 1, &X, P("kernel", "(2,)", "stride", "(1,)"));
    assert_values(Y, 3, VALUES(3, 3, 3), 0);
    DeftNDArrayHandle DY = make(DEFT_FLOAT32, 3, SHAPE(1, 1, 3), VALUES(1, 10, 100));
    DeftNDArrayHandle DX = call1("_backward_Pooling", 3, (DeftNDArrayHandle[]){DY, X, Y},
                                 P("kernel", "(2,)", "stride", "(1,)"));
    assert_values(DX, 4, VALUES(1, 10, 0, 100), 0);
    free_all(4, (DeftNDArrayHandle[]){X, Y, DY, DX});
}
END_TEST

START_TEST(test_pooling_zero_size_batch) {
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 4, SHAPE(0, 3, 5, 5), NULL);
    DeftNDArrayHandle Y = call1("Pooling", 1, &X, P("kernel", "(3,3)", "pool_type", "avg"));
    assert_shape(Y, 4, SHAPE(0, 3, 3, 3));
    DeftNDArrayHandle DX = call1("_backward_Pooling", 3, (DeftNDArrayHandle[]){Y, X, Y},
                                 P("kernel", "(3,3)", "pool_type", "avg"));
    assert_shape(DX, 4, SHAPE(0, 3, 5, 5));
    free_all(3, (DeftNDArrayHandle[]){X, Y, DX});
}
END_TEST

START_TEST(test_pooling_rejects_bad_parameters) {
    DeftNDArrayHandle X = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 4, 4), NULL);
    DeftNDArrayHandle V = make(DEFT_FLOAT32, 2, SHAPE(4, 4), NULL);
    DeftNDArrayHandle I = make(DEFT_INT32, 4, SHAPE(1, 1, 4, 4), NULL);
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(5,5)"), DEFT_ERROR_VALUE,
                         "operator 'Pooling': kernel size (5) exceeds input (4 padded to 4)");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "pad", "(2,0)"), DEFT_ERROR_VALUE,
                         "pad (2) must be smaller than kernel (2) on axis 0");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,)"), DEFT_ERROR_VALUE,
                         "kernel has 1 entries but data has shape (1,1,4,4), expected 3-D data");
    ck_assert_call_fails("Pooling", 1, &V, P("kernel", "(2,)"), DEFT_ERROR_VALUE,
                         "data has shape (4,4), expected 3-D (batch, channel, x)");
    ck_assert_call_fails("Pooling", 1, &X, NO_PARAMS, DEFT_ERROR_VALUE,
                         "kernel is required unless global_pool is true");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "stride", "(0,1)"),
                         DEFT_ERROR_VALUE, "expected kernel and stride >= 1");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "pad", "(1,4000000000000000000)"),
                         DEFT_ERROR_VALUE, "(at most 2^31 - 1)");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "stride", "(1,1,1)"),
                         DEFT_ERROR_VALUE, "stride has 3 and pad 0 entries, expected 2");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "pool_type", "lp"),
                         DEFT_ERROR_VALUE, "pool_type 'lp' needs p_value");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "pool_type", "lp", "p_value", "4"),
                         DEFT_ERROR_VALUE, "p_value is 4, expected 1, 2 or 3");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "layout", "NHWC"),
                         DEFT_ERROR_NOT_IMPLEMENTED,
                         "layout NHWC is not supported; only NCW, NCHW and NCDHW are");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "layout", "NCW"), DEFT_ERROR_VALUE,
                         "layout NCW needs 3-D data, got shape (1,1,4,4)");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "pooling_convention", "same"),
                         DEFT_ERROR_VALUE, "'same' supports 1-D pooling only");
    ck_assert_call_fails("Pooling", 1, &X, P("kernel", "(2,2)", "pool_type", "median"),
                         DEFT_ERROR_PARSE, "expected one of: max, avg, sum, lp");
    ck_assert_call_fails("Pooling", 1, &I, P("kernel", "(2,2)"), DEFT_ERROR_TYPE,
                         "input 0 has dtype int32, expected float32 or float64");
    DeftNDArrayHandle X1 = make(DEFT_FLOAT32, 3, SHAPE(1, 1, 4), NULL);
    ck_assert_call_fails("Pooling", 1, &X1,
                         P("kernel", "(2,)", "pad", "(1,)", "pooling_convention", "same"),
                         DEFT_ERROR_VALUE, "'same' does not take pad");
    DeftNDArrayHandle Y = make(DEFT_FLOAT32, 4, SHAPE(1, 1, 2, 2), NULL);
    ck_assert_call_fails("_backward_Pooling", 3, ((DeftNDArrayHandle[]){Y, X, X}),
                         P("kernel", "(3,3)"), DEFT_ERROR_VALUE,
                         "input 2 (output) has shape (1,1,4,4), expected (1,1,2,2)");
    free_all(5, (DeftNDArrayHandle[]){X, V, I, X1, Y});
}
END_TEST

/* _backward_Pooling_relu's kernel (deft_pool_cpu_backward with relu) gives
 * the bits of _backward_Pooling's followed by relu's gradient at the data
 * (relu's output: 1 where x > 0, x where x is NaN, else 0), on every kernel
 * choice: 2x2/2 windows that tile the plane (the AVX-512 rows, which take
 * relu's factor in their registers) and that leave a row and a column out
 * (the tiles, then a pass of relu's gradient); max and average pooling. The
 * data has zeros (windows of zeros pass -0 for a negative gradient), ties
 * and NaNs; the gradient both signs. */
static void check_pool_relu(int64_t h, int64_t w, int type) {
    const int64_t planes = 6, oh = h / 2, ow = w / 2, nin = planes * h * w, nout = planes * oh * ow;
    float *x = malloc(sizeof(float) * (size_t)nin), *y = malloc(sizeof(float) * (size_t)nout);
    float *dy = malloc(sizeof(float) * (size_t)nout), *plain = malloc(sizeof(float) * (size_t)nin);
    float *fused = malloc(sizeof(float) * (size_t)nin);
    for (int64_t i = 0; i < nin; i++) /* relu's output: about half zeros, some ties, a few NaNs */
        x[i] = i % 37 == 5                           ? NAN
               : (float)((i * 7919) % 13) - 6.0f > 0 ? (float)((i * 7919) % 13 - 6)
                                                     : 0.0f;
    for (int64_t i = 0; i < nout; i++) dy[i] = (float)((i * 104729) % 11) - 5.0f;
    deft_pool_grad_t j = {.g = {.planes = planes,
                                .in = {1, h, w},
                                .out = {1, oh, ow},
                                .kernel = {1, 2, 2},
                                .stride = {1, 2, 2},
                                .type = type},
                          .dtype = DEFT_DT_FLOAT32,
                          .dy = dy,
                          .x = x,
                          .y = y};
    for (int kernels = 0; kernels < CHOICES; kernels++) {
        if (!choose(kernels)) continue;
        deft_pool_cpu_forward(&j.g, DEFT_DT_FLOAT32, x, y);
        j.dx = plain, j.relu = false;
        deft_pool_cpu_backward(&j);
        j.dx = fused, j.relu = true;
        deft_pool_cpu_backward(&j);
        for (int64_t i = 0; i < nin; i++) {
            const float want = plain[i] * (x[i] > 0 ? 1.0f : x[i] != x[i] ? x[i] : 0.0f);
            ck_assert_msg(memcmp(&want, &fused[i], sizeof want) == 0,
                          "%lldx%lld %s, choice %d: dx[%lld] = %g, expected %g (x %g)",
                          (long long)h, (long long)w, type == DEFT_POOL_MAX ? "max" : "avg",
                          kernels, (long long)i, fused[i], want, x[i]);
        }
    }
    choose_default();
    free(x), free(y), free(dy), free(plain), free(fused);
}

START_TEST(test_pooling_relu_gradient_is_relu_after_pooling) {
    for (int type = DEFT_POOL_MAX; type <= DEFT_POOL_AVG; type++) {
        check_pool_relu(24, 24, type); /* LeNet's first pooling */
        check_pool_relu(8, 36, type);  /* rows past one vector */
        check_pool_relu(7, 37, type);  /* odd: the last row and column in no window */
    }
}
END_TEST

/* Pooling and its gradient of geometry g (g->out filled here, valid
 * convention) on float32 data with ties, zeros of both signs and NaNs, at
 * kernel choice c, into y and dx. */
static void run_choice(deft_pool_geom_t *g, int c, const float *x, const float *dy, float *y,
                       float *dx) {
    for (int a = 0; a < 3; a++)
        g->out[a] = (g->in[a] + 2 * g->pad[a] - g->kernel[a]) / g->stride[a] + 1;
    choose(c);
    deft_pool_cpu_forward(g, DEFT_DT_FLOAT32, x, y);
    deft_pool_grad_t j = {.g = *g, .dtype = DEFT_DT_FLOAT32, .dy = dy, .x = x, .y = y, .dx = dx};
    deft_pool_cpu_backward(&j);
}

/* The vector rows at every width the CPU has give the plane kernels' bits,
 * forward and backward: the same taps in the same order, sums included. */
START_TEST(test_pooling_vector_rows_give_the_planes_bits) {
    static const struct {
        int64_t in[3], k[3], s[3], p[3];
    } shapes[] = {
        {{1, 24, 24}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}}, /* LeNet's first */
        {{1, 6, 70}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}},  /* rows past 16 outputs, tails */
        {{1, 9, 45}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}},  /* a row and a column in no window */
        {{1, 14, 77}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}}, /* the stem's 3x3/2 */
        {{1, 11, 40}, {1, 3, 3}, {1, 2, 2}, {0, 0, 0}}, /* unpadded, tails */
        {{1, 7, 7}, {1, 7, 7}, {1, 1, 1}, {0, 0, 0}},   /* global, ResNet's */
        {{1, 5, 9}, {1, 5, 9}, {1, 1, 1}, {0, 0, 0}},   /* global, a partial vector */
    };
    const int64_t planes = 3, nmax = planes * 14 * 77;
    float *x = malloc(sizeof(float) * (size_t)nmax), *dy = malloc(sizeof(float) * (size_t)nmax);
    float *y[2], *dx[2];
    for (int r = 0; r < 2; r++)
        y[r] = malloc(sizeof(float) * (size_t)nmax), dx[r] = malloc(sizeof(float) * (size_t)nmax);
    for (int64_t i = 0; i < nmax; i++) {
        x[i] = i % 41 == 7 ? NAN : i % 29 == 3 ? -0.0f : (float)((i * 7919) % 97) / 7.0f - 6.0f;
        dy[i] = (float)((i * 104729) % 23) / 3.0f - 3.5f;
    }
    for (int c = 0; c < 2; c++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int type = DEFT_POOL_MAX; type <= DEFT_POOL_AVG; type++) {
                if (!choose(c)) continue;
                deft_pool_geom_t g = {.planes = planes, .type = type};
                memcpy(g.in, shapes[sh].in, sizeof g.in),
                    memcpy(g.kernel, shapes[sh].k, sizeof g.kernel);
                memcpy(g.stride, shapes[sh].s, sizeof g.stride),
                    memcpy(g.pad, shapes[sh].p, sizeof g.pad);
                run_choice(&g, c, x, dy, y[0], dx[0]);
                run_choice(&g, 2, x, dy, y[1], dx[1]);
                const int64_t nout = planes * g.out[1] * g.out[2], nin = planes * g.in[1] * g.in[2];
                for (int64_t i = 0; i < nout; i++)
                    ck_assert_msg(memcmp(&y[0][i], &y[1][i], sizeof(float)) == 0,
                                  "choice %d, shape %zu, type %d: y[%lld] = %a, planes %a", c, sh,
                                  type, (long long)i, y[0][i], y[1][i]);
                for (int64_t i = 0; i < nin; i++)
                    ck_assert_msg(memcmp(&dx[0][i], &dx[1][i], sizeof(float)) == 0,
                                  "choice %d, shape %zu, type %d: dx[%lld] = %a, planes %a", c, sh,
                                  type, (long long)i, dx[0][i], dx[1][i]);
            }
    choose_default();
    free(x), free(dy);
    for (int r = 0; r < 2; r++) free(y[r]), free(dx[r]);
}
END_TEST

/* The 3-wide stride-2 fold at every width the CPU has (pool_cpu.c takes it
 * at 16 lanes only) gives a scalar fold's bits: row[2o], row[2o + 1],
 * row[2o + 2] into acc[o] in that order, NaN never winning a max. */
START_TEST(test_pool3x2_fold_matches_a_scalar_fold) {
#if DEFT_SIMD_X86
    const deft_pool_vec_t *widths[] = {&deft_pool_vec_avx512, &deft_pool_vec_avx2};
    const deft_simd_level_t needs[] = {DEFT_SIMD_AVX512, DEFT_SIMD_AVX2};
    float row[2 * 41 + 1], acc[41], want[41];
    for (int i = 0; i < 2 * 41 + 1; i++)
        row[i] = i % 13 == 4 ? NAN : (float)((i * 7919) % 31) / 3.0f - 5.0f;
    for (int w = 0; w < 2; w++)
        for (int64_t n = 1; n <= 41; n++)
            for (int max = 0; max < 2; max++) {
                if (deft_simd_level() < needs[w]) continue;
                for (int64_t o = 0; o < n; o++) {
                    acc[o] = want[o] = (float)((o * 104729) % 17) / 7.0f - 1.0f;
                    for (int k = 0; k < 3; k++) {
                        float v = row[2 * o + k];
                        want[o] = max ? (v > want[o] ? v : want[o]) : want[o] + v;
                    }
                }
                widths[w]->pool3x2_fold(acc, row, n, max);
                ck_assert_msg(memcmp(acc, want, sizeof(float) * (size_t)n) == 0,
                              "%d lanes, n %lld, %s", widths[w]->lanes, (long long)n,
                              max ? "max" : "sum");
            }
#endif
}
END_TEST

static Suite *pool_suite(void) {
    Suite *suite = suite_create("pooling");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_pooling_matches_reference, 0, 4);
    tcase_add_test(tc, test_pooling_float32_rows_match_reference);
    tcase_add_test(tc, test_pooling_float32_planes_match_reference);
    tcase_add_test(tc, test_max_pooling_skips_nan);
    tcase_add_test(tc, test_pooling_relu_gradient_is_relu_after_pooling);
    tcase_add_test(tc, test_pooling_vector_rows_give_the_planes_bits);
    tcase_add_test(tc, test_pool3x2_fold_matches_a_scalar_fold);
    tcase_add_test(tc, test_pooling_same_convention_and_global);
    tcase_add_test(tc, test_max_pooling_gradient_goes_to_the_first_maximum);
    tcase_add_test(tc, test_pooling_zero_size_batch);
    tcase_add_test(tc, test_pooling_rejects_bad_parameters);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(pool_suite());
}
