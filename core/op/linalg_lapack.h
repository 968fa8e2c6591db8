/* What the LAPACK operators (linalg_lapack.c) share with their gradients
 * (linalg_lapack_backward.c): LAPACK's entry points and the shape checks. */
#ifndef DEFT_CORE_OP_LINALG_LAPACK_H
#define DEFT_CORE_OP_LINALG_LAPACK_H

#include <stddef.h>

#include "core/op/op.h"

/* LAPACK's Fortran entry points in libopenblas: 32-bit integers, and after
 * the arguments the lengths of the character arguments (gfortran's ABI). */
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
void dgetri_(const int *n, double *a, const int *lda, const int *ipiv, double *work,
             const int *lwork, int *info);
void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work,
             const int *lwork, int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau,
             double *work, const int *lwork, int *info);
void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s,
             double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork,
             int *iwork, int *info, size_t);
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w,
             double *work, const int *lwork, int *iwork, const int *liwork, int *info, size_t,
             size_t);

/* The number of matrices in an array of shape s (the product of its leading axes). */
int64_t deft_lapack_batch(const deft_shape_t *s);

/* Input k is a float32/float64 matrix (or a batch of them) with sides LAPACK
 * can index, square when asked: -1 with an error naming op otherwise. */
int deft_lapack_check_matrix(const deft_op_t *op, int k, const deft_desc_t *in, bool square);

/* Input `b` is solve's right-hand side for input `a`: (..., n, k) or (..., n)
 * with a's batch and dtype. */
int deft_lapack_check_rhs(const deft_op_t *op, const deft_desc_t *in, int a, int b);

#endif
