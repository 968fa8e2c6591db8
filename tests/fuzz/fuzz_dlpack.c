#define _POSIX_C_SOURCE 200809L
/* Fuzz target: DLPack import with fuzzed tensor fields, and the string
 * parsers outside operator parameters. The first byte picks one of:
 *
 *   0 DLPack import: ndim, shape, strides, dtype code/bits/lanes,
 *     byte_offset, device. The harness backs the tensor with a buffer of
 *     exactly the bytes it describes (so AddressSanitizer sees any read past
 *     it); tensors too large to back are imported only when their size
 *     overflows, and must then be refused. An imported array is read,
 *     written, used by an operator and exported again; its deleter must run
 *     exactly once after the last user is gone, and never on failure.
 *   1 profiler configuration keys and values, then a profiled call;
 *   2 dtype names (a name that parses names a dtype whose name parses back);
 *   3 symbol names, attributes (what is set reads back, also after a JSON
 *     round trip), operator names, atomic symbols with fuzzed parameters
 *     (the operator as fuzz_op_name() reads it), pass lists and
 *     device-placement groups.
 */
#include <limits.h>

#include "fuzz_arrays.h"

#define MAX_STR 64
#define MAX_BACKED_BYTES ((uint64_t)1 << 20)

static int op_count;
static const char *const *op_names;
static int deleter_calls;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_set_environment();
    FUZZ_OK(DeftListOperators(&op_count, &op_names));
    return 0;
}

static void count_deleter(DLManagedTensor *t) {
    (void)t;
    deleter_calls++;
}

static int64_t fuzz_dim(fuzz_reader_t *r) {
    uint8_t b = fuzz_u8(r);
    if (b < 200) return b % 6;
    if (b < 240) return b % 50;
    switch (b) {
    case 240: return INT64_MAX;
    case 241: return (int64_t)1 << 62;
    case 242: return 2305843009213693953LL;
    case 243: return -1;
    case 244: return (int64_t)1 << 32;
    case 245: return (int64_t)1 << 31;
    case 246: return 0;
    case 247: return 4096;
    case 248: return (int64_t)1 << 40;
    case 249: return INT64_MIN;
    default: return (int64_t)fuzz_u64(r);
    }
}

/* Bytes of the elements the tensor describes (byte_offset not included),
 * or -1 when that overflows int64 or a dimension is negative. */
static int64_t element_bytes(const DLTensor *t) {
    if (t->ndim < 0) return -1;
    uint64_t n = 1;
    bool zero = false;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return -1;
        if (t->shape[i] == 0) zero = true;
    }
    for (int i = 0; i < t->ndim && !zero; i++)
        if (__builtin_mul_overflow(n, (uint64_t)t->shape[i], &n) || n > INT64_MAX) return -1;
    if (zero) n = 0;
    uint64_t bits = (uint64_t)t->dtype.bits * t->dtype.lanes, bytes;
    if (__builtin_mul_overflow(n, (bits + 7) / 8, &bytes) || bytes > INT64_MAX) return -1;
    return (int64_t)bytes;
}

static void use_imported(DeftNDArrayHandle h) {
    fuzz_read_back(h);
    size_t nbytes = 0;
    if (FUZZ_CALL(DeftNDArrayGetNBytes(h, &nbytes)) == 0 && nbytes <= MAX_BACKED_BYTES) {
        void *buf = calloc(1, nbytes ? nbytes : 1);
        if (buf) FUZZ_CALL(DeftNDArrayCopyFromHost(h, buf, nbytes));
        free(buf);
    }
    static const char *const ops[] = {"sum", "_plus_scalar", "relu", "transpose"};
    for (int i = 0; i < 4; i++) {
        DeftOpHandle op;
        FUZZ_OK(DeftGetOperator(ops[i], &op));
        DeftNDArrayHandle out[4] = {0};
        int n = 4;
        if (FUZZ_CALL(DeftImperativeInvoke(op, 1, &h, &n, out, 0, NULL, NULL)) == 0)
            for (int j = 0; j < n; j++) {
                fuzz_read_back(out[j]);
                FUZZ_OK(DeftNDArrayFree(out[j]));
            }
    }
    DLManagedTensor *back = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftNDArrayToDLPack(h, &back));
    FUZZ_UNTOUCHED(st, back, FUZZ_SENTINEL);
    if (st == 0) back->deleter(back);
}

