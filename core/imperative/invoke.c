/*
 * Imperative invoke. Everything that can be checked without data is
 * checked on the calling thread and reported at once: parameters, input
 * counts, shapes and dtypes. Outputs are allocated then too, so the caller
 * gets handles with their shapes immediately. The kernel itself is pushed
 * to the engine, reading the inputs' variables and writing the outputs'.
 */
#include "core/imperative/invoke.h"

#include "core/base/fence.h"
#include "core/base/profiler.h"
#include "core/imperative/autograd.h"
#include "core/imperative/custom_op.h"
#include "core/imperative/deferred.h"
#include "core/imperative/memo.h"
#include "core/imperative/view.h"
#include "core/op/random.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kernel calls moving fewer bytes than this run on the calling thread when
 * ready: cheaper than waking a worker (see bench/bench_engine.c). Larger is
 * not better: a chain of calls that ends in a wait gains from running inline
 * (ten calls on 128 KiB: 13 us inline, 29 us queued), but a host thread that
 * is the bottleneck (Python) loses the overlap: at 256 KiB the demo MLP's
 * eager step was about 10% slower (alternating runs on 2 cores), its
 * optimizer updates having moved onto the Python thread. */
#define INLINE_BYTES (64 * 1024)

typedef struct invoke_call {
    const deft_op_t *op;
    int nin, nout;
    bool on_heap;
    bool training; /* the caller's training flag when it made the call */
    bool views;    /* some array is a strided view (view.h): gather and scatter */
    bool keyed;    /* `weights` vouches for input 1 (op.h's keys_weights) */
    deft_vouched_t weights;
    deft_device_t device; /* where the kernel runs: the outputs' device */
    uint64_t fresh;       /* bit k: out[k] was made by this call (nobody else sees it yet) */
    deft_ndarray_t **in, **out, **final; /* final[k]: where a staged out[k] is copied */
    const deft_param_value_t *params;    /* the parse cache's (inline) or a copy (queued) */
} invoke_call_t;

static int check_given_output(const deft_op_t *op, int k, const deft_ndarray_t *arr,
                              const deft_desc_t *want) {
    const deft_tensor_t *t = &arr->tensor;
    if (deft_shape_equal(&t->shape, &want->shape) && t->dtype == want->dtype) return 0;
    char have_s[DEFT_SHAPE_STR_MAX], want_s[DEFT_SHAPE_STR_MAX];
    return deft_op_error(
        op, DEFT_ERR_VALUE, "output %d has shape %s and dtype %s, expected %s %s", k,
        deft_shape_format(&t->shape, have_s, sizeof have_s), deft_dtype_name(t->dtype),
        deft_shape_format(&want->shape, want_s, sizeof want_s), deft_dtype_name(want->dtype));
}

/* A given output sharing storage with an input the kernel does not expect to be
 * overwritten: compute into a fresh array, then copy. */
static bool needs_staging(const deft_op_t *op, int k, const deft_ndarray_t *target, int nin,
                          deft_ndarray_t *const *in) {
    for (int i = 0; i < nin; i++) {
        if (in[i]->tensor.storage != target->tensor.storage) continue;
        bool sanctioned =
            k == 0 && i == op->inplace_input && in[i]->tensor.offset == target->tensor.offset;
        if (!sanctioned) return true;
    }
    return false;
}

static size_t call_size(int nin, int nout, int nparams) {
    size_t arrays = (size_t)(nin + 2 * nout) * sizeof(deft_ndarray_t *);
    return sizeof(invoke_call_t) + arrays + (size_t)nparams * sizeof(deft_param_value_t);
}

/* Lay a call out in `memory` (call_size bytes); arrays are filled by the caller. */
static invoke_call_t *call_init(void *memory, bool on_heap, const deft_op_t *op, int nin, int nout,
                                int nparams) {
    invoke_call_t *call = memory;
    call->op = op;
    call->nin = nin;
    call->nout = nout;
    call->on_heap = on_heap;
    call->fresh = 0;
    call->keyed = false;
    call->params = (deft_param_value_t *)(call + 1);
    call->in = (deft_ndarray_t **)((deft_param_value_t *)(call + 1) + nparams);
    call->out = call->in + nin;
    call->final = call->out + nout;
    return call;
}

