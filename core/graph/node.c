#include "core/graph/node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/records.h"

static const char *const annotation_keys[] = {"ctx_group", "lr_mult", "wd_mult", "force_mirroring",
                                              NULL};

bool deft_attr_is_annotation(const char *key) {
    size_t len = strlen(key);
    if (len > 4 && strncmp(key, "__", 2) == 0 && strcmp(key + len - 2, "__") == 0) return true;
    for (int i = 0; annotation_keys[i]; i++)
        if (strcmp(key, annotation_keys[i]) == 0) return true;
    return false;
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

/* Keys and values must be present; the count must be small enough to sort in place. */
static int check_attrs(int n, const char *const *keys, const char *const *vals, size_t *bytes) {
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        if (!keys[i] || !vals[i])
            return deft_error(DEFT_ERR_VALUE, "attribute %d has a NULL %s", i,
                              keys[i] ? "value" : "key");
        *bytes += strlen(keys[i]) + strlen(vals[i]) + 2;
    }
    return 0;
}

/*
 * One allocation per node: the node, its input entries, its parsed
 * parameters, and its attributes (pointer arrays and the strings), so
 * recording a call costs one malloc for the node, not one per string.
 */
static deft_node_t *node_alloc(int num_inputs, int num_params, int num_attrs, size_t text_bytes,
                               size_t ext_bytes) {
    size_t size = sizeof(deft_node_t) + (size_t)num_inputs * sizeof(deft_entry_t);
    size_t params_at = (size + 15) & ~(size_t)15;
    size_t ptrs_at = params_at + (size_t)num_params * sizeof(deft_param_value_t);
    size_t text_at = ptrs_at + 2 * (size_t)num_attrs * sizeof(char *);
    size_t ext_at = (text_at + text_bytes + 15) & ~(size_t)15;
    if (ext_at <= DEFT_RECORD_SIZE && ext_at + ext_bytes > DEFT_RECORD_SIZE)
        ext_bytes = 0; /* two records beat one malloc: ext is allocated apart */
    size_t total = ext_at + ext_bytes;
    bool record = total <= DEFT_RECORD_SIZE; /* most nodes: a list pop, not malloc */
    deft_node_t *node = record ? deft_record_alloc() : malloc(total);
    if (!node) return NULL;
    /* the inputs and the rest are written by whoever fills the node */
    memset(node, 0, sizeof *node);
    node->is_record = record;
    atomic_init(&node->counts, 1);
    char *base = (char *)node;
    node->params = num_params ? (deft_param_value_t *)(base + params_at) : NULL;
    node->attrs.keys = (char **)(base + ptrs_at);
    node->attrs.vals = node->attrs.keys + num_attrs;
    node->attrs.text = base + text_at;
    if (ext_bytes) node->ext = base + ext_at, node->ext_bytes = ext_bytes;
    return node;
}

/* Sorted copy of (keys, vals) into the node's block; a key given twice is an error. */
static int fill_attrs(deft_node_t *node, int n, const char *const *keys, const char *const *vals) {
    deft_attrs_t *a = &node->attrs;
    char *text = a->text;
    a->count = 0;
    for (int i = 0; i < n; i++) {
        int at = a->count;
        while (at > 0 && strcmp(a->keys[at - 1], keys[i]) > 0) at--;
        if (at > 0 && strcmp(a->keys[at - 1], keys[i]) == 0)
            return deft_error(DEFT_ERR_VALUE, "attribute '%s' is given twice", keys[i]);
        memmove(a->keys + at + 1, a->keys + at, (size_t)(a->count - at) * sizeof *a->keys);
        memmove(a->vals + at + 1, a->vals + at, (size_t)(a->count - at) * sizeof *a->vals);
        size_t klen = strlen(keys[i]) + 1, vlen = strlen(vals[i]) + 1;
        a->keys[at] = memcpy(text, keys[i], klen);
        a->vals[at] = memcpy(text + klen, vals[i], vlen);
        text += klen + vlen;
        a->count++;
    }
    return 0;
}

static void node_free(deft_node_t *node) {
    deft_param_set_release(node->param_set);
    /* Most nodes (recorded calls, their export's copies) have neither: skipping the two calls
     * of free(NULL) saved a freed node 16 instructions (callgrind). */
    if (node->name) free(node->name);
    if (node->input_role) free(node->input_role);
    if (node->is_record)
        deft_record_free(node);
    else
        free(node);
}

