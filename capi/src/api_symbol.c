/* Symbols: creation, composition, introspection, attributes, JSON and DOT. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/src/api.h"
#include "core/graph/gradient.h"
#include "core/graph/train_step.h"
#include "core/graph/infer.h"
#include "core/graph/json.h"
#include "core/graph/pass.h"
#include "core/graph/place_device.h"

/* A handle's object: the symbol, and the strings last returned through it. */
typedef struct api_symbol {
    deft_symbol_t *sym;
    int num_strings;
    char **strings;
    char *text;
    /* the last inference: per group, a description and whether it is known */
    int num_inferred[3];
    deft_desc_t *inferred[3];
    bool *inferred_known[3];
} api_symbol_t;

static void clear_inferred(api_symbol_t *s) {
    for (int g = 0; g < 3; g++) {
        free(s->inferred[g]), free(s->inferred_known[g]);
        s->inferred[g] = NULL, s->inferred_known[g] = NULL, s->num_inferred[g] = 0;
    }
}

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

/* For the other API files: the symbol behind a handle, composed. */
int api_symbol_get(DeftSymbolHandle handle, const char *what, deft_symbol_t **out) {
    api_symbol_t *s = NULL;
    if (api_symbol(handle, what, &s) || deft_symbol_check_composed(s->sym, what)) return -1;
    *out = s->sym;
    return 0;
}

/* Resolve a handle to a composed symbol. */
static int composed(DeftSymbolHandle handle, const char *what, api_symbol_t **out) {
    return api_symbol(handle, what, out) || deft_symbol_check_composed((*out)->sym, what);
}

int api_symbol_wrap(deft_symbol_t *sym, DeftSymbolHandle *out) {
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
    return api_symbol_wrap(sym, out);
}