/* A heap copy of a call that owns a reference to every array, for the engine's queue. */
static invoke_call_t *call_copy_retained(const invoke_call_t *src, int nparams) {
    size_t size = call_size(src->nin, src->nout, nparams);
    bool heap = size > DEFT_RECORD_SIZE;
    void *memory = heap ? malloc(size) : deft_record_alloc();
    if (!memory) return NULL;
    invoke_call_t *call = call_init(memory, heap, src->op, src->nin, src->nout, nparams);
    call->device = src->device;
    call->training = src->training;
    call->views = src->views;
    call->keyed = src->keyed;
    call->weights = src->weights;
    memcpy((deft_param_value_t *)(call + 1), src->params, (size_t)nparams * sizeof *src->params);
    for (int i = 0; i < src->nin; i++) call->in[i] = deft_ndarray_retain(src->in[i]);
    for (int k = 0; k < src->nout; k++) {
        call->out[k] = deft_ndarray_retain(src->out[k]);
        call->final[k] = src->final[k] ? deft_ndarray_retain(src->final[k]) : NULL;
    }
    return call;
}

static void call_free(void *arg) {
    invoke_call_t *call = arg;
    for (int i = 0; i < call->nin; i++) deft_ndarray_release(call->in[i]);
    for (int k = 0; k < call->nout; k++) {
        deft_ndarray_release(call->out[k]);
        deft_ndarray_release(call->final[k]);
    }
    if (call->on_heap)
        free(call);
    else
        deft_record_free(call);
}

/* The tensors of n arrays side by side, as kernels take them: one array's
 * own (most calls, no copying), else copies in `room`. */
static const deft_tensor_t *tensors_of(deft_ndarray_t *const *arrays, int n, deft_tensor_t *room) {
    if (n == 1) return &arrays[0]->tensor;
    for (int i = 0; i < n; i++) room[i] = arrays[i]->tensor;
    return room;
}

/* The operator's kernel for the call's device, in the call's training mode. */
static int call_forward(const invoke_call_t *call, const deft_tensor_t *in_t,
                        const deft_tensor_t *out_t) {
    bool was_training;
    deft_op_set_training(call->training, &was_training);
    int status;
    if (call->device.type == DEFT_DEV_GPU) {
        void *timer = deft_profiling(DEFT_PROF_IMPERATIVE)
                          ? deft_device_timer_start(call->device, call->op->name)
                          : NULL;
        status = call->op->forward_gpu(call->op, call->params, call->nin, in_t, call->nout, out_t);
        if (timer) deft_device_timer_stop(call->device, timer);
    } else if (call->keyed) {
        const deft_vouched_t *prev;
        int prev_n;
        deft_op_set_vouched(&call->weights, 1, &prev, &prev_n);
        status = call->op->forward(call->op, call->params, call->nin, in_t, call->nout, out_t);
        deft_op_set_vouched(prev, prev_n, NULL, NULL);
    } else {
        status = call->op->forward(call->op, call->params, call->nin, in_t, call->nout, out_t);
    }
    deft_op_set_training(was_training, NULL);
    return status;
}

/* Strided views read the root's elements into their buffers before the
 * kernel, and written ones (outputs, updated inputs) put them back after. */
static void gather_views(const invoke_call_t *call) {
    for (int i = 0; i < call->nin; i++)
        if (deft_ndarray_is_strided(call->in[i])) deft_view_gather(call->in[i]);
}

static void scatter_views(const invoke_call_t *call) {
    for (int i = 0; deft_op_mutates_any(call->op) && i < call->nin; i++)
        if (deft_ndarray_is_strided(call->in[i]) && deft_op_mutates(call->op, call->nin, i))
            deft_view_scatter(call->in[i]);
    for (int k = 0; k < call->nout; k++) {
        const deft_ndarray_t *target = call->final[k] ? call->final[k] : call->out[k];
        if (deft_ndarray_is_strided(target)) deft_view_scatter(target);
    }
}

