/*
 * The GPU backend.
 *
 * Everywhere: the index arithmetic the GPU kernels share with the CPU
 * iteration (gpu_index.h) against independent loops, the device queries'
 * errors, and that every operator with a GPU kernel has a case in the table
 * below or in tests/gpu_cases/<family>.inc (so a kernel cannot land untested). Where a GPU is
 * present: every GPU kernel against the CPU kernel on random data, copies between devices, a graph
 * spanning both devices forward and backward, autograd on the GPU, and the allocator's statistics.
 * Without a GPU those print "skipped: no GPU" with the reason, and only the first part runs.
 */
#include <cjson/cJSON.h>
#ifdef DEFT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fence.h"
#include "core/gpu/gpu_index.h"
#include "core/op/fused.h"
#include "core/op/op.h"
#include "core/op/registry.h"
#include "core/op/strided.h"
#include "symbol_helpers.h"
#include <deft/dlpack.h>

/* ---- everywhere: shared index arithmetic ---- */

/* Offsets of element i of a broadcast binary map, from the multi-index. */
static void naive_offsets(int ndim, const int64_t *out, const int64_t *a, const int64_t *b,
                          int64_t i, int64_t *off) {
    int64_t idx[DEFT_MAX_NDIM], sa = 1, sb = 1;
    for (int d = ndim - 1; d >= 0; d--) idx[d] = i % out[d], i /= out[d];
    off[0] = off[1] = off[2] = 0;
    for (int d = ndim - 1, so = 1; d >= 0; d--) {
        off[0] += idx[d] * so, so *= (int)out[d];
        off[1] += (a[d] == 1 ? 0 : idx[d]) * sa, sa *= a[d];
        off[2] += (b[d] == 1 ? 0 : idx[d]) * sb, sb *= b[d];
    }
}

START_TEST(test_map_offsets_follow_broadcasting) {
    static const struct {
        int64_t out[4], a[4], b[4];
    } cases[] = {{{2, 3, 4, 5}, {2, 3, 4, 5}, {1, 1, 1, 1}},
                 {{2, 3, 4, 5}, {2, 1, 4, 1}, {1, 3, 1, 5}},
                 {{7, 1, 3, 2}, {7, 1, 1, 2}, {1, 1, 3, 1}},
                 {{1, 1, 1, 9}, {1, 1, 1, 9}, {1, 1, 1, 9}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        deft_storage_t none = {.data = NULL}; /* offsets only: no data is touched */
        deft_tensor_t t[3] = {{.shape = {4, {0}}, .dtype = DEFT_DT_FLOAT32, .storage = &none},
                              {.shape = {4, {0}}, .dtype = DEFT_DT_FLOAT32, .storage = &none},
                              {.shape = {4, {0}}, .dtype = DEFT_DT_FLOAT32, .storage = &none}};
        for (int d = 0; d < 4; d++)
            t[0].shape.dims[d] = cases[c].out[d], t[1].shape.dims[d] = cases[c].a[d],
            t[2].shape.dims[d] = cases[c].b[d];
        deft_strided_t it;
        deft_strided_init(&it, &t[0].shape, 3);
        for (int k = 0; k < 3; k++) {
            if (k == 0)
                deft_strided_set_dense(&it, 0, &t[0]);
            else
                deft_strided_set_broadcast(&it, k, &t[k]);
        }
        const deft_dtype_t dtypes[3] = {DEFT_DT_FLOAT32, DEFT_DT_FLOAT32, DEFT_DT_FLOAT32};
        deft_gpu_map_t map;
        deft_strided_to_gpu_map(&it, DEFT_GPU_FN_add, dtypes, NULL, &map);
        int64_t size = count_of(4, cases[c].out);
        ck_assert_int_eq(map.size, size);
        ck_assert_int_le(map.ndim, 4); /* merged where contiguous */
        for (int64_t i = 0; i < size; i++) {
            int64_t got[DEFT_GPU_MAX_OPS], want[3];
            deft_gpu_offsets(&map, map.nops, i, got);
            naive_offsets(4, cases[c].out, cases[c].a, cases[c].b, i, want);
            for (int k = 0; k < 3; k++)
                ck_assert_msg(got[k] == want[k], "case %zu, element %lld, operand %d: %lld vs %lld",
                              c, (long long)i, k, (long long)got[k], (long long)want[k]);
        }
    }
}
END_TEST

START_TEST(test_reduce_offsets_visit_each_element_once) {
    /* a (3, 4, 5) array reduced over axes 0 and 2: kept axis 1 first */
    deft_gpu_reduce_t r = {.ndim = 3, .nkept = 1, .outer = 4, .span = 15};
    const int64_t dims[3] = {4, 3, 5}, strides[3] = {5, 20, 1};
    for (int d = 0; d < 3; d++) r.dims[d] = dims[d], r.strides[d] = strides[d];
    int seen[60] = {0};
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t j = 0; j < r.span; j++) {
            int64_t off = deft_gpu_reduce_offset(&r, o, j);
            ck_assert_int_lt(off, 60);
            ck_assert_int_eq((off / 5) % 4, o); /* the element's axis-1 index is the result's */
            seen[off]++;
        }
    for (int e = 0; e < 60; e++) ck_assert_int_eq(seen[e], 1);
}
END_TEST

START_TEST(test_device_queries_without_such_gpu) {
    int count = -1;
    ck_assert_ok(DeftGetGPUCount(&count));
    ck_assert_int_ge(count, 0);
    const char *name = NULL;
    size_t free_bytes, total_bytes;
    ck_assert_fails(DeftGetGPUName(count, &name),
                    count ? DEFT_ERROR_INDEX : DEFT_ERROR_NOT_IMPLEMENTED, "dev_id is gpu(");
    ck_assert_fails(DeftGetGPUMemoryInfo(-1, &free_bytes, &total_bytes),
                    count ? DEFT_ERROR_INDEX : DEFT_ERROR_NOT_IMPLEMENTED, "dev_id is gpu(-1)");
    ck_assert_fails(DeftGetGPUCount(NULL), DEFT_ERROR_VALUE, "out");
    DeftNDArrayHandle h = NULL;
    ck_assert_fails(DeftNDArrayCreate(SHAPE(2), 1, DEFT_FLOAT32, DEFT_GPU, count, &h),
                    count ? DEFT_ERROR_INDEX : DEFT_ERROR_NOT_IMPLEMENTED, "gpu(");
    ck_assert_ptr_null(h);
    /* Page-locked memory is for GPU copies: without a GPU, a clear refusal. */
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3)), pinned = NULL;
    int is_pinned = -1;
    ck_assert_ok(DeftNDArrayIsPinned(x, &is_pinned));
    ck_assert_int_eq(is_pinned, 0);
    if (count == 0)
        ck_assert_fails(DeftNDArrayPinMemory(x, &pinned), DEFT_ERROR_NOT_IMPLEMENTED,
                        "page-locked host memory needs");
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

#ifdef DEFT_HAVE_CUDA
/* float16 and bfloat16 maps run every function float32 has (in float32). */
START_TEST(test_half_maps_have_every_float_function) {
    for (int fn = 0; fn < DEFT_GPU_FN_COUNT; fn++) {
        if (!deft_gpu_map_supports((deft_gpu_fn_t)fn, DEFT_DT_FLOAT32)) continue;
        const char *name = deft_gpu_fn_name((deft_gpu_fn_t)fn);
        ck_assert_msg(deft_gpu_map_supports((deft_gpu_fn_t)fn, DEFT_DT_FLOAT16), "float16 %s",
                      name);
        ck_assert_msg(deft_gpu_map_supports((deft_gpu_fn_t)fn, DEFT_DT_BFLOAT16), "bfloat16 %s",
                      name);
    }
    ck_assert_str_eq(deft_gpu_fn_name(DEFT_GPU_FN_exp), "exp");
    ck_assert_str_eq(deft_gpu_fn_name(DEFT_GPU_FN_remainder), "remainder");
    ck_assert_str_eq(deft_gpu_fn_name(DEFT_GPU_FN_WHERE), "where");
}
END_TEST

/* A dtype that an operator takes but the GPU maps have no kernel for (bool
 * for logical_not and maximum, int8 for where) fails before anything is
 * launched, naming the operator and the dtype: no GPU is needed to see it. */
