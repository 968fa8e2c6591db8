/*
 * Graph passes from extension libraries (capi/include/deft/lib_api.h):
 * loading a library, the registry of its passes, and running one on a
 * symbol through JSON.
 */
#ifndef DEFT_CORE_LIB_PASS_H
#define DEFT_CORE_LIB_PASS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/graph/symbol.h"

/* The same signature as the public DeftLibPassFn. */
typedef int (*deft_lib_pass_fn)(const char *graph_json, int num_options, const char *const *keys,
                                const char *const *vals, char **out_json, char *error,
                                size_t error_len, void *user);

typedef struct deft_lib_pass deft_lib_pass_t;

/* Load `path` and run its deft_lib_initialize(abi_version); a library loaded
 * before is a no-op. */
int deft_lib_load(const char *path, bool verbose, int abi_version);
/* Only while a library initializes, on the loading thread. */
int deft_lib_register_pass(const char *name, deft_lib_pass_fn fn, void (*free_json)(void *),
                           void *user);
/* NULL when no loaded library has registered `name`. */
const deft_lib_pass_t *deft_lib_pass_find(const char *name);
/* Run the pass on `in` (as JSON) and parse what it returns; `in` is never changed. */
int deft_lib_pass_run(const deft_lib_pass_t *pass, const deft_symbol_t *in, int num_options,
                      const char *const *keys, const char *const *vals, deft_symbol_t **out);
/* The registered names, valid until the next load. */
void deft_lib_pass_names(int *count, const char *const **names);

#endif