static void fuzz_import(fuzz_reader_t *r) {
    static const uint8_t codes[] = {kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle, kDLBfloat,
                                    kDLComplex};
    static const uint8_t bits[] = {8, 16, 32, 64, 1, 0, 128, 7};
    static const uint16_t lanes[] = {1, 1, 1, 2, 0, 65535};
    static const uint64_t offsets[] = {0, 0, 0, 1, 2, 3, 4, 8, 64, (uint64_t)1 << 63,
                                       UINT64_MAX - 3};
    static const DLDeviceType devices[] = {kDLCPU, kDLCPU, kDLCPU, kDLCUDA, kDLCUDAHost,
                                           (DLDeviceType)0, (DLDeviceType)99};
    int64_t shape[16], strides[16];
    uint8_t b = fuzz_u8(r);
    int ndim = b < 0xF0 ? b % 11 - 1 : (int)(int8_t)fuzz_u8(r);
    for (int i = 0; i < 16; i++) shape[i] = i < ndim ? fuzz_dim(r) : 1;
    DLManagedTensor t = {.deleter = count_deleter};
    t.dl_tensor.ndim = ndim;
    t.dl_tensor.shape = shape;
    uint8_t s = fuzz_u8(r) % 4;
    b = fuzz_u8(r);
    t.dl_tensor.dtype.code = b < 0xF0 ? codes[b % 6] : fuzz_u8(r);
    b = fuzz_u8(r);
    t.dl_tensor.dtype.bits = b < 0xF0 ? bits[b % 8] : fuzz_u8(r);
    t.dl_tensor.dtype.lanes = lanes[fuzz_u8(r) % 6];
    t.dl_tensor.byte_offset = offsets[fuzz_u8(r) % 11];
    t.dl_tensor.device.device_type = devices[fuzz_u8(r) % 7];
    t.dl_tensor.device.device_id = fuzz_u8(r) % 3 - 1;
    if (s > 0 && ndim > 0 && ndim <= 16) { /* 0: no strides (compact) */
        int64_t step = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            strides[i] = s == 2 ? fuzz_dim(r) : s == 3 && shape[i] == 1 ? fuzz_dim(r) : step;
            step = (int64_t)((uint64_t)step * (uint64_t)(shape[i] > 0 ? shape[i] : 1));
        }
        t.dl_tensor.strides = strides;
    }
    /* Back the tensor with exactly the bytes it describes. A size that
     * overflows, or data + byte_offset + size past the address space, must
     * be refused; a tensor of no elements may carry any offset (nothing is
     * read); a larger one than MAX_BACKED_BYTES is not tried. */
    int64_t bytes = ndim <= 16 ? element_bytes(&t.dl_tensor) : -1;
    bool bad_shape = bytes < 0 && !(ndim >= 0 && ndim <= 16);
    bool overflows = bytes < 0 && !bad_shape;
    for (int i = 0; i < ndim && i < 16 && overflows; i++)
        if (shape[i] < 0) overflows = false; /* a negative dimension: refused, not overflowing */
    if (bytes < 0) bytes = 0;
    uint64_t offset = t.dl_tensor.byte_offset;
    size_t alloc = 1;
    if (bytes > 0 && !overflows) {
        if (offset > MAX_BACKED_BYTES || (uint64_t)bytes + offset > MAX_BACKED_BYTES) {
            if (offset < UINT64_MAX - ((uint64_t)1 << 48)) return; /* cannot back it */
            overflows = true; /* wraps past the end of the address space */
        } else {
            alloc = (size_t)(offset + (uint64_t)bytes);
        }
    }
    void *buf = calloc(1, alloc);
    if (!buf) return;
    t.dl_tensor.data = buf;

    deleter_calls = 0;
    DeftNDArrayHandle h = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftNDArrayFromDLPack(&t, &h));
    FUZZ_UNTOUCHED(st, h, FUZZ_SENTINEL);
    if (st != 0) {
        if (deleter_calls != 0) fuzz_fail("deleter called by a failed import", "import", st);
    } else {
        if (overflows)
            fuzz_fail("imported a tensor whose byte size overflows", "DeftNDArrayFromDLPack", st);
        use_imported(h);
        FUZZ_OK(DeftNDArrayFree(h));
        FUZZ_CALL(DeftWaitAll());
        if (deleter_calls != 1)
            fuzz_fail("deleter not called exactly once after the last user", "import", st);
    }
    free(buf);
}

static const char *pick_string(fuzz_reader_t *r, char *buf) {
    uint8_t b = fuzz_u8(r);
    return b < 0x80 ? fuzz_words[b % FUZZ_NUM_WORDS] : fuzz_string(r, buf, MAX_STR);
}

