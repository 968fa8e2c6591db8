/*
 * Matrix products through OpenBLAS: dot, batch_dot and FullyConnected.
 * deft adds shape checks and layout bookkeeping; every multiply-add is
 * cblas_sgemm or cblas_dgemm, so these run at OpenBLAS speed (float16 and
 * bfloat16 through float32, gemm_half_cpu; cuBLAS on a GPU).
 */
#include <cblas.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/op/gemm.h"
#include "core/op/gemm_bf16.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/op/half_compute.h"
#include "core/op/op.h"

/*
 * Threads. OpenBLAS runs single-threaded inside deft: its own helper threads
 * spin-wait (sched_yield) for a long while after every call, and on a small
 * machine they fight deft's threads for the cores, while waking them for the
 * next GEMM costs tens of microseconds. Instead deft splits a large GEMM into
 * blocks of rows (or of columns, when C is wider than tall), one per thread of its budget, on its
 * own pool (see core/base/parallel.h): one set of threads for every kernel.
 */
typedef struct gemm_job {
    deft_dtype_t dtype;
    bool ta, tb;
    int64_t m, n, k;
    const char *a, *b;
    double beta;
    char *c;
} gemm_job_t;

/* The block of C with m rows and n columns at c, from a and b (blocks of the
 * job's operands, which give the leading dimensions). */
static void gemm_block(const gemm_job_t *g, int64_t m, int64_t n, const char *a, const char *b,
                       char *c) {
    int lda = (int)(g->ta ? g->m : g->k), ldb = (int)(g->tb ? g->k : g->n), ldc = (int)g->n;
    enum CBLAS_TRANSPOSE opa = g->ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = g->tb ? CblasTrans : CblasNoTrans;
    if (g->dtype == DEFT_DT_FLOAT32)
        cblas_sgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)g->k, 1.0f, (const float *)a, lda,
                    (const float *)b, ldb, (float)g->beta, (float *)c, ldc);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)g->k, 1.0, (const double *)a, lda,
                    (const double *)b, ldb, g->beta, (double *)c, ldc);
}

/* Rows [begin, end) of C. */
static void gemm_rows(void *arg, int64_t begin, int64_t end) {
    const gemm_job_t *g = arg;
    size_t elem = g->dtype == DEFT_DT_FLOAT32 ? 4 : 8;
    gemm_block(g, end - begin, g->n, g->a + (size_t)(g->ta ? begin : begin * g->k) * elem, g->b,
               g->c + (size_t)(begin * g->n) * elem);
}

/* Columns [begin, end) of C: for short, wide products, where blocks of rows
 * would each pack all of B (an LSTM step's 32 x 1024 x 256). */
static void gemm_cols(void *arg, int64_t begin, int64_t end) {
    const gemm_job_t *g = arg;
    size_t elem = g->dtype == DEFT_DT_FLOAT32 ? 4 : 8;
    gemm_block(g, g->m, end - begin, g->a, g->b + (size_t)(g->tb ? begin * g->k : begin) * elem,
               g->c + (size_t)begin * elem);
}

/* Below this many multiply-adds a GEMM stays on one thread. */
#define PARALLEL_GEMM_MACS (1 << 20)

/* C (m x n) = op(A) * op(B) + beta * C, all row-major and dense, on the CPU. */
static void gemm_cpu(deft_dtype_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     const void *a, const void *b, double beta, void *c) {
    /* Every call, since the host program may have changed it (a plain store in OpenBLAS). */
    openblas_set_num_threads(1);
    gemm_job_t job = {dtype, ta, tb, m, n, k, a, b, beta, c};
    int threads =
        (double)m * (double)n * (double)k >= PARALLEL_GEMM_MACS ? deft_parallel_budget() : 1;
    /* Each thread packs all of the operand it does not split: split the longer side. */
    int64_t side = m >= n ? m : n;
    if (threads < 2 || side < 2 * 16) {
        gemm_rows(&job, 0, m);
        return;
    }
    /* One block per thread, a multiple of 16 (OpenBLAS's kernel height; a
     * cache line of float32 columns). */
    int64_t block = ((side + threads - 1) / threads + 15) / 16 * 16;
    deft_parallel_for(side, block, m >= n ? gemm_rows : gemm_cols, &job);
}

