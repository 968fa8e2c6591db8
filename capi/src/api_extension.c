/* Extension libraries: loading them, registering their passes, running a pass. */
#include "capi/src/api.h"
#include "core/graph/lib_pass.h"
#include "core/graph/pass.h"
#include "deft/lib_api.h"

int DeftLibRegisterPass(const char *name, DeftLibPassFn fn, void (*free_json)(void *), void *user) {
    API_BEGIN();
    return deft_lib_register_pass(name, fn, free_json, user);
}

int DeftLoadLib(const char *path, int verbose) {
    API_BEGIN();
    if (!path) return deft_error(DEFT_ERR_VALUE, "path is NULL, expected a shared library's path");
    return deft_lib_load(path, verbose != 0, DEFT_ABI_VERSION);
}

int DeftLibListPasses(int *out_count, const char *const **out_names) {
    API_BEGIN();
    if (api_check_out(out_count, "out_count") || api_check_out(out_names, "out_names")) return -1;
    deft_lib_pass_names(out_count, out_names);
    return 0;
}

int DeftSymbolOptimizeFor(DeftSymbolHandle sym, const char *pass, int num_options,
                          const char *const *keys, const char *const *vals, DeftSymbolHandle *out) {
    API_BEGIN();
    deft_symbol_t *in;
    if (api_symbol_get(sym, "sym", &in) || deft_symbol_check_composed(in, "sym") ||
        api_check_out(out, "out"))
        return -1;
    if (!pass) return deft_error(DEFT_ERR_VALUE, "pass is NULL, expected a pass name");
    if (num_options < 0 || (num_options > 0 && (!keys || !vals)))
        return deft_error(DEFT_ERR_VALUE, "num_options is %d with keys %p and vals %p", num_options,
                          (const void *)keys, (const void *)vals);
    deft_symbol_t *result;
    const deft_lib_pass_t *loaded = deft_lib_pass_find(pass);
    if (loaded) {
        if (deft_lib_pass_run(loaded, in, num_options, keys, vals, &result)) return -1;
    } else {
        if (deft_pass_find(pass) && num_options > 0)
            return deft_error(DEFT_ERR_VALUE, "the built-in pass '%s' takes no options", pass);
        if (deft_passes_apply(in, pass, &result)) return -1;
    }
    return api_symbol_wrap(result, out);
}
