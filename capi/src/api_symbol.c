/* Symbols: creation, composition, introspection, attributes, JSON and DOT. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/src/api.h"
#include "core/graph/json.h"

/* A handle's object: the symbol, and the strings last returned through it. */
typedef struct api_symbol {
    deft_symbol_t *sym;
    int num_strings;
    char **strings;
    char *text;
} api_symbol_t;

static void clear_returned(api_symbol_t *s) {
    for (int i = 0; i < s->num_strings; i++) free(s->strings[i]);
    free(s->strings);
    free(s->text);
    s->strings = NULL, s->text = NULL, s->num_strings = 0;
}

static int api_symbol(DeftSymbolHandle handle, const char *what, api_symbol_t **out) {
    void *object;
    if (deft_handle_get(handle, DEFT_HANDLE_SYMBOL, what, &object)) return -1;
    *out = object;
    return 0;
}

/* Resolve a handle to a composed symbol. */
static int composed(DeftSymbolHandle handle, const char *what, api_symbol_t **out) {
    return api_symbol(handle, what, out) || deft_symbol_check_composed((*out)->sym, what);
}

/* Wrap a symbol the caller owns; on failure it is freed. */
static int wrap(deft_symbol_t *sym, DeftSymbolHandle *out) {
    api_symbol_t *s = calloc(1, sizeof *s);
    void *handle = s ? deft_handle_new(DEFT_HANDLE_SYMBOL, s) : NULL;
    if (!handle) {
        free(s);
        deft_symbol_free(sym);
        return s ? -1 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a symbol handle");
    }
    s->sym = sym;
    *out = handle;
    return 0;
}

static int wrap_entries(int n, const deft_entry_t *entries, DeftSymbolHandle *out) {
    deft_symbol_t *sym;
    if (deft_symbol_from_entries(n, entries, &sym)) return -1;
    return wrap(sym, out);
}

int DeftSymbolCreateVariable(const char *name, DeftSymbolHandle *out) {
    API_BEGIN();
    deft_symbol_t *sym;
    if (api_check_out(out, "out") || deft_symbol_new_variable(name, &sym)) return -1;
    return wrap(sym, out);
}

int DeftSymbolCreateAtomic(DeftOpHandle op, int num_params, const char *const *keys,
                           const char *const *vals, DeftSymbolHandle *out) {
    API_BEGIN();
    const deft_op_entry_t *entry = (const deft_op_entry_t *)op;
    if (!entry || entry->magic != DEFT_OP_ENTRY_MAGIC)
        return deft_error(DEFT_ERR_VALUE, "op (%p) is not an operator handle from DeftGetOperator",
                          (const void *)op);
    if (api_check_out(out, "out")) return -1;
    if (num_params < 0 || (num_params > 0 && (!keys || !vals)))
        return deft_error(DEFT_ERR_VALUE, "num_params is %d with keys %p and vals %p", num_params,
                          (const void *)keys, (const void *)vals);
    deft_symbol_t *sym;
    if (deft_symbol_new_atomic(entry, num_params, keys, vals, &sym)) return -1;
    return wrap(sym, out);
}

int DeftSymbolCompose(DeftSymbolHandle handle, const char *name, int num_args,
                      const char *const *keys, const DeftSymbolHandle *args) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    if (api_symbol(handle, "sym", &s)) return -1;
    if (num_args < 0 || num_args > DEFT_OP_MAX_INPUTS || (num_args > 0 && !args))
        return deft_error(DEFT_ERR_VALUE, "num_args is %d with args %p, expected 0 to %d inputs",
                          num_args, (const void *)args, DEFT_OP_MAX_INPUTS);
    deft_symbol_t *inputs[DEFT_OP_MAX_INPUTS];
    for (int i = 0; i < num_args; i++) {
        char what[32];
        api_symbol_t *arg = NULL;
        snprintf(what, sizeof what, "args[%d]", i);
        if (api_symbol(args[i], what, &arg)) return -1;
        inputs[i] = arg->sym;
    }
    return deft_symbol_compose(s->sym, name, num_args, keys, inputs);
}

