/*
 * NDArray files in MXNet's format: files MXNet 1.9.1 wrote (tests/mxnet/format,
 * made by tests/mxnet/format_files.py: each array holds its element indices),
 * round trips through deft's writer, and damaged files.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "check_helpers.h"
#include "op_helpers.h"

/* The committed MXNet files, found beside this source file. */
static const char *mxnet_file(const char *name) {
    static char path[4096];
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 1;
    snprintf(path, sizeof path, "%.*s/mxnet/format/%s", dir, slash ? src : ".", name);
    return path;
}

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    static unsigned char buf[1 << 16];
    *size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unsigned char *copy = malloc(*size);
    memcpy(copy, buf, *size);
    return copy;
}

static char *temp_path(void) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/deft-ndfile-%d.params", (int)getpid());
    return path;
}

typedef struct loaded {
    int count;
    DeftNDArrayHandle *arrays;
    const char **names;
} loaded_t;

static loaded_t load(const char *path) {
    loaded_t l;
    ck_assert_ok(DeftNDArrayLoad(path, &l.count, &l.arrays, &l.names));
    return l;
}

static void unload(loaded_t *l) {
    ck_assert_ok(DeftNDArrayListFree(l->count, l->arrays, l->names));
}

/* Element i of an indices array (see the header comment), as a double. */
static double index_value(int dtype, int64_t i) {
    return dtype == DEFT_BOOL ? (double)(i % 2) : (double)i;
}

static void assert_indices(DeftNDArrayHandle h, int dtype, int ndim, const int64_t *shape) {
    int got_dtype;
    ck_assert_ok(DeftNDArrayGetDType(h, &got_dtype));
    ck_assert_int_eq(got_dtype, dtype);
    assert_shape(h, ndim, shape);
    int64_t n;
    double *v = read_all(h, &n);
    for (int64_t i = 0; i < n; i++) ck_assert_double_eq(v[i], index_value(dtype, i));
    free(v);
}

START_TEST(test_reads_every_dtype_mxnet_wrote) {
    static const char *const names[] = {"float32", "float64", "float16", "uint8",
                                        "int32",   "int8",    "int64",   "bool"};
    static const int dtypes[] = {DEFT_FLOAT32, DEFT_FLOAT64, DEFT_FLOAT16, DEFT_UINT8,
                                 DEFT_INT32,   DEFT_INT8,    DEFT_INT64,   DEFT_BOOL};
    loaded_t l = load(mxnet_file("dtypes.params"));
    ck_assert_int_eq(l.count, 8);
    ck_assert_ptr_nonnull(l.names);
    for (int i = 0; i < 8; i++) {
        ck_assert_str_eq(l.names[i], names[i]);
        if (dtypes[i] != DEFT_FLOAT16) {
            assert_indices(l.arrays[i], dtypes[i], 2, SHAPE(2, 3));
            continue;
        }
        /* 0..5 as IEEE half precision */
        static const uint16_t halves[] = {0x0000, 0x3C00, 0x4000, 0x4200, 0x4400, 0x4500};
        uint16_t got[6];
        assert_shape(l.arrays[i], 2, SHAPE(2, 3));
        ck_assert_ok(DeftNDArrayCopyToHost(l.arrays[i], got, sizeof got));
        ck_assert_mem_eq(got, halves, sizeof got);
    }
    unload(&l);
}
END_TEST

START_TEST(test_reads_a_list_without_names) {
    loaded_t l = load(mxnet_file("list.params"));
    ck_assert_int_eq(l.count, 3);
    ck_assert_ptr_null(l.names);
    assert_indices(l.arrays[0], DEFT_FLOAT32, 4, SHAPE(1, 2, 1, 3));
    assert_indices(l.arrays[1], DEFT_FLOAT32, 2, SHAPE(2, 0));
    assert_indices(l.arrays[2], DEFT_INT64, 1, SHAPE(5));
    unload(&l);
}
END_TEST

START_TEST(test_reads_a_numpy_scalar) {
    loaded_t l = load(mxnet_file("scalar_np.params"));
    ck_assert_int_eq(l.count, 1);
    ck_assert_str_eq(l.names[0], "s");
    assert_indices(l.arrays[0], DEFT_FLOAT32, 0, NULL);
    unload(&l);
}
END_TEST

