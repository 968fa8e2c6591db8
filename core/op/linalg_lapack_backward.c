/*
 * The gradients of the LAPACK operators (linalg_lapack.c), one backward
 * operator each, batched over the leading axes like the forward. Each
 * matrix is copied into float64 and worked on in row-major order with
 * OpenBLAS's products (deft_gemm) and LU inverses; the gradients are
 * rounded back to the input's dtype. For y = f(a) and a head gradient g:
 *
 *   inv       da = -y^T g y^T
 *   det       da = g det(a) a^-T                 (a must be invertible)
 *   solve     db = a^-T g,  da = -db x^T
 *   cholesky  S = L^-T Phi(L^T g) L^-1, Phi: the lower triangle with its
 *             diagonal halved (Murray 2016, "Differentiation of the Cholesky
 *             decomposition")
 *   qr        (m >= n) da = [gq + q copyltu(M)] r^-T,  M = r gr^T - gq^T q,
 *             copyltu: the lower triangle mirrored onto the upper one
 *   svd       the reduced SVD's (as PyTorch's svd_backward): the singular
 *             vectors' part divides by s_k^2 - s_j^2, and for m != n by s
 *   eigh      V (diag(gw) + F o V^T gV) V^T,  F_ij = 1 / (w_j - w_i)
 *
 * cholesky and eigh read only the lower triangle of a, so their gradient is
 * the derivative of that: S symmetrised, with each off-diagonal entry of the
 * lower triangle carrying both halves and the upper triangle 0. Through any
 * symmetric input (a = b b^T, or (x + x^T) / 2) this gives the same as the
 * symmetric convention of PyTorch.
 *
 * Degenerate cases: with repeated singular values (eigenvalues) the singular
 * vectors (eigenvectors) are not unique and their gradient does not exist;
 * those terms come out infinite, except where the head gradient's share is
 * exactly 0 (a loss of the values alone, or of s alone with zero singular
 * values), which counts as 0, so the values' gradient is always finite.
 * qr's wide case (m < n) and det of a singular matrix raise errors, and so
 * does an SVD with full_matrices and m != n when the gradient reaches its
 * extra singular vectors (they are arbitrary); one through s alone, or the
 * first min(m, n) vectors, is the reduced SVD's.
 *
 * These backward operators have no gradient of their own (first order only).
 */
#include <string.h>

#include "core/base/scratch.h"
#include "core/op/gemm.h"
#include "core/op/linalg_lapack.h"
#include "core/op/op.h"

enum { SLOTS = 12 }; /* matrices of workspace a routine may use */

/* One matrix of the batch, and a workspace of SLOTS matrices of side `big`. */
typedef struct back_ctx {
    const deft_op_t *op;
    const deft_tensor_t *in, *out;
    int64_t index;
    int m, n, k; /* the forward input's rows and columns, and min(m, n) */
    size_t slot; /* doubles per workspace matrix */
    double *ws;
    int *ipiv;
} back_ctx_t;

static double *slot(const back_ctx_t *c, int i) {
    return c->ws + (size_t)i * c->slot;
}

static int64_t last(const deft_shape_t *s, int from_end) {
    return s->dims[s->ndim - from_end];
}

/* Block `index` of `count` elements of t, into dst as doubles. */
static void get(const deft_tensor_t *t, int64_t index, int64_t count, double *dst) {
    size_t at = (size_t)(index * count);
    for (int64_t i = 0; i < count; i++)
        dst[i] = t->dtype == DEFT_DT_FLOAT64 ? ((const double *)deft_tensor_data(t))[at + i]
                                             : ((const float *)deft_tensor_data(t))[at + i];
}

static void put(const deft_tensor_t *t, int64_t index, int64_t count, const double *src) {
    size_t at = (size_t)(index * count);
    for (int64_t i = 0; i < count; i++) {
        if (t->dtype == DEFT_DT_FLOAT64)
            ((double *)deft_tensor_data(t))[at + i] = src[i];
        else
            ((float *)deft_tensor_data(t))[at + i] = (float)src[i];
    }
}

