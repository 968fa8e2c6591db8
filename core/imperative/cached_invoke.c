/*
 * An executor run on arrays: one engine operation that reads the inputs,
 * writes the outputs, the auxiliary states and the plan's arenas, and walks
 * the graph (core/graph/executor.h) on the arrays' tensors when its turn
 * comes. The graph layer knows tensors and plans; this file knows arrays,
 * their engine variables and the contents a run vouches for.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/fence.h"
#include "core/imperative/cached_call.h"
#include "core/op/random.h"
#include "core/op/op.h"

/* Runs with at most this many inputs and outputs (most graphs) keep their
 * per-run lists on the stack; larger ones take them from the heap. */
#define RUN_INLINE 16

typedef struct run {
    deft_cached_plan_t *plan; /* held: keeps the executor and the arenas */
    deft_cached_op_t *op;     /* the plan's */
    int nin, nout;
    deft_ndarray_t **arrays; /* inputs, then outputs; retained; allocated with the run */
    bool training;           /* the caller's training flag when it asked for the run */
    /* The inputs whose contents the run vouches for (op.h), keyed when it was
     * pushed; allocated with the run. */
    deft_vouched_t *vouched;
    int num_vouched;
} run_t;

static const deft_tensor_t *array_tensor(const void *list, int i) {
    return &((deft_ndarray_t *const *)list)[i]->tensor;
}

static int run_arrays(void *arg) {
    const run_t *r = arg;
    const deft_vouched_t *prev;
    int prev_n;
    deft_op_set_vouched(r->vouched, r->num_vouched, &prev, &prev_n);
    int status = deft_cached_plan_run(r->plan, r->nin, r->arrays, r->nout, r->arrays + r->nin,
                                      array_tensor, r->training);
    deft_op_set_vouched(prev, prev_n, NULL, NULL);
    return status;
}

/* Key the inputs nothing can write unseen while the run waits or runs: not
 * written by the graph, not an output's storage, not writable outside deft.
 * At push time, in the caller's order of calls: a write queued later bumps
 * the version only after this (and runs after the run). */
static void vouch_inputs(run_t *r) {
    r->num_vouched = 0;
    for (int i = 0; i < r->nin; i++) {
        deft_storage_t *s = r->arrays[i]->tensor.storage;
        bool safe = s && !deft_cached_op_input_written(r->op, i) && !atomic_load(&s->shared);
        for (int o = 0; safe && o < r->nout; o++) safe = r->arrays[r->nin + o]->tensor.storage != s;
        if (safe)
            r->vouched[r->num_vouched++] = (deft_vouched_t){
                s, {s->id, atomic_load_explicit(&s->version, memory_order_relaxed)}};
    }
}

/* Inputs (read, or written when the graph writes them), outputs and arenas. */
static int run_accesses(const run_t *r, deft_access_t *access) {
    int n = 0;
    for (int i = 0; i < r->nin; i++)
        access[n++] = (deft_access_t){r->arrays[i]->tensor.storage,
                                      deft_cached_op_input_written(r->op, i), DEFT_VALUE_UPDATE};
    for (int o = 0; o < r->nout; o++)
        access[n++] = (deft_access_t){r->arrays[r->nin + o]->tensor.storage, true, DEFT_VALUE_NEW};
    for (int s = 0; s < DEFT_DEVICE_SLOTS; s++)
        access[n++] = (deft_access_t){deft_cached_plan_arena(r->plan, s), true, DEFT_VALUE_NEW};
    return n;
}

static int run_graph(void *arg) {
    if (!deft_storage_gpu_made()) return run_arrays(arg);
    const run_t *r = arg;
    deft_access_t room[2 * RUN_INLINE + DEFT_DEVICE_SLOTS];
    size_t most = (size_t)r->nin + (size_t)r->nout + DEFT_DEVICE_SLOTS;
    deft_access_t *access =
        most <= sizeof room / sizeof room[0] ? room : malloc(most * sizeof *access);
    if (!access)
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph run of %d inputs",
                          r->nin);
    int n = run_accesses(r, access);
    int status = deft_fence_any_gpu(access, n) ? deft_fence_run(access, n, run_arrays, arg)
                                               : run_arrays(arg);
    if (access != room) free(access);
    return status;
}

static void free_run(void *arg) {
    run_t *r = arg;
    for (int i = 0; i < r->nin + r->nout; i++) deft_ndarray_release(r->arrays[i]);
    deft_cached_plan_release(r->plan);
    free(r);
}

/* The outputs: the caller's where given (checked against the plan), else new arrays. */
static int prepare_outputs(run_t *r, deft_ndarray_t **out) {
    for (int o = 0; o < r->nout; o++) {
        deft_device_t dev;
        deft_desc_t want = deft_cached_plan_output(r->plan, o, &dev);
        deft_ndarray_t *given = out[o];
        if (given && (!deft_shape_equal(&given->tensor.shape, &want.shape) ||
                      given->tensor.dtype != want.dtype)) {
            char have[DEFT_SHAPE_STR_MAX], expect[DEFT_SHAPE_STR_MAX];
            return deft_error(DEFT_ERR_VALUE, "output %d has shape %s and dtype %s, expected %s %s",
                              o, deft_shape_format(&given->tensor.shape, have, sizeof have),
                              deft_dtype_name(given->tensor.dtype),
                              deft_shape_format(&want.shape, expect, sizeof expect),
                              deft_dtype_name(want.dtype));
        }
        if (given)
            r->arrays[r->nin + o] = deft_ndarray_retain(given);
        else if (deft_ndarray_new(&want.shape, want.dtype, dev, false, &r->arrays[r->nin + o]))
            return -1;
    }
    return 0;
}