START_TEST(test_gpu_maps_refuse_a_dtype_naming_the_operator) {
    static const struct {
        const char *op;
        int nin;
        deft_dtype_t dtype, out_dtype;
        const char *text;
    } cases[] = {
        {"logical_not", 1, DEFT_DT_BOOL, DEFT_DT_BOOL, "'logical_not': has no GPU kernel for bool"},
        {"broadcast_maximum", 2, DEFT_DT_BOOL, DEFT_DT_BOOL,
         "'broadcast_maximum': has no GPU kernel for bool (its function maximum)"},
        {"where", 3, DEFT_DT_INT8, DEFT_DT_INT8, "'where': has no GPU kernel for int8"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        deft_storage_t none = {.data = NULL}; /* refused before any data is touched */
        deft_tensor_t in[3],
            out = {.shape = {1, {4}}, .dtype = cases[c].out_dtype, .storage = &none};
        for (int i = 0; i < 3; i++) in[i] = out, in[i].dtype = cases[c].dtype;
        const deft_op_t *op = deft_registry_find(cases[c].op)->op;
        ck_assert_fails(op->forward_gpu(op, NULL, cases[c].nin, in, 1, &out),
                        DEFT_ERROR_NOT_IMPLEMENTED, cases[c].text);
    }
}
END_TEST
#endif

/* ---- the kernel table: one case or more per operator with a GPU kernel ---- */

typedef struct input_spec {
    int ndim;
    int64_t shape[5];
    int dtype;
    double low, high; /* uniform values in [low, high), rounded down for integer dtypes */
} input_spec_t;

#define IN(dtype, low, high, ...)                                                                  \
    { (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}, dtype, low, high }
#define IN0(dtype, low, high)                                                                      \
    { 0, {0}, dtype, low, high }
#define F32(...)    IN(DEFT_FLOAT32, -2, 2, __VA_ARGS__)
#define F64(...)    IN(DEFT_FLOAT64, -2, 2, __VA_ARGS__)
#define F16(...)    IN(DEFT_FLOAT16, -2, 2, __VA_ARGS__)
#define BF16(...)   IN(DEFT_BFLOAT16, -2, 2, __VA_ARGS__)
#define POS(...)    IN(DEFT_FLOAT32, 0.25, 3, __VA_ARGS__)
#define I32(...)    IN(DEFT_INT32, -20, 20, __VA_ARGS__)
#define IDX(n, ...) IN(DEFT_INT64, 0, n, __VA_ARGS__)

typedef struct gpu_case {
    const char *op;
    int nin;
    input_spec_t in[6];
    const char *params[12]; /* key, value, ..., NULL */
    double tol;             /* relative, for float32 results (float64: tol * 1e-6) */
} gpu_case_t;

#define EXACT   0
#define ROUNDED 1e-6 /* the same formula: the device's libm may differ in the last bits */
#define SUMMED  2e-5 /* sums in another order */
#define HALF    1e-2 /* float16 / bfloat16 results: float32 sums in another order, rounded */
/* float16 / bfloat16 results of the same formula, rounded once from float32
 * (or double): a last-bit difference of the device's libm, or of a sum in
 * another order, may move them by one unit in the last place, which these
 * cover (close_enough allows tol (1 + |want|); an ulp is at most 2^-10 |want|
 * for float16, 2^-7 |want| for bfloat16). Results computed exactly before
 * the one rounding (+ - * /, comparisons, float16 sums in double) are EXACT. */
#define F16_ULP  1e-3
#define BF16_ULP 8e-3

static const gpu_case_t cases[] = {
    /* elementwise unary, over the shared scalar math */
    {"negative", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"negative", 1, {I32(3, 4)}, {NULL}, EXACT},
    {"abs", 1, {F64(3, 4)}, {NULL}, EXACT},
    {"abs", 1, {I32(7)}, {NULL}, EXACT},
    {"sign", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"sign", 1, {IN(DEFT_UINT8, 0, 3, 5)}, {NULL}, EXACT},
    {"exp", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"exp", 1, {F64(3, 4)}, {NULL}, ROUNDED},
    {"log", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"sqrt", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"square", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"square", 1, {IN(DEFT_INT64, -9, 9, 6)}, {NULL}, EXACT},
    {"rsqrt", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"sin", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"cos", 1, {F64(3, 4)}, {NULL}, ROUNDED},
    {"tanh", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"sigmoid", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"relu", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"relu", 1, {I32(3, 4)}, {NULL}, EXACT},
    {"softrelu", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"erf", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"gelu", 1, {F64(3, 4)}, {NULL}, ROUNDED},
    {"Activation", 1, {F32(2, 5)}, {"act_type", "tanh", NULL}, ROUNDED},
    {"Activation", 1, {F32(2, 5)}, {"act_type", "relu", NULL}, EXACT},
    {"clip", 1, {F32(4, 4)}, {"a_min", "-0.5", "a_max", "1", NULL}, EXACT},
    {"clip", 1, {I32(9)}, {"a_min", "-3", "a_max", "4.5", NULL}, EXACT},
    /* binary, broadcasting and not, and scalar forms */
    {"broadcast_add", 2, {F32(2, 3, 4), F32(3, 1)}, {NULL}, EXACT},
    {"broadcast_add", 2, {I32(2, 3), I32(2, 1)}, {NULL}, EXACT},
    {"broadcast_sub", 2, {F64(2, 3, 4), F64(4)}, {NULL}, EXACT},
    {"broadcast_mul", 2, {F32(2, 1, 4), F32(3, 1)}, {NULL}, EXACT},
    {"broadcast_div", 2, {F32(2, 3), POS(1, 3)}, {NULL}, EXACT},
    {"broadcast_div", 2, {I32(2, 3), IN(DEFT_INT32, -3, 3, 3)}, {NULL}, EXACT},
    {"broadcast_power", 2, {POS(2, 3), F32(3)}, {NULL}, ROUNDED},
    {"broadcast_power", 2, {IN(DEFT_INT64, -3, 4, 2, 3), IN(DEFT_INT64, 0, 4, 3)}, {NULL}, EXACT},
    {"broadcast_maximum", 2, {F32(2, 3), F32(2, 1)}, {NULL}, EXACT},
    {"broadcast_minimum", 2, {I32(2, 3), I32(3)}, {NULL}, EXACT},
    {"broadcast_equal",
     2,
     {IN(DEFT_FLOAT32, 0, 3, 4, 3), IN(DEFT_FLOAT32, 0, 3, 3)},
     {NULL},
     EXACT},
    {"broadcast_not_equal", 2, {I32(4, 3), IN(DEFT_INT32, -1, 1, 3)}, {NULL}, EXACT},
    {"broadcast_greater", 2, {F32(4, 3), F32(3)}, {NULL}, EXACT},
    {"broadcast_greater_equal", 2, {F64(4, 3), F64(4, 1)}, {NULL}, EXACT},
    {"broadcast_lesser", 2, {IN(DEFT_UINT8, 0, 9, 4, 3), IN(DEFT_UINT8, 0, 9, 3)}, {NULL}, EXACT},
    {"broadcast_lesser_equal", 2, {F32(4, 3), F32(4, 3)}, {NULL}, EXACT},
    {"elemwise_add", 2, {F32(3, 5), F32(3, 5)}, {NULL}, EXACT},
    {"elemwise_sub", 2, {I32(3, 5), I32(3, 5)}, {NULL}, EXACT},
    {"elemwise_mul", 2, {F64(3, 5), F64(3, 5)}, {NULL}, EXACT},
    {"elemwise_div", 2, {F32(3, 5), POS(3, 5)}, {NULL}, EXACT},
    {"_grad_add", 2, {F32(3, 5), F32(3, 5)}, {NULL}, EXACT},
    {"_plus_scalar", 1, {F32(3, 4)}, {"scalar", "1.5", NULL}, EXACT},
    {"_plus_scalar", 1, {IN(DEFT_UINT8, 0, 200, 5)}, {"scalar", "300", NULL}, EXACT},
    {"_minus_scalar", 1, {I32(3, 4)}, {"scalar", "2", NULL}, EXACT},
    {"_rminus_scalar", 1, {F32(3, 4)}, {"scalar", "2", NULL}, EXACT},
    {"_mul_scalar", 1, {F64(3, 4)}, {"scalar", "-3", NULL}, EXACT},
    {"_div_scalar", 1, {F32(3, 4)}, {"scalar", "4", NULL}, EXACT},
    {"_rdiv_scalar", 1, {POS(3, 4)}, {"scalar", "2", NULL}, EXACT},
    {"_power_scalar", 1, {POS(3, 4)}, {"scalar", "2.5", NULL}, ROUNDED},
    {"_rpower_scalar", 1, {F32(3, 4)}, {"scalar", "2", NULL}, ROUNDED},
    {"_maximum_scalar", 1, {F32(3, 4)}, {"scalar", "0.5", NULL}, EXACT},
    {"_minimum_scalar", 1, {I32(3, 4)}, {"scalar", "3", NULL}, EXACT},
    {"_equal_scalar", 1, {IN(DEFT_INT32, 0, 3, 6)}, {"scalar", "1", NULL}, EXACT},
    {"_not_equal_scalar", 1, {IN(DEFT_INT32, 0, 3, 6)}, {"scalar", "1", NULL}, EXACT},
    {"_greater_scalar", 1, {F32(6)}, {"scalar", "0", NULL}, EXACT},
    {"_greater_equal_scalar", 1, {F32(6)}, {"scalar", "0", NULL}, EXACT},
    {"_lesser_scalar", 1, {F32(6)}, {"scalar", "0", NULL}, EXACT},
    {"_lesser_equal_scalar", 1, {F32(6)}, {"scalar", "0", NULL}, EXACT},
    {"where", 3, {IN(DEFT_INT32, 0, 2, 3, 1), F32(3, 4), F32(4)}, {NULL}, EXACT},
    {"add_n", 3, {F32(2, 3), F32(2, 3), F32(2, 3)}, {NULL}, EXACT},
    {"ElementWiseSum", 5, {F64(4), F64(4), F64(4), F64(4), F64(4)}, {NULL}, EXACT},
    /* conversions and copies */
    {"Cast", 1, {IN(DEFT_FLOAT32, -300, 300, 3, 4)}, {"dtype", "int32", NULL}, EXACT},
    {"Cast", 1, {IN(DEFT_FLOAT32, -300, 300, 3, 4)}, {"dtype", "uint8", NULL}, EXACT},
    {"cast", 1, {IN(DEFT_INT64, -9, 9, 5)}, {"dtype", "float64", NULL}, EXACT},
    {"Cast", 1, {F64(5)}, {"dtype", "int8", NULL}, EXACT},
    {"_cast_like", 2, {F64(2, 3), IN(DEFT_FLOAT32, 0, 1, 1)}, {NULL}, EXACT},
    {"_copyto", 1, {F32(3, 3)}, {NULL}, EXACT},
    {"_copy_to_device", 1, {I32(2, 2)}, {"device", "gpu(0)", NULL}, EXACT},
    {"zeros_like", 1, {F32(2, 3)}, {NULL}, EXACT},
    {"ones_like", 1, {I32(2, 3)}, {NULL}, EXACT},
    /* shapes */
    {"Reshape", 1, {F32(2, 3, 4)}, {"shape", "(4,-1)", NULL}, EXACT},
    {"_np_reshape", 1, {F32(2, 3, 4)}, {"newshape", "(4,-1)", NULL}, EXACT},
    {"BlockGrad", 1, {I32(2, 3)}, {NULL}, EXACT},
    {"_copy", 1, {I32(2, 3)}, {NULL}, EXACT},
    {"Flatten", 1, {F32(2, 3, 4)}, {NULL}, EXACT},
    {"expand_dims", 1, {F32(2, 3)}, {"axis", "1", NULL}, EXACT},
    {"squeeze", 1, {F32(2, 1, 3)}, {NULL}, EXACT},
    {"reshape_like", 2, {F32(2, 6), F32(3, 4)}, {NULL}, EXACT},
    {"transpose", 1, {F32(2, 3, 4)}, {"axes", "(2,0,1)", NULL}, EXACT},
    {"transpose", 1, {IN(DEFT_UINT8, 0, 9, 5, 7)}, {NULL}, EXACT},
    {"slice",
     1,
     {F32(5, 6)},
     {"begin", "(1,None)", "end", "(4,None)", "step", "(2,-2)", NULL},
     EXACT},
    {"slice_axis", 1, {F64(5, 6)}, {"axis", "1", "begin", "1", "end", "-1", NULL}, EXACT},
    {"_slice_assign", 2, {F32(4, 5), F32(2, 1)}, {"begin", "(1,0)", "end", "(3,5)", NULL}, EXACT},
    {"_backward_slice", 2, {F32(2, 3), F32(4, 5)}, {"begin", "(1,1)", "end", "(3,4)", NULL}, EXACT},
    {"_backward_slice_axis",
     2,
     {F32(4, 2), F32(4, 5)},
     {"axis", "1", "begin", "2", "end", "4", NULL},
     EXACT},
    {"Concat", 2, {F32(2, 3), F32(2, 2)}, {"dim", "1", NULL}, EXACT},
    {"stack", 3, {I32(2, 3), I32(2, 3), I32(2, 3)}, {"axis", "1", NULL}, EXACT},
    {"split", 1, {F32(2, 6)}, {"num_outputs", "3", "axis", "1", NULL}, EXACT},
    {"_split_like", 3, {F32(2, 5), F32(2, 2), F32(2, 3)}, {"dim", "1", NULL}, EXACT},
    {"broadcast_to", 1, {F32(3, 1)}, {"shape", "(2,3,4)", NULL}, EXACT},
    {"broadcast_like", 2, {F32(1, 4), F32(3, 4)}, {NULL}, EXACT},
    /* reductions */
    {"sum", 1, {F32(3, 4, 5)}, {"axis", "(0,2)", NULL}, SUMMED},
    {"sum", 1, {I32(3, 50)}, {"axis", "1", NULL}, EXACT},
    {"sum", 1, {F64(300, 7)}, {NULL}, SUMMED},
    {"mean", 1, {F32(3, 4, 5)}, {"axis", "1", "keepdims", "true", NULL}, SUMMED},
    {"prod", 1, {IN(DEFT_FLOAT64, 0.5, 1.5, 4, 6)}, {"axis", "0", NULL}, SUMMED},
    {"max", 1, {F32(4, 100)}, {"axis", "1", NULL}, EXACT},
    {"min", 1, {I32(4, 5)}, {"axis", "0", NULL}, EXACT},
    {"norm", 1, {F32(3, 4)}, {NULL}, SUMMED},
    {"norm", 1, {F64(3, 4)}, {"ord", "1", "axis", "(1,)", NULL}, SUMMED},
    {"argmax", 1, {IN(DEFT_FLOAT32, 0, 4, 5, 40)}, {"axis", "1", NULL}, EXACT},
    {"argmin", 1, {IN(DEFT_INT32, 0, 3, 6, 4)}, {"axis", "0", NULL}, EXACT},
    {"_broadcast_reduced",
     2,
     {F32(3, 1), F32(3, 4)},
     {"axis", "1", "keepdims", "true", "mean", "true", NULL},
     ROUNDED},
    {"_reduce_to_like", 2, {F32(2, 3, 4), F32(3, 1)}, {NULL}, SUMMED},
    /* softmax and the loss */
    {"softmax", 1, {F32(4, 7)}, {NULL}, ROUNDED},
    {"softmax", 1, {F64(4, 3, 5)}, {"axis", "1", NULL}, ROUNDED},
    {"log_softmax", 1, {F32(4, 7)}, {NULL}, ROUNDED},
    {"softmax", 1, {F16(4, 7)}, {NULL}, HALF},
    {"log_softmax", 1, {BF16(4, 7)}, {NULL}, HALF},
    {"softmax_cross_entropy", 2, {F32(6, 5), IDX(5, 6)}, {NULL}, SUMMED},
    {"_backward_softmax_cross_entropy",
     3,
     {IN(DEFT_FLOAT32, 0.5, 2, 1), F32(6, 5), IDX(5, 6)},
     {NULL},
     ROUNDED},
    /* matrix products */
    {"dot", 2, {F32(3, 4), F32(4, 5)}, {NULL}, SUMMED},
    {"dot",
     2,
     {F64(4, 3), F64(5, 4)},
     {"transpose_a", "true", "transpose_b", "true", NULL},
     SUMMED},
    {"batch_dot", 2, {F32(2, 3, 4), F32(2, 5, 4)}, {"transpose_b", "true", NULL}, SUMMED},
    /* half products: cuBLAS's float32-accumulating path against the CPU's widened sgemm */
    {"dot", 2, {F16(3, 4), F16(4, 5)}, {NULL}, HALF},
    {"batch_dot", 2, {BF16(2, 3, 4), BF16(2, 5, 4)}, {"transpose_b", "true", NULL}, HALF},
    {"FullyConnected", 3, {BF16(4, 5), BF16(3, 5), BF16(3)}, {"num_hidden", "3", NULL}, HALF},
    {"FullyConnected", 3, {F32(4, 5), F32(3, 5), F32(3)}, {"num_hidden", "3", NULL}, SUMMED},
    {"FullyConnected",
     2,
     {F32(2, 3, 5), F32(4, 5)},
     {"num_hidden", "4", "no_bias", "true", "flatten", "false", NULL},
     SUMMED},
    {"_backward_dot_lhs", 3, {F32(3, 5), F32(3, 4), F32(4, 5)}, {NULL}, SUMMED},
    {"_backward_dot_rhs",
     3,
     {F32(3, 5), F32(4, 3), F32(4, 5)},
     {"transpose_a", "true", NULL},
     SUMMED},
    {"_backward_batch_dot_lhs",
     3,
     {F32(2, 3, 5), F32(2, 3, 4), F32(2, 5, 4)},
     {"transpose_b", "true", NULL},
     SUMMED},
    {"_backward_batch_dot_rhs", 3, {F32(2, 3, 5), F32(2, 3, 4), F32(2, 4, 5)}, {NULL}, SUMMED},
    /* indexing */
    {"take", 2, {F32(5, 3), IDX(5, 4)}, {NULL}, EXACT},
    {"take",
     2,
     {I32(2, 6), IN(DEFT_INT32, -8, 8, 3, 2)},
     {"axis", "1", "mode", "wrap", NULL},
     EXACT},
    {"_backward_take", 3, {F32(4, 3), IDX(5, 4), F32(5, 3)}, {NULL}, SUMMED},
    {"one_hot", 1, {IN(DEFT_INT32, -1, 6, 7)}, {"depth", "5", NULL}, EXACT},
    /* creation (on the GPU through ctx) */
    {"_zeros", 0, {{0}}, {"shape", "(3,4)", NULL}, EXACT},
    {"_ones", 0, {{0}}, {"shape", "(5,)", "dtype", "int64", NULL}, EXACT},
    {"_full", 0, {{0}}, {"shape", "(2,2)", "value", "-2.5", "dtype", "float64", NULL}, EXACT},
    {"_arange", 0, {{0}}, {"start", "1", "stop", "9", "step", "1.5", "repeat", "2", NULL}, EXACT},
    {"_random_uniform", 0, {{0}}, {"shape", "(7,9)", "low", "-1", "high", "3", NULL}, EXACT},
    {"_random_uniform", 0, {{0}}, {"shape", "(5,)", "dtype", "float64", NULL}, EXACT},
    {"_random_normal", 0, {{0}}, {"shape", "(4,5)", "loc", "1", "scale", "2", NULL}, ROUNDED},
    /* math operators (unary functions, same-shape forms, nan reductions, softmax variants,
     * LeakyReLU) */
    {"softsign", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"log1p", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"expm1", 1, {F64(3, 4)}, {NULL}, ROUNDED},
    {"log2", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"log10", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"reciprocal", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"cbrt", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"rcbrt", 1, {POS(3, 4)}, {NULL}, ROUNDED},
    {"tan", 1, {IN(DEFT_FLOAT32, -1, 1, 3, 4)}, {NULL}, ROUNDED},
    {"arcsin", 1, {IN(DEFT_FLOAT32, -0.9, 0.9, 3, 4)}, {NULL}, ROUNDED},
    {"arccos", 1, {IN(DEFT_FLOAT64, -0.9, 0.9, 3, 4)}, {NULL}, ROUNDED},
    {"arctan", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"sinh", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"cosh", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"arcsinh", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"arccosh", 1, {IN(DEFT_FLOAT32, 1.5, 4, 3, 4)}, {NULL}, ROUNDED},
    {"arctanh", 1, {IN(DEFT_FLOAT32, -0.9, 0.9, 3, 4)}, {NULL}, ROUNDED},
    {"degrees", 1, {F32(3, 4)}, {NULL}, ROUNDED},
    {"radians", 1, {F64(3, 4)}, {NULL}, ROUNDED},
    {"round", 1, {IN(DEFT_FLOAT32, -9, 9, 3, 4)}, {NULL}, EXACT},
    {"rint", 1, {IN(DEFT_FLOAT32, -9, 9, 3, 4)}, {NULL}, EXACT},
    {"ceil", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"floor", 1, {F64(3, 4)}, {NULL}, EXACT},
    {"trunc", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"fix", 1, {F32(3, 4)}, {NULL}, EXACT},
    {"logical_not", 1, {IN(DEFT_INT32, -2, 2, 7)}, {NULL}, EXACT},
    {"logical_not", 1, {IN(DEFT_FLOAT32, -1, 1, 7)}, {NULL}, EXACT},
    {"Activation", 1, {F32(2, 5)}, {"act_type", "softsign", NULL}, ROUNDED},
    {"_maximum", 2, {F32(3, 4), F32(3, 4)}, {NULL}, EXACT},
    {"_minimum", 2, {I32(3, 4), I32(3, 4)}, {NULL}, EXACT},
    {"_power", 2, {POS(3, 4), F32(3, 4)}, {NULL}, ROUNDED},
    {"_hypot", 2, {F32(3, 4), F32(3, 4)}, {NULL}, ROUNDED},
    {"_hypot", 2, {I32(3, 4), I32(3, 4)}, {NULL}, EXACT},
    {"_equal", 2, {IN(DEFT_INT32, 0, 2, 6), IN(DEFT_INT32, 0, 2, 6)}, {NULL}, EXACT},
    {"_not_equal", 2, {IN(DEFT_FLOAT32, 0, 2, 6), IN(DEFT_FLOAT32, 0, 2, 6)}, {NULL}, EXACT},
    {"_greater", 2, {F32(6), F32(6)}, {NULL}, EXACT},
    {"_greater_equal", 2, {F64(6), F64(6)}, {NULL}, EXACT},
    {"_lesser", 2, {I32(6), I32(6)}, {NULL}, EXACT},
    {"_lesser_equal", 2, {F32(6), F32(6)}, {NULL}, EXACT},
    {"_logical_and", 2, {IN(DEFT_INT32, 0, 2, 6), IN(DEFT_INT32, 0, 2, 6)}, {NULL}, EXACT},
    {"_logical_or", 2, {IN(DEFT_UINT8, 0, 2, 6), IN(DEFT_UINT8, 0, 2, 6)}, {NULL}, EXACT},
    {"_logical_xor", 2, {IN(DEFT_FLOAT32, 0, 2, 6), IN(DEFT_FLOAT32, 0, 2, 6)}, {NULL}, EXACT},
    {"broadcast_hypot", 2, {F32(2, 3), F32(3)}, {NULL}, ROUNDED},
    {"broadcast_logical_and",
     2,
     {IN(DEFT_INT32, 0, 2, 2, 3), IN(DEFT_INT32, 0, 2, 3)},
     {NULL},
     EXACT},
    {"broadcast_logical_or",
     2,
     {IN(DEFT_INT64, 0, 2, 2, 3), IN(DEFT_INT64, 0, 2, 2, 1)},
     {NULL},
     EXACT},
    {"broadcast_logical_xor",
     2,
     {IN(DEFT_FLOAT64, 0, 2, 2, 3), IN(DEFT_FLOAT64, 0, 2, 3)},
     {NULL},
     EXACT},
    {"_hypot_scalar", 1, {F32(3, 4)}, {"scalar", "1.5", NULL}, ROUNDED},
    {"_logical_and_scalar", 1, {IN(DEFT_INT32, 0, 2, 6)}, {"scalar", "1", NULL}, EXACT},
    {"_logical_or_scalar", 1, {IN(DEFT_INT32, 0, 2, 6)}, {"scalar", "0", NULL}, EXACT},
    {"_logical_xor_scalar", 1, {IN(DEFT_FLOAT32, 0, 2, 6)}, {"scalar", "1", NULL}, EXACT},
    {"nansum", 1, {F32(3, 4, 5)}, {"axis", "(0,2)", NULL}, SUMMED},
    {"nanprod", 1, {IN(DEFT_FLOAT64, 0.5, 1.5, 4, 6)}, {"axis", "1", NULL}, SUMMED},
    {"softmax", 1, {F32(4, 7)}, {"temperature", "2.5", NULL}, ROUNDED},
    {"softmax", 2, {F32(4, 7), IN(DEFT_INT32, 0, 8, 4)}, {"use_length", "True", NULL}, ROUNDED},
    {"log_softmax",
     2,
     {F64(3, 4, 2), IN(DEFT_INT64, 0, 5, 3, 2)},
     {"axis", "1", "use_length", "True", "temperature", "0.5", NULL},
     ROUNDED},
    {"softmax", 1, {F32(4, 7)}, {"dtype", "float64", NULL}, ROUNDED},
    {"softmin", 1, {F32(4, 3, 5)}, {"axis", "1", NULL}, ROUNDED},
    {"SoftmaxActivation", 1, {F32(2, 3, 4)}, {"mode", "channel", NULL}, ROUNDED},
    {"SoftmaxActivation", 1, {F32(4, 7)}, {NULL}, ROUNDED},
    {"LeakyReLU", 1, {F32(3, 4)}, {"slope", "0.1", NULL}, EXACT},
    {"LeakyReLU", 1, {F32(3, 4)}, {"act_type", "elu", NULL}, ROUNDED},
    {"LeakyReLU", 1, {F64(3, 4)}, {"act_type", "selu", NULL}, ROUNDED},
    {"LeakyReLU", 1, {F32(3, 4)}, {"act_type", "gelu", NULL}, ROUNDED},
    {"LeakyReLU", 1, {F32(3, 4)}, {"act_type", "rrelu", NULL}, EXACT},
    {"LeakyReLU", 2, {F32(2, 3, 4), F32(3)}, {"act_type", "prelu", NULL}, EXACT},
    {"LeakyReLU", 2, {F32(2, 3), F32(1)}, {"act_type", "prelu", NULL}, EXACT},
    /* optimizers (their states are compared too) */
    {"sgd_update",
     2,
     {F32(3, 4), F32(3, 4)},
     {"lr", "0.1", "wd", "0.01", "clip_gradient", "1", NULL},
     ROUNDED},
    {"sgd_mom_update",
     3,
     {F32(3, 4), F32(3, 4), F32(3, 4)},
     {"lr", "0.1", "momentum", "0.9", NULL},
     ROUNDED},
    {"adam_update",
     4,
     {F64(6), F64(6), F64(6), IN(DEFT_FLOAT64, 0.25, 3, 6)},
     {"lr", "0.01", "rescale_grad", "0.5", NULL},
     ROUNDED},
/* each family's own cases: tests/gpu_cases/<family>.inc */
#include "gpu_cases.inc"
};

/* Operators made by graph passes, run by the graph tests below instead. */
static const char *const graph_only[] = {"_CachedOp",  "_fused_elemwise",
                                         "_conv_bn",   "_conv_bn_relu",
                                         "_conv_relu", "_backward_Pooling_relu"};

START_TEST(test_every_gpu_kernel_has_a_case) {
    for (int i = 0; i < deft_registry_count(); i++) {
        const deft_op_t *op = deft_registry_at(i)->op;
        if (!op->forward_gpu) continue;
        bool covered = false;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0] && !covered; c++)
            covered = strcmp(cases[c].op, op->name) == 0;
        for (size_t g = 0; g < sizeof graph_only / sizeof graph_only[0] && !covered; g++)
            covered = strcmp(graph_only[g], op->name) == 0;
        ck_assert_msg(covered, "%s has a GPU kernel but no case in test_gpu.c", op->name);
    }
}
END_TEST

