/*
 * Elementwise binary operators with NumPy broadcasting (broadcast_add ...),
 * their same-shape forms (elemwise_add, _maximum, _greater ...) and scalar
 * forms (_plus_scalar ...), and the backward operators of gamma, gammaln and
 * relu.
 * The scalar math is in scalar_math.h; comparisons and logical operators
 * return 1 or 0 in the input dtype, as MXNet's do. The NumPy operators
 * (_npi_*: bool comparisons, floor division, bitwise and shifts) follow NumPy.
 * float16 and bfloat16 compute through float32 (half_compute.c).
 */
#include <math.h>

#include "core/base/parallel.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/half_compute.h"
#include "core/op/kernel.h"
#include "core/op/op.h"
#include "core/math/scalar_math.h"
#include "core/op/strided.h"

typedef struct binary_kernels {
    deft_inner_fn fn[DEFT_SLOTS];
    deft_gpu_fn_t gpu; /* the same function on the GPU */
    bool bool_ok;      /* bool inputs run the uint8 loop (exact on 0 and 1) */
} binary_kernels_t;

/* Special cases for the stride patterns that vectorise: dense, and either side a scalar. */
#define BINARY_LOOP(fn, T)                                                                         \
    DEFT_CLONES static void loop_##fn(const void *ctx, char *const *p, const int64_t *s,           \
                                      int64_t n) {                                                 \
        (void)ctx;                                                                                 \
        T *y = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                 \
            for (int64_t i = 0; i < n; i++) y[i] = fn(a[i], b[i]);                                 \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                                          \
            const T bv = *b;                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = fn(a[i], bv);                                   \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                          \
            const T av = *a;                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = fn(av, b[i]);                                   \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = fn(a[i * s[1]], b[i * s[2]]);            \
        }                                                                                          \
    }

