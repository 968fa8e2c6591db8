#include "shim.h"

#include <stdlib.h>
#include <string.h>

int go_check(go_status *st, int status) {
    if (status == 0) return 0;
    st->kind = DeftGetLastErrorKind();
    const char *text = DeftGetLastError();
    st->message = malloc(strlen(text) + 1);
    if (st->message) strcpy(st->message, text);
    return -1;
}

/* The memory counters are atomics: reading one after a call that creates
 * arrays lets Go see native bytes without a cgo call of its own. */
static int64_t live_bytes(void) {
    int64_t live = 0;
    DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, &live);
    return live;
}

int go_create(go_status *st, const int64_t *shape, int ndim, int dtype, int dev_type, int dev_id,
              const void *data, size_t nbytes, DeftNDArrayHandle *out, int64_t *live) {
    int status =
        data ? DeftNDArrayCreateFromData(shape, ndim, dtype, dev_type, dev_id, data, nbytes, out)
             : DeftNDArrayCreate(shape, ndim, dtype, dev_type, dev_id, out);
    *live = live_bytes();
    return go_check(st, status);
}
void go_free_arrays(const DeftNDArrayHandle *hs, int n) {
    for (int i = 0; i < n; i++) DeftNDArrayFree(hs[i]);
}
go_status go_free_array(DeftNDArrayHandle h) {
    go_status st = {0, NULL};
    go_check(&st, DeftNDArrayFree(h));
    return st;
}
int go_shape(go_status *st, DeftNDArrayHandle h, int64_t *dims, int *ndim) {
    return go_check(st, DeftNDArrayGetShape(h, dims, DEFT_MAX_NDIM, ndim));
}
int go_describe(go_status *st, DeftNDArrayHandle h, int *dtype, size_t *nbytes) {
    return go_check(st, DeftNDArrayGetDType(h, dtype)) ||
           go_check(st, DeftNDArrayGetNBytes(h, nbytes));
}
int go_device(go_status *st, DeftNDArrayHandle h, int *type, int *id) {
    return go_check(st, DeftNDArrayGetDevice(h, type, id));
}
int go_to_host(go_status *st, DeftNDArrayHandle h, void *data, size_t nbytes) {
    return go_check(st, DeftNDArrayCopyToHost(h, data, nbytes));
}
int go_from_host(go_status *st, DeftNDArrayHandle h, const void *data, size_t nbytes) {
    return go_check(st, DeftNDArrayCopyFromHost(h, data, nbytes));
}
int go_wait_to_read(go_status *st, DeftNDArrayHandle h) {
    return go_check(st, DeftNDArrayWaitToRead(h));
}
int go_is_lazy(go_status *st, DeftNDArrayHandle h, int *out) {
    return go_check(st, DeftNDArrayGetIsDeferredCompute(&h, 1, out));
}
int go_get_op(go_status *st, const char *name, DeftOpHandle *out) {
    return go_check(st, DeftGetOperator(name, out));
}

/* How many outputs op makes with these parameters: the outputs of its
 * symbol, composed with variables for inputs. -1 when that cannot be told. */
static int count_outputs(DeftOpHandle op, int np, const char *const *keys,
                         const char *const *vals) {
    DeftSymbolHandle sym = NULL;
    int n = -1;
    if (DeftSymbolCreateAtomic(op, np, keys, vals, &sym) == 0 &&
        DeftSymbolCompose(sym, NULL, 0, NULL, NULL) == 0 && DeftSymbolGetNumOutputs(sym, &n) != 0)
        n = -1;
    DeftSymbolFree(sym);
    return n;
}

int go_count_outputs(DeftOpHandle op, int np, const char *const *keys, const char *const *vals) {
    return count_outputs(op, np, keys, vals);
}

enum { GO_INLINE_PARAMS = 16 };

