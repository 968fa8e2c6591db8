/* Custom operators: the C API's callbacks behind the core's host interface. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/src/api.h"
#include "core/imperative/custom_op.h"

typedef struct api_custom {
    DeftCustomOpCallbacks cb;
} api_custom_t;

/* A callback failed: its message (DeftCustomOpSetError), if any, after the
 * callback's name. The core names the operator and the API call around it,
 * so no function is named here: the API functions the callback, or this
 * file, called last (DeftNDArrayFree ...) are no part of the failure. */
static int failure(const char *callback) {
    char message[DEFT_ERROR_MAX];
    snprintf(message, sizeof message, "%s", deft_error_message());
    deft_error_kind_t kind = deft_error_kind();
    deft_error_enter(NULL);
    return deft_error(kind ? kind : DEFT_ERR_VALUE, "the %s callback failed: %s", callback,
                      message[0] ? message : "(no message)");
}

static int api_infer(void *user, int nin, const deft_desc_t *in, int nout, deft_desc_t *out) {
    (void)nout;
    const api_custom_t *c = user;
    int ndims[DEFT_OP_MAX_INPUTS], dtypes[DEFT_OP_MAX_INPUTS];
    int64_t shapes[DEFT_OP_MAX_INPUTS * DEFT_MAX_NDIM];
    for (int i = 0; i < nin; i++) {
        ndims[i] = in[i].shape.ndim;
        dtypes[i] = in[i].dtype;
        memcpy(&shapes[i * DEFT_MAX_NDIM], in[i].shape.dims, sizeof in[i].shape.dims);
    }
    int ndim = -1, dtype = -1;
    int64_t dims[DEFT_MAX_NDIM] = {0};
    deft_error_restore(DEFT_ERR_NONE, "");
    if (c->cb.infer_shape(c->cb.user, nin, ndims, shapes, dtypes, &ndim, dims, &dtype))
        return failure("shape inference");
    if (ndim < 0 || ndim > DEFT_MAX_NDIM) return 0; /* reported by the core */
    out[0].shape.ndim = ndim;
    for (int d = 0; d < ndim; d++) out[0].shape.dims[d] = dims[d];
    out[0].dtype = (deft_dtype_t)dtype;
    return 0;
}

/* Borrowed handles over the arrays, for one callback. */
static int handles(int n, deft_ndarray_t *const *arrays, DeftNDArrayHandle *out) {
    for (int i = 0; i < n; i++) {
        if (api_ndarray_wrap(deft_ndarray_retain(arrays[i]), &out[i])) {
            while (i-- > 0) DeftNDArrayFree(out[i]);
            return -1;
        }
    }
    return 0;
}

static int api_run(void *user, bool backward, int nin, deft_ndarray_t *const *in, int nout,
                   deft_ndarray_t *const *out, bool is_train) {
    const api_custom_t *c = user;
    DeftNDArrayHandle hin[DEFT_OP_MAX_INPUTS], hout[DEFT_OP_MAX_INPUTS];
    if (handles(nin, in, hin)) return -1;
    if (handles(nout, out, hout)) {
        for (int i = 0; i < nin; i++) DeftNDArrayFree(hin[i]);
        return -1;
    }
    deft_error_restore(DEFT_ERR_NONE, "");
    int failed = backward ? c->cb.backward(c->cb.user, hin[0], nin - 2, hin + 1, hin[nin - 1], hout)
                          : c->cb.forward(c->cb.user, nin, hin, hout[0], is_train);
    for (int i = 0; i < nin; i++) DeftNDArrayFree(hin[i]);
    for (int k = 0; k < nout; k++) DeftNDArrayFree(hout[k]);
    return failed ? failure(backward ? "backward" : "forward") : 0;
}

static int register_custom(const char *name, const DeftCustomOpCallbacks *callbacks) {
    if (!name) return deft_error(DEFT_ERR_VALUE, "name is NULL, expected an operator name");
    if (!callbacks->infer_shape || !callbacks->forward)
        return deft_error(DEFT_ERR_VALUE, "'%s' needs infer_shape and forward callbacks", name);
    api_custom_t *c = malloc(sizeof *c);
    if (!c) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register '%s'", name);
    c->cb = *callbacks;
    deft_custom_host_t host = {
        .user = c, .infer = api_infer, .run = api_run, .has_backward = callbacks->backward != NULL};
    if (deft_custom_register(name, callbacks->num_inputs, 1, &host)) {
        free(c);
        return -1;
    }
    return 0;
}

int DeftCustomOpRegister(const char *name, const DeftCustomOpCallbacks *callbacks) {
    API_BEGIN();
    if (!callbacks) return deft_error(DEFT_ERR_VALUE, "callbacks is NULL");
    if (register_custom(name, callbacks) == 0) return 0;
    if (callbacks->release) callbacks->release(callbacks->user); /* ours now: not kept */
    return -1;
}

int DeftCustomOpSetError(const char *message) {
    deft_error_enter(NULL);
    deft_error(DEFT_ERR_VALUE, "%s", message ? message : "(no message)");
    return 0;
}

int DeftCustomOpGetStream(int device_id, void **out) {
    API_BEGIN();
    void *stream;
    if (api_check_out(out, "out") || deft_custom_stream(device_id, &stream)) return -1;
    *out = stream;
    return 0;
}

int DeftCustomOpGetData(DeftNDArrayHandle handle, void **out) {
    API_BEGIN();
    deft_ndarray_t *arr;
    void *data;
    if (api_ndarray(handle, "handle", &arr) || api_check_out(out, "out") ||
        deft_custom_data(arr, &data))
        return -1;
    *out = data;
    return 0;
}