#define ALL_LOOPS(name, expr)                                                                      \
    BINARY_LOOP(deft_##name##_f, float)                                                            \
    BINARY_LOOP(deft_##name##_d, double)                                                           \
    BINARY_LOOP(deft_##name##_i32, int32_t)                                                        \
    BINARY_LOOP(deft_##name##_i64, int64_t)                                                        \
    BINARY_LOOP(deft_##name##_u8, uint8_t)                                                         \
    static const binary_kernels_t k_##name = {{loop_deft_##name##_f, loop_deft_##name##_d,         \
                                               loop_deft_##name##_i32, loop_deft_##name##_i64,     \
                                               loop_deft_##name##_u8},                             \
                                              DEFT_GPU_FN_##name,                                  \
                                              false};
DEFT_BINARY_FLOAT_MATH(ALL_LOOPS)

#define FLOAT_LOOPS(name, expr)                                                                    \
    BINARY_LOOP(deft_##name##_f, float)                                                            \
    BINARY_LOOP(deft_##name##_d, double)                                                           \
    static const binary_kernels_t k_##name = {                                                     \
        {loop_deft_##name##_f, loop_deft_##name##_d, NULL, NULL, NULL},                            \
        DEFT_GPU_FN_##name,                                                                        \
        false};
DEFT_GRAD_BINARY_MATH(FLOAT_LOOPS)

/* Integer-only functions (bool arrays run the uint8 loops: on 0 and 1, and, or
 * and xor are the logical ones); they have no GPU kernel. */
#define INT_LOOPS(name, bool_ok)                                                                   \
    BINARY_LOOP(deft_##name##_i32, int32_t)                                                        \
    BINARY_LOOP(deft_##name##_i64, int64_t)                                                        \
    BINARY_LOOP(deft_##name##_u8, uint8_t)                                                         \
    static const binary_kernels_t k_##name = {                                                     \
        {NULL, NULL, loop_deft_##name##_i32, loop_deft_##name##_i64, loop_deft_##name##_u8},       \
        DEFT_GPU_FN_COUNT,                                                                         \
        bool_ok};
INT_LOOPS(bitwise_and, true)
INT_LOOPS(bitwise_or, true)
INT_LOOPS(bitwise_xor, true)
INT_LOOPS(left_shift, false)
INT_LOOPS(right_shift, false)

/* MXNet's functions exact on bool (0 and 1 in, 0 or 1 out): bool arrays run their
 * uint8 loops, as the bitwise and, or and xor. */
static const binary_kernels_t *const bool_exact[] = {
    &k_maximum, &k_minimum,      &k_equal,       &k_not_equal,  &k_greater,    &k_greater_equal,
    &k_lesser,  &k_lesser_equal, &k_logical_and, &k_logical_or, &k_logical_xor};

static bool takes_bool(const binary_kernels_t *k) {
    for (size_t i = 0; i < sizeof bool_exact / sizeof bool_exact[0]; i++)
        if (bool_exact[i] == k) return true;
    return k->bool_ok;
}

/* The kernel slot of a dtype; bool runs the uint8 kernels of the operators whose
 * infer admits it (those exact on 0 and 1). */
static inline int kernel_slot(deft_dtype_t dtype) {
    return dtype == DEFT_DT_BOOL ? DEFT_SLOT_U8 : deft_dtype_slot(dtype);
}

/* The dtypes an operator's kernels take: its slots, float16 and bfloat16 where it
 * has float32 kernels (computed through them), bool for the bitwise ones. */
static int check_kernel_dtype(const deft_op_t *op, const binary_kernels_t *k, int input,
                              deft_dtype_t dtype) {
    if (deft_dtype_is_half(dtype) && k->fn[DEFT_SLOT_F32]) return 0;
    if (dtype == DEFT_DT_BOOL && takes_bool(k)) return 0;
    int slot = deft_dtype_slot(dtype);
    if (slot >= 0 && k->fn[slot]) return 0;
    return deft_op_error(
        op, DEFT_ERR_TYPE, "input %d has dtype %s, which has no kernel (expected %s)", input,
        deft_dtype_name(dtype),
        k->bool_ok              ? "int32, int64, uint8 or bool"
        : !k->fn[DEFT_SLOT_F32] ? "int32, int64 or uint8"
        : k->fn[DEFT_SLOT_I32]  ? "float32, float64, int32, int64 or uint8; float16, bfloat16 "
                                  "through float32"
                                : "float32 or float64; float16, bfloat16 through float32");
}

static int check_dtype(const deft_op_t *op, int nin, const deft_desc_t *in) {
    if (deft_op_check_same_dtype(op, nin, in)) return -1;
    return check_kernel_dtype(op, op->data, 0, in[0].dtype);
}

int deft_broadcast_shape(const deft_op_t *op, const deft_shape_t *a, const deft_shape_t *b,
                         deft_shape_t *out) {
    int ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    deft_shape_t result = {.ndim = ndim};
    for (int d = 0; d < ndim; d++) {
        int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
        int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
        if (x != y && x != 1 && y != 1) {
            char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input shapes %s and %s cannot be broadcast together (axis %d: "
                                 "%lld vs %lld)",
                                 deft_shape_format(a, sa, sizeof sa),
                                 deft_shape_format(b, sb, sizeof sb), d - ndim, (long long)x,
                                 (long long)y);
        }
        result.dims[d] = x == 1 ? y : x;
    }
    *out = result;
    return 0;
}

static int broadcast_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (check_dtype(op, nin, in) ||
        deft_broadcast_shape(op, &in[0].shape, &in[1].shape, &out[0].shape))
        return -1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int same_shape_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (check_dtype(op, nin, in)) return -1;
    if (!deft_shape_equal(&in[0].shape, &in[1].shape)) {
        char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 1 has shape %s, expected %s (the shape of input 0; use the "
                             "broadcast_ form to broadcast)",
                             deft_shape_format(&in[1].shape, sb, sizeof sb),
                             deft_shape_format(&in[0].shape, sa, sizeof sa));
    }
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* The backward operators (out_grad, input) of float-only functions. */
static int float_same_shape_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (deft_op_check_same_dtype(op, nin, in) || deft_op_check_dtype_float(op, 0, in[0].dtype))
        return -1;
    return same_shape_infer(op, p, nin, in, nout, out);
}

static int binary_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    const binary_kernels_t *k = op->data;
    deft_dtype_t dtype = out[0].dtype;
    int64_t n = deft_shape_size(&out[0].shape), na = deft_shape_size(&in[0].shape),
            nb = deft_shape_size(&in[1].shape);
    if (deft_dtype_is_half(dtype)) {
        deft_strided_t it;
        deft_strided_init(&it, &out[0].shape, 3);
        deft_strided_set_dense(&it, 0, &out[0]);
        deft_strided_set_broadcast(&it, 1, &in[0]);
        deft_strided_set_broadcast(&it, 2, &in[1]);
        deft_half_run(&it, k->fn[DEFT_SLOT_F32], NULL, dtype);
        return 0;
    }
    deft_inner_fn fn = k->fn[kernel_slot(dtype)];
    if ((na == n || na == 1) && (nb == n || nb == 1)) { /* same shapes, or a single value */
        char *ptrs[3] = {deft_tensor_data(&out[0]), deft_tensor_data(&in[0]),
                         deft_tensor_data(&in[1])};
        const int64_t strides[3] = {1, na == n ? 1 : 0, nb == n ? 1 : 0};
        deft_flat_run(fn, NULL, 3, ptrs, strides, deft_dtype_size(out[0].dtype), n);
        return 0;
    }
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, 3);
    deft_strided_set_dense(&it, 0, &out[0]);
    deft_strided_set_broadcast(&it, 1, &in[0]);
    deft_strided_set_broadcast(&it, 2, &in[1]);
    deft_strided_run(&it, fn, NULL);
    return 0;
}

/* ---- scalar forms ---- */

typedef struct scalar_op {
    const binary_kernels_t *kernels;
    bool reversed; /* scalar is the left operand: _rminus_scalar is scalar - x */
} scalar_op_t;

/* is_int is MXNet 1.9's hint that the scalar was a Python int; the legacy
 * operators convert the scalar to the input's dtype either way, so it is
 * accepted (graphs exported by MXNet carry it) and changes nothing. */
static const deft_param_def_t scalar_params[] = {
    {"scalar", DEFT_PARAM_FLOAT, "1", "the scalar operand", NULL, false},
    {"is_int", DEFT_PARAM_BOOL, "true", "whether the scalar is an integer (no effect)", NULL,
     false},
    {0}};

static int scalar_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    if (check_kernel_dtype(op, ((const scalar_op_t *)op->data)->kernels, 0, in[0].dtype)) return -1;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* The scalar in the input's dtype (integers saturate, bool is 0 or 1), stored in `slot`. */
static void scalar_to_dtype(double value, deft_dtype_t dtype, void *slot) {
    switch (dtype) {
    case DEFT_DT_FLOAT32:
        *(float *)slot = (float)value;
        break;
    case DEFT_DT_FLOAT64:
        *(double *)slot = value;
        break;
    case DEFT_DT_INT32:
        *(int32_t *)slot = deft_to_i32(value);
        break;
    case DEFT_DT_INT64:
        *(int64_t *)slot = deft_to_i64(value);
        break;
    case DEFT_DT_FLOAT16:
        *(uint16_t *)slot = deft_float_to_half((float)value);
        break;
    case DEFT_DT_BFLOAT16:
        *(uint16_t *)slot = deft_float_to_bf16((float)value);
        break;
    case DEFT_DT_BOOL:
        *(uint8_t *)slot = value != 0;
        break;
    default:
        *(uint8_t *)slot = deft_to_u8(value);
        break;
    }
}

static int scalar_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const scalar_op_t *s = op->data;
    _Alignas(8) char scalar[8];
    deft_dtype_t dtype = in[0].dtype;
    char *data = deft_tensor_data(&in[0]);
    int64_t n = deft_shape_size(&out[0].shape);
    /* float32 below the parallel grain, the usual small value of a recorded chain: the kernel
     * called straight, without the dtype switch and the flat run (bench_graph's trigger: 31
     * instructions a node fewer, of 416). */
    if (dtype == DEFT_DT_FLOAT32 && n < 2 * DEFT_PARALLEL_GRAIN) {
        float value = (float)p[0].f;
        char *ptrs[3] = {deft_tensor_data(&out[0]), s->reversed ? (char *)&value : data,
                         s->reversed ? data : (char *)&value};
        const int64_t strides[3] = {1, !s->reversed, s->reversed};
        if (n > 0) s->kernels->fn[DEFT_SLOT_F32](NULL, ptrs, strides, n);
        return 0;
    }
    scalar_to_dtype(p[0].f, dtype, scalar);
    char *ptrs[3] = {deft_tensor_data(&out[0]), s->reversed ? scalar : data,
                     s->reversed ? data : scalar};
    const int64_t strides[3] = {1, s->reversed ? 0 : 1, s->reversed ? 1 : 0};
    if (deft_dtype_is_half(dtype)) {
        deft_half_run_flat(s->kernels->fn[DEFT_SLOT_F32], NULL, 3, ptrs, strides, dtype, n);
        return 0;
    }
    deft_flat_run(s->kernels->fn[kernel_slot(dtype)], NULL, 3, ptrs, strides,
                  deft_dtype_size(dtype), n);
    return 0;
}

#ifdef DEFT_HAVE_CUDA
static int binary_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    deft_gpu_fn_t fn = ((const binary_kernels_t *)op->data)->gpu;
    const deft_tensor_t *operands[2] = {&in[0], &in[1]};
    if (deft_gpu_check_map(op, fn, out[0].dtype)) return -1; /* bool's: no GPU kernel */
    return deft_gpu_elementwise(fn, &out[0], 2, operands, NULL);
}

static int scalar_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const scalar_op_t *s = op->data;
    const deft_tensor_t *operands[2] = {s->reversed ? NULL : &in[0], s->reversed ? &in[0] : NULL};
    double scalars[DEFT_GPU_MAX_OPS] = {0};
    scalars[s->reversed ? 1 : 2] = p[0].f;
    if (deft_gpu_check_map(op, s->kernels->gpu, out[0].dtype)) return -1;
    return deft_gpu_elementwise(s->kernels->gpu, &out[0], 2, operands, scalars);
}
#endif

/* ---- NumPy's comparisons: bool results, any dtype ---- */

#define CMP_OPS(X)                                                                                 \
    X(equal, ==) X(not_equal, !=) X(greater, >) X(greater_equal, >=) X(less, <) X(less_equal, <=)

/* The scalar side of a comparison: compared as a double (x > 2.5 on integers is
 * exact, as NumPy's promotion to float64), or as an int64 where it is one (an
 * int64 array against an integer above 2^53 stays exact). */
typedef struct cmp_scalar {
    double value;
    int64_t as_int;
    bool is_int;
} cmp_scalar_t;

#define LOAD_PLAIN(v) (v)
#define LOAD_HALF(v)  deft_half_to_float(v)
#define LOAD_BF16(v)  deft_bf16_to_float(v)
/* I64: the int64 loops, which compare an integer scalar as an int64 */
#define CMP_LOOPS(name, OP, S, T, LOAD, I64)                                                       \
    DEFT_CLONES static void cmp_##name##_##S(const void *ctx, char *const *p, const int64_t *s,    \
                                             int64_t n) {                                          \
        (void)ctx;                                                                                 \
        bool *y = (bool *)p[0];                                                                    \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        for (int64_t i = 0; i < n; i++) y[i * s[0]] = LOAD(a[i * s[1]]) OP LOAD(b[i * s[2]]);      \
    }                                                                                              \
    DEFT_CLONES static void cmps_##name##_##S(const void *ctx, char *const *p, const int64_t *s,   \
                                              int64_t n) {                                         \
        const cmp_scalar_t *c = ctx;                                                               \
        bool *y = (bool *)p[0];                                                                    \
        const T *a = (const T *)p[1];                                                              \
        if (I64 && c->is_int) {                                                                    \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = (int64_t)a[i * s[1]] OP c->as_int;       \
            return;                                                                                \
        }                                                                                          \
        const double v = c->value;                                                                 \
        for (int64_t i = 0; i < n; i++) y[i * s[0]] = (double)LOAD(a[i * s[1]]) OP v;              \
    }
#define CMP_ALL(name, OP)                                                                          \
    CMP_LOOPS(name, OP, f32, float, LOAD_PLAIN, 0)                                                 \
    CMP_LOOPS(name, OP, f64, double, LOAD_PLAIN, 0)                                                \
    CMP_LOOPS(name, OP, i32, int32_t, LOAD_PLAIN, 0)                                               \
    CMP_LOOPS(name, OP, i64, int64_t, LOAD_PLAIN, 1)                                               \
    CMP_LOOPS(name, OP, u8, uint8_t, LOAD_PLAIN, 0)                                                \
    CMP_LOOPS(name, OP, i8, int8_t, LOAD_PLAIN, 0)                                                 \
    CMP_LOOPS(name, OP, f16, uint16_t, LOAD_HALF, 0)                                               \
    CMP_LOOPS(name, OP, bf16, uint16_t, LOAD_BF16, 0)
CMP_OPS(CMP_ALL)

/* Loops by dtype code: [0] two arrays, [1] an array and a scalar. */
typedef struct cmp_kernels {
    deft_inner_fn fn[2][DEFT_DT_COUNT];
} cmp_kernels_t;

#define CMP_TABLE(P, name)                                                                         \
    {                                                                                              \
        [DEFT_DT_FLOAT32] = P##name##_f32, [DEFT_DT_FLOAT64] = P##name##_f64,                      \
        [DEFT_DT_INT32] = P##name##_i32, [DEFT_DT_INT64] = P##name##_i64,                          \
        [DEFT_DT_UINT8] = P##name##_u8, [DEFT_DT_BOOL] = P##name##_u8,                             \
        [DEFT_DT_INT8] = P##name##_i8, [DEFT_DT_FLOAT16] = P##name##_f16,                          \
        [DEFT_DT_BFLOAT16] = P##name##_bf16                                                        \
    }
#define CMP_KERNELS(name, OP)                                                                      \
    static const cmp_kernels_t kc_##name = {{CMP_TABLE(cmp_, name), CMP_TABLE(cmps_, name)}};
CMP_OPS(CMP_KERNELS)

static int cmp_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    if (deft_op_check_same_dtype(op, nin, in)) return -1;
    if (nin == 2 && deft_broadcast_shape(op, &in[0].shape, &in[1].shape, &out[0].shape)) return -1;
    if (nin == 1) out[0].shape = in[0].shape;
    out[0].dtype = DEFT_DT_BOOL;
    *nout = 1;
    return 0;
}

