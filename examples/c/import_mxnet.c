/*
 * Run a model exported by MXNet, through deft's C API alone: the graph
 * (PREFIX-symbol.json) and the parameters (PREFIX-0000.params, arrays named
 * "arg:NAME" and "aux:NAME") that MXNet's HybridBlock.export writes, an
 * input file of named arrays (mx.nd.save), inference by an executor, and
 * each output's top classes.
 *
 *   deft_import_mxnet PREFIX INPUTS.params [EXPECTED.params]
 *
 * With EXPECTED (the outputs as MXNet saved them), the outputs are compared
 * with it and a difference over 1e-5 (relative to the value, or absolute
 * below 1) is an error. Every error prints its cause and exits with status 1.
 *
 * For example, LeNet from the conformance corpus:
 *   deft_import_mxnet tests/mxnet/corpus/model_lenet \
 *       tests/mxnet/corpus/model_lenet-inputs.params tests/mxnet/corpus/model_lenet-outputs.params
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deft/c_api.h>

enum { MAX_OUTPUTS = 16, TOP = 5 };
#define TOLERANCE 1e-5

/* The arrays of one .params file. */
typedef struct array_file {
    const char *path;
    int count;
    DeftNDArrayHandle *arrays;
    const char **names; /* NULL: saved as a list, without names */
} array_file_t;

/* A failed deft call: what was being done, and deft's message (which names the file). */
static int deft_failed(const char *what) {
    fprintf(stderr, "error: %s: %s\n", what, DeftGetLastError());
    return 1;
}

static int load(const char *path, const char *what, array_file_t *file) {
    file->path = path;
    if (DeftNDArrayLoad(path, &file->count, &file->arrays, &file->names)) {
        fprintf(stderr, "error: cannot load %s: %s\n", what, DeftGetLastError());
        return 1;
    }
    return 0;
}

static void unload(array_file_t *file) {
    if (file->arrays) DeftNDArrayListFree(file->count, file->arrays, file->names);
}

/* The array named prefix + name, or NULL. */
static DeftNDArrayHandle find(const array_file_t *file, const char *prefix, const char *name) {
    size_t n = strlen(prefix);
    for (int i = 0; file->names && i < file->count; i++)
        if (strncmp(file->names[i], prefix, n) == 0 && strcmp(file->names[i] + n, name) == 0)
            return file->arrays[i];
    return NULL;
}

/*
 * The executor's inputs: the symbol's arguments in DeftSymbolListArguments()
 * order, each the parameter "arg:NAME" or else the input NAME (or the only
 * input of a file without names), then its auxiliary states, "aux:NAME".
 */
static int bind(DeftSymbolHandle sym, const array_file_t *params, const array_file_t *inputs,
                DeftNDArrayHandle **out, int *count) {
    int nargs, naux;
    const char *const *names;
    if (DeftSymbolListArguments(sym, &nargs, &names) ||
        DeftSymbolListAuxiliaryStates(sym, &naux, &names))
        return deft_failed("cannot list the graph's inputs");
    DeftNDArrayHandle *args = calloc((size_t)(nargs + naux + 1), sizeof *args);
    if (!args) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    for (int group = 0; group < 2; group++) {
        int n, first = group ? nargs : 0;
        if (group ? DeftSymbolListAuxiliaryStates(sym, &n, &names)
                  : DeftSymbolListArguments(sym, &n, &names)) {
            free(args);
            return deft_failed("cannot list the graph's inputs");
        }
        for (int a = 0; a < n; a++) {
            DeftNDArrayHandle arr = find(params, group ? "aux:" : "arg:", names[a]);
            if (!arr && !group)
                arr = inputs->names        ? find(inputs, "", names[a])
                      : inputs->count == 1 ? inputs->arrays[0]
                                           : NULL;
            if (!arr && group)
                fprintf(stderr, "error: the graph's auxiliary state '%s' is not in %s (aux:%s)\n",
                        names[a], params->path, names[a]);
            else if (!arr)
                fprintf(stderr, "error: the graph's argument '%s' is in neither %s nor %s\n",
                        names[a], params->path, inputs->path);
            if (!arr) {
                free(args);
                return 1;
            }
            args[first + a] = arr;
        }
    }
    *out = args;
    *count = nargs + naux;
    return 0;
}

/* An array's values as doubles (a new buffer), for float32 and float64 arrays. */
static double *values_of(DeftNDArrayHandle arr, int64_t *count) {
    int dtype;
    size_t nbytes;
    if (DeftNDArrayGetDType(arr, &dtype) || DeftNDArrayGetNBytes(arr, &nbytes) ||
        DeftNDArrayGetSize(arr, count)) {
        deft_failed("cannot read an array");
        return NULL;
    }
    if (dtype != DEFT_FLOAT32 && dtype != DEFT_FLOAT64) {
        const char *name = "unknown";
        DeftDTypeGetName(dtype, &name);
        fprintf(stderr, "error: an output of dtype %s, expected float32 or float64\n", name);
        return NULL;
    }
    void *raw = malloc(nbytes + 1);
    double *v = malloc(sizeof *v * (size_t)(*count + 1));
    if (!raw || !v) {
        fprintf(stderr, "error: out of memory\n");
    } else if (DeftNDArrayCopyToHost(arr, raw, nbytes)) {
        deft_failed("cannot read an output");
    } else {
        for (int64_t i = 0; i < *count; i++)
            v[i] = dtype == DEFT_FLOAT32 ? ((const float *)raw)[i] : ((const double *)raw)[i];
        free(raw);
        return v;
    }
    free(raw), free(v);
    return NULL;
}

