#define _POSIX_C_SOURCE 200809L
/* Fuzz target: symbol JSON text -> DeftSymbolCreateFromJSON -> introspection,
 * DOT, passes -> shape inference -> a CachedOp run on arrays of the inferred
 * shapes (plain, fused, and forward + backward).
 *
 * Shapes come from the variables' "__shape__"/"__dtype__" attributes (the
 * seed corpus, made by gen_seeds.c, has one graph per operator with them);
 * when those leave inference incomplete, every argument is tried at (2,3).
 * Arrays over FUZZ_MAX_ELEMENTS elements are not made.
 *
 * Beyond the C API contract (fuzz_common.h) it checks that a loaded symbol
 * saves to JSON that loads and saves to the same text again, and that every
 * handle made is freed at the end (the live counts come back). */
#include "fuzz_arrays.h"

#define MAX_ARGS 64
#define MAX_OUT 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_set_environment();
    return 0;
}

static void free_arrays(DeftNDArrayHandle *h, int n) {
    for (int i = 0; i < n; i++) {
        if (h[i]) FUZZ_OK(DeftNDArrayFree(h[i]));
        h[i] = NULL;
    }
}

/* The inferred shape and dtype of entry `index` of `group`; -1 when unknown or large. */
static int inferred(DeftSymbolHandle sym, int group, int index, int64_t *shape, int *ndim,
                    int *dtype) {
    *ndim = FUZZ_SENTINEL_INT, *dtype = FUZZ_SENTINEL_INT;
    int st = FUZZ_CALL(DeftSymbolGetInferredShape(sym, group, index, shape, DEFT_MAX_NDIM, ndim,
                                                  dtype));
    FUZZ_UNTOUCHED(st, *ndim, FUZZ_SENTINEL_INT);
    FUZZ_UNTOUCHED(st, *dtype, FUZZ_SENTINEL_INT);
    if (st != 0) return -1;
    int64_t n = 1;
    for (int i = 0; i < *ndim; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] > FUZZ_MAX_ELEMENTS) return -1;
        n *= shape[i];
        if (n > FUZZ_MAX_ELEMENTS) return -1;
    }
    return 0;
}

/* Make arrays for the arguments then the auxiliary states and run the
 * symbol as a CachedOp with `flags`. */
static void run_cached(DeftSymbolHandle sym, int flags, int nargs, int naux, int nout) {
    if (nargs + naux + nout > MAX_ARGS) return;
    DeftNDArrayHandle in[MAX_ARGS] = {0};
    int nin = 0;
    fuzz_reader_t none = {NULL, 0, 0};
    for (int g = 0; g < 3; g++) {
        int group = g == 0 ? DEFT_ARGUMENTS : g == 1 ? DEFT_OUTPUTS : DEFT_AUXILIARY_STATES;
        int count = g == 0 ? nargs : g == 1 ? nout : naux;
        if (g == 1 && !(flags & DEFT_CACHED_OP_BACKWARD)) continue; /* head gradients */
        for (int i = 0; i < count; i++) {
            int64_t shape[DEFT_MAX_NDIM];
            int ndim, dtype;
            if (inferred(sym, group, i, shape, &ndim, &dtype) != 0) goto done;
            in[nin] = fuzz_array(shape, ndim, dtype,
                                 g == 1 ? FUZZ_FILL_ONES : FUZZ_FILL_SMALL_INTS, &none);
            if (!in[nin]) goto done;
            nin++;
        }
    }
    DeftCachedOpHandle cop = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftCachedOpCreate(sym, flags, &cop));
    FUZZ_UNTOUCHED(st, cop, FUZZ_SENTINEL);
    if (st != 0) goto done;
    for (int run = 0; run < 2; run++) { /* the second run reuses the plan */
        DeftNDArrayHandle out[MAX_OUT] = {0};
        int n = MAX_OUT;
        st = FUZZ_CALL(DeftCachedOpInvoke(cop, nin, in, &n, out));
        if (st != 0) {
            if (n != MAX_OUT) fuzz_fail("num_outputs changed", "DeftCachedOpInvoke", st);
            for (int i = 0; i < MAX_OUT; i++)
                if (out[i]) fuzz_fail("output made by a failing call", "DeftCachedOpInvoke", st);
            break;
        }
        for (int i = 0; i < n; i++) fuzz_read_back(out[i]);
        free_arrays(out, n);
    }
    int64_t stat = -7;
    st = FUZZ_CALL(DeftCachedOpGetPlanStat(cop, DEFT_PLAN_ARENA_BYTES, &stat));
    FUZZ_UNTOUCHED(st, stat, -7);
    FUZZ_OK(DeftCachedOpFree(cop));
done:
    free_arrays(in, nin);
}

