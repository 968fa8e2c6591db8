/*
 * Graph passes, registered by name. A pass reads a symbol and returns a new
 * one; nodes are never changed, so the input symbol stays valid and the
 * output shares every node the pass did not need to rebuild.
 */
#ifndef DEFT_CORE_PASS_H
#define DEFT_CORE_PASS_H

#include "core/graph/symbol.h"

typedef int (*deft_pass_fn)(const deft_symbol_t *in, deft_symbol_t **out);

typedef struct deft_pass {
    const char *name;
    const char *description;
    deft_pass_fn run;
} deft_pass_t;

/* NULL when no pass has that name. */
const deft_pass_t *deft_pass_find(const char *name);
/* Apply a comma-separated list of pass names in order ("CSE,DCE"). */
int deft_passes_apply(const deft_symbol_t *in, const char *names, deft_symbol_t **out);

/* The passes, each in its own file. */
int deft_pass_dce(const deft_symbol_t *in, deft_symbol_t **out);
int deft_pass_cse(const deft_symbol_t *in, deft_symbol_t **out);
int deft_pass_infer_shape(const deft_symbol_t *in, deft_symbol_t **out);
int deft_pass_fuse(const deft_symbol_t *in, deft_symbol_t **out);
int deft_pass_plan_memory(const deft_symbol_t *in, deft_symbol_t **out);
int deft_pass_fold_bn(const deft_symbol_t *in, deft_symbol_t **out);
/* The pass on a built graph: *out is the folded symbol, or NULL when g has
 * no BatchNorm (g is then already what the pass would give). */
int deft_fold_bn_graph(const deft_graph_t *g, deft_symbol_t **out);

/*
 * A symbol over the outputs of `g`, with nodes substituted: node i becomes
 * what node same_as[i] became (same_as[i] < i; NULL or -1: itself), or
 * replace[i] if given (NULL or NULL entry: itself). A replacement's inputs
 * may be nodes of `g`: they are mapped like any node's. Nodes whose inputs
 * changed are rebuilt; the others are shared.
 */
int deft_graph_rebuild(const deft_graph_t *g, const int *same_as, deft_node_t *const *replace,
                       deft_symbol_t **out);

#endif
