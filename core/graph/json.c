#define _POSIX_C_SOURCE 200809L
#include "core/graph/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/error.h"
#include "deft/base.h"

/* MXNet 1.9.1's version number: MXNet reads this attribute to pick its loader. */
#define MXNET_VERSION 10901

static int oom(void) {
    return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate JSON");
}

/* ---- saving ---- */

static cJSON *entry_json(const deft_graph_t *g, deft_entry_t e) {
    int ids[3] = {deft_graph_node_id(g, e.node), e.index, 0};
    return cJSON_CreateIntArray(ids, 3);
}

/* MXNet cannot load a variadic operator (Concat, stack, add_n) without its
 * num_args: an operator that declares the parameter gets it written from its
 * input count when it was not given. */
static bool lacks_num_args(const deft_node_t *node) {
    if (!node->op || deft_node_attr(node, "num_args")) return false;
    for (const deft_param_def_t *p = node->op->op->params; p && p->name; p++)
        if (strcmp(p->name, "num_args") == 0) return true;
    return false;
}

static cJSON *node_json(const deft_graph_t *g, int i) {
    const deft_node_t *node = g->nodes[i];
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "op", node->op ? node->op->op->name : "null");
    cJSON_AddStringToObject(j, "name", g->names[i]);
    bool count_inputs = lacks_num_args(node);
    if (node->attrs.count > 0 || count_inputs) {
        cJSON *attrs = cJSON_AddObjectToObject(j, "attrs");
        char count[16];
        snprintf(count, sizeof count, "%d", node->num_inputs);
        for (int a = 0; attrs && a <= node->attrs.count; a++) { /* keys stay sorted */
            bool last = a == node->attrs.count;
            if (count_inputs && (last || strcmp(node->attrs.keys[a], "num_args") > 0)) {
                cJSON_AddStringToObject(attrs, "num_args", count);
                count_inputs = false;
            }
            if (!last) cJSON_AddStringToObject(attrs, node->attrs.keys[a], node->attrs.vals[a]);
        }
    }
    cJSON *inputs = cJSON_AddArrayToObject(j, "inputs");
    for (int k = 0; inputs && k < node->num_inputs; k++)
        cJSON_AddItemToArray(inputs, entry_json(g, node->inputs[k]));
    return j;
}

static cJSON *typed_int(int value) {
    cJSON *pair = cJSON_CreateArray();
    if (pair) {
        cJSON_AddItemToArray(pair, cJSON_CreateString("int"));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(value));
    }
    return pair;
}

int deft_symbol_to_json(const deft_symbol_t *sym, char **out) {
    if (deft_symbol_check_composed(sym, "symbol")) return -1;
    deft_graph_t *g;
    if (deft_graph_build(sym->num_outputs, sym->outputs, &g)) return -1;
    cJSON *root = cJSON_CreateObject();
    cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
    cJSON *args = cJSON_AddArrayToObject(root, "arg_nodes");
    for (int i = 0; nodes && args && i < g->num_nodes; i++) {
        cJSON_AddItemToArray(nodes, node_json(g, i));
        if (!g->nodes[i]->op) cJSON_AddItemToArray(args, cJSON_CreateNumber(i));
    }
    cJSON *rows = cJSON_AddArrayToObject(root, "node_row_ptr");
    for (int i = 0; rows && i <= g->num_nodes; i++)
        cJSON_AddItemToArray(rows, cJSON_CreateNumber(g->row_ptr[i]));
    cJSON *heads = cJSON_AddArrayToObject(root, "heads");
    for (int o = 0; heads && o < g->num_outputs; o++)
        cJSON_AddItemToArray(heads, entry_json(g, g->outputs[o]));
    cJSON *attrs = cJSON_AddObjectToObject(root, "attrs");
    if (attrs) {
        cJSON_AddItemToObject(attrs, "mxnet_version", typed_int(MXNET_VERSION));
        cJSON_AddItemToObject(attrs, "deft_version", typed_int(DEFT_VERSION));
    }
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    deft_graph_free(g);
    if (!text) return oom();
    *out = text;
    return 0;
}

/* ---- loading ---- */

typedef struct loader {
    int num_nodes;
    deft_node_t **nodes;
} loader_t;

