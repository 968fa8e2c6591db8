/*
 * Elementwise unary operators: negative ... gelu, MXNet's rounding,
 * logarithm, power, trigonometric and gamma functions, Activation and clip.
 *
 * The scalar formulas live in scalar_math.h (shared with the GPU kernels);
 * this file turns each into a strided loop per dtype, and describes the
 * operators as data.
 */
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/half_compute.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/math/scalar_math.h"
#include "core/op/strided.h"

typedef struct unary_kernels {
    deft_inner_fn fn[DEFT_SLOTS]; /* NULL: dtype not supported */
    deft_gpu_fn_t gpu;            /* the same function on the GPU */
    deft_inner_fn bool_fn;        /* the loop for bool inputs, NULL: none */
} unary_kernels_t;

#define UNARY_LOOP(fn, T)                                                                          \
    DEFT_CLONES static void loop_##fn(const void *ctx, char *const *p, const int64_t *s,           \
                                      int64_t n) {                                                 \
        (void)ctx;                                                                                 \
        T *y = (T *)p[0];                                                                          \
        const T *x = (const T *)p[1];                                                              \
        if (s[0] == 1 && s[1] == 1)                                                                \
            for (int64_t i = 0; i < n; i++) y[i] = fn(x[i]);                                       \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = fn(x[i * s[1]]);                         \
    }

