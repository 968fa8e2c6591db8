/* The C side of the Go binding: one function per call the Go API makes,
 * each returning the status with the error text copied out inside the same
 * C call (a goroutine may change OS threads between two cgo calls, and the
 * text is thread-local). */
#ifndef DEFT_GO_SHIM_H
#define DEFT_GO_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <deft/c_api.h>

typedef struct go_status {
    int kind;
    char message[1024];
} go_status;

int go_check(go_status *st, int status);
int go_create(go_status *st, const int64_t *shape, int ndim, int dtype, const void *data,
              size_t nbytes, DeftNDArrayHandle *out);
int go_free(go_status *st, DeftNDArrayHandle h);
int go_shape(go_status *st, DeftNDArrayHandle h, int64_t *dims, int *ndim);
int go_dtype(go_status *st, DeftNDArrayHandle h, int *out);
int go_nbytes(go_status *st, DeftNDArrayHandle h, size_t *out);
int go_to_host(go_status *st, DeftNDArrayHandle h, void *data, size_t nbytes);
int go_is_lazy(go_status *st, DeftNDArrayHandle h, int *out);
int go_invoke(go_status *st, const char *name, int nin, const DeftNDArrayHandle *in, int *nout,
              DeftNDArrayHandle *out, int np, const char *const *keys, const char *const *vals);
int go_set_deferred(go_status *st, int on, int *prev);
int go_set_recording(go_status *st, int on, int *prev);
int go_mark(go_status *st, DeftNDArrayHandle var, DeftNDArrayHandle grad);
int go_backward(go_status *st, int n, const DeftNDArrayHandle *heads);
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
int go_cached_op(go_status *st, DeftSymbolHandle s, DeftCachedOpHandle *out);
int go_cached_op_free(go_status *st, DeftCachedOpHandle op);
int go_cached_op_invoke(go_status *st, DeftCachedOpHandle op, int nin, const DeftNDArrayHandle *in,
                        int *nout, DeftNDArrayHandle *out);
int go_wait_all(go_status *st);
int go_gpu_count(go_status *st, int *count);
int go_counters(go_status *st, int64_t *arrays, int64_t *bytes);
int go_custom_register(go_status *st, const char *name, int nin, uintptr_t handle,
                       int has_backward);
int go_custom_set_error(const char *message);

#endif