/* A batch of products C_i = op(A_i) op(B_i) + beta C_i, operand i at i times
 * its stride (elements; C's stride is m n), on device `dev`: OpenBLAS on the
 * CPU, cuBLAS on a GPU. */
typedef struct gemm_batch {
    deft_device_t dev;
    deft_dtype_t dtype;
    bool ta, tb;
    int64_t m, n, k, batch;
    const void *a, *b;
    int64_t stride_a, stride_b;
    double beta;
    void *c;
} gemm_batch_t;

/*
 * float16 and bfloat16 on the CPU: each product in float32 (operands
 * widened, OpenBLAS's sgemm, the result rounded once), as PyTorch's CPU
 * half matmul accumulates in float32. Widening is O(mk + kn + mn) against
 * the product's O(mnk). bfloat16 on a CPU with AVX512-BF16 multiplies the
 * packed halves directly (gemm_bf16.c), at twice float32's rate.
 */
static int gemm_half_cpu(const gemm_batch_t *g) {
    bool bf16 = g->dtype == DEFT_DT_BFLOAT16;
    if (bf16 && deft_gemm_bf16_available()) {
        for (int64_t i = 0; i < g->batch; i++)
            if (deft_gemm_bf16(g->ta, g->tb, g->m, g->n, g->k,
                               (const uint16_t *)g->a + i * g->stride_a,
                               (const uint16_t *)g->b + i * g->stride_b, g->beta,
                               (uint16_t *)g->c + i * g->m * g->n) < 0)
                return deft_error(DEFT_ERR_OUT_OF_MEMORY,
                                  "cannot allocate the packed operands of a bfloat16 GEMM");
        return 0;
    }
    int64_t na = g->m * g->k, nb = g->k * g->n, nc = g->m * g->n;
    float *a = deft_scratch_alloc((size_t)(na + nb + nc) * sizeof *a);
    if (!a)
        return deft_error(DEFT_ERR_OUT_OF_MEMORY,
                          "cannot allocate the float32 operands of a %s GEMM",
                          deft_dtype_name(g->dtype));
    float *b = a + na, *c = b + nb;
    for (int64_t i = 0; i < g->batch; i++) {
        uint16_t *ci = (uint16_t *)g->c + i * nc;
        deft_half_widen((const uint16_t *)g->a + i * g->stride_a, 1, bf16, a, na);
        deft_half_widen((const uint16_t *)g->b + i * g->stride_b, 1, bf16, b, nb);
        if (g->beta != 0) deft_half_widen(ci, 1, bf16, c, nc);
        gemm_cpu(DEFT_DT_FLOAT32, g->ta, g->tb, g->m, g->n, g->k, a, b, g->beta, c);
        deft_half_narrow(c, bf16, ci, 1, nc);
    }
    deft_scratch_free(a);
    return 0;
}

static int gemm(const gemm_batch_t *g) {
    size_t elem = deft_dtype_size(g->dtype);
    if (g->m == 0 || g->n == 0 || g->batch == 0) return 0;
    if (g->k == 0)
        return g->beta == 0
                   ? deft_device_zero(g->c, g->dev, (size_t)(g->batch * g->m * g->n) * elem)
                   : 0;
#ifdef DEFT_HAVE_CUDA
    if (g->dev.type == DEFT_DEV_GPU) {
        deft_gpu_gemm_t job = {g->dtype, g->ta,       g->tb,       g->m,       g->n,
                               g->k,     g->batch,    g->a,        g->b,       g->c,
                               g->beta,  g->stride_a, g->stride_b, g->m * g->n};
        return deft_gpu_gemm(g->dev.id, &job);
    }
#endif
    if (deft_dtype_is_half(g->dtype)) return gemm_half_cpu(g);
    for (int64_t i = 0; i < g->batch; i++)
        gemm_cpu(g->dtype, g->ta, g->tb, g->m, g->n, g->k,
                 (const char *)g->a + (size_t)(i * g->stride_a) * elem,
                 (const char *)g->b + (size_t)(i * g->stride_b) * elem, g->beta,
                 (char *)g->c + (size_t)(i * g->m * g->n) * elem);
    return 0;
}