int DeftSymbolCreateVariable(const char *name, DeftSymbolHandle *out) {
    API_BEGIN();
    deft_symbol_t *sym;
    if (api_check_out(out, "out") || deft_symbol_new_variable(name, &sym)) return -1;
    return api_symbol_wrap(sym, out);
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
    return api_symbol_wrap(sym, out);
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
    clear_inferred(s);
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
    deft_node_t *node = NULL;
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

static char *output_name(const deft_graph_t *g, deft_entry_t e) {
    int id = deft_graph_node_id(g, e.node);
    const char *name = g->names[id];
    size_t len = strlen(name) + 32;
    char *text = malloc(len);
    if (!text) return NULL;
    deft_node_output_name(e.node, name, e.index, text, len);
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
            if (g->nodes[i]->op || deft_graph_is_auxiliary(g, g->nodes[i]) != (kind == LIST_AUX))
                continue;
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
    deft_node_t *node = NULL;
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
    return api_symbol_wrap(sym, out);
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
    deft_symbol_t *sym;
    if (api_check_out(out, "out") || deft_symbol_from_json_file(path, &sym)) return -1;
    return api_symbol_wrap(sym, out);
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

/* Variable descriptions given by name, as a table by node id. */
static int given_args(const deft_graph_t *g, int num_args, const char *const *names,
                      const int *ndims, const int64_t *dims, const int *dtypes, deft_desc_t *desc,
                      bool *known) {
    int64_t offset = 0;
    for (int a = 0; a < num_args; a++) {
        int id = -1;
        for (int i = 0; names[a] && i < g->num_nodes && id < 0; i++)
            if (!g->nodes[i]->op && strcmp(g->names[i], names[a]) == 0) id = i;
        if (id < 0)
            return deft_error(DEFT_ERR_VALUE,
                              "names[%d] is '%s', which is not an argument of the "
                              "symbol",
                              a, names[a] ? names[a] : "(NULL)");
        char what[32];
        snprintf(what, sizeof what, "shape of '%.16s'", names[a]);
        if (deft_shape_init_partial(&desc[id].shape, dims + offset, ndims[a], what)) return -1;
        desc[id].dtype = DEFT_DT_FLOAT32;
        if (dtypes) {
            snprintf(what, sizeof what, "dtypes[%d]", a);
            if (deft_dtype_check(dtypes[a], what)) return -1;
            desc[id].dtype = (deft_dtype_t)dtypes[a];
        }
        known[id] = true;
        offset += ndims[a];
    }
    return 0;
}

/* Copy the entries of one group out of an inference table. */
static int keep_group(api_symbol_t *s, int group, int n, const int *entries,
                      const deft_graph_types_t *t) {
    s->inferred[group] = calloc((size_t)(n ? n : 1), sizeof(deft_desc_t));
    s->inferred_known[group] = calloc((size_t)(n ? n : 1), sizeof(bool));
    if (!s->inferred[group] || !s->inferred_known[group])
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate inference results");
    for (int i = 0; i < n; i++) {
        s->inferred[group][i] = t->desc[entries[i]];
        s->inferred_known[group][i] = t->known[entries[i]];
    }
    s->num_inferred[group] = n;
    return 0;
}

static int keep_inferred(api_symbol_t *s, const deft_graph_t *g, const deft_graph_types_t *t) {
    int *entries = malloc(sizeof(int) * (size_t)(g->num_nodes + g->num_outputs + 1));
    if (!entries) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate inference results");
    int status = 0;
    for (int group = DEFT_ARGUMENTS; status == 0 && group <= DEFT_AUXILIARY_STATES; group++) {
        int n = 0;
        if (group == DEFT_OUTPUTS) {
            for (int o = 0; o < g->num_outputs; o++)
                entries[n++] = deft_graph_entry_id(g, deft_graph_node_id(g, g->outputs[o].node),
                                                   g->outputs[o].index);
        } else {
            for (int i = 0; i < g->num_nodes; i++)
                if (!g->nodes[i]->op &&
                    deft_graph_is_auxiliary(g, g->nodes[i]) == (group == DEFT_AUXILIARY_STATES))
                    entries[n++] = g->row_ptr[i];
        }
        status = keep_group(s, group, n, entries, t);
    }
    free(entries);
    return status;
}

int DeftSymbolInferShape(DeftSymbolHandle handle, int num_args, const char *const *names,
                         const int *ndims, const int64_t *dims, const int *dtypes,
                         int *out_complete) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_graph_t *g;
    if (composed(handle, "sym", &s) || api_check_out(out_complete, "out_complete")) return -1;
    if (num_args < 0 || (num_args > 0 && (!names || !ndims || !dims)))
        return deft_error(DEFT_ERR_VALUE,
                          "num_args is %d, expected >= 0 with names, ndims and "
                          "dims when > 0",
                          num_args);
    if (deft_graph_build(s->sym->num_outputs, s->sym->outputs, &g)) return -1;
    deft_desc_t *desc = calloc((size_t)g->num_nodes, sizeof *desc);
    bool *known = calloc((size_t)g->num_nodes, sizeof *known);
    deft_graph_types_t t = {0};
    int status = desc && known ? 0 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    if (status == 0) status = given_args(g, num_args, names, ndims, dims, dtypes, desc, known);
    if (status == 0) status = deft_graph_infer(g, desc, known, &t);
    if (status == 0) {
        clear_inferred(s);
        status = keep_inferred(s, g, &t);
        *out_complete = t.num_unknown == 0;
    }
    deft_graph_types_free(&t);
    free(desc), free(known);
    deft_graph_free(g);
    return status;
}

int DeftSymbolGetInferredShape(DeftSymbolHandle handle, int group, int index, int64_t *out_dims,
                               int capacity, int *out_ndim, int *out_dtype) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    if (api_symbol(handle, "sym", &s) || api_check_out(out_dims, "out_dims") ||
        api_check_out(out_ndim, "out_ndim") || api_check_out(out_dtype, "out_dtype"))
        return -1;
    if (group < DEFT_ARGUMENTS || group > DEFT_AUXILIARY_STATES)
        return deft_error(DEFT_ERR_VALUE, "group is %d, expected a DeftSymbolGroup (0, 1 or 2)",
                          group);
    if (!s->inferred[group])
        return deft_error(DEFT_ERR_VALUE, "no inference has run on this symbol handle "
                                          "(call DeftSymbolInferShape first)");
    if (index < 0 || index >= s->num_inferred[group])
        return deft_error(DEFT_ERR_INDEX, "index is %d, but the group has %d entries", index,
                          s->num_inferred[group]);
    const deft_desc_t *d = &s->inferred[group][index];
    /* an unknown entry may still hold a partial shape given for it */
    bool known = s->inferred_known[group][index] || deft_shape_is_partial(&d->shape);
    if (known && capacity < d->shape.ndim)
        return deft_error(DEFT_ERR_VALUE, "capacity is %d, but the shape has %d dimensions",
                          capacity, d->shape.ndim);
    for (int i = 0; known && i < d->shape.ndim; i++) out_dims[i] = d->shape.dims[i];
    *out_ndim = known ? d->shape.ndim : -1;
    *out_dtype = known ? (int)d->dtype : -1;
    return 0;
}

