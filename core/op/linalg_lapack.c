/*
 * Dense linear algebra through LAPACK, which OpenBLAS ships: inverse,
 * determinant, solve, Cholesky, QR, SVD and the symmetric eigenproblem.
 * Each works on the last two axes of a float32 or float64 array, and the
 * leading axes are a batch. deft.np.linalg calls them with NumPy's semantics.
 *
 * Each matrix is copied into a float64 workspace, in LAPACK's column-major
 * order, and solved with the double-precision routine. The result is copied
 * back into the output's dtype. The copies cost O(n^2) against the
 * routines' O(n^3), and one code path serves both dtypes (float32 results
 * are then the float64 answer, rounded).
 *
 * CPU only: they have no GPU kernel, and a GPU array gets an error naming
 * the operator. Their gradients are the backward operators of
 * linalg_lapack_backward.c (first order only: those have no gradient).
 */
#include <math.h>
#include <string.h>

#include "core/base/scratch.h"
#include "core/op/grad.h"
#include "core/op/linalg_lapack.h"
#include "core/op/op.h"

#define MAX_OUTPUTS 3

/* One matrix of the batch: the workspace, and where its results go. */
typedef struct solve_ctx {
    const deft_op_t *op;
    const deft_param_value_t *p;
    const deft_tensor_t *in, *out;
    int64_t index; /* which matrix of the batch */
    int m, n;      /* input 0's last two dimensions */
} solve_ctx_t;

/* Matrix `index` of t (rows x cols, row-major) into dst, column-major. */
static void load(const deft_tensor_t *t, int64_t index, int rows, int cols, double *dst) {
    size_t size = (size_t)rows * cols, at = (size_t)index * size;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            size_t k = at + (size_t)i * cols + j;
            dst[(size_t)j * rows + i] = t->dtype == DEFT_DT_FLOAT64
                                            ? ((const double *)deft_tensor_data(t))[k]
                                            : ((const float *)deft_tensor_data(t))[k];
        }
}

/* src (rows x cols, column-major, leading dimension ld) into matrix `index` of t. */
static void store(const deft_tensor_t *t, int64_t index, int rows, int cols, const double *src,
                  int ld) {
    size_t at = (size_t)index * rows * cols;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double v = src[(size_t)j * ld + i];
            size_t k = at + (size_t)i * cols + j;
            if (t->dtype == DEFT_DT_FLOAT64)
                ((double *)deft_tensor_data(t))[k] = v;
            else
                ((float *)deft_tensor_data(t))[k] = (float)v;
        }
}

static void store_vector(const deft_tensor_t *t, int64_t index, int n, const double *src) {
    store(t, index, 1, n, src, 1);
}

static int no_memory(const solve_ctx_t *c) {
    return deft_op_error(c->op, DEFT_ERR_OUT_OF_MEMORY, "no memory for LAPACK's workspace");
}

static int lapack_failed(const solve_ctx_t *c, const char *what, int info) {
    if (info < 0)
        return deft_op_error(c->op, DEFT_ERR_INTERNAL, "LAPACK rejected argument %d", -info);
    return deft_op_error(c->op, DEFT_ERR_VALUE, "matrix %lld of the batch %s", (long long)c->index,
                         what);
}

/* A workspace of `count` doubles: LAPACK's answer to a size query (lwork = -1). */
static double *workspace(double count, int *lwork) {
    *lwork = count > 1 ? (int)count : 1;
    return deft_scratch_alloc(sizeof(double) * (size_t)*lwork);
}

/* ---- the routines, one matrix each; a is the input in column-major order ---- */

static int inverse(const solve_ctx_t *c, double *a) {
    int n = c->n, info = 0, lwork = -1, *ipiv = deft_scratch_alloc(sizeof(int) * (size_t)n + 1);
    double query = 0, *work = NULL;
    if (!ipiv) return no_memory(c);
    if (n == 0) return deft_scratch_free(ipiv), 0; /* nothing to invert */
    dgetrf_(&n, &n, a, &n, ipiv, &info);
    if (info == 0) dgetri_(&n, a, &n, ipiv, &query, &lwork, &info);
    if (info == 0 && (work = workspace(query, &lwork)) != NULL)
        dgetri_(&n, a, &n, ipiv, work, &lwork, &info);
    deft_scratch_free(ipiv);
    deft_scratch_free(work);
    if (info) return lapack_failed(c, "is singular", info);
    if (!work) return no_memory(c);
    store(&c->out[0], c->index, n, n, a, n);
    return 0;
}