/* One product on the device of tensor `on`. */
static int gemm1(const deft_tensor_t *on, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, const void *b, double beta, void *c) {
    gemm_batch_t g = {on->device, on->dtype, ta, tb, m, n, k, 1, a, b, 0, 0, beta, c};
    return gemm(&g);
}

int deft_gemm(deft_device_t dev, deft_dtype_t dtype, bool ta, bool tb, int64_t m, int64_t n,
              int64_t k, const void *a, const void *b, double beta, void *c) {
    gemm_batch_t g = {dev, dtype, ta, tb, m, n, k, 1, a, b, 0, 0, beta, c};
    return gemm(&g);
}

/* BLAS takes int sizes: larger matrices are refused rather than truncated. */
static int check_blas_size(const deft_op_t *op, int64_t m, int64_t n, int64_t k) {
    const int64_t limit = INT32_MAX;
    if (m <= limit && n <= limit && k <= limit && m * k <= limit * 64 && k * n <= limit * 64)
        return 0;
    return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                         "matrix sizes (%lld x %lld) * (%lld x %lld) exceed BLAS's int range",
                         (long long)m, (long long)k, (long long)k, (long long)n);
}

static int check_float_pair(const deft_op_t *op, int nin, const deft_desc_t *in) {
    if (deft_op_check_dtype_float_or_half(op, 0, in[0].dtype)) return -1;
    return deft_op_check_same_dtype(op, nin, in);
}

static const deft_param_def_t dot_params[] = {
    {"transpose_a", DEFT_PARAM_BOOL, "false", "use the transpose of lhs (2-D only)", NULL, false},
    {"transpose_b", DEFT_PARAM_BOOL, "false", "use the transpose of rhs (2-D only)", NULL, false},
    {0}};

/* ---- dot ---- */

typedef struct dot_dims {
    int64_t m, n, k;
} dot_dims_t;

/* lhs (..., k) and rhs (k, ...): m = product of lhs's leading dims, n of rhs's trailing. */
static int dot_shapes(const deft_op_t *op, const deft_param_value_t *p, const deft_desc_t *in,
                      dot_dims_t *dims, deft_shape_t *out) {
    const deft_shape_t *a = &in[0].shape, *b = &in[1].shape;
    bool ta = p[0].i, tb = p[1].i;
    char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
    if (a->ndim == 0 || b->ndim == 0)
        return deft_op_error(
            op, DEFT_ERR_VALUE, "inputs have shapes %s and %s; dot needs at least 1-D inputs",
            deft_shape_format(a, sa, sizeof sa), deft_shape_format(b, sb, sizeof sb));
    if ((ta && a->ndim != 2) || (tb && b->ndim != 2))
        return deft_op_error(
            op, DEFT_ERR_NOT_IMPLEMENTED, "transpose_a/transpose_b need 2-D inputs, got %s and %s",
            deft_shape_format(a, sa, sizeof sa), deft_shape_format(b, sb, sizeof sb));
    int64_t ka = ta ? a->dims[0] : a->dims[a->ndim - 1];
    int64_t kb = tb ? b->dims[1] : b->dims[0];
    if (ka != kb)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 1 has shape %s, expected (%lld, ...) to match input 0 of shape "
                             "%s%s",
                             deft_shape_format(b, sb, sizeof sb), (long long)ka,
                             deft_shape_format(a, sa, sizeof sa),
                             ta || tb ? " (after the requested transposes)" : "");
    int rank = (ta ? 1 : a->ndim - 1) + (tb ? 1 : b->ndim - 1);
    if (rank > DEFT_SHAPE_MAX_NDIM)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "the result would have %d dimensions, more than %d", rank,
                             DEFT_SHAPE_MAX_NDIM);
    out->ndim = 0;
    dims->m = dims->n = 1;
    dims->k = ka;
    if (ta) {
        dims->m = a->dims[1];
        out->dims[out->ndim++] = a->dims[1];
    } else {
        for (int d = 0; d < a->ndim - 1; d++)
            dims->m *= a->dims[d], out->dims[out->ndim++] = a->dims[d];
    }
    if (tb) {
        dims->n = b->dims[0];
        out->dims[out->ndim++] = b->dims[0];
    } else {
        for (int d = 1; d < b->ndim; d++)
            dims->n *= b->dims[d], out->dims[out->ndim++] = b->dims[d];
    }
    return check_blas_size(op, dims->m, dims->n, dims->k);
}