START_TEST(test_refuses_sparse_storage_naming_file_and_kind) {
    int n;
    DeftNDArrayHandle *arrays;
    const char **names;
    ck_assert_fails(DeftNDArrayLoad(mxnet_file("csr.params"), &n, &arrays, &names),
                    DEFT_ERROR_NOT_IMPLEMENTED, "csr.params': array 0: csr storage");
    ck_assert_fails(DeftNDArrayLoad(mxnet_file("row_sparse.params"), &n, &arrays, &names),
                    DEFT_ERROR_NOT_IMPLEMENTED, "row_sparse storage");
}
END_TEST

/* Saving what was loaded, in the same order with the same names, gives
 * MXNet's bytes exactly. */
static void assert_rewrite_is_identical(const char *name) {
    size_t want_size, got_size;
    unsigned char *want = read_file(mxnet_file(name), &want_size);
    loaded_t l = load(mxnet_file(name));
    ck_assert_ok(DeftNDArraySave(temp_path(), l.count, l.arrays, l.names));
    unsigned char *got = read_file(temp_path(), &got_size);
    ck_assert_uint_eq(got_size, want_size);
    ck_assert_mem_eq(got, want, want_size);
    unload(&l);
    free(want), free(got);
    unlink(temp_path());
}

START_TEST(test_writes_the_bytes_mxnet_writes) {
    assert_rewrite_is_identical("dtypes.params");
    assert_rewrite_is_identical("list.params");
    assert_rewrite_is_identical("scalar_np.params");
}
END_TEST

START_TEST(test_round_trip_every_dtype_with_and_without_names) {
    static const int dtypes[] = {DEFT_FLOAT32,  DEFT_FLOAT64, DEFT_FLOAT16,
                                 DEFT_BFLOAT16, DEFT_UINT8,   DEFT_INT8,
                                 DEFT_INT32,    DEFT_INT64,   DEFT_BOOL};
    enum { N = sizeof dtypes / sizeof dtypes[0] };
    DeftNDArrayHandle arrays[N];
    const char *names[N] = {"arg:a", "arg:b", "aux:c", "d", "", "f", "g", "h", "arg:i"};
    unsigned char bytes[N][3 * 5 * 8];
    for (int d = 0; d < N; d++) {
        size_t elem;
        ck_assert_ok(DeftDTypeGetSize(dtypes[d], &elem));
        for (size_t i = 0; i < sizeof bytes[d]; i++)
            bytes[d][i] = dtypes[d] == DEFT_BOOL ? (unsigned char)(i % 2)
                                                 : (unsigned char)(i * 31 + (size_t)d);
        ck_assert_ok(DeftNDArrayCreateFromData(SHAPE(3, 5), 2, dtypes[d], DEFT_CPU, 0, bytes[d],
                                               15 * elem, &arrays[d]));
    }
    for (int named = 0; named < 2; named++) {
        ck_assert_ok(DeftNDArraySave(temp_path(), N, arrays, named ? names : NULL));
        loaded_t l = load(temp_path());
        ck_assert_int_eq(l.count, N);
        ck_assert(named ? l.names != NULL : l.names == NULL);
        for (int d = 0; d < N; d++) {
            size_t elem;
            int dtype;
            unsigned char got[3 * 5 * 8];
            ck_assert_ok(DeftDTypeGetSize(dtypes[d], &elem));
            ck_assert_ok(DeftNDArrayGetDType(l.arrays[d], &dtype));
            ck_assert_int_eq(dtype, dtypes[d]);
            assert_shape(l.arrays[d], 2, SHAPE(3, 5));
            ck_assert_ok(DeftNDArrayCopyToHost(l.arrays[d], got, 15 * elem));
            ck_assert_mem_eq(got, bytes[d], 15 * elem);
            if (named) ck_assert_str_eq(l.names[d], names[d]);
        }
        unload(&l);
    }
    free_all(N, arrays);
    unlink(temp_path());
}
END_TEST