static int call_kernel(void *arg) {
    const invoke_call_t *call = arg;
    deft_tensor_t in_room[DEFT_OP_MAX_INPUTS], out_room[DEFT_OP_MAX_OUTPUTS];
    const deft_tensor_t *in_t = tensors_of(call->in, call->nin, in_room);
    const deft_tensor_t *out_t = tensors_of(call->out, call->nout, out_room);
    if (call->views) gather_views(call);
    if (call_forward(call, in_t, out_t)) return -1;
    for (int k = 0; k < call->nout; k++) {
        if (!call->final[k]) continue;
        const deft_tensor_t *final = &call->final[k]->tensor;
        if (deft_device_copy(deft_tensor_data(final), final->device, deft_tensor_data(&out_t[k]),
                             out_t[k].device, deft_tensor_nbytes(&out_t[k])))
            return -1;
    }
    if (call->views) scatter_views(call);
    return 0;
}

/* Key the weights of a call in predict mode whose kernel keeps what it derives
 * from them (op.h: keys_weights), as a graph run keys its bound inputs
 * (cached_invoke.c): at push time, in the caller's order of calls, so a write
 * queued later bumps the version only after this. Not for weights that the
 * call writes, that are an output's storage, a strided view, or writable
 * outside deft. Eager ResNet-style inference then packs each layer's weights
 * once, not on every call. */
static void key_weights(invoke_call_t *call) {
    if (!call->op->keys_weights || call->training || call->views || call->nin < 2) return;
    deft_storage_t *s = call->in[1]->tensor.storage;
    if (!s || atomic_load(&s->shared) || deft_op_mutates(call->op, call->nin, 1)) return;
    for (int k = 0; k < call->nout; k++)
        if (call->out[k]->tensor.storage == s) return;
    call->weights =
        (deft_vouched_t){s, {s->id, atomic_load_explicit(&s->version, memory_order_relaxed)}};
    call->keyed = true;
}

/* What a call touches, for the GPU fences: its inputs (read, or written when
 * it mutates them), its outputs, and where staged outputs land. */
static int call_accesses(const invoke_call_t *call, deft_access_t *access) {
    int n = 0;
    for (int i = 0; i < call->nin; i++) {
        bool mutated = deft_op_mutates(call->op, call->nin, i);
        access[n++] = (deft_access_t){call->in[i]->tensor.storage, mutated, DEFT_VALUE_UPDATE};
    }
    for (int k = 0; k < call->nout; k++) {
        access[n++] = (deft_access_t){call->out[k]->tensor.storage, true, DEFT_VALUE_NEW};
        if (call->final[k])
            access[n++] = (deft_access_t){call->final[k]->tensor.storage, true, DEFT_VALUE_NEW};
    }
    return n;
}

static int call_run(void *arg) {
    const invoke_call_t *call = arg;
    bool on_gpu = call->device.type == DEFT_DEV_GPU ||
                  (call->nin > 0 && call->in[0]->tensor.device.type == DEFT_DEV_GPU);
    if (!on_gpu) return call_kernel(arg);
    deft_access_t access[DEFT_OP_MAX_INPUTS + 2 * DEFT_OP_MAX_OUTPUTS];
    return deft_fence_run(access, call_accesses(call, access), call_kernel, arg);
}

/* The engine description of a call: it reads the inputs and writes the outputs (and `stream`,
 * the random stream's variable, when not NULL). */