/* The top-left rows x cols of matrix `index` (of `all_rows` x `all_cols`)
 * of t into dst; whether the rest of the matrix is all 0 (work: room for it). */
static bool get_corner(const deft_tensor_t *t, int64_t index, int all_rows, int all_cols, int rows,
                       int cols, double *dst, double *work) {
    bool rest_zero = true;
    get(t, index, (int64_t)all_rows * all_cols, work);
    for (int i = 0; i < all_rows; i++)
        for (int j = 0; j < all_cols; j++) {
            if (i < rows && j < cols)
                dst[i * cols + j] = work[i * all_cols + j];
            else
                rest_zero = rest_zero && work[i * all_cols + j] == 0;
        }
    return rest_zero;
}

/* c (m x n) = op(a) op(b), row-major; op(a) is m x k. */
static void mm(bool ta, bool tb, int m, int n, int k, const double *a, const double *b, double *c) {
    if (k == 0) {
        memset(c, 0, sizeof(double) * (size_t)m * n);
        return;
    }
    (void)deft_gemm(deft_device_cpu(), DEFT_DT_FLOAT64, ta, tb, m, n, k, a, b, 0.0, c);
}

/* The inverse of the n x n row-major a, in place (the LU inverse of a^T's
 * column-major view is a^-1's row-major one); LAPACK's info. */
static int invert(const back_ctx_t *c, int n, double *a, double *work) {
    int info = 0, lwork = n * n > 1 ? n * n : 1;
    if (n == 0) return 0;
    dgetrf_(&n, &n, a, &n, c->ipiv, &info);
    if (info == 0) dgetri_(&n, a, &n, c->ipiv, work, &lwork, &info);
    return info;
}

static int singular(const back_ctx_t *c, const char *what) {
    return deft_op_error(c->op, DEFT_ERR_VALUE, "matrix %lld of the batch: %s", (long long)c->index,
                         what);
}

/* x / y, with 0 for x == 0 whatever y is: a zero share of the head gradient
 * contributes nothing, even where the formula divides by zero. */
static double share(double x, double y) {
    return x == 0 ? 0 : x / y;
}

/* The lower triangle of the symmetric part's derivative: s + s^T below the
 * diagonal, s on it, 0 above (for the operators that read a's lower triangle). */
static void lower_of_symmetric(int n, const double *s, double *d) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            d[i * n + j] = i > j ? s[i * n + j] + s[j * n + i] : i == j ? s[i * n + i] : 0;
}

/* ---- the routines: one matrix each, inputs as the table below lists them ---- */

/* (g, y) -> -y^T g y^T */
static int inv_back(const back_ctx_t *c) {
    int n = c->n;
    double *g = slot(c, 0), *y = slot(c, 1), *t = slot(c, 2), *d = slot(c, 3);
    get(&c->in[0], c->index, (int64_t)n * n, g), get(&c->in[1], c->index, (int64_t)n * n, y);
    mm(true, false, n, n, n, y, g, t);
    mm(false, true, n, n, n, t, y, d);
    for (int i = 0; i < n * n; i++) d[i] = -d[i];
    put(&c->out[0], c->index, (int64_t)n * n, d);
    return 0;
}

/* (g, a, det) -> g det a^-T */
static int det_back(const back_ctx_t *c) {
    int n = c->n;
    double *a = slot(c, 0), *d = slot(c, 1), g, det;
    get(&c->in[0], c->index, 1, &g), get(&c->in[2], c->index, 1, &det);
    get(&c->in[1], c->index, (int64_t)n * n, a);
    if (invert(c, n, a, slot(c, 2)))
        return singular(c, "is singular, and det's gradient needs its inverse");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) d[i * n + j] = g * det * a[j * n + i];
    put(&c->out[0], c->index, (int64_t)n * n, d);
    return 0;
}