static int cmp_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    const cmp_kernels_t *k = op->data;
    deft_strided_t it;
    deft_strided_init(&it, &out[0].shape, nin + 1);
    deft_strided_set_dense(&it, 0, &out[0]);
    for (int i = 0; i < nin; i++) deft_strided_set_broadcast(&it, i + 1, &in[i]);
    if (nin == 2) {
        deft_strided_run(&it, k->fn[0][in[0].dtype], NULL);
        return 0;
    }
    double v = p[0].f;
    cmp_scalar_t c = {v, 0, v == trunc(v) && fabs(v) < 9.2e18};
    if (c.is_int) c.as_int = (int64_t)v;
    deft_strided_run(&it, k->fn[1][in[0].dtype], &c);
    return 0;
}

/* ---- gradients (a, b: inputs, y: output, g: output gradient) ---- */

typedef enum binary_kind {
    B_ADD,
    B_SUB,
    B_MUL,
    B_DIV,
    B_POWER,
    B_MAX,
    B_MIN,
    B_HYPOT,
    B_MOD
} binary_kind_t;

/* -floor(q): mod's derivative in its divisor, q the quotient. */
static deft_gref_t g_minus_floor(deft_grad_builder_t *b, deft_gref_t q) {
    return g_op1(b, "negative", g_op1(b, "floor", q, GRAD_NONE), GRAD_NONE);
}

