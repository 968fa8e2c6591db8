/*
 * Custom operators (see custom_op.h). A kernel call becomes a job for the
 * callback threads: the engine worker that runs the kernel waits while a
 * callback thread wraps the tensors as arrays, calls the host, and waits for
 * the writes the host started on the outputs. A callback thread is started
 * whenever a job finds none idle, so a callback that calls another custom
 * operator never waits for itself.
 *
 * On a GPU the callback thread queues on a stream of its own, not the
 * engine worker's, whose stream the operation's fences wait on and mark
 * (fence.h). So the streams are joined, without the host waiting: the
 * callback's stream waits for the worker's (which waited for the inputs)
 * before the callback, and the worker's for the callback's after it, so
 * that what the callback queued, through deft or on the stream it asked
 * for (DeftCustomOpGetStream), is ordered before whatever waits for the
 * operation.
 */
#define _GNU_SOURCE
#include "core/imperative/custom_op.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/base/profiler.h"
#include "core/base/tls.h"
#include "core/engine/engine.h"
#include "core/op/grad.h"
#include "core/op/registry.h"

typedef struct custom_op {
    deft_op_t forward, backward;
    char *name, *backward_name;
    const char **forward_inputs, **backward_inputs;
    int nin, nout;
    deft_custom_host_t host;
} custom_op_t;

typedef struct job {
    const custom_op_t *c;
    const deft_engine_work_t *running; /* the engine operation waiting for the job */
    bool backward;
    int nin, nout;
    const deft_tensor_t *in, *out;
    uint32_t gpus;     /* the GPUs its arrays are on, as bits (0: none) */
    int worker_slot;   /* the stream the engine's operation is fenced on */
    int callback_slot; /* the callback thread's, set by it (-1 until then) */
    /* the result, set by the callback thread */
    bool done;
    int status;
    deft_error_kind_t kind;
    char message[DEFT_ERROR_MAX];
    pthread_cond_t finished;
    struct job *next;
} job_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER;
static job_t *queue_head, *queue_tail;
static int idle_threads;
static DEFT_TLS_FAST const char *tl_current; /* the custom op a callback thread runs, or NULL */
static DEFT_TLS_FAST const job_t *tl_job;    /* and its job */
static DEFT_TLS_FAST bool tl_callback_thread;

bool deft_custom_on_callback_thread(void) {
    return tl_callback_thread;
}

const char *deft_custom_current(void) {
    return tl_current;
}

/* ---- running a job on a callback thread ---- */

static void release_all(int n, deft_ndarray_t **arrays) {
    for (int i = 0; i < n; i++) deft_ndarray_release(arrays[i]);
}

/* Arrays over the kernel's tensors (sharing their storage), for the host to use. */
static int wrap(int n, const deft_tensor_t *t, deft_ndarray_t **out) {
    for (int i = 0; i < n; i++) {
        deft_tensor_t copy = t[i];
        deft_storage_retain(copy.storage);
        if (deft_ndarray_from_tensor(&copy, &out[i])) {
            deft_storage_release(copy.storage);
            release_all(i, out);
            return -1;
        }
        out[i]->lent = true;
    }
    return 0;
}

static int run_job(job_t *j) {
    deft_ndarray_t *in[3 * DEFT_OP_MAX_OUTPUTS + DEFT_OP_MAX_INPUTS], *out[DEFT_OP_MAX_INPUTS];
    if (wrap(j->nin, j->in, in)) return -1;
    if (wrap(j->nout, j->out, out)) {
        release_all(j->nin, in);
        return -1;
    }
    const char *previous = deft_profiler_set_prefix(j->c->name);
    tl_current = j->c->name, tl_job = j;
    double start = deft_profiling(DEFT_PROF_IMPERATIVE) ? deft_profiler_now() : 0;
    int status = j->c->host.run(j->c->host.user, j->backward, j->nin, in, j->nout, out, true);
    if (start != 0)
        deft_profiler_span("Custom Operators", j->backward ? j->c->backward_name : j->c->name,
                           start, deft_profiler_now());
    if (status != 0 && deft_error_kind() == DEFT_ERR_NONE)
        deft_error(DEFT_ERR_INTERNAL, "the callback failed without a message");
    /* what the callback started on the outputs must be written before the kernel returns */
    for (int k = 0; status == 0 && k < j->nout; k++) status = deft_ndarray_wait_to_write(out[k]);
    tl_current = NULL, tl_job = NULL;
    deft_profiler_set_prefix(previous);
    release_all(j->nin, in);
    release_all(j->nout, out);
    return status;
}