/* (g, a, x) -> da = -db x^T, db = a^-T g; x and b are (n, k) or (n) */
static int solve_back(const back_ctx_t *c) {
    int n = c->n, k = c->in[2].shape.ndim == c->in[1].shape.ndim
                          ? (int)c->in[2].shape.dims[c->in[2].shape.ndim - 1]
                          : 1;
    double *a = slot(c, 0), *g = slot(c, 1), *x = slot(c, 2), *db = slot(c, 3), *da = slot(c, 4);
    get(&c->in[1], c->index, (int64_t)n * n, a);
    get(&c->in[0], c->index, (int64_t)n * k, g), get(&c->in[2], c->index, (int64_t)n * k, x);
    if (invert(c, n, a, slot(c, 5))) return singular(c, "is singular");
    mm(true, false, n, k, n, a, g, db);
    mm(false, true, n, n, k, db, x, da);
    for (int i = 0; i < n * n; i++) da[i] = -da[i];
    put(&c->out[0], c->index, (int64_t)n * n, da), put(&c->out[1], c->index, (int64_t)n * k, db);
    return 0;
}

/* (g, L) -> L^-T Phi(L^T g) L^-1, as the lower triangle's derivative */
static int cholesky_back(const back_ctx_t *c) {
    int n = c->n;
    double *g = slot(c, 0), *l = slot(c, 1), *phi = slot(c, 2), *t = slot(c, 3), *s = slot(c, 4);
    get(&c->in[0], c->index, (int64_t)n * n, g), get(&c->in[1], c->index, (int64_t)n * n, l);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) g[i * n + j] = 0; /* L's upper triangle is always 0 */
    mm(true, false, n, n, n, l, g, phi);
    for (int i = 0; i < n; i++) {
        phi[i * n + i] /= 2;
        for (int j = i + 1; j < n; j++) phi[i * n + j] = 0;
    }
    if (invert(c, n, l, slot(c, 5))) return singular(c, "L is singular");
    mm(true, false, n, n, n, l, phi, t);
    mm(false, false, n, n, n, t, l, s);
    lower_of_symmetric(n, s, t);
    put(&c->out[0], c->index, (int64_t)n * n, t);
    return 0;
}

/* (gq, gr, q, r) -> [gq + q copyltu(r gr^T - gq^T q)] r^-T, for m >= n (k = n) */
static int qr_back(const back_ctx_t *c) {
    int m = c->m, n = c->n;
    double *gq = slot(c, 0), *gr = slot(c, 1), *q = slot(c, 2), *r = slot(c, 3), *mat = slot(c, 4),
           *t = slot(c, 5), *b = slot(c, 6), *d = slot(c, 7);
    get(&c->in[0], c->index, (int64_t)m * n, gq), get(&c->in[1], c->index, (int64_t)n * n, gr);
    get(&c->in[2], c->index, (int64_t)m * n, q), get(&c->in[3], c->index, (int64_t)n * n, r);
    mm(false, true, n, n, n, r, gr, mat);
    mm(true, false, n, n, m, gq, q, t);
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) t[j * n + i] = t[i * n + j] = mat[i * n + j] - t[i * n + j];
    mm(false, false, m, n, n, q, t, b);
    for (int i = 0; i < m * n; i++) b[i] += gq[i];
    if (invert(c, n, r, slot(c, 8)))
        return singular(c, "R is singular (a's columns are dependent), and qr's gradient divides "
                           "by it");
    mm(false, true, m, n, n, b, r, d);
    put(&c->out[0], c->index, (int64_t)m * n, d);
    return 0;
}

/* t -= u (u^T t): t (rows x k) less its part in the span of u's k orthonormal columns. */
static void project_out(int rows, int k, const double *u, double *t, double *p, double *w) {
    mm(true, false, k, k, rows, u, t, p);
    mm(false, false, rows, k, k, u, p, w);
    for (int i = 0; i < rows * k; i++) t[i] -= w[i];
}