/* d y / d a and d y / d b times g, at the broadcast shape. */
static void binary_terms(deft_grad_builder_t *b, binary_kind_t kind, bool broadcast,
                         deft_gref_t *ga, deft_gref_t *gb) {
    /* Each value is fetched only where its case reads it: autograd keeps
     * exactly the values a gradient fetches (an add keeps none). */
#define x b->input(b, 0)
#define z b->input(b, 1)
#define y b->output(b, 0)
    deft_gref_t g = b->out_grad(b, 0);
    const char *mul = broadcast ? "broadcast_mul" : "elemwise_mul";
    const char *div = broadcast ? "broadcast_div" : "elemwise_div";
    const char *power = broadcast ? "broadcast_power" : "_power";
    switch (kind) {
    case B_ADD:
        *ga = g, *gb = g;
        break;
    case B_SUB:
        *ga = g, *gb = g_op1(b, "negative", g, GRAD_NONE);
        break;
    case B_MUL:
        *ga = g_op2(b, mul, g, z, GRAD_NONE), *gb = g_op2(b, mul, g, x, GRAD_NONE);
        break;
    case B_DIV:
        *ga = g_op2(b, div, g, z, GRAD_NONE);
        *gb = g_op1(b, "negative", g_op2(b, div, g_op2(b, mul, g, y, GRAD_NONE), z, GRAD_NONE),
                    GRAD_NONE);
        break;
    case B_POWER: { /* a^b: b a^(b-1), and a^b ln a */
        deft_gref_t bm1 = g_op1(b, "_minus_scalar", z, GRAD_PARAMS("scalar", "1"));
        deft_gref_t d = g_op2(b, mul, z, g_op2(b, power, x, bm1, GRAD_NONE), GRAD_NONE);
        *ga = g_op2(b, mul, g, d, GRAD_NONE);
        *gb =
            g_op2(b, mul, g, g_op2(b, mul, y, g_op1(b, "log", x, GRAD_NONE), GRAD_NONE), GRAD_NONE);
        break;
    }
    case B_MAX:
    case B_MIN: { /* ties go to the left operand, as MXNet's ge / lt masks */
        static const char *const masks[2][2][2] = {
            {{"_lesser_equal", "_greater"}, {"broadcast_lesser_equal", "broadcast_greater"}},
            {{"_greater_equal", "_lesser"}, {"broadcast_greater_equal", "broadcast_lesser"}}};
        const char *const *mask = masks[kind == B_MAX][broadcast];
        *ga = g_op2(b, mul, g, g_op2(b, mask[0], x, z, GRAD_NONE), GRAD_NONE);
        *gb = g_op2(b, mul, g, g_op2(b, mask[1], x, z, GRAD_NONE), GRAD_NONE);
        break;
    }
    case B_HYPOT: /* a / y and b / y */
        *ga = g_op2(b, div, g_op2(b, mul, g, x, GRAD_NONE), y, GRAD_NONE);
        *gb = g_op2(b, div, g_op2(b, mul, g, z, GRAD_NONE), y, GRAD_NONE);
        break;
    case B_MOD: /* a - b floor(a / b): 1 and -floor(a / b), as MXNet's mod_grad, mod_rgrad */
        *ga = g;
        *gb = g_op2(b, mul, g, g_minus_floor(b, g_op2(b, div, x, z, GRAD_NONE)), GRAD_NONE);
        break;
    }
#undef x
#undef z
#undef y
}