static void fuzz_profiler(fuzz_reader_t *r) {
    static const char *const keys[] = {"profile_all",     "profile_imperative", "profile_symbolic",
                                       "profile_memory",  "profile_api",        "aggregate_stats",
                                       "continuous_dump", "filename"};
    char kbuf[4][MAX_STR + 1], vbuf[4][MAX_STR + 1];
    const char *k[4], *v[4];
    int n = fuzz_u8(r) % 5;
    for (int i = 0; i < n; i++) {
        uint8_t b = fuzz_u8(r);
        k[i] = b < 0xC0 ? keys[b % 8] : fuzz_string(r, kbuf[i], MAX_STR);
        v[i] = pick_string(r, vbuf[i]);
    }
    FUZZ_CALL(DeftProfilerSetConfig(n, k, v));
    if (FUZZ_CALL(DeftProfilerSetState(fuzz_u8(r) % 3)) == 0) {
        DeftOpHandle op;
        FUZZ_OK(DeftGetOperator("_plus_scalar", &op));
        int64_t shape[1] = {4};
        DeftNDArrayHandle x = NULL;
        FUZZ_OK(DeftNDArrayCreate(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &x));
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        FUZZ_OK(DeftImperativeInvoke(op, 1, &x, &nout, &y, 0, NULL, NULL));
        fuzz_read_back(y);
        FUZZ_OK(DeftNDArrayFree(y));
        FUZZ_OK(DeftNDArrayFree(x));
        FUZZ_CALL(DeftProfilerSetState(0));
    }
    const char *text = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftProfilerDumps(1, fuzz_u8(r) % 3, &text));
    FUZZ_UNTOUCHED(st, text, FUZZ_SENTINEL);
    static const char *const dk[] = {"profile_all", "profile_imperative", "profile_symbolic",
                                     "profile_memory", "profile_api", "aggregate_stats",
                                     "continuous_dump", "filename"};
    static const char *const dv[] = {"false", "true", "true", "false",
                                     "false", "false", "false", "profile.json"};
    FUZZ_OK(DeftProfilerSetConfig(8, dk, dv));
    FUZZ_OK(DeftProfilerReset());
}

static void fuzz_dtype_names(fuzz_reader_t *r) {
    char buf[MAX_STR + 1];
    const char *name = pick_string(r, buf);
    int code = FUZZ_SENTINEL_INT;
    int st = FUZZ_CALL(DeftDTypeFromName(name, &code));
    FUZZ_UNTOUCHED(st, code, FUZZ_SENTINEL_INT);
    int raw = (int)(int8_t)fuzz_u8(r);
    for (int pass = 0; pass < 2; pass++) {
        int c = pass == 0 ? (st == 0 ? code : raw) : raw;
        const char *back = FUZZ_SENTINEL;
        int st2 = FUZZ_CALL(DeftDTypeGetName(c, &back));
        FUZZ_UNTOUCHED(st2, back, FUZZ_SENTINEL);
        size_t size = (size_t)-1;
        int st3 = FUZZ_CALL(DeftDTypeGetSize(c, &size));
        FUZZ_UNTOUCHED(st3, size, (size_t)-1);
        if (st2 != st3) fuzz_fail("GetName and GetSize disagree on a dtype", "DeftDTypeGetName", st2);
        if (st2 == 0) {
            int again = -1;
            if (FUZZ_CALL(DeftDTypeFromName(back, &again)) != 0 || again != c)
                fuzz_fail("a dtype's name does not parse back to it", "DeftDTypeFromName", 0);
        } else if (pass == 0 && st == 0) {
            fuzz_fail("a parsed dtype has no name", "DeftDTypeGetName", st2);
        }
    }
}

/* A symbol attribute reads back what was set. */
static void check_attr(DeftSymbolHandle sym, const char *key, const char *want) {
    const char *value = NULL;
    int found = 0;
    FUZZ_OK(DeftSymbolGetAttr(sym, key, &value, &found));
    if (!found || strcmp(value, want) != 0)
        fuzz_fail("an attribute does not read back as set", "DeftSymbolGetAttr", 0);
}