#define FLOAT_LOOPS(name, expr)                                                                    \
    UNARY_LOOP(deft_##name##_f, float) UNARY_LOOP(deft_##name##_d, double)
DEFT_UNARY_FLOAT_MATH(FLOAT_LOOPS)

#define INT_LOOPS(name)                                                                            \
    UNARY_LOOP(deft_##name##_i32, int32_t)                                                         \
    UNARY_LOOP(deft_##name##_i64, int64_t) UNARY_LOOP(deft_##name##_u8, uint8_t)
INT_LOOPS(negative)
INT_LOOPS(abs)
INT_LOOPS(sign)
INT_LOOPS(square)
INT_LOOPS(relu)
INT_LOOPS(logical_not)
INT_LOOPS(bitwise_not)

/* logical_not takes bool too (its uint8 loop is exact on 0 and 1). */
static const unary_kernels_t k_logical_not = {{loop_deft_logical_not_f, loop_deft_logical_not_d,
                                               loop_deft_logical_not_i32, loop_deft_logical_not_i64,
                                               loop_deft_logical_not_u8},
                                              DEFT_GPU_FN_logical_not,
                                              loop_deft_logical_not_u8};

/* NumPy's invert: bitwise on integers, logical on bool (no GPU kernel). */
static const unary_kernels_t k_bitwise_not = {
    {NULL, NULL, loop_deft_bitwise_not_i32, loop_deft_bitwise_not_i64, loop_deft_bitwise_not_u8},
    DEFT_GPU_FN_COUNT,
    loop_deft_logical_not_u8};

#define FLOAT_KERNELS(name)                                                                        \
    { {loop_deft_##name##_f, loop_deft_##name##_d, NULL, NULL, NULL}, DEFT_GPU_FN_##name, NULL }
#define ALL_KERNELS(name)                                                                          \
    {                                                                                              \
        {loop_deft_##name##_f, loop_deft_##name##_d, loop_deft_##name##_i32,                       \
         loop_deft_##name##_i64, loop_deft_##name##_u8},                                           \
            DEFT_GPU_FN_##name, NULL                                                               \
    }

static const unary_kernels_t k_negative = ALL_KERNELS(negative), k_abs = ALL_KERNELS(abs),
                             k_sign = ALL_KERNELS(sign), k_square = ALL_KERNELS(square),
                             k_relu = ALL_KERNELS(relu), k_exp = FLOAT_KERNELS(exp),
                             k_log = FLOAT_KERNELS(log), k_sqrt = FLOAT_KERNELS(sqrt),
                             k_rsqrt = FLOAT_KERNELS(rsqrt), k_sin = FLOAT_KERNELS(sin),
                             k_cos = FLOAT_KERNELS(cos), k_tanh = FLOAT_KERNELS(tanh),
                             k_sigmoid = FLOAT_KERNELS(sigmoid),
                             k_softrelu = FLOAT_KERNELS(softrelu), k_erf = FLOAT_KERNELS(erf),
                             k_gelu = FLOAT_KERNELS(gelu);
static const unary_kernels_t k_softsign = FLOAT_KERNELS(softsign), k_log1p = FLOAT_KERNELS(log1p),
                             k_expm1 = FLOAT_KERNELS(expm1), k_log2 = FLOAT_KERNELS(log2),
                             k_log10 = FLOAT_KERNELS(log10),
                             k_reciprocal = FLOAT_KERNELS(reciprocal), k_cbrt = FLOAT_KERNELS(cbrt),
                             k_rcbrt = FLOAT_KERNELS(rcbrt), k_tan = FLOAT_KERNELS(tan),
                             k_arcsin = FLOAT_KERNELS(arcsin), k_arccos = FLOAT_KERNELS(arccos),
                             k_arctan = FLOAT_KERNELS(arctan), k_sinh = FLOAT_KERNELS(sinh),
                             k_cosh = FLOAT_KERNELS(cosh), k_arcsinh = FLOAT_KERNELS(arcsinh),
                             k_arccosh = FLOAT_KERNELS(arccosh), k_arctanh = FLOAT_KERNELS(arctanh),
                             k_degrees = FLOAT_KERNELS(degrees), k_radians = FLOAT_KERNELS(radians),
                             k_round = FLOAT_KERNELS(round), k_rint = FLOAT_KERNELS(rint),
                             k_ceil = FLOAT_KERNELS(ceil), k_floor = FLOAT_KERNELS(floor),
                             k_trunc = FLOAT_KERNELS(trunc), k_fix = FLOAT_KERNELS(fix),
                             k_gamma = FLOAT_KERNELS(gamma), k_gammaln = FLOAT_KERNELS(gammaln);

/* The dtypes a function's kernels take: its slots, float16 and bfloat16 where it
 * has a float32 kernel (computed through it), bool where it has a bool loop. */
static int check_kernel(const deft_op_t *op, const unary_kernels_t *k, deft_dtype_t dtype) {
    int slot = deft_dtype_slot(dtype);
    if ((slot >= 0 && k->fn[slot]) || (deft_dtype_is_half(dtype) && k->fn[DEFT_SLOT_F32]) ||
        (dtype == DEFT_DT_BOOL && k->bool_fn))
        return 0;
    return deft_op_error(op, DEFT_ERR_TYPE, "input 0 has dtype %s, expected %s",
                         deft_dtype_name(dtype),
                         !k->fn[DEFT_SLOT_F32]  ? "int32, int64, uint8 or bool"
                         : k->fn[DEFT_SLOT_I32] ? "float32, float64, int32, int64 or uint8 (or "
                                                  "float16, bfloat16: through float32)"
                                                : "float32 or float64 (or float16, bfloat16: "
                                                  "through float32)");
}

static int run_unary(const unary_kernels_t *k, const deft_tensor_t *in, const deft_tensor_t *out,
                     const void *ctx) {
    char *ptrs[2] = {deft_tensor_data(out), deft_tensor_data(in)};
    static const int64_t dense[2] = {1, 1};
    deft_dtype_t dtype = in->dtype;
    int64_t n = deft_shape_size(&out->shape);
    if (deft_dtype_is_half(dtype)) {
        deft_half_run_flat(k->fn[DEFT_SLOT_F32], ctx, 2, ptrs, dense, dtype, n);
        return 0;
    }
    deft_inner_fn fn = dtype == DEFT_DT_BOOL ? k->bool_fn : k->fn[deft_dtype_slot(dtype)];
    deft_flat_run(fn, ctx, 2, ptrs, dense, deft_dtype_size(dtype), n);
    return 0;
}

static int unary_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (check_kernel(op, op->data, in[0].dtype)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int unary_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    return run_unary(op->data, &in[0], &out[0], NULL);
}

/* ---- Activation ---- */

static const char *const act_types[] = {"relu", "sigmoid", "softrelu", "tanh", "softsign", NULL};
static const unary_kernels_t *const act_kernels[] = {&k_relu, &k_sigmoid, &k_softrelu, &k_tanh,
                                                     &k_softsign};
static const deft_param_def_t activation_params[] = {
    {"act_type", DEFT_PARAM_ENUM, NULL, "activation function to apply", act_types, false}, {0}};

static int activation_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (check_kernel(op, &k_tanh, in[0].dtype)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

static int activation_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    return run_unary(act_kernels[p[0].i], &in[0], &out[0], NULL);
}

/* ---- clip ---- */

typedef struct clip_bounds {
    double lo, hi;
} clip_bounds_t;

#define CLIP_LOOP(S, T, CONVERT)                                                                   \
    DEFT_CLONES static void clip_##S(const void *ctx, char *const *p, const int64_t *s,            \
                                     int64_t n) {                                                  \
        const clip_bounds_t *b = ctx;                                                              \
        const T lo = CONVERT(b->lo), hi = CONVERT(b->hi);                                          \
        T *y = (T *)p[0];                                                                          \
        const T *x = (const T *)p[1];                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = x[i * s[1]];                                                                     \
            y[i * s[0]] = v < lo ? lo : v > hi ? hi : v;                                           \
        }                                                                                          \
    }
#define AS_FLOAT(x)  ((float)(x))
#define AS_DOUBLE(x) (x)
CLIP_LOOP(f32, float, AS_FLOAT)
CLIP_LOOP(f64, double, AS_DOUBLE)
CLIP_LOOP(i32, int32_t, deft_to_i32)
CLIP_LOOP(i64, int64_t, deft_to_i64)
CLIP_LOOP(u8, uint8_t, deft_to_u8)
static const unary_kernels_t k_clip = {
    {clip_f32, clip_f64, clip_i32, clip_i64, clip_u8}, DEFT_GPU_FN_CLIP, NULL};

static const deft_param_def_t clip_params[] = {
    {"a_min", DEFT_PARAM_FLOAT, NULL, "lower bound", NULL, false},
    {"a_max", DEFT_PARAM_FLOAT, NULL, "upper bound", NULL, false},
    {0}};

static int clip_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (!(p[0].f <= p[1].f))
        return deft_op_error(op, DEFT_ERR_VALUE, "a_min (%g) must not be greater than a_max (%g)",
                             p[0].f, p[1].f);
    return unary_infer(op, p, nin, in, nout, out);
}

static int clip_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    clip_bounds_t bounds = {p[0].f, p[1].f};
    return run_unary(&k_clip, &in[0], &out[0], &bounds);
}

/* ---- on a GPU: the same functions, queued on the device ---- */

#ifdef DEFT_HAVE_CUDA
/* The dtypes infer takes but the GPU has no kernel for (bool's logical_not)
 * fail here, naming the operator. */
static int run_unary_gpu(const deft_op_t *op, const unary_kernels_t *k, const deft_tensor_t *in,
                         const deft_tensor_t *out, const double *scalars) {
    if (deft_gpu_check_map(op, k->gpu, in->dtype)) return -1;
    return deft_gpu_elementwise(k->gpu, out, 1, &in, scalars);
}

static int unary_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    return run_unary_gpu(op, op->data, &in[0], &out[0], NULL);
}

static int activation_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    return run_unary_gpu(op, act_kernels[p[0].i], &in[0], &out[0], NULL);
}