static int binary_gradient(deft_grad_builder_t *b, binary_kind_t kind, bool broadcast,
                           deft_gref_t *in_grads) {
    deft_gref_t ga, gb;
    binary_terms(b, kind, broadcast, &ga, &gb);
    if (!broadcast) {
        in_grads[0] = ga, in_grads[1] = gb;
        return 0;
    }
    /* Sum each term back over the axes its input was broadcast along. */
    in_grads[0] = g_op2(b, "_reduce_to_like", ga, b->input(b, 0), GRAD_NONE);
    in_grads[1] = g_op2(b, "_reduce_to_like", gb, b->input(b, 1), GRAD_NONE);
    return 0;
}

#define BINARY_GRAD(name, kind, broadcast)                                                         \
    static int grad_##name(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,           \
                           deft_gref_t *in_grads) {                                                \
        (void)p, (void)nin;                                                                        \
        return binary_gradient(b, kind, broadcast, in_grads);                                      \
    }
BINARY_GRAD(broadcast_add, B_ADD, true)
BINARY_GRAD(broadcast_sub, B_SUB, true)
BINARY_GRAD(broadcast_mul, B_MUL, true)
BINARY_GRAD(broadcast_div, B_DIV, true)
BINARY_GRAD(broadcast_power, B_POWER, true)
BINARY_GRAD(broadcast_maximum, B_MAX, true)
BINARY_GRAD(broadcast_minimum, B_MIN, true)
BINARY_GRAD(broadcast_hypot, B_HYPOT, true)
BINARY_GRAD(broadcast_mod, B_MOD, true)
BINARY_GRAD(mod, B_MOD, false)
BINARY_GRAD(power, B_POWER, false)
BINARY_GRAD(maximum, B_MAX, false)
BINARY_GRAD(minimum, B_MIN, false)
BINARY_GRAD(hypot, B_HYPOT, false)
BINARY_GRAD(elemwise_add, B_ADD, false)
BINARY_GRAD(elemwise_sub, B_SUB, false)
BINARY_GRAD(elemwise_mul, B_MUL, false)
BINARY_GRAD(elemwise_div, B_DIV, false)

/* Scalar forms: s is the scalar, x the input. */
static int grad_scalar(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads, binary_kind_t kind, bool reversed) {
    (void)nin;
    deft_gref_t x = b->input(b, 0), y = b->output(b, 0), g = b->out_grad(b, 0);
    const char *s = g_attr(b, "scalar", "1");
    double v = p[0].f;
    switch (kind) {
    case B_ADD:
        in_grads[0] = g;
        break;
    case B_SUB:
        in_grads[0] = reversed ? g_op1(b, "negative", g, GRAD_NONE) : g;
        break;
    case B_MUL:
        in_grads[0] = g_op1(b, "_mul_scalar", g, GRAD_PARAMS("scalar", s));
        break;
    case B_DIV:
        in_grads[0] = reversed ? /* s/x: -y/x */
                          g_op1(b, "negative",
                                g_mul(b, g, g_op2(b, "elemwise_div", y, x, GRAD_NONE)), GRAD_NONE)
                               : g_op1(b, "_div_scalar", g, GRAD_PARAMS("scalar", s));
        break;
    case B_POWER:
        if (reversed) { /* s^x: y ln s */
            in_grads[0] = g_scale(b, g_mul(b, g, y), log(v));
        } else { /* x^s: s x^(s-1) */
            char sm1[32];
            snprintf(sm1, sizeof sm1, "%.17g", v - 1);
            in_grads[0] = g_scale(
                b, g_mul(b, g, g_op1(b, "_power_scalar", x, GRAD_PARAMS("scalar", sm1))), v);
        }
        break;
    case B_MAX:
    case B_MIN:
        in_grads[0] =
            g_mul(b, g,
                  g_op1(b, kind == B_MAX ? "_greater_equal_scalar" : "_lesser_equal_scalar", x,
                        GRAD_PARAMS("scalar", s)));
        break;
    case B_HYPOT: /* x / y */
        in_grads[0] = g_mul(b, g, g_op2(b, "elemwise_div", x, y, GRAD_NONE));
        break;
    case B_MOD: /* x mod s: 1; s mod x: -floor(s / x) */
        in_grads[0] =
            reversed
                ? g_mul(b, g,
                        g_minus_floor(b, g_op1(b, "_rdiv_scalar", x, GRAD_PARAMS("scalar", s))))
                : g;
        break;
    }
    return 0;
}

#define SCALAR_GRAD(name, kind, reversed)                                                          \
    static int grad_##name(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,           \
                           deft_gref_t *in_grads) {                                                \
        return grad_scalar(b, p, nin, in_grads, kind, reversed);                                   \
    }
SCALAR_GRAD(plus_scalar, B_ADD, false)
SCALAR_GRAD(minus_scalar, B_SUB, false)
SCALAR_GRAD(rminus_scalar, B_SUB, true)
SCALAR_GRAD(mul_scalar, B_MUL, false)
SCALAR_GRAD(div_scalar, B_DIV, false)
SCALAR_GRAD(rdiv_scalar, B_DIV, true)
SCALAR_GRAD(power_scalar, B_POWER, false)
SCALAR_GRAD(rpower_scalar, B_POWER, true)
SCALAR_GRAD(maximum_scalar, B_MAX, false)
SCALAR_GRAD(minimum_scalar, B_MIN, false)
SCALAR_GRAD(hypot_scalar, B_HYPOT, false)
SCALAR_GRAD(mod_scalar, B_MOD, false)
SCALAR_GRAD(rmod_scalar, B_MOD, true)

/* _backward_relu(g, y) is linear in g with the same mask, and piecewise
 * constant in y: nothing flows to y (relu's second derivative is 0). */
static int grad_backward_relu(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                              deft_gref_t *in_grads) {
    (void)p, (void)nin;
    in_grads[0] = g_op2(b, "_backward_relu", b->out_grad(b, 0), b->input(b, 1), GRAD_NONE);
    return 0;
}

/* ---- the table ---- */

static const char *const lhs_rhs[] = {"lhs", "rhs", NULL};

