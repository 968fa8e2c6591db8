/*
 * Autograd recording: modes, marking variables, and recording calls.
 *
 * What a node keeps for backward is found by asking its operator's gradient
 * definition, through a probing builder that builds nothing and notes which
 * of the forward node's inputs and outputs it reads (PyTorch's saved
 * tensors, found without a per-operator table): an add keeps nothing, a
 * mul its inputs, exp its output.
 */
#include "core/imperative/autograd.h"
#include "core/imperative/view.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/tls.h"
#include "core/imperative/record.h"

static DEFT_TLS_FAST bool tl_recording;

bool deft_autograd_recording(void) {
    return tl_recording;
}

void deft_autograd_set_recording(bool on, bool *prev) {
    if (prev) *prev = tl_recording;
    tl_recording = on;
}

/* The flag is the operator layer's: kernels read it (mode.c). */
bool deft_autograd_training(void) {
    return deft_op_training();
}

void deft_autograd_set_training(bool on, bool *prev) {
    deft_op_set_training(on, prev);
}

/* ---- what a gradient reads ---- */

typedef struct probe {
    deft_grad_builder_t builder; /* first: callbacks receive this */
    int nattrs;
    const char *const *keys, *const *vals;
    uint64_t in, out;
} probe_t;

/* What probed references point at: the forward node's inputs and outputs, or any other value. */
static char probe_input_tag, probe_output_tag, probe_value;

/* A value read of a probed reference (not a read of its shape alone). */
static void note_read(probe_t *p, deft_gref_t r) {
    uint64_t bit = r.index < 64 ? 1ull << r.index : 0;
    if (r.node == &probe_input_tag) p->in |= bit;
    if (r.node == &probe_output_tag) p->out |= bit;
}

/* The registry entry of an operator a gradient applies (probes run only on
 * a miss of the per-thread cache below, so the lookup is not on a hot path). */
static const deft_op_t *probe_find(const char *name) {
    const deft_op_entry_t *entry = deft_registry_find(name);
    return entry ? entry->op : NULL;
}

static deft_gref_t probe_apply(deft_grad_builder_t *b, const char *op, int nin,
                               const deft_gref_t *in, const char *const *params, int output) {
    (void)params;
    const deft_op_t *applied = probe_find(op);
    uint32_t shape_only = applied ? applied->shape_inputs : 0;
    for (int i = 0; i < nin; i++)
        if (i >= 32 || !(shape_only & (1u << i))) note_read((probe_t *)b, in[i]);
    return (deft_gref_t){&probe_value, output};
}

static deft_gref_t probe_input(deft_grad_builder_t *b, int k) {
    (void)b;
    return (deft_gref_t){&probe_input_tag, k};
}

static deft_gref_t probe_output(deft_grad_builder_t *b, int k) {
    (void)b;
    return (deft_gref_t){&probe_output_tag, k};
}

static deft_gref_t probe_out_grad(deft_grad_builder_t *b, int k) {
    (void)b, (void)k;
    return (deft_gref_t){&probe_value, 0};
}

static const char *probe_attr(deft_grad_builder_t *b, const char *key) {
    const probe_t *p = (const probe_t *)b;
    for (int i = 0; i < p->nattrs; i++)
        if (strcmp(p->keys[i], key) == 0) return p->vals[i];
    return NULL;
}

/* Bits of the inputs and outputs the operator's gradient reads; -1 when it has none. */
static int gradient_reads(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                          int nattrs, const char *const *keys, const char *const *vals,
                          uint64_t *in, uint64_t *out) {
    const deft_op_t *op = entry->op;
    if (!op->gradient)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             "has no gradient, so it cannot be recorded for autograd (call it "
                             "with recording off, or on arrays that need no gradient)");
    probe_t p = {{probe_apply, probe_input, probe_output, probe_out_grad, probe_attr, op},
                 nattrs,
                 keys,
                 vals,
                 0,
                 0};
    deft_gref_t grads[DEFT_OP_MAX_INPUTS];
    memset(grads, 0, (size_t)nin * sizeof grads[0]);
    p.builder.op = op;
    if (op->gradient(&p.builder, params, nin, grads)) return -1;
    for (int i = 0; i < nin; i++) note_read(&p, grads[i]); /* a gradient that is a forward value */
    *in = p.in, *out = p.out;
    return 0;
}

/*
 * What a gradient reads depends only on the operator, its parameter values
 * and the input count, so each thread remembers its recent answers. String
 * parameters are compared by address, not content, so operators with one
 * are always asked.
 */