START_TEST(test_round_trip_scalar_zero_size_and_empty_list) {
    DeftNDArrayHandle arrays[3] = {
        make(DEFT_FLOAT64, 0, NULL, VALUES(0)), make(DEFT_INT32, 3, SHAPE(4, 0, 2), NULL),
        make(DEFT_FLOAT32, 8, SHAPE(1, 1, 1, 2, 1, 1, 1, 1), VALUES(0, 1))};
    ck_assert_ok(DeftNDArraySave(temp_path(), 3, arrays, NULL));
    loaded_t l = load(temp_path());
    ck_assert_int_eq(l.count, 3);
    assert_indices(l.arrays[0], DEFT_FLOAT64, 0, NULL);
    assert_indices(l.arrays[1], DEFT_INT32, 3, SHAPE(4, 0, 2));
    assert_indices(l.arrays[2], DEFT_FLOAT32, 8, SHAPE(1, 1, 1, 2, 1, 1, 1, 1));
    unload(&l);
    free_all(3, arrays);

    ck_assert_ok(DeftNDArraySave(temp_path(), 0, NULL, NULL));
    l = load(temp_path());
    ck_assert_int_eq(l.count, 0);
    ck_assert_ptr_null(l.names);
    unload(&l);
    unlink(temp_path());
}
END_TEST

START_TEST(test_load_from_buffer_matches_load) {
    size_t size;
    unsigned char *bytes = read_file(mxnet_file("list.params"), &size);
    loaded_t l;
    ck_assert_ok(DeftNDArrayLoadFromBuffer(bytes, size, &l.count, &l.arrays, &l.names));
    ck_assert_int_eq(l.count, 3);
    assert_indices(l.arrays[0], DEFT_FLOAT32, 4, SHAPE(1, 2, 1, 3));
    assert_indices(l.arrays[2], DEFT_INT64, 1, SHAPE(5));
    /* a caller keeping an array takes it out of the list before freeing it */
    DeftNDArrayHandle kept = l.arrays[2];
    l.arrays[2] = NULL;
    unload(&l);
    assert_indices(kept, DEFT_INT64, 1, SHAPE(5));
    ck_assert_ok(DeftNDArrayFree(kept));
    free(bytes);
}
END_TEST

/* ---- damaged input: a builder for hand-made files ---- */

typedef struct bytes {
    unsigned char data[1024];
    size_t len;
} bytes_t;

static void add(bytes_t *b, const void *p, size_t n) {
    ck_assert_uint_le(b->len + n, sizeof b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void add_u32(bytes_t *b, uint32_t v) {
    add(b, &v, sizeof v);
}
static void add_u64(bytes_t *b, uint64_t v) {
    add(b, &v, sizeof v);
}
static void add_i64(bytes_t *b, int64_t v) {
    add(b, &v, sizeof v);
}

/* A list header for `count` arrays. */
static bytes_t list_of(uint64_t count) {
    bytes_t b = {.len = 0};
    add_u64(&b, 0x112), add_u64(&b, 0), add_u64(&b, count);
    return b;
}

/* A V2 dense array record up to its type flag: magic, storage, shape, device. */
static void add_v2_head(bytes_t *b, int ndim, const int64_t *dims) {
    add_u32(b, 0xF993fac9u), add_u32(b, 0), add_u32(b, (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) add_i64(b, dims[d]);
    add_u32(b, 1), add_u32(b, 0); /* cpu(0) */
}

static void assert_buffer_fails(const bytes_t *b, int kind, const char *text) {
    int n = -1;
    DeftNDArrayHandle *arrays = NULL;
    const char **names = NULL;
    ck_assert_fails(DeftNDArrayLoadFromBuffer(b->data, b->len, &n, &arrays, &names), kind, text);
    ck_assert_ptr_null(arrays);
}

START_TEST(test_every_truncation_fails_cleanly) {
    size_t size;
    unsigned char *bytes = read_file(mxnet_file("dtypes.params"), &size);
    for (size_t cut = 0; cut < size; cut++) {
        int n;
        DeftNDArrayHandle *arrays;
        const char **names;
        ck_assert_fails(DeftNDArrayLoadFromBuffer(bytes, cut, &n, &arrays, &names),
                        DEFT_ERROR_VALUE, "truncated");
    }
    /* the same through a file, whose name the error gives */
    FILE *f = fopen(temp_path(), "wb");
    fwrite(bytes, 1, size - 3, f);
    fclose(f);
    int n;
    DeftNDArrayHandle *arrays;
    const char **names;
    ck_assert_fails(DeftNDArrayLoad(temp_path(), &n, &arrays, &names), DEFT_ERROR_VALUE,
                    "cannot load NDArray file '/tmp/deft-ndfile-");
    ck_assert_fails(DeftNDArrayLoad(temp_path(), &n, &arrays, &names), DEFT_ERROR_VALUE,
                    "truncated: name 7 needs 4 bytes");
    unlink(temp_path());
    free(bytes);
}
END_TEST

START_TEST(test_bad_magic_numbers) {
    bytes_t b = {.len = 0};
    add_u64(&b, 0x113), add_u64(&b, 0), add_u64(&b, 0), add_u64(&b, 0);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "wrong magic 0x113 (expected 0x112)");
    b = list_of(1);
    add_u32(&b, 0xdeadbeefu), add_u64(&b, 0), add_u64(&b, 0);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "array 0: unknown array magic 0xdeadbeef");
}
END_TEST

START_TEST(test_absurd_counts_and_sizes_allocate_nothing_big) {
    bytes_t b = list_of(UINT64_C(1) << 60);
    add_u64(&b, 0);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "1152921504606846976 arrays cannot fit");
    /* 2^30 float32 elements claimed, 4 bytes present */
    b = list_of(1);
    add_v2_head(&b, 2, SHAPE(1 << 15, 1 << 15));
    add_u32(&b, 0), add_u32(&b, 0);
    assert_buffer_fails(
        &b, DEFT_ERROR_VALUE,
        "array 0: truncated: shape (32768,32768) of float32 needs 4294967296 bytes");
    /* a product past any memory */
    b = list_of(1);
    add_v2_head(&b, 3, SHAPE(INT64_C(1) << 40, INT64_C(1) << 40, INT64_C(1) << 40));
    add_u32(&b, 1);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "too large to hold");
    /* a name longer than what is left */
    b = list_of(0);
    add_u64(&b, 0); /* no names: fine */
    int n;
    DeftNDArrayHandle *arrays;
    const char **names;
    ck_assert_ok(DeftNDArrayLoadFromBuffer(b.data, b.len, &n, &arrays, &names));
    ck_assert_ok(DeftNDArrayListFree(n, arrays, names));
    b = list_of(1);
    add_v2_head(&b, 1, SHAPE(1));
    add_u32(&b, 3), add(&b, "x", 1); /* one uint8 */
    add_u64(&b, 1), add_u64(&b, UINT64_C(1) << 62);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "truncated: name 0 needs 4611686018427387904");
}
END_TEST

