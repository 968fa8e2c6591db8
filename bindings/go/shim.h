/* The C side of the Go binding: one function per call the Go API makes,
 * each returning the status with the error text copied out inside the same
 * C call (a goroutine may change OS threads between two cgo calls, and the
 * text is thread-local). The copy is malloc'd only on failure, so a
 * successful call passes Go nothing to free. */
#ifndef DEFT_GO_SHIM_H
#define DEFT_GO_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <deft/c_api.h>

typedef struct go_status {
    int kind;
    char *message; /* on failure: malloc'd, the caller frees it */
} go_status;

int go_check(go_status *st, int status);
int go_create(go_status *st, const int64_t *shape, int ndim, int dtype, int dev_type, int dev_id,
              const void *data, size_t nbytes, DeftNDArrayHandle *out, int64_t *live);
int go_shape(go_status *st, DeftNDArrayHandle h, int64_t *dims, int *ndim);
/* the dtype and size in bytes, for a read */
int go_describe(go_status *st, DeftNDArrayHandle h, int *dtype, size_t *nbytes);
int go_device(go_status *st, DeftNDArrayHandle h, int *type, int *id);
int go_to_host(go_status *st, DeftNDArrayHandle h, void *data, size_t nbytes);
int go_from_host(go_status *st, DeftNDArrayHandle h, const void *data, size_t nbytes);
int go_wait_to_read(go_status *st, DeftNDArrayHandle h);
int go_is_lazy(go_status *st, DeftNDArrayHandle h, int *out);
int go_get_op(go_status *st, const char *name, DeftOpHandle *out);
/* One operator call's arguments and results, in C memory that Go reuses
 * from call to call: a call passes Go no pointer to check and allocates
 * nothing when its arrays and parameters fit the inline room. */
enum { GO_CALL_INLINE = 8, GO_CALL_PARAMS = 256 };
typedef struct go_call {
    go_status st;
    int64_t live; /* deft's live CPU bytes after the call */
    int nout;     /* in: the room for outputs; out: the outputs made (or needed) */
    DeftNDArrayHandle in[GO_CALL_INLINE];
    DeftNDArrayHandle out[GO_CALL_INLINE];
    char params[GO_CALL_PARAMS];
} go_call;
/* in, out, params: NULL for the call's inline ones. params: np keys and
 * values, each NUL-terminated, one after another. Returns 0 (done: c->nout
 * arrays), -1 (failed: c->st) or 1 when the operator makes more outputs than
 * c->nout has room for: then c->nout is the count it makes, nothing was
 * created or changed, and the caller retries with that room. */
int go_invoke(go_call *c, DeftOpHandle op, int nin, const DeftNDArrayHandle *in,
              DeftNDArrayHandle *out, int np, const char *params);
/* DeftNDArrayFree of n handles (the finalizers' batches); failures are not
 * reported: a finalizer has no one to tell */
void go_free_arrays(const DeftNDArrayHandle *hs, int n);
/* DeftNDArrayFree, the status returned by value (no pointer to pass) */
go_status go_free_array(DeftNDArrayHandle h);
int go_set_deferred(go_status *st, int on, int *prev);
int go_set_recording(go_status *st, int on, int *prev);
int go_set_training(go_status *st, int on, int *prev);
int go_is_recording(go_status *st, int *on);
int go_is_training(go_status *st, int *on);
int go_mark(go_status *st, DeftNDArrayHandle var, int req, DeftNDArrayHandle grad);
int go_backward(go_status *st, int n, const DeftNDArrayHandle *heads,
                const DeftNDArrayHandle *head_grads, int retain);
int go_grad(go_status *st, int n, const DeftNDArrayHandle *heads, int nvar,
            const DeftNDArrayHandle *vars, int retain, DeftNDArrayHandle *out);
int go_export(go_status *st, const DeftNDArrayHandle *in, const DeftNDArrayHandle *out,
              const char *const *in_names, const char *const *out_names, int nin, int nout,
              DeftSymbolHandle *sym);
int go_symbol_free(go_status *st, DeftSymbolHandle s);
/* which: 0 arguments, 1 outputs, 2 auxiliary states */
int go_symbol_names(go_status *st, DeftSymbolHandle s, int which, int *n,
                    const char *const **names);
int go_symbol_json(go_status *st, DeftSymbolHandle s, const char **out);
int go_symbol_train_step(go_status *st, DeftSymbolHandle loss, int n, const char *const *params,
                         const char *optimizer, DeftSymbolHandle *out);
int go_symbol_from_json(go_status *st, const char *json, DeftSymbolHandle *out);
int go_cached_op(go_status *st, DeftSymbolHandle s, int flags, DeftCachedOpHandle *out);
int go_cached_op_free(go_status *st, DeftCachedOpHandle op);
int go_cached_op_invoke(go_status *st, DeftCachedOpHandle op, int nin, const DeftNDArrayHandle *in,
                        int *nout, DeftNDArrayHandle *out, int64_t *live);
int go_wait_all(go_status *st);
int go_gpu_count(go_status *st, int *count);
int go_counters(go_status *st, int64_t *arrays, int64_t *bytes);
int go_memory_stat(go_status *st, int dev_type, int dev_id, int stat, int64_t *out);
int go_custom_register(go_status *st, const char *name, int nin, uintptr_t handle,
                       int has_backward);
int go_custom_set_error(const char *message);

/* operator information, for the generator (gen/) */
int go_list_ops(go_status *st, int *n, const char *const **names);
int go_op_info(go_status *st, DeftOpHandle op, const char **name, const char **doc, int *min_in,
               int *max_in, int *n_names, const char *const **in_names, int *nparams);
/* outputs op makes with these parameters; -1 when that cannot be told */
int go_count_outputs(DeftOpHandle op, int np, const char *const *keys, const char *const *vals);
int go_op_param(go_status *st, DeftOpHandle op, int i, const char **name, const char **type,
                const char **def, const char **doc, int *nchoices, const char *const **choices);

/* profiler */
int go_profiler_config(go_status *st, int n, const char *const *keys, const char *const *vals);
int go_profiler_state(go_status *st, int running);
int go_profiler_pause(go_status *st, int paused);
int go_profiler_dump(go_status *st, int finished);
int go_profiler_dumps(go_status *st, int reset, int format, const char **out);
int go_profiler_reset(go_status *st);
int go_profile_domain(go_status *st, const char *name, DeftProfileDomainHandle *out);
int go_profile_domain_free(go_status *st, DeftProfileDomainHandle d);
int go_profile_object(go_status *st, DeftProfileDomainHandle d, int kind, const char *name,
                      DeftProfileObjectHandle *out);
int go_profile_object_free(go_status *st, DeftProfileObjectHandle o);
int go_profile_start(go_status *st, DeftProfileObjectHandle o);
int go_profile_stop(go_status *st, DeftProfileObjectHandle o);
int go_profile_counter(go_status *st, DeftProfileObjectHandle o, int64_t value, int add);
int go_profile_marker(go_status *st, DeftProfileDomainHandle d, const char *name,
                      const char *scope);

/* DLPack: export as a capsule the caller deletes; import takes it over */
int go_to_dlpack(go_status *st, DeftNDArrayHandle h, DLManagedTensor **out, void **data,
                 int64_t *count, int *dtype);
void go_dlpack_delete(DLManagedTensor *t);
int go_from_dlpack(go_status *st, DLManagedTensor *t, DeftNDArrayHandle *out);

#endif