static int dot_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    dot_dims_t dims;
    if (check_float_pair(op, nin, in) || dot_shapes(op, p, in, &dims, &out[0].shape)) return -1;
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int dot_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_desc_t desc[2] = {{in[0].shape, in[0].dtype}, {in[1].shape, in[1].dtype}};
    dot_dims_t d = {0}; /* set by dot_shapes; initialised for -O3 flow analysis */
    deft_shape_t shape;
    if (dot_shapes(op, p, desc, &d, &shape)) return -1;
    return gemm1(&in[0], p[0].i, p[1].i, d.m, d.n, d.k, deft_tensor_data(&in[0]),
                 deft_tensor_data(&in[1]), 0.0, deft_tensor_data(&out[0]));
}

/* ---- batch_dot ---- */

static int batch_dot_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (check_float_pair(op, nin, in)) return -1;
    const deft_shape_t *a = &in[0].shape, *b = &in[1].shape;
    char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
    bool ta = p[0].i, tb = p[1].i;
    if (a->ndim != 3 || b->ndim != 3 || a->dims[0] != b->dims[0] ||
        (ta ? a->dims[1] : a->dims[2]) != (tb ? b->dims[2] : b->dims[1]))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "inputs have shapes %s and %s, expected (batch, m, k) and (batch, k, "
                             "n) after the requested transposes",
                             deft_shape_format(a, sa, sizeof sa),
                             deft_shape_format(b, sb, sizeof sb));
    int64_t m = ta ? a->dims[2] : a->dims[1], n = tb ? b->dims[1] : b->dims[2];
    if (check_blas_size(op, m, n, ta ? a->dims[1] : a->dims[2])) return -1;
    out[0].shape = (deft_shape_t){3, {a->dims[0], m, n}};
    out[0].dtype = in[0].dtype;
    *nout = 1;
    return 0;
}

static int batch_dot_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nin, (void)nout;
    bool ta = p[0].i, tb = p[1].i;
    const deft_shape_t *a = &in[0].shape;
    int64_t batch = a->dims[0], m = out[0].shape.dims[1], n = out[0].shape.dims[2];
    int64_t k = ta ? a->dims[1] : a->dims[2];
    gemm_batch_t g = {in[0].device,
                      in[0].dtype,
                      ta,
                      tb,
                      m,
                      n,
                      k,
                      batch,
                      deft_tensor_data(&in[0]),
                      deft_tensor_data(&in[1]),
                      m * k,
                      k * n,
                      0.0,
                      deft_tensor_data(&out[0])};
    return gemm(&g);
}

/* ---- FullyConnected ---- */

static const deft_param_def_t fc_params[] = {
    {"num_hidden", DEFT_PARAM_INT, NULL, "number of output units", NULL, false},
    {"no_bias", DEFT_PARAM_BOOL, "false", "leave out the bias input", NULL, false},
    {"flatten", DEFT_PARAM_BOOL, "true",
     "flatten data to (batch, features); otherwise apply to the last axis", NULL, false},
    {0}};

/* rows x features of the data, as FullyConnected sees it. */
static void fc_view(const deft_shape_t *data, bool flatten, int64_t *rows, int64_t *features) {
    *rows = 1;
    *features = data->ndim ? data->dims[data->ndim - 1] : 1;
    int lead = flatten ? (data->ndim ? 1 : 0) : data->ndim - 1;
    for (int d = 0; d < lead; d++) *rows *= data->dims[d];
    if (flatten) {
        *features = 1;
        for (int d = lead; d < data->ndim; d++) *features *= data->dims[d];
    }
}

