#define _POSIX_C_SOURCE 200809L
/*
 * _fused_elemwise: a chain of elementwise operators evaluated tile by tile.
 *
 * Each step runs the real operator's kernel on a tile small enough that the
 * intermediates stay in cache, so a chain of k operators reads its inputs
 * and writes its output once instead of k times. There is no code
 * generation: the operators' own kernels are the interpreter's instructions,
 * which keeps their results (and NaN rules) identical to the unfused graph.
 * On a GPU each step's operator plans its map as usual, but the plans are
 * captured instead of launched and run as one kernel that keeps the
 * intermediates in registers (the same per-element functions, so the same
 * results); a step that is not one such map runs the chain unfused.
 */
#include "core/op/fused.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/storage.h"
#include "core/op/grad.h"
#include "core/op/op.h"
#include "core/op/registry.h"
#ifdef DEFT_HAVE_CUDA
#include "core/op/gpu_ops.h"
#endif

/* Elements per tile: 16 KiB of float32 per intermediate, so a few fit in L1/L2. */
#define TILE 4096

typedef struct fused_step {
    const deft_op_entry_t *entry;
    int nin;
    int arg[2]; /* >= 0: the fused node's input; < 0: step -arg - 1 */
    int nkv;
    const char *keys[DEFT_FUSED_MAX_STEP_PARAMS], *vals[DEFT_FUSED_MAX_STEP_PARAMS];
    deft_params_t params;
} fused_step_t;

typedef struct fused_program {
    char *source; /* the program as given, and the input count it was parsed for */
    int nin;
    char *text; /* a copy, cut into the tokens the steps point at */
    int nsteps;
    fused_step_t steps[DEFT_FUSED_MAX_STEPS];
    deft_desc_t desc[DEFT_FUSED_MAX_STEPS]; /* each step's result */
} fused_program_t;

static const deft_op_t *fused_op(void) {
    return deft_registry_find(DEFT_FUSED_OP_NAME)->op;
}

static void program_free(fused_program_t *prog) {
    if (prog) free(prog->text), free(prog->source);
    free(prog);
}

static int parse_arg(fused_step_t *st, int step, int nin, const char *tok) {
    char *end;
    long k = strtol(tok + 1, &end, 10);
    bool input = tok[0] == 'i', temp = tok[0] == 't';
    if ((!input && !temp) || end == tok + 1 || *end || k < 0 || (input && k >= nin) ||
        (temp && k >= step))
        return deft_op_error(fused_op(), DEFT_ERR_VALUE,
                             "step %d: argument '%s' is not an input i0..i%d or an earlier step",
                             step, tok, nin - 1);
    if (st->nin == 2)
        return deft_op_error(fused_op(), DEFT_ERR_VALUE, "step %d has more than 2 arguments", step);
    st->arg[st->nin++] = input ? (int)k : -(int)k - 1;
    return 0;
}

static int parse_token(fused_step_t *st, int step, int nin, char *tok) {
    char *eq = strchr(tok, '=');
    if (!eq) return parse_arg(st, step, nin, tok);
    if (st->nkv == DEFT_FUSED_MAX_STEP_PARAMS)
        return deft_op_error(fused_op(), DEFT_ERR_VALUE, "step %d has too many parameters", step);
    *eq = '\0';
    st->keys[st->nkv] = tok;
    st->vals[st->nkv++] = eq + 1;
    return 0;
}

static int parse_step(fused_step_t *st, int step, int nin, char *text) {
    char *save, *tok = strtok_r(text, " ", &save);
    if (!tok) return deft_op_error(fused_op(), DEFT_ERR_VALUE, "step %d is empty", step);
    st->entry = deft_registry_find(tok);
    if (!st->entry || !st->entry->op->elementwise)
        return deft_op_error(fused_op(), DEFT_ERR_VALUE,
                             "step %d: '%s' is not an elementwise operator", step, tok);
    while ((tok = strtok_r(NULL, " ", &save)))
        if (parse_token(st, step, nin, tok)) return -1;
    const deft_op_t *op = st->entry->op;
    if (st->nin < op->min_inputs || st->nin > op->max_inputs)
        return deft_op_error(fused_op(), DEFT_ERR_VALUE, "step %d: %s takes %d argument(s), got %d",
                             step, op->name, op->max_inputs, st->nin);
    const deft_params_t *params;
    if (deft_op_parse_params(st->entry, st->nkv, st->keys, st->vals, &params)) return -1;
    st->params = *params; /* the parser's slot is reused by its next call */
    return 0;
}