/* The GPUs that n tensors are on, as bits. */
static uint32_t gpus_of(int n, const deft_tensor_t *t) {
    uint32_t gpus = 0;
    for (int i = 0; i < n; i++)
        if (t[i].device.type == DEFT_DEV_GPU && t[i].storage && t[i].storage->data)
            gpus |= 1u << t[i].device.id;
    return gpus;
}

/* The calling thread's stream of each GPU in `gpus` waits for stream `slot`. */
static int join_streams(uint32_t gpus, int slot) {
    for (int id = 0; id < DEFT_MAX_GPUS; id++)
        if ((gpus >> id & 1) && deft_fence_join(id, slot)) return -1;
    return 0;
}

int deft_custom_stream(int device_id, void **out) {
    if (!tl_job)
        return deft_error(DEFT_ERR_VALUE,
                          "no custom operator's forward or backward callback runs on this thread");
    if (device_id < 0 || device_id >= DEFT_MAX_GPUS || !(tl_job->gpus >> device_id & 1))
        return deft_error(DEFT_ERR_VALUE,
                          "device_id is %d, but no array of '%s' is on gpu(%d): the stream is "
                          "for the GPUs the operator's arrays are on",
                          device_id, tl_job->c->name, device_id);
    return deft_device_gpu_backend()->stream(device_id, out);
}

int deft_custom_data(const deft_ndarray_t *arr, void **out) {
    if (!tl_job)
        return deft_error(DEFT_ERR_VALUE,
                          "no custom operator's forward or backward callback runs on this thread");
    if (!arr->lent)
        return deft_error(DEFT_ERR_VALUE,
                          "the array is not one that '%s' was called with: only those are "
                          "ordered by the operator's stream",
                          tl_job->c->name);
    *out = deft_tensor_data(&arr->tensor);
    return 0;
}

static void *callback_thread(void *arg) {
    (void)arg;
    tl_callback_thread = true;
    pthread_setname_np(pthread_self(), "deft custom op");
    pthread_mutex_lock(&pool_lock);
    for (;;) {
        while (!queue_head) {
            idle_threads++;
            pthread_cond_wait(&pool_work, &pool_lock);
            idle_threads--;
        }
        job_t *j = queue_head;
        queue_head = j->next;
        if (!queue_head) queue_tail = NULL;
        pthread_mutex_unlock(&pool_lock);
        deft_error_enter(NULL);
        deft_engine_act_for(j->running); /* waits for the operation itself are refused */
        int slot = j->gpus ? deft_device_gpu_backend()->stream_slot() : -1;
        int status = join_streams(j->gpus, j->worker_slot);
        if (status == 0) status = run_job(j);
        deft_engine_act_for(NULL);
        pthread_mutex_lock(&pool_lock);
        j->callback_slot = slot;
        j->status = status;
        if (status) {
            j->kind = deft_error_kind();
            snprintf(j->message, sizeof j->message, "%s", deft_error_message());
        }
        j->done = true;
        pthread_cond_signal(&j->finished);
    }
    return NULL;
}