#define BROADCAST_OP(name_, k, doc, grad)                                                          \
    {                                                                                              \
        .name = "broadcast_" name_, .description = doc " with NumPy broadcasting.",                \
        .input_names = lhs_rhs, .min_inputs = 2, .max_inputs = 2, .infer = broadcast_infer,        \
        .forward = binary_forward, .forward_gpu = DEFT_GPU(binary_forward_gpu),                    \
        .inplace_input = 0, .data = &k, .gradient = grad, .elementwise = true                      \
    }
#define ELEMWISE_OP(name_, k, doc, grad) SAME_SHAPE_OP("elemwise_" name_, k, doc, grad)
#define SAME_SHAPE_OP(name_, k, doc, grad)                                                         \
    {                                                                                              \
        .name = name_, .description = doc " of two arrays of the same shape.",                     \
        .input_names = lhs_rhs, .min_inputs = 2, .max_inputs = 2, .infer = same_shape_infer,       \
        .forward = binary_forward, .forward_gpu = DEFT_GPU(binary_forward_gpu),                    \
        .inplace_input = 0, .data = &k, .infer_inputs = deft_infer_inputs_like_output,             \
        .gradient = grad, .elementwise = true                                                      \
    }
#define SCALAR_OP(name_, k, rev, doc, grad)                                                        \
    SCALAR_OP_ON(name_, k, rev, doc, grad, DEFT_GPU(scalar_forward_gpu))
#define SCALAR_OP_ON(name_, k, rev, doc, grad, gpu)                                                \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = deft_op_data_input, .min_inputs = 1,     \
        .max_inputs = 1, .params = scalar_params, .infer = scalar_infer,                           \
        .forward = scalar_forward, .forward_gpu = gpu, .inplace_input = 0,                         \
        .infer_inputs = deft_infer_inputs_like_output, .gradient = grad, .elementwise = true,      \
        .data = &(const scalar_op_t) {                                                             \
            &k, rev                                                                                \
        }                                                                                          \
    }
/* NumPy's operators (MXNet's _npi_ names); the integer-only ones have no GPU kernel. */
#define NUMPY_OP(name_, k, doc, grad, gpu)                                                         \
    {                                                                                              \
        .name = name_, .description = doc " with NumPy broadcasting.", .input_names = lhs_rhs,     \
        .min_inputs = 2, .max_inputs = 2, .infer = broadcast_infer, .forward = binary_forward,     \
        .forward_gpu = gpu, .inplace_input = 0, .data = &k, .gradient = grad, .elementwise = true  \
    }
#define INT_OP(name_, k, doc)             NUMPY_OP(name_, k, doc, deft_gradient_zero, NULL)
#define INT_SCALAR_OP(name_, k, rev, doc) SCALAR_OP_ON(name_, k, rev, doc, deft_gradient_zero, NULL)
/* Comparisons giving bool (the result's dtype differs from the inputs': no
 * in-place writes, no fusion); no GPU kernel. */
#define CMP_OP(name_, k, doc)                                                                      \
    {                                                                                              \
        .name = "_npi_" #name_, .description = doc " (a bool array), with NumPy broadcasting.",    \
        .input_names = lhs_rhs, .min_inputs = 2, .max_inputs = 2, .infer = cmp_infer,              \
        .forward = cmp_forward, .inplace_input = -1, .data = &k, .gradient = deft_gradient_zero    \
    }
#define CMP_SCALAR_OP(name_, k, doc)                                                               \
    {                                                                                              \
        .name = "_npi_" #name_ "_scalar", .description = doc " (a bool array).",                   \
        .input_names = deft_op_data_input, .min_inputs = 1, .max_inputs = 1,                       \
        .params = scalar_params, .infer = cmp_infer, .forward = cmp_forward, .inplace_input = -1,  \
        .data = &k, .gradient = deft_gradient_zero                                                 \
    }

