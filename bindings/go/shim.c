#include "shim.h"

#include <stdio.h>

int go_check(go_status *st, int status) {
    if (status == 0) return 0;
    st->kind = DeftGetLastErrorKind();
    snprintf(st->message, sizeof st->message, "%s", DeftGetLastError());
    return -1;
}

int go_create(go_status *st, const int64_t *shape, int ndim, int dtype, const void *data,
              size_t nbytes, DeftNDArrayHandle *out) {
    return go_check(
        st, data ? DeftNDArrayCreateFromData(shape, ndim, dtype, DEFT_CPU, 0, data, nbytes, out)
                 : DeftNDArrayCreate(shape, ndim, dtype, DEFT_CPU, 0, out));
}
int go_free(go_status *st, DeftNDArrayHandle h) {
    return go_check(st, DeftNDArrayFree(h));
}
int go_shape(go_status *st, DeftNDArrayHandle h, int64_t *dims, int *ndim) {
    return go_check(st, DeftNDArrayGetShape(h, dims, DEFT_MAX_NDIM, ndim));
}
int go_dtype(go_status *st, DeftNDArrayHandle h, int *out) {
    return go_check(st, DeftNDArrayGetDType(h, out));
}
int go_nbytes(go_status *st, DeftNDArrayHandle h, size_t *out) {
    return go_check(st, DeftNDArrayGetNBytes(h, out));
}
int go_to_host(go_status *st, DeftNDArrayHandle h, void *data, size_t nbytes) {
    return go_check(st, DeftNDArrayCopyToHost(h, data, nbytes));
}
int go_is_lazy(go_status *st, DeftNDArrayHandle h, int *out) {
    return go_check(st, DeftNDArrayGetIsDeferredCompute(&h, 1, out));
}
int go_invoke(go_status *st, const char *name, int nin, const DeftNDArrayHandle *in, int *nout,
              DeftNDArrayHandle *out, int np, const char *const *keys, const char *const *vals) {
    DeftOpHandle op;
    if (go_check(st, DeftGetOperator(name, &op))) return -1;
    return go_check(st, DeftImperativeInvoke(op, nin, in, nout, out, np, keys, vals));
}
int go_set_deferred(go_status *st, int on, int *prev) {
    return go_check(st, DeftSetIsDeferredCompute(on, prev));
}
int go_set_recording(go_status *st, int on, int *prev) {
    return go_check(st, DeftAutogradSetIsRecording(on, prev));
}
int go_mark(go_status *st, DeftNDArrayHandle var, DeftNDArrayHandle grad) {
    int req = DEFT_GRAD_WRITE;
    return go_check(st, DeftAutogradMarkVariables(1, &var, &req, &grad));
}
int go_backward(go_status *st, int n, const DeftNDArrayHandle *heads) {
    return go_check(st, DeftAutogradBackward(n, heads, NULL, 0, 0));
}
int go_export(go_status *st, const DeftNDArrayHandle *in, const DeftNDArrayHandle *out,
              const char *const *in_names, const char *const *out_names, int nin, int nout,
              DeftSymbolHandle *sym) {
    return go_check(
        st, DeftNDArrayGetDeferredComputeSymbol(in, out, in_names, out_names, nin, nout, sym));
}
int go_symbol_free(go_status *st, DeftSymbolHandle s) {
    return go_check(st, DeftSymbolFree(s));
}
int go_symbol_names(go_status *st, DeftSymbolHandle s, int which, int *n,
                    const char *const **names) {
    return go_check(st, which == 2   ? DeftSymbolListAuxiliaryStates(s, n, names)
                        : which == 1 ? DeftSymbolListOutputs(s, n, names)
                                     : DeftSymbolListArguments(s, n, names));
}
int go_symbol_json(go_status *st, DeftSymbolHandle s, const char **out) {
    return go_check(st, DeftSymbolSaveToJSON(s, out));
}
int go_symbol_train_step(go_status *st, DeftSymbolHandle loss, int n, const char *const *params,
                         const char *optimizer, DeftSymbolHandle *out) {
    return go_check(st, DeftSymbolTrainStep(loss, n, params, optimizer, out));
}
int go_symbol_from_json(go_status *st, const char *json, DeftSymbolHandle *out) {
    return go_check(st, DeftSymbolCreateFromJSON(json, out));
}
int go_cached_op(go_status *st, DeftSymbolHandle s, DeftCachedOpHandle *out) {
    return go_check(st, DeftCachedOpCreate(s, 0, out));
}
int go_cached_op_free(go_status *st, DeftCachedOpHandle op) {
    return go_check(st, DeftCachedOpFree(op));
}
int go_cached_op_invoke(go_status *st, DeftCachedOpHandle op, int nin, const DeftNDArrayHandle *in,
                        int *nout, DeftNDArrayHandle *out) {
    return go_check(st, DeftCachedOpInvoke(op, nin, in, nout, out));
}
int go_wait_all(go_status *st) {
    return go_check(st, DeftWaitAll());
}
int go_gpu_count(go_status *st, int *count) {
    return go_check(st, DeftGetGPUCount(count));
}
int go_counters(go_status *st, int64_t *arrays, int64_t *bytes) {
    return go_check(st, DeftGetLiveNDArrayCount(arrays)) ||
           go_check(st, DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, bytes));
}

/* ---- custom operators: the C callbacks call the Go functions exported in custom.go ---- */

#include "_cgo_export.h"

static int custom_infer(void *user, int nin, const int *in_ndims, const int64_t *in_shapes,
                        const int *in_dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype) {
    return goCustomInfer((uintptr_t)user, nin, (int *)in_ndims, (int64_t *)in_shapes,
                         (int *)in_dtypes, out_ndim, out_shape, out_dtype);
}

static int custom_forward(void *user, int nin, const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                          int is_train) {
    return goCustomForward((uintptr_t)user, nin, (DeftNDArrayHandle *)in, out, is_train);
}

static int custom_backward(void *user, DeftNDArrayHandle out_grad, int nin,
                           const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                           const DeftNDArrayHandle *in_grads) {
    return goCustomBackward((uintptr_t)user, out_grad, nin, (DeftNDArrayHandle *)in, out,
                            (DeftNDArrayHandle *)in_grads);
}

int go_custom_register(go_status *st, const char *name, int nin, uintptr_t handle,
                       int has_backward) {
    DeftCustomOpCallbacks cb = {
        nin, custom_infer, custom_forward, has_backward ? custom_backward : NULL, (void *)handle,
        NULL};
    return go_check(st, DeftCustomOpRegister(name, &cb));
}

int go_custom_set_error(const char *message) {
    return DeftCustomOpSetError(message);
}