static void fuzz_symbol_strings(fuzz_reader_t *r) {
    char nbuf[MAX_STR + 1], kbuf[3][MAX_STR + 1], vbuf[3][MAX_STR + 1];
    char pbuf[4][2][MAX_STR + 1];
    int64_t live_symbols = 0;
    FUZZ_OK(DeftGetLiveSymbolCount(&live_symbols));

    /* Operator lookup by a fuzzed name (the error suggests near names). */
    DeftOpHandle found = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftGetOperator(pick_string(r, nbuf), &found));
    FUZZ_UNTOUCHED(st, found, FUZZ_SENTINEL);

    /* A variable with a fuzzed name and attributes. */
    DeftSymbolHandle var = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolCreateVariable(pick_string(r, nbuf), &var));
    FUZZ_UNTOUCHED(st, var, FUZZ_SENTINEL);
    if (st == 0) {
        static const char *const attr_keys[] = {"__shape__", "__dtype__", "__device__",
                                                "ctx_group", "__storage_offset__", "lr_mult"};
        int n = fuzz_u8(r) % 4, set = 0;
        const char *keys[3], *vals[3];
        for (int i = 0; i < n && i < 3; i++) {
            uint8_t b = fuzz_u8(r);
            const char *k = b < 0xC0 ? attr_keys[b % 6] : fuzz_string(r, kbuf[i], MAX_STR);
            const char *v = pick_string(r, vbuf[i]);
            if (FUZZ_CALL(DeftSymbolSetAttr(var, k, v)) == 0) {
                check_attr(var, k, v);
                int j = 0;
                while (j < set && strcmp(keys[j], k) != 0) j++;
                keys[j] = k, vals[j] = v; /* the last value set for each key */
                if (j == set) set++;
            }
        }
        const char *json = NULL;
        if (FUZZ_CALL(DeftSymbolSaveToJSON(var, &json)) == 0) {
            DeftSymbolHandle back = FUZZ_SENTINEL;
            st = FUZZ_CALL(DeftSymbolCreateFromJSON(json, &back));
            if (st != 0) fuzz_fail("a saved variable does not load", "DeftSymbolCreateFromJSON", st);
            for (int i = 0; i < set; i++) check_attr(back, keys[i], vals[i]);
            FUZZ_OK(DeftSymbolFree(back));
        }
        int complete = FUZZ_SENTINEL_INT;
        st = FUZZ_CALL(DeftSymbolInferShape(var, 0, NULL, NULL, NULL, NULL, &complete));
        FUZZ_UNTOUCHED(st, complete, FUZZ_SENTINEL_INT);
        const char *groups[1] = {pick_string(r, nbuf)};
        int types[1] = {fuzz_u8(r) % 4}, ids[1] = {(int)(int8_t)fuzz_u8(r)};
        DeftSymbolHandle placed = FUZZ_SENTINEL;
        st = FUZZ_CALL(DeftSymbolPlaceDevice(var, DEFT_CPU, 0, 1, groups, types, ids, &placed));
        FUZZ_UNTOUCHED(st, placed, FUZZ_SENTINEL);
        if (st == 0) FUZZ_OK(DeftSymbolFree(placed));
        FUZZ_OK(DeftSymbolFree(var));
    }

    /* An atomic symbol with fuzzed parameters, composed, saved and loaded. */
    DeftOpHandle op;
    FUZZ_OK(DeftGetOperator(fuzz_op_name(r, op_names, op_count), &op));
    int np = 0;
    FUZZ_OK(DeftOpGetNumParams(op, &np));
    const char *keys[4], *vals[4];
    int n = fuzz_u8(r) % 5;
    for (int i = 0; i < n; i++) {
        uint8_t b = fuzz_u8(r);
        const char *name = NULL, *type, *def, *doc;
        if (np > 0 && b < 0xC0) FUZZ_OK(DeftOpGetParam(op, b % np, &name, &type, &def, &doc));
        keys[i] = name ? name : fuzz_string(r, pbuf[i][0], MAX_STR);
        vals[i] = pick_string(r, pbuf[i][1]);
    }
    DeftSymbolHandle atom = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolCreateAtomic(op, n, keys, vals, &atom));
    FUZZ_UNTOUCHED(st, atom, FUZZ_SENTINEL);
    if (st == 0) {
        FUZZ_CALL(DeftSymbolCompose(atom, pick_string(r, nbuf), 0, NULL, NULL));
        const char *json = NULL;
        if (FUZZ_CALL(DeftSymbolSaveToJSON(atom, &json)) == 0) {
            DeftSymbolHandle back = FUZZ_SENTINEL;
            st = FUZZ_CALL(DeftSymbolCreateFromJSON(json, &back));
            if (st != 0) fuzz_fail("a saved symbol does not load", "DeftSymbolCreateFromJSON", st);
            FUZZ_OK(DeftSymbolFree(back));
        }
        DeftSymbolHandle passed = FUZZ_SENTINEL;
        st = FUZZ_CALL(DeftSymbolApplyPasses(atom, pick_string(r, nbuf), &passed));
        FUZZ_UNTOUCHED(st, passed, FUZZ_SENTINEL);
        if (st == 0) FUZZ_OK(DeftSymbolFree(passed));
        FUZZ_OK(DeftSymbolFree(atom));
    }
    int64_t after = 0;
    FUZZ_OK(DeftGetLiveSymbolCount(&after));
    if (after != live_symbols)
        fuzz_fail("live symbol count did not come back", "DeftGetLiveSymbolCount", 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader_t r = {data, size, 0};
    switch (fuzz_u8(&r) % 4) {
    case 0: fuzz_import(&r); break;
    case 1: fuzz_profiler(&r); break;
    case 2: fuzz_dtype_names(&r); break;
    default: fuzz_symbol_strings(&r); break;
    }
    return 0;
}