static int clip_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const double bounds[DEFT_GPU_MAX_OPS] = {[2] = p[0].f, [3] = p[1].f};
    return run_unary_gpu(op, &k_clip, &in[0], &out[0], bounds);
}
#endif

/* ---- gradients, as graph nodes (x: input, y: output, g: output gradient) ---- */

#define X        g_in(b)
#define Y        b->output(b, 0)
#define G        b->out_grad(b, 0)
#define NOPARAMS GRAD_NONE

static deft_gref_t g_in(deft_grad_builder_t *b) {
    return b->input(b, 0);
}

typedef deft_gref_t (*local_grad_fn)(deft_grad_builder_t *b); /* dy/dx as a node */

static deft_gref_t d_abs(deft_grad_builder_t *b) {
    return g_op1(b, "sign", X, NOPARAMS);
}
static deft_gref_t d_exp(deft_grad_builder_t *b) {
    return Y;
}
static deft_gref_t d_log(deft_grad_builder_t *b) {
    return g_op1(b, "_rdiv_scalar", X, GRAD_PARAMS("scalar", "1"));
}
static deft_gref_t d_sqrt(deft_grad_builder_t *b) {
    return g_op1(b, "_rdiv_scalar", Y, GRAD_PARAMS("scalar", "0.5"));
}
static deft_gref_t d_square(deft_grad_builder_t *b) {
    return g_scale(b, X, 2);
}
static deft_gref_t d_rsqrt(deft_grad_builder_t *b) { /* -0.5 y^3 */
    return g_scale(b, g_op1(b, "_power_scalar", Y, GRAD_PARAMS("scalar", "3")), -0.5);
}
static deft_gref_t d_sin(deft_grad_builder_t *b) {
    return g_op1(b, "cos", X, NOPARAMS);
}
static deft_gref_t d_cos(deft_grad_builder_t *b) {
    return g_scale(b, g_op1(b, "sin", X, NOPARAMS), -1);
}
static deft_gref_t d_tanh(deft_grad_builder_t *b) { /* 1 - y^2 */
    return g_op1(b, "_rminus_scalar", g_op1(b, "square", Y, NOPARAMS), GRAD_PARAMS("scalar", "1"));
}
static deft_gref_t d_sigmoid(deft_grad_builder_t *b) { /* y (1 - y) */
    return g_mul(b, Y, g_op1(b, "_rminus_scalar", Y, GRAD_PARAMS("scalar", "1")));
}
static deft_gref_t d_softrelu(deft_grad_builder_t *b) {
    return g_op1(b, "sigmoid", X, NOPARAMS);
}
static deft_gref_t d_erf(deft_grad_builder_t *b) { /* 2/sqrt(pi) exp(-x^2) */
    deft_gref_t e = g_op1(b, "exp", g_scale(b, g_op1(b, "square", X, NOPARAMS), -1), NOPARAMS);
    return g_scale(b, e, 1.1283791670955126);
}
static deft_gref_t d_gelu(deft_grad_builder_t *b) { /* Phi(x) + x phi(x) */
    deft_gref_t phi_big = g_scale(
        b,
        g_op1(b, "_plus_scalar", g_op1(b, "erf", g_scale(b, X, 0.70710678118654752), NOPARAMS),
              GRAD_PARAMS("scalar", "1")),
        0.5);
    deft_gref_t density =
        g_scale(b, g_op1(b, "exp", g_scale(b, g_op1(b, "square", X, NOPARAMS), -0.5), NOPARAMS),
                0.3989422804014327);
    return g_op2(b, "elemwise_add", phi_big, g_mul(b, X, density), NOPARAMS);
}