static void describe(invoke_call_t *call, deft_var_t *stream, deft_var_t **reads,
                     deft_var_t **writes, deft_engine_op_desc_t *desc) {
    const deft_op_t *op = call->op;
    int nreads = 0, nwrites = 0;
    size_t bytes = 0;
    for (int i = 0; i < call->nin; i++) {
        if (deft_op_mutates(op, call->nin, i))
            writes[nwrites++] = call->in[i]->var;
        else
            reads[nreads++] = call->in[i]->var;
        bytes += deft_tensor_nbytes(&call->in[i]->tensor);
    }
    if (stream) writes[nwrites++] = stream; /* draws in push order (random.h) */
    /* Fresh outputs go last (engine.h). Usually every output is fresh, and none staged. */
    int fresh = 0;
    if (call->nout < 64 && call->fresh == (1ull << call->nout) - 1) {
        for (int k = 0; k < call->nout; k++) {
            writes[nwrites++] = call->out[k]->var;
            bytes += deft_tensor_nbytes(&call->out[k]->tensor);
        }
        fresh = call->nout;
    } else {
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < call->nout; k++) {
                bool is_fresh = k < 64 && (call->fresh & (1ull << k));
                if (is_fresh != (pass == 1)) continue;
                writes[nwrites++] = (call->final[k] ? call->final[k] : call->out[k])->var;
                bytes += deft_tensor_nbytes(&call->out[k]->tensor);
                fresh += is_fresh;
            }
    }
    /* a GPU kernel only queues its work: always cheap for the caller's thread */
    bool cheap = bytes < INLINE_BYTES || call->device.type == DEFT_DEV_GPU;
    /* Field by field: a compound literal first zeroes the whole struct (rep stos,
     * dear on every call), then writes it again. A new field must be set here. */
    _Static_assert(sizeof(void *) != 8 || sizeof(deft_engine_op_desc_t) == 104,
                   "describe sets every field");
    desc->fn = call_run;
    desc->free_ctx = NULL;
    desc->ctx = call;
    desc->reads = reads;
    desc->num_reads = nreads;
    desc->writes = writes;
    desc->num_writes = nwrites;
    desc->priority = 0;
    desc->name = op->name;
    desc->origin = "DeftImperativeInvoke";
    /* custom operators wait for a callback thread: never on the caller's thread;
     * what a callback calls runs at once on its thread */
    desc->small = !op->blocking && (cheap || deft_custom_on_callback_thread());
    desc->device = call->device;
    desc->never_block = false;
    desc->num_fresh_writes = fresh;
    desc->bytes = bytes;
}

/*
 * Run a call whose arrays are borrowed (`call` may be on the stack): at once
 * when it is small and its arrays are free, which is the common case and
 * costs no allocation; otherwise as a queued copy owning its references.
 */
static int submit(invoke_call_t *call, int nparams) {
    deft_var_t *reads[DEFT_OP_MAX_INPUTS], *writes[DEFT_OP_MAX_INPUTS + DEFT_OP_MAX_OUTPUTS + 1];
    deft_engine_op_desc_t desc;
    deft_var_t *stream = call->op->nondeterministic ? deft_random_stream_var() : NULL;
    if (call->op->nondeterministic && !stream) return -1;
    describe(call, stream, reads, writes, &desc);
    if (desc.small && deft_engine_run_now(&desc) == 0) return 0;
    invoke_call_t *queued = call_copy_retained(call, nparams);
    if (!queued) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an operator call");
    desc.ctx = queued;
    desc.free_ctx = call_free;
    return deft_engine_push(&desc);
}

/* A tensor begins as a description does: its shape, then its dtype. */
_Static_assert(offsetof(deft_tensor_t, shape) == offsetof(deft_desc_t, shape) &&
                   offsetof(deft_tensor_t, dtype) == offsetof(deft_desc_t, dtype) &&
                   sizeof(deft_desc_t) <= sizeof(deft_tensor_t),
               "descriptions are copied from tensors whole");

/* The input's description, copied whole (its padding from the tensor's next field): written
 * field by field, its last 16 bytes were two stores that the infer function's 16-byte load of
 * them could not forward from, a stall of 2% of recording a call (perf). */
static inline void describe_input(const deft_ndarray_t *arr, deft_desc_t *desc) {
    memcpy(desc, &arr->tensor, sizeof *desc);
}