/* ---- with a GPU ---- */

static DeftNDArrayHandle random_input(const input_spec_t *spec, unsigned *seed) {
    int64_t n = count_of(spec->ndim, spec->shape);
    double *values = malloc(sizeof(double) * (size_t)(n ? n : 1));
    bool integer = spec->dtype != DEFT_FLOAT32 && spec->dtype != DEFT_FLOAT64 &&
                   spec->dtype != DEFT_FLOAT16 && spec->dtype != DEFT_BFLOAT16;
    for (int64_t i = 0; i < n; i++) {
        double v = spec->low + (spec->high - spec->low) * ((double)rand_r(seed) / RAND_MAX);
        values[i] = integer ? floor(v) : v;
    }
    DeftNDArrayHandle h = make(spec->dtype, spec->ndim, spec->shape, values);
    free(values);
    return h;
}

static DeftNDArrayHandle to_gpu(DeftNDArrayHandle cpu) {
    int64_t shape[DEFT_MAX_NDIM];
    int ndim, dtype;
    ck_assert_ok(DeftNDArrayGetShape(cpu, shape, DEFT_MAX_NDIM, &ndim));
    ck_assert_ok(DeftNDArrayGetDType(cpu, &dtype));
    DeftNDArrayHandle gpu;
    ck_assert_ok(DeftNDArrayCreate(shape, ndim, dtype, DEFT_GPU, 0, &gpu));
    ck_assert_ok(DeftNDArrayCopyTo(cpu, gpu));
    return gpu;
}