int DeftSymbolCreateGroup(int num_symbols, const DeftSymbolHandle *symbols, DeftSymbolHandle *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    if (num_symbols < 0 || (num_symbols > 0 && !symbols))
        return deft_error(DEFT_ERR_VALUE, "num_symbols is %d with symbols %p", num_symbols,
                          (const void *)symbols);
    int total = 0;
    for (int i = 0; i < num_symbols; i++) {
        char what[32];
        api_symbol_t *s = NULL;
        snprintf(what, sizeof what, "symbols[%d]", i);
        if (composed(symbols[i], what, &s)) return -1;
        total += s->sym->num_outputs;
    }
    deft_entry_t *entries = calloc((size_t)(total ? total : 1), sizeof *entries);
    if (!entries) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a group");
    int n = 0;
    for (int i = 0; i < num_symbols; i++) {
        api_symbol_t *s = NULL;
        api_symbol(symbols[i], "symbols", &s);
        for (int k = 0; k < s->sym->num_outputs; k++) entries[n++] = s->sym->outputs[k];
    }
    int status = wrap_entries(n, entries, out);
    free(entries);
    return status;
}

int DeftSymbolCopy(DeftSymbolHandle handle, DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    return wrap_entries(s->sym->num_outputs, s->sym->outputs, out);
}

int DeftSymbolFree(DeftSymbolHandle handle) {
    API_BEGIN();
    if (!handle) return 0;
    void *object;
    if (deft_handle_retire(handle, DEFT_HANDLE_SYMBOL, "sym", &object)) return -1;
    api_symbol_t *s = object;
    clear_returned(s);
    deft_symbol_free(s->sym);
    free(s);
    return 0;
}

int DeftSymbolGetNumOutputs(DeftSymbolHandle handle, int *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    *out = s->sym->num_outputs;
    return 0;
}

int DeftSymbolGetOutput(DeftSymbolHandle handle, int index, DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    if (index < 0 || index >= s->sym->num_outputs)
        return deft_error(DEFT_ERR_INDEX, "index is %d, but the symbol has %d outputs", index,
                          s->sym->num_outputs);
    return wrap_entries(1, &s->sym->outputs[index], out);
}

int DeftSymbolGetInternals(DeftSymbolHandle handle, DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_graph_t *g;
    if (composed(handle, "sym", &s) || api_check_out(out, "out") ||
        deft_graph_build(s->sym->num_outputs, s->sym->outputs, &g))
        return -1;
    int total = deft_graph_num_entries(g);
    deft_entry_t *entries = calloc((size_t)(total ? total : 1), sizeof *entries);
    int status = entries ? 0 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate internals");
    for (int i = 0, n = 0; status == 0 && i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_outputs; k++)
            entries[n++] = (deft_entry_t){g->nodes[i], k};
    if (status == 0) status = wrap_entries(total, entries, out);
    free(entries);
    deft_graph_free(g);
    return status;
}

/* The one node all outputs of the symbol come from. */
static int single_node(const deft_symbol_t *sym, deft_node_t **out) {
    if (sym->num_outputs < 1) return deft_error(DEFT_ERR_VALUE, "the symbol has no outputs");
    for (int i = 1; i < sym->num_outputs; i++)
        if (sym->outputs[i].node != sym->outputs[0].node)
            return deft_error(DEFT_ERR_VALUE, "the symbol groups outputs of several nodes, "
                                              "expected outputs of one node");
    *out = sym->outputs[0].node;
    return 0;
}

int DeftSymbolGetChildren(DeftSymbolHandle handle, DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_node_t *node;
    if (composed(handle, "sym", &s) || api_check_out(out, "out") || single_node(s->sym, &node))
        return -1;
    return wrap_entries(node->num_inputs, node->inputs, out);
}

