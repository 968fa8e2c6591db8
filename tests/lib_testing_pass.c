/* An extension library for the tests: passes that fail in the ways a pass can.
 * Built twice: as is, and with REFUSE defined (an initialization that refuses). */
#include <stdlib.h>
#include <string.h>

#include <deft/lib_api.h>

static int always_fail(const char *graph_json, int num_options, const char *const *keys,
                       const char *const *vals, char **out_json, char *error, size_t error_len,
                       void *user) {
    (void)graph_json, (void)num_options, (void)keys, (void)vals, (void)out_json, (void)user;
    strncpy(error, "this pass always fails", error_len - 1);
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

int deft_lib_initialize(int abi_version) {
#ifdef REFUSE
    (void)abi_version, (void)garbage;
    DeftLibRegisterPass("from_a_refusing_library", always_fail, NULL, NULL);
    return 1;
#else
    if (abi_version != DEFT_ABI_VERSION) return 1;
    return DeftLibRegisterPass("always_fail", always_fail, NULL, NULL) ||
           DeftLibRegisterPass("garbage", garbage, free, NULL);
#endif
}
