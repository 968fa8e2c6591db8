#include "core/graph/place_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/pass.h"

typedef struct place_dev {
    int type, id;
} place_dev_t;

static void device_text(place_dev_t d, char *buf, size_t len) {
    deft_device_format((deft_device_t){(deft_device_type_t)d.type, d.id}, buf, len);
}

static bool same(place_dev_t a, place_dev_t b) {
    return a.type == b.type && a.id == b.id;
}

int deft_node_placed_device(const deft_node_t *node, bool *found, int *type, int *id) {
    const char *own = deft_node_attr(node, "__device__");
    *found = own != NULL;
    if (!own) return 0;
    static const deft_param_def_t def = {"__device__", DEFT_PARAM_DEVICE, NULL, "device", NULL,
                                         false};
    static const deft_op_t placement = {.name = "placement"};
    deft_param_value_t v;
    if (deft_param_parse(&placement, &def, own, &v)) return -1;
    *type = (int)v.t.v[0], *id = (int)v.t.v[1];
    return 0;
}

/* The node's own device or its group's; false when it has neither. */
static int annotated(const deft_node_t *node, const deft_placement_t *how, place_dev_t *out,
                     bool *found) {
    const char *group = deft_node_attr(node, "ctx_group");
    if (deft_node_placed_device(node, found, &out->type, &out->id)) return -1;
    if (!*found && group) {
        for (int k = 0; k < how->num_groups; k++)
            if (strcmp(how->groups[k], group) == 0) {
                *out = (place_dev_t){how->types[k], how->ids[k]};
                *found = true;
            }
        if (!*found)
            return deft_error(DEFT_ERR_VALUE, "ctx_group '%s' has no device in the placement",
                              group);
    }
    return 0;
}

static int assign_devices(const deft_graph_t *g, const deft_placement_t *how, place_dev_t *dev) {
    bool *found = calloc((size_t)g->num_nodes + 1, sizeof *found);
    if (!found) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the placement");
    int status = 0;
    for (int i = 0; i < g->num_nodes && status == 0; i++) {
        status = annotated(g->nodes[i], how, &dev[i], &found[i]);
        if (!found[i] && g->nodes[i]->op)
            dev[i] = (place_dev_t){how->default_type, how->default_id};
    }
    /* variables without a device: where their first reader runs */
    for (int i = 0; i < g->num_nodes && status == 0; i++) {
        if (found[i] || g->nodes[i]->op) continue;
        dev[i] = (place_dev_t){how->default_type, how->default_id};
        for (int c = i + 1; c < g->num_nodes; c++) {
            bool reads = false;
            for (int k = 0; k < g->nodes[c]->num_inputs; k++)
                reads = reads || g->nodes[c]->inputs[k].node == g->nodes[i];
            if (reads) {
                dev[i] = dev[c];
                break;
            }
        }
    }
    free(found);
    return status;
}

typedef struct copy_cache {
    int entry;
    place_dev_t to;
    deft_node_t *copy;
} copy_cache_t;

/* The copy of `src` (entry id `entry`, already rebuilt) on device `to`, made once. */
static int copy_of(copy_cache_t **cache, int *count, int entry, deft_entry_t src, place_dev_t to,
                   deft_entry_t *out) {
    for (int c = 0; c < *count; c++)
        if ((*cache)[c].entry == entry && same((*cache)[c].to, to)) {
            *out = (deft_entry_t){(*cache)[c].copy, 0};
            return 0;
        }
    copy_cache_t *grown = realloc(*cache, (size_t)(*count + 1) * sizeof **cache);
    if (!grown) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate the placement");
    *cache = grown;
    char text[32];
    device_text(to, text, sizeof text);
    const char *keys[2] = {"__device__", "device"}, *vals[2] = {text, text};
    deft_node_t *copy;
    if (deft_node_new_op(deft_registry_find("_copy_to_device"), NULL, 2, keys, vals, 1, &src,
                         &copy))
        return -1;
    (*cache)[(*count)++] = (copy_cache_t){entry, to, copy};
    *out = (deft_entry_t){copy, 0};
    return 0;
}

/* Node i again, with its device written and its inputs remapped (copies where devices differ). */
static int place_node(const deft_graph_t *g, int i, const place_dev_t *dev, deft_node_t **now,
                      copy_cache_t **cache, int *ncache) {
    const deft_node_t *node = g->nodes[i];
    char text[32];
    device_text(dev[i], text, sizeof text);
    deft_node_t *annotated_node;
    if (deft_node_with_attr(node, "__device__", text, &annotated_node)) return -1;
    if (!node->op) {
        now[i] = annotated_node;
        return 0;
    }
    deft_entry_t inputs[DEFT_OP_MAX_INPUTS];
    int status = 0;
    for (int k = 0; k < node->num_inputs && status == 0; k++) {
        int src = deft_graph_node_id(g, node->inputs[k].node);
        inputs[k] = (deft_entry_t){now[src], node->inputs[k].index};
        if (!same(dev[src], dev[i]))
            status = copy_of(cache, ncache, deft_graph_entry_id(g, src, node->inputs[k].index),
                             inputs[k], dev[i], &inputs[k]);
    }
    if (status == 0)
        status = deft_node_new_op(node->op, annotated_node->name, annotated_node->attrs.count,
                                  (const char *const *)annotated_node->attrs.keys,
                                  (const char *const *)annotated_node->attrs.vals, node->num_inputs,
                                  inputs, &now[i]);
    deft_node_release(annotated_node);
    return status;
}

int deft_pass_place_device(const deft_symbol_t *in, const deft_placement_t *how,
                           deft_symbol_t **out) {
    deft_graph_t *g;
    if (deft_symbol_check_composed(in, "sym") || deft_graph_build(in->num_outputs, in->outputs, &g))
        return -1;
    place_dev_t *dev = calloc((size_t)g->num_nodes + 1, sizeof *dev);
    deft_node_t **now = calloc((size_t)g->num_nodes + 1, sizeof *now);
    deft_entry_t *heads = calloc((size_t)g->num_outputs + 1, sizeof *heads);
    copy_cache_t *cache = NULL;
    int ncache = 0;
    int status = dev && now && heads ? assign_devices(g, how, dev)
                                     : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    for (int i = 0; i < g->num_nodes && status == 0; i++)
        status = place_node(g, i, dev, now, &cache, &ncache);
    for (int o = 0; o < g->num_outputs && status == 0; o++)
        heads[o] =
            (deft_entry_t){now[deft_graph_node_id(g, g->outputs[o].node)], g->outputs[o].index};
    if (status == 0) status = deft_symbol_from_entries(g->num_outputs, heads, out);
    for (int i = 0; now && i < g->num_nodes; i++) deft_node_release(now[i]);
    for (int c = 0; c < ncache; c++) deft_node_release(cache[c].copy);
    free(cache), free(dev), free(now), free(heads);
    deft_graph_free(g);
    return status;
}

int deft_pass_place_device_default(const deft_symbol_t *in, deft_symbol_t **out) {
    const deft_placement_t cpu0 = {.default_type = DEFT_DEV_CPU, .default_id = 0};
    return deft_pass_place_device(in, &cpu0, out);
}