/* s / v, and v + s, as nodes. */
static deft_gref_t g_over(deft_grad_builder_t *b, double s, deft_gref_t v) {
    char text[32];
    snprintf(text, sizeof text, "%.17g", s);
    return g_op1(b, "_rdiv_scalar", v, GRAD_PARAMS("scalar", text));
}
static deft_gref_t g_plus(deft_grad_builder_t *b, deft_gref_t v, const char *s) {
    return g_op1(b, "_plus_scalar", v, GRAD_PARAMS("scalar", s));
}
static deft_gref_t g_square(deft_grad_builder_t *b, deft_gref_t v) {
    return g_op1(b, "square", v, NOPARAMS);
}

static deft_gref_t d_softsign(deft_grad_builder_t *b) { /* 1 / (1 + |x|)^2 */
    return g_over(b, 1, g_square(b, g_plus(b, g_op1(b, "abs", X, NOPARAMS), "1")));
}
static deft_gref_t d_log1p(deft_grad_builder_t *b) {
    return g_over(b, 1, g_plus(b, X, "1"));
}
static deft_gref_t d_expm1(deft_grad_builder_t *b) {
    return g_plus(b, Y, "1");
}
static deft_gref_t d_log2(deft_grad_builder_t *b) {
    return g_over(b, 1.4426950408889634074, X); /* 1 / (x ln 2) */
}
static deft_gref_t d_log10(deft_grad_builder_t *b) {
    return g_over(b, 0.43429448190325182765, X); /* 1 / (x ln 10) */
}
static deft_gref_t d_reciprocal(deft_grad_builder_t *b) { /* -y^2 */
    return g_scale(b, g_square(b, Y), -1);
}
static deft_gref_t d_cbrt(deft_grad_builder_t *b) { /* 1 / (3 y^2) */
    return g_over(b, 1.0 / 3, g_square(b, Y));
}
static deft_gref_t d_rcbrt(deft_grad_builder_t *b) { /* -y / (3 x) */
    return g_scale(b, g_op2(b, "elemwise_div", Y, X, NOPARAMS), -1.0 / 3);
}
static deft_gref_t d_tan(deft_grad_builder_t *b) { /* 1 + y^2 */
    return g_plus(b, g_square(b, Y), "1");
}
static deft_gref_t d_arcsin(deft_grad_builder_t *b) { /* 1 / sqrt(1 - x^2) */
    return g_op1(b, "rsqrt", g_op1(b, "_rminus_scalar", g_square(b, X), GRAD_PARAMS("scalar", "1")),
                 NOPARAMS);
}
static deft_gref_t d_arccos(deft_grad_builder_t *b) {
    return g_scale(b, d_arcsin(b), -1);
}
static deft_gref_t d_arctan(deft_grad_builder_t *b) { /* 1 / (1 + x^2) */
    return g_over(b, 1, g_plus(b, g_square(b, X), "1"));
}
static deft_gref_t d_sinh(deft_grad_builder_t *b) {
    return g_op1(b, "cosh", X, NOPARAMS);
}
static deft_gref_t d_cosh(deft_grad_builder_t *b) {
    return g_op1(b, "sinh", X, NOPARAMS);
}
static deft_gref_t d_arcsinh(deft_grad_builder_t *b) { /* 1 / sqrt(x^2 + 1) */
    return g_op1(b, "rsqrt", g_plus(b, g_square(b, X), "1"), NOPARAMS);
}
static deft_gref_t d_arccosh(deft_grad_builder_t *b) { /* 1 / sqrt(x^2 - 1) */
    return g_op1(b, "rsqrt", g_plus(b, g_square(b, X), "-1"), NOPARAMS);
}
static deft_gref_t d_arctanh(deft_grad_builder_t *b) { /* 1 / (1 - x^2) */
    return g_over(b, 1, g_op1(b, "_rminus_scalar", g_square(b, X), GRAD_PARAMS("scalar", "1")));
}

