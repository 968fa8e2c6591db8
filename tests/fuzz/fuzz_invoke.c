#define _POSIX_C_SOURCE 200809L
/* Fuzz target: one operator, chosen by the input, called with fuzzed input
 * arrays and string parameters, imperatively, recorded by deferred compute
 * (then computed, exported, reloaded and run as a CachedOp), or recorded by
 * autograd and differentiated. invoke_format.h gives the byte layout.
 *
 * Beyond the C API contract (fuzz_common.h) it checks that
 *   - a reloaded export runs to outputs of the recorded shapes and dtypes;
 *   - saving the reloaded symbol gives the same JSON text;
 *   - every NDArray and Symbol handle the run made is freed at the end
 *     (the live counts come back). */
#include "fuzz_arrays.h"
#include "invoke_format.h"

#define MAX_IN 8
#define MAX_OUT 64
#define MAX_PARAMS 6
#define MAX_STR 48

typedef struct call_spec {
    DeftOpHandle op;
    int nparams;
    const char *keys[MAX_PARAMS], *vals[MAX_PARAMS];
    char key_buf[MAX_PARAMS][MAX_STR + 1], val_buf[MAX_PARAMS][MAX_STR + 1];
} call_spec_t;

static int op_count;
static const char *const *op_names;
static int max_chain = 1 << 30;
static int verbose;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_set_environment();
    FUZZ_OK(DeftListOperators(&op_count, &op_names));
    /* DEFT_FUZZ_MAX_CHAIN caps the chained calls (to fuzz past a known
     * defect of long chains); DEFT_FUZZ_VERBOSE prints each decoded call. */
    const char *text = getenv("DEFT_FUZZ_MAX_CHAIN");
    if (text && atoi(text) > 0) max_chain = atoi(text);
    verbose = getenv("DEFT_FUZZ_VERBOSE") != NULL;
    return 0;
}

static void decode_params(fuzz_reader_t *r, call_spec_t *c) {
    int np = 0;
    FUZZ_OK(DeftOpGetNumParams(c->op, &np));
    c->nparams = fuzz_u8(r) % MAX_PARAMS;
    for (int i = 0; i < c->nparams; i++) {
        uint8_t k = fuzz_u8(r), v = fuzz_u8(r);
        int index = np > 0 && k < INVOKE_KEY_STRING ? k % np : -1;
        const char *name = NULL, *type = NULL, *def = NULL, *doc = NULL;
        if (index >= 0) FUZZ_OK(DeftOpGetParam(c->op, index, &name, &type, &def, &doc));
        if (name)
            c->keys[i] = name;
        else if (k < INVOKE_KEY_WORD)
            c->keys[i] = fuzz_string(r, c->key_buf[i], MAX_STR);
        else
            c->keys[i] = fuzz_words[k % FUZZ_NUM_WORDS];
        if (v < INVOKE_VALUE_DEFAULT) {
            c->vals[i] = fuzz_words[v % FUZZ_NUM_WORDS];
        } else if (v < INVOKE_VALUE_CHOICE) {
            c->vals[i] = def ? def : "";
        } else if (v < INVOKE_VALUE_STRING) {
            int n = 0;
            const char *const *words = NULL;
            if (index >= 0) FUZZ_OK(DeftOpGetParamChoices(c->op, index, &n, &words));
            c->vals[i] = n > 0 ? words[v % n] : "";
        } else {
            c->vals[i] = fuzz_string(r, c->val_buf[i], MAX_STR);
        }
    }
}

/* One call; on failure, checks that nothing was created or changed. */
static int invoke(const call_spec_t *c, int deferred, int nin, const DeftNDArrayHandle *in,
                  int room, int *nout, DeftNDArrayHandle *out) {
    *nout = room;
    for (int i = 0; i < MAX_OUT; i++) out[i] = NULL;
    int st = deferred ? FUZZ_CALL(DeftImperativeDeferredInvoke(c->op, nin, in, nout, out,
                                                                c->nparams, c->keys, c->vals))
                      : FUZZ_CALL(DeftImperativeInvoke(c->op, nin, in, nout, out, c->nparams,
                                                       c->keys, c->vals));
    if (st != 0) {
        /* too little room: the count needed comes back, so a caller can call again
         * (DeftImperativeInvoke's contract); any other failure leaves it alone */
        bool needs_room = *nout > room && strstr(DeftGetLastError(), "there is room for");
        if (*nout != room && !needs_room)
            fuzz_fail("num_outputs changed by a failing call", "invoke", st);
        for (int i = 0; i < MAX_OUT; i++)
            if (out[i]) fuzz_fail("output created by a failing call", "invoke", st);
    } else if (*nout < 0 || *nout > room) {
        fuzz_fail("num_outputs out of range", "invoke", st);
    }
    return st;
}