/* Keep `names` (n new strings) as what the handle returns; frees them on failure. */
static int return_strings(api_symbol_t *s, int n, char **names, int *out_count,
                          const char *const **out_names) {
    clear_returned(s);
    s->strings = names;
    s->num_strings = n;
    *out_count = n;
    *out_names = (const char *const *)names;
    return 0;
}

typedef enum list_kind { LIST_ARGUMENTS, LIST_AUX, LIST_OUTPUTS } list_kind_t;

/* A variable is auxiliary when every use of it is an in-place update. */
static bool is_auxiliary(const deft_graph_t *g, const deft_node_t *var) {
    bool used = false;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *n = g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++) {
            if (n->inputs[k].node != var) continue;
            if (!(n->op->op->mutate_inputs & (1u << k))) return false;
            used = true;
        }
    }
    return used;
}

static char *output_name(const deft_graph_t *g, deft_entry_t e) {
    int id = deft_graph_node_id(g, e.node);
    const char *name = g->names[id];
    size_t len = strlen(name) + 32;
    char *text = malloc(len);
    if (!text) return NULL;
    if (!e.node->op)
        snprintf(text, len, "%s", name);
    else if (e.node->num_outputs == 1)
        snprintf(text, len, "%s_output", name);
    else
        snprintf(text, len, "%s_output%d", name, e.index);
    return text;
}

static int list_names(DeftSymbolHandle handle, list_kind_t kind, int *out_count,
                      const char *const **out_names) {
    api_symbol_t *s = NULL;
    deft_graph_t *g;
    if (composed(handle, "sym", &s) || api_check_out(out_count, "out_count") ||
        api_check_out(out_names, "out_names") ||
        deft_graph_build(s->sym->num_outputs, s->sym->outputs, &g))
        return -1;
    char **names = calloc((size_t)(g->num_nodes + s->sym->num_outputs + 1), sizeof *names);
    int n = 0, status = names ? 0 : -1;
    if (kind == LIST_OUTPUTS) {
        for (int o = 0; status == 0 && o < g->num_outputs; o++)
            status = (names[n++] = output_name(g, g->outputs[o])) ? 0 : -1;
    } else {
        for (int i = 0; status == 0 && i < g->num_nodes; i++) {
            if (g->nodes[i]->op || is_auxiliary(g, g->nodes[i]) != (kind == LIST_AUX)) continue;
            status = (names[n++] = strdup(g->names[i])) ? 0 : -1;
        }
    }
    deft_graph_free(g);
    if (status) {
        for (int i = 0; i < n; i++) free(names ? names[i] : NULL);
        free(names);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate names");
    }
    return return_strings(s, n, names, out_count, out_names);
}

int DeftSymbolListArguments(DeftSymbolHandle sym, int *out_count, const char *const **out_names) {
    API_BEGIN();
    return list_names(sym, LIST_ARGUMENTS, out_count, out_names);
}

int DeftSymbolListOutputs(DeftSymbolHandle sym, int *out_count, const char *const **out_names) {
    API_BEGIN();
    return list_names(sym, LIST_OUTPUTS, out_count, out_names);
}

int DeftSymbolListAuxiliaryStates(DeftSymbolHandle sym, int *out_count,
                                  const char *const **out_names) {
    API_BEGIN();
    return list_names(sym, LIST_AUX, out_count, out_names);
}

/* Keep `text` (a new string) as what the handle returns. */
static int return_text(api_symbol_t *s, char *text, const char **out) {
    clear_returned(s);
    s->text = text;
    *out = text;
    return 0;
}

int DeftSymbolGetName(DeftSymbolHandle handle, const char **out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_graph_t *g;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    if (s->sym->num_outputs < 1) return deft_error(DEFT_ERR_VALUE, "the symbol has no outputs");
    if (deft_graph_build(s->sym->num_outputs, s->sym->outputs, &g)) return -1;
    char *name = strdup(g->names[deft_graph_node_id(g, s->sym->outputs[0].node)]);
    deft_graph_free(g);
    if (!name) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a name");
    return return_text(s, name, out);
}