static int oom_node(void) {
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph node");
}

int deft_node_new_variable(const char *name, const char *role, int num_attrs,
                           const char *const *keys, const char *const *vals, deft_node_t **out) {
    size_t text;
    if (check_attrs(num_attrs, keys, vals, &text)) return -1;
    deft_node_t *node = node_alloc(0, 0, num_attrs, text, 0);
    if (!node) return oom_node();
    node->num_outputs = 1;
    if ((name && !(node->name = copy_string(name))) ||
        (role && !(node->input_role = copy_string(role)))) {
        node_free(node);
        return oom_node();
    }
    if (fill_attrs(node, num_attrs, keys, vals)) {
        node_free(node);
        return -1;
    }
    *out = node;
    return 0;
}

/* Parse the operator parameters among the node's attributes. */
/* The node's parameters: `parsed` when the caller has them (a recorded call,
 * already checked), else parsed from its attributes. */
static int parse_node_params(deft_node_t *node, const deft_param_value_t *parsed_values) {
    const deft_op_entry_t *op = node->op;
    if (parsed_values == node->params) return 0; /* the operator's defaults, shared */
    if (parsed_values) {
        memcpy(node->params, parsed_values, (size_t)op->num_params * sizeof *node->params);
        goto strings;
    }
    const char *keys[DEFT_OP_MAX_PARAMS], *vals[DEFT_OP_MAX_PARAMS];
    int n = 0;
    for (int i = 0; i < node->attrs.count; i++) {
        if (deft_attr_is_annotation(node->attrs.keys[i])) continue;
        if (n == DEFT_OP_MAX_PARAMS)
            return deft_op_error(op->op, DEFT_ERR_VALUE, "more than %d parameters",
                                 DEFT_OP_MAX_PARAMS);
        keys[n] = node->attrs.keys[i], vals[n] = node->attrs.vals[i];
        n++;
    }
    const deft_params_t *parsed;
    if (deft_op_parse_params(op, n, keys, vals, &parsed)) return -1;
    memcpy(node->params, parsed->v, (size_t)op->num_params * sizeof *node->params);
strings:
    /* String parameters point at the node's own attribute, which lives as long as it. */
    for (int p = 0; p < op->num_params; p++)
        if (op->op->params[p].type == DEFT_PARAM_STRING)
            node->params[p].s = deft_node_attr(node, op->op->params[p].name);
    return 0;
}

/* The node's parameters and attributes are the set's (a reference the node takes over). */
static void share_set(deft_node_t *node, deft_param_set_t *set) {
    node->param_set = set;
    node->params = set->v;
    node->attrs = (deft_attrs_t){set->count, set->keys, set->vals, NULL};
}

/* A node made, its parameters set: what its operator holds, its outputs and inputs (retained,
 * and with `pending` counted as a consumer too). Inlined: as a call, passing `pending` cost a
 * recorded call 11 more instructions (callgrind). */
static inline __attribute__((always_inline)) int finish_node(deft_node_t *node, int num_inputs,
                                                             const deft_entry_t *inputs,
                                                             bool pending, deft_node_t **out) {
    const deft_op_t *op = node->op->op;
    if (op->hold && !(node->held = op->hold(op, node->params))) {
        node_free(node);
        return -1;
    }
    node->num_outputs = deft_op_num_outputs(op, node->params, num_inputs);
    node->num_inputs = num_inputs;
    node->pending_inputs = pending;
    uint64_t add = pending ? 1 + DEFT_NODE_PENDING : 1;
    for (int i = 0; i < num_inputs; i++) {
        node->inputs[i] = inputs[i];
        atomic_fetch_add_explicit(&inputs[i].node->counts, add, memory_order_relaxed);
    }
    *out = node;
    return 0;
}

/* With `set`, the node shares it (taking over the reference) for its parameters and
 * attributes, which are then the set's: num_attrs, keys and vals are not read. */