static void assert_close_arrays(const char *what, DeftNDArrayHandle cpu, DeftNDArrayHandle gpu,
                                double tol) {
    int dtype, type, id;
    ck_assert_ok(DeftNDArrayGetDType(cpu, &dtype));
    ck_assert_ok(DeftNDArrayGetDevice(gpu, &type, &id));
    ck_assert_msg(type == DEFT_GPU, "%s: the result is not on the GPU", what);
    if (dtype == DEFT_FLOAT64) tol *= 1e-6;
    if (dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64 && dtype != DEFT_FLOAT16 &&
        dtype != DEFT_BFLOAT16)
        tol = 0;
    int64_t n1, n2;
    double *a = read_all(cpu, &n1), *b = read_all(gpu, &n2);
    ck_assert_int_eq(n1, n2);
    for (int64_t i = 0; i < n1; i++)
        ck_assert_msg(close_enough(b[i], a[i], tol),
                      "%s: element %lld is %.17g on the GPU, %.17g on the CPU", what, (long long)i,
                      b[i], a[i]);
    free(a), free(b);
}

/* Run the case on the CPU and on gpu(0) (with ctx=gpu(0) for creation). */
static void run_case(const gpu_case_t *c, unsigned seed) {
    DeftNDArrayHandle cpu_in[6], gpu_in[6], cpu_out[4] = {NULL}, gpu_out[4] = {NULL};
    for (int i = 0; i < c->nin; i++) {
        cpu_in[i] = random_input(&c->in[i], &seed);
        gpu_in[i] = to_gpu(cpu_in[i]);
    }
    const char *gpu_params[16];
    int np = count_params(c->params);
    for (int k = 0; k < 2 * np; k++) gpu_params[k] = c->params[k];
    if (c->nin == 0) gpu_params[2 * np++] = "ctx", gpu_params[2 * np - 1] = "gpu(0)";
    gpu_params[2 * np] = NULL;
    /* the literal lives in this block: one inside the if would end with it */
    const char *const *to_cpu = P("device", "cpu(0)");
    const char *const *cpu_params = strcmp(c->op, "_copy_to_device") == 0 ? to_cpu : c->params;
    int n1 = 4, n2 = 4;
    ck_assert_ok(DeftRandomSeed(7));
    ck_assert_msg(call(c->op, c->nin, cpu_in, &n1, cpu_out, cpu_params) == 0, "%s on the CPU: %s",
                  c->op, DeftGetLastError());
    ck_assert_ok(DeftRandomSeed(7));
    ck_assert_msg(call(c->op, c->nin, gpu_in, &n2, gpu_out, gpu_params) == 0, "%s on the GPU: %s",
                  c->op, DeftGetLastError());
    ck_assert_int_eq(n1, n2);
    char what[96];
    for (int k = 0; k < n1; k++) {
        snprintf(what, sizeof what, "%s output %d", c->op, k);
        assert_close_arrays(what, cpu_out[k], gpu_out[k], c->tol);
    }
    const deft_op_t *op = deft_registry_find(c->op)->op;
    for (int i = 0; i < c->nin; i++) /* states updated in place */
        if (op->mutate_inputs & (1u << i)) {
            snprintf(what, sizeof what, "%s input %d (updated)", c->op, i);
            assert_close_arrays(what, cpu_in[i], gpu_in[i], c->tol);
        }
    for (int i = 0; i < c->nin; i++) DeftNDArrayFree(cpu_in[i]), DeftNDArrayFree(gpu_in[i]);
    for (int k = 0; k < n1; k++) DeftNDArrayFree(cpu_out[k]), DeftNDArrayFree(gpu_out[k]);
}