static int determinant(const solve_ctx_t *c, double *a) {
    int n = c->n, info = 0, *ipiv = deft_scratch_alloc(sizeof(int) * (size_t)n + 1);
    if (!ipiv) return no_memory(c);
    if (n > 0) dgetrf_(&n, &n, a, &n, ipiv, &info); /* an empty matrix's determinant is 1 */
    if (info < 0) return deft_scratch_free(ipiv), lapack_failed(c, "", info);
    double det = 1; /* info > 0: an exact 0 on U's diagonal, so det is 0 */
    for (int i = 0; i < n; i++)
        det *= ipiv[i] != i + 1 ? -a[(size_t)i * n + i] : a[(size_t)i * n + i];
    deft_scratch_free(ipiv);
    store_vector(&c->out[0], c->index, 1, &det);
    return 0;
}

/* in[1] is (n, k), or (n) when it has one dimension less than a. */
static int solve(const solve_ctx_t *c, double *a) {
    const deft_tensor_t *b = &c->in[1];
    int n = c->n,
        k = b->shape.ndim == c->in[0].shape.ndim ? (int)b->shape.dims[b->shape.ndim - 1] : 1;
    int info = 0, *ipiv = deft_scratch_alloc(sizeof(int) * (size_t)n + 1);
    double *x = deft_scratch_alloc(sizeof(double) * ((size_t)n * k + 1));
    if (!ipiv || !x) return deft_scratch_free(ipiv), deft_scratch_free(x), no_memory(c);
    load(b, c->index, n, k, x);
    if (n > 0) dgesv_(&n, &k, a, &n, ipiv, x, &n, &info);
    if (info == 0) store(&c->out[0], c->index, n, k, x, n);
    deft_scratch_free(ipiv);
    deft_scratch_free(x);
    return info ? lapack_failed(c, "is singular", info) : 0;
}

static int cholesky(const solve_ctx_t *c, double *a) {
    int n = c->n, info = 0;
    if (n > 0) dpotrf_("L", &n, a, &n, &info, 1);
    if (info) return lapack_failed(c, "is not positive definite", info);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < j; i++) a[(size_t)j * n + i] = 0; /* the upper triangle */
    store(&c->out[0], c->index, n, n, a, n);
    return 0;
}

/* Reduced QR: Q (m, k) and R (k, n), k = min(m, n). */
static int qr(const solve_ctx_t *c, double *a) {
    int m = c->m, n = c->n, k = m < n ? m : n, info = 0, lwork = -1;
    double query = 0, *work = NULL, *tau = deft_scratch_alloc(sizeof(double) * ((size_t)k + 1));
    double *r = deft_scratch_alloc(sizeof(double) * ((size_t)k * n + 1));
    if (!tau || !r) return deft_scratch_free(tau), deft_scratch_free(r), no_memory(c);
    if (k > 0) {
        dgeqrf_(&m, &n, a, &m, tau, &query, &lwork, &info);
        if ((work = workspace(query, &lwork)) != NULL) {
            dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
            for (int j = 0; j < n; j++)
                for (int i = 0; i < k; i++)
                    r[(size_t)j * k + i] = i <= j ? a[(size_t)j * m + i] : 0;
            lwork = -1;
            dorgqr_(&m, &k, &k, a, &m, tau, &query, &lwork, &info);
            deft_scratch_free(work);
            if ((work = workspace(query, &lwork)) != NULL)
                dorgqr_(&m, &k, &k, a, &m, tau, work, &lwork, &info);
        }
    }
    bool done = k == 0 || work;
    if (done && !info)
        store(&c->out[0], c->index, m, k, a, m), store(&c->out[1], c->index, k, n, r, k);
    deft_scratch_free(work), deft_scratch_free(tau), deft_scratch_free(r);
    return !done ? no_memory(c) : info ? lapack_failed(c, "", info) : 0;
}

static bool all_finite(const double *a, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (!isfinite(a[i])) return false;
    return true;
}