static int fc_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                    const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int64_t hidden = p[0].i, rows, features;
    bool no_bias = p[1].i, flatten = p[2].i;
    char s[DEFT_SHAPE_STR_MAX];
    if (hidden < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_hidden is %lld, expected >= 1",
                             (long long)hidden);
    if (nin != (no_bias ? 2 : 3))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d (%s)", nin,
                             no_bias ? 2 : 3,
                             no_bias ? "data, weight; no_bias is true" : "data, weight, bias");
    if (check_float_pair(op, nin, in)) return -1;
    if (in[0].shape.ndim < 1)
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (data) is a scalar, expected >= 1-D");
    fc_view(&in[0].shape, flatten, &rows, &features);
    if (in[1].shape.ndim != 2 || in[1].shape.dims[0] != hidden || in[1].shape.dims[1] != features)
        return deft_op_error(
            op, DEFT_ERR_VALUE, "input 1 (weight) has shape %s, expected (%lld,%lld)",
            deft_shape_format(&in[1].shape, s, sizeof s), (long long)hidden, (long long)features);
    if (!no_bias && (in[2].shape.ndim != 1 || in[2].shape.dims[0] != hidden))
        return deft_op_error(op, DEFT_ERR_VALUE, "input 2 (bias) has shape %s, expected (%lld,)",
                             deft_shape_format(&in[2].shape, s, sizeof s), (long long)hidden);
    if (check_blas_size(op, rows, hidden, features)) return -1;
    out[0].dtype = in[0].dtype;
    if (flatten) {
        out[0].shape = (deft_shape_t){2, {in[0].shape.dims[0], hidden}};
    } else {
        out[0].shape = in[0].shape;
        out[0].shape.dims[out[0].shape.ndim - 1] = hidden;
    }
    *nout = 1;
    return 0;
}

/* Every row of y (rows x hidden) = the bias. */
static int copy_bias_rows(const deft_tensor_t *y, const deft_tensor_t *bias, int64_t rows,
                          int64_t hidden) {
#ifdef DEFT_HAVE_CUDA
    if (y->device.type == DEFT_DEV_GPU) {
        deft_tensor_t matrix = *y;
        matrix.shape = (deft_shape_t){2, {rows, hidden}};
        return deft_gpu_elementwise(DEFT_GPU_FN_COPY, &matrix, 1, &bias, NULL);
    }
#endif
    size_t row_bytes = (size_t)hidden * deft_dtype_size(y->dtype);
    for (int64_t r = 0; r < rows; r++)
        memcpy((char *)deft_tensor_data(y) + (size_t)r * row_bytes, deft_tensor_data(bias),
               row_bytes);
    return 0;
}

/*
 * The layout. y = x W^T is OpenBLAS's (N, T) call, which is slow for small
 * batches (bench/bench_gemm_layout, one thread: at batch 16 to 64 and 64 or
 * more outputs, 60-95 GFLOP/s against 100-115 for (T, T) on a transposed x).
 * x is small there (a batch of rows), so it is transposed on every call
 * (SSE 4x4 tiles, 0.1-0.3 us) and (T, T) runs. Outside that band (batch 8,
 * batch 128 and up, 10 outputs) (N, T) is as fast or faster. The fastest
 * layout of all, (N, N), would need the weight kept as W^T.
 */
static bool fc_transposes_x(const deft_tensor_t *x, int64_t rows, int64_t hidden) {
    return x->device.type == DEFT_DEV_CPU && x->dtype == DEFT_DT_FLOAT32 && rows >= 16 &&
           rows <= 64 && hidden >= 64;
}

/* t (cols x rows) = a (rows x cols)^T. */
static void transpose_f32(const float *a, int64_t rows, int64_t cols, float *t) {
    int64_t r = 0;
#if defined(__SSE2__)
    for (; r + 4 <= rows; r += 4) {
        int64_t c = 0;
        for (; c + 4 <= cols; c += 4) {
            __m128 r0 = _mm_loadu_ps(a + r * cols + c), r1 = _mm_loadu_ps(a + (r + 1) * cols + c);
            __m128 r2 = _mm_loadu_ps(a + (r + 2) * cols + c),
                   r3 = _mm_loadu_ps(a + (r + 3) * cols + c);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(t + c * rows + r, r0);
            _mm_storeu_ps(t + (c + 1) * rows + r, r1);
            _mm_storeu_ps(t + (c + 2) * rows + r, r2);
            _mm_storeu_ps(t + (c + 3) * rows + r, r3);
        }
        for (; c < cols; c++)
            for (int64_t i = r; i < r + 4; i++) t[c * rows + i] = a[i * cols + c];
    }
#endif
    for (; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) t[c * rows + r] = a[r * cols + c];
}