/* The CPU side of every case runs (what the GPU's results are compared
 * with): a case the CPU refuses, for a parameter or a dtype, is found on
 * machines without a GPU too. */
START_TEST(test_every_case_runs_on_the_cpu) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const gpu_case_t *g = &cases[c];
        unsigned seed = 1234u + (unsigned)c;
        DeftNDArrayHandle in[6], out[4] = {NULL};
        for (int i = 0; i < g->nin; i++) in[i] = random_input(&g->in[i], &seed);
        const char *const *to_cpu = P("device", "cpu(0)");
        int n = 4;
        int status = call(g->op, g->nin, in, &n, out,
                          strcmp(g->op, "_copy_to_device") == 0 ? to_cpu : g->params);
        for (int k = 0; status == 0 && k < n; k++) status = DeftNDArrayWaitToRead(out[k]);
        ck_assert_msg(status == 0, "case %zu (%s) on the CPU: %s", c, g->op, DeftGetLastError());
        for (int i = 0; i < g->nin; i++) DeftNDArrayFree(in[i]);
        for (int k = 0; k < n; k++) DeftNDArrayFree(out[k]);
    }
}
END_TEST

START_TEST(test_gpu_kernels_match_the_cpu) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        run_case(&cases[c], 1234u + (unsigned)c);
}
END_TEST

