#define _POSIX_C_SOURCE 200809L
#include "core/graph/symbol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

/* malloc and zeroing, not calloc: glibc's calloc takes no thread cache (a symbol's two
 * callocs cost some 360 instructions). */
static deft_symbol_t *symbol_alloc(int n) {
    deft_symbol_t *sym = malloc(sizeof *sym);
    if (!sym) return NULL;
    memset(sym, 0, sizeof *sym);
    size_t bytes = (size_t)(n ? n : 1) * sizeof *sym->outputs;
    if (!(sym->outputs = malloc(bytes))) {
        free(sym);
        return NULL;
    }
    memset(sym->outputs, 0, bytes);
    return sym;
}

static int oom(void) {
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a symbol");
}

int deft_symbol_from_entries(int n, const deft_entry_t *entries, deft_symbol_t **out) {
    deft_symbol_t *sym = symbol_alloc(n);
    if (!sym) return oom();
    for (int i = 0; i < n; i++) {
        sym->outputs[i] = entries[i];
        deft_node_retain(entries[i].node);
    }
    sym->num_outputs = n;
    *out = sym;
    return 0;
}

int deft_symbol_new_variable(const char *name, deft_symbol_t **out) {
    if (!name || !*name)
        return deft_error(DEFT_ERR_VALUE, "name is empty or NULL, expected a variable name");
    deft_node_t *node;
    if (deft_node_new_variable(name, NULL, 0, NULL, NULL, &node)) return -1;
    deft_entry_t entry = {node, 0};
    int status = deft_symbol_from_entries(1, &entry, out);
    deft_node_release(node);
    return status;
}

static void free_atomic(deft_symbol_t *sym) {
    for (int i = 0; i < sym->atomic_num_attrs; i++)
        free(sym->atomic_keys[i]), free(sym->atomic_vals[i]);
    free(sym->atomic_keys), free(sym->atomic_vals);
    sym->atomic_keys = sym->atomic_vals = NULL;
    sym->atomic_num_attrs = 0;
    sym->atomic_op = NULL;
}

int deft_symbol_new_atomic(const deft_op_entry_t *op, int num_attrs, const char *const *keys,
                           const char *const *vals, deft_symbol_t **out) {
    /* Building a throwaway node with the maximum input count would need inputs;
     * instead check the parameters the same way a node will. */
    const char *pkeys[DEFT_OP_MAX_PARAMS + 1], *pvals[DEFT_OP_MAX_PARAMS + 1];
    int np = 0;
    for (int i = 0; i < num_attrs; i++) {
        if (!keys[i] || !vals[i])
            return deft_error(DEFT_ERR_VALUE, "parameter %d has a NULL %s", i,
                              keys[i] ? "value" : "key");
        if (deft_attr_is_annotation(keys[i])) continue;
        if (np > DEFT_OP_MAX_PARAMS)
            return deft_op_error(op->op, DEFT_ERR_VALUE, "too many parameters");
        pkeys[np] = keys[i], pvals[np] = vals[i];
        np++;
    }
    const deft_params_t *parsed;
    if (deft_op_parse_params(op, np, pkeys, pvals, &parsed)) return -1;
    deft_symbol_t *sym = symbol_alloc(1);
    if (!sym) return oom();
    sym->atomic_op = op;
    sym->atomic_keys = calloc((size_t)(num_attrs ? num_attrs : 1), sizeof(char *));
    sym->atomic_vals = calloc((size_t)(num_attrs ? num_attrs : 1), sizeof(char *));
    if (!sym->atomic_keys || !sym->atomic_vals) goto fail;
    for (int i = 0; i < num_attrs; i++) {
        if (!(sym->atomic_keys[i] = strdup(keys[i])) || !(sym->atomic_vals[i] = strdup(vals[i])))
            goto fail;
        sym->atomic_num_attrs = i + 1;
    }
    *out = sym;
    return 0;
fail:
    deft_symbol_free(sym);
    return oom();
}

deft_symbol_types_t *deft_symbol_types_new(int n, int entries) {
    size_t head = (sizeof(deft_symbol_types_t) + 15) & ~(size_t)15;
    size_t nodes = (size_t)n * sizeof(deft_node_t *), first = ((size_t)n + 1) * sizeof(int);
    size_t at = (head + nodes + first + 15) & ~(size_t)15;
    deft_symbol_types_t *t = malloc(at + (size_t)(entries ? entries : 1) * sizeof(deft_desc_t));
    if (!t) return NULL;
    atomic_init(&t->refs, 1);
    t->num_nodes = n;
    t->nodes = (const deft_node_t **)((char *)t + head);
    t->first = (int *)((char *)t + head + nodes);
    t->desc = (deft_desc_t *)((char *)t + at);
    return t;
}

deft_symbol_types_t *deft_symbol_types_retain(deft_symbol_types_t *t) {
    if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void deft_symbol_types_release(deft_symbol_types_t *t) {
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) free(t);
}

deft_graph_t *deft_symbol_take_graph(const deft_symbol_t *sym) {
    if (!atomic_load_explicit(&sym->graph, memory_order_relaxed)) return NULL; /* most symbols */
    return atomic_exchange(&((deft_symbol_t *)sym)->graph, NULL);
}

void deft_symbol_free(deft_symbol_t *sym) {
    if (!sym) return;
    deft_symbol_types_release(sym->types);
    deft_graph_free(deft_symbol_take_graph(sym));
    for (int i = 0; i < sym->num_outputs; i++) deft_node_release(sym->outputs[i].node);
    free(sym->outputs);
    free_atomic(sym);
    free(sym);
}

int deft_symbol_check_composed(const deft_symbol_t *sym, const char *what) {
    if (!sym->atomic_op) return 0;
    return deft_error(DEFT_ERR_VALUE,
                      "%s is an operator symbol ('%s') that has not been composed with its inputs",
                      what, sym->atomic_op->op->name);
}