static int fc_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nout;
    int64_t rows, features, hidden = p[0].i;
    fc_view(&in[0].shape, p[2].i, &rows, &features);
    void *y = deft_tensor_data(&out[0]);
    double beta = 0.0;
    if (nin == 3 && rows > 0) { /* start from the bias in every row, then add data * weight^T */
        if (copy_bias_rows(&out[0], &in[2], rows, hidden)) return -1;
        beta = 1.0;
    }
    if (fc_transposes_x(&in[0], rows, hidden) && features > 0) {
        float *xt = deft_scratch_alloc((size_t)(rows * features) * sizeof *xt);
        if (!xt) return deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "cannot allocate x^T");
        transpose_f32(deft_tensor_data(&in[0]), rows, features, xt);
        int status = gemm1(&in[0], true, true, rows, hidden, features, xt, deft_tensor_data(&in[1]),
                           beta, y);
        deft_scratch_free(xt);
        return status;
    }
    return gemm1(&in[0], false, true, rows, hidden, features, deft_tensor_data(&in[0]),
                 deft_tensor_data(&in[1]), beta, y);
}

/* ---- backward of dot and batch_dot: (g, a, b) -> da or db ---- */

/*
 * With A and B viewed as dot views them (A as (m, k) or, transposed, (k, m);
 * B as (k, n) or (n, k)) and G as (m, n):
 *   dA = G B^T  (or B G^T when A was transposed)
 *   dB = A^T G  (or G^T A when B was transposed)
 * Views are reinterpretations of contiguous buffers, so any rank dot accepts works.
 */
static int backward_dot_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    dot_dims_t dims;
    deft_shape_t shape;
    if (check_float_pair(op, 3, in) || dot_shapes(op, p, in + 1, &dims, &shape)) return -1;
    if (deft_shape_size(&shape) != deft_shape_size(&in[0].shape))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (the output gradient) has %lld elements, "
                             "expected %lld",
                             (long long)deft_shape_size(&in[0].shape),
                             (long long)deft_shape_size(&shape));
    out[0] = in[op->data ? 2 : 1];
    *nout = 1;
    return 0;
}

static int backward_dot_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_desc_t desc[2] = {{in[1].shape, in[1].dtype}, {in[2].shape, in[2].dtype}};
    dot_dims_t d = {0}; /* set by dot_shapes; initialised for -O3 flow analysis */
    deft_shape_t shape;
    if (dot_shapes(op, p, desc, &d, &shape)) return -1;
    bool ta = p[0].i, tb = p[1].i, rhs = op->data != NULL;
    const void *g = deft_tensor_data(&in[0]), *a = deft_tensor_data(&in[1]),
               *b = deft_tensor_data(&in[2]);
    void *c = deft_tensor_data(&out[0]);
    if (!rhs) /* dA: (m,k) = G (m,n) . op(B)^T, or (k,m) = op(B) . G^T */
        return !ta ? gemm1(&in[0], false, !tb, d.m, d.k, d.n, g, b, 0.0, c)
                   : gemm1(&in[0], tb, true, d.k, d.m, d.n, b, g, 0.0, c);
    /* dB: (k,n) = op(A)^T . G, or (n,k) = G^T . op(A) */
    return !tb ? gemm1(&in[0], !ta, false, d.k, d.n, d.m, a, g, 0.0, c)
               : gemm1(&in[0], true, ta, d.n, d.k, d.m, g, a, 0.0, c);
}

static int backward_batch_dot_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                    const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)nin;
    deft_desc_t y;
    int n;
    if (batch_dot_infer(op, p, 2, in + 1, &n, &y)) return -1;
    if (!deft_shape_equal(&y.shape, &in[0].shape) || y.dtype != in[0].dtype)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (the output gradient) does not match "
                             "the product's shape and dtype");
    out[0] = in[op->data ? 2 : 1];
    *nout = 1;
    return 0;
}