static void free_arrays(DeftNDArrayHandle *h, int n) {
    for (int i = 0; i < n; i++) {
        if (h[i]) FUZZ_OK(DeftNDArrayFree(h[i]));
        h[i] = NULL;
    }
}

/* Run `reps` calls, each one's first output the next one's first input.
 * Leaves the last call's outputs in `out` (intermediates are freed at once:
 * the recorded graph must keep what it needs). */
static int run_chain(const call_spec_t *c, int deferred, int reps, int nin,
                     DeftNDArrayHandle *in, int room, int *nout, DeftNDArrayHandle *out) {
    DeftNDArrayHandle first = nin > 0 ? in[0] : NULL;
    DeftNDArrayHandle prev[MAX_OUT] = {0};
    int nprev = 0, st = 0;
    for (int rep = 0; rep < reps; rep++) {
        if (rep > 0) {
            if (nprev == 0 || nin == 0) break;
            in[0] = prev[0];
        }
        st = invoke(c, deferred, nin, in, room, nout, out);
        free_arrays(prev, nprev);
        nprev = 0;
        if (st != 0) break;
        if (rep + 1 < reps) {
            for (int i = 0; i < *nout; i++) prev[i] = out[i], out[i] = NULL;
            nprev = *nout;
        }
    }
    if (nprev > 0) { /* the chain stopped early: its last outputs are the result */
        for (int i = 0; i < nprev; i++) out[i] = prev[i];
        *nout = nprev;
    }
    if (nin > 0) in[0] = first;
    return st;
}

static void check_same_desc(DeftNDArrayHandle a, DeftNDArrayHandle b) {
    int64_t sa[DEFT_MAX_NDIM], sb[DEFT_MAX_NDIM];
    int na = 0, nb = 0, da = 0, db = 0;
    FUZZ_OK(DeftNDArrayGetShape(a, sa, DEFT_MAX_NDIM, &na));
    FUZZ_OK(DeftNDArrayGetShape(b, sb, DEFT_MAX_NDIM, &nb));
    FUZZ_OK(DeftNDArrayGetDType(a, &da));
    FUZZ_OK(DeftNDArrayGetDType(b, &db));
    if (na != nb || da != db || memcmp(sa, sb, sizeof(int64_t) * (size_t)na) != 0)
        fuzz_fail("the reloaded export's output differs in shape or dtype from the recorded one",
                  "DeftCachedOpInvoke", 0);
}

/* Export the recorded graph from `in` to `out`, save it, reload it, save
 * again (the same text), and run it as a CachedOp on the same inputs. */
static void export_and_run(int nin, DeftNDArrayHandle *in, int nout, DeftNDArrayHandle *out) {
    static const char *const names[MAX_IN] = {"in0", "in1", "in2", "in3",
                                              "in4", "in5", "in6", "in7"};
    for (int i = 0; i < nin; i++)
        if (!in[i]) return;
    DeftSymbolHandle sym = FUZZ_SENTINEL;
    int st = FUZZ_CALL(DeftNDArrayGetDeferredComputeSymbol(in, out, names, NULL, nin, nout, &sym));
    FUZZ_UNTOUCHED(st, sym, FUZZ_SENTINEL);
    if (st != 0) return;
    const char *json = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftSymbolSaveToJSON(sym, &json));
    FUZZ_UNTOUCHED(st, json, FUZZ_SENTINEL);
    DeftSymbolHandle back = FUZZ_SENTINEL;
    if (st == 0) {
        st = FUZZ_CALL(DeftSymbolCreateFromJSON(json, &back));
        FUZZ_UNTOUCHED(st, back, FUZZ_SENTINEL);
        if (st != 0) fuzz_fail("an exported symbol does not load", "DeftSymbolCreateFromJSON", st);
        char *first = strdup(json);
        const char *again = NULL;
        FUZZ_OK(DeftSymbolSaveToJSON(back, &again));
        if (first && strcmp(first, again) != 0)
            fuzz_fail("save(load(json)) differs from json", "DeftSymbolSaveToJSON", 0);
        free(first);
    }
    FUZZ_OK(DeftSymbolFree(sym));
    if (st != 0) return;
    DeftCachedOpHandle cop = FUZZ_SENTINEL;
    st = FUZZ_CALL(DeftCachedOpCreate(back, 0, &cop));
    FUZZ_UNTOUCHED(st, cop, FUZZ_SENTINEL);
    if (st == 0) {
        DeftNDArrayHandle res[MAX_OUT] = {0};
        int nres = MAX_OUT;
        st = FUZZ_CALL(DeftCachedOpInvoke(cop, nin, in, &nres, res));
        if (st != 0 && nres != MAX_OUT) fuzz_fail("num_outputs changed", "DeftCachedOpInvoke", st);
        if (st == 0) {
            if (nres != nout)
                fuzz_fail("the reloaded export has another number of outputs",
                          "DeftCachedOpInvoke", st);
            for (int i = 0; i < nres; i++) {
                check_same_desc(out[i], res[i]);
                fuzz_read_back(res[i]);
            }
            free_arrays(res, nres);
        }
        FUZZ_OK(DeftCachedOpFree(cop));
    }
    FUZZ_OK(DeftSymbolFree(back));
}