static int bad(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const char *path, const char *fmt, ...) {
    char detail[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    return deft_error(DEFT_ERR_PARSE, "%s: %s", path, detail);
}

/* An integer in [lo, hi) stored as a JSON number. */
static int read_index(const cJSON *item, const char *path, int lo, int hi, const char *expected,
                      int *out) {
    if (!cJSON_IsNumber(item)) return bad(path, "is not a number, expected %s", expected);
    double v = item->valuedouble;
    if (v != floor(v) || v < lo || v >= hi) return bad(path, "is %g, expected %s", v, expected);
    *out = (int)v;
    return 0;
}

/* [node, index] or [node, index, version], node before `limit`. */
static int read_entry(const loader_t *l, const cJSON *item, const char *path, int limit,
                      deft_entry_t *out) {
    int n = cJSON_GetArraySize(item);
    if (!cJSON_IsArray(item) || (n != 2 && n != 3))
        return bad(path, "is not an entry, expected [node, output] or [node, output, version]");
    char sub[160];
    int node = 0, index = 0; /* set by read_index; initialised for -O3 flow analysis */
    char expected[96];
    snprintf(sub, sizeof sub, "%s[0]", path);
    snprintf(expected, sizeof expected, "a node index below %d (nodes come after their inputs)",
             limit);
    if (read_index(cJSON_GetArrayItem(item, 0), sub, 0, limit, expected, &node)) return -1;
    snprintf(sub, sizeof sub, "%s[1]", path);
    snprintf(expected, sizeof expected, "an output of node %d, below %d", node,
             l->nodes[node]->num_outputs);
    if (read_index(cJSON_GetArrayItem(item, 1), sub, 0, l->nodes[node]->num_outputs, expected,
                   &index))
        return -1;
    *out = (deft_entry_t){l->nodes[node], index};
    return 0;
}

static const cJSON *node_attrs(const cJSON *j) {
    static const char *const spellings[] = {"attrs", "attr", "param"}; /* MXNet's over the years */
    for (int s = 0; s < 3; s++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, spellings[s]);
        if (a) return a;
    }
    return NULL;
}

static int load_node(loader_t *l, const cJSON *j, int i) {
    char path[64], sub[96];
    snprintf(path, sizeof path, "nodes[%d]", i);
    if (!cJSON_IsObject(j)) return bad(path, "is not an object");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(j, "op");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(j, "inputs");
    const cJSON *attrs = node_attrs(j);
    if (!cJSON_IsString(op)) return bad(path, "has no \"op\" string");
    if (!cJSON_IsString(name)) return bad(path, "has no \"name\" string");
    if (inputs && !cJSON_IsArray(inputs)) return bad(path, "\"inputs\" is not an array");
    if (attrs && !cJSON_IsObject(attrs)) return bad(path, "\"attrs\" is not an object");
    int num_attrs = attrs ? cJSON_GetArraySize(attrs) : 0, k = 0;
    if (num_attrs > 64) return bad(path, "has %d attributes, more than 64", num_attrs);
    const char *keys[64], *vals[64];
    for (const cJSON *a = attrs ? attrs->child : NULL; a; a = a->next, k++) {
        if (!cJSON_IsString(a))
            return bad(path,
                       "attribute \"%s\" is not a string (MXNet stores every attribute "
                       "as a string)",
                       a->string);
        keys[k] = a->string, vals[k] = a->valuestring;
    }
    int num_inputs = inputs ? cJSON_GetArraySize(inputs) : 0;
    if (num_inputs > DEFT_OP_MAX_INPUTS)
        return bad(path, "has %d inputs, more than %d", num_inputs, DEFT_OP_MAX_INPUTS);
    deft_entry_t entries[DEFT_OP_MAX_INPUTS];
    for (int e = 0; e < num_inputs; e++) {
        snprintf(sub, sizeof sub, "%s.inputs[%d]", path, e);
        if (read_entry(l, cJSON_GetArrayItem(inputs, e), sub, i, &entries[e])) return -1;
    }
    if (strcmp(op->valuestring, "null") == 0) {
        if (num_inputs > 0) return bad(path, "is a variable (op \"null\") with inputs");
        return deft_node_new_variable(name->valuestring, NULL, num_attrs, keys, vals, &l->nodes[i]);
    }
    const deft_op_entry_t *entry = deft_registry_find(op->valuestring);
    if (!entry) {
        char hint[128];
        deft_registry_suggest(op->valuestring, hint, sizeof hint);
        return bad(path, "unknown operator '%s'%s", op->valuestring, hint);
    }
    /* Errors from the operator name the node's path first. */
    char context[160];
    snprintf(context, sizeof context, "DeftSymbolCreateFromJSON: %s (\"%s\")", path,
             name->valuestring);
    const char *caller = deft_error_swap_function(context);
    int status = deft_node_new_op(entry, name->valuestring, num_attrs, keys, vals, num_inputs,
                                  entries, &l->nodes[i]);
    deft_error_swap_function(caller);
    /* Whatever was wrong, it was wrong in the JSON: report it as a parse error. */
    if (status && deft_error_kind() != DEFT_ERR_OUT_OF_MEMORY)
        deft_error_restore(DEFT_ERR_PARSE, deft_error_message());
    return status;
}

