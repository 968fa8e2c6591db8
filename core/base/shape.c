#include "core/base/shape.h"

#include <stdio.h>
#include <string.h>

#include "core/base/error.h"

int deft_shape_init(deft_shape_t *shape, const int64_t *dims, int ndim, const char *what) {
    if (ndim < 0 || ndim > DEFT_SHAPE_MAX_NDIM)
        return deft_error(DEFT_ERR_VALUE, "%s has %d dimensions, expected 0 to %d", what, ndim,
                          DEFT_SHAPE_MAX_NDIM);
    if (ndim > 0 && dims == NULL)
        return deft_error(DEFT_ERR_VALUE, "%s is NULL but ndim is %d", what, ndim);
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0)
            return deft_error(DEFT_ERR_VALUE, "%s[%d] is %lld, expected a dimension >= 0", what, i,
                              (long long)dims[i]);
    }
    shape->ndim = ndim;
    memset(shape->dims, 0, sizeof shape->dims);
    if (ndim > 0) memcpy(shape->dims, dims, (size_t)ndim * sizeof dims[0]);
    return 0;
}

int deft_shape_init_partial(deft_shape_t *shape, const int64_t *dims, int ndim, const char *what) {
    if (ndim < 0 || ndim > DEFT_SHAPE_MAX_NDIM || (ndim > 0 && !dims))
        return deft_shape_init(shape, dims, ndim, what); /* its errors */
    int64_t known[DEFT_SHAPE_MAX_NDIM] = {0};
    for (int i = 0; i < ndim; i++) known[i] = dims[i] == DEFT_DIM_UNKNOWN ? 0 : dims[i];
    if (deft_shape_init(shape, known, ndim, what)) return -1;
    for (int i = 0; i < ndim; i++)
        if (dims[i] == DEFT_DIM_UNKNOWN) shape->dims[i] = DEFT_DIM_UNKNOWN;
    return 0;
}

bool deft_shape_is_partial(const deft_shape_t *shape) {
    for (int i = 0; i < shape->ndim; i++)
        if (shape->dims[i] == DEFT_DIM_UNKNOWN) return true;
    return false;
}

int deft_shape_count(const deft_shape_t *shape, int64_t *out) {
    char buf[DEFT_SHAPE_STR_MAX];
    bool empty = false;
    for (int i = 0; i < shape->ndim; i++) {
        if (shape->dims[i] < 0)
            return deft_error(
                DEFT_ERR_VALUE, "shape %s: dimension %d is %lld, expected a dimension >= 0",
                deft_shape_format(shape, buf, sizeof buf), i, (long long)shape->dims[i]);
        empty |= shape->dims[i] == 0;
    }
    int64_t count = 1;
    for (int i = 0; !empty && i < shape->ndim; i++) {
        if (__builtin_mul_overflow(count, shape->dims[i], &count))
            return deft_error(DEFT_ERR_VALUE, "shape %s has more elements than fit in int64",
                              deft_shape_format(shape, buf, sizeof buf));
    }
    *out = empty ? 0 : count;
    return 0;
}

int deft_shape_nbytes(const deft_shape_t *shape, size_t elem_size, size_t *out) {
    int64_t count;
    if (deft_shape_count(shape, &count)) return -1;
    size_t nbytes;
    if (__builtin_mul_overflow((size_t)count, elem_size, &nbytes) ||
        nbytes > DEFT_SHAPE_MAX_BYTES) {
        char buf[DEFT_SHAPE_STR_MAX];
        return deft_error(
            DEFT_ERR_VALUE, "shape %s with %zu-byte elements needs more than %zu bytes",
            deft_shape_format(shape, buf, sizeof buf), elem_size, DEFT_SHAPE_MAX_BYTES);
    }
    *out = nbytes;
    return 0;
}

/* Only a zero dimension after dimensions whose product overflows, or a shape
 * that deft_shape_count refuses, gets here. */
__attribute__((noinline, cold)) static int64_t size_past_overflow(const deft_shape_t *shape) {
    for (int i = 0; i < shape->ndim; i++)
        if (shape->dims[i] == 0) return 0;
    return INT64_MAX;
}

int64_t deft_shape_size(const deft_shape_t *shape) {
    int64_t count = 1;
    for (int i = 0; i < shape->ndim; i++)
        if (__builtin_mul_overflow(count, shape->dims[i], &count)) return size_past_overflow(shape);
    return count;
}

bool deft_shape_equal(const deft_shape_t *a, const deft_shape_t *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

char *deft_shape_format(const deft_shape_t *shape, char *buf, size_t len) {
    /* Each dimension takes at most 21 characters (",-9223372036854775808"). */
    char text[DEFT_SHAPE_STR_MAX];
    size_t used = 0;
    text[used++] = '(';
    for (int i = 0; i < shape->ndim; i++)
        used += (size_t)sprintf(text + used, i ? ",%lld" : "%lld", (long long)shape->dims[i]);
    if (shape->ndim == 1) text[used++] = ','; /* Python's spelling of a 1-tuple: (4,) */
    text[used++] = ')';
    text[used] = '\0';
    if (len > 0) snprintf(buf, len, "%s", text);
    return buf;
}
