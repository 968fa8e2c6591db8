#define _POSIX_C_SOURCE 200809L
/* Writes the fuzz targets' seed corpora and dictionaries:
 *
 *   <dir>/corpus/fuzz_symbol_json/op-<name>.json  one-node graph per operator
 *   <dir>/corpus/fuzz_invoke/op-<name>-<mode>     one call per operator and mode
 *   <dir>/corpus/fuzz_dlpack/...                  imports and strings
 *   <dir>/corpus/<target>/issue-...               inputs for the defects of issue 24
 *   <dir>/fuzz_symbol_json.dict                   JSON keys, operator and parameter names
 *
 * Each operator gets its default parameters, plus a value for the required
 * ones from the table below, and the first set of input shapes (from
 * `candidates`) its call accepts. Run through tests/fuzz/gen_seeds.sh, which
 * builds this program and passes tests/fuzz as <dir>. */
#include <errno.h>
#include <sys/stat.h>

#include "fuzz_arrays.h"
#include "invoke_format.h"

typedef struct required {
    const char *op, *key, *value;
} required_t;

/* Values for required parameters where the generic ones (by type) do not do. */
static const required_t required[] = {
    {"Cast", "dtype", "float64"},
    {"cast", "dtype", "float64"},
    {"FullyConnected", "num_hidden", "4"},
    {"Reshape", "shape", "(3,2)"},
    {"broadcast_to", "shape", "(2,3)"},
    {"_CachedOp", "subgraph", "sg0"},
    {"_arange", "start", "0"},
    {"_arange", "stop", "5"},
    {"_full", "value", "2"},
    {"_fused_elemwise", "program", "elemwise_add i0 i1;relu t0"},
    {"_copy_to_device", "device", "cpu(0)"},
    {"clip", "a_min", "-1"},
    {"clip", "a_max", "1"},
    {"split", "num_outputs", "3"},
    {"one_hot", "depth", "3"},
    {"expand_dims", "axis", "0"},
    {"slice", "begin", "(0,)"},
    {"slice", "end", "(1,)"},
    {"_backward_slice", "begin", "(0,)"},
    {"_backward_slice", "end", "(1,)"},
    {"_slice_assign", "begin", "(0,)"},
    {"_slice_assign", "end", "(1,)"},
    {"slice_axis", "axis", "0"},
    {"slice_axis", "begin", "0"},
    {"slice_axis", "end", "1"},
    {"_backward_slice_axis", "axis", "0"},
    {"_backward_slice_axis", "begin", "0"},
    {"_backward_slice_axis", "end", "1"},
};

/* Input shapes to try, in order; the last shape repeats for further inputs. */
typedef struct shapes {
    int n;
    int ndim[3];
    int64_t dims[3][3];
} shapes_t;

static const shapes_t candidates[] = {
    {1, {2}, {{2, 3}}},
    {3, {2, 2, 2}, {{2, 3}, {3, 2}, {2, 2}}},
    {3, {2, 2, 2}, {{2, 2}, {2, 3}, {3, 2}}},
    {3, {2, 1, 1}, {{2, 3}, {4}, {4}}},
    {3, {2, 2, 1}, {{2, 3}, {4, 3}, {4}}},
    {2, {2, 1}, {{2, 3}, {2}}},
    {3, {2, 1, 2}, {{2, 3}, {2}, {2, 3}}},
    {3, {0, 2, 1}, {{0}, {2, 3}, {2}}},
    {2, {2, 2}, {{1, 3}, {2, 3}}},
    {2, {2, 2}, {{2, 3}, {1, 3}}},
    {2, {0, 2}, {{0}, {2, 3}}},
    {2, {3, 3}, {{2, 2, 3}, {2, 3, 2}}},
    {3, {3, 3, 3}, {{2, 2, 2}, {2, 2, 3}, {2, 3, 2}}},
    {1, {1}, {{3}}},
    {1, {0}, {{0}}},
};
#define NUM_CANDIDATES ((int)(sizeof candidates / sizeof candidates[0]))

static const char *out_dir;