int DeftSymbolApplyPasses(DeftSymbolHandle handle, const char *passes, DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_symbol_t *result;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    if (!passes) return deft_error(DEFT_ERR_VALUE, "passes is NULL, expected pass names");
    if (deft_passes_apply(s->sym, passes, &result)) return -1;
    return api_symbol_wrap(result, out);
}

int DeftSymbolGradient(DeftSymbolHandle handle, int num_wrt, const char *const *wrt,
                       DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_symbol_t *grad;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    if (num_wrt < 0 || (num_wrt > 0 && !wrt))
        return deft_error(DEFT_ERR_VALUE, "num_wrt is %d with wrt %p", num_wrt, (const void *)wrt);
    if (deft_symbol_gradient(s->sym, num_wrt, wrt, &grad)) return -1;
    return api_symbol_wrap(grad, out);
}

int DeftSymbolTrainStep(DeftSymbolHandle handle, int num_params, const char *const *params,
                        const char *optimizer, DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_symbol_t *step;
    if (composed(handle, "loss", &s) || api_check_out(out, "out")) return -1;
    if (deft_symbol_train_step(s->sym, num_params, params, optimizer, &step)) return -1;
    return api_symbol_wrap(step, out);
}

int DeftSymbolPlaceDevice(DeftSymbolHandle handle, int default_type, int default_id, int num_groups,
                          const char *const *groups, const int *types, const int *ids,
                          DeftSymbolHandle *out) {
    API_BEGIN();
    api_symbol_t *s = NULL;
    deft_symbol_t *placed;
    if (composed(handle, "sym", &s) || api_check_out(out, "out")) return -1;
    if (num_groups < 0 || (num_groups > 0 && (!groups || !types || !ids)))
        return deft_error(DEFT_ERR_VALUE,
                          "num_groups is %d, expected >= 0 with groups, types and "
                          "ids when > 0",
                          num_groups);
    if ((default_type != DEFT_CPU && default_type != DEFT_GPU) || default_id < 0)
        return deft_error(DEFT_ERR_VALUE, "the default device (%d, %d) is not a device",
                          default_type, default_id);
    for (int k = 0; k < num_groups; k++)
        if (!groups[k] || (types[k] != DEFT_CPU && types[k] != DEFT_GPU) || ids[k] < 0)
            return deft_error(DEFT_ERR_VALUE, "group %d has no name or no valid device", k);
    deft_placement_t how = {default_type, default_id, num_groups, groups, types, ids};
    if (deft_pass_place_device(s->sym, &how, &placed)) return -1;
    return api_symbol_wrap(placed, out);
}

int DeftGetLiveSymbolCount(int64_t *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    *out = deft_handle_live_count(DEFT_HANDLE_SYMBOL);
    return 0;
}
