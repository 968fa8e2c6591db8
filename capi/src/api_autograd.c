/* Autograd: modes, marking variables, backward. */
#include <stdio.h>
#include <stdlib.h>

#include "capi/src/api.h"
#include "core/imperative/autograd.h"

int DeftAutogradSetIsRecording(int on, int *prev) {
    API_BEGIN();
    return api_set_mode(deft_autograd_set_recording, on, prev);
}

int DeftAutogradIsRecording(int *out) {
    API_BEGIN();
    return api_get_mode(deft_autograd_recording(), out);
}

int DeftAutogradSetIsTraining(int on, int *prev) {
    API_BEGIN();
    return api_set_mode(deft_autograd_set_training, on, prev);
}

int DeftAutogradIsTraining(int *out) {
    API_BEGIN();
    return api_get_mode(deft_autograd_training(), out);
}

int DeftAutogradMarkVariables(int num, const DeftNDArrayHandle *variables, const int *grad_reqs,
                              const DeftNDArrayHandle *grads) {
    API_BEGIN();
    deft_ndarray_t **vars = NULL, **gs = NULL;
    int status = api_ndarray_list(variables, num, "variables", false, &vars);
    if (status == 0 && num > 0 && !grads)
        status = deft_error(DEFT_ERR_VALUE, "grads is NULL, expected an array per variable");
    if (status == 0) status = api_ndarray_list(grads, num, "grads", true, &gs);
    if (status == 0) status = deft_autograd_mark(num, vars, grad_reqs, gs);
    free(vars), free(gs);
    return status;
}

static int backward(int num_heads, const DeftNDArrayHandle *heads,
                    const DeftNDArrayHandle *head_grads, int num_variables,
                    const DeftNDArrayHandle *variables, int retain_graph, int create_graph,
                    DeftNDArrayHandle *out_grads) {
    if (num_heads < 1)
        return deft_error(DEFT_ERR_VALUE, "num_heads is %d, expected at least 1", num_heads);
    deft_ndarray_t **hs = NULL, **hgs = NULL, **vars = NULL, **grads = NULL;
    int status = api_ndarray_list(heads, num_heads, "heads", false, &hs);
    if (status == 0 && head_grads)
        status = api_ndarray_list(head_grads, num_heads, "head_grads", true, &hgs);
    if (status == 0 && out_grads) {
        status = api_ndarray_list(variables, num_variables, "variables", false, &vars);
        if (status == 0 && !(grads = calloc((size_t)num_variables + 1, sizeof *grads)))
            status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate gradients");
    }
    if (status == 0)
        status = deft_autograd_backward(num_heads, hs, hgs, num_variables, vars, retain_graph,
                                        create_graph, out_grads ? grads : NULL);
    for (int w = 0; status == 0 && out_grads && w < num_variables; w++) {
        if (api_ndarray_wrap(grads[w], &out_grads[w])) {
            for (int j = w + 1; j < num_variables; j++) deft_ndarray_release(grads[j]);
            for (int j = 0; j < w; j++) DeftNDArrayFree(out_grads[j]), out_grads[j] = NULL;
            status = -1;
        }
    }
    free(hs), free(hgs), free(vars), free(grads);
    return status;
}

int DeftAutogradBackward(int num_heads, const DeftNDArrayHandle *heads,
                         const DeftNDArrayHandle *head_grads, int retain_graph, int create_graph) {
    API_BEGIN();
    return backward(num_heads, heads, head_grads, 0, NULL, retain_graph, create_graph, NULL);
}

int DeftAutogradComputeGradient(int num_heads, const DeftNDArrayHandle *heads,
                                const DeftNDArrayHandle *head_grads, int num_variables,
                                const DeftNDArrayHandle *variables, int retain_graph,
                                int create_graph, DeftNDArrayHandle *out_grads) {
    API_BEGIN();
    if (api_check_out(out_grads, "out_grads")) return -1;
    return backward(num_heads, heads, head_grads, num_variables, variables, retain_graph,
                    create_graph, out_grads);
}