START_TEST(test_copies_between_devices_round_trip) {
    const int64_t n = 1 << 20;
    DeftNDArrayHandle host = call1("_arange", 0, NULL, P("start", "0", "stop", "1048576"));
    DeftNDArrayHandle gpu = to_gpu(host), back, gpu2;
    ck_assert_ok(DeftNDArrayCreate(SHAPE(n), 1, DEFT_FLOAT32, DEFT_CPU, 0, &back));
    ck_assert_ok(DeftNDArrayCreate(SHAPE(n), 1, DEFT_FLOAT32, DEFT_GPU, 0, &gpu2));
    ck_assert_ok(DeftNDArrayCopyTo(gpu, gpu2)); /* device to device */
    ck_assert_ok(DeftNDArrayCopyTo(gpu2, back));
    assert_close_arrays("round trip", host, gpu2, 0);
    float *values = malloc(sizeof(float) * (size_t)n);
    ck_assert_ok(DeftNDArrayCopyToHost(back, values, sizeof(float) * (size_t)n));
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(values[i], (float)i);
    free(values);
    DeftNDArrayHandle wrong;
    ck_assert_ok(DeftNDArrayCreate(SHAPE(3), 1, DEFT_FLOAT32, DEFT_GPU, 0, &wrong));
    ck_assert_fails(DeftNDArrayCopyTo(gpu, wrong), DEFT_ERROR_VALUE, "shape");
    DeftNDArrayHandle all[] = {host, gpu, back, gpu2, wrong};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST

/* A pinned copy holds the values in page-locked memory that CUDA knows as
 * such, copies to the GPU and back, and its block is reused from the cache. */
START_TEST(test_pinned_copies_feed_the_gpu) {
    DeftNDArrayHandle x = call1("_arange", 0, NULL, P("start", "0", "stop", "4096")), pinned = NULL;
    ck_assert_ok(DeftNDArrayPinMemory(x, &pinned));
    int is_pinned = 0;
    ck_assert_ok(DeftNDArrayIsPinned(pinned, &is_pinned));
    ck_assert_int_eq(is_pinned, 1);
    DLManagedTensor *lent = NULL;
#ifdef DEFT_HAVE_CUDA
    ck_assert_ok(DeftNDArrayToDLPack(pinned, &lent));
    struct cudaPointerAttributes attributes;
    ck_assert_int_eq(cudaPointerGetAttributes(&attributes, lent->dl_tensor.data), cudaSuccess);
    ck_assert_int_eq(attributes.type, cudaMemoryTypeHost); /* page-locked, not pageable */
    lent->deleter(lent);
#endif
    DeftNDArrayHandle gpu = to_gpu(pinned);
    assert_close_arrays("pinned to gpu", x, gpu, 0);
    void *first = NULL;
    ck_assert_ok(DeftNDArrayToDLPack(pinned, &lent));
    first = lent->dl_tensor.data;
    lent->deleter(lent);
    ck_assert_ok(DeftNDArrayFree(pinned));
    ck_assert_ok(DeftNDArrayPinMemory(x, &pinned)); /* the cached block again */
    ck_assert_ok(DeftNDArrayToDLPack(pinned, &lent));
    ck_assert_ptr_eq(lent->dl_tensor.data, first);
    lent->deleter(lent);
    DeftNDArrayHandle all[] = {x, pinned, gpu};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST

/* Each thread queues on a stream of its own: work a second thread queues
 * after the first's must see the first's results, and memory the first
 * freed while its kernels were still queued must not be overwritten by
 * them once the second has it. Long chains of kernels on 16M elements keep
 * the first stream busy long after the host has moved on. */
#define STREAM_N     (1 << 24)
#define STREAM_STEPS 40

typedef struct stream_job {
    DeftNDArrayHandle in, out;
} stream_job_t;

static void *read_on_another_thread(void *arg) {
    stream_job_t *job = arg;
    job->out = call1("_mul_scalar", 1, &job->in, P("scalar", "2"));
    return NULL;
}

static void *reuse_on_another_thread(void *arg) {
    stream_job_t *job = arg;
    job->out = call1("_full", 0, NULL, P("shape", "(16777216,)", "value", "7", "ctx", "gpu(0)"));
    return NULL;
}

static void assert_all(DeftNDArrayHandle h, double expect) {
    int64_t n;
    double *v = read_all(h, &n);
    ck_assert_int_eq(n, STREAM_N);
    for (int64_t i = 0; i < n; i += 4099) ck_assert_double_eq(v[i], expect);
    ck_assert_double_eq(v[n - 1], expect);
    free(v);
}

/* x += 1, STREAM_STEPS times, queued on the calling thread's stream. */
static DeftNDArrayHandle busy_chain(void) {
    DeftNDArrayHandle x = call1("_zeros", 0, NULL, P("shape", "(16777216,)", "ctx", "gpu(0)"));
    for (int i = 0; i < STREAM_STEPS; i++) {
        int nout = 1;
        ck_assert_ok(call("_plus_scalar", 1, &x, &nout, &x, P("scalar", "1")));
    }
    return x;
}

START_TEST(test_streams_of_two_threads_are_ordered) {
    stream_job_t job = {busy_chain(), NULL};
    pthread_t thread;
    pthread_create(&thread, NULL, read_on_another_thread, &job);
    pthread_join(thread, NULL);
    assert_all(job.out, 2.0 * STREAM_STEPS);
    ck_assert_ok(DeftNDArrayFree(job.in));
    ck_assert_ok(DeftNDArrayFree(job.out));

    DeftNDArrayHandle busy = busy_chain();
    ck_assert_ok(DeftNDArrayFree(busy)); /* its block goes back while its kernels are queued */
    stream_job_t reuse = {NULL, NULL};
    pthread_create(&thread, NULL, reuse_on_another_thread, &reuse);
    pthread_join(thread, NULL);
    assert_all(reuse.out, 7.0);
    ck_assert_ok(DeftNDArrayFree(reuse.out));
}
END_TEST

/* A chain of operations on one thread's stream needs no event: the stream
 * orders it (each operation recorded one before). The host's read at the
 * end waits for the chain through an event recorded then. */
START_TEST(test_chain_on_one_stream_records_few_events) {
    DeftNDArrayHandle x = call1("_zeros", 0, NULL, P("shape", "(16777216,)", "ctx", "gpu(0)"));
    ck_assert_ok(DeftNDArrayWaitToRead(x));
    long before = deft_fence_events_recorded();
    for (int i = 0; i < STREAM_STEPS; i++) {
        int nout = 1;
        ck_assert_ok(call("_plus_scalar", 1, &x, &nout, &x, P("scalar", "1")));
    }
    long queueing = deft_fence_events_recorded() - before;
    assert_all(x, STREAM_STEPS);
    ck_assert_msg(queueing < STREAM_STEPS / 2, "%ld events for a chain of %d operations", queueing,
                  STREAM_STEPS);
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

typedef struct overwrite_job {
    DeftNDArrayHandle x;
    int status;
    char message[512]; /* the thread's error, if it failed */
} overwrite_job_t;

static void *overwrite_on_another_thread(void *arg) {
    overwrite_job_t *job = arg;
    float *sevens = malloc(STREAM_N * sizeof *sevens);
    ck_assert_ptr_nonnull(sevens);
    for (int64_t i = 0; i < STREAM_N; i++) sevens[i] = 7;
    job->status = DeftNDArrayCopyFromHost(job->x, sevens, STREAM_N * sizeof *sevens);
    snprintf(job->message, sizeof job->message, "%s", DeftGetLastError());
    free(sevens);
    return NULL;
}

/* A write on another thread's stream waits for the reads still queued on
 * the first: their event is recorded when the write needs it. */
START_TEST(test_write_on_another_stream_waits_for_queued_reads) {
    DeftNDArrayHandle x = busy_chain();
    DeftNDArrayHandle y = call1("_mul_scalar", 1, &x, P("scalar", "2")); /* behind the chain */
    overwrite_job_t job = {x, -1, ""};
    pthread_t thread;
    pthread_create(&thread, NULL, overwrite_on_another_thread, &job);
    pthread_join(thread, NULL);
    ck_assert_msg(job.status == 0, "%s", job.message);
    assert_all(y, 2.0 * STREAM_STEPS);
    assert_all(x, 7.0);
    ck_assert_ok(DeftNDArrayFree(x));
    ck_assert_ok(DeftNDArrayFree(y));
}
END_TEST

#ifdef DEFT_HAVE_CUDA
static int same_shape(void *user, int nin, const int *in_ndims, const int64_t *in_shapes,
                      const int *in_dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype) {
    (void)user, (void)nin;
    *out_ndim = in_ndims[0];
    for (int d = 0; d < in_ndims[0]; d++) out_shape[d] = in_shapes[d];
    *out_dtype = in_dtypes[0];
    return 0;
}

/* y = x, copied over eight times on the stream deft gives the callback,
 * which never waits for the device. */
static int stream_copy(void *user, int nin, const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                       int is_train) {
    (void)user, (void)nin, (void)is_train;
    void *stream, *x, *y;
    size_t nbytes;
    if (DeftCustomOpGetStream(0, &stream) || DeftCustomOpGetData(in[0], &x) ||
        DeftCustomOpGetData(out, &y) || DeftNDArrayGetNBytes(out, &nbytes))
        return 1;
    for (int i = 0; i < 8; i++)
        if (cudaMemcpyAsync(y, x, nbytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream) !=
            cudaSuccess)
            return 1;
    return 0;
}

/* dx = dy, copied on the backward callback's stream as the forward copies. */
static int stream_copy_backward(void *user, DeftNDArrayHandle dy, int nin,
                                const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                                const DeftNDArrayHandle *dx) {
    (void)in, (void)out;
    return stream_copy(user, nin, &dy, dx[0], 1);
}

/* A custom operator's own GPU work on the stream it is given follows the
 * chain that wrote its input (queued on this thread's stream, still busy),
 * and the operator that reads its output follows it; its backward likewise
 * follows the head's gradient and precedes the variable's. */
START_TEST(test_custom_op_queues_on_the_stream_it_is_given) {
    DeftCustomOpCallbacks cb = {1, same_shape, stream_copy, stream_copy_backward, NULL, NULL};
    static int registered;
    if (!registered++) ck_assert_ok(DeftCustomOpRegister("test_stream_copy", &cb));
    DeftNDArrayHandle x = busy_chain(), dx;
    ck_assert_ok(DeftNDArrayCreate(SHAPE(16777216), 1, DEFT_FLOAT32, DEFT_GPU, 0, &dx));
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &dx));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("test_stream_copy", 1, &x, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    DeftNDArrayHandle z = call1("_mul_scalar", 1, &y, P("scalar", "2"));
    assert_all(z, 2.0 * STREAM_STEPS);
    assert_all(y, STREAM_STEPS);
    DeftNDArrayHandle head = busy_chain(); /* dy, still being written */
    ck_assert_ok(DeftAutogradBackward(1, &y, &head, 0, 0));
    assert_all(dx, STREAM_STEPS);
    DeftNDArrayHandle all[] = {x, y, z, dx, head};
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST
#endif

/* fc1 on the CPU, fc2 on the GPU, placed with copies; forward and gradients
 * agree with the same graph all on the CPU. */
START_TEST(test_graph_spans_devices_forward_and_backward) {
    DeftSymbolHandle x = var("x"), grad, placed;
    DeftSymbolHandle fc1 = apply("FullyConnected", "fc1", 1, &x, P("num_hidden", "4"));
    ck_assert_ok(DeftSymbolSetAttr(fc1, "ctx_group", "host"));
    DeftSymbolHandle act = apply("Activation", "act", 1, &fc1, P("act_type", "tanh"));
    DeftSymbolHandle fc2 = apply("FullyConnected", "fc2", 1, &act, P("num_hidden", "3"));
    ck_assert_ok(
        DeftSymbolGradient(fc2, 2, (const char *const[]){"fc1_weight", "fc2_weight"}, &grad));
    const char *groups[1] = {"host"};
    const int types[1] = {DEFT_CPU}, ids[1] = {0};
    ck_assert_ok(DeftSymbolPlaceDevice(grad, DEFT_GPU, 0, 1, groups, types, ids, &placed));
    DeftCachedOpHandle plain, spanning;
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &plain));
    ck_assert_ok(DeftCachedOpCreate(placed, 0, &spanning));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(grad, &nargs, &names));
    DeftNDArrayHandle args[8], placed_args[8];
    unsigned seed = 5;
    for (int a = 0; a < nargs; a++) {
        input_spec_t spec = !strcmp(names[a], "x")            ? (input_spec_t)F32(2, 5)
                            : !strcmp(names[a], "fc1_weight") ? (input_spec_t)F32(4, 5)
                            : !strcmp(names[a], "fc1_bias")   ? (input_spec_t)F32(4)
                            : !strcmp(names[a], "fc2_weight") ? (input_spec_t)F32(3, 4)
                            : !strcmp(names[a], "fc2_bias")   ? (input_spec_t)F32(3)
                                                              : (input_spec_t)F32(2, 3);
        args[a] = random_input(&spec, &seed);
        /* fc1's inputs stay on the host; the rest go to the GPU */
        bool host = !strcmp(names[a], "x") || !strncmp(names[a], "fc1_", 4);
        placed_args[a] = host ? args[a] : to_gpu(args[a]);
    }
    DeftNDArrayHandle r1[3] = {NULL}, r2[3] = {NULL};
    int n1 = 3, n2 = 3;
    ck_assert_ok(DeftCachedOpInvoke(plain, nargs, args, &n1, r1));
    ck_assert_msg(DeftCachedOpInvoke(spanning, nargs, placed_args, &n2, r2) == 0, "%s",
                  DeftGetLastError());
    for (int k = 0; k < n1; k++) {
        int64_t na, nb;
        double *va = read_all(r1[k], &na), *vb = read_all(r2[k], &nb);
        ck_assert_int_eq(na, nb);
        for (int64_t i = 0; i < na; i++)
            ck_assert_msg(close_enough(vb[i], va[i], SUMMED), "output %d element %lld", k,
                          (long long)i);
        free(va), free(vb);
    }
    for (int a = 0; a < nargs; a++) {
        if (placed_args[a] != args[a]) DeftNDArrayFree(placed_args[a]);
        DeftNDArrayFree(args[a]);
    }
    for (int k = 0; k < 3; k++) DeftNDArrayFree(r1[k]), DeftNDArrayFree(r2[k]);
    DeftCachedOpFree(plain), DeftCachedOpFree(spanning);
    DeftSymbolHandle all[] = {x, fc1, act, fc2, grad, placed};
    for (int i = 0; i < 6; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

/* tanh(x * w) recorded on the GPU: the gradient equals the CPU's. */
START_TEST(test_autograd_on_the_gpu) {
    unsigned seed = 9;
    input_spec_t spec = F32(4, 6);
    DeftNDArrayHandle x = random_input(&spec, &seed), w = random_input(&spec, &seed);
    DeftNDArrayHandle results[2];
    for (int on_gpu = 0; on_gpu < 2; on_gpu++) {
        DeftNDArrayHandle xx = on_gpu ? to_gpu(x) : x, ww = on_gpu ? to_gpu(w) : w, g;
        ck_assert_ok(
            DeftNDArrayCreate(SHAPE(4, 6), 2, DEFT_FLOAT32, on_gpu ? DEFT_GPU : DEFT_CPU, 0, &g));
        ck_assert_ok(DeftAutogradMarkVariables(1, &xx, NULL, &g));
        ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
        DeftNDArrayHandle in2[2] = {xx, ww};
        DeftNDArrayHandle y = call1("elemwise_mul", 2, in2, NO_PARAMS);
        DeftNDArrayHandle z = call1("tanh", 1, &y, NO_PARAMS);
        DeftNDArrayHandle s = call1("sum", 1, &z, NO_PARAMS);
        ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
        if (on_gpu) { /* a head's gradient lives where the head does */
            DeftNDArrayHandle head = call1("_copy_to_device", 1, &s, P("device", "cpu(0)"));
            ck_assert_fails(DeftAutogradBackward(1, &s, &head, 0, 0), DEFT_ERROR_VALUE,
                            "head_grads[0] is on cpu(0), expected gpu(0) like the head");
            DeftNDArrayFree(head);
        }
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
        results[on_gpu] = g;
        DeftNDArrayFree(y), DeftNDArrayFree(z), DeftNDArrayFree(s);
        if (on_gpu) DeftNDArrayFree(xx), DeftNDArrayFree(ww);
    }
    assert_close_arrays("d sum(tanh(x w)) / dx", results[0], results[1], ROUNDED);
    /* a gradient lives where its variable does */
    DeftNDArrayHandle on_gpu = to_gpu(x);
    ck_assert_fails(DeftAutogradMarkVariables(1, &on_gpu, NULL, &results[0]), DEFT_ERROR_VALUE,
                    "grads[0] is on cpu(0), expected gpu(0) like the variable");
    DeftNDArrayFree(on_gpu);
    DeftNDArrayFree(results[0]), DeftNDArrayFree(results[1]), DeftNDArrayFree(x),
        DeftNDArrayFree(w);
}
END_TEST

static int64_t gpu_stat(int which) {
    int64_t v;
    ck_assert_ok(DeftGetMemoryStat(DEFT_GPU, 0, which, &v));
    return v;
}

START_TEST(test_allocator_caches_and_reports) {
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_GPU, 0));
    int64_t live = gpu_stat(DEFT_MEM_LIVE_BYTES), allocs = gpu_stat(DEFT_MEM_SYSTEM_ALLOCS);
    DeftNDArrayHandle a;
    ck_assert_ok(DeftNDArrayCreate(SHAPE(1000), 1, DEFT_FLOAT32, DEFT_GPU, 0, &a));
    ck_assert_int_eq(gpu_stat(DEFT_MEM_LIVE_BYTES), live + 4000);
    ck_assert_int_eq(gpu_stat(DEFT_MEM_SYSTEM_ALLOCS), allocs + 1);
    ck_assert_ok(DeftNDArrayFree(a));
    ck_assert_ok(DeftWaitAll());
    ck_assert_int_eq(gpu_stat(DEFT_MEM_LIVE_BYTES), live);
    ck_assert_int_ge(gpu_stat(DEFT_MEM_CACHED_BYTES), 4000);
    ck_assert_ok(DeftNDArrayCreate(SHAPE(990), 1, DEFT_FLOAT32, DEFT_GPU, 0, &a)); /* same class */
    ck_assert_int_eq(gpu_stat(DEFT_MEM_SYSTEM_ALLOCS), allocs + 1);
    ck_assert_ok(DeftNDArrayFree(a));
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_GPU, 0));
    ck_assert_int_eq(gpu_stat(DEFT_MEM_CACHED_BYTES), 0);
    /* more than the device has: a clear error, nothing allocated */
    size_t free_bytes, total_bytes;
    ck_assert_ok(DeftGetGPUMemoryInfo(0, &free_bytes, &total_bytes));
    DeftNDArrayHandle huge = NULL;
    int64_t too_many = (int64_t)(total_bytes / 4) * 2;
    ck_assert_fails(DeftNDArrayCreate(&too_many, 1, DEFT_FLOAT32, DEFT_GPU, 0, &huge),
                    DEFT_ERROR_OUT_OF_MEMORY, "out of memory on gpu(0)");
    ck_assert_ptr_null(huge);
    ck_assert_int_eq(gpu_stat(DEFT_MEM_LIVE_BYTES), live);
}
END_TEST

