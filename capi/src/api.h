/* Helpers shared by the C API functions: entry bookkeeping and argument checks. */
#ifndef DEFT_CAPI_API_H
#define DEFT_CAPI_API_H

#include "capi/src/handle.h"
#include "core/base/error.h"
#include "core/imperative/ndarray.h"
#include "deft/c_api.h"

/* First statement of every public function: names it in any error it reports. */
#define API_BEGIN() deft_error_enter(__func__)

/* -1 with a message naming the out-parameter when it is NULL. */
static inline int api_check_out(const void *out, const char *name) {
    if (out) return 0;
    return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected a pointer to receive the result", name);
}

static inline int api_ndarray(DeftNDArrayHandle handle, const char *what, deft_ndarray_t **out) {
    void *object;
    if (deft_handle_get(handle, DEFT_HANDLE_NDARRAY, what, &object)) return -1;
    *out = object;
    return 0;
}

/* The error for handles[i], named as in "inputs[2]" (api_ndarray.c). */
int api_bad_ndarray(const DeftNDArrayHandle *handles, int i, const char *what,
                    deft_ndarray_t **out);

/* The arrays behind n handles (NULL ones too when allow_null); errors name
 * `what`[i]. Inline, with the name formatted only on failure: this is on the
 * dispatch path. */
static inline int api_ndarrays(const DeftNDArrayHandle *handles, int n, const char *what,
                               bool allow_null, deft_ndarray_t **out) {
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        if (allow_null && !handles[i]) continue;
        if (!(out[i] = deft_handle_lookup(handles[i], DEFT_HANDLE_NDARRAY)))
            return api_bad_ndarray(handles, i, what, &out[i]);
    }
    return 0;
}

/* A per-thread mode switch (deferred compute, recording, training): set it
 * and report the previous setting. */
static inline int api_set_mode(void (*set)(bool on, bool *prev), int on, int *prev) {
    bool was;
    set(on != 0, &was);
    if (prev) *prev = was;
    return 0;
}

static inline int api_get_mode(bool value, int *out) {
    if (api_check_out(out, "out")) return -1;
    *out = value;
    return 0;
}

/* Run fn over the arrays behind n handles (the array functions of deferred compute). */
int api_with_arrays(const DeftNDArrayHandle *handles, int n, const char *what,
                    int (*fn)(int n, deft_ndarray_t *const *arrays));

/* Like api_ndarrays, for any count, into a buffer the caller frees (also on failure). */
int api_ndarray_list(const DeftNDArrayHandle *handles, int n, const char *what, bool allow_null,
                     deft_ndarray_t ***out);

/* DeftImperativeInvoke's work, in the calling thread's recording mode (api_op.c). */
int api_invoke(DeftOpHandle op, int num_inputs, const DeftNDArrayHandle *inputs, int *num_outputs,
               DeftNDArrayHandle *outputs, int num_params, const char *const *keys,
               const char *const *vals);

/* The composed symbol behind a symbol handle (api_symbol.c). */
struct deft_symbol;
int api_symbol_get(DeftSymbolHandle handle, const char *what, struct deft_symbol **out);
/* Wrap a symbol the caller owns; on failure it is freed. */
int api_symbol_wrap(struct deft_symbol *sym, DeftSymbolHandle *out);

/* Wrap an array the caller owns a reference to; on failure the reference is dropped. */
int api_ndarray_wrap(deft_ndarray_t *arr, DeftNDArrayHandle *out);

/* Wrap the outputs a call created (outputs[k] NULL: out[k] is new and owned);
 * on failure the ones not wrapped yet are released. */
static inline int api_wrap_outputs(int produced, deft_ndarray_t **out, DeftNDArrayHandle *outputs) {
    for (int k = 0; k < produced; k++) {
        if (outputs[k]) continue;
        if (api_ndarray_wrap(out[k], &outputs[k])) {
            for (int j = k + 1; j < produced; j++)
                if (!outputs[j]) deft_ndarray_release(out[j]);
            return -1;
        }
    }
    return 0;
}

#endif