/* (gu, gs, gvh, u, s, vh) -> da of the reduced SVD */
static int svd_back(const back_ctx_t *c) {
    int m = c->m, n = c->n, k = c->k;
    double *gu = slot(c, 0), *gvh = slot(c, 1), *u = slot(c, 2), *vh = slot(c, 3), *j = slot(c, 4),
           *kk = slot(c, 5), *w = slot(c, 6), *t = slot(c, 7), *p = slot(c, 8), *d = slot(c, 9),
           *gs = slot(c, 10), *s = slot(c, 11);
    /* with full_matrices, u is (m, m) and vh (n, n): the reduced ones are their first k
     * columns (rows), and the gradient must not reach the others, which are arbitrary */
    int ucols = (int)last(&c->in[3].shape, 1), vrows = (int)last(&c->in[5].shape, 2);
    bool u_reduced = get_corner(&c->in[0], c->index, m, ucols, m, k, gu, d);
    bool vh_reduced = get_corner(&c->in[2], c->index, vrows, n, k, n, gvh, d);
    if (!u_reduced || !vh_reduced)
        return deft_op_error(c->op, DEFT_ERR_NOT_IMPLEMENTED,
                             "matrix %lld of the batch: the gradient reaches singular vectors "
                             "past the first min(m, n) = %d, which full_matrices makes up "
                             "arbitrarily: use full_matrices=false",
                             (long long)c->index, k);
    get_corner(&c->in[3], c->index, m, ucols, m, k, u, d);
    get_corner(&c->in[5], c->index, vrows, n, k, n, vh, d);
    get(&c->in[1], c->index, k, gs), get(&c->in[4], c->index, k, s);
    mm(true, false, k, k, m, u, gu, j);    /* U^T gU */
    mm(false, true, k, k, n, vh, gvh, kk); /* V^T gV = Vh gVh^T */
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) {
            double skew_u = j[a * k + b] - j[b * k + a], skew_v = kk[a * k + b] - kk[b * k + a];
            p[a * k + b] =
                a == b ? gs[a] : share(skew_u * s[b] + s[a] * skew_v, s[b] * s[b] - s[a] * s[a]);
        }
    if (m > k) { /* gU's part outside U's columns, through S^-1 */
        for (int a = 0; a < m; a++)
            for (int b = 0; b < k; b++) t[a * k + b] = share(gu[a * k + b], s[b]);
        project_out(m, k, u, t, j, w);
        mm(false, false, m, k, k, u, p, w);
        for (int i = 0; i < m * k; i++) w[i] += t[i];
        mm(false, false, m, n, k, w, vh, d);
    } else {
        mm(false, false, m, k, k, u, p, w);
        mm(false, false, m, n, k, w, vh, d);
    }
    if (n > k) { /* gV's part outside V's columns, likewise */
        for (int a = 0; a < k; a++)
            for (int b = 0; b < n; b++) t[a * n + b] = share(gvh[a * n + b], s[a]);
        mm(false, true, k, k, n, t, vh, p); /* t -= (t V) V^T, on rows */
        mm(false, false, k, n, k, p, vh, w);
        for (int i = 0; i < k * n; i++) t[i] -= w[i];
        mm(false, false, m, n, k, u, t, w);
        for (int i = 0; i < m * n; i++) d[i] += w[i];
    }
    put(&c->out[0], c->index, (int64_t)m * n, d);
    return 0;
}

/* (gw, gv, w, v) -> V (diag(gw) + F o V^T gV) V^T, as the lower triangle's derivative */
static int eigh_back(const back_ctx_t *c) {
    int n = c->n;
    double *gv = slot(c, 0), *v = slot(c, 1), *p = slot(c, 2), *t = slot(c, 3), *r = slot(c, 4),
           *gw = slot(c, 5), *w = slot(c, 6);
    get(&c->in[0], c->index, n, gw), get(&c->in[1], c->index, (int64_t)n * n, gv);
    get(&c->in[2], c->index, n, w), get(&c->in[3], c->index, (int64_t)n * n, v);
    mm(true, false, n, n, n, v, gv, p);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            p[i * n + j] = i == j ? gw[i] : share(p[i * n + j], w[j] - w[i]);
    mm(false, false, n, n, n, v, p, t);
    mm(false, true, n, n, n, t, v, r);
    lower_of_symmetric(n, r, t);
    put(&c->out[0], c->index, (int64_t)n * n, t);
    return 0;
}