int DeftSymbolGetAttr(DeftSymbolHandle handle, const char *key, const char **out_value,
                      int *out_found) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_node_t *node;
    if (composed(handle, "sym", &s) || api_check_out(out_value, "out_value") ||
        api_check_out(out_found, "out_found") || single_node(s->sym, &node))
        return -1;
    if (!key) return deft_error(DEFT_ERR_VALUE, "key is NULL, expected an attribute name");
    const char *value = deft_node_attr(node, key);
    char *copy = value ? strdup(value) : NULL;
    if (value && !copy) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a value");
    return_text(s, copy, out_value);
    *out_found = value != NULL;
    return 0;
}

int DeftSymbolSetAttr(DeftSymbolHandle handle, const char *key, const char *value) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    if (api_symbol(handle, "sym", &s)) return -1;
    if (!key || !value)
        return deft_error(DEFT_ERR_VALUE, "%s is NULL, expected a string", key ? "value" : "key");
    return deft_symbol_set_attr(s->sym, key, value);
}

int DeftSymbolSaveToJSON(DeftSymbolHandle handle, const char **out_json) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    char *json;
    if (api_symbol(handle, "sym", &s) || api_check_out(out_json, "out_json") ||
        deft_symbol_to_json(s->sym, &json))
        return -1;
    return return_text(s, json, out_json);
}

int DeftSymbolCreateFromJSON(const char *json, DeftSymbolHandle *out) {
    API_BEGIN();
    deft_symbol_t *sym;
    if (!json) return deft_error(DEFT_ERR_VALUE, "json is NULL, expected JSON text");
    if (api_check_out(out, "out") || deft_symbol_from_json(json, &sym)) return -1;
    return wrap(sym, out);
}

int DeftSymbolSaveToFile(DeftSymbolHandle handle, const char *path) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    char *json;
    if (api_symbol(handle, "sym", &s)) return -1;
    if (!path) return deft_error(DEFT_ERR_VALUE, "path is NULL, expected a file name");
    if (deft_symbol_to_json(s->sym, &json)) return -1;
    FILE *f = fopen(path, "w");
    int status = f && fputs(json, f) >= 0 ? 0 : -1;
    if (f && fclose(f) != 0) status = -1;
    free(json);
    if (status) return deft_error(DEFT_ERR_VALUE, "cannot write '%s': %s", path, strerror(errno));
    return 0;
}

int DeftSymbolCreateFromFile(const char *path, DeftSymbolHandle *out) {
    API_BEGIN();
    if (!path) return deft_error(DEFT_ERR_VALUE, "path is NULL, expected a file name");
    if (api_check_out(out, "out")) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return deft_error(DEFT_ERR_VALUE, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    while (text) {
        len += fread(text + len, 1, cap - len - 1, f);
        if (len < cap - 1) break;
        char *grown = cap < ((size_t)1 << 30) ? realloc(text, cap * 2) : NULL;
        if (!grown) {
            free(text);
            text = NULL;
            break;
        }
        text = grown, cap *= 2;
    }
    int read_error = ferror(f);
    fclose(f);
    if (!text || read_error) {
        free(text);
        return deft_error(read_error ? DEFT_ERR_VALUE : DEFT_ERR_OUT_OF_MEMORY,
                          "cannot read '%s' (unreadable, or larger than 1 GiB)", path);
    }
    text[len] = '\0';
    deft_symbol_t *sym;
    int status = deft_symbol_from_json(text, &sym);
    free(text);
    return status ? -1 : wrap(sym, out);
}

int DeftSymbolToDot(DeftSymbolHandle handle, const char **out_dot) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    char *dot;
    if (api_symbol(handle, "sym", &s) || api_check_out(out_dot, "out_dot") ||
        deft_symbol_to_dot(s->sym, &dot))
        return -1;
    return return_text(s, dot, out_dot);
}

int DeftGetLiveSymbolCount(int64_t *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    *out = deft_handle_live_count(DEFT_HANDLE_SYMBOL);
    return 0;
}