static int backward_batch_dot_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                      const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    bool ta = p[0].i, tb = p[1].i, rhs = op->data != NULL;
    const deft_shape_t *as = &in[1].shape;
    int64_t batch = as->dims[0], m = in[0].shape.dims[1], n = in[0].shape.dims[2];
    int64_t k = ta ? as->dims[1] : as->dims[2];
    const char *g = deft_tensor_data(&in[0]), *a = deft_tensor_data(&in[1]),
               *b = deft_tensor_data(&in[2]);
    gemm_batch_t job = {.dev = in[0].device,
                        .dtype = in[0].dtype,
                        .batch = batch,
                        .beta = 0.0,
                        .c = deft_tensor_data(&out[0])};
    const int64_t sg = m * n, sa = m * k, sb = k * n;
    if (!rhs && !ta) /* dA_i = G_i op(B_i)^T */
        job.ta = false, job.tb = !tb, job.m = m, job.n = k, job.k = n, job.a = g, job.b = b,
        job.stride_a = sg, job.stride_b = sb;
    else if (!rhs) /* dA_i^T layout: op(B_i) G_i^T */
        job.ta = tb, job.tb = true, job.m = k, job.n = m, job.k = n, job.a = b, job.b = g,
        job.stride_a = sb, job.stride_b = sg;
    else if (!tb) /* dB_i = op(A_i)^T G_i */
        job.ta = !ta, job.tb = false, job.m = k, job.n = n, job.k = m, job.a = a, job.b = g,
        job.stride_a = sa, job.stride_b = sg;
    else /* dB_i^T layout: G_i^T op(A_i) */
        job.ta = true, job.tb = ta, job.m = n, job.n = k, job.k = m, job.a = g, job.b = a,
        job.stride_a = sg, job.stride_b = sa;
    return gemm(&job);
}

/* The gradients of dot-like operators: both through the backward operators. */
static int grad_dot_like(deft_grad_builder_t *b, const char *lhs_op, const char *rhs_op,
                         deft_gref_t *in_grads) {
    deft_gref_t in[3] = {b->out_grad(b, 0), b->input(b, 0), b->input(b, 1)};
    const char *const *params = GRAD_PARAMS("transpose_a", g_attr(b, "transpose_a", "false"),
                                            "transpose_b", g_attr(b, "transpose_b", "false"));
    in_grads[0] = b->apply(b, lhs_op, 3, in, params, 0);
    in_grads[1] = b->apply(b, rhs_op, 3, in, params, 0);
    return 0;
}

static int grad_dot(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                    deft_gref_t *in_grads) {
    (void)p, (void)nin;
    return grad_dot_like(b, "_backward_dot_lhs", "_backward_dot_rhs", in_grads);
}

static int grad_batch_dot(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    (void)p, (void)nin;
    return grad_dot_like(b, "_backward_batch_dot_lhs", "_backward_batch_dot_rhs", in_grads);
}

/* y = x2 w^T + bias, x2 = x flattened to (batch, features) when flatten is set. */
static int grad_fully_connected(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                                deft_gref_t *in_grads) {
    deft_gref_t x = b->input(b, 0), g = b->out_grad(b, 0);
    deft_gref_t x2 = p[2].i ? g_op1(b, "Flatten", x, GRAD_NONE) : x;
    deft_gref_t in[3] = {g, x2, b->input(b, 1)};
    const char *const *params = GRAD_PARAMS("transpose_b", "true");
    in_grads[0] =
        g_op2(b, "reshape_like", b->apply(b, "_backward_dot_lhs", 3, in, params, 0), x, GRAD_NONE);
    in_grads[1] = b->apply(b, "_backward_dot_rhs", 3, in, params, 0);
    if (nin == 3) in_grads[2] = g_op1(b, "sum", g, GRAD_PARAMS("axis", "(-1,)", "exclude", "true"));
    return 0;
}

static int fc_num_inputs(const deft_param_value_t *p) {
    return p[1].i ? 2 : 3;
}

/* weight is (num_hidden, features of data) and bias (num_hidden,), once data is known. */
/* Data whose leading dimensions are open (a 0 in an MXNet graph's shape, the
 * batch of Gluon's begin state): they are the output's, and the features are
 * the weight's columns. Only a data of known rank, flat (2-D) unless
 * flatten=false. */