enum { MASK_SLOTS = 32 };
typedef struct mask_slot {
    const deft_op_entry_t *entry;
    int nin;
    bool defaults; /* the parameters were the operator's defaults (params unused) */
    uint64_t in, out;
    deft_param_value_t params[DEFT_OP_MAX_PARAMS];
} mask_slot_t;
static DEFT_TLS_FAST mask_slot_t *tl_masks;
static pthread_key_t masks_key; /* frees a thread's slots when it exits */
static pthread_once_t masks_once = PTHREAD_ONCE_INIT;

static void make_masks_key(void) {
    pthread_key_create(&masks_key, free);
}

static mask_slot_t *thread_masks(void) {
    if (tl_masks) return tl_masks;
    pthread_once(&masks_once, make_masks_key);
    if ((tl_masks = calloc(MASK_SLOTS, sizeof *tl_masks))) pthread_setspecific(masks_key, tl_masks);
    return tl_masks;
}

static int cached_gradient_reads(const deft_op_entry_t *entry, const deft_param_value_t *params,
                                 int nin, int nattrs, const char *const *keys,
                                 const char *const *vals, uint64_t *in, uint64_t *out) {
    size_t bytes = (size_t)entry->num_params * sizeof *params;
    mask_slot_t *masks = !entry->has_string_params ? thread_masks() : NULL;
    mask_slot_t *slot =
        masks ? &masks[(((uintptr_t)entry >> 4) + (unsigned)nin) % MASK_SLOTS] : NULL;
    /* The registry's defaults are one array per operator: no need to compare them. */
    bool defaults = params == entry->defaults.v;
    if (slot && slot->entry == entry && slot->nin == nin &&
        (defaults ? slot->defaults : !slot->defaults && memcmp(slot->params, params, bytes) == 0)) {
        *in = slot->in, *out = slot->out;
        return 0;
    }
    if (gradient_reads(entry, params, nin, nattrs, keys, vals, in, out)) return -1;
    if (slot) {
        slot->entry = entry, slot->nin = nin, slot->in = *in, slot->out = *out;
        slot->defaults = defaults;
        if (!defaults) memcpy(slot->params, params, bytes);
    }
    return 0;
}

/* ---- marking ---- */

bool deft_autograd_any_requires_grad(int n, deft_ndarray_t *const *arrays) {
    for (int i = 0; i < n; i++) {
        const deft_node_t *node = deft_record_entry_node(arrays[i]);
        if (node && deft_record_of(node) && deft_record_of(node)->requires_grad) return true;
    }
    return false;
}

static int mark_one(deft_ndarray_t *arr, int req, deft_ndarray_t *grad) {
    deft_node_t *fresh;
    if (deft_record_new_variable(arr, NULL, &fresh)) return -1;
    deft_record_t *rec = deft_record_of(fresh);
    rec->requires_grad = req != DEFT_GRAD_REQ_NULL;
    rec->grad_req = req;
    rec->grad = grad ? deft_ndarray_retain(grad) : NULL;
    deft_record_set_entry(arr, (deft_entry_t){fresh, 0});
    deft_record_set_live(fresh, 0, arr); /* its captured value stays while it lives */
    deft_node_release(fresh);
    return 0;
}

/* A variable's or a gradient array's bytes, for finding overlaps. */
typedef struct marked_bytes {
    deft_device_t device;
    uintptr_t begin, end;
    int index;
    bool grad;
} marked_bytes_t;

