/*
 * An extension library with a real rewrite, "fold_identity": nodes that
 * compute x*1, x/1, x+0 or x-0 (the _mul_scalar, _div_scalar, _plus_scalar
 * and _minus_scalar operators) are bypassed: whatever read their output
 * reads their input instead. The option "verbose" = "1" reports how many
 * nodes were folded on standard error.
 *
 * It works on the graph's JSON (MXNet layout) with cJSON, as a pass written
 * in any language could: nodes[i] = {op, name, attrs, inputs: [[node, index,
 * version], ...]}, heads = [[node, index, version], ...].
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deft/lib_api.h>

/* The scalar that makes node an identity, or NULL when it is not one of ours. */
static const char *identity_scalar(const cJSON *node) {
    const cJSON *op = cJSON_GetObjectItem(node, "op");
    if (!cJSON_IsString(op)) return NULL;
    if (!strcmp(op->valuestring, "_mul_scalar") || !strcmp(op->valuestring, "_div_scalar"))
        return "1";
    if (!strcmp(op->valuestring, "_plus_scalar") || !strcmp(op->valuestring, "_minus_scalar"))
        return "0";
    return NULL;
}

static bool is_identity(const cJSON *node) {
    const char *want = identity_scalar(node);
    const cJSON *attrs = cJSON_GetObjectItem(node, "attrs");
    const cJSON *scalar = attrs ? cJSON_GetObjectItem(attrs, "scalar") : NULL;
    return want && cJSON_IsString(scalar) && strtod(scalar->valuestring, NULL) == atof(want);
}

/* Point an entry [node, index, version] past folded nodes (forward[i]: what node i passes on). */
static void redirect(cJSON *entry, const cJSON *const *forward, int num_nodes) {
    for (;;) {
        cJSON *node = cJSON_GetArrayItem(entry, 0);
        if (!cJSON_IsNumber(node) || node->valueint < 0 || node->valueint >= num_nodes) return;
        const cJSON *to = forward[node->valueint];
        if (!to) return;
        for (int k = 0; k < 2; k++)
            cJSON_SetNumberValue(cJSON_GetArrayItem(entry, k),
                                 cJSON_GetArrayItem(to, k)->valuedouble);
    }
}

static int fold_identity(const char *graph_json, int num_options, const char *const *keys,
                         const char *const *vals, char **out_json, char *error, size_t error_len,
                         void *user) {
    (void)user;
    int verbose = 0;
    for (int i = 0; i < num_options; i++) {
        if (strcmp(keys[i], "verbose") != 0) {
            snprintf(error, error_len, "unknown option '%s' (fold_identity takes verbose)",
                     keys[i]);
            return 1;
        }
        verbose = atoi(vals[i]);
    }
    cJSON *root = cJSON_Parse(graph_json);
    cJSON *nodes = root ? cJSON_GetObjectItem(root, "nodes") : NULL;
    if (!cJSON_IsArray(nodes)) {
        snprintf(error, error_len, "the graph has no nodes array");
        cJSON_Delete(root);
        return 1;
    }
    int n = cJSON_GetArraySize(nodes), folded = 0;
    const cJSON **forward = calloc((size_t)n + 1, sizeof *forward);
    if (!forward) {
        cJSON_Delete(root);
        return 1;
    }
    int i = 0;
    for (cJSON *node = nodes->child; node; node = node->next, i++) {
        cJSON *inputs = cJSON_GetObjectItem(node, "inputs");
        for (cJSON *in = inputs ? inputs->child : NULL; in; in = in->next) redirect(in, forward, n);
        if (is_identity(node) && cJSON_GetArraySize(inputs) == 1) {
            forward[i] = cJSON_GetArrayItem(inputs, 0);
            folded++;
        }
    }
    cJSON *heads = cJSON_GetObjectItem(root, "heads");
    for (cJSON *h = heads ? heads->child : NULL; h; h = h->next) redirect(h, forward, n);
    free(forward);
    if (verbose) fprintf(stderr, "fold_identity: folded %d nodes\n", folded);
    *out_json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return *out_json ? 0 : 1;
}

int deft_lib_initialize(int abi_version) {
    if (abi_version != DEFT_ABI_VERSION) return 1;
    return DeftLibRegisterPass("fold_identity", fold_identity, cJSON_free, NULL);
}
