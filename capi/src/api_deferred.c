/* Deferred compute: the mode, recording, triggering, export and binding. */
#include <stdio.h>
#include <stdlib.h>

#include "capi/src/api.h"
#include "core/graph/symbol.h"
#include "core/imperative/deferred.h"

int DeftSetIsDeferredCompute(int on, int *prev) {
    API_BEGIN();
    return api_set_mode(deft_deferred_set, on, prev);
}

int DeftIsDeferredCompute(int *out) {
    API_BEGIN();
    return api_get_mode(deft_deferred_enabled(), out);
}

int DeftImperativeDeferredInvoke(DeftOpHandle op, int num_inputs, const DeftNDArrayHandle *inputs,
                                 int *num_outputs, DeftNDArrayHandle *outputs, int num_params,
                                 const char *const *keys, const char *const *vals) {
    API_BEGIN();
    bool was;
    deft_deferred_set(true, &was);
    int status = api_invoke(op, num_inputs, inputs, num_outputs, outputs, num_params, keys, vals);
    deft_deferred_set(was, NULL);
    return status;
}

int DeftNDArrayGetIsDeferredCompute(const DeftNDArrayHandle *handles, int n, int *status) {
    API_BEGIN();
    deft_ndarray_t **arrays = NULL;
    int failed =
        api_check_out(status, "status") || api_ndarray_list(handles, n, "handles", false, &arrays);
    for (int i = 0; !failed && i < n; i++) status[i] = deft_ndarray_is_lazy(arrays[i]);
    free(arrays);
    return failed ? -1 : 0;
}

int DeftNDArrayTriggerDeferredCompute(const DeftNDArrayHandle *handles, int n) {
    API_BEGIN();
    return api_with_arrays(handles, n, "handles", deft_deferred_compute);
}

int DeftNDArrayGetDeferredComputeSymbol(const DeftNDArrayHandle *inputs,
                                        const DeftNDArrayHandle *outputs,
                                        const char *const *input_names,
                                        const char *const *output_names, int num_inputs,
                                        int num_outputs, DeftSymbolHandle *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    if (num_outputs < 1)
        return deft_error(DEFT_ERR_VALUE, "num_outputs is %d, expected at least 1", num_outputs);
    deft_ndarray_t **in = NULL, **outs = NULL;
    deft_symbol_t *sym = NULL;
    int status =
        api_ndarray_list(inputs, num_inputs, "inputs", false, &in) ||
        api_ndarray_list(outputs, num_outputs, "outputs", false, &outs) ||
        deft_deferred_export(num_inputs, in, input_names, num_outputs, outs, output_names, &sym);
    free(in), free(outs);
    return status ? -1 : api_symbol_wrap(sym, out);
}

int DeftNDArraySetDeferredComputeVariable(const DeftNDArrayHandle *arrays,
                                          const DeftSymbolHandle *variables, int n) {
    API_BEGIN();
    deft_ndarray_t **arrs = NULL;
    if (n < 0 || (n > 0 && !variables))
        return deft_error(DEFT_ERR_VALUE,
                          "variables is %p with count %d, expected a count >= 0 and that many "
                          "variable symbols",
                          (const void *)variables, n);
    const char **names = malloc(((size_t)n + 1) * sizeof *names);
    int status = names ? 0 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate names");
    if (status == 0) status = api_ndarray_list(arrays, n, "arrays", false, &arrs);
    for (int i = 0; status == 0 && i < n; i++) {
        deft_symbol_t *sym;
        char what[32];
        snprintf(what, sizeof what, "variables[%d]", i);
        if ((status = api_symbol_get(variables[i], what, &sym)) != 0) break;
        if (sym->num_outputs != 1 || !sym->outputs[0].node || sym->outputs[0].node->op ||
            !sym->outputs[0].node->name)
            status = deft_error(DEFT_ERR_VALUE, "%s is not a variable symbol", what);
        else
            names[i] = sym->outputs[0].node->name;
    }
    if (status == 0) status = deft_deferred_bind(n, arrs, names);
    free(names), free(arrs);
    return status;
}

int DeftNDArrayClearDeferredCompute(const DeftNDArrayHandle *arrays, int n) {
    API_BEGIN();
    return api_with_arrays(arrays, n, "arrays", deft_deferred_clear);
}