static int program_parse(const char *text, int nin, fused_program_t **out) {
    fused_program_t *prog = calloc(1, sizeof *prog);
    if (!prog || !(prog->text = strdup(text ? text : "")) ||
        !(prog->source = strdup(text ? text : ""))) {
        program_free(prog);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a fused program");
    }
    prog->nin = nin;
    char *save, *piece = strtok_r(prog->text, ";", &save);
    for (; piece; piece = strtok_r(NULL, ";", &save)) {
        if (prog->nsteps == DEFT_FUSED_MAX_STEPS) {
            program_free(prog);
            return deft_op_error(fused_op(), DEFT_ERR_VALUE, "more than %d steps",
                                 DEFT_FUSED_MAX_STEPS);
        }
        if (parse_step(&prog->steps[prog->nsteps], prog->nsteps, nin, piece)) {
            program_free(prog);
            return -1;
        }
        prog->nsteps++;
    }
    if (prog->nsteps == 0) {
        program_free(prog);
        return deft_op_error(fused_op(), DEFT_ERR_VALUE, "the program has no steps");
    }
    *out = prog;
    return 0;
}

/* Fill prog->desc from the inputs' descriptions, step by step. */
static int program_infer(fused_program_t *prog, const deft_desc_t *in) {
    for (int j = 0; j < prog->nsteps; j++) {
        const fused_step_t *st = &prog->steps[j];
        deft_desc_t args[2], outs[DEFT_OP_MAX_OUTPUTS];
        for (int a = 0; a < st->nin; a++)
            args[a] = st->arg[a] >= 0 ? in[st->arg[a]] : prog->desc[-st->arg[a] - 1];
        int nout = 0;
        const deft_op_t *op = st->entry->op;
        if (op->infer(op, st->params.v, st->nin, args, &nout, outs)) return -1;
        prog->desc[j] = outs[0];
    }
    return 0;
}

/*
 * Parsed programs, per thread: a fused node runs its program on every call,
 * and parsing it (operator lookups, parameter parsing) would cost more than
 * running it on small arrays. A program stays valid until this thread has
 * parsed PROGRAM_CACHE others, so callers use it within one call only.
 */
#define PROGRAM_CACHE 16

typedef struct program_cache {
    int next;
    fused_program_t *slot[PROGRAM_CACHE];
} program_cache_t;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *ptr) {
    program_cache_t *cache = ptr;
    for (int i = 0; i < PROGRAM_CACHE; i++) program_free(cache->slot[i]);
    free(cache);
}

static void cache_init(void) {
    (void)pthread_key_create(&cache_key, cache_free);
}

static int program_get(const char *text, int nin, fused_program_t **out) {
    pthread_once(&cache_once, cache_init);
    program_cache_t *cache = pthread_getspecific(cache_key);
    if (!cache && (cache = calloc(1, sizeof *cache)) && pthread_setspecific(cache_key, cache)) {
        free(cache);
        cache = NULL;
    }
    for (int i = 0; cache && i < PROGRAM_CACHE; i++) {
        fused_program_t *p = cache->slot[i];
        if (p && p->nin == nin && strcmp(p->source, text ? text : "") == 0) {
            *out = p;
            return 0;
        }
    }
    if (program_parse(text, nin, out)) return -1;
    if (!cache) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a program cache");
    program_free(cache->slot[cache->next]);
    cache->slot[cache->next] = *out;
    cache->next = (cache->next + 1) % PROGRAM_CACHE;
    return 0;
}

static const deft_param_def_t fused_params[] = {
    {"program", DEFT_PARAM_STRING, NULL, "the steps, as the Fuse pass writes them", NULL, false},
    {0}};

static int fused_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op;
    fused_program_t *prog;
    if (program_get(p[0].s, nin, &prog)) return -1;
    int status = program_infer(prog, in);
    if (status == 0) out[0] = prog->desc[prog->nsteps - 1];
    *nout = 1;
    return status;
}