/* Each row's (sample's) largest values: output shape (rows, classes...). */
static int print_top(const char *name, DeftNDArrayHandle arr) {
    int64_t shape[DEFT_MAX_NDIM], count;
    int ndim;
    if (DeftNDArrayGetShape(arr, shape, DEFT_MAX_NDIM, &ndim))
        return deft_failed("cannot read an output's shape");
    double *v = values_of(arr, &count);
    if (!v) return 1;
    int64_t rows = ndim > 1 ? shape[0] : 1, classes = rows ? count / rows : 0;
    printf("%s: shape (", name);
    for (int d = 0; d < ndim; d++) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
    printf(")\n");
    for (int64_t r = 0; r < rows; r++) {
        const double *row = v + r * classes;
        bool taken[64] = {false}; /* the top of the first 64 classes */
        int64_t n = classes < 64 ? classes : 64;
        printf("  sample %lld:", (long long)r);
        for (int t = 0; t < TOP && t < n; t++) {
            int64_t best = -1;
            for (int64_t c = 0; c < n; c++)
                if (!taken[c] && (best < 0 || row[c] > row[best])) best = c;
            taken[best] = true;
            printf("  class %lld (%.6g)", (long long)best, row[best]);
        }
        printf("\n");
    }
    free(v);
    return 0;
}

/* Output k against the expected file's array of the same name (or position). */
static int compare(const char *name, DeftNDArrayHandle got, const array_file_t *expected, int k) {
    DeftNDArrayHandle want = expected->names       ? find(expected, "", name)
                             : k < expected->count ? expected->arrays[k]
                                                   : NULL;
    if (!want) {
        fprintf(stderr, "error: %s has no array for output '%s'\n", expected->path, name);
        return 1;
    }
    int64_t n, want_n;
    double *a = values_of(got, &n), *b = a ? values_of(want, &want_n) : NULL;
    int status = !a || !b;
    if (!status && n != want_n) {
        fprintf(stderr, "error: output '%s' has %lld values, %s has %lld\n", name, (long long)n,
                expected->path, (long long)want_n);
        status = 1;
    }
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; !status && i < n; i++) {
        double diff = fabs(a[i] - b[i]) / fmax(1.0, fabs(b[i]));
        if (!(diff <= worst)) worst = diff, at = i; /* NaN counts as the worst */
    }
    if (!status && !(worst <= TOLERANCE)) {
        fprintf(stderr, "error: output '%s' differs from %s: element %lld is %.9g, expected %.9g\n",
                name, expected->path, (long long)at, a[at], b[at]);
        status = 1;
    } else if (!status) {
        printf("%s matches %s (largest difference %.3g)\n", name, expected->path, worst);
    }
    free(a), free(b);
    return status;
}

/* Run the graph on the bound inputs; print (and check) every output. */
static int infer(DeftSymbolHandle sym, int nin, DeftNDArrayHandle *in,
                 const array_file_t *expected) {
    DeftCachedOpHandle exec;
    DeftNDArrayHandle out[MAX_OUTPUTS] = {NULL};
    int nout = MAX_OUTPUTS, status = 0;
    if (DeftCachedOpCreate(sym, 0, &exec)) return deft_failed("cannot make an executor");
    if (DeftCachedOpInvoke(exec, nin, in, &nout, out)) {
        DeftCachedOpFree(exec);
        return deft_failed("cannot run the model");
    }
    int n;
    const char *const *names;
    if (DeftSymbolListOutputs(sym, &n, &names)) status = deft_failed("cannot list outputs");
    for (int k = 0; status == 0 && k < nout; k++) {
        status = print_top(names[k], out[k]);
        if (status == 0 && expected) status = compare(names[k], out[k], expected, k);
    }
    for (int k = 0; k < nout; k++) DeftNDArrayFree(out[k]);
    DeftCachedOpFree(exec);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s PREFIX INPUTS.params [EXPECTED.params]\n", argv[0]);
        return 2;
    }
    size_t room = strlen(argv[1]) + 16;
    char *symbol_path = malloc(room), *params_path = malloc(room);
    if (!symbol_path || !params_path) return 1;
    snprintf(symbol_path, room, "%s-symbol.json", argv[1]);
    snprintf(params_path, room, "%s-0000.params", argv[1]);

    DeftSymbolHandle sym = NULL;
    array_file_t params = {0}, inputs = {0}, expected = {0};
    DeftNDArrayHandle *args = NULL;
    int nargs = 0;
    int status = 0;
    if (DeftSymbolCreateFromFile(symbol_path, &sym)) status = deft_failed("cannot load the graph");
    if (status == 0) status = load(params_path, "the parameters", &params);
    if (status == 0) status = load(argv[2], "the inputs", &inputs);
    if (status == 0 && argc == 4) status = load(argv[3], "the expected outputs", &expected);
    if (status == 0) status = bind(sym, &params, &inputs, &args, &nargs);
    if (status == 0) status = infer(sym, nargs, args, argc == 4 ? &expected : NULL);

    free(args);
    unload(&params), unload(&inputs), unload(&expected);
    if (sym) DeftSymbolFree(sym);
    free(symbol_path), free(params_path);
    return status;
}
