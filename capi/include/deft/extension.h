/**
 * @file extension.h
 * @brief Loading extension libraries (see lib_api.h for writing one) and
 *        running their graph passes.
 */
#ifndef DEFT_EXTENSION_H
#define DEFT_EXTENSION_H

#include "deft/symbol.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Load an extension library and run its initialization.
 *
 * Loading a library already loaded does nothing. Libraries stay loaded until
 * the process exits: graphs and passes may still refer to them.
 * @param path the shared object's path.
 * @param verbose 1 to print what the library registered (passes and
 *        operators) on standard output.
 * @return 0 on success; -1 if the file cannot be opened, does not export
 *         ::deft_lib_initialize, refuses this ABI version, or fails to register
 *         (nothing it registered is kept then).
 */
DEFT_API int DeftLoadLib(const char *path, int verbose);

/**
 * @brief Names of the passes loaded libraries registered.
 * @param[out] out_count receives the number.
 * @param[out] out_names receives the names (owned by the library, valid until
 *             the next DeftLoadLib()).
 * @return 0 on success; -1 on NULL arguments.
 */
DEFT_API int DeftLibListPasses(int *out_count, const char *const **out_names);

/**
 * @brief Rewrite a graph with a pass, built in (DeftSymbolApplyPasses()'s
 *        names) or loaded (DeftLoadLib()), with options.
 *
 * A loaded pass gets the graph as JSON and returns JSON, which is parsed as
 * DeftSymbolCreateFromJSON() would; any failure leaves @p sym untouched.
 * @param sym the graph.
 * @param pass the pass's name.
 * @param num_options number of options (built-in passes take none).
 * @param keys option names.
 * @param vals option values.
 * @param[out] out receives a new symbol handle, owned by the caller.
 * @return 0 on success; -1 on a bad handle, an unknown pass, options given to
 *         a built-in pass, a failing pass (its message is included), or a
 *         returned graph that does not parse.
 */
DEFT_API int DeftSymbolOptimizeFor(DeftSymbolHandle sym, const char *pass, int num_options,
                                   const char *const *keys, const char *const *vals,
                                   DeftSymbolHandle *out);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_EXTENSION_H */