int go_invoke(go_call *c, DeftOpHandle op, int nin, const DeftNDArrayHandle *in,
              DeftNDArrayHandle *out, int np, const char *params) {
    const char *inline_keys[GO_INLINE_PARAMS], *inline_vals[GO_INLINE_PARAMS];
    const char **keys = inline_keys, **vals = inline_vals;
    go_status *st = &c->st;
    if (np > GO_INLINE_PARAMS) {
        keys = malloc(2 * (size_t)np * sizeof *keys);
        if (!keys) {
            st->kind = DEFT_ERROR_OUT_OF_MEMORY;
            st->message = NULL;
            return -1;
        }
        vals = keys + np;
    }
    if (!params) params = c->params;
    for (int i = 0; i < np; i++) {
        keys[i] = params;
        params += strlen(params) + 1;
        vals[i] = params;
        params += strlen(params) + 1;
    }
    int room = c->nout;
    int status = go_check(st, DeftImperativeInvoke(op, nin, in ? in : c->in, &c->nout,
                                                   out ? out : c->out, np, keys, vals));
    if (status != 0) {
        /* A failed call creates nothing: when the room was short, say how
         * much is needed (the message copied above is then dropped). */
        int needed = count_outputs(op, np, keys, vals);
        if (needed > room) {
            free(st->message);
            st->message = NULL;
            c->nout = needed;
            status = 1;
        }
    }
    if (keys != inline_keys) free(keys);
    c->live = live_bytes();
    return status;
}
int go_set_deferred(go_status *st, int on, int *prev) {
    return go_check(st, DeftSetIsDeferredCompute(on, prev));
}
int go_set_recording(go_status *st, int on, int *prev) {
    return go_check(st, DeftAutogradSetIsRecording(on, prev));
}
int go_set_training(go_status *st, int on, int *prev) {
    return go_check(st, DeftAutogradSetIsTraining(on, prev));
}
int go_is_recording(go_status *st, int *on) {
    return go_check(st, DeftAutogradIsRecording(on));
}
int go_is_training(go_status *st, int *on) {
    return go_check(st, DeftAutogradIsTraining(on));
}
int go_mark(go_status *st, DeftNDArrayHandle var, int req, DeftNDArrayHandle grad) {
    return go_check(st, DeftAutogradMarkVariables(1, &var, &req, &grad));
}
int go_backward(go_status *st, int n, const DeftNDArrayHandle *heads,
                const DeftNDArrayHandle *head_grads, int retain) {
    return go_check(st, DeftAutogradBackward(n, heads, head_grads, retain, 0));
}
int go_grad(go_status *st, int n, const DeftNDArrayHandle *heads, int nvar,
            const DeftNDArrayHandle *vars, int retain, DeftNDArrayHandle *out) {
    return go_check(st, DeftAutogradComputeGradient(n, heads, NULL, nvar, vars, retain, 0, out));
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
int go_cached_op(go_status *st, DeftSymbolHandle s, int flags, DeftCachedOpHandle *out) {
    return go_check(st, DeftCachedOpCreate(s, flags, out));
}
int go_cached_op_free(go_status *st, DeftCachedOpHandle op) {
    return go_check(st, DeftCachedOpFree(op));
}
int go_cached_op_invoke(go_status *st, DeftCachedOpHandle op, int nin, const DeftNDArrayHandle *in,
                        int *nout, DeftNDArrayHandle *out, int64_t *live) {
    int status = go_check(st, DeftCachedOpInvoke(op, nin, in, nout, out));
    *live = live_bytes();
    return status;
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
int go_memory_stat(go_status *st, int dev_type, int dev_id, int stat, int64_t *out) {
    return go_check(st, DeftGetMemoryStat(dev_type, dev_id, stat, out));
}

/* ---- operator information ---- */

int go_list_ops(go_status *st, int *n, const char *const **names) {
    return go_check(st, DeftListOperators(n, names));
}
int go_op_info(go_status *st, DeftOpHandle op, const char **name, const char **doc, int *min_in,
               int *max_in, int *n_names, const char *const **in_names, int *nparams) {
    return go_check(st, DeftOpGetInfo(op, name, doc)) ||
           go_check(st, DeftOpGetInputs(op, min_in, max_in, n_names, in_names)) ||
           go_check(st, DeftOpGetNumParams(op, nparams));
}
int go_op_param(go_status *st, DeftOpHandle op, int i, const char **name, const char **type,
                const char **def, const char **doc, int *nchoices, const char *const **choices) {
    return go_check(st, DeftOpGetParam(op, i, name, type, def, doc)) ||
           go_check(st, DeftOpGetParamChoices(op, i, nchoices, choices));
}

/* ---- profiler ---- */

int go_profiler_config(go_status *st, int n, const char *const *keys, const char *const *vals) {
    return go_check(st, DeftProfilerSetConfig(n, keys, vals));
}
int go_profiler_state(go_status *st, int running) {
    return go_check(st, DeftProfilerSetState(running));
}
int go_profiler_pause(go_status *st, int paused) {
    return go_check(st, DeftProfilerPause(paused));
}
int go_profiler_dump(go_status *st, int finished) {
    return go_check(st, DeftProfilerDump(finished));
}
int go_profiler_dumps(go_status *st, int reset, int format, const char **out) {
    return go_check(st, DeftProfilerDumps(reset, format, out));
}
int go_profiler_reset(go_status *st) {
    return go_check(st, DeftProfilerReset());
}
int go_profile_domain(go_status *st, const char *name, DeftProfileDomainHandle *out) {
    return go_check(st, DeftProfileCreateDomain(name, out));
}
int go_profile_domain_free(go_status *st, DeftProfileDomainHandle d) {
    return go_check(st, DeftProfileDomainFree(d));
}
int go_profile_object(go_status *st, DeftProfileDomainHandle d, int kind, const char *name,
                      DeftProfileObjectHandle *out) {
    return go_check(st, DeftProfileCreateObject(d, kind, name, out));
}
int go_profile_object_free(go_status *st, DeftProfileObjectHandle o) {
    return go_check(st, DeftProfileObjectFree(o));
}
int go_profile_start(go_status *st, DeftProfileObjectHandle o) {
    return go_check(st, DeftProfileDurationStart(o));
}
int go_profile_stop(go_status *st, DeftProfileObjectHandle o) {
    return go_check(st, DeftProfileDurationStop(o));
}
int go_profile_counter(go_status *st, DeftProfileObjectHandle o, int64_t value, int add) {
    return go_check(st, DeftProfileSetCounter(o, value, add));
}
int go_profile_marker(go_status *st, DeftProfileDomainHandle d, const char *name,
                      const char *scope) {
    return go_check(st, DeftProfileSetMarker(d, name, scope));
}

/* ---- DLPack ---- */

int go_to_dlpack(go_status *st, DeftNDArrayHandle h, DLManagedTensor **out, void **data,
                 int64_t *count, int *dtype) {
    if (go_check(st, DeftNDArrayToDLPack(h, out)) || go_check(st, DeftNDArrayGetDType(h, dtype)))
        return -1;
    DLTensor *t = &(*out)->dl_tensor;
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    *data = (char *)t->data + t->byte_offset;
    *count = n;
    return 0;
}
void go_dlpack_delete(DLManagedTensor *t) {
    if (t && t->deleter) t->deleter(t);
}
int go_from_dlpack(go_status *st, DLManagedTensor *t, DeftNDArrayHandle *out) {
    return go_check(st, DeftNDArrayFromDLPack(t, out));
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