/* Variables keep the order they were saved in (list_arguments, executor inputs). */
static void rank_variables(const loader_t *l) {
    int rank = 0;
    for (int i = 0; i < l->num_nodes; i++)
        if (!l->nodes[i]->op) l->nodes[i]->arg_rank = ++rank;
}

static int check_optional_tables(const loader_t *l, const cJSON *root) {
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(root, "arg_nodes");
    if (args) {
        if (!cJSON_IsArray(args)) return bad("arg_nodes", "is not an array");
        int k = 0;
        for (const cJSON *a = args->child; a; a = a->next, k++) {
            char path[48];
            int id = 0;
            snprintf(path, sizeof path, "arg_nodes[%d]", k);
            if (read_index(a, path, 0, l->num_nodes, "a node index", &id)) return -1;
            if (l->nodes[id]->op) return bad(path, "is node %d, which is not a variable", id);
        }
    }
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "node_row_ptr");
    if (rows) {
        if (!cJSON_IsArray(rows) || cJSON_GetArraySize(rows) != l->num_nodes + 1)
            return bad("node_row_ptr", "is not an array of %d numbers", l->num_nodes + 1);
        /* A running count of node outputs, each node at least one. The
         * counts are the writer's: MXNet's may differ from deft's where an
         * operator keeps other hidden outputs (sort's indices, the pooling
         * workspace of MKL-DNN builds) or fewer (RNN's reserve space is not
         * among MXNet's outputs), so only the table's form is checked;
         * heads and inputs are checked against deft's own counts. */
        int prev = -1;
        for (int i = 0; i <= l->num_nodes; i++) {
            char path[48];
            int v = 0;
            snprintf(path, sizeof path, "node_row_ptr[%d]", i);
            int lo = i == 0 ? 0 : prev + 1, hi = i == 0 ? 1 : INT_MAX;
            if (read_index(cJSON_GetArrayItem(rows, i), path, lo, hi,
                           i == 0 ? "0" : "a running count of node outputs", &v))
                return -1;
            prev = v;
        }
    }
    return 0;
}

static int load(const cJSON *root, deft_symbol_t **out) {
    if (!cJSON_IsObject(root)) return bad("(root)", "is not an object");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(root, "heads");
    if (!cJSON_IsArray(nodes)) return bad("nodes", "is missing or not an array");
    if (!cJSON_IsArray(heads)) return bad("heads", "is missing or not an array");
    loader_t l = {cJSON_GetArraySize(nodes), NULL};
    if (l.num_nodes == 0) return bad("nodes", "is empty");
    l.nodes = calloc((size_t)l.num_nodes, sizeof *l.nodes);
    if (!l.nodes) return oom();
    int status = 0, i = 0;
    for (const cJSON *j = nodes->child; j && status == 0; j = j->next, i++)
        status = load_node(&l, j, i);
    if (status == 0) status = check_optional_tables(&l, root);
    if (status == 0) rank_variables(&l);
    int num_heads = cJSON_GetArraySize(heads);
    deft_entry_t *entries = calloc((size_t)(num_heads ? num_heads : 1), sizeof *entries);
    if (!entries && status == 0) status = oom();
    if (status == 0 && num_heads == 0) status = bad("heads", "is empty");
    for (int h = 0; status == 0 && h < num_heads; h++) {
        char path[32];
        snprintf(path, sizeof path, "heads[%d]", h);
        status = read_entry(&l, cJSON_GetArrayItem(heads, h), path, l.num_nodes, &entries[h]);
    }
    if (status == 0) status = deft_symbol_from_entries(num_heads, entries, out);
    free(entries);
    for (int n = 0; n < l.num_nodes; n++) deft_node_release(l.nodes[n]);
    free(l.nodes);
    return status;
}

int deft_symbol_from_json(const char *json, deft_symbol_t **out) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        size_t at = end ? (size_t)(end - json) : 0;
        return deft_error(DEFT_ERR_PARSE, "invalid JSON at byte %zu (near \"%.20s\")", at,
                          end ? end : "");
    }
    int status = load(root, out);
    cJSON_Delete(root);
    return status;
}

/* ---- files ---- */

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a pipe";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