START_TEST(test_bad_shapes_dtypes_and_names) {
    bytes_t b = list_of(1);
    add_v2_head(&b, 9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1));
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "array 0: 9 dimensions (deft supports 0 to 8)");
    b = list_of(1);
    add_u32(&b, 0xF993fac9u), add_u32(&b, 0), add_u32(&b, (uint32_t)-5);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "-5 dimensions");
    b = list_of(1);
    add_v2_head(&b, 2, SHAPE(2, -1));
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "dimension 1 is -1");
    b = list_of(1);
    add_u32(&b, 0xF993fac9u), add_u32(&b, 0), add_u32(&b, 0); /* ndim 0 before V3: none */
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "an empty NDArray (no shape)");
    b = list_of(1);
    add_u32(&b, 0xF993fac9u), add_u32(&b, 7);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "unknown storage type 7");
    b = list_of(1);
    add_v2_head(&b, 1, SHAPE(1));
    add_u32(&b, 8), add_u32(&b, 0);
    assert_buffer_fails(&b, DEFT_ERROR_TYPE, "dtype int16 (type flag 8), which deft does not have");
    b = list_of(1);
    add_v2_head(&b, 1, SHAPE(1));
    add_u32(&b, 99), add_u32(&b, 0);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "unknown type flag 99");
    b = list_of(1);
    add_v2_head(&b, 1, SHAPE(1));
    add_u32(&b, 3), add(&b, "x", 1);
    add_u64(&b, 2);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "2 names for 1 arrays (expected 0 or 1)");
    b = list_of(1);
    add_v2_head(&b, 1, SHAPE(1));
    add_u32(&b, 3), add(&b, "x", 1);
    add_u64(&b, 1), add_u64(&b, 3), add(&b, "a\0b", 3);
    assert_buffer_fails(&b, DEFT_ERROR_VALUE, "name 0 holds a NUL byte");
}
END_TEST