static void write_file(const char *sub, const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", out_dir, sub);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gen_seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Parameters of a seed call: the required ones, each with a value. */
typedef struct params {
    int n;
    const char *keys[8], *vals[8];
    int index[8]; /* the parameter's position in the operator's list */
} params_t;

static void required_params(DeftOpHandle op, const char *name, params_t *p) {
    int np = 0;
    FUZZ_OK(DeftOpGetNumParams(op, &np));
    p->n = 0;
    for (int i = 0; i < np && p->n < 8; i++) {
        const char *key, *type, *def, *doc;
        FUZZ_OK(DeftOpGetParam(op, i, &key, &type, &def, &doc));
        if (def) continue;
        const char *value = NULL;
        for (size_t j = 0; j < sizeof required / sizeof required[0]; j++)
            if (!strcmp(required[j].op, name) && !strcmp(required[j].key, key))
                value = required[j].value;
        if (!value) {
            int nw = 0;
            const char *const *words = NULL;
            FUZZ_OK(DeftOpGetParamChoices(op, i, &nw, &words));
            value = nw > 0                             ? words[0]
                  : !strncmp(type, "tuple", 5)         ? "(2,3)"
                  : !strncmp(type, "float", 5)         ? "0.5"
                  : !strncmp(type, "dtype", 5)         ? "float32"
                  : !strncmp(type, "device", 6)        ? "cpu(0)"
                  : !strncmp(type, "boolean", 7)       ? "true"
                                                       : "1";
        }
        p->keys[p->n] = key, p->vals[p->n] = value, p->index[p->n++] = i;
    }
}

static int input_count(DeftOpHandle op) {
    int mn, mx, nn;
    const char *const *names;
    FUZZ_OK(DeftOpGetInputs(op, &mn, &mx, &nn, &names));
    int n = nn > mn ? nn : mn;
    if (mx > nn && n < 2) n = 2; /* any number: two */
    return n > mx ? mx : n;
}

static const int64_t *cand_dims(const shapes_t *c, int i, int *ndim) {
    int k = i < c->n ? i : c->n - 1;
    *ndim = c->ndim[k];
    return c->dims[k];
}

/* Contents of the seeds' inputs: small integers, else zeros (valid labels and indices). */
static int seed_fill = FUZZ_FILL_SMALL_INTS;

/* The first candidate whose imperative call succeeds (setting seed_fill), or -1. */
static int find_shapes(DeftOpHandle op, int nin, const params_t *p) {
    for (int k = 0; k < 2 * NUM_CANDIDATES; k++) {
        int c = k % NUM_CANDIDATES;
        seed_fill = k < NUM_CANDIDATES ? FUZZ_FILL_SMALL_INTS : FUZZ_FILL_ZEROS;
        DeftNDArrayHandle in[8] = {0};
        fuzz_reader_t none = {NULL, 0, 0};
        for (int i = 0; i < nin; i++) {
            int ndim;
            const int64_t *dims = cand_dims(&candidates[c], i, &ndim);
            in[i] = fuzz_array(dims, ndim, DEFT_FLOAT32, seed_fill, &none);
        }
        DeftNDArrayHandle out[64] = {0};
        int nout = 64;
        int st = DeftImperativeInvoke(op, nin, in, &nout, out, p->n, p->keys, p->vals);
        if (st == 0)
            for (int i = 0; i < nout; i++)
                if (DeftNDArrayWaitToRead(out[i]) != 0) st = -1;
        for (int i = 0; i < (st == 0 ? nout : 0); i++) DeftNDArrayFree(out[i]);
        for (int i = 0; i < nin; i++) DeftNDArrayFree(in[i]);
        DeftWaitAll();
        if (st == 0) return c;
    }
    return -1;
}

/* ---- fuzz_invoke seeds ---- */

typedef struct bytes {
    uint8_t b[4096];
    size_t n;
} bytes_t;

static void put(bytes_t *o, int v) {
    if (o->n < sizeof o->b) o->b[o->n++] = (uint8_t)v;
}

static void put_string(bytes_t *o, const char *s) {
    size_t n = strlen(s);
    put(o, (int)n);
    for (size_t i = 0; i < n; i++) put(o, s[i]);
}

/* The operator by name (fuzz_invoke's byte 0x80 + length, then the name). */
static void put_op(bytes_t *o, const char *name) {
    size_t n = strlen(name);
    put(o, 0x80 + (int)n);
    for (size_t i = 0; i < n; i++) put(o, name[i]);
}

static int dtype_index(int dtype) {
    for (int i = 0; i < FUZZ_NUM_DTYPES; i++)
        if (fuzz_dtypes[i] == dtype) return i;
    return 0;
}

/* An input: dtype, shape (dimensions under 6 encode as themselves), fill. */
static void put_input(bytes_t *o, int dtype, int ndim, const int64_t *dims, int fill) {
    put(o, dtype_index(dtype));
    put(o, ndim);
    for (int i = 0; i < ndim; i++) put(o, dims[i] < 6 ? (int)dims[i] : dims[i] < 50 ? 200 + (int)dims[i] : 250);
    put(o, fill);
}

/* A parameter given by name (the operator's own, or a fuzzed string) and value. */
static void put_param(bytes_t *o, DeftOpHandle op, const char *key, const char *value) {
    int np = 0, index = -1;
    FUZZ_OK(DeftOpGetNumParams(op, &np));
    for (int i = 0; i < np; i++) {
        const char *k, *t, *d, *doc;
        FUZZ_OK(DeftOpGetParam(op, i, &k, &t, &d, &doc));
        if (!strcmp(k, key)) index = i;
    }
    if (index >= 0) {
        put(o, index);
    } else {
        put(o, INVOKE_KEY_STRING);
        put_string(o, key);
    }
    put(o, INVOKE_VALUE_STRING);
    put_string(o, value);
}

static void write_invoke(const char *name, const bytes_t *o) {
    write_file("corpus/fuzz_invoke", name, o->b, o->n);
}

static void invoke_seed(const char *op_name, DeftOpHandle op, int mode, int nin, int cand,
                        const params_t *p) {
    bytes_t o = {.n = 0};
    put_op(&o, op_name);
    put(&o, mode);
    put(&o, 0);
    put(&o, nin);
    for (int i = 0; i < nin; i++) {
        int ndim;
        const int64_t *dims = cand_dims(&candidates[cand < 0 ? 0 : cand], i, &ndim);
        put_input(&o, DEFT_FLOAT32, ndim, dims, seed_fill);
    }
    put(&o, p->n);
    for (int i = 0; i < p->n; i++) put_param(&o, op, p->keys[i], p->vals[i]);
    static const char *const mode_names[] = {"imperative", "deferred", "autograd", "both"};
    char file[256];
    snprintf(file, sizeof file, "op-%s-%s", op_name, mode_names[mode & 3]);
    write_invoke(file, &o);
}

/* ---- fuzz_symbol_json seeds ---- */

static void json_seed(const char *op_name, DeftOpHandle op, int nin, int cand, const params_t *p) {
    DeftSymbolHandle atom = NULL, vars[8] = {0};
    FUZZ_OK(DeftSymbolCreateAtomic(op, p->n, p->keys, p->vals, &atom));
    for (int i = 0; i < nin; i++) {
        char var_name[32], shape[64] = "(";
        snprintf(var_name, sizeof var_name, "x%d", i);
        FUZZ_OK(DeftSymbolCreateVariable(var_name, &vars[i]));
        int ndim;
        const int64_t *dims = cand_dims(&candidates[cand < 0 ? 0 : cand], i, &ndim);
        for (int d = 0; d < ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                     d ? "," : "", (long long)dims[d]);
        strcat(shape, ndim == 1 ? ",)" : ")");
        FUZZ_OK(DeftSymbolSetAttr(vars[i], "__shape__", shape));
    }
    const char *json;
    if (DeftSymbolCompose(atom, "node", nin, NULL, vars) != 0 ||
        DeftSymbolSaveToJSON(atom, &json) != 0) {
        fprintf(stderr, "gen_seeds: no graph for '%s': %s\n", op_name, DeftGetLastError());
        for (int i = 0; i < nin; i++) DeftSymbolFree(vars[i]);
        DeftSymbolFree(atom);
        return;
    }
    char file[256];
    snprintf(file, sizeof file, "op-%s.json", op_name);
    write_file("corpus/fuzz_symbol_json", file, json, strlen(json));
    for (int i = 0; i < nin; i++) DeftSymbolFree(vars[i]);
    DeftSymbolFree(atom);
}

/* ---- regression inputs for issue 24's defects ---- */

static void issue_seeds(void) {
    DeftOpHandle op;
    bytes_t o;
    int64_t scalar[1] = {0}, d23[2] = {2, 3}, d03[2] = {0, 3}, d20[2] = {2, 0}, d0[1] = {0},
            d2[1] = {2};

    /* deferred byte-size overflow: broadcast_to a float64 scalar to 2^61 + 1 elements */
    FUZZ_OK(DeftGetOperator("broadcast_to", &op));
    o.n = 0;
    put_op(&o, "broadcast_to"), put(&o, INVOKE_MODE_DEFERRED), put(&o, 0), put(&o, 1);
    put_input(&o, DEFT_FLOAT64, 0, scalar, FUZZ_FILL_ONES);
    put(&o, 1), put_param(&o, op, "shape", "(2305843009213693953,)");
    write_invoke("issue-deferred-broadcast_to-size-overflow", &o);
    o.b[1 + strlen("broadcast_to")] = INVOKE_MODE_IMPERATIVE;
    write_invoke("issue-imperative-broadcast_to-size-overflow", &o);

    /* backward through more than 256 recorded calls: 260 chained relu */
    FUZZ_OK(DeftGetOperator("relu", &op));
    o.n = 0;
    put_op(&o, "relu"), put(&o, INVOKE_MODE_AUTOGRAD), put(&o, 0xF5), put(&o, 1);
    put_input(&o, DEFT_FLOAT32, 2, d23, FUZZ_FILL_SMALL_INTS);
    put(&o, 0);
    write_invoke("issue-autograd-260-chained-relu", &o);
    o.b[1 + strlen("relu")] = INVOKE_MODE_DEFERRED_AUTOGRAD;
    write_invoke("issue-deferred-autograd-260-chained-relu", &o);
    o.b[1 + strlen("relu")] = INVOKE_MODE_DEFERRED;
    write_invoke("issue-deferred-260-chained-relu", &o);

    /* zero-size arrays through concat, split, take and the reductions */
    FUZZ_OK(DeftGetOperator("Concat", &op));
    o.n = 0;
    put_op(&o, "Concat"), put(&o, INVOKE_MODE_AUTOGRAD), put(&o, 0), put(&o, 2);
    put_input(&o, DEFT_FLOAT32, 2, d03, FUZZ_FILL_ONES);
    put_input(&o, DEFT_FLOAT32, 2, d03, FUZZ_FILL_ONES);
    put(&o, 1), put_param(&o, op, "dim", "0");
    write_invoke("issue-zero-size-concat", &o);

    FUZZ_OK(DeftGetOperator("split", &op));
    o.n = 0;
    put_op(&o, "split"), put(&o, INVOKE_MODE_AUTOGRAD), put(&o, 0), put(&o, 1);
    put_input(&o, DEFT_FLOAT32, 2, d20, FUZZ_FILL_ONES);
    put(&o, 2), put_param(&o, op, "num_outputs", "2"), put_param(&o, op, "axis", "0");
    write_invoke("issue-zero-size-split", &o);

    FUZZ_OK(DeftGetOperator("take", &op));
    o.n = 0;
    put_op(&o, "take"), put(&o, INVOKE_MODE_AUTOGRAD), put(&o, 0), put(&o, 2);
    put_input(&o, DEFT_FLOAT32, 2, d23, FUZZ_FILL_ONES);
    put_input(&o, DEFT_FLOAT32, 1, d0, FUZZ_FILL_ONES);
    put(&o, 0);
    write_invoke("issue-zero-size-take-indices", &o);
    o.n = 0;
    put_op(&o, "take"), put(&o, INVOKE_MODE_AUTOGRAD), put(&o, 0), put(&o, 2);
    put_input(&o, DEFT_FLOAT32, 2, d03, FUZZ_FILL_ONES);
    put_input(&o, DEFT_FLOAT32, 1, d2, FUZZ_FILL_ONES);
    put(&o, 1), put_param(&o, op, "mode", "wrap");
    write_invoke("issue-zero-size-take-from-empty", &o);

    static const char *const reductions[] = {"sum", "mean", "max", "min", "prod", "norm",
                                             "argmax", "argmin", "softmax", "log_softmax"};
    static const char *const axes[] = {"0", "1", NULL};
    for (int i = 0; i < 10; i++)
        for (int a = 0; a < 3; a++) {
            FUZZ_OK(DeftGetOperator(reductions[i], &op));
            o.n = 0;
            put_op(&o, reductions[i]), put(&o, INVOKE_MODE_AUTOGRAD), put(&o, 0), put(&o, 1);
            put_input(&o, DEFT_FLOAT32, 2, d03, FUZZ_FILL_ONES);
            put(&o, axes[a] ? 1 : 0);
            if (axes[a]) put_param(&o, op, "axis", axes[a]);
            char file[128];
            snprintf(file, sizeof file, "issue-zero-size-%s-axis-%s", reductions[i],
                     axes[a] ? axes[a] : "none");
            write_invoke(file, &o);
        }

    /* _CachedOp naming a subgraph that is not registered */
    FUZZ_OK(DeftGetOperator("_CachedOp", &op));
    o.n = 0;
    put_op(&o, "_CachedOp"), put(&o, INVOKE_MODE_DEFERRED), put(&o, 0), put(&o, 1);
    put_input(&o, DEFT_FLOAT32, 2, d23, FUZZ_FILL_ONES);
    put(&o, 1), put_param(&o, op, "subgraph", "sg0");
    write_invoke("issue-cachedop-unregistered-subgraph", &o);

    /* DLPack: overflowing shapes, misaligned byte_offset, bad ndim/dtypes.
     * Layout (fuzz_dlpack.c): 0, ndim byte, dims, strides mode, code, bits,
     * lanes, offset, device, device id. */
    static const struct {
        const char *name;
        uint8_t b[20];
        size_t n;
    } dl[] = {
        {"issue-dlpack-shape-overflow-int64max-by-4", {0, 3, 240, 4, 0, 2, 2, 0, 0, 0, 1}, 11},
        {"issue-dlpack-shape-overflow-2pow62-by-4", {0, 3, 241, 4, 0, 2, 2, 0, 0, 0, 1}, 11},
        {"issue-dlpack-shape-overflow-bytes", {0, 2, 242, 0, 2, 3, 0, 0, 0, 1}, 10},
        {"issue-dlpack-negative-dim", {0, 3, 243, 2, 0, 2, 2, 0, 0, 0, 1}, 11},
        {"issue-dlpack-misaligned-offset-float32", {0, 2, 4, 0, 2, 2, 0, 3, 0, 1}, 10},
        {"issue-dlpack-misaligned-offset-float64", {0, 2, 4, 0, 2, 3, 0, 6, 0, 1}, 10},
        {"issue-dlpack-offset-past-address-space", {0, 2, 4, 0, 2, 2, 0, 10, 0, 1}, 10},
        {"issue-dlpack-ndim-9", {0, 10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2, 2, 0, 0, 0, 1}, 18},
        {"issue-dlpack-ndim-negative", {0, 0xF0, 0xFE, 0, 2, 2, 0, 0, 0, 1}, 10},
        {"issue-dlpack-lanes-2", {0, 2, 4, 0, 2, 2, 3, 0, 0, 1}, 10},
        {"issue-dlpack-bits-1", {0, 2, 4, 0, 1, 4, 0, 0, 0, 1}, 10},
        {"issue-dlpack-strided", {0, 3, 2, 3, 2, 2, 2, 0, 0, 0, 1, 2, 1}, 13},
        {"issue-dlpack-size1-dim-any-stride", {0, 3, 1, 3, 3, 2, 2, 0, 0, 0, 1, 240}, 12},
        {"issue-dlpack-zero-size", {0, 3, 0, 3, 0, 2, 2, 0, 0, 0, 1}, 11},
        {"issue-dlpack-gpu-device", {0, 2, 4, 0, 2, 2, 0, 0, 3, 1}, 10},
    };
    for (size_t i = 0; i < sizeof dl / sizeof dl[0]; i++)
        write_file("corpus/fuzz_dlpack", dl[i].name, dl[i].b, dl[i].n);
}

static void dlpack_string_seeds(void) {
    static const uint8_t profiler[] = {1, 3, 0, 29, 5, 29, 6, 30, 1, 1};
    write_file("corpus/fuzz_dlpack", "profiler-all-aggregate", profiler, sizeof profiler);
    static const uint8_t dtype[] = {2, 0xC0, 7, 'f', 'l', 'o', 'a', 't', '3', '2', 3};
    write_file("corpus/fuzz_dlpack", "dtype-float32", dtype, sizeof dtype);
    static const uint8_t sym[] = {3, 0xC0, 4, 'r', 'e', 'l', 'u', 0xC0, 1, 'x', 2, 0, 42, 3,
                                  30, 0, 0, 0, 0, 0};
    write_file("corpus/fuzz_dlpack", "symbol-attrs", sym, sizeof sym);
    static const uint8_t import[] = {0, 3, 2, 3, 0, 2, 2, 0, 0, 0, 1};
    write_file("corpus/fuzz_dlpack", "import-float32-2x3", import, sizeof import);
}

static void dictionary(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz_symbol_json.dict", out_dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gen_seeds: cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "# Made by gen_seeds.c: JSON keys, operator and parameter names.\n");
    static const char *const keys[] = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs",
                                       "attr", "op", "name", "inputs", "null", "mxnet_version",
                                       "__shape__", "__dtype__", "__device__", "ctx_group",
                                       "__storage_offset__", "int", "[0, 0, 0]", "{}", "[]"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) fprintf(f, "\"%s\"\n", keys[i]);
    int count;
    const char *const *names;
    FUZZ_OK(DeftListOperators(&count, &names));
    for (int i = 0; i < count; i++) {
        fprintf(f, "\"\\\"%s\\\"\"\n", names[i]);
        DeftOpHandle op;
        FUZZ_OK(DeftGetOperator(names[i], &op));
        int np = 0;
        FUZZ_OK(DeftOpGetNumParams(op, &np));
        for (int j = 0; j < np; j++) {
            const char *k, *t, *d, *doc;
            FUZZ_OK(DeftOpGetParam(op, j, &k, &t, &d, &doc));
            fprintf(f, "\"\\\"%s\\\"\"\n", k);
        }
    }
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <tests/fuzz directory>\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    fuzz_set_environment();
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus", out_dir);
    mkdir(path, 0755);
    int count;
    const char *const *names;
    FUZZ_OK(DeftListOperators(&count, &names));
    int missing = 0;
    for (int i = 0; i < count; i++) {
        DeftOpHandle op;
        FUZZ_OK(DeftGetOperator(names[i], &op));
        params_t p;
        required_params(op, names[i], &p);
        int nin = input_count(op);
        int cand = find_shapes(op, nin, &p);
        if (cand < 0) {
            seed_fill = FUZZ_FILL_SMALL_INTS;
            fprintf(stderr, "gen_seeds: no input shapes found for '%s' (%s)\n", names[i],
                    DeftGetLastError());
            missing++;
        }
        invoke_seed(names[i], op, INVOKE_MODE_IMPERATIVE | INVOKE_FLAG_GIVEN_OUTPUTS, nin, cand, &p);
        invoke_seed(names[i], op, INVOKE_MODE_DEFERRED, nin, cand, &p);
        invoke_seed(names[i], op, INVOKE_MODE_AUTOGRAD, nin, cand, &p);
        json_seed(names[i], op, nin, cand, &p);
    }
    issue_seeds();
    dlpack_string_seeds();
    dictionary();
    printf("gen_seeds: %d operators, %d without accepted shapes\n", count, missing);
    return 0;
}