static int new_op(const deft_op_entry_t *op, const deft_param_value_t *parsed,
                  deft_param_set_t *set, size_t ext_bytes, const char *name, int num_attrs,
                  const char *const *keys, const char *const *vals, int num_inputs,
                  const deft_entry_t *inputs, bool pending, deft_node_t **out) {
    if (num_inputs < op->op->min_inputs || num_inputs > op->op->max_inputs) {
        deft_param_set_release(set);
        return deft_op_input_count_error(op->op, num_inputs);
    }
    size_t text = 0;
    if (!set && check_attrs(num_attrs, keys, vals, &text)) return -1;
    /* A call with the operator's default parameters shares the registry's copy
     * (read-only, as every node's parameters are) instead of copying it. */
    bool shared = set || (parsed == op->defaults.v && !op->has_string_params);
    /* at least one slot: kernels get a valid pointer even without parameters */
    int slots = shared || op->num_params == 0 ? 1 : op->num_params;
    deft_node_t *node =
        node_alloc(num_inputs, set ? 0 : slots, set ? 0 : num_attrs, text, ext_bytes);
    if (!node) {
        deft_param_set_release(set);
        return oom_node();
    }
    node->op = op;
    if (set)
        share_set(node, set);
    else if (shared)
        node->params = (deft_param_value_t *)op->defaults.v;
    if ((name && !(node->name = copy_string(name))) ||
        (!set && (fill_attrs(node, num_attrs, keys, vals) || parse_node_params(node, parsed)))) {
        if (name && !node->name) oom_node();
        node_free(node);
        return -1;
    }
    return finish_node(node, num_inputs, inputs, pending, out);
}

int deft_node_new_op(const deft_op_entry_t *op, const char *name, int num_attrs,
                     const char *const *keys, const char *const *vals, int num_inputs,
                     const deft_entry_t *inputs, deft_node_t **out) {
    return new_op(op, NULL, NULL, 0, name, num_attrs, keys, vals, num_inputs, inputs, false, out);
}

/*
 * new_op for a recorded call whose parameters need no copy: the cache slot's
 * set (its reference taken over) or, without parameters, the operator's
 * defaults. Every call recorded in a loop comes here: the node is set up
 * field by field, with no attribute strings to measure, sort or parse (a
 * third of recording a call went to new_op's general path). Inlined into both callers:
 * called, as deft_node_copy_op made it, it cost a recorded call 26 instructions more.
 */
static inline __attribute__((always_inline)) int
new_shared_call(const deft_op_entry_t *op, deft_param_set_t *set, const deft_param_value_t *params,
                size_t ext_bytes, int num_inputs, const deft_entry_t *inputs, bool pending,
                deft_node_t **out) {
    if (num_inputs < op->op->min_inputs || num_inputs > op->op->max_inputs) {
        deft_param_set_release(set);
        return deft_op_input_count_error(op->op, num_inputs);
    }
    /* node_alloc's layout without attributes or parameters: the node, its inputs, ext */
    size_t ext_at =
        (sizeof(deft_node_t) + (size_t)num_inputs * sizeof(deft_entry_t) + 15) & ~(size_t)15;
    if (ext_at + ext_bytes > DEFT_RECORD_SIZE)
        return new_op(op, params, set, ext_bytes, NULL, 0, NULL, NULL, num_inputs, inputs, pending,
                      out);
    deft_node_t *node = deft_record_alloc();
    if (!node) {
        deft_param_set_release(set);
        return oom_node();
    }
    /* Field by field: a compound literal zeroes the whole node first with `rep stos`, whose
     * start-up cost was 3% of recording a call (perf). A new field must be set here. */
    _Static_assert(sizeof(void *) != 8 || sizeof(deft_node_t) == 136, "every field set");
    atomic_init(&node->counts, 1);
    node->op = op;
    node->name = node->input_role = NULL;
    node->attrs = (deft_attrs_t){0, NULL, NULL, NULL};
    node->params = (deft_param_value_t *)params;
    node->param_set = NULL;
    node->arg_rank = 0;
    node->is_record = true;
    node->ext = ext_bytes ? (char *)node + ext_at : NULL;
    node->ext_bytes = ext_bytes;
    node->ext_free = NULL;
    node->held = NULL;
    node->free_next = NULL;
    if (set) share_set(node, set);
    return finish_node(node, num_inputs, inputs, pending, out); /* sets the input counts */
}

int deft_node_new_call(const deft_op_entry_t *op, const deft_param_value_t *params, int num_params,
                       const char *const *keys, const char *const *vals, int num_inputs,
                       const deft_entry_t *inputs, size_t ext_bytes, bool pending,
                       deft_node_t **out) {
    deft_param_set_t *set = num_params ? deft_param_set_take(op, params) : NULL;
    if (set || (!num_params && params == op->defaults.v && !op->has_string_params))
        return new_shared_call(op, set, params, ext_bytes, num_inputs, inputs, pending, out);
    return new_op(op, params, NULL, ext_bytes, NULL, num_params, keys, vals, num_inputs, inputs,
                  pending, out);
}