static int check_inputs(const deft_op_t *op, int nin, deft_ndarray_t *const *in,
                        deft_desc_t *desc) {
    if (nin < op->min_inputs || nin > op->max_inputs) return deft_op_input_count_error(op, nin);
    for (int i = 0; i < nin; i++) {
        describe_input(in[i], &desc[i]);
        if (i > 0 && !deft_device_equal(in[i]->tensor.device, in[0]->tensor.device))
            return deft_op_error(op, DEFT_ERR_VALUE, "input %d is on another device than input 0",
                                 i);
    }
    if (nin > 0 && in[0]->tensor.device.type == DEFT_DEV_GPU && !op->forward_gpu)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "has no GPU kernel (the inputs are on gpu(%d)); copy them to the CPU "
                             "first",
                             in[0]->tensor.device.id);
    return 0;
}

/* Fill call->out/final for output k with the given array (borrowed) or a new
 * one (owned by the caller of deft_invoke from here on). */
static int prepare_output(invoke_call_t *call, int k, deft_ndarray_t *given,
                          const deft_desc_t *want, deft_device_t device) {
    const deft_op_t *op = call->op;
    call->out[k] = call->final[k] = NULL;
    if (given) {
        if (check_given_output(op, k, given, want)) return -1;
        if (!op->any_device && !deft_device_equal(given->tensor.device, device))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "output %d is on another device than the "
                                 "inputs",
                                 k);
        if (!needs_staging(op, k, given, call->nin, call->in)) {
            call->out[k] = given;
            return 0;
        }
        call->final[k] = given;
    } else if (k < 64) {
        call->fresh |= 1ull << k;
    }
    return deft_ndarray_new(&want->shape, want->dtype, device, false, &call->out[k]);
}

/* Release the arrays this call created for outputs [0, n): new outputs on
 * failure, staging buffers always. */
static void release_created(invoke_call_t *call, int n, deft_ndarray_t **given, bool failed) {
    for (int k = 0; k < n; k++) {
        bool created = call->out[k] && call->out[k] != given[k];
        bool staging = call->final[k] != NULL;
        if (created && (failed || staging)) deft_ndarray_release(call->out[k]);
    }
}

/* Whether any output went through a staging buffer (release_created has work). */
static bool staged(const invoke_call_t *call) {
    for (int k = 0; k < call->nout; k++)
        if (call->final[k]) return true;
    return false;
}

/* Lazy arrays have no value to overwrite: as given outputs or updated inputs they are errors. */
static int check_not_lazy(const deft_op_t *op, int nin, deft_ndarray_t *const *in, int nout,
                          deft_ndarray_t *const *out) {
    int k = deft_deferred_find_lazy(nout, out);
    if (k >= 0)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "output %d is a lazy array (deferred compute): its value is the "
                             "result of a recorded operation and cannot be written",
                             k);
    for (int i = 0; deft_op_mutates_any(op) && i < nin; i++)
        if (deft_op_mutates(op, nin, i) && deft_ndarray_is_lazy(in[i]))
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d is a lazy array (deferred compute), which cannot be "
                                 "updated in place",
                                 i);
    return 0;
}

/* Output k's size does not fit: the error, its message naming the output. Called again
 * without the function's name, so the message says it once. */
