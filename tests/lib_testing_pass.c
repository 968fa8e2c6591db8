/* An extension library for the tests: passes that fail in the ways a pass can.
 * Built twice: as is, and with REFUSE defined (an initialization that refuses). */
#include <stdlib.h>
#include <string.h>

#include <deft/c_api.h>
#include <deft/lib_api.h>

static int always_fail(const char *graph_json, int num_options, const char *const *keys,
                       const char *const *vals, char **out_json, char *error, size_t error_len,
                       void *user) {
    (void)graph_json, (void)num_options, (void)keys, (void)vals, (void)out_json, (void)user;
    strncpy(error, "this pass always fails", error_len - 1);
    return 1;
}

/* Fills every byte of the error buffer, leaving no room for a terminating NUL. */
static int fill_error(const char *graph_json, int num_options, const char *const *keys,
                      const char *const *vals, char **out_json, char *error, size_t error_len,
                      void *user) {
    (void)graph_json, (void)num_options, (void)keys, (void)vals, (void)out_json, (void)user;
    memset(error, 'x', error_len);
    return 1;
}

static int garbage(const char *graph_json, int num_options, const char *const *keys,
                   const char *const *vals, char **out_json, char *error, size_t error_len,
                   void *user) {
    (void)graph_json, (void)num_options, (void)keys, (void)vals, (void)error, (void)error_len;
    (void)user;
    *out_json = malloc(16);
    if (!*out_json) return 1;
    strcpy(*out_json, "{\"nodes\": 3");
    return 0;
}

/* A custom operator from a library: y = 2 x, through an operator deft has. */
static int same_shape(void *user, int nin, const int *in_ndims, const int64_t *in_shapes,
                      const int *in_dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype) {
    (void)user, (void)nin;
    *out_ndim = in_ndims[0];
    memcpy(out_shape, in_shapes, (size_t)in_ndims[0] * sizeof *out_shape);
    *out_dtype = in_dtypes[0];
    return 0;
}

static int double_it(void *user, int nin, const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                     int is_train) {
    (void)user, (void)nin, (void)is_train;
    DeftOpHandle mul;
    const char *key = "scalar", *val = "2";
    DeftNDArrayHandle outs[1] = {out};
    int nout = 1;
    return DeftGetOperator("_mul_scalar", &mul) ||
           DeftImperativeInvoke(mul, 1, in, &nout, outs, 1, &key, &val);
}

int deft_lib_initialize(int abi_version) {
#ifdef REFUSE
    (void)abi_version, (void)garbage, (void)fill_error, (void)double_it, (void)same_shape;
    DeftLibRegisterPass("from_a_refusing_library", always_fail, NULL, NULL);
    return 1;
#else
    if (abi_version != DEFT_ABI_VERSION) return 1;
    DeftCustomOpCallbacks doubling = {1, same_shape, double_it, NULL, NULL, NULL};
    return DeftLibRegisterPass("always_fail", always_fail, NULL, NULL) ||
           DeftLibRegisterPass("garbage", garbage, free, NULL) ||
           DeftLibRegisterPass("fill_error", fill_error, NULL, NULL) ||
           DeftCustomOpRegister("lib_double", &doubling);
#endif
}