/* A run of op on inputs `in`, holding its plan and the inputs. */
static int new_run(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, run_t **out) {
    deft_cached_plan_t *plan;
    if (deft_cached_op_acquire(op, nin, in, array_tensor, &plan)) return -1;
    int nout = deft_cached_op_num_outputs(op);
    /* one allocation: the run, then its arrays */
    size_t arrays = ((size_t)nin + (size_t)nout + 1) * sizeof(deft_ndarray_t *);
    /* malloc: glibc's calloc takes no thread cache; the arrays are zeroed below (a
     * failed run releases them all), the run is set whole and the vouched are written */
    run_t *r = malloc(sizeof *r + arrays + (size_t)nin * sizeof(deft_vouched_t));
    if (!r) {
        deft_cached_plan_release(plan);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an executor run");
    }
    *r = (run_t){plan,
                 op,
                 nin,
                 nout,
                 (deft_ndarray_t **)(r + 1),
                 deft_op_training(),
                 (deft_vouched_t *)((char *)(r + 1) + arrays),
                 0};
    memset(r->arrays, 0, arrays);
    for (int i = 0; i < nin; i++) r->arrays[i] = deft_ndarray_retain(in[i]);
    *out = r;
    return 0;
}

/* Push run r (consumed) reading and writing the arrays' variables; out[o]
 * receives the outputs created. */
static int push_run(run_t *r, deft_ndarray_t *const *in, deft_ndarray_t **out) {
    deft_cached_op_t *op = r->op;
    int nin = r->nin, nout = r->nout;
    deft_var_t *var_room[3 * RUN_INLINE + 2];
    deft_ndarray_t *created_room[RUN_INLINE];
    size_t nvars = 2 * (size_t)nin + (size_t)nout + 2;
    deft_var_t **vars = nvars <= 3 * RUN_INLINE + 2 ? var_room : malloc(nvars * sizeof *vars);
    deft_ndarray_t **created =
        nout <= RUN_INLINE ? created_room : malloc((size_t)nout * sizeof *created);
    deft_var_t *stream = deft_cached_op_draws(op) ? deft_random_stream_var() : NULL;
    if (!vars || !created || (deft_cached_op_draws(op) && !stream)) {
        if (vars != var_room) free(vars);
        if (created != created_room) free(created);
        free_run(r);
        if (vars && created) return -1; /* the stream's variable: error set */
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a run of %d inputs", nin);
    }
    deft_var_t **reads = vars, **writes = vars + nin;
    int nreads = 0, nwrites = 0;
    size_t bytes = deft_cached_plan_arena_bytes(r->plan); /* what a queued run keeps alive */
    for (int i = 0; i < nin + nout; i++) bytes += deft_tensor_nbytes(&r->arrays[i]->tensor);
    for (int i = 0; i < nin; i++) {
        if (deft_cached_op_input_written(op, i))
            writes[nwrites++] = in[i]->var;
        else
            reads[nreads++] = in[i]->var;
    }
    for (int o = 0; o < nout; o++) writes[nwrites++] = r->arrays[nin + o]->var;
    writes[nwrites++] = deft_cached_op_var(op);
    if (deft_cached_op_draws(op)) writes[nwrites++] = stream; /* draws in push order */
    for (int o = 0; o < nout; o++)
        created[o] = out[o] ? NULL : deft_ndarray_retain(r->arrays[nin + o]);
    vouch_inputs(r);
    deft_engine_op_desc_t desc = {.fn = run_graph,
                                  .free_ctx = free_run,
                                  .ctx = r,
                                  .reads = reads,
                                  .num_reads = nreads,
                                  .writes = writes,
                                  .num_writes = nwrites,
                                  .name = "CachedOp",
                                  .origin = "DeftCachedOpInvoke",
                                  .small = deft_cached_plan_arena_bytes(r->plan) < 64 * 1024 &&
                                           !deft_cached_op_blocking(op),
                                  .bytes = bytes};
    int status = deft_engine_push(&desc);
    for (int o = 0; o < nout; o++) {
        if (status) {
            deft_ndarray_release(created[o]);
        } else {
            if (out[o]) deft_ndarray_touch(out[o]);
            if (!out[o]) out[o] = created[o];
        }
    }
    for (int i = 0; status == 0 && i < nin; i++)
        if (deft_cached_op_input_written(op, i)) deft_ndarray_touch(in[i]);
    if (vars != var_room) free(vars);
    if (created != created_room) free(created);
    return status;
}

int deft_cached_op_invoke(deft_cached_op_t *op, int nin, deft_ndarray_t *const *in, int *nout,
                          deft_ndarray_t **out) {
    int produced = deft_cached_op_num_outputs(op);
    run_t *r = NULL;
    if (new_run(op, nin, in, &r)) return -1;
    if (*nout < produced) {
        free_run(r);
        return deft_error(DEFT_ERR_VALUE, "the graph has %d outputs, but there is room for %d",
                          produced, *nout);
    }
    if (prepare_outputs(r, out)) {
        free_run(r);
        return -1;
    }
    if (push_run(r, in, out)) return -1;
    *nout = produced;
    return 0;
}