/* ---- shapes ---- */

typedef int (*back_fn)(const back_ctx_t *c);

/* Each backward operator: its routine, the input whose last two axes are the
 * forward input's (m, n) or whose shape says them, and its outputs. */
typedef struct back_kind {
    back_fn routine;
    int shape_from;
    int nout;
} back_kind_t;

/* s's batch, then `tail` dimensions d0, d1. */
static deft_shape_t batch_then(const deft_shape_t *s, int tail, int64_t d0, int64_t d1) {
    deft_shape_t r = *s;
    r.ndim = s->ndim - 2;
    if (tail > 0) r.dims[r.ndim++] = d0;
    if (tail > 1) r.dims[r.ndim++] = d1;
    return r;
}

/* Every input has the shape `expect` gives it. */
static int check_shapes(const deft_op_t *op, int nin, const deft_desc_t *in,
                        const deft_shape_t *expect) {
    for (int i = 0; i < nin; i++)
        if (!deft_shape_equal(&in[i].shape, &expect[i])) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has shape %s, expected %s", i,
                                 deft_op_input_name(op, i),
                                 deft_shape_format(&in[i].shape, a, sizeof a),
                                 deft_shape_format(&expect[i], b, sizeof b));
        }
    return 0;
}

/* The shapes the inputs must have, from the matrices they hold; (m, n) the forward input's. */
static int expected_shapes(const deft_op_t *op, const deft_desc_t *in, deft_shape_t *e, int64_t *m,
                           int64_t *n) {
    const back_kind_t *kind = op->data;
    const deft_shape_t *s = &in[kind->shape_from].shape;
    bool square = kind->routine != qr_back && kind->routine != svd_back;
    if (deft_lapack_check_matrix(op, kind->shape_from, in, square)) return -1;
    *m = last(s, 2), *n = last(s, 1);
    if (kind->routine == inv_back || kind->routine == cholesky_back) e[0] = e[1] = *s;
    if (kind->routine == det_back) e[0] = e[2] = batch_then(s, 0, 0, 0), e[1] = *s;
    if (kind->routine == solve_back) {
        if (deft_lapack_check_rhs(op, in, 1, 2)) return -1;
        e[0] = e[2] = in[2].shape, e[1] = *s;
    }
    if (kind->routine == eigh_back) e[0] = e[2] = batch_then(s, 1, *n, 0), e[1] = e[3] = *s;
    if (kind->routine == qr_back) { /* from q (m, k) and r's columns */
        if (deft_lapack_check_matrix(op, 3, in, false)) return -1;
        *n = last(&in[3].shape, 1);
        int64_t k = *m < *n ? *m : *n;
        e[0] = e[2] = batch_then(s, 2, *m, k), e[1] = e[3] = batch_then(s, 2, k, *n);
        if (*m < *n)
            return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                                 "qr's gradient needs m >= n (a of %lld x %lld is wide: its q "
                                 "depends on r's extra columns)",
                                 (long long)*m, (long long)*n);
    }
    if (kind->routine == svd_back) { /* from u (m, m or k) and vh (n or k, n) */
        if (deft_lapack_check_matrix(op, 5, in, false)) return -1;
        *n = last(&in[5].shape, 1);
        int64_t k = *m < *n ? *m : *n, ucols = last(s, 1) == *m ? *m : k,
                vrows = last(&in[5].shape, 2) == *n ? *n : k;
        e[0] = e[3] = batch_then(s, 2, *m, ucols), e[1] = e[4] = batch_then(s, 1, k, 0);
        e[2] = e[5] = batch_then(s, 2, vrows, *n);
    }
    return 0;
}

