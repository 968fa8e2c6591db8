#include "core/graph/node.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

static const char *const annotation_keys[] = {"ctx_group", "lr_mult", "wd_mult", "force_mirroring",
                                              NULL};

bool deft_attr_is_annotation(const char *key) {
    size_t len = strlen(key);
    if (len > 4 && strncmp(key, "__", 2) == 0 && strcmp(key + len - 2, "__") == 0) return true;
    for (int i = 0; annotation_keys[i]; i++)
        if (strcmp(key, annotation_keys[i]) == 0) return true;
    return false;
}

static void attrs_free(deft_attrs_t *a) {
    for (int i = 0; i < a->count; i++) free(a->keys[i]), free(a->vals[i]);
    free(a->keys);
    free(a->vals);
    a->count = 0;
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

/* Sorted copy of (keys, vals); a key given twice is an error. */
static int attrs_copy(deft_attrs_t *a, int n, const char *const *keys, const char *const *vals) {
    a->count = 0;
    a->keys = calloc((size_t)(n ? n : 1), sizeof *a->keys);
    a->vals = calloc((size_t)(n ? n : 1), sizeof *a->vals);
    if (!a->keys || !a->vals) goto oom;
    for (int i = 0; i < n; i++) {
        if (!keys[i] || !vals[i]) {
            attrs_free(a);
            return deft_error(DEFT_ERR_VALUE, "attribute %d has a NULL %s", i,
                              keys[i] ? "value" : "key");
        }
        int at = a->count;
        while (at > 0 && strcmp(a->keys[at - 1], keys[i]) > 0) at--;
        if (at > 0 && strcmp(a->keys[at - 1], keys[i]) == 0) {
            attrs_free(a);
            return deft_error(DEFT_ERR_VALUE, "attribute '%s' is given twice", keys[i]);
        }
        char *k = copy_string(keys[i]), *v = copy_string(vals[i]);
        if (!k || !v) {
            free(k), free(v);
            goto oom;
        }
        memmove(a->keys + at + 1, a->keys + at, (size_t)(a->count - at) * sizeof *a->keys);
        memmove(a->vals + at + 1, a->vals + at, (size_t)(a->count - at) * sizeof *a->vals);
        a->keys[at] = k, a->vals[at] = v;
        a->count++;
    }
    return 0;
oom:
    attrs_free(a);
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate node attributes");
}

static deft_node_t *node_alloc(int num_inputs) {
    deft_node_t *node = calloc(1, sizeof *node + (size_t)num_inputs * sizeof(deft_entry_t));
    if (node) atomic_init(&node->refcount, 1);
    return node;
}

static void node_free_fields(deft_node_t *node) {
    free(node->name);
    free(node->input_role);
    free(node->params);
    attrs_free(&node->attrs);
}

int deft_node_new_variable(const char *name, const char *role, int num_attrs,
                           const char *const *keys, const char *const *vals, deft_node_t **out) {
    deft_node_t *node = node_alloc(0);
    if (!node) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph node");
    node->num_outputs = 1;
    if ((name && !(node->name = copy_string(name))) ||
        (role && !(node->input_role = copy_string(role)))) {
        node_free_fields(node);
        free(node);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph node");
    }
    if (attrs_copy(&node->attrs, num_attrs, keys, vals)) {
        node_free_fields(node);
        free(node);
        return -1;
    }
    *out = node;
    return 0;
}

/* Parse the operator parameters among the node's attributes. */
static int parse_node_params(deft_node_t *node) {
    const deft_op_entry_t *op = node->op;
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
    node->params = malloc((size_t)(op->num_params ? op->num_params : 1) * sizeof *node->params);
    if (!node->params) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate parameters");
    memcpy(node->params, parsed->v, (size_t)op->num_params * sizeof *node->params);
    /* String parameters point at the node's own attribute, which lives as long as it. */
    for (int p = 0; p < op->num_params; p++)
        if (op->op->params[p].type == DEFT_PARAM_STRING)
            node->params[p].s = deft_node_attr(node, op->op->params[p].name);
    return 0;
}

int deft_node_new_op(const deft_op_entry_t *op, const char *name, int num_attrs,
                     const char *const *keys, const char *const *vals, int num_inputs,
                     const deft_entry_t *inputs, deft_node_t **out) {
    if (num_inputs < op->op->min_inputs || num_inputs > op->op->max_inputs)
        return deft_op_error(op->op, DEFT_ERR_VALUE, "got %d inputs, expected %d to %d", num_inputs,
                             op->op->min_inputs, op->op->max_inputs);
    deft_node_t *node = node_alloc(num_inputs);
    if (!node) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a graph node");
    node->op = op;
    if ((name && !(node->name = copy_string(name))) ||
        attrs_copy(&node->attrs, num_attrs, keys, vals) || parse_node_params(node)) {
        if (name && !node->name) deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a name");
        node_free_fields(node);
        free(node);
        return -1;
    }
    node->num_outputs = deft_op_num_outputs(op->op, node->params, num_inputs);
    node->num_inputs = num_inputs;
    for (int i = 0; i < num_inputs; i++) {
        node->inputs[i] = inputs[i];
        deft_node_retain(inputs[i].node);
    }
    *out = node;
    return 0;
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
    atomic_fetch_add_explicit(&node->refcount, 1, memory_order_relaxed);
    return node;
}

void deft_node_release(deft_node_t *node) {
    if (!node || atomic_fetch_sub_explicit(&node->refcount, 1, memory_order_acq_rel) != 1) return;
    node->free_next = NULL;
    deft_node_t *dead = node;
    while (dead) {
        deft_node_t *next = dead->free_next;
        if (dead->ext_free) dead->ext_free(dead);
        for (int i = 0; i < dead->num_inputs; i++) {
            deft_node_t *in = dead->inputs[i].node;
            if (atomic_fetch_sub_explicit(&in->refcount, 1, memory_order_acq_rel) == 1) {
                in->free_next = next;
                next = in;
            }
        }
        node_free_fields(dead);
        free(dead);
        dead = next;
    }
}

const char *deft_node_attr(const deft_node_t *node, const char *key) {
    for (int i = 0; i < node->attrs.count; i++)
        if (strcmp(node->attrs.keys[i], key) == 0) return node->attrs.vals[i];
    return NULL;
}