/* SVD: U (m, m or k), S (k), V^T (n or k, n), k = min(m, n); full_matrices picks. */
static int svd(const solve_ctx_t *c, double *a) {
    int m = c->m, n = c->n, k = m < n ? m : n, full = (int)c->p[0].i, info = 0, lwork = -1;
    if (!all_finite(a, (size_t)m * n)) /* dgesdd refuses them as a bad argument */
        return deft_op_error(c->op, DEFT_ERR_VALUE,
                             "matrix %lld of the batch holds NaN or infinity: its SVD did not "
                             "converge",
                             (long long)c->index);
    int ucols = full ? m : k, vrows = full ? n : k, ldu = m > 1 ? m : 1,
        ldvt = vrows > 1 ? vrows : 1;
    double query = 0, *work = NULL;
    double *s = deft_scratch_alloc(sizeof(double) * ((size_t)k + 1));
    double *u = deft_scratch_alloc(sizeof(double) * ((size_t)m * ucols + 1));
    double *vt = deft_scratch_alloc(sizeof(double) * ((size_t)vrows * n + 1));
    int *iwork = deft_scratch_alloc(sizeof(int) * (8 * (size_t)k + 1));
    bool room = s && u && vt && iwork;
    if (room && k > 0) {
        const char *jobz = full ? "A" : "S";
        dgesdd_(jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, &query, &lwork, iwork, &info, 1);
        room = (work = workspace(query, &lwork)) != NULL;
        if (room)
            dgesdd_(jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    } else if (room && full) { /* no singular values: U and V^T are identities */
        memset(u, 0, sizeof(double) * (size_t)m * m);
        memset(vt, 0, sizeof(double) * (size_t)n * n);
        for (int i = 0; i < m; i++) u[(size_t)i * m + i] = 1;
        for (int i = 0; i < n; i++) vt[(size_t)i * n + i] = 1;
    }
    if (room && !info) {
        store(&c->out[0], c->index, m, ucols, u, ldu);
        store_vector(&c->out[1], c->index, k, s);
        store(&c->out[2], c->index, vrows, n, vt, ldvt);
    }
    deft_scratch_free(work), deft_scratch_free(s), deft_scratch_free(u), deft_scratch_free(vt);
    deft_scratch_free(iwork);
    return !room ? no_memory(c) : info ? lapack_failed(c, "did not converge in SVD", info) : 0;
}

/* Symmetric eigenproblem from the lower triangle: eigenvalues ascending, eigenvectors as columns.
 */
static int eigh(const solve_ctx_t *c, double *a) {
    int n = c->n, info = 0, lwork = -1, liwork = -1, iquery = 0;
    double query = 0, *work = NULL, *w = deft_scratch_alloc(sizeof(double) * ((size_t)n + 1));
    int *iwork = NULL;
    if (w && n > 0) {
        dsyevd_("V", "L", &n, a, &n, w, &query, &lwork, &iquery, &liwork, &info, 1, 1);
        work = workspace(query, &lwork);
        liwork = iquery > 1 ? iquery : 1;
        iwork = deft_scratch_alloc(sizeof(int) * (size_t)liwork);
        if (work && iwork)
            dsyevd_("V", "L", &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    }
    bool room = w && (n == 0 || (work && iwork));
    if (room && !info) {
        store_vector(&c->out[0], c->index, n, w);
        store(&c->out[1], c->index, n, n, a, n);
    }
    deft_scratch_free(work), deft_scratch_free(iwork), deft_scratch_free(w);
    return !room ? no_memory(c) : info ? lapack_failed(c, "did not converge in eigh", info) : 0;
}

/* ---- shapes ---- */

typedef int (*routine_fn)(const solve_ctx_t *c, double *a);

/* What each operator is: its routine, whether input 0 must be square, its
 * outputs, and its gradient's operator and what that reads (linalg_gradient). */
typedef struct linalg_kind {
    routine_fn routine;
    bool square;
    int nout;
    const char *backward, *reads;
} linalg_kind_t;

int64_t deft_lapack_batch(const deft_shape_t *s) {
    int64_t count = 1;
    for (int d = 0; d < s->ndim - 2; d++) count *= s->dims[d];
    return count;
}

/* s with its last `drop` dimensions replaced by the `add` given. */
static deft_shape_t batch_shape(const deft_shape_t *s, int drop, int add, int64_t d0, int64_t d1) {
    deft_shape_t r = *s;
    r.ndim -= drop;
    if (add > 0) r.dims[r.ndim++] = d0;
    if (add > 1) r.dims[r.ndim++] = d1;
    return r;
}

int deft_lapack_check_matrix(const deft_op_t *op, int k, const deft_desc_t *in, bool square) {
    const deft_shape_t *s = &in[k].shape;
    if (in[k].dtype != DEFT_DT_FLOAT32 && in[k].dtype != DEFT_DT_FLOAT64)
        return deft_op_error(op, DEFT_ERR_TYPE, "input %d is %s, expected float32 or float64", k,
                             deft_dtype_name(in[k].dtype));
    if (s->ndim < 2)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d has %d dimensions, expected at least 2 (a matrix)", k,
                             s->ndim);
    if (s->dims[s->ndim - 1] > INT32_MAX || s->dims[s->ndim - 2] > INT32_MAX)
        return deft_op_error(op, DEFT_ERR_VALUE, "input %d has a side over LAPACK's 2^31-1", k);
    if (square && s->dims[s->ndim - 1] != s->dims[s->ndim - 2]) {
        char text[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d has shape %s: its last two dimensions must be square", k,
                             deft_shape_format(s, text, sizeof text));
    }
    return 0;
}

int deft_lapack_check_rhs(const deft_op_t *op, const deft_desc_t *in, int ia, int ib) {
    const deft_shape_t *a = &in[ia].shape, *b = &in[ib].shape;
    bool matrix = b->ndim == a->ndim, fits = matrix || b->ndim == a->ndim - 1;
    for (int d = 0; fits && d < a->ndim - 1; d++) fits = b->dims[d] == a->dims[d];
    if (!fits || in[ib].dtype != in[ia].dtype) {
        char sa[DEFT_SHAPE_STR_MAX], sb[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input %d (%s) is %s %s, expected %s with %s's batch and rows: "
                             "(..., n, k) or (..., n) for %s of %s",
                             ib, deft_op_input_name(op, ib), deft_shape_format(b, sb, sizeof sb),
                             deft_dtype_name(in[ib].dtype), deft_dtype_name(in[ia].dtype),
                             deft_op_input_name(op, ia), deft_op_input_name(op, ia),
                             deft_shape_format(a, sa, sizeof sa));
    }
    return matrix && b->dims[b->ndim - 1] > INT32_MAX
               ? deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has over 2^31-1 columns", ib,
                               deft_op_input_name(op, ib))
               : 0;
}