static int by_device_then_address(const void *a, const void *b) {
    const marked_bytes_t *x = a, *y = b;
    if (x->device.type != y->device.type) return x->device.type < y->device.type ? -1 : 1;
    if (x->device.id != y->device.id) return x->device.id < y->device.id ? -1 : 1;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int overlap_error(const marked_bytes_t *grad, const marked_bytes_t *other) {
    if (other->grad) {
        int first = other->index < grad->index ? other->index : grad->index;
        return deft_error(DEFT_ERR_VALUE,
                          "grads[%d] and grads[%d] share memory: each variable needs a gradient "
                          "array of its own",
                          first, other->index + grad->index - first);
    }
    return deft_error(DEFT_ERR_VALUE,
                      "grads[%d] shares memory with variables[%d]: backward would overwrite the "
                      "variable",
                      grad->index, other->index);
}

/* A gradient array overlapping a variable or another gradient array would
 * have backward overwrite one with the other. Memory is compared by address,
 * which also sees arrays sharing it through DLPack. Variables may overlap
 * each other, and gradients may be disjoint parts of one buffer (a flat
 * gradient buffer). Sorted by address, an entry overlaps an earlier one
 * exactly when it starts before the furthest end seen so far. */
static int check_gradient_memory(int n, deft_ndarray_t *const *arrays,
                                 deft_ndarray_t *const *grads) {
    marked_bytes_t *spans = malloc(2 * (size_t)n * sizeof *spans + 1);
    if (!spans) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot check %d gradient arrays", n);
    int count = 0;
    for (int i = 0; i < 2 * n; i++) {
        const deft_ndarray_t *arr = i < n ? arrays[i] : grads[i - n];
        size_t nbytes = arr ? deft_tensor_nbytes(&arr->tensor) : 0;
        uintptr_t begin = nbytes ? (uintptr_t)deft_tensor_data(&arr->tensor) : 0;
        if (!begin) continue; /* nothing to overwrite: empty, or a placeholder without a buffer */
        spans[count++] = (marked_bytes_t){arr->tensor.device, begin, begin + nbytes, i % n, i >= n};
    }
    qsort(spans, (size_t)count, sizeof *spans, by_device_then_address);
    int status = 0;
    const marked_bytes_t *furthest = NULL, *furthest_grad = NULL; /* on one device */
    for (int k = 0; status == 0 && k < count; k++) {
        const marked_bytes_t *s = &spans[k];
        if (furthest && !deft_device_equal(furthest->device, s->device))
            furthest = furthest_grad = NULL;
        if (s->grad && furthest && s->begin < furthest->end)
            status = overlap_error(s, furthest);
        else if (!s->grad && furthest_grad && s->begin < furthest_grad->end)
            status = overlap_error(furthest_grad, s);
        if (!furthest || s->end > furthest->end) furthest = s;
        if (s->grad && (!furthest_grad || s->end > furthest_grad->end)) furthest_grad = s;
    }
    free(spans);
    return status;
}

int deft_autograd_mark(int n, deft_ndarray_t *const *arrays, const int *grad_reqs,
                       deft_ndarray_t *const *grads) {
    if (deft_check_no_views(n, arrays, "arrays",
                            "a variable's gradient would not reach the array it views") ||
        deft_check_no_views(n, grads, "grads", "backward writes gradients into dense arrays"))
        return -1;
    for (int i = 0; i < n; i++) {
        int req = grad_reqs ? grad_reqs[i] : DEFT_GRAD_REQ_WRITE;
        if (req < DEFT_GRAD_REQ_NULL || req > DEFT_GRAD_REQ_ADD)
            return deft_error(DEFT_ERR_VALUE,
                              "grad_reqs[%d] is %d, expected 0 (null), 1 (write) "
                              "or 2 (add)",
                              i, req);
        if (req != DEFT_GRAD_REQ_NULL && !grads[i])
            return deft_error(DEFT_ERR_VALUE,
                              "grads[%d] is NULL, expected an array for the "
                              "gradient",
                              i);
        const deft_tensor_t *a = &arrays[i]->tensor, *g = grads[i] ? &grads[i]->tensor : NULL;
        if (g && (!deft_shape_equal(&a->shape, &g->shape) || a->dtype != g->dtype)) {
            char as[DEFT_SHAPE_STR_MAX], gs[DEFT_SHAPE_STR_MAX];
            return deft_error(
                DEFT_ERR_VALUE,
                "grads[%d] has shape %s %s, expected %s %s like "
                "the variable",
                i, deft_shape_format(&g->shape, gs, sizeof gs), deft_dtype_name(g->dtype),
                deft_shape_format(&a->shape, as, sizeof as), deft_dtype_name(a->dtype));
        }
        if (g && !deft_device_equal(a->device, g->device)) {
            char ad[32], gd[32];
            return deft_error(DEFT_ERR_VALUE, "grads[%d] is on %s, expected %s like the variable",
                              i, deft_device_format(g->device, gd, sizeof gd),
                              deft_device_format(a->device, ad, sizeof ad));
        }
        if (grads[i] && deft_ndarray_is_lazy(grads[i]))
            return deft_error(DEFT_ERR_VALUE, "grads[%d] is a lazy array, which cannot be written",
                              i);
    }
    int lazy = 0;
    while (lazy < n && !deft_ndarray_is_lazy(arrays[lazy])) lazy++;
    if (lazy < n)
        return deft_error(DEFT_ERR_VALUE,
                          "variables[%d] is a lazy array; compute it before "
                          "marking it as a variable",
                          lazy);
    if (check_gradient_memory(n, arrays, grads)) return -1;
    deft_record_lock();
    int status = 0;
    for (int i = 0; status == 0 && i < n; i++)
        status = mark_one(arrays[i], grad_reqs ? grad_reqs[i] : DEFT_GRAD_REQ_WRITE, grads[i]);
    deft_record_unlock();
    return status;
}

/* ---- recording imperative calls ---- */

int deft_autograd_plan(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                       deft_ndarray_t *const *in, int nout, deft_ndarray_t *const *out, int nparams,
                       const char *const *keys, const char *const *vals,
                       deft_autograd_call_t *call) {
    *call = (deft_autograd_call_t){0};
    call->record = deft_autograd_any_requires_grad(nin, in);
    if (!call->record) return 0;
    if (cached_gradient_reads(entry, params, nin, nparams, keys, vals, &call->save_in,
                              &call->save_out))
        return -1;
    for (int k = 0; k < nout; k++)
        for (int i = 0; out[k] && i < nin; i++)
            if ((call->save_in & (1ull << i)) && out[k]->tensor.storage == in[i]->tensor.storage)
                return deft_op_error(entry->op, DEFT_ERR_VALUE,
                                     "would overwrite input %d in place, but recording for "
                                     "autograd needs its value for the gradient",
                                     i);
    return 0;
}

/* Keep the values the gradient reads, as arrays without history. */
static int save_values(deft_record_t *rec, int nin, deft_ndarray_t *const *in, int nout,
                       deft_ndarray_t *const *out) {
    for (int i = 0; i < nin; i++)
        if ((rec->save_in & (1ull << i)) && deft_ndarray_alias(in[i], &rec->saved[i])) return -1;
    for (int k = 0; k < nout; k++)
        if ((rec->save_out & (1ull << k)) && deft_ndarray_alias(out[k], &rec->saved[nin + k]))
            return -1;
    return 0;
}

int deft_autograd_record(const deft_autograd_call_t *call, const deft_op_entry_t *entry,
                         const deft_param_value_t *params, int nin, deft_ndarray_t *const *in,
                         int nout, const deft_desc_t *out_desc, int nparams,
                         const char *const *keys, const char *const *vals,
                         deft_ndarray_t *const *out, bool fresh_outputs) {
    deft_entry_t entries[DEFT_OP_MAX_INPUTS];
    deft_node_t *node = NULL;
    deft_device_t device = nout  ? out[0]->tensor.device
                           : nin ? in[0]->tensor.device
                                 : deft_device_cpu();
    /* The lock guards arrays' entries: needed only to give an input its first
     * one or to replace a given output's (new outputs are nobody else's yet). */
    bool locked = !fresh_outputs;
    for (int i = 0; i < nin && !locked; i++) locked = !deft_record_entry_node(in[i]);
    if (locked) deft_record_lock();
    int status = deft_record_input_entries(nin, in, entries);
    if (status == 0)
        status = deft_node_new_call(entry, params, nparams, keys, vals, nin, entries,
                                    deft_record_size(nin, nout), false, &node);
    if (status == 0) status = deft_record_attach(node, device, out_desc);
    if (status == 0) {
        deft_record_t *rec = deft_record_of(node);
        rec->computed = rec->requires_grad = true;
        rec->save_in = call->save_in, rec->save_out = call->save_out;
        status = save_values(rec, nin, in, nout, out);
    }
    for (int k = 0; status == 0 && k < nout - 1; k++)
        deft_record_set_entry(out[k], (deft_entry_t){node, k});
    if (status == 0 && nout > 0 && fresh_outputs) /* our reference goes to the last output */
        deft_record_give_entry(out[nout - 1], (deft_entry_t){node, nout - 1});
    else if (status == 0 && nout > 0)
        deft_record_set_entry(out[nout - 1], (deft_entry_t){node, nout - 1});
    if (status || nout == 0 || !fresh_outputs) deft_node_release(node);
    if (locked) deft_record_unlock();
    return status;
}

int deft_autograd_prepare_node(deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    for (int i = 0; tl_recording && i < node->num_inputs && !rec->requires_grad; i++) {
        const deft_record_t *in = deft_record_of(node->inputs[i].node);
        rec->requires_grad = in && in->requires_grad;
    }
    if (!rec->requires_grad) return 0;
    return cached_gradient_reads(node->op, node->params, node->num_inputs, node->attrs.count,
                                 (const char *const *)node->attrs.keys,
                                 (const char *const *)node->attrs.vals, &rec->save_in,
                                 &rec->save_out);
}