START_TEST(test_reads_the_older_array_records) {
    /* V1: no storage type; and the first format, whose magic is the ndim with uint32 dims */
    bytes_t b = list_of(2);
    add_u32(&b, 0xF993fac8u), add_u32(&b, 1), add_i64(&b, 3);
    add_u32(&b, 1), add_u32(&b, 0), add_u32(&b, DEFT_INT32);
    add(&b, (const int32_t[]){0, 1, 2}, 12);
    add_u32(&b, 2), add_u32(&b, 1), add_u32(&b, 2);
    add_u32(&b, 2), add_u32(&b, 0), add_u32(&b, DEFT_UINT8); /* saved from gpu(0) */
    add(&b, (const uint8_t[]){0, 1}, 2);
    add_u64(&b, 0);
    loaded_t l;
    ck_assert_ok(DeftNDArrayLoadFromBuffer(b.data, b.len, &l.count, &l.arrays, &l.names));
    ck_assert_int_eq(l.count, 2);
    assert_indices(l.arrays[0], DEFT_INT32, 1, SHAPE(3));
    assert_indices(l.arrays[1], DEFT_UINT8, 2, SHAPE(1, 2));
    int dev_type, dev_id;
    ck_assert_ok(DeftNDArrayGetDevice(l.arrays[1], &dev_type, &dev_id));
    ck_assert_int_eq(dev_type, DEFT_CPU);
    unload(&l);
}
END_TEST

START_TEST(test_bad_arguments_and_unwritable_paths) {
    int n;
    DeftNDArrayHandle *arrays;
    const char **names;
    ck_assert_fails(DeftNDArrayLoad("/nonexistent/x.params", &n, &arrays, &names), DEFT_ERROR_VALUE,
                    "file '/nonexistent/x.params': No such file");
    ck_assert_fails(DeftNDArrayLoad("/tmp", &n, &arrays, &names), DEFT_ERROR_VALUE, "file '/tmp'");
    ck_assert_fails(DeftNDArrayLoad(NULL, &n, &arrays, &names), DEFT_ERROR_VALUE, "path is NULL");
    ck_assert_fails(DeftNDArrayLoad(mxnet_file("list.params"), &n, NULL, &names), DEFT_ERROR_VALUE,
                    "out_arrays is NULL");
    ck_assert_fails(DeftNDArrayLoadFromBuffer(NULL, 8, &n, &arrays, &names), DEFT_ERROR_VALUE,
                    "data is NULL");

    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_fails(DeftNDArraySave("/nonexistent/x.params", 1, &a, NULL), DEFT_ERROR_VALUE,
                    "cannot write NDArray file '/nonexistent/x.params'");
    ck_assert_fails(DeftNDArraySave(temp_path(), 1, &a, (const char *[]){NULL}), DEFT_ERROR_VALUE,
                    "names[0] is NULL");
    ck_assert_fails(DeftNDArraySave(temp_path(), 1, NULL, NULL), DEFT_ERROR_VALUE, "arrays");
    ck_assert_int_eq(access(temp_path(), F_OK), -1); /* nothing written */
    ck_assert_ok(DeftNDArrayFree(a));
    ck_assert_fails(DeftNDArraySave(temp_path(), 1, &a, NULL), DEFT_ERROR_VALUE, "");
    ck_assert_int_eq(access(temp_path(), F_OK), -1);
}
END_TEST

static Suite *ndarray_file_suite(void) {
    Suite *s = suite_create("ndarray_file");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_reads_every_dtype_mxnet_wrote);
    tcase_add_test(tc, test_reads_a_list_without_names);
    tcase_add_test(tc, test_reads_a_numpy_scalar);
    tcase_add_test(tc, test_refuses_sparse_storage_naming_file_and_kind);
    tcase_add_test(tc, test_writes_the_bytes_mxnet_writes);
    tcase_add_test(tc, test_round_trip_every_dtype_with_and_without_names);
    tcase_add_test(tc, test_round_trip_scalar_zero_size_and_empty_list);
    tcase_add_test(tc, test_load_from_buffer_matches_load);
    tcase_add_test(tc, test_every_truncation_fails_cleanly);
    tcase_add_test(tc, test_bad_magic_numbers);
    tcase_add_test(tc, test_absurd_counts_and_sizes_allocate_nothing_big);
    tcase_add_test(tc, test_bad_shapes_dtypes_and_names);
    tcase_add_test(tc, test_reads_the_older_array_records);
    tcase_add_test(tc, test_bad_arguments_and_unwritable_paths);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return run_suite(ndarray_file_suite());
}