/* A GPU array goes out as a kDLCUDA tensor and comes back sharing its memory. */
/* A child forked after the parent used CUDA cannot use it: its first GPU call says why
 * (not CUDA's "initialization error"), and the child's CPU work goes on. */
START_TEST(test_forked_child_is_told_why_it_cannot_use_the_gpu) {
    DeftNDArrayHandle parent;
    ck_assert_ok(DeftNDArrayCreate(SHAPE(4), 1, DEFT_FLOAT32, DEFT_GPU, 0, &parent));
    ck_assert_ok(DeftWaitAll());
    fflush(NULL);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        alarm(20); /* a hang fails the test instead of stalling it */
        DeftNDArrayHandle h = NULL, c = NULL;
        int gpu = DeftNDArrayCreate(SHAPE(4), 1, DEFT_FLOAT32, DEFT_GPU, 0, &h);
        const char *why = DeftGetLastError();
        bool told = gpu != 0 && strstr(why, "forked") && strstr(why, "spawn");
        bool cpu = DeftNDArrayCreate(SHAPE(4), 1, DEFT_FLOAT32, DEFT_CPU, 0, &c) == 0;
        if (!told) fprintf(stderr, "child: GPU call returned %d: %s\n", gpu, why);
        _exit(told && cpu ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child was not told (%d)",
                  status);
    ck_assert_ok(DeftNDArrayFree(parent));
}
END_TEST

START_TEST(test_dlpack_carries_cuda_tensors) {
    DeftNDArrayHandle host = make(DEFT_FLOAT32, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle gpu = to_gpu(host), back;
    DLManagedTensor *t;
    ck_assert_ok(DeftNDArrayToDLPack(gpu, &t));
    ck_assert_int_eq(t->dl_tensor.device.device_type, kDLCUDA);
    ck_assert_int_eq(t->dl_tensor.device.device_id, 0);
    ck_assert_ok(DeftNDArrayFromDLPack(t, &back));
    int type, id;
    ck_assert_ok(DeftNDArrayGetDevice(back, &type, &id));
    ck_assert_int_eq(type, DEFT_GPU);
    assert_close_arrays("through DLPack", host, back, 0);
    DeftNDArrayHandle all[] = {host, gpu, back};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST

/* A run of the graph's `sym` on arrays `in`, output 0. */
static DeftNDArrayHandle run_symbol(DeftSymbolHandle sym, int nin, DeftNDArrayHandle *in) {
    DeftCachedOpHandle op;
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &op));
    ck_assert_msg(DeftCachedOpInvoke(op, nin, in, &nout, &out) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftCachedOpFree(op));
    return out;
}

/* A fused chain on the GPU is one kernel with the unfused graph's results,
 * bit for bit: scalar operators on either side, an input of one element,
 * unary math, clip and an activation. */
