/*
 * Shapes: up to DEFT_SHAPE_MAX_NDIM non-negative dimensions, row-major.
 *
 * Every size computed from a caller's shape goes through the checked
 * helpers here, so a shape whose byte size overflows is an error, not a
 * wrapped-around allocation.
 */
#ifndef DEFT_CORE_SHAPE_H
#define DEFT_CORE_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEFT_SHAPE_MAX_NDIM 8

typedef struct deft_shape {
    int ndim;
    int64_t dims[DEFT_SHAPE_MAX_NDIM];
} deft_shape_t;

/* Largest byte size of one buffer: keeps pointer differences representable. */
#define DEFT_SHAPE_MAX_BYTES ((size_t)PTRDIFF_MAX)

/* Build a shape from a caller's (dims, ndim); -1 with an error naming `what`. */
int deft_shape_init(deft_shape_t *shape, const int64_t *dims, int ndim, const char *what);
/* A dimension not known yet, in partial shapes given to shape inference. */
#define DEFT_DIM_UNKNOWN (-1)
/* As deft_shape_init, but dimensions may be DEFT_DIM_UNKNOWN. */
int deft_shape_init_partial(deft_shape_t *shape, const int64_t *dims, int ndim, const char *what);
/* Some dimension is DEFT_DIM_UNKNOWN. */
bool deft_shape_is_partial(const deft_shape_t *shape);

/* Number of elements; -1 with an error if a dimension is negative or the
 * product overflows int64 (a zero dimension anywhere makes it 0). */
int deft_shape_count(const deft_shape_t *shape, int64_t *out);

/* Bytes for elements of `elem_size`; -1 with an error where deft_shape_count
 * fails or the product is above DEFT_SHAPE_MAX_BYTES. The one place a byte
 * size is computed from a shape that was not allocated yet. */
int deft_shape_nbytes(const deft_shape_t *shape, size_t elem_size, size_t *out);

/* Number of elements of a shape already known to be valid (deft_shape_count
 * accepted it), without reporting errors. It never overflows: a zero
 * dimension anywhere gives 0, and a product past int64 gives INT64_MAX. */
int64_t deft_shape_size(const deft_shape_t *shape);

bool deft_shape_equal(const deft_shape_t *a, const deft_shape_t *b);

/* Write "(2,3,4)", "(4,)" or "()" into buf, as Python prints tuples; returns buf. */
char *deft_shape_format(const deft_shape_t *shape, char *buf, size_t len);

/* Buffer length that always fits deft_shape_format's output. */
#define DEFT_SHAPE_STR_MAX (4 + DEFT_SHAPE_MAX_NDIM * 21)

#ifdef __cplusplus
}
#endif

#endif
