/**
 * @file lib_api.h
 * @brief The C ABI of extension libraries: graph passes loaded at run time.
 *
 * An extension library is a shared object that links libdeft and exports
 * ::deft_lib_initialize. DeftLoadLib() opens it and calls that function with
 * the ABI version of the running libdeft; the library compares it with the
 * ::DEFT_ABI_VERSION it was compiled against, refuses a mismatch by
 * returning nonzero, and otherwise registers its passes with
 * DeftLibRegisterPass(), and its custom operators with DeftCustomOpRegister()
 * (deft/custom_op.h). A pass receives a graph as MXNet-layout symbol JSON
 * and options as strings, and returns a new graph as JSON; deft parses and
 * checks it, so a failing pass or a malformed result leaves the original
 * graph untouched. See examples/lib_pass/.
 */
#ifndef DEFT_LIB_API_H
#define DEFT_LIB_API_H

#include <stddef.h>

#include "deft/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief A graph pass.
 * @param graph_json the input graph (MXNet-layout symbol JSON).
 * @param num_options number of options.
 * @param keys option names, as the caller gave them.
 * @param vals option values.
 * @param[out] out_json receives the new graph's JSON, allocated by the
 *             library and released with the free function given at
 *             registration.
 * @param[out] error receives a message on failure (at most @p error_len bytes).
 * @param error_len room in @p error.
 * @param user the pointer given at registration.
 * @return 0 on success, nonzero on failure.
 */
typedef int (*DeftLibPassFn)(const char *graph_json, int num_options, const char *const *keys,
                             const char *const *vals, char **out_json, char *error,
                             size_t error_len, void *user);

/**
 * @brief What an extension library exports. Called once by DeftLoadLib().
 * @param abi_version ::DEFT_ABI_VERSION of the libdeft that loads it.
 * @return 0 to accept (after registering), nonzero to refuse (a version the
 *         library was not built for).
 */
int deft_lib_initialize(int abi_version);

/**
 * @brief Register a pass; callable only from ::deft_lib_initialize.
 * @param name the pass's name, unique among built-in and loaded passes.
 * @param fn the pass.
 * @param free_json releases what @p fn returns in out_json (free() when NULL).
 * @param user passed to @p fn.
 * @return 0 on success; -1 outside initialization, on a NULL argument, or on
 *         a name already taken.
 */
DEFT_API int DeftLibRegisterPass(const char *name, DeftLibPassFn fn, void (*free_json)(void *),
                                 void *user);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_LIB_API_H */
