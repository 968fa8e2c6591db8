/*
 * Strided views: x[:, 1:3], x[::2], x[..., 0] as NumPy makes them, an array
 * whose elements are spread over another's storage with any strides.
 *
 * Kernels take dense tensors, so a strided view keeps a dense buffer of its
 * own (its tensor) and a link to the viewed storage (the root). It shares
 * the root's engine variable, so every operation on either is ordered with
 * every operation on the other. An operation that reads the view gathers
 * the root's elements into the buffer first; one that writes it scatters
 * the buffer back after: the view always reads what the root holds, and its
 * writes land in the root. PyTorch makes non-contiguous tensors dense for
 * kernels that want them in the same way.
 *
 * What keeps values for later (autograd, deferred compute, CachedOp calls,
 * saving, DLPack) gets a dense copy instead: a kept buffer would not follow
 * later writes to the root. Views are CPU arrays.
 */
#ifndef DEFT_CORE_VIEW_H
#define DEFT_CORE_VIEW_H

#include "core/imperative/ndarray.h"

typedef struct deft_view_link {
    deft_ndarray_t *root; /* an alias of the viewed array: its storage and variable */
    int64_t offset;       /* elements from the root's first element to the view's first */
    int64_t strides[DEFT_SHAPE_MAX_NDIM]; /* elements, one per view dimension */
} deft_view_link_t;

static inline bool deft_ndarray_is_strided(const deft_ndarray_t *arr) {
    return arr->link != NULL;
}

/* Whether any of n arrays (NULL entries allowed) is a strided view. */
static inline bool deft_any_strided(int n, deft_ndarray_t *const *arrays) {
    for (int i = 0; i < n; i++)
        if (arrays[i] && arrays[i]->link) return true;
    return false;
}

/* Where arr's elements lie: `strides` (elements, one per dimension) and
 * `offset` from the first element of its root, which is arr itself unless
 * arr is a strided view. */
void deft_ndarray_layout(const deft_ndarray_t *arr, int64_t *strides, int64_t *offset);

/* A view of `shape` whose element (i0, i1, ...) is element offset + sum(ik *
 * strides[k]) of arr's root (deft_ndarray_layout's coordinates). Dense
 * windows make a plain view (deft_ndarray_view). -1 when arr is lazy, not on
 * the CPU, or an element falls outside the root. */
int deft_ndarray_strided_view(deft_ndarray_t *arr, int64_t offset, const deft_shape_t *shape,
                              const int64_t *strides, deft_ndarray_t **out);

/* Copy the root's elements into a view's buffer, and back. Run inside an
 * operation holding the root's variable. */
void deft_view_gather(const deft_ndarray_t *view);
void deft_view_scatter(const deft_ndarray_t *view);

/* Host copies of a view's elements, straight from and to the root, after
 * the same waits as the dense ones. */
int deft_view_copy_to_host(deft_ndarray_t *view, void *data);
int deft_view_copy_from_host(deft_ndarray_t *view, const void *data);

/* in[0..n) with every strided view replaced by a dense copy of it (a new
 * reference in room[i]; other entries are in[i], not retained): for callers
 * that keep values. deft_release_dense(n, in, room) drops the copies. */
int deft_dense_inputs(int n, deft_ndarray_t *const *in, deft_ndarray_t **room);
void deft_release_dense(int n, deft_ndarray_t *const *in, deft_ndarray_t **room);

/* An error naming `what`[i] and `why` when any of arrays[0..n) is a strided view. */
int deft_check_no_views(int n, deft_ndarray_t *const *arrays, const char *what, const char *why);

#endif