/* ---- evaluation ---- */

typedef struct fused_run {
    const fused_program_t *prog;
    const deft_tensor_t *in, *out;
    int64_t n;
    atomic_bool failed;
} fused_run_t;

/* Elements [start, start + len) of t, or all of t when it holds one value (broadcast). */
static deft_tensor_t tile_view(const deft_tensor_t *t, int64_t size, int64_t start, int64_t len) {
    deft_tensor_t v = *t;
    bool whole = size == 1;
    v.shape = (deft_shape_t){.ndim = 1, .dims = {whole ? 1 : len}};
    if (!whole) v.offset += (size_t)start * deft_dtype_size(t->dtype);
    return v;
}

static int run_tile(const fused_run_t *r, const deft_tensor_t *temps, int64_t start, int64_t len) {
    const fused_program_t *prog = r->prog;
    for (int j = 0; j < prog->nsteps; j++) {
        const fused_step_t *st = &prog->steps[j];
        deft_tensor_t args[2], result;
        for (int a = 0; a < st->nin; a++) {
            int k = st->arg[a];
            if (k >= 0)
                args[a] = tile_view(&r->in[k], deft_shape_size(&r->in[k].shape), start, len);
            else /* temporaries hold just this tile */
                args[a] =
                    tile_view(&temps[-k - 1], deft_shape_size(&prog->desc[-k - 1].shape), 0, len);
        }
        bool last = j == prog->nsteps - 1;
        int64_t size = deft_shape_size(&prog->desc[j].shape);
        result = tile_view(last ? r->out : &temps[j], size, last ? start : 0, len);
        const deft_op_t *op = st->entry->op;
        if (op->forward(op, st->params.v, st->nin, args, 1, &result)) return -1;
    }
    return 0;
}

static void run_tiles(void *ctx, int64_t begin, int64_t end) {
    fused_run_t *r = ctx;
    const fused_program_t *prog = r->prog;
    deft_storage_t *buf;
    const int64_t room = r->n < TILE ? r->n : TILE; /* small arrays need small temporaries */
    if (deft_storage_new(r->out->device, (size_t)(prog->nsteps * room * 8), &buf)) {
        atomic_store(&r->failed, true);
        return;
    }
    deft_tensor_t temps[DEFT_FUSED_MAX_STEPS];
    for (int j = 0; j < prog->nsteps; j++) {
        bool scalar = deft_shape_size(&prog->desc[j].shape) == 1;
        temps[j] = (deft_tensor_t){.shape = {.ndim = 1, .dims = {scalar ? 1 : room}},
                                   .dtype = prog->desc[j].dtype,
                                   .device = r->out->device,
                                   .storage = buf,
                                   .offset = (size_t)(j * room * 8)};
    }
    for (int64_t t = begin; t < end && !atomic_load(&r->failed); t++) {
        int64_t start = t * TILE, len = r->n - start < TILE ? r->n - start : TILE;
        if (run_tile(r, temps, start, len)) atomic_store(&r->failed, true);
    }
    deft_storage_release(buf);
}

/* Tiles work when every value has the output's size or holds one value. */
static bool tileable(const fused_program_t *prog, const deft_tensor_t *in, int nin, int64_t n) {
    for (int k = 0; k < nin; k++) {
        int64_t s = deft_shape_size(&in[k].shape);
        if (s != n && s != 1) return false;
    }
    for (int j = 0; j < prog->nsteps; j++) {
        int64_t s = deft_shape_size(&prog->desc[j].shape);
        if (s != n && (s != 1 || j == prog->nsteps - 1)) return false;
    }
    return true;
}

/* A step's kernel for the device of the arrays. */
static int step_forward(const fused_step_t *st, const deft_tensor_t *args,
                        const deft_tensor_t *result) {
    const deft_op_t *op = st->entry->op;
    deft_forward_fn forward = result->device.type == DEFT_DEV_GPU ? op->forward_gpu : op->forward;
    if (!forward)
        return deft_op_error(fused_op(), DEFT_ERR_NOT_IMPLEMENTED, "step %s has no GPU kernel",
                             op->name);
    return forward(op, st->params.v, st->nin, args, 1, result);
}

/* Broadcasting inside the chain, and chains on a GPU: whole arrays, one step
 * (one kernel) at a time. */