static int linalg_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    const linalg_kind_t *kind = op->data;
    if (deft_lapack_check_matrix(op, 0, in, kind->square) ||
        (nin == 2 && deft_lapack_check_rhs(op, in, 0, 1)))
        return -1;
    const deft_shape_t *s = &in[0].shape;
    int64_t m = s->dims[s->ndim - 2], n = s->dims[s->ndim - 1], k = m < n ? m : n;
    for (int i = 0; i < kind->nout; i++) out[i].dtype = in[0].dtype;
    out[0].shape = *s; /* inverse, cholesky */
    if (kind->routine == determinant) out[0].shape = batch_shape(s, 2, 0, 0, 0);
    if (kind->routine == solve) out[0].shape = in[1].shape;
    if (kind->routine == qr)
        out[0].shape = batch_shape(s, 2, 2, m, k), out[1].shape = batch_shape(s, 2, 2, k, n);
    if (kind->routine == svd) {
        bool full = p[0].i;
        out[0].shape = batch_shape(s, 2, 2, m, full ? m : k);
        out[1].shape = batch_shape(s, 2, 1, k, 0);
        out[2].shape = batch_shape(s, 2, 2, full ? n : k, n);
    }
    if (kind->routine == eigh) out[0].shape = batch_shape(s, 2, 1, n, 0), out[1].shape = *s;
    *nout = kind->nout;
    return 0;
}

static int linalg_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    const linalg_kind_t *kind = op->data;
    const deft_shape_t *s = &in[0].shape;
    solve_ctx_t c = {.op = op, .p = p, .in = in, .out = out};
    c.m = (int)s->dims[s->ndim - 2], c.n = (int)s->dims[s->ndim - 1];
    double *a = deft_scratch_alloc(sizeof(double) * ((size_t)c.m * c.n + 1));
    if (!a) return no_memory(&c);
    int status = 0;
    for (c.index = 0; status == 0 && c.index < deft_lapack_batch(s); c.index++) {
        load(&in[0], c.index, c.m, c.n, a);
        status = kind->routine(&c, a);
    }
    deft_scratch_free(a);
    return status;
}

