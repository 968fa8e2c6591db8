/*
 * Custom operators: an operator whose shape inference, forward and backward
 * are callbacks of a host language. Registration makes two registry
 * operators, `name` and `_backward_name`, so custom operators work wherever
 * operators do: imperatively, in deferred compute, in exported symbols and
 * JSON, and in autograd.
 *
 * The forward and backward callbacks never run on an engine thread or on a
 * thread that called the API: the kernel hands them to a dedicated callback
 * thread and waits, so a host lock (Python's GIL) held by an API caller can
 * never block the engine. Operators the callback invokes run on that thread
 * at once (their arrays are its own), and count in the profiler under the
 * "Custom Operators" domain as `name::operator`.
 */
#ifndef DEFT_CORE_CUSTOM_OP_H
#define DEFT_CORE_CUSTOM_OP_H

#include <stdbool.h>

#include "core/imperative/ndarray.h"

typedef struct deft_custom_host {
    void *user;
    /* Output descriptions from input descriptions; 0 or -1 with an error set. */
    int (*infer)(void *user, int nin, const deft_desc_t *in, int nout, deft_desc_t *out);
    /* The forward (backward=false: in, out) or backward (in = out_grads, inputs,
     * outputs; out = in_grads) callback on arrays borrowed for the call. */
    int (*run)(void *user, bool backward, int nin, deft_ndarray_t *const *in, int nout,
               deft_ndarray_t *const *out, bool is_train);
    bool has_backward;
} deft_custom_host_t;

/* Register `name` with `num_inputs` and `num_outputs` (fixed counts). */
int deft_custom_register(const char *name, int num_inputs, int num_outputs,
                         const deft_custom_host_t *host);

/* True on a callback thread (its operators run at once, and are named after the custom op). */
bool deft_custom_on_callback_thread(void);
/* The custom operator whose callback runs on this thread, or NULL. */
const char *deft_custom_current(void);
/* The stream (a cudaStream_t) of gpu(device_id) that the callback running on
 * this thread queues its own GPU work on: one of its arrays' GPUs. */
int deft_custom_stream(int device_id, void **out);
/* The address of element 0 of an array lent to the running callback, at once. */
int deft_custom_data(const deft_ndarray_t *arr, void **out);

#endif