/* Hand the job to a callback thread (starting one if none is idle) and wait for it. */
static int run_on_callback_thread(job_t *j) {
    j->running = deft_engine_running();
    j->gpus = gpus_of(j->nin, j->in) | gpus_of(j->nout, j->out);
    j->worker_slot = j->gpus ? deft_device_gpu_backend()->stream_slot() : -1;
    j->callback_slot = -1;
    pthread_cond_init(&j->finished, NULL);
    pthread_mutex_lock(&pool_lock);
    j->next = NULL;
    if (queue_tail)
        queue_tail->next = j;
    else
        queue_head = j;
    queue_tail = j;
    int status = 0;
    if (idle_threads == 0) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, callback_thread, NULL) != 0) status = -1;
        pthread_attr_destroy(&attr);
    } else {
        pthread_cond_signal(&pool_work);
    }
    while (status == 0 && !j->done) pthread_cond_wait(&j->finished, &pool_lock);
    pthread_mutex_unlock(&pool_lock);
    pthread_cond_destroy(&j->finished);
    if (status) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot start a callback thread");
    /* even after a failure: what the callback queued may still write the outputs */
    if (j->callback_slot >= 0 && join_streams(j->gpus, j->callback_slot)) return -1;
    /* named after the custom operator (not its internal _backward_ one): the
     * message says which of its callbacks failed */
    if (j->status) return deft_op_error(&j->c->forward, j->kind, "%s", j->message);
    return 0;
}

/* ---- the two registry operators ---- */

/* Output k as the shape inference callback left it: a shape some array can
 * have (no negative dimension, a byte size that fits) and a dtype. */
static int check_inferred(const deft_desc_t *out, int k) {
    if (out[k].shape.ndim < 0 || out[k].shape.ndim > DEFT_SHAPE_MAX_NDIM ||
        !deft_dtype_valid(out[k].dtype))
        return deft_error(DEFT_ERR_VALUE,
                          "the shape inference callback left output %d without a valid shape "
                          "and dtype",
                          k);
    size_t nbytes;
    if (deft_shape_nbytes(&out[k].shape, deft_dtype_size(out[k].dtype), &nbytes) == 0) return 0;
    char detail[DEFT_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s", deft_error_message());
    return deft_error(DEFT_ERR_VALUE,
                      "the shape inference callback gave output %d an invalid shape: %s", k,
                      detail);
}

static int custom_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                        const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p;
    const custom_op_t *c = op->data;
    for (int k = 0; k < c->nout; k++) out[k] = (deft_desc_t){.shape = {.ndim = -1}};
    /* Messages without an API function, then named after the operator. The
     * function is the caller's: the callback may call API functions, which
     * name themselves. */
    const char *caller = deft_error_swap_function(NULL);
    deft_error_restore(DEFT_ERR_NONE, "");
    int status = c->host.infer(c->host.user, nin, in, c->nout, out);
    for (int k = 0; status == 0 && k < c->nout; k++) status = check_inferred(out, k);
    deft_error_swap_function(caller);
    if (status == 0) {
        *nout = c->nout;
        return 0;
    }
    deft_error_kind_t kind = deft_error_kind();
    char detail[DEFT_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s",
             kind ? deft_error_message() : "the shape inference callback failed without a message");
    return deft_op_error(op, kind ? kind : DEFT_ERR_VALUE, "%s", detail);
}

static int custom_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p;
    job_t j = {.c = op->data, .backward = false, .nin = nin, .nout = nout, .in = in, .out = out};
    return run_on_callback_thread(&j);
}

/* _backward_name: inputs out_grads, inputs, outputs; outputs the inputs' gradients. */
static int backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)p, (void)nin;
    const custom_op_t *c = op->data;
    for (int i = 0; i < c->nin; i++) out[i] = in[c->nout + i];
    *nout = c->nin;
    return 0;
}

static int backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)p;
    job_t j = {.c = op->data, .backward = true, .nin = nin, .nout = nout, .in = in, .out = out};
    return run_on_callback_thread(&j);
}

/* The gradient: one _backward_name node reading the output gradients, the
 * inputs and the outputs; its outputs are the inputs' gradients. */
static int custom_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                           deft_gref_t *in_grads) {
    (void)p, (void)nin;
    const custom_op_t *c = b->op->data;
    deft_gref_t refs[3 * DEFT_OP_MAX_OUTPUTS + DEFT_OP_MAX_INPUTS];
    int n = 0;
    for (int k = 0; k < c->nout; k++) refs[n++] = b->out_grad(b, k);
    for (int i = 0; i < c->nin; i++) refs[n++] = b->input(b, i);
    for (int k = 0; k < c->nout; k++) refs[n++] = b->output(b, k);
    deft_gref_t first = b->apply(b, c->backward_name, n, refs, GRAD_NONE, 0);
    for (int i = 0; i < c->nin; i++) in_grads[i] = (deft_gref_t){first.node, i};
    return 0;
}

