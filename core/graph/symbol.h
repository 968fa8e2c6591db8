/*
 * Symbols: handles on a list of graph entries (NNVM's design). A symbol made
 * from an operator starts "atomic" (operator and attributes, no inputs);
 * composing it with input symbols makes its node. Every other operation
 * builds new nodes or new symbols; existing nodes are never changed.
 */
#ifndef DEFT_CORE_SYMBOL_H
#define DEFT_CORE_SYMBOL_H

#include "core/graph/graph.h"

/*
 * What a recording knew of an exported symbol's values: the output
 * descriptions of every node of its graph (the input variables' are the
 * arrays' that were recorded from). Valid for a run whose inputs have those
 * descriptions: the operators' inference gave them from the same inputs when
 * they were recorded, so an executor's first plan takes them instead of
 * inferring again. Immutable and reference counted; the nodes are borrowed
 * from the symbol's graph (whoever holds the types holds the graph).
 */
typedef struct deft_symbol_types {
    atomic_int refs;
    int num_nodes;
    const deft_node_t **nodes;
    int *first;        /* node j's descriptions: desc[first[j]] .. desc[first[j + 1] - 1] */
    deft_desc_t *desc; /* allocated with the rest */
} deft_symbol_types_t;

/* Types for n nodes with `entries` descriptions in all, one allocation, one reference. */
deft_symbol_types_t *deft_symbol_types_new(int n, int entries);
deft_symbol_types_t *deft_symbol_types_retain(deft_symbol_types_t *t);
void deft_symbol_types_release(deft_symbol_types_t *t);

typedef struct deft_symbol {
    int num_outputs;
    deft_entry_t *outputs;      /* retained */
    deft_symbol_types_t *types; /* an export's (owned reference), or NULL */
    /* The index of its graph as deft_graph_build_unnamed would make it, made by an
     * export from its walk (owned), or NULL: the first executor made from the symbol
     * takes it (deft_symbol_take_graph) instead of walking the graph again. */
    _Atomic(deft_graph_t *) graph;
    /* an atomic symbol: what its node will be once composed */
    const deft_op_entry_t *atomic_op;
    int atomic_num_attrs;
    char **atomic_keys, **atomic_vals;
} deft_symbol_t;

int deft_symbol_new_variable(const char *name, deft_symbol_t **out);
/* Parameters are checked now (unknown or unparsable ones are errors). */
int deft_symbol_new_atomic(const deft_op_entry_t *op, int num_attrs, const char *const *keys,
                           const char *const *vals, deft_symbol_t **out);
/* A symbol over the given entries (retained). */
int deft_symbol_from_entries(int n, const deft_entry_t *entries, deft_symbol_t **out);
void deft_symbol_free(deft_symbol_t *sym);
/* The export's index of the symbol's graph, now the caller's (deft_graph_free), or NULL
 * (none, or taken already). Thread-safe: one caller gets it. */
deft_graph_t *deft_symbol_take_graph(const deft_symbol_t *sym);

/*
 * Make an atomic symbol's node: inputs by position (keys NULL) or by input
 * name; inputs not given become variables named after the node and input.
 */
int deft_symbol_compose(deft_symbol_t *sym, const char *name, int num_args, const char *const *keys,
                        deft_symbol_t *const *args);

/* -1 with a clear error when the symbol is still atomic. */
int deft_symbol_check_composed(const deft_symbol_t *sym, const char *what);

/* Replace the symbol's single output node by one with `key` set to `value`. */
int deft_symbol_set_attr(deft_symbol_t *sym, const char *key, const char *value);

#endif