static int run_whole(const fused_program_t *prog, const deft_tensor_t *in,
                     const deft_tensor_t *out) {
    deft_tensor_t temps[DEFT_FUSED_MAX_STEPS];
    int made = 0, status = 0;
    for (int j = 0; j < prog->nsteps && status == 0; j++) {
        const fused_step_t *st = &prog->steps[j];
        deft_tensor_t args[2];
        for (int a = 0; a < st->nin; a++)
            args[a] = st->arg[a] >= 0 ? in[st->arg[a]] : temps[-st->arg[a] - 1];
        if (j == prog->nsteps - 1) {
            status = step_forward(st, args, out);
            break;
        }
        temps[j] = (deft_tensor_t){
            .shape = prog->desc[j].shape, .dtype = prog->desc[j].dtype, .device = out->device};
        status = deft_storage_new(out->device, deft_tensor_nbytes(&temps[j]), &temps[j].storage);
        if (status == 0) made++;
        if (status == 0) status = step_forward(st, args, &temps[j]);
    }
    for (int j = 0; j < made; j++) deft_storage_release(temps[j].storage);
    return status;
}

/* The program of a call, its steps' shapes inferred for these inputs. */
static int program_for(const deft_param_value_t *p, int nin, const deft_tensor_t *in,
                       fused_program_t **out) {
    deft_desc_t desc[DEFT_OP_MAX_INPUTS];
    for (int k = 0; k < nin; k++) desc[k] = (deft_desc_t){in[k].shape, in[k].dtype};
    return program_get(p[0].s, nin, out) || program_infer(*out, desc) ? -1 : 0;
}

static int fused_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nout;
    fused_program_t *prog;
    int status = program_for(p, nin, in, &prog);
    int64_t n = deft_shape_size(&out[0].shape);
    if (status == 0 && n > 0 && tileable(prog, in, nin, n)) {
        fused_run_t run = {.prog = prog, .in = in, .out = out, .n = n};
        deft_parallel_for((n + TILE - 1) / TILE, DEFT_PARALLEL_GRAIN / TILE, run_tiles, &run);
        if (atomic_load(&run.failed))
            status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate fused tiles");
    } else if (status == 0 && n > 0) {
        status = run_whole(prog, in, out);
    }
    return status;
}

static atomic_long gpu_chains;

long deft_fused_gpu_chains(void) {
    return atomic_load(&gpu_chains);
}

#ifdef DEFT_HAVE_CUDA
/* ---- on a GPU: the chain as one kernel ---- */

/* The one map a step's operator plans for these arrays (captured: nothing runs). */
static bool capture_step(const fused_step_t *st, const deft_tensor_t *args,
                         const deft_tensor_t *result, deft_gpu_map_t *map) {
    deft_gpu_capture_t capture;
    deft_gpu_capture_start(&capture);
    int status = step_forward(st, args, result);
    deft_gpu_capture_stop();
    if (status || capture.count != 1) return false;
    *map = capture.map;
    return true;
}

/* Where a map operand's data comes from: an input or an earlier step's
 * result, read densely (stride 1) or as one value (stride 0). */
static bool chain_source(const deft_gpu_fused_t *c, const deft_tensor_t *temps, int step,
                         const deft_gpu_map_t *map, int k, int8_t *src) {
    int64_t stride = map->ndim == 1 && map->size > 1 ? map->strides[k][0] : -1;
    for (int i = 0; i < c->nin; i++)
        if (map->base[k] == c->in[i] && (stride < 0 || stride == c->in_stride[i])) {
            *src = (int8_t)i;
            return true;
        }
    for (int j = 0; j < step; j++) {
        bool one = deft_shape_size(&temps[j].shape) == 1;
        if (map->base[k] == deft_tensor_data(&temps[j]) && (stride < 0 || stride == !one)) {
            *src = (int8_t)(-1 - j);
            return true;
        }
    }
    return false;
}