static int linalg_three_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p, (void)num_inputs;
    return 3;
}

/* ---- gradients: the backward operators of linalg_lapack_backward.c ---- */

/* Input k's gradient is output k of the kind's backward operator, applied to
 * what `reads` names, in order: a letter and a digit k each, 'g' the gradient
 * of output k, 'i' input k, 'o' output k. */
static int linalg_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    (void)p;
    const linalg_kind_t *kind = b->op->data;
    deft_gref_t in[8];
    int n = 0;
    for (const char *r = kind->reads; r[0] && r[1] && n < 8; r += 2) {
        int k = r[1] - '0';
        in[n++] = r[0] == 'g' ? b->out_grad(b, k) : r[0] == 'i' ? b->input(b, k) : b->output(b, k);
    }
    deft_gref_t grad = b->apply(b, kind->backward, n, in, GRAD_NONE, 0);
    for (int k = 0; k < nin; k++) in_grads[k] = (deft_gref_t){grad.node, k};
    return 0;
}

static const linalg_kind_t k_inv = {inverse, true, 1, "_backward_linalg_inv", "g0o0"},
                           k_det = {determinant, true, 1, "_backward_linalg_det", "g0i0o0"},
                           k_solve = {solve, true, 1, "_backward_linalg_solve", "g0i0o0"},
                           k_cholesky = {cholesky, true, 1, "_backward_linalg_cholesky", "g0o0"},
                           k_qr = {qr, false, 2, "_backward_linalg_qr", "g0g1o0o1"},
                           k_svd = {svd, false, 3, "_backward_linalg_svd", "g0g1g2o0o1o2"},
                           k_eigh = {eigh, true, 2, "_backward_linalg_eigh", "g0g1o0o1"};

static const deft_param_def_t svd_params[] = {
    {"full_matrices", DEFT_PARAM_BOOL, "false",
     "U (m, m) and V^T (n, n), or the reduced (m, k) and (k, n)", NULL, false},
    {0}};

static const char *const a_input[] = {"a", NULL};
static const char *const solve_inputs[] = {"a", "b", NULL};
static const char *const qr_outputs[] = {"q", "r", NULL};
static const char *const svd_outputs[] = {"u", "s", "vh", NULL};
static const char *const eigh_outputs[] = {"w", "v", NULL};

#define LINALG_OP(name_, text, kind_, inputs, n_in, ...)                                           \
    {                                                                                              \
        .name = name_, .description = text, .input_names = inputs, .min_inputs = n_in,             \
        .max_inputs = n_in, .infer = linalg_infer, .forward = linalg_forward, .inplace_input = -1, \
        .data = &kind_, .gradient = linalg_gradient, __VA_ARGS__                                   \
    }

static const deft_op_t linalg_lapack_ops[] = {
    LINALG_OP("_linalg_inv", "The inverse of each matrix (last two axes).", k_inv, a_input, 1),
    LINALG_OP("_linalg_det", "The determinant of each matrix (last two axes).", k_det, a_input, 1),
    LINALG_OP("_linalg_solve",
              "x with a x = b for each matrix a; b is (..., n, k) or (..., n) with a's batch.",
              k_solve, solve_inputs, 2),
    LINALG_OP("_linalg_cholesky",
              "The lower-triangular L with a = L L^T of each symmetric positive-definite matrix.",
              k_cholesky, a_input, 1),
    LINALG_OP("_linalg_qr", "The reduced QR decomposition of each matrix: q (m, k) and r (k, n).",
              k_qr, a_input, 1, .num_outputs = deft_op_two_outputs, .output_names = qr_outputs),
    LINALG_OP("_linalg_svd", "The singular value decomposition a = u diag(s) vh of each matrix.",
              k_svd, a_input, 1, .params = svd_params, .num_outputs = linalg_three_outputs,
              .output_names = svd_outputs),
    LINALG_OP("_linalg_eigh",
              "Eigenvalues (ascending) and eigenvectors (columns) of each symmetric matrix, "
              "from its lower triangle.",
              k_eigh, a_input, 1, .num_outputs = deft_op_two_outputs, .output_names = eigh_outputs),
};

DEFT_OP_FAMILY(deft_family_linalg_lapack, linalg_lapack_ops);