static const deft_op_t binary_ops[] = {
    BROADCAST_OP("add", k_add, "Sum lhs + rhs", grad_broadcast_add),
    BROADCAST_OP("sub", k_sub, "Difference lhs - rhs", grad_broadcast_sub),
    BROADCAST_OP("mul", k_mul, "Product lhs * rhs", grad_broadcast_mul),
    BROADCAST_OP("div", k_div, "Quotient lhs / rhs (integers: truncated, x / 0 = 0)",
                 grad_broadcast_div),
    BROADCAST_OP("power", k_power, "Power lhs ** rhs", grad_broadcast_power),
    BROADCAST_OP("maximum", k_maximum, "Maximum (NaN wins)", grad_broadcast_maximum),
    BROADCAST_OP("minimum", k_minimum, "Minimum (NaN wins)", grad_broadcast_minimum),
    BROADCAST_OP("equal", k_equal, "1 where lhs == rhs, else 0,", deft_gradient_zero),
    BROADCAST_OP("not_equal", k_not_equal, "1 where lhs != rhs, else 0,", deft_gradient_zero),
    BROADCAST_OP("greater", k_greater, "1 where lhs > rhs, else 0,", deft_gradient_zero),
    BROADCAST_OP("greater_equal", k_greater_equal, "1 where lhs >= rhs, else 0,",
                 deft_gradient_zero),
    BROADCAST_OP("lesser", k_lesser, "1 where lhs < rhs, else 0,", deft_gradient_zero),
    BROADCAST_OP("lesser_equal", k_lesser_equal, "1 where lhs <= rhs, else 0,", deft_gradient_zero),
    BROADCAST_OP("hypot", k_hypot, "sqrt(lhs^2 + rhs^2), without overflow,", grad_broadcast_hypot),
    BROADCAST_OP("mod", k_mod, "Remainder lhs mod rhs, with the sign of rhs (x mod 0 = 0),",
                 grad_broadcast_mod),
    BROADCAST_OP("logical_and", k_logical_and, "1 where lhs and rhs are non-zero, else 0,",
                 deft_gradient_zero),
    BROADCAST_OP("logical_or", k_logical_or, "1 where lhs or rhs is non-zero, else 0,",
                 deft_gradient_zero),
    BROADCAST_OP("logical_xor", k_logical_xor, "1 where exactly one of lhs, rhs is non-zero,",
                 deft_gradient_zero),
    /* MXNet's same-shape forms behind the symbol API's maximum, power, ==, ... */
    SAME_SHAPE_OP("_maximum", k_maximum, "Maximum (NaN wins)", grad_maximum),
    SAME_SHAPE_OP("_minimum", k_minimum, "Minimum (NaN wins)", grad_minimum),
    SAME_SHAPE_OP("_power", k_power, "Power lhs ** rhs", grad_power),
    SAME_SHAPE_OP("_hypot", k_hypot, "sqrt(lhs^2 + rhs^2)", grad_hypot),
    SAME_SHAPE_OP("_mod", k_mod, "Remainder lhs mod rhs, with the sign of rhs (x mod 0 = 0),",
                  grad_mod),
    SAME_SHAPE_OP("_equal", k_equal, "1 where lhs == rhs, else 0,", deft_gradient_zero),
    SAME_SHAPE_OP("_not_equal", k_not_equal, "1 where lhs != rhs, else 0,", deft_gradient_zero),
    SAME_SHAPE_OP("_greater", k_greater, "1 where lhs > rhs, else 0,", deft_gradient_zero),
    SAME_SHAPE_OP("_greater_equal", k_greater_equal, "1 where lhs >= rhs, else 0,",
                  deft_gradient_zero),
    SAME_SHAPE_OP("_lesser", k_lesser, "1 where lhs < rhs, else 0,", deft_gradient_zero),
    SAME_SHAPE_OP("_lesser_equal", k_lesser_equal, "1 where lhs <= rhs, else 0,",
                  deft_gradient_zero),
    SAME_SHAPE_OP("_logical_and", k_logical_and, "1 where lhs and rhs are non-zero, else 0,",
                  deft_gradient_zero),
    SAME_SHAPE_OP("_logical_or", k_logical_or, "1 where lhs or rhs is non-zero, else 0,",
                  deft_gradient_zero),
    SAME_SHAPE_OP("_logical_xor", k_logical_xor, "1 where exactly one of lhs, rhs is non-zero,",
                  deft_gradient_zero),
    ELEMWISE_OP("add", k_add, "Sum", grad_elemwise_add),
    /* MXNet's name for the additions that sum gradients, each written over its first input */
    {.name = "_grad_add",
     .description = "Sum lhs + rhs of two arrays of the same shape (gradient accumulation).",
     .input_names = lhs_rhs,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = same_shape_infer,
     .forward = binary_forward,
     .forward_gpu = DEFT_GPU(binary_forward_gpu),
     .inplace_input = 0,
     .data = &k_add,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_elemwise_add,
     .elementwise = true},
    ELEMWISE_OP("sub", k_sub, "Difference", grad_elemwise_sub),
    ELEMWISE_OP("mul", k_mul, "Product", grad_elemwise_mul),
    ELEMWISE_OP("div", k_div, "Quotient", grad_elemwise_div),
    SCALAR_OP("_plus_scalar", k_add, false, "data + scalar.", grad_plus_scalar),
    SCALAR_OP("_minus_scalar", k_sub, false, "data - scalar.", grad_minus_scalar),
    SCALAR_OP("_rminus_scalar", k_sub, true, "scalar - data.", grad_rminus_scalar),
    SCALAR_OP("_mul_scalar", k_mul, false, "data * scalar.", grad_mul_scalar),
    SCALAR_OP("_div_scalar", k_div, false, "data / scalar.", grad_div_scalar),
    SCALAR_OP("_rdiv_scalar", k_div, true, "scalar / data.", grad_rdiv_scalar),
    SCALAR_OP("_power_scalar", k_power, false, "data ** scalar.", grad_power_scalar),
    SCALAR_OP("_rpower_scalar", k_power, true, "scalar ** data.", grad_rpower_scalar),
    SCALAR_OP("_maximum_scalar", k_maximum, false, "max(data, scalar), NaN wins.",
              grad_maximum_scalar),
    SCALAR_OP("_minimum_scalar", k_minimum, false, "min(data, scalar), NaN wins.",
              grad_minimum_scalar),
    SCALAR_OP("_equal_scalar", k_equal, false, "1 where data == scalar, else 0.",
              deft_gradient_zero),
    SCALAR_OP("_not_equal_scalar", k_not_equal, false, "1 where data != scalar, else 0.",
              deft_gradient_zero),
    SCALAR_OP("_greater_scalar", k_greater, false, "1 where data > scalar, else 0.",
              deft_gradient_zero),
    SCALAR_OP("_greater_equal_scalar", k_greater_equal, false, "1 where data >= scalar, else 0.",
              deft_gradient_zero),
    SCALAR_OP("_lesser_scalar", k_lesser, false, "1 where data < scalar, else 0.",
              deft_gradient_zero),
    SCALAR_OP("_lesser_equal_scalar", k_lesser_equal, false, "1 where data <= scalar, else 0.",
              deft_gradient_zero),
    SCALAR_OP("_hypot_scalar", k_hypot, false, "sqrt(data^2 + scalar^2).", grad_hypot_scalar),
    SCALAR_OP("_mod_scalar", k_mod, false,
              "data mod scalar, with the sign of scalar (x mod 0 = 0).", grad_mod_scalar),
    SCALAR_OP("_rmod_scalar", k_mod, true, "scalar mod data, with the sign of data (x mod 0 = 0).",
              grad_rmod_scalar),
    SCALAR_OP("_logical_and_scalar", k_logical_and, false,
              "1 where data and scalar are non-zero, else 0.", deft_gradient_zero),
    SCALAR_OP("_logical_or_scalar", k_logical_or, false,
              "1 where data or scalar is non-zero, else 0.", deft_gradient_zero),
    SCALAR_OP("_logical_xor_scalar", k_logical_xor, false,
              "1 where exactly one of data, scalar is non-zero, else 0.", deft_gradient_zero),
    NUMPY_OP("_npi_floor_divide", k_floor_divide,
             "Floor division lhs // rhs, Python's (integers: x // 0 = 0)", deft_gradient_zero,
             DEFT_GPU(binary_forward_gpu)),
    SCALAR_OP("_npi_floor_divide_scalar", k_floor_divide, false,
              "data // scalar, Python's floor division (integers: x // 0 = 0).",
              deft_gradient_zero),
    SCALAR_OP("_npi_rfloor_divide_scalar", k_floor_divide, true,
              "scalar // data, Python's floor division (integers: x // 0 = 0).",
              deft_gradient_zero),
    NUMPY_OP("_npi_mod", k_remainder,
             "Remainder lhs % rhs with the sign of rhs, NumPy's (floats: x % 0 = NaN; integers: 0)",
             grad_broadcast_mod, DEFT_GPU(binary_forward_gpu)),
    SCALAR_OP("_npi_mod_scalar", k_remainder, false,
              "data % scalar with the sign of scalar, NumPy's (floats: x % 0 = NaN).",
              grad_mod_scalar),
    SCALAR_OP("_npi_rmod_scalar", k_remainder, true,
              "scalar % data with the sign of data, NumPy's (floats: x % 0 = NaN).",
              grad_rmod_scalar),
    INT_OP("_npi_bitwise_and", k_bitwise_and, "Bitwise and lhs & rhs (logical for bool)"),
    INT_OP("_npi_bitwise_or", k_bitwise_or, "Bitwise or lhs | rhs (logical for bool)"),
    INT_OP("_npi_bitwise_xor", k_bitwise_xor, "Bitwise xor lhs ^ rhs (logical for bool)"),
    INT_OP("_npi_bitwise_left_shift", k_left_shift,
           "lhs << rhs (0 for a shift count below 0 or of the width or more)"),
    INT_OP("_npi_bitwise_right_shift", k_right_shift,
           "lhs >> rhs, arithmetic (a count below 0 or of the width or more gives 0 or -1)"),
    INT_SCALAR_OP("_npi_bitwise_and_scalar", k_bitwise_and, false, "data & scalar."),
    INT_SCALAR_OP("_npi_bitwise_or_scalar", k_bitwise_or, false, "data | scalar."),
    INT_SCALAR_OP("_npi_bitwise_xor_scalar", k_bitwise_xor, false, "data ^ scalar."),
    INT_SCALAR_OP("_npi_bitwise_left_shift_scalar", k_left_shift, false, "data << scalar."),
    INT_SCALAR_OP("_npi_rbitwise_left_shift_scalar", k_left_shift, true, "scalar << data."),
    INT_SCALAR_OP("_npi_bitwise_right_shift_scalar", k_right_shift, false, "data >> scalar."),
    INT_SCALAR_OP("_npi_rbitwise_right_shift_scalar", k_right_shift, true, "scalar >> data."),
    CMP_OP(equal, kc_equal, "lhs == rhs"),
    CMP_OP(not_equal, kc_not_equal, "lhs != rhs"),
    CMP_OP(greater, kc_greater, "lhs > rhs"),
    CMP_OP(greater_equal, kc_greater_equal, "lhs >= rhs"),
    CMP_OP(less, kc_less, "lhs < rhs"),
    CMP_OP(less_equal, kc_less_equal, "lhs <= rhs"),
    CMP_SCALAR_OP(equal, kc_equal, "data == scalar, compared exactly"),
    CMP_SCALAR_OP(not_equal, kc_not_equal, "data != scalar, compared exactly"),
    CMP_SCALAR_OP(greater, kc_greater, "data > scalar, compared exactly"),
    CMP_SCALAR_OP(greater_equal, kc_greater_equal, "data >= scalar, compared exactly"),
    CMP_SCALAR_OP(less, kc_less, "data < scalar, compared exactly"),
    CMP_SCALAR_OP(less_equal, kc_less_equal, "data <= scalar, compared exactly"),
    /* MXNet's backward operators of gamma and gammaln, (out_grad, input) */
    {.name = "_backward_gamma",
     .description = "The gradient of gamma: lhs * gamma(rhs) * digamma(rhs), lhs the output "
                    "gradient and rhs gamma's input.",
     .input_names = lhs_rhs,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = float_same_shape_infer,
     .forward = binary_forward,
     .forward_gpu = DEFT_GPU(binary_forward_gpu),
     .inplace_input = 0,
     .data = &k_gamma_grad,
     .infer_inputs = deft_infer_inputs_like_output,
     .elementwise = true},
    {.name = "_backward_gammaln",
     .description = "The gradient of gammaln: lhs * digamma(rhs), lhs the output gradient and rhs "
                    "gammaln's input.",
     .input_names = lhs_rhs,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = float_same_shape_infer,
     .forward = binary_forward,
     .forward_gpu = DEFT_GPU(binary_forward_gpu),
     .inplace_input = 0,
     .data = &k_gammaln_grad,
     .infer_inputs = deft_infer_inputs_like_output,
     .elementwise = true},
    /* relu's gradient, (out_grad, output), in one pass: see grad_relu (elemwise_unary.c) */
    {.name = "_backward_relu",
     .description = "The gradient of relu: lhs where rhs > 0, NaN where rhs is NaN, else lhs * 0; "
                    "lhs the output gradient and rhs relu's output (or input).",
     .input_names = lhs_rhs,
     .min_inputs = 2,
     .max_inputs = 2,
     .infer = same_shape_infer,
     .forward = binary_forward,
     .forward_gpu = DEFT_GPU(binary_forward_gpu),
     .inplace_input = 0,
     .data = &k_relu_grad,
     .infer_inputs = deft_infer_inputs_like_output,
     .gradient = grad_backward_relu,
     .elementwise = true},
};

DEFT_OP_FAMILY(deft_family_binary, binary_ops);