/* ---- registration ---- */

/* _backward_name reads the output's gradient, the inputs and the output. */
static int backward_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p;
    return num_inputs - 2;
}

static const char **input_names(const char *prefix, int n) {
    const char **names = calloc((size_t)n + 1, sizeof *names);
    for (int i = 0; names && i < n; i++) {
        char text[32];
        snprintf(text, sizeof text, "%s%d", prefix, i);
        if (!(names[i] = strdup(text))) return NULL;
    }
    return names;
}

static void free_names(const char **names) {
    for (int i = 0; names && names[i]; i++) free((char *)names[i]);
    free(names);
}

/* A registration that failed before its operators were published. */
static void free_custom(custom_op_t *c) {
    if (!c) return;
    free(c->name), free(c->backward_name);
    free_names(c->forward_inputs), free_names(c->backward_inputs);
    free(c);
}

int deft_custom_register(const char *name, int num_inputs, int num_outputs,
                         const deft_custom_host_t *host) {
    if (strstr(name, "::"))
        return deft_error(DEFT_ERR_VALUE,
                          "the name '%s' contains '::', which the profiler uses to name the "
                          "operators a custom operator calls",
                          name);
    if (!name[0] || num_inputs < 1 || num_inputs + 2 > DEFT_OP_MAX_INPUTS || num_outputs != 1)
        return deft_error(DEFT_ERR_VALUE,
                          "'%s' has %d inputs and %d outputs; custom operators have 1 to %d "
                          "inputs and one output",
                          name, num_inputs, num_outputs, DEFT_OP_MAX_INPUTS - 2);
    size_t len = strlen(name) + sizeof "_backward_";
    char backward_name[256];
    snprintf(backward_name, sizeof backward_name, "_backward_%s", name);
    if (deft_registry_find(name) || deft_registry_find(backward_name))
        return deft_error(DEFT_ERR_VALUE, "an operator named '%s' exists already",
                          deft_registry_find(name) ? name : backward_name);
    custom_op_t *c = calloc(1, sizeof *c);
    if (c) c->name = strdup(name), c->backward_name = malloc(len);
    if (c && c->backward_name) snprintf(c->backward_name, len, "_backward_%s", name);
    if (c) c->forward_inputs = input_names("data", num_inputs);
    if (c) c->backward_inputs = input_names("arg", 2 * num_outputs + num_inputs);
    if (!c || !c->name || !c->backward_name || !c->forward_inputs || !c->backward_inputs) {
        free_custom(c);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register '%s'", name);
    }
    c->nin = num_inputs, c->nout = num_outputs, c->host = *host;
    c->forward = (deft_op_t){.name = c->name,
                             .description = "a custom operator (host-language callbacks)",
                             .input_names = c->forward_inputs,
                             .min_inputs = num_inputs,
                             .max_inputs = num_inputs,
                             .infer = custom_infer,
                             .forward = custom_forward,
                             .forward_gpu = DEFT_GPU(custom_forward),
                             .inplace_input = -1,
                             .data = c,
                             .nondeterministic = true, /* a callback may do anything */
                             .blocking = true,
                             .gradient = host->has_backward ? custom_gradient : NULL};
    c->backward = (deft_op_t){.name = c->backward_name,
                              .num_outputs = backward_outputs,
                              .description = "the gradient of a custom operator",
                              .input_names = c->backward_inputs,
                              .min_inputs = 2 * num_outputs + num_inputs,
                              .max_inputs = 2 * num_outputs + num_inputs,
                              .infer = backward_infer,
                              .forward = backward_forward,
                              .forward_gpu = DEFT_GPU(backward_forward),
                              .inplace_input = -1,
                              .data = c,
                              .nondeterministic = true,
                              .blocking = true};
    /* Operators live as long as the process (graphs and handles may refer to them). */
    if (deft_registry_add(&c->forward)) {
        free_custom(c);
        return -1;
    }
    if (host->has_backward && deft_registry_add(&c->backward)) return -1; /* forward stays */
    return 0;
}