/* The gradient of y = f(x) is g * f'(x). */
static int chain(deft_grad_builder_t *b, local_grad_fn local, deft_gref_t *in_grads) {
    in_grads[0] = g_mul(b, G, local(b));
    return 0;
}

#define UNARY_GRAD(name)                                                                           \
    static int grad_##name(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,           \
                           deft_gref_t *in_grads) {                                                \
        (void)p, (void)nin;                                                                        \
        return chain(b, d_##name, in_grads);                                                       \
    }
static int grad_negative(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                         deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op1(b, "negative", G, NOPARAMS);
    return 0;
}
UNARY_GRAD(abs)
UNARY_GRAD(exp)
UNARY_GRAD(log)
UNARY_GRAD(sqrt)
UNARY_GRAD(square)
UNARY_GRAD(rsqrt)
UNARY_GRAD(sin)
UNARY_GRAD(cos)
UNARY_GRAD(tanh)
UNARY_GRAD(sigmoid)
UNARY_GRAD(softrelu)
UNARY_GRAD(erf)
UNARY_GRAD(gelu)
UNARY_GRAD(softsign)
UNARY_GRAD(log1p)
UNARY_GRAD(expm1)
UNARY_GRAD(log2)
UNARY_GRAD(log10)
UNARY_GRAD(reciprocal)
UNARY_GRAD(cbrt)
UNARY_GRAD(rcbrt)
UNARY_GRAD(tan)
UNARY_GRAD(arcsin)
UNARY_GRAD(arccos)
UNARY_GRAD(arctan)
UNARY_GRAD(sinh)
UNARY_GRAD(cosh)
UNARY_GRAD(arcsinh)
UNARY_GRAD(arccosh)
UNARY_GRAD(arctanh)

/* gamma' = gamma * digamma and gammaln' = digamma: no other operator
 * computes digamma, so each has MXNet's backward operator (g, x). */
static int grad_gamma(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                      deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_gamma", G, X, NOPARAMS);
    return 0;
}
static int grad_gammaln(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_gammaln", G, X, NOPARAMS);
    return 0;
}

/* degrees and radians are linear: the gradient is g times the constant. */
static int grad_degrees(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_scale(b, G, DEFT_DEGREES_PER_RADIAN);
    return 0;
}
static int grad_radians(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_scale(b, G, 1 / DEFT_DEGREES_PER_RADIAN);
    return 0;
}

/* relu's gradient is one node, _backward_relu(g, y), where g * (x > 0) took
 * two kernels and an intermediate (LeNet's step, 1 thread: 0.034 ms). It reads
 * y, which is positive exactly where x is: the next layer keeps y anyway, so
 * x may go (or relu overwrite it in place). */
static int grad_relu(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_relu", G, Y, NOPARAMS);
    return 0;
}

static int grad_activation(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    static const local_grad_fn by_type[] = {NULL, d_sigmoid, d_softrelu, d_tanh, d_softsign};
    if (act_kernels[p[0].i] == &k_relu) return grad_relu(b, p, nin, in_grads);
    return chain(b, by_type[p[0].i], in_grads);
}

static int grad_clip(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                     deft_gref_t *in_grads) {
    (void)p, (void)nin;
    deft_gref_t above =
        g_op1(b, "_greater_equal_scalar", X, GRAD_PARAMS("scalar", g_attr(b, "a_min", "0")));
    deft_gref_t below =
        g_op1(b, "_lesser_equal_scalar", X, GRAD_PARAMS("scalar", g_attr(b, "a_max", "0")));
    in_grads[0] = g_mul(b, G, g_mul(b, above, below));
    return 0;
}

#undef X
#undef Y
#undef G

/* ---- the table ---- */

/* sign, the rounding functions and logical_not are piecewise constant:
 * nothing flows back through them (MXNet's zero gradients) */
#define grad_sign        deft_gradient_zero
#define grad_round       deft_gradient_zero
#define grad_rint        deft_gradient_zero
#define grad_ceil        deft_gradient_zero
#define grad_floor       deft_gradient_zero
#define grad_trunc       deft_gradient_zero
#define grad_fix         deft_gradient_zero
#define grad_logical_not deft_gradient_zero
#define UNARY_OP(name_, kernels, doc)                                                              \
    {                                                                                              \
        .name = #name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,    \
        .max_inputs = 1, .infer = unary_infer, .forward = unary_forward,                           \
        .forward_gpu = DEFT_GPU(unary_forward_gpu), .inplace_input = 0, .data = &kernels,          \
        .infer_inputs = deft_infer_inputs_like_output, .gradient = grad_##name_,                   \
        .elementwise = true                                                                        \
    }

static const deft_op_t unary_ops[] = {
    UNARY_OP(negative, k_negative, "Numerical negative, elementwise: -x."),
    UNARY_OP(abs, k_abs, "Absolute value, elementwise."),
    UNARY_OP(sign, k_sign, "Sign, elementwise: -1, 0 or 1 (NaN stays NaN)."),
    UNARY_OP(exp, k_exp, "Exponential, elementwise."),
    UNARY_OP(log, k_log, "Natural logarithm, elementwise."),
    UNARY_OP(sqrt, k_sqrt, "Square root, elementwise."),
    UNARY_OP(square, k_square, "Square, elementwise: x * x."),
    UNARY_OP(rsqrt, k_rsqrt, "Reciprocal square root, elementwise: 1 / sqrt(x)."),
    UNARY_OP(sin, k_sin, "Sine, elementwise (radians)."),
    UNARY_OP(cos, k_cos, "Cosine, elementwise (radians)."),
    UNARY_OP(tanh, k_tanh, "Hyperbolic tangent, elementwise."),
    UNARY_OP(sigmoid, k_sigmoid, "Logistic sigmoid, elementwise: 1 / (1 + exp(-x))."),
    UNARY_OP(relu, k_relu, "Rectified linear unit, elementwise: max(x, 0)."),
    UNARY_OP(softrelu, k_softrelu, "Softplus, elementwise: log(1 + exp(x)), computed stably."),
    UNARY_OP(erf, k_erf, "Gauss error function, elementwise."),
    UNARY_OP(gelu, k_gelu, "Gaussian error linear unit (exact): 0.5 x (1 + erf(x / sqrt 2))."),
    UNARY_OP(softsign, k_softsign, "Softsign, elementwise: x / (1 + |x|)."),
    UNARY_OP(log1p, k_log1p, "log(1 + x), elementwise, accurate for small x."),
    UNARY_OP(expm1, k_expm1, "exp(x) - 1, elementwise, accurate for small x."),
    UNARY_OP(log2, k_log2, "Base-2 logarithm, elementwise."),
    UNARY_OP(log10, k_log10, "Base-10 logarithm, elementwise."),
    UNARY_OP(reciprocal, k_reciprocal, "Reciprocal, elementwise: 1 / x."),
    UNARY_OP(cbrt, k_cbrt, "Cube root, elementwise."),
    UNARY_OP(rcbrt, k_rcbrt, "Reciprocal cube root, elementwise: 1 / cbrt(x)."),
    UNARY_OP(tan, k_tan, "Tangent, elementwise (radians)."),
    UNARY_OP(arcsin, k_arcsin, "Inverse sine, elementwise, in [-pi/2, pi/2]."),
    UNARY_OP(arccos, k_arccos, "Inverse cosine, elementwise, in [0, pi]."),
    UNARY_OP(arctan, k_arctan, "Inverse tangent, elementwise, in (-pi/2, pi/2)."),
    UNARY_OP(sinh, k_sinh, "Hyperbolic sine, elementwise."),
    UNARY_OP(cosh, k_cosh, "Hyperbolic cosine, elementwise."),
    UNARY_OP(arcsinh, k_arcsinh, "Inverse hyperbolic sine, elementwise."),
    UNARY_OP(arccosh, k_arccosh, "Inverse hyperbolic cosine, elementwise."),
    UNARY_OP(arctanh, k_arctanh, "Inverse hyperbolic tangent, elementwise."),
    UNARY_OP(degrees, k_degrees, "Radians to degrees, elementwise."),
    UNARY_OP(radians, k_radians, "Degrees to radians, elementwise."),
    UNARY_OP(round, k_round, "Round to the nearest integer, halves away from zero."),
    UNARY_OP(rint, k_rint, "Round to the nearest integer, halves down (MXNet's rint: 2.5 -> 2)."),
    UNARY_OP(ceil, k_ceil, "Ceiling, elementwise."),
    UNARY_OP(floor, k_floor, "Floor, elementwise."),
    UNARY_OP(trunc, k_trunc, "Round towards zero, elementwise."),
    UNARY_OP(fix, k_fix, "Round towards zero, elementwise (MXNet's fix)."),
    UNARY_OP(logical_not, k_logical_not, "1 where x is zero, else 0, in the input's dtype."),
    {.name = "_npi_bitwise_not",
     .description = "Bitwise not ~x of integers; logical not of bool (NumPy's invert).",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .infer = unary_infer,
     .forward = unary_forward,
     .inplace_input = 0,
     .data = &k_bitwise_not,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = deft_gradient_zero,
     .elementwise = true},
    UNARY_OP(gamma, k_gamma, "The gamma function, elementwise (tgamma)."),
    UNARY_OP(gammaln, k_gammaln, "ln |gamma(x)|, elementwise."),
    {.name = "Activation",
     .description = "Applies an activation function elementwise: relu, sigmoid, softrelu, tanh or "
                    "softsign.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = activation_params,
     .infer = activation_infer,
     .forward = activation_forward,
     .forward_gpu = DEFT_GPU(activation_forward_gpu),
     .inplace_input = 0,
     .infer_inputs = deft_infer_inputs_like_output,
     .elementwise = true,
     .gradient = grad_activation},
    {.name = "clip",
     .description = "Clips values elementwise into [a_min, a_max]; NaN stays NaN.",
     .input_names = deft_op_data_input,
     .min_inputs = 1,
     .max_inputs = 1,
     .params = clip_params,
     .infer = clip_infer,
     .forward = clip_forward,
     .forward_gpu = DEFT_GPU(clip_forward_gpu),
     .inplace_input = 0,
     .data = &k_clip,
     .infer_inputs = deft_infer_inputs_like_output,
     .elementwise = true,
     .gradient = grad_clip},
};

DEFT_OP_FAMILY(deft_family_unary, unary_ops);
