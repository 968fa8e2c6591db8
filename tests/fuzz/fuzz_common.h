/* Shared by the libFuzzer targets: a reader that turns the fuzzer's bytes
 * into choices, and checks of the C API contract (DESIGN.md, "The C API
 * contract") that stop the run with __builtin_trap() when deft breaks it:
 *
 *   - every call returns 0 or -1;
 *   - after -1, DeftGetLastError() is a non-empty message and
 *     DeftGetLastErrorKind() one of the DeftErrorKind values;
 *   - out-parameters are untouched on failure (callers pre-fill them with a
 *     sentinel and check it with FUZZ_UNTOUCHED).
 *
 * Every target sets DEFT_ENGINE=naive and DEFT_NUM_THREADS=1 unless the
 * environment says otherwise: runs are then deterministic (a reproducer
 * replays the same way) and leave the shared machine's other cores alone. */
#ifndef DEFT_TESTS_FUZZ_COMMON_H
#define DEFT_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deft/c_api.h>

/* A pointer no call returns: out-parameters are pre-filled with it. */
#define FUZZ_SENTINEL ((void *)(uintptr_t)0x5e5e5e5e5e5e5e50ull)
#define FUZZ_SENTINEL_INT (-0x5e5e5e5)

static inline void fuzz_fail(const char *what, const char *call, int status) {
    fprintf(stderr, "deft contract violated: %s: %s returned %d; last error kind %d: '%s'\n", what,
            call, status, DeftGetLastErrorKind(), DeftGetLastError());
    __builtin_trap();
}

/* Check one call's status against the contract; evaluates to the status. */
static inline int fuzz_check_status(int status, const char *call) {
    if (status == 0) return 0;
    if (status != -1) fuzz_fail("status is neither 0 nor -1", call, status);
    const char *message = DeftGetLastError();
    if (message == NULL || message[0] == '\0') fuzz_fail("empty error message", call, status);
    int kind = DeftGetLastErrorKind();
    if (kind < DEFT_ERROR_VALUE || kind > DEFT_ERROR_INTERNAL)
        fuzz_fail("error kind out of range", call, status);
    if (kind == DEFT_ERROR_INTERNAL && getenv("DEFT_FUZZ_ALLOW_INTERNAL") == NULL)
        fuzz_fail("internal error (a bug in deft by its own account)", call, status);
    return -1;
}

#define FUZZ_CALL(call) fuzz_check_status((call), #call)

/* On failure, an out-parameter pre-filled with `sentinel` must still hold it. */
#define FUZZ_UNTOUCHED(status, out, sentinel)                                                      \
    do {                                                                                           \
        if ((status) != 0 && (out) != (sentinel))                                                  \
            fuzz_fail("out-parameter " #out " changed by a failing call", #out, (status));         \
    } while (0)

/* A call that must succeed (the harness's own set-up). */
#define FUZZ_OK(call)                                                                              \
    do {                                                                                           \
        if (fuzz_check_status((call), #call) != 0) fuzz_fail("set-up call failed", #call, -1);     \
    } while (0)

/* Sanitizer defaults for the fuzz binaries (the environment's options come
 * after these): an allocation over 256 MiB fails (deft reports out of
 * memory) instead of stopping the run, since fuzzed parameters ask for
 * arrays of any size; UBSan stops at the first report, with a stack. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) {
    return "print_stacktrace=1:halt_on_error=1";
}

static inline void fuzz_set_environment(void) {
    setenv("DEFT_ENGINE", "naive", 0);
    setenv("DEFT_NUM_THREADS", "1", 0);
}

/* ---- reading choices from the fuzzer's bytes ---- */

typedef struct fuzz_reader {
    const uint8_t *data;
    size_t size, pos;
} fuzz_reader_t;

static inline uint8_t fuzz_u8(fuzz_reader_t *r) {
    return r->pos < r->size ? r->data[r->pos++] : 0;
}

static inline uint16_t fuzz_u16(fuzz_reader_t *r) {
    uint16_t lo = fuzz_u8(r);
    return (uint16_t)(lo | (uint16_t)fuzz_u8(r) << 8);
}

static inline uint64_t fuzz_u64(fuzz_reader_t *r) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)fuzz_u8(r) << (8 * i);
    return v;
}

/* An integer in [0, n) (0 when n is 0). */
static inline int fuzz_below(fuzz_reader_t *r, int n) {
    return n > 0 ? (int)(fuzz_u8(r) % (unsigned)n) : 0;
}

static inline size_t fuzz_left(const fuzz_reader_t *r) {
    return r->size - r->pos;
}

/* A string of up to `max` bytes copied into `buf` (NUL-terminated): a length
 * byte, then the bytes. */
static inline const char *fuzz_string(fuzz_reader_t *r, char *buf, size_t max) {
    size_t n = fuzz_u8(r) % (max + 1);
    if (n > fuzz_left(r)) n = fuzz_left(r);
    memcpy(buf, r->data + r->pos, n);
    buf[n] = '\0';
    r->pos += n;
    return buf;
}

/* An operator: byte < 0x80, an index into `names` (modulo `count`); else a
 * name of (byte - 0x80) bytes follows (seeds and reproducers use names, which
 * stay valid as operators are added), or, when no operator has it, an index
 * made from its bytes. */
static inline const char *fuzz_op_name(fuzz_reader_t *r, const char *const *names, int count) {
    uint8_t b = fuzz_u8(r);
    if (b < 0x80) return names[b % count];
    char name[128];
    size_t n = (size_t)(b - 0x80);
    if (n > fuzz_left(r)) n = fuzz_left(r);
    memcpy(name, r->data + r->pos, n);
    name[n] = '\0';
    r->pos += n;
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0) return names[i];
    unsigned h = 0;
    for (size_t i = 0; i < n; i++) h = h * 31 + (uint8_t)name[i];
    return names[h % (unsigned)count];
}

/* Strings that parameter parsers, names and attributes have trouble with. */
static const char *const fuzz_words[] = {
    "", "0", "1", "-1", "2", "3", "4", "7", "-2", "255", "256", "65536", "2147483647",
    "2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
    "9223372036854775808", "18446744073709551616", "2305843009213693953", "0.5", "-0.5",
    "1e308", "1e-320", "1e999", "nan", "NaN", "inf", "-inf", "true", "false", "True", "False",
    "None", "none", "()", "(0,)", "(1,)", "(-1,)", "(2,)", "(0,0)", "(1,-1)", "(2,3)", "(3,2)",
    "(2,-1)", "(-1,-1)", "(0,1)", "(1,0)", "(-2,)", "(2305843009213693953,)",
    "(9223372036854775807,)", "(4294967296,4294967296)", "(1,1,1,1,1,1,1,1,1)", "[1,2]",
    "(1,2", "((1,2),3)", "(,)", "(1,,2)", "(1 2)", " 1 ", "1 ", "0x10", "1.5", "+1", "--1",
    "float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "bool",
    "cpu", "cpu(0)", "cpu(1)", "gpu(0)", "gpu(-1)", "cpu(", "write", "add", "null",
    "\xff\xfe", "a\"b", "\\", "%s%n", "__shape__", "(2,3)\x00trailing"};
#define FUZZ_NUM_WORDS ((int)(sizeof fuzz_words / sizeof fuzz_words[0]))

#endif