/* The whole of a regular file of at most DEFT_SYMBOL_FILE_MAX_BYTES, NUL-terminated. */
static int read_text(const char *path, char **out, size_t *out_len) {
    /* O_NONBLOCK: opening a pipe must not wait for a writer before it is refused */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return deft_error(DEFT_ERR_VALUE, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    int status = 0;
    char *text = NULL;
    size_t len = 0;
    if (fstat(fd, &st) != 0)
        status = deft_error(DEFT_ERR_VALUE, "cannot read '%s': %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        status = deft_error(DEFT_ERR_VALUE,
                            "'%s' is not a regular file (%s), expected a symbol JSON file", path,
                            file_kind(st.st_mode));
    else if ((uintmax_t)st.st_size > DEFT_SYMBOL_FILE_MAX_BYTES)
        status = deft_error(DEFT_ERR_VALUE,
                            "'%s' is %jd bytes, more than the %zu (%zu MiB) a symbol file may have",
                            path, (intmax_t)st.st_size, DEFT_SYMBOL_FILE_MAX_BYTES,
                            DEFT_SYMBOL_FILE_MAX_BYTES >> 20);
    else if (!(text = malloc((size_t)st.st_size + 1)))
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %jd bytes to read '%s'",
                            (intmax_t)st.st_size, path);
    /* what the size said, or less if the file shrank meanwhile */
    while (status == 0 && len < (size_t)st.st_size) {
        ssize_t n = read(fd, text + len, (size_t)st.st_size - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            status = deft_error(DEFT_ERR_VALUE, "cannot read '%s': %s", path, strerror(errno));
        if (n <= 0) break;
        len += (size_t)n;
    }
    close(fd);
    if (status) {
        free(text);
        return -1;
    }
    text[len] = '\0';
    *out = text, *out_len = len;
    return 0;
}

int deft_symbol_from_json_file(const char *path, deft_symbol_t **out) {
    char *text = NULL;
    size_t len = 0;
    if (read_text(path, &text, &len)) return -1;
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        size_t at = (size_t)(nul - text);
        free(text);
        return deft_error(DEFT_ERR_PARSE,
                          "'%s' contains a NUL byte at byte %zu, expected symbol JSON text", path,
                          at);
    }
    /* the loader's message without the API function, which the one below names once */
    const char *caller = deft_error_swap_function(NULL);
    int status = deft_symbol_from_json(text, out);
    deft_error_swap_function(caller);
    free(text);
    if (status == 0) return 0;
    char detail[DEFT_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s", deft_error_message());
    deft_error_kind_t kind = deft_error_kind();
    return deft_error(kind ? kind : DEFT_ERR_PARSE, "'%s': %s", path, detail);
}

/* ---- Graphviz ---- */

static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int n = vsnprintf(*buf + *len, *cap - *len, fmt, args);
        va_end(args);
        if (n < 0) return -1;
        if (*len + (size_t)n < *cap) {
            *len += (size_t)n;
            return 0;
        }
        size_t grown = *cap * 2 + (size_t)n;
        char *b = realloc(*buf, grown);
        if (!b) return -1;
        *buf = b, *cap = grown;
    }
}

/* DOT strings are double-quoted: escape quotes and backslashes in names. */
static void dot_escape(const char *in, char *out, size_t len) {
    size_t o = 0;
    for (; *in && o + 2 < len; in++) {
        if (*in == '"' || *in == '\\') out[o++] = '\\';
        out[o++] = *in;
    }
    out[o] = '\0';
}

int deft_symbol_to_dot(const deft_symbol_t *sym, char **out) {
    if (deft_symbol_check_composed(sym, "symbol")) return -1;
    deft_graph_t *g;
    if (deft_graph_build(sym->num_outputs, sym->outputs, &g)) return -1;
    size_t len = 0, cap = 1024;
    char *buf = malloc(cap);
    int status = buf ? appendf(&buf, &len, &cap, "digraph deft {\n  rankdir=BT;\n") : -1;
    for (int i = 0; status == 0 && i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        char name[256];
        dot_escape(g->names[i], name, sizeof name);
        const char *shape = deft_node_attr(node, "__shape__");
        char shape_text[128] = "";
        if (shape) dot_escape(shape, shape_text, sizeof shape_text);
        status = appendf(&buf, &len, &cap, "  n%d [label=\"%s%s%s%s%s\", shape=%s];\n", i,
                         node->op ? node->op->op->name : name, node->op ? "\\n" : "",
                         node->op ? name : "", shape ? "\\n" : "", shape_text,
                         node->op ? "box" : "ellipse");
        for (int k = 0; status == 0 && k < node->num_inputs; k++)
            status = appendf(&buf, &len, &cap, "  n%d -> n%d;\n",
                             deft_graph_node_id(g, node->inputs[k].node), i);
    }
    if (status == 0) status = appendf(&buf, &len, &cap, "}\n");
    deft_graph_free(g);
    if (status) {
        free(buf);
        return oom();
    }
    *out = buf;
    return 0;
}