static void fc_data_from_output(const deft_param_value_t *p, deft_desc_t *in, bool *known,
                                const deft_desc_t *out) {
    deft_shape_t s = in[0].shape;
    if (s.ndim < 1 || s.ndim != out[0].shape.ndim || (p[2].i && s.ndim != 2)) return;
    for (int d = 0; d + 1 < s.ndim; d++) s.dims[d] = out[0].shape.dims[d];
    s.dims[s.ndim - 1] = in[1].shape.dims[1];
    in[0] = (deft_desc_t){s, in[1].dtype};
    known[0] = true;
}

static int fc_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                           deft_desc_t *in, bool *known, const deft_desc_t *out,
                           const bool *out_known) {
    (void)op;
    if (!known[0] && known[1] && out_known[0] && in[1].shape.ndim == 2)
        fc_data_from_output(p, in, known, out);
    if (!known[0] || in[0].shape.ndim < 1) return 0;
    int64_t rows, features;
    fc_view(&in[0].shape, p[2].i, &rows, &features);
    if (!known[1]) {
        in[1] = (deft_desc_t){{2, {p[0].i, features}}, in[0].dtype};
        known[1] = true;
    }
    if (nin > 2 && !known[2]) {
        in[2] = (deft_desc_t){{1, {p[0].i}}, in[0].dtype};
        known[2] = true;
    }
    return 0;
}

static const char *const lhs_rhs[] = {"lhs", "rhs", NULL};
static const char *const fc_inputs[] = {"data", "weight", "bias", NULL};

static const char *const grad_lhs_rhs[] = {"grad", "lhs", "rhs", NULL};

#define BACKWARD_OP(name_, doc, infer_, forward_, data_)                                           \
    {                                                                                              \
        .name = name_, .description = doc, .input_names = grad_lhs_rhs, .min_inputs = 3,           \
        .max_inputs = 3, .params = dot_params, .infer = infer_, .forward = forward_,               \
        .forward_gpu = DEFT_GPU(forward_), .inplace_input = -1, .data = data_                      \
    }

static const deft_op_t linalg_ops[] = {
    {.name = "dot",
     .description = "Matrix product: lhs (..., k) with rhs (k, ...); 1-D inputs give the inner "
                    "product.",
     .input_names = lhs_rhs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = dot_params,
     .infer = dot_infer,
     .forward = dot_forward,
     .forward_gpu = DEFT_GPU(dot_forward),
     .inplace_input = -1,
     .gradient = grad_dot},
    {.name = "batch_dot",
     .description = "Batched matrix product: (batch, m, k) with (batch, k, n) gives (batch, m, n).",
     .input_names = lhs_rhs,
     .min_inputs = 2,
     .max_inputs = 2,
     .params = dot_params,
     .infer = batch_dot_infer,
     .forward = batch_dot_forward,
     .forward_gpu = DEFT_GPU(batch_dot_forward),
     .inplace_input = -1,
     .gradient = grad_batch_dot},
    {.name = "FullyConnected",
     .description = "Dense layer: data * weight^T + bias, with weight (num_hidden, features).",
     .input_names = fc_inputs,
     .min_inputs = 2,
     .max_inputs = 3,
     .params = fc_params,
     .infer = fc_infer,
     .forward = fc_forward,
     .forward_gpu = DEFT_GPU(fc_forward),
     .inplace_input = -1,
     .num_inputs = fc_num_inputs,
     .infer_inputs = fc_infer_inputs,
     .gradient = grad_fully_connected},
    BACKWARD_OP("_backward_dot_lhs", "Gradient of dot with respect to lhs.", backward_dot_infer,
                backward_dot_forward, NULL),
    BACKWARD_OP("_backward_dot_rhs", "Gradient of dot with respect to rhs.", backward_dot_infer,
                backward_dot_forward, "rhs"),
    BACKWARD_OP("_backward_batch_dot_lhs", "Gradient of batch_dot with respect to lhs.",
                backward_batch_dot_infer, backward_batch_dot_forward, NULL),
    BACKWARD_OP("_backward_batch_dot_rhs", "Gradient of batch_dot with respect to rhs.",
                backward_batch_dot_infer, backward_batch_dot_forward, "rhs"),
};

DEFT_OP_FAMILY(deft_family_linalg, linalg_ops);