static void run_imperative(const call_spec_t *c, int flags, int reps, int nin,
                           DeftNDArrayHandle *in, int room) {
    DeftNDArrayHandle out[MAX_OUT];
    int nout = 0;
    if (run_chain(c, 0, reps, nin, in, room, &nout, out) != 0 && nout == 0) return;
    for (int i = 0; i < nout; i++) fuzz_read_back(out[i]);
    if ((flags & INVOKE_FLAG_GIVEN_OUTPUTS) && nout > 0) {
        int n = nout;
        int st = FUZZ_CALL(DeftImperativeInvoke(c->op, nin, in, &n, out, c->nparams, c->keys,
                                                c->vals));
        if (st != 0 && n != nout) fuzz_fail("num_outputs changed", "DeftImperativeInvoke", st);
        for (int i = 0; i < nout; i++) fuzz_read_back(out[i]);
    }
    free_arrays(out, nout);
}

static void run_deferred(const call_spec_t *c, int reps, int nin, DeftNDArrayHandle *in,
                         int room) {
    DeftNDArrayHandle out[MAX_OUT];
    int nout = 0;
    if (run_chain(c, 1, reps, nin, in, room, &nout, out) != 0 && nout == 0) return;
    int lazy[MAX_OUT];
    FUZZ_CALL(DeftNDArrayGetIsDeferredCompute(out, nout, lazy));
    for (int i = 0; i < nout; i++) { /* shape and dtype are known before computing */
        int64_t shape[DEFT_MAX_NDIM];
        int ndim;
        FUZZ_CALL(DeftNDArrayGetShape(out[i], shape, DEFT_MAX_NDIM, &ndim));
    }
    if (FUZZ_CALL(DeftNDArrayTriggerDeferredCompute(out, nout)) == 0)
        for (int i = 0; i < nout; i++) fuzz_read_back(out[i]);
    export_and_run(nin, in, nout, out);
    FUZZ_CALL(DeftNDArrayClearDeferredCompute(out, nout));
    free_arrays(out, nout);
}

