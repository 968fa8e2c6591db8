#define _POSIX_C_SOURCE 200809L /* fileno */

#include "core/imperative/ndarray_file.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/error.h"

/* The format is MXNet's in-memory layout on little-endian machines. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "NDArray files are little-endian; this reader assumes a little-endian host"
#endif

#define LIST_MAGIC     UINT64_C(0x112)
#define ARRAY_V1_MAGIC 0xF993fac8u
#define ARRAY_V2_MAGIC 0xF993fac9u
#define ARRAY_V3_MAGIC 0xF993facau

/* Smallest array record (a magic and a 0-d shape): bounds the array count. */
#define MIN_ARRAY_BYTES 8
/* MXNet's largest type flag (bfloat16), for naming the ones deft lacks. */
static const char *const mxnet_dtype_names[] = {"float32", "float64", "float16", "uint8", "int32",
                                                "int8",    "int64",   "bool",    "int16", "uint16",
                                                "uint32",  "uint64",  "bfloat16"};
static const char *const storage_names[] = {"default", "row_sparse", "csr"};

/* ---- reading ---- */

/* Bytes from a file or from memory, with the count left always known. */
typedef struct reader {
    const char *source; /* "file 'x.params'" or "buffer", for messages */
    FILE *file;         /* NULL: reading `data` */
    const unsigned char *data;
    size_t size, pos;
    int index; /* the array being read, or -1 outside the arrays */
} reader_t;

/* -1 with a message naming the source and the array being read. */
__attribute__((format(printf, 3, 4))) static int bad(const reader_t *r, deft_error_kind_t kind,
                                                     const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r->index >= 0)
        return deft_error(kind, "cannot load NDArray %s: array %d: %s", r->source, r->index, what);
    return deft_error(kind, "cannot load NDArray %s: %s", r->source, what);
}

static size_t left(const reader_t *r) {
    return r->size - r->pos;
}

/* Copy the next n bytes of `what` into dst (NULL: skip them). */
static int take(reader_t *r, void *dst, size_t n, const char *what) {
    if (n > left(r))
        return bad(r, DEFT_ERR_VALUE,
                   "truncated: %s needs %zu bytes at offset %zu, only %zu left (a file cut short?)",
                   what, n, r->pos, left(r));
    if (n == 0) return 0;
    if (!r->file) {
        if (dst) memcpy(dst, r->data + r->pos, n);
    } else if (dst ? fread(dst, 1, n, r->file) != n : fseek(r->file, (long)n, SEEK_CUR) != 0) {
        return bad(r, DEFT_ERR_VALUE, "read error at offset %zu: %s", r->pos, strerror(errno));
    }
    r->pos += n;
    return 0;
}

static int take_u32(reader_t *r, uint32_t *v, const char *what) {
    return take(r, v, sizeof *v, what);
}

static int take_i32(reader_t *r, int32_t *v, const char *what) {
    return take(r, v, sizeof *v, what);
}

static int take_u64(reader_t *r, uint64_t *v, const char *what) {
    return take(r, v, sizeof *v, what);
}

/* A shape: int32 ndim and int64 dims (V1-V3), or the first format's uint32
 * dims after a magic that was the ndim itself. */
