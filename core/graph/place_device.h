/*
 * Device placement (NNVM's PlaceDevice). Every node gets a "__device__"
 * attribute: its own, else the device its "ctx_group" maps to, else the
 * default; a variable without either goes where its first reader runs. A
 * _copy_to_device node is inserted on every edge whose two ends are on
 * different devices (one per value and destination, shared by its readers).
 * Gradients built by the gradient pass inherit their forward node's
 * annotations, so placing a gradient graph places the backward nodes with
 * their forward nodes, and copies appear on backward crossings too.
 */
#ifndef DEFT_CORE_PLACE_DEVICE_H
#define DEFT_CORE_PLACE_DEVICE_H

#include "core/graph/symbol.h"

typedef struct deft_placement {
    int default_type, default_id;
    int num_groups;
    const char *const *groups;
    const int *types, *ids;
} deft_placement_t;

/* The node's "__device__" attribute as (type, id); *found false without one. */
int deft_node_placed_device(const deft_node_t *node, bool *found, int *type, int *id);

int deft_pass_place_device(const deft_symbol_t *in, const deft_placement_t *how,
                           deft_symbol_t **out);
/* The named pass: default cpu(0), no groups (nodes' own "__device__" decide). */
int deft_pass_place_device_default(const deft_symbol_t *in, deft_symbol_t **out);

#endif