static void run_autograd(const call_spec_t *c, int flags, int reps, int nin,
                         DeftNDArrayHandle *in, int room, int deferred) {
    DeftNDArrayHandle vars[MAX_IN], grads[MAX_IN] = {0};
    int reqs[MAX_IN], nvars = 0;
    for (int i = 0; i < nin; i++) {
        int dtype = -1, ndim = 0;
        int64_t shape[DEFT_MAX_NDIM];
        if (!in[i] || DeftNDArrayGetDType(in[i], &dtype) != 0 || !fuzz_is_float(dtype)) continue;
        FUZZ_OK(DeftNDArrayGetShape(in[i], shape, DEFT_MAX_NDIM, &ndim));
        DeftNDArrayHandle g = FUZZ_SENTINEL;
        int st = FUZZ_CALL(DeftNDArrayCreate(shape, ndim, dtype, DEFT_CPU, 0, &g));
        FUZZ_UNTOUCHED(st, g, FUZZ_SENTINEL);
        if (st != 0) continue;
        vars[nvars] = in[i], grads[nvars] = g;
        reqs[nvars++] = flags & INVOKE_FLAG_GRAD_ADD ? DEFT_GRAD_ADD : DEFT_GRAD_WRITE;
    }
    if (nvars > 0) FUZZ_CALL(DeftAutogradMarkVariables(nvars, vars, reqs, grads));
    FUZZ_OK(DeftAutogradSetIsRecording(1, NULL));
    if (flags & INVOKE_FLAG_TRAINING) FUZZ_OK(DeftAutogradSetIsTraining(1, NULL));
    DeftNDArrayHandle out[MAX_OUT];
    int nout = 0;
    run_chain(c, deferred, reps, nin, in, room, &nout, out);
    FUZZ_OK(DeftAutogradSetIsRecording(0, NULL));
    FUZZ_OK(DeftAutogradSetIsTraining(0, NULL));
    int create = (flags & INVOKE_FLAG_CREATE_GRAPH) != 0;
    if (nout > 0 && (flags & INVOKE_FLAG_COMPUTE_GRADIENT) && nvars > 0) {
        DeftNDArrayHandle res[MAX_IN];
        for (int i = 0; i < nvars; i++) res[i] = FUZZ_SENTINEL;
        int st = FUZZ_CALL(DeftAutogradComputeGradient(nout, out, NULL, nvars, vars, 1, create,
                                                       res));
        for (int i = 0; i < nvars; i++) {
            FUZZ_UNTOUCHED(st, res[i], FUZZ_SENTINEL);
            if (st == 0) {
                fuzz_read_back(res[i]);
                FUZZ_OK(DeftNDArrayFree(res[i]));
            }
        }
    } else if (nout > 0) {
        if (FUZZ_CALL(DeftAutogradBackward(nout, out, NULL, create, create)) == 0)
            for (int i = 0; i < nvars; i++) fuzz_read_back(grads[i]);
    }
    for (int i = 0; i < nout; i++) fuzz_read_back(out[i]);
    free_arrays(out, nout);
    free_arrays(grads, nvars);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader_t r = {data, size, 0};
    call_spec_t c;
    memset(&c, 0, sizeof c);
    const char *name = fuzz_op_name(&r, op_names, op_count);
    FUZZ_OK(DeftGetOperator(name, &c.op));
    uint8_t mode = fuzz_u8(&r), rep = fuzz_u8(&r);
    int reps = rep < 0xF0 ? 1 + rep % 3 : 250 + 2 * (rep - 0xF0);
    if (reps > max_chain) reps = max_chain;
    int nin = fuzz_u8(&r) % (MAX_IN + 1);
    int room = mode & INVOKE_FLAG_ONE_OUTPUT_SLOT ? 1 : MAX_OUT;

    int64_t live_arrays = 0, live_symbols = 0;
    FUZZ_OK(DeftGetLiveNDArrayCount(&live_arrays));
    FUZZ_OK(DeftGetLiveSymbolCount(&live_symbols));

    DeftNDArrayHandle in[MAX_IN] = {0};
    for (int i = 0; i < nin; i++) {
        int dtype = fuzz_dtypes[fuzz_u8(&r) % FUZZ_NUM_DTYPES];
        int64_t shape[10];
        int ndim = fuzz_shape(&r, shape);
        int fill = fuzz_u8(&r) % FUZZ_NUM_FILLS;
        in[i] = fuzz_array(shape, ndim, dtype, fill, &r); /* NULL: a bad handle to pass */
    }
    decode_params(&r, &c);
    if (verbose) {
        fprintf(stderr, "fuzz_invoke: %s, mode %d flags 0x%x, %d call(s), %d input(s):", name,
                mode & 3, mode & ~3, reps, nin);
        for (int i = 0; i < nin; i++) {
            int64_t shape[DEFT_MAX_NDIM];
            int ndim = 0, dtype = -1;
            const char *dname = "?";
            if (in[i] && DeftNDArrayGetShape(in[i], shape, DEFT_MAX_NDIM, &ndim) == 0 &&
                DeftNDArrayGetDType(in[i], &dtype) == 0)
                DeftDTypeGetName(dtype, &dname);
            fprintf(stderr, " %s(", in[i] ? dname : "NULL");
            for (int d = 0; in[i] && d < ndim; d++)
                fprintf(stderr, "%s%lld", d ? "," : "", (long long)shape[d]);
            fprintf(stderr, ")");
        }
        for (int i = 0; i < c.nparams; i++) fprintf(stderr, " %s='%s'", c.keys[i], c.vals[i]);
        fprintf(stderr, "\n");
    }

    switch (mode & 3) {
    case INVOKE_MODE_IMPERATIVE: run_imperative(&c, mode, reps, nin, in, room); break;
    case INVOKE_MODE_DEFERRED: run_deferred(&c, reps, nin, in, room); break;
    case INVOKE_MODE_AUTOGRAD: run_autograd(&c, mode, reps, nin, in, room, 0); break;
    default: run_autograd(&c, mode, reps, nin, in, room, 1); break;
    }
    for (int i = 0; i < nin; i++) fuzz_read_back(in[i] ? in[i] : NULL);
    free_arrays(in, nin);
    FUZZ_CALL(DeftWaitAll());

    int64_t arrays_after = 0, symbols_after = 0;
    FUZZ_OK(DeftGetLiveNDArrayCount(&arrays_after));
    FUZZ_OK(DeftGetLiveSymbolCount(&symbols_after));
    if (arrays_after != live_arrays || symbols_after != live_symbols)
        fuzz_fail("live handle counts did not come back", "DeftGetLiveNDArrayCount", 0);
    return 0;
}