__attribute__((cold, noinline)) static int output_size_error(const deft_op_t *op, int k,
                                                             const deft_desc_t *out) {
    size_t nbytes;
    const char *caller = deft_error_swap_function(NULL);
    deft_shape_nbytes(&out->shape, deft_dtype_size(out->dtype), &nbytes);
    deft_error_swap_function(caller);
    char detail[DEFT_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s", deft_error_message());
    return deft_op_error(op, DEFT_ERR_VALUE, "output %d: %s", k, detail);
}

/* Whether a description's byte size surely fits: fewer than 2^32 elements (of at
 * most 16 bytes), counted without overflow. The usual shape passes this, which
 * costs a tenth of deft_shape_nbytes's checks; those measure the others. */
static inline bool surely_fits(const deft_desc_t *d) {
    uint64_t count = 1;
    for (int i = 0; i < d->shape.ndim; i++) {
        uint64_t dim = (uint64_t)d->shape.dims[i]; /* a negative one is huge */
        if (dim > UINT32_MAX || (count *= dim) > UINT32_MAX) return false;
    }
    return true;
}

/* Output k's byte size, measured: -1 with the error when it does not fit. Apart, so that
 * the usual check keeps no frame for the message. */
__attribute__((noinline)) static int check_output_size(const deft_op_t *op, int k,
                                                       const deft_desc_t *out) {
    size_t nbytes;
    if (deft_shape_nbytes(&out->shape, deft_dtype_size(out->dtype), &nbytes))
        return output_size_error(op, k, out);
    return 0;
}

/* Every output's byte size fits (as deft_ndarray_new would check). */
static inline int check_output_sizes(const deft_op_t *op, int nout, const deft_desc_t *out) {
    for (int k = 0; k < nout; k++)
        if (!surely_fits(&out[k]) && check_output_size(op, k, &out[k])) return -1;
    return 0;
}

static bool none_given(int nout, deft_ndarray_t *const *out) {
    for (int k = 0; k < nout; k++)
        if (out[k]) return false;
    return true;
}

/* A call (writing no existing array) whose result depends on nothing but its
 * inputs and parameters, and not recorded (its history must be its own). */
static bool memoizable(const deft_op_t *op, const deft_autograd_call_t *grad) {
    return !op->nondeterministic && !grad->record;
}

/* Given outputs and updated inputs change: memoised results of them are stale. */
static void note_writes(const deft_op_t *op, int nin, deft_ndarray_t *const *in, int nout,
                        deft_ndarray_t *const *given) {
    for (int k = 0; k < nout; k++)
        if (given[k]) deft_ndarray_touch(given[k]);
    for (int i = 0; deft_op_mutates_any(op) && i < nin; i++)
        if (deft_op_mutates(op, nin, i)) deft_ndarray_touch(in[i]);
}

/* The caller gets the visible outputs; hidden ones (made in `all`, the
 * caller's `out` being too short for them) are let go: the recorded node
 * and a queued kernel keep references of their own. */
static int hand_over(deft_ndarray_t **all, deft_ndarray_t **out, int visible, int produced,
                     int *nout) {
    if (all != out) {
        for (int k = 0; k < visible; k++) out[k] = all[k];
        for (int k = visible; k < produced; k++) deft_ndarray_release(all[k]);
    }
    *nout = visible;
    return 0;
}

/* A call reading strided views that autograd or deferred compute records:
 * it reads dense copies, since what a recording keeps must not follow later
 * writes to the viewed array (view.h). Views cannot be its outputs. */
static int invoke_on_dense(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in,
                           int *nout, deft_ndarray_t **caller_out, int nparams,
                           const char *const *keys, const char *const *vals) {
    deft_ndarray_t *dense[DEFT_OP_MAX_INPUTS];
    if (deft_check_no_views(*nout, caller_out, "outputs", "a recorded call cannot write into it") ||
        deft_dense_inputs(nin, in, dense))
        return -1;
    int status = deft_invoke(entry, nin, dense, nout, caller_out, nparams, keys, vals);
    deft_release_dense(nin, in, dense);
    return status;
}

int deft_invoke(const deft_op_entry_t *entry, int nin, deft_ndarray_t *const *in, int *nout,
                deft_ndarray_t **caller_out, int nparams, const char *const *keys,
                const char *const *vals) {
    const deft_op_t *op = entry->op;
    const deft_params_t *params;
    deft_desc_t in_desc[DEFT_OP_MAX_INPUTS], out_desc[DEFT_OP_MAX_OUTPUTS];
    int produced = 0;
    if (op->graph_only)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "is made by graph passes and runs only inside a graph executor");
    if (check_inputs(op, nin, in, in_desc) ||
        deft_op_parse_params(entry, nparams, keys, vals, &params) ||
        op->infer(op, params->v, nin, in_desc, &produced, out_desc))
        return -1;
    int visible = deft_op_num_visible_outputs(op, params->v, produced);
    if (visible > *nout) { /* the caller learns the count it needs, to call again */
        deft_op_error(op, DEFT_ERR_VALUE, "produces %d outputs, but there is room for %d", visible,
                      *nout);
        *nout = visible;
        return -1;
    }
    /* Hidden outputs are never given: the call makes every one of them. */
    deft_ndarray_t *all[DEFT_OP_MAX_OUTPUTS], **out = caller_out;
    if (visible < produced) {
        for (int k = 0; k < produced; k++) all[k] = k < visible ? caller_out[k] : NULL;
        out = all;
    }
    bool views = deft_any_strided(nin, in) || deft_any_strided(visible, caller_out);
    if (views && (deft_deferred_enabled() || deft_autograd_recording()))
        return invoke_on_dense(entry, nin, in, nout, caller_out, nparams, keys, vals);
    if (deft_deferred_enabled()) {
        /* Nothing is allocated now: the sizes an allocation would check are checked here. */
        if (check_output_sizes(op, produced, out_desc)) return -1;
        if (deft_deferred_record(entry, params->v, nin, in, produced, out_desc, nparams, keys, vals,
                                 out))
            return -1;
        return hand_over(out, caller_out, visible, produced, nout);
    }
    /* Given outputs and updated inputs are written: the checks and bookkeeping that only
     * writes need are skipped for the usual call, which makes its outputs. */
    bool writes = deft_op_mutates_any(op) || !none_given(produced, out);
    if ((writes && check_not_lazy(op, nin, in, produced, out)) || deft_deferred_compute(nin, in))
        return -1;
    deft_autograd_call_t grad = {0};
    if (deft_autograd_recording() &&
        deft_autograd_plan(entry, params->v, nin, in, produced, out, nparams, keys, vals, &grad))
        return -1;
    bool memo = deft_memo_enabled() && !writes && !views && memoizable(op, &grad);
    if (memo && deft_memo_lookup(entry, nin, in, nparams, keys, vals, produced, out))
        return hand_over(out, caller_out, visible, produced, nout);

    /* The call lives on the stack; submit() copies it only if it must wait. */
    _Alignas(16) char memory[sizeof(invoke_call_t) +
                             (DEFT_OP_MAX_INPUTS + 2 * DEFT_OP_MAX_OUTPUTS) * sizeof(void *)];
    /* Parameters stay in the parse cache while the call runs here; a queued copy copies them. */
    invoke_call_t *call = call_init(memory, false, op, nin, produced, 0);
    call->params = params->v;
    call->training = deft_op_training();
    call->views = views;
    call->in = (deft_ndarray_t **)in; /* borrowed, as the call is; a queued copy copies them */
    deft_device_t device = nin ? in[0]->tensor.device : deft_device_cpu();
    if (op->output_device && op->output_device(op, params->v, &device)) return -1;
    call->device = device;
    for (int k = 0; k < produced; k++) {
        if (prepare_output(call, k, out[k], &out_desc[k], device)) {
            release_created(call, k + 1, out, true);
            return -1;
        }
    }
    key_weights(call);
    if (submit(call, entry->num_params)) {
        release_created(call, produced, out, true);
        return -1;
    }
    /* Before recording: saved values see the new version. */
    if (writes) note_writes(op, nin, in, produced, out);
    /* The arrays the caller gets: the call's outputs, unless some went through staging. */
    bool was_staged = writes && staged(call);
    deft_ndarray_t *staged_results[DEFT_OP_MAX_OUTPUTS], **results = call->out;
    if (was_staged) {
        results = staged_results;
        for (int k = 0; k < produced; k++) results[k] = out[k] ? out[k] : call->out[k];
    }
    if (grad.record &&
        deft_autograd_record(&grad, entry, params->v, nin, in, produced, out_desc, nparams, keys,
                             vals, results, none_given(produced, out))) {
        release_created(call, produced, out, true);
        return -1;
    }
    if (was_staged) release_created(call, produced, out, false);
    if (memo) deft_memo_insert(entry, nin, in, nparams, keys, vals, produced, results);
    for (int k = 0; k < produced; k++) out[k] = results[k];
    return hand_over(out, caller_out, visible, produced, nout);
}