START_TEST(test_fused_chains_run_as_one_kernel) {
    DeftSymbolHandle x = var("x"), s = var("s");
    DeftSymbolHandle a = apply("_plus_scalar", NULL, 1, &x, P("scalar", "5"));
    DeftSymbolHandle b = apply("broadcast_mul", NULL, 2, (DeftSymbolHandle[]){a, s}, NO_PARAMS);
    DeftSymbolHandle c = apply("tanh", NULL, 1, &b, NO_PARAMS);
    DeftSymbolHandle d = apply("elemwise_sub", NULL, 2, (DeftSymbolHandle[]){c, x}, NO_PARAMS);
    DeftSymbolHandle e = apply("clip", NULL, 1, &d, P("a_min", "-0.5", "a_max", "0.7"));
    DeftSymbolHandle f = apply("Activation", NULL, 1, &e, P("act_type", "relu"));
    DeftSymbolHandle y = apply("_rminus_scalar", NULL, 1, &f, P("scalar", "2")), fused;
    ck_assert_ok(DeftSymbolApplyPasses(y, "CSE,Fuse", &fused));
    /* float16 and bfloat16 chains round each step to the dtype, as the unfused steps */
    static const int dtypes[4] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_FLOAT16, DEFT_BFLOAT16};
    static const double to_cpu[4] = {ROUNDED, ROUNDED, F16_ULP, BF16_ULP};
    for (int t = 0; t < 4; t++) {
        input_spec_t xs = IN(dtypes[t], -8, 8, 300001), ss = IN(dtypes[t], -2, 2, 1);
        unsigned seed = 11;
        DeftNDArrayHandle host[2] = {random_input(&xs, &seed), random_input(&ss, &seed)};
        DeftNDArrayHandle dev[2] = {to_gpu(host[0]), to_gpu(host[1])};
        long chains = deft_fused_gpu_chains();
        DeftNDArrayHandle got = run_symbol(fused, 2, dev), want = run_symbol(y, 2, dev);
        ck_assert_ok(DeftNDArrayWaitToRead(got)); /* the run may still be queued */
        ck_assert_int_eq(deft_fused_gpu_chains(), chains + 1);
        DeftNDArrayHandle on_cpu = run_symbol(fused, 2, host);
        assert_close_arrays("fused against unfused, on the GPU", want, got, EXACT);
        assert_close_arrays("fused on the GPU against the CPU", on_cpu, got, to_cpu[t]);
        DeftNDArrayHandle all[] = {host[0], host[1], dev[0], dev[1], got, want, on_cpu};
        for (int i = 0; i < 7; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
    }
    DeftSymbolHandle syms[] = {x, s, a, b, c, d, e, f, y, fused};
    for (int i = 0; i < 10; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* The executors' FoldBatchNorm pass (core/graph/fold_bn.c) on the GPU: Convolution,
 * BatchNorm in predict mode and relu as one _conv_bn_relu node, which runs the three GPU
 * kernels in turn, against the CPU's folded kernel. */
START_TEST(test_folded_conv_batch_norm_runs_on_the_gpu) {
    DeftSymbolHandle x = var("x"), w = var("w"), gamma = var("gamma"), beta = var("beta");
    DeftSymbolHandle mean = var("mean"), variance = var("var");
    DeftSymbolHandle conv = apply("Convolution", NULL, 2, (DeftSymbolHandle[]){x, w},
                                  P("kernel", "(3,3)", "num_filter", "4", "no_bias", "True"));
    DeftSymbolHandle bn =
        apply("BatchNorm", NULL, 5, (DeftSymbolHandle[]){conv, gamma, beta, mean, variance},
              P("fix_gamma", "False"));
    DeftSymbolHandle y = apply("Activation", NULL, 1, &bn, P("act_type", "relu"));
    input_spec_t specs[6] = {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4), F32(4), F32(4), POS(4)};
    unsigned seed = 5;
    DeftNDArrayHandle host[6], dev[6];
    for (int k = 0; k < 6; k++) host[k] = random_input(&specs[k], &seed), dev[k] = to_gpu(host[k]);
    DeftNDArrayHandle got = run_symbol(y, 6, dev), want = run_symbol(y, 6, host);
    assert_close_arrays("conv, BatchNorm, relu folded, GPU against CPU", want, got, SUMMED);
    for (int k = 0; k < 6; k++) {
        ck_assert_ok(DeftNDArrayFree(host[k]));
        ck_assert_ok(DeftNDArrayFree(dev[k]));
    }
    ck_assert_ok(DeftNDArrayFree(got));
    ck_assert_ok(DeftNDArrayFree(want));
    DeftSymbolHandle syms[] = {x, w, gamma, beta, mean, variance, conv, bn, y};
    for (int i = 0; i < 9; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* The Fuse pass's layer nodes (core/graph/fuse.c) on the GPU: _conv_relu runs
 * the convolution's and relu's GPU kernels in turn, _backward_Pooling_relu the
 * pooling gradient's kernel with relu's gradient in it; the pooling and the
 * gradients of data, weight and bias against the CPU's. */
START_TEST(test_fused_conv_relu_pool_layers_run_on_the_gpu) {
    DeftSymbolHandle x = var("x"), w = var("w"), b = var("b");
    DeftSymbolHandle conv = apply("Convolution", NULL, 3, (DeftSymbolHandle[]){x, w, b},
                                  P("kernel", "(3,3)", "num_filter", "4"));
    DeftSymbolHandle r = apply("Activation", NULL, 1, &conv, P("act_type", "relu"));
    DeftSymbolHandle p =
        apply("Pooling", NULL, 1, &r, P("kernel", "(2,2)", "stride", "(2,2)", "pool_type", "max"));
    DeftSymbolHandle g, fused;
    ck_assert_ok(DeftSymbolGradient(p, 3, (const char *const[]){"x", "w", "b"}, &g));
    ck_assert_ok(DeftSymbolApplyPasses(g, "Fuse", &fused));
    input_spec_t specs[4] = {F32(2, 3, 10, 10), F32(4, 3, 3, 3), F32(4), F32(2, 4, 4, 4)};
    unsigned seed = 7;
    DeftNDArrayHandle host[4], dev[4], got[4] = {NULL}, want[4] = {NULL};
    for (int k = 0; k < 4; k++) host[k] = random_input(&specs[k], &seed), dev[k] = to_gpu(host[k]);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(fused, 0, &op));
    int nout = 4;
    ck_assert_msg(DeftCachedOpInvoke(op, 4, dev, &nout, got) == 0, "%s", DeftGetLastError());
    ck_assert_msg(DeftCachedOpInvoke(op, 4, host, &nout, want) == 0, "%s", DeftGetLastError());
    ck_assert_ok(DeftCachedOpFree(op));
    for (int o = 0; o < 4; o++)
        assert_close_arrays("conv, relu, pooling fused, GPU against CPU", want[o], got[o], SUMMED);
    for (int k = 0; k < 4; k++) {
        DeftNDArrayHandle all[] = {host[k], dev[k], got[k], want[k]};
        for (int i = 0; i < 4; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
    }
    DeftSymbolHandle syms[] = {x, w, b, conv, r, p, g, fused};
    for (int i = 0; i < 8; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* Each GPU operator gets a "device" span timed by CUDA events, next to its
 * host span (the time to queue it). */
START_TEST(test_profiler_times_kernels_on_the_device) {
    const char *keys[2] = {"filename", "aggregate_stats"},
               *vals[2] = {"test_gpu_profile.json", "1"};
    ck_assert_ok(DeftProfilerSetConfig(2, keys, vals));
    DeftNDArrayHandle x;
    ck_assert_ok(DeftNDArrayCreate(SHAPE(1 << 20), 1, DEFT_FLOAT32, DEFT_GPU, 0, &x));
    ck_assert_ok(DeftProfilerSetState(1));
    for (int i = 0; i < 5; i++) ck_assert_ok(DeftNDArrayFree(call1("relu", 1, &x, NO_PARAMS)));
    ck_assert_ok(DeftWaitAll());
    ck_assert_ok(DeftProfilerSetState(0));
    const char *json;
    ck_assert_ok(DeftProfilerDumps(1, DEFT_PROFILER_JSON, &json));
    cJSON *stats = cJSON_Parse(json);
    ck_assert_ptr_nonnull(stats);
    const cJSON *device = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "device"), "relu");
    const cJSON *host = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "operator"), "relu");
    ck_assert_ptr_nonnull(device);
    ck_assert_ptr_nonnull(host);
    ck_assert_int_eq((int)cJSON_GetObjectItem(device, "count")->valuedouble, 5);
    ck_assert(cJSON_GetObjectItem(device, "min")->valuedouble > 0);
    cJSON_Delete(stats);
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

/* Checks the kernels make on the device fail the call's outputs, as on the CPU. */
START_TEST(test_bad_labels_and_indices_fail_on_the_gpu) {
    DeftNDArrayHandle data, host_labels = make(DEFT_INT32, 1, SHAPE(3), VALUES(1, 7, 2));
    DeftNDArrayHandle host_idx = make(DEFT_INT64, 1, SHAPE(2), VALUES(0, 3));
    ck_assert_ok(DeftNDArrayCreate(SHAPE(3, 4), 2, DEFT_FLOAT32, DEFT_GPU, 0, &data));
    DeftNDArrayHandle labels = to_gpu(host_labels), idx = to_gpu(host_idx);
    DeftNDArrayHandle loss =
        call1("softmax_cross_entropy", 2, (DeftNDArrayHandle[]){data, labels}, NO_PARAMS);
    ck_assert_fails(DeftNDArrayWaitToRead(loss), DEFT_ERROR_VALUE,
                    "label[1] is 7, expected a class index in [0, 4)");
    DeftNDArrayHandle taken =
        call1("take", 2, (DeftNDArrayHandle[]){data, idx}, P("mode", "raise"));
    ck_assert_fails(DeftNDArrayWaitToRead(taken), DEFT_ERROR_INDEX,
                    "index 3 (position 1) is out of range for axis 0 of size 3");
    /* DeftWaitAll reports the first failure since the last one, once */
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_VALUE, "label[1] is 7");
    ck_assert_ok(DeftWaitAll());
    DeftNDArrayHandle mixed[2] = {host_idx, idx};
    ck_assert_call_fails("broadcast_add", 2, mixed, NO_PARAMS, DEFT_ERROR_VALUE,
                         "input 1 is on another device than input 0");
    DeftNDArrayHandle all[] = {data, host_labels, host_idx, labels, idx, loss, taken};
    for (int i = 0; i < 7; i++) ck_assert_ok(DeftNDArrayFree(all[i]));
}
END_TEST

static Suite *gpu_suite(int gpus) {
    Suite *suite = suite_create("gpu");
    TCase *everywhere = tcase_create("shared with the CPU");
    tcase_set_timeout(everywhere, 120); /* every case's CPU side, under the sanitizers too */
    tcase_add_test(everywhere, test_map_offsets_follow_broadcasting);
    tcase_add_test(everywhere, test_reduce_offsets_visit_each_element_once);
    tcase_add_test(everywhere, test_device_queries_without_such_gpu);
    tcase_add_test(everywhere, test_every_gpu_kernel_has_a_case);
    tcase_add_test(everywhere, test_every_case_runs_on_the_cpu);
#ifdef DEFT_HAVE_CUDA
    tcase_add_test(everywhere, test_half_maps_have_every_float_function);
    tcase_add_test(everywhere, test_gpu_maps_refuse_a_dtype_naming_the_operator);
#endif
    suite_add_tcase(suite, everywhere);
    if (gpus > 0) {
        TCase *device = tcase_create("on gpu(0)");
        tcase_set_timeout(device, 120);
        tcase_add_test(device, test_gpu_kernels_match_the_cpu);
        tcase_add_test(device, test_copies_between_devices_round_trip);
        tcase_add_test(device, test_pinned_copies_feed_the_gpu);
        tcase_add_test(device, test_streams_of_two_threads_are_ordered);
        tcase_add_test(device, test_chain_on_one_stream_records_few_events);
        tcase_add_test(device, test_write_on_another_stream_waits_for_queued_reads);
#ifdef DEFT_HAVE_CUDA
        tcase_add_test(device, test_custom_op_queues_on_the_stream_it_is_given);
#endif
        tcase_add_test(device, test_graph_spans_devices_forward_and_backward);
        tcase_add_test(device, test_fused_chains_run_as_one_kernel);
        tcase_add_test(device, test_folded_conv_batch_norm_runs_on_the_gpu);
        tcase_add_test(device, test_fused_conv_relu_pool_layers_run_on_the_gpu);
        tcase_add_test(device, test_autograd_on_the_gpu);
        tcase_add_test(device, test_allocator_caches_and_reports);
        tcase_add_test(device, test_bad_labels_and_indices_fail_on_the_gpu);
        tcase_add_test(device, test_dlpack_carries_cuda_tensors);
        tcase_add_test(device, test_forked_child_is_told_why_it_cannot_use_the_gpu);
        tcase_add_test(device, test_profiler_times_kernels_on_the_device);
        suite_add_tcase(suite, device);
    }
    return suite;
}

int main(void) {
    int gpus = 0;
    DeftGetGPUCount(&gpus);
    if (gpus == 0)
        printf("test_gpu: GPU kernel tests skipped: no GPU (%s); running the checks shared with "
               "the CPU\n",
#ifdef DEFT_HAVE_CUDA
               "no CUDA device or driver on this machine"
#else
               "deft was built without CUDA"
#endif
        );
    else {
        const char *name = "?";
        DeftGetGPUName(0, &name);
        printf("test_gpu: %d GPU(s), testing gpu(0): %s\n", gpus, name);
    }
    return run_suite(gpu_suite(gpus));
}