static void explore(DeftSymbolHandle sym) {
    int nargs = FUZZ_SENTINEL_INT, nout = FUZZ_SENTINEL_INT, naux = FUZZ_SENTINEL_INT;
    const char *const *names = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftSymbolListArguments(sym, &nargs, &names));
    FUZZ_UNTOUCHED(st, nargs, FUZZ_SENTINEL_INT);
    if (st != 0) return;
    FUZZ_OK(DeftSymbolListOutputs(sym, &nout, &names));
    FUZZ_OK(DeftSymbolListAuxiliaryStates(sym, &naux, &names));
    int n = FUZZ_SENTINEL_INT;
    FUZZ_OK(DeftSymbolGetNumOutputs(sym, &n));
    const char *text = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolToDot(sym, &text));
    FUZZ_UNTOUCHED(st, text, FUZZ_SENTINEL);
    DeftSymbolHandle other = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolGetInternals(sym, &other));
    FUZZ_UNTOUCHED(st, other, FUZZ_SENTINEL);
    if (st == 0) FUZZ_OK(DeftSymbolFree(other));
    other = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolGetChildren(sym, &other));
    FUZZ_UNTOUCHED(st, other, FUZZ_SENTINEL);
    if (st == 0) FUZZ_OK(DeftSymbolFree(other));
    const char *value = FUZZ_SENTINEL;
    int found = FUZZ_SENTINEL_INT;
    st = FUZZ_CALL(DeftSymbolGetAttr(sym, "__shape__", &value, &found));
    FUZZ_UNTOUCHED(st, found, FUZZ_SENTINEL_INT);

    /* Inference from the attributes, else every argument at (2,3). */
    int complete = FUZZ_SENTINEL_INT;
    st = FUZZ_CALL(DeftSymbolInferShape(sym, 0, NULL, NULL, NULL, NULL, &complete));
    FUZZ_UNTOUCHED(st, complete, FUZZ_SENTINEL_INT);
    if ((st != 0 || !complete) && nargs > 0 && nargs <= MAX_ARGS) {
        static const char *arg_names[MAX_ARGS];
        static int ndims[MAX_ARGS], dtypes[MAX_ARGS];
        static int64_t dims[MAX_ARGS * 2];
        const char *const *list = NULL;
        FUZZ_OK(DeftSymbolListArguments(sym, &nargs, &list));
        for (int i = 0; i < nargs; i++) {
            arg_names[i] = list[i];
            ndims[i] = 2, dtypes[i] = DEFT_FLOAT32;
            dims[2 * i] = 2, dims[2 * i + 1] = 3;
        }
        complete = FUZZ_SENTINEL_INT;
        st = FUZZ_CALL(DeftSymbolInferShape(sym, nargs, arg_names, ndims, dims, dtypes,
                                            &complete));
        FUZZ_UNTOUCHED(st, complete, FUZZ_SENTINEL_INT);
    }
    if (st == 0 && complete) {
        run_cached(sym, 0, nargs, naux, nout);
        run_cached(sym, DEFT_CACHED_OP_FUSE, nargs, naux, nout);
        run_cached(sym, DEFT_CACHED_OP_BACKWARD, nargs, naux, nout);
    }

    DeftSymbolHandle passed = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolApplyPasses(sym, "DCE,CSE,InferShape,Fuse", &passed));
    FUZZ_UNTOUCHED(st, passed, FUZZ_SENTINEL);
    if (st == 0) FUZZ_OK(DeftSymbolFree(passed));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    char *json = malloc(size + 1);
    if (!json) return 0;
    memcpy(json, data, size);
    json[size] = '\0';

    int64_t live_arrays = 0, live_symbols = 0;
    FUZZ_OK(DeftGetLiveNDArrayCount(&live_arrays));
    FUZZ_OK(DeftGetLiveSymbolCount(&live_symbols));

    DeftSymbolHandle sym = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftSymbolCreateFromJSON(json, &sym));
    FUZZ_UNTOUCHED(st, sym, FUZZ_SENTINEL);
    free(json);
    if (st != 0) return 0;

    /* Round trip: save, load, save gives the same text. */
    const char *saved = FUZZ_SENTINEL;
    FUZZ_OK(DeftSymbolSaveToJSON(sym, &saved));
    char *first = strdup(saved);
    DeftSymbolHandle back = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolCreateFromJSON(first, &back));
    if (st != 0) fuzz_fail("a saved symbol does not load", "DeftSymbolCreateFromJSON", st);
    const char *again = NULL;
    FUZZ_OK(DeftSymbolSaveToJSON(back, &again));
    if (strcmp(first, again) != 0)
        fuzz_fail("save(load(save(s))) differs from save(s)", "DeftSymbolSaveToJSON", 0);
    free(first);
    FUZZ_OK(DeftSymbolFree(back));

    explore(sym);
    FUZZ_OK(DeftSymbolFree(sym));
    FUZZ_CALL(DeftWaitAll());

    int64_t arrays_after = 0, symbols_after = 0;
    FUZZ_OK(DeftGetLiveNDArrayCount(&arrays_after));
    FUZZ_OK(DeftGetLiveSymbolCount(&symbols_after));
    if (arrays_after != live_arrays || symbols_after != live_symbols)
        fuzz_fail("live handle counts did not come back", "DeftGetLiveSymbolCount", 0);
    return 0;
}