static int take_shape(reader_t *r, uint32_t magic, deft_shape_t *shape, bool *none) {
    int32_t ndim;
    bool legacy = magic != ARRAY_V1_MAGIC && magic != ARRAY_V2_MAGIC && magic != ARRAY_V3_MAGIC;
    if (legacy) {
        if (magic > DEFT_SHAPE_MAX_NDIM)
            return bad(r, DEFT_ERR_VALUE,
                       "unknown array magic 0x%08x (expected 0x%08x or 0x%08x; not a MXNet "
                       "NDArray file, or a damaged one)",
                       magic, ARRAY_V2_MAGIC, ARRAY_V3_MAGIC);
        ndim = (int32_t)magic;
    } else if (take_i32(r, &ndim, "the number of dimensions")) {
        return -1;
    }
    /* -1 (V3) and 0 (before V3) are MXNet's "no array": a shape not known. */
    *none = ndim == -1 || (ndim == 0 && magic != ARRAY_V3_MAGIC);
    if (*none) return 0;
    if (ndim < 0 || ndim > DEFT_SHAPE_MAX_NDIM)
        return bad(r, DEFT_ERR_VALUE, "%d dimensions (deft supports 0 to %d)", (int)ndim,
                   DEFT_SHAPE_MAX_NDIM);
    shape->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        if (legacy) {
            uint32_t dim;
            if (take_u32(r, &dim, "a dimension")) return -1;
            shape->dims[d] = dim;
        } else if (take(r, &shape->dims[d], sizeof shape->dims[d], "a dimension")) {
            return -1;
        }
        if (shape->dims[d] < 0)
            return bad(r, DEFT_ERR_VALUE, "dimension %d is %lld (unknown or damaged)", d,
                       (long long)shape->dims[d]);
    }
    return 0;
}

/* The storage type (V2 and V3 only): dense, or a refusal naming the kind. */
static int take_storage(reader_t *r, uint32_t magic) {
    if (magic != ARRAY_V2_MAGIC && magic != ARRAY_V3_MAGIC) return 0;
    int32_t stype;
    if (take_i32(r, &stype, "the storage type")) return -1;
    if (stype == 0) return 0;
    if (stype == 1 || stype == 2)
        return bad(r, DEFT_ERR_NOT_IMPLEMENTED,
                   "%s storage: deft reads dense arrays only (convert with tostype('default') "
                   "before saving)",
                   storage_names[stype]);
    return bad(r, DEFT_ERR_VALUE, "unknown storage type %d", (int)stype);
}

static int take_dtype(reader_t *r, deft_dtype_t *out) {
    int32_t flag;
    if (take_i32(r, &flag, "the type flag")) return -1;
    if (deft_dtype_valid(flag)) {
        *out = (deft_dtype_t)flag;
        return 0;
    }
    if (flag >= 0 && flag < (int32_t)(sizeof mxnet_dtype_names / sizeof *mxnet_dtype_names))
        return bad(r, DEFT_ERR_TYPE, "dtype %s (type flag %d), which deft does not have",
                   mxnet_dtype_names[flag], (int)flag);
    return bad(r, DEFT_ERR_VALUE, "unknown type flag %d", (int)flag);
}

/* One array record, onto the CPU. */
static int take_array(reader_t *r, deft_ndarray_t **out) {
    uint32_t magic;
    deft_shape_t shape = {0};
    bool none;
    deft_dtype_t dtype = DEFT_DT_FLOAT32;
    int32_t device[2]; /* dev_type, dev_id: where it was; it loads onto the CPU */
    if (take_u32(r, &magic, "the array magic") || take_storage(r, magic) ||
        take_shape(r, magic, &shape, &none))
        return -1;
    if (none) return bad(r, DEFT_ERR_VALUE, "an empty NDArray (no shape), which deft cannot hold");
    size_t nbytes;
    char dims[DEFT_SHAPE_STR_MAX];
    if (take(r, device, sizeof device, "the device") || take_dtype(r, &dtype)) return -1;
    if (deft_shape_nbytes(&shape, deft_dtype_size(dtype), &nbytes))
        return bad(r, DEFT_ERR_VALUE, "shape %s of %s is too large to hold",
                   deft_shape_format(&shape, dims, sizeof dims), deft_dtype_name(dtype));
    if (nbytes > left(r))
        return bad(r, DEFT_ERR_VALUE,
                   "truncated: shape %s of %s needs %zu bytes at offset %zu, only %zu left",
                   deft_shape_format(&shape, dims, sizeof dims), deft_dtype_name(dtype), nbytes,
                   r->pos, left(r));
    deft_ndarray_t *arr;
    if (deft_ndarray_new(&shape, dtype, deft_device_cpu(), false, &arr)) return -1;
    /* A new array: nothing else can be reading or writing its storage yet. */
    if (take(r, nbytes ? deft_tensor_data(&arr->tensor) : NULL, nbytes, "the elements")) {
        deft_ndarray_release(arr);
        return -1;
    }
    *out = arr;
    return 0;
}

