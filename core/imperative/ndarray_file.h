/*
 * NDArray list files in MXNet's binary format (`.params`, mx.nd.save /
 * mx.nd.load), for dense arrays.
 *
 * Layout, little-endian, as MXNet 1.x writes it (src/ndarray/ndarray.cc):
 *   uint64 0x112 (list magic), uint64 reserved (0),
 *   uint64 count, then per array:
 *     uint32 magic: 0xF993fac9 (V2) or 0xF993faca (V3, NumPy shape semantics),
 *     int32 storage type (0 dense; 1 row_sparse and 2 csr are refused),
 *     int32 ndim, int64 dims[ndim],
 *     int32 dev_type, int32 dev_id, int32 type flag, the raw elements;
 *   uint64 name count (0 or count), per name uint64 length and its bytes.
 * Older arrays are read too: V1 (0xF993fac8, no storage type) and the first
 * format, whose magic is the ndim itself with uint32 dims.
 *
 * Every length read is checked against the bytes left before anything is
 * allocated for it, so a damaged file gives an error, never a huge allocation.
 */
#ifndef DEFT_CORE_NDARRAY_FILE_H
#define DEFT_CORE_NDARRAY_FILE_H

#include <stddef.h>

#include "core/imperative/ndarray.h"

/* What a file holds: `count` CPU arrays, and their names or NULL (a file
 * saved from a list). `names` is one allocation: the table, then the text. */
typedef struct deft_ndarray_list {
    int count;
    deft_ndarray_t **arrays;
    char **names;
} deft_ndarray_list_t;

/* Read the file at `path`; -1 with an error naming the file and what was
 * wrong, and *out left empty. The arrays land on the CPU whatever device
 * they were saved from. */
int deft_ndarray_file_load(const char *path, deft_ndarray_list_t *out);

/* The same from `size` bytes in memory (errors name "buffer"). */
int deft_ndarray_file_parse(const void *data, size_t size, deft_ndarray_list_t *out);

/* Write `count` arrays, with `names` (count strings) or without (NULL), in
 * the format MXNet 1.x reads: V2 arrays, except 0-d ones, which only NumPy
 * shape semantics can express (V3: MXNet reads them under npx). Waits for
 * the arrays' pending writes. On failure no file is left at `path`. */
int deft_ndarray_file_save(const char *path, int count, deft_ndarray_t *const *arrays,
                           const char *const *names);

/* Release the arrays and free the tables; the list is empty after. */
void deft_ndarray_list_clear(deft_ndarray_list_t *list);

#endif