/* How many inputs the node will take, given how many were passed. */
static int input_count(const deft_op_t *op, const deft_param_value_t *p, int given) {
    if (op->num_inputs) return op->num_inputs(p);
    if (op->min_inputs == op->max_inputs) return op->max_inputs;
    return given; /* variadic (Concat, stack): as many as given */
}

/* The position of a named input, or -1. */
static int input_position(const deft_op_t *op, const char *key) {
    for (int i = 0; op->input_names[i]; i++)
        if (strcmp(op->input_names[i], key) == 0) return i;
    return -1;
}

static int single_entry(const deft_symbol_t *arg, int i, deft_entry_t *out) {
    char what[48];
    snprintf(what, sizeof what, "args[%d]", i);
    if (!arg) return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected a symbol", what);
    if (deft_symbol_check_composed(arg, what)) return -1;
    if (arg->num_outputs != 1)
        return deft_error(DEFT_ERR_VALUE,
                          "%s has %d outputs, expected exactly 1 to use as an input", what,
                          arg->num_outputs);
    *out = arg->outputs[0];
    return 0;
}

int deft_symbol_compose(deft_symbol_t *sym, const char *name, int num_args, const char *const *keys,
                        deft_symbol_t *const *args) {
    if (!sym->atomic_op)
        return deft_error(DEFT_ERR_VALUE, "the symbol is already composed (only an operator "
                                          "symbol made by DeftSymbolCreateAtomic can be)");
    const deft_op_entry_t *entry = sym->atomic_op;
    const deft_op_t *op = entry->op;
    /* The parameters decide how many inputs the node takes. */
    const deft_params_t *params;
    const char *pk[DEFT_OP_MAX_PARAMS + 1], *pv[DEFT_OP_MAX_PARAMS + 1];
    int np = 0;
    for (int i = 0; i < sym->atomic_num_attrs; i++)
        if (!deft_attr_is_annotation(sym->atomic_keys[i]))
            pk[np] = sym->atomic_keys[i], pv[np] = sym->atomic_vals[i], np++;
    if (deft_op_parse_params(entry, np, pk, pv, &params)) return -1;
    if (num_args < 0 || (num_args > 0 && !args))
        return deft_error(DEFT_ERR_VALUE, "num_args is %d with args %p", num_args,
                          (const void *)args);
    int n = keys ? input_count(op, params->v, 0) : input_count(op, params->v, num_args);
    if (n < num_args && (!keys || op->min_inputs == op->max_inputs))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected at most %d", num_args, n);
    if (n > DEFT_OP_MAX_INPUTS) n = DEFT_OP_MAX_INPUTS;
    deft_entry_t inputs[DEFT_OP_MAX_INPUTS] = {{0}};
    for (int i = 0; i < num_args; i++) {
        int at = i;
        if (keys) {
            if (!keys[i] || (at = input_position(op, keys[i])) < 0 || at >= n)
                return deft_op_error(op, DEFT_ERR_VALUE, "has no input named '%s'",
                                     keys[i] ? keys[i] : "(NULL)");
            if (inputs[at].node)
                return deft_op_error(op, DEFT_ERR_VALUE, "input '%s' is given twice", keys[i]);
        }
        if (single_entry(args[i], i, &inputs[at])) return -1;
    }
    deft_node_t *made[DEFT_OP_MAX_INPUTS] = {NULL};
    int status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        if (inputs[i].node) continue;
        const char *role = deft_op_input_name(op, i);
        status = deft_node_new_variable(NULL, role, 0, NULL, NULL, &made[i]);
        inputs[i] = (deft_entry_t){made[i], 0};
    }
    deft_node_t *node = NULL;
    if (status == 0)
        status = deft_node_new_op(entry, name, sym->atomic_num_attrs,
                                  (const char *const *)sym->atomic_keys,
                                  (const char *const *)sym->atomic_vals, n, inputs, &node);
    for (int i = 0; i < n; i++) deft_node_release(made[i]);
    if (status) return -1;
    /* the symbol lists the outputs callers see; hidden ones stay the node's */
    int visible = deft_node_num_visible_outputs(node);
    deft_entry_t *outputs = calloc((size_t)visible + 1, sizeof *outputs);
    if (!outputs) {
        deft_node_release(node);
        return oom();
    }
    for (int k = 0; k < visible; k++) outputs[k] = (deft_entry_t){deft_node_retain(node), k};
    deft_node_release(node);
    free(sym->outputs);
    free_atomic(sym);
    sym->outputs = outputs;
    sym->num_outputs = visible;
    return 0;
}

int deft_symbol_set_attr(deft_symbol_t *sym, const char *key, const char *value) {
    if (deft_symbol_check_composed(sym, "symbol")) return -1;
    if (sym->num_outputs < 1) return deft_error(DEFT_ERR_VALUE, "the symbol has no outputs");
    deft_node_t *head = sym->outputs[0].node;
    for (int i = 1; i < sym->num_outputs; i++)
        if (sym->outputs[i].node != head)
            return deft_error(DEFT_ERR_VALUE, "the symbol groups several nodes; set attributes on "
                                              "one of them");
    deft_node_t *changed;
    if (deft_node_with_attr(head, key, value, &changed)) return -1;
    /* the types name the old node, which may go (and its memory come back as another) */
    deft_symbol_types_release(sym->types);
    sym->types = NULL;
    deft_graph_free(deft_symbol_take_graph(sym));
    for (int i = 0; i < sym->num_outputs; i++) {
        deft_node_release(sym->outputs[i].node);
        sym->outputs[i].node = deft_node_retain(changed);
    }
    deft_node_release(changed);
    return 0;
}