/* The names: none, or one per array, into one allocation (table, then text). */
static int take_names(reader_t *r, int count, char ***out) {
    uint64_t n;
    *out = NULL;
    if (take_u64(r, &n, "the number of names")) return -1;
    if (n == 0) return 0;
    if (n != (uint64_t)count)
        return bad(r, DEFT_ERR_VALUE, "%llu names for %d arrays (expected 0 or %d)",
                   (unsigned long long)n, count, count);
    size_t start = r->pos, text = 0;
    /* First pass over the lengths (memory, or the file: seek back after). */
    for (int i = 0; i < count; i++) {
        uint64_t len;
        if (take_u64(r, &len, "a name's length")) return -1;
        if (len > left(r))
            return bad(r, DEFT_ERR_VALUE, "truncated: name %d needs %llu bytes, only %zu left", i,
                       (unsigned long long)len, left(r));
        if (take(r, NULL, (size_t)len, "a name")) return -1;
        text += (size_t)len + 1;
    }
    if (r->file && fseek(r->file, (long)start, SEEK_SET) != 0)
        return bad(r, DEFT_ERR_VALUE, "cannot seek: %s", strerror(errno));
    r->pos = start;
    char **names = malloc((size_t)count * sizeof *names + text);
    if (!names) return bad(r, DEFT_ERR_OUT_OF_MEMORY, "no memory for %d names", count);
    char *p = (char *)(names + count);
    for (int i = 0; i < count; i++) {
        uint64_t len;
        if (take_u64(r, &len, "a name's length") || take(r, p, (size_t)len, "a name")) {
            free(names);
            return -1;
        }
        if (memchr(p, '\0', (size_t)len)) {
            free(names);
            return bad(r, DEFT_ERR_VALUE, "name %d holds a NUL byte", i);
        }
        p[len] = '\0';
        names[i] = p;
        p += len + 1;
    }
    *out = names;
    return 0;
}

static int take_list(reader_t *r, deft_ndarray_list_t *out) {
    uint64_t header[3]; /* magic, reserved, count */
    *out = (deft_ndarray_list_t){0};
    r->index = -1;
    if (take(r, header, sizeof header, "the header")) return -1;
    if (header[0] != LIST_MAGIC)
        return bad(r, DEFT_ERR_VALUE,
                   "wrong magic 0x%llx (expected 0x%llx): not a MXNet NDArray file",
                   (unsigned long long)header[0], (unsigned long long)LIST_MAGIC);
    if (header[2] > left(r) / MIN_ARRAY_BYTES || header[2] > INT_MAX)
        return bad(r, DEFT_ERR_VALUE, "truncated: %llu arrays cannot fit in the %zu bytes left",
                   (unsigned long long)header[2], left(r));
    int count = (int)header[2];
    out->arrays = calloc(count ? (size_t)count : 1, sizeof *out->arrays);
    if (!out->arrays) return bad(r, DEFT_ERR_OUT_OF_MEMORY, "no memory for %d arrays", count);
    for (r->index = 0; r->index < count; r->index++) {
        if (take_array(r, &out->arrays[r->index])) {
            out->count = r->index; /* the ones read so far are released */
            deft_ndarray_list_clear(out);
            return -1;
        }
    }
    out->count = count;
    r->index = -1;
    if (take_names(r, count, &out->names)) {
        deft_ndarray_list_clear(out);
        return -1;
    }
    return 0;
}

int deft_ndarray_file_parse(const void *data, size_t size, deft_ndarray_list_t *out) {
    if (!data && size) return deft_error(DEFT_ERR_VALUE, "data is NULL with %zu bytes", size);
    reader_t r = {.source = "buffer", .data = data, .size = size};
    return take_list(&r, out);
}