static int back_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    const back_kind_t *kind = op->data;
    deft_shape_t expect[6];
    int64_t m, n;
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) || deft_op_check_same_dtype(op, nin, in) ||
        expected_shapes(op, in, expect, &m, &n) || check_shapes(op, nin, in, expect))
        return -1;
    const deft_shape_t *s = &in[kind->shape_from].shape;
    out[0] = (deft_desc_t){batch_then(s, 2, m, n), in[0].dtype};
    if (kind->nout == 2) out[1] = (deft_desc_t){in[2].shape, in[0].dtype}; /* solve's db */
    *nout = kind->nout;
    return 0;
}

static int back_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p, (void)nin, (void)nout;
    const back_kind_t *kind = op->data;
    const deft_shape_t *s = &out[0].shape;
    back_ctx_t c = {.op = op, .in = in, .out = out};
    c.m = (int)last(s, 2), c.n = (int)last(s, 1), c.k = c.m < c.n ? c.m : c.n;
    int big = c.m > c.n ? c.m : c.n;
    c.slot = (size_t)big * big + 1;
    c.ws = deft_scratch_alloc(sizeof(double) * c.slot * SLOTS);
    c.ipiv = deft_scratch_alloc(sizeof(int) * ((size_t)big + 1));
    int status = 0;
    if (!c.ws || !c.ipiv)
        status =
            deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "no memory for the gradient's workspace");
    for (c.index = 0; status == 0 && c.index < deft_lapack_batch(s); c.index++)
        status = kind->routine(&c);
    deft_scratch_free(c.ws), deft_scratch_free(c.ipiv);
    return status;
}

static const back_kind_t b_inv = {inv_back, 1, 1}, b_det = {det_back, 1, 1},
                         b_solve = {solve_back, 1, 2}, b_cholesky = {cholesky_back, 1, 1},
                         b_qr = {qr_back, 2, 1}, b_svd = {svd_back, 3, 1},
                         b_eigh = {eigh_back, 3, 1};

static const char *const inv_in[] = {"y_grad", "y", NULL};
static const char *const det_in[] = {"det_grad", "a", "det", NULL};
static const char *const solve_in[] = {"x_grad", "a", "x", NULL};
static const char *const cholesky_in[] = {"l_grad", "l", NULL};
static const char *const qr_in[] = {"q_grad", "r_grad", "q", "r", NULL};
static const char *const svd_in[] = {"u_grad", "s_grad", "vh_grad", "u", "s", "vh", NULL};
static const char *const eigh_in[] = {"w_grad", "v_grad", "w", "v", NULL};

#define BACK_OP(name_, text, kind_, inputs, n_in, ...)                                             \
    {                                                                                              \
        .name = name_, .description = text, .input_names = inputs, .min_inputs = n_in,             \
        .max_inputs = n_in, .infer = back_infer, .forward = back_forward, .inplace_input = -1,     \
        .data = &kind_, __VA_ARGS__                                                                \
    }

static const deft_op_t linalg_lapack_backward_ops[] = {
    BACK_OP("_backward_linalg_inv", "The gradient of _linalg_inv.", b_inv, inv_in, 2),
    BACK_OP("_backward_linalg_det", "The gradient of _linalg_det (a must be invertible).", b_det,
            det_in, 3),
    BACK_OP("_backward_linalg_solve", "The gradients of _linalg_solve: a's and b's.", b_solve,
            solve_in, 3, .num_outputs = deft_op_two_outputs),
    BACK_OP("_backward_linalg_cholesky", "The gradient of _linalg_cholesky (a's lower triangle).",
            b_cholesky, cholesky_in, 2),
    BACK_OP("_backward_linalg_qr", "The gradient of _linalg_qr (m >= n).", b_qr, qr_in, 4),
    BACK_OP("_backward_linalg_svd",
            "The gradient of _linalg_svd (through the first min(m, n) singular vectors).", b_svd,
            svd_in, 6),
    BACK_OP("_backward_linalg_eigh", "The gradient of _linalg_eigh (a's lower triangle).", b_eigh,
            eigh_in, 4),
};

DEFT_OP_FAMILY(deft_family_linalg_lapack_backward, linalg_lapack_backward_ops);