int deft_node_copy_op(const deft_node_t *node, const char *name, const deft_entry_t *inputs,
                      deft_node_t **out) {
    deft_param_set_t *set = node->param_set ? deft_param_set_retain(node->param_set) : NULL;
    /* A recorded call's node shares its set: the copy is made field by field, as the recorded
     * node was (an export's copy of bench_graph's chain: 66 instructions a node fewer than
     * new_op's general path, which measures, zeroes and lays out a block). */
    if (set) {
        deft_node_t *copy;
        if (new_shared_call(node->op, set, set->v, 0, node->num_inputs, inputs, false, &copy))
            return -1;
        if (name && !(copy->name = copy_string(name))) {
            deft_node_release(copy);
            return oom_node();
        }
        *out = copy;
        return 0;
    }
    return new_op(node->op, node->params, set, 0, name, node->attrs.count,
                  (const char *const *)node->attrs.keys, (const char *const *)node->attrs.vals,
                  node->num_inputs, inputs, false, out);
}

int deft_node_with_attr(const deft_node_t *node, const char *key, const char *value,
                        deft_node_t **out) {
    const char *keys[64], *vals[64];
    int n = 0;
    if (node->attrs.count >= 63)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "a node holds at most 63 attributes");
    for (int i = 0; i < node->attrs.count; i++) {
        if (strcmp(node->attrs.keys[i], key) == 0) continue;
        keys[n] = node->attrs.keys[i], vals[n] = node->attrs.vals[i];
        n++;
    }
    keys[n] = key, vals[n] = value;
    n++;
    if (!node->op) {
        if (deft_node_new_variable(node->name, node->input_role, n, keys, vals, out)) return -1;
        return 0;
    }
    return deft_node_new_op(node->op, node->name, n, keys, vals, node->num_inputs, node->inputs,
                            out);
}

deft_node_t *deft_node_retain(deft_node_t *node) {
    atomic_fetch_add_explicit(&node->counts, 1, memory_order_relaxed);
    return node;
}

void deft_node_retain_many(deft_node_t *node, int n) {
    atomic_fetch_add_explicit(&node->counts, (uint64_t)n, memory_order_relaxed);
}

/*
 * Dropping a reference: true when it was the last. A locked instruction costs
 * as much as the rest of a recorded call's bookkeeping of a node, and most
 * nodes die with one owner: with one reference left, the caller's, nobody can
 * take another or count a consumer (that takes a reference first), and the
 * node goes without the atomic decrement (refcount.h does the same for other
 * objects).
 */
static bool release_last(deft_node_t *node) {
    if (deft_node_refs(node) == 1) return true;
    uint64_t was = atomic_fetch_sub_explicit(&node->counts, 1, memory_order_acq_rel);
    return (was & DEFT_NODE_REFS) == 1;
}

void deft_node_release(deft_node_t *node) {
    if (!node || !release_last(node)) return;
    node->free_next = NULL;
    deft_node_t *dead = node;
    while (dead) {
        deft_node_t *next = dead->free_next;
        if (dead->ext_free) dead->ext_free(dead);
        if (dead->held) dead->op->op->unhold(dead->held);
        for (int i = 0; i < dead->num_inputs; i++) {
            deft_node_t *in = dead->inputs[i].node;
            /* Nodes are reached only through references (never weakly): an input held by its
             * dying consumer alone, as each node of a freed chain is, goes unlocked. */
            if (release_last(in)) {
                in->free_next = next;
                next = in;
            }
        }
        node_free(dead);
        dead = next;
    }
}

const char *deft_node_attr(const deft_node_t *node, const char *key) {
    for (int i = 0; i < node->attrs.count; i++)
        if (strcmp(node->attrs.keys[i], key) == 0) return node->attrs.vals[i];
    return NULL;
}

void deft_node_output_name(const deft_node_t *node, const char *name, int index, char *buf,
                           size_t len) {
    const char *const *names = node->op ? node->op->op->output_names : NULL;
    if (!node->op)
        snprintf(buf, len, "%s", name);
    else if (names)
        snprintf(buf, len, "%s_%s", name, names[index]);
    else if (deft_node_num_visible_outputs(node) == 1)
        snprintf(buf, len, "%s_output", name);
    else
        snprintf(buf, len, "%s_output%d", name, index);
}