/* The step as a chain step, when its map is one the chain kernel knows. */
static bool to_chain_step(deft_gpu_fused_t *c, const deft_tensor_t *temps, int step,
                          const deft_gpu_map_t *map, const deft_tensor_t *result) {
    if (!deft_gpu_fused_supports(map->fn, c->dtype) || map->ndim > 1 || map->nops > 3 ||
        map->base[0] != deft_tensor_data(result))
        return false;
    deft_gpu_fused_step_t *st = &c->steps[step];
    st->fn = map->fn;
    for (int k = 0; k < 4; k++) st->scalars[k] = map->scalars[k];
    st->src[0] = st->src[1] = st->src[2] = DEFT_GPU_FUSED_SCALAR;
    for (int k = 1; k < map->nops; k++)
        if (map->base[k] &&
            (map->dtype[k] != c->dtype || !chain_source(c, temps, step, map, k, &st->src[k])))
            return false;
    return true;
}

/* The whole chain for one kernel: every step one map of the output's dtype,
 * every value the output's size or one element. */
static bool plan_chain(const fused_program_t *prog, const deft_tensor_t *in, int nin,
                       const deft_tensor_t *out, deft_gpu_fused_t *c) {
    int64_t n = deft_shape_size(&out->shape);
    if (!tileable(prog, in, nin, n) || nin > DEFT_GPU_MAX_OPS ||
        prog->nsteps > DEFT_GPU_FUSED_MAX_STEPS)
        return false;
    memset(c, 0, sizeof *c);
    c->size = n, c->dtype = out->dtype, c->nin = nin, c->nsteps = prog->nsteps;
    c->out = deft_tensor_data(out);
    for (int k = 0; k < nin; k++) {
        if (in[k].dtype != out->dtype) return false;
        c->in[k] = deft_tensor_data(&in[k]);
        c->in_stride[k] = deft_shape_size(&in[k].shape) == 1 ? 0 : 1;
    }
    /* Stand-ins for the intermediates: distinct addresses that nothing reads,
     * since planning launches nothing. */
    deft_storage_t stand_in[DEFT_FUSED_MAX_STEPS];
    deft_tensor_t temps[DEFT_FUSED_MAX_STEPS];
    for (int j = 0; j < prog->nsteps; j++) {
        const fused_step_t *st = &prog->steps[j];
        bool last = j == prog->nsteps - 1;
        if (prog->desc[j].dtype != out->dtype) return false;
        memset(&stand_in[j], 0, sizeof stand_in[j]);
        stand_in[j].device = out->device;
        stand_in[j].data = (void *)(uintptr_t)(64 * (j + 1));
        temps[j] = (deft_tensor_t){.shape = prog->desc[j].shape,
                                   .dtype = prog->desc[j].dtype,
                                   .device = out->device,
                                   .storage = &stand_in[j]};
        deft_tensor_t args[2];
        for (int a = 0; a < st->nin; a++)
            args[a] = st->arg[a] >= 0 ? in[st->arg[a]] : temps[-st->arg[a] - 1];
        deft_gpu_map_t map;
        const deft_tensor_t *result = last ? out : &temps[j];
        if (!capture_step(st, args, result, &map) || !to_chain_step(c, temps, j, &map, result))
            return false;
    }
    return true;
}

static int fused_forward_gpu(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)nout;
    fused_program_t *prog;
    if (program_for(p, nin, in, &prog)) return -1;
    if (deft_shape_size(&out[0].shape) == 0) return 0;
    deft_gpu_fused_t chain;
    if (!plan_chain(prog, in, nin, &out[0], &chain)) return run_whole(prog, in, out);
    atomic_fetch_add(&gpu_chains, 1);
    return deft_gpu_fused(deft_gpu_of(out), &chain);
}
#endif

/* ---- gradient: each step's own gradient, in reverse ---- */

/* The builder a step's gradient function sees: its inputs, output and
 * output gradient are values of the expanded chain. */
typedef struct step_builder {
    deft_grad_builder_t base;
    deft_grad_builder_t *parent;
    const fused_step_t *step;
    deft_gref_t in[2], out, grad;
} step_builder_t;