int deft_ndarray_file_load(const char *path, deft_ndarray_list_t *out) {
    *out = (deft_ndarray_list_t){0};
    char source[300];
    snprintf(source, sizeof source, "file '%s'", path);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > LONG_MAX) {
        int err = errno;
        if (f) fclose(f);
        if (f && !err)
            return deft_error(DEFT_ERR_VALUE,
                              "cannot load NDArray %s: not a regular "
                              "file",
                              source);
        return deft_error(DEFT_ERR_VALUE, "cannot load NDArray %s: %s", source, strerror(err));
    }
    reader_t r = {.source = source, .file = f, .size = (size_t)st.st_size};
    int status = take_list(&r, out);
    fclose(f);
    return status;
}

void deft_ndarray_list_clear(deft_ndarray_list_t *list) {
    for (int i = 0; list->arrays && i < list->count; i++) deft_ndarray_release(list->arrays[i]);
    free(list->arrays);
    free(list->names);
    *list = (deft_ndarray_list_t){0};
}

/* ---- writing ---- */

/* Bytes to a file; the first failure sticks and later writes do nothing. */
typedef struct writer {
    FILE *file;
    bool failed;
} writer_t;

static void put(writer_t *w, const void *data, size_t n) {
    if (!w->failed && n && fwrite(data, 1, n, w->file) != n) w->failed = true;
}

static void put_u64(writer_t *w, uint64_t v) {
    put(w, &v, sizeof v);
}

static void put_i32(writer_t *w, int32_t v) {
    put(w, &v, sizeof v);
}

static int put_array(writer_t *w, deft_ndarray_t *arr) {
    const deft_tensor_t *t = &arr->tensor;
    size_t nbytes = deft_tensor_nbytes(t);
    void *host = malloc(nbytes ? nbytes : 1);
    if (!host) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "no memory to copy %zu bytes", nbytes);
    if (deft_ndarray_copy_to_host(arr, host, nbytes)) {
        free(host);
        return -1;
    }
    uint32_t magic = t->shape.ndim == 0 ? ARRAY_V3_MAGIC : ARRAY_V2_MAGIC;
    put(w, &magic, sizeof magic);
    put_i32(w, 0); /* dense storage */
    put_i32(w, t->shape.ndim);
    put(w, t->shape.dims, (size_t)t->shape.ndim * sizeof t->shape.dims[0]);
    put_i32(w, (int32_t)t->device.type);
    put_i32(w, (int32_t)t->device.id);
    put_i32(w, (int32_t)t->dtype);
    put(w, host, nbytes);
    free(host);
    return 0;
}

static int put_list(writer_t *w, int count, deft_ndarray_t *const *arrays,
                    const char *const *names) {
    put_u64(w, LIST_MAGIC);
    put_u64(w, 0); /* reserved */
    put_u64(w, (uint64_t)count);
    for (int i = 0; i < count; i++)
        if (put_array(w, arrays[i])) return -1;
    put_u64(w, names ? (uint64_t)count : 0);
    for (int i = 0; names && i < count; i++) {
        size_t len = strlen(names[i]);
        put_u64(w, len);
        put(w, names[i], len);
    }
    return 0;
}

int deft_ndarray_file_save(const char *path, int count, deft_ndarray_t *const *arrays,
                           const char *const *names) {
    for (int i = 0; names && i < count; i++)
        if (!names[i]) return deft_error(DEFT_ERR_VALUE, "names[%d] is NULL, expected a name", i);
    writer_t w = {fopen(path, "wb"), false};
    if (!w.file)
        return deft_error(DEFT_ERR_VALUE, "cannot write NDArray file '%s': %s", path,
                          strerror(errno));
    int status = put_list(&w, count, arrays, names);
    int err = errno;
    if (fclose(w.file) != 0 && !w.failed) w.failed = true, err = errno;
    if (status || w.failed) remove(path);
    if (status) return -1;
    if (w.failed)
        return deft_error(DEFT_ERR_VALUE, "cannot write NDArray file '%s': %s", path,
                          strerror(err));
    return 0;
}