static deft_gref_t sb_apply(deft_grad_builder_t *b, const char *op, int nin, const deft_gref_t *in,
                            const char *const *params, int output) {
    deft_grad_builder_t *parent = ((step_builder_t *)b)->parent;
    return parent->apply(parent, op, nin, in, params, output);
}
static deft_gref_t sb_input(deft_grad_builder_t *b, int k) {
    return ((step_builder_t *)b)->in[k];
}
static deft_gref_t sb_output(deft_grad_builder_t *b, int k) {
    (void)k;
    return ((step_builder_t *)b)->out;
}
static deft_gref_t sb_out_grad(deft_grad_builder_t *b, int k) {
    (void)k;
    return ((step_builder_t *)b)->grad;
}
static const char *sb_attr(deft_grad_builder_t *b, const char *key) {
    const fused_step_t *st = ((step_builder_t *)b)->step;
    for (int i = 0; i < st->nkv; i++)
        if (strcmp(st->keys[i], key) == 0) return st->vals[i];
    return NULL;
}

static void accumulate(deft_grad_builder_t *b, deft_gref_t *sum, deft_gref_t term) {
    if (!term.node) return;
    *sum = sum->node ? g_op2(b, "elemwise_add", *sum, term, GRAD_NONE) : term;
}

/* Recompute the intermediates as ordinary nodes (later passes may fuse them again). */
static void expand_values(deft_grad_builder_t *b, const fused_program_t *prog, deft_gref_t *val) {
    for (int j = 0; j < prog->nsteps - 1; j++) {
        const fused_step_t *st = &prog->steps[j];
        deft_gref_t args[2];
        const char *params[2 * DEFT_FUSED_MAX_STEP_PARAMS + 1];
        for (int a = 0; a < st->nin; a++)
            args[a] = st->arg[a] >= 0 ? b->input(b, st->arg[a]) : val[-st->arg[a] - 1];
        for (int i = 0; i < st->nkv; i++)
            params[2 * i] = st->keys[i], params[2 * i + 1] = st->vals[i];
        params[2 * st->nkv] = NULL;
        val[j] = b->apply(b, st->entry->op->name, st->nin, args, params, 0);
    }
    val[prog->nsteps - 1] = b->output(b, 0);
}

static int fused_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                          deft_gref_t *in_grads) {
    fused_program_t *prog;
    if (program_parse(p[0].s, nin, &prog)) return -1;
    deft_gref_t val[DEFT_FUSED_MAX_STEPS], grad[DEFT_FUSED_MAX_STEPS] = {{0}};
    expand_values(b, prog, val);
    grad[prog->nsteps - 1] = b->out_grad(b, 0);
    int status = 0;
    for (int j = prog->nsteps - 1; j >= 0 && status == 0; j--) {
        const fused_step_t *st = &prog->steps[j];
        if (!grad[j].node) continue;
        step_builder_t sb = {.base = {sb_apply, sb_input, sb_output, sb_out_grad, sb_attr, NULL},
                             .parent = b,
                             .step = st};
        for (int a = 0; a < st->nin; a++)
            sb.in[a] = st->arg[a] >= 0 ? b->input(b, st->arg[a]) : val[-st->arg[a] - 1];
        sb.out = val[j], sb.grad = grad[j];
        deft_gref_t g[2] = {{0}};
        const deft_op_t *op = st->entry->op;
        if (!op->gradient) {
            status = deft_op_error(fused_op(), DEFT_ERR_NOT_IMPLEMENTED,
                                   "step %d: %s has no gradient", j, op->name);
            break;
        }
        sb.base.op = op;
        status = op->gradient(&sb.base, st->params.v, st->nin, g);
        for (int a = 0; a < st->nin && status == 0; a++)
            accumulate(b, st->arg[a] >= 0 ? &in_grads[st->arg[a]] : &grad[-st->arg[a] - 1], g[a]);
    }
    program_free(prog);
    return status;
}

static const char *const fused_inputs[] = {"data", NULL};

static const deft_op_t fused_ops[] = {
    {.name = DEFT_FUSED_OP_NAME,
     .description = "A chain of elementwise operators evaluated in cache-sized tiles; made by the "
                    "Fuse graph pass.",
     .input_names = fused_inputs,
     .min_inputs = 1,
     .max_inputs = DEFT_OP_MAX_INPUTS,
     .params = fused_params,
     .infer = fused_infer,
     .forward = fused_forward,
     .forward_gpu = DEFT_GPU(fused_forward_gpu),
     .inplace_input = -1,
     .graph_only = true,
     .gradient = fused_gradient},
};

DEFT_OP_FAMILY(deft_family_fused, fused_ops);
