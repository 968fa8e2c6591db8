/*
 * Graph nodes and entries (NNVM's design).
 *
 * A node is an operator with its string attributes and input entries, or a
 * variable (no operator). An entry is (node, output index). Nodes are
 * immutable once made and reference counted: an entry holds its node, so a
 * node keeps its inputs alive, and freeing the last symbol or array that
 * reaches a node frees it and, transitively, what only it reached.
 *
 * Nodes may be unnamed: a graph names them by position when it is indexed
 * (graph.h), so default names depend on the graph, never on a process-wide
 * counter.
 */
#ifndef DEFT_CORE_NODE_H
#define DEFT_CORE_NODE_H

#include <stdatomic.h>

#include "core/op/registry.h"

typedef struct deft_node deft_node_t;

typedef struct deft_entry {
    deft_node_t *node;
    int index;
} deft_entry_t;

/* String attributes, sorted by key; stored in the node's own allocation. */
typedef struct deft_attrs {
    int count;
    char **keys, **vals;
    char *text; /* the strings */
} deft_attrs_t;

/* A node's counts word: its references (low half) and its pending consumers (high half). */
#define DEFT_NODE_REFS    UINT64_C(0xffffffff)
#define DEFT_NODE_PENDING (UINT64_C(1) << 32)

struct deft_node {
    /* Two counts in one word: the references to the node (low 32 bits) and, for a recorded
     * node, its consumers that still need its values (high 32 bits, record.h). A recorded
     * call takes its reference to an input and counts itself there with one locked add
     * (deft_node_new_call): a locked instruction costs as much as a tenth of recording a
     * call. */
    _Atomic uint64_t counts;
    const deft_op_entry_t *op;   /* NULL: a variable */
    char *name;                  /* NULL until a graph names it (graph.h), then fixed */
    char *input_role;            /* variables made for a missing input: the input's name */
    deft_attrs_t attrs;          /* operator parameters as given, and other attributes */
    deft_param_value_t *params;  /* parsed parameters (op->num_params of them), or NULL */
    deft_param_set_t *param_set; /* where params and attrs are when shared (retained), or NULL */
    int num_inputs, num_outputs;
    /* Variables with a rank (> 0) come first in a graph, by rank: how an exported
     * symbol (and one loaded from JSON) keeps its arguments in the order given. */
    int arg_rank;
    bool is_record; /* allocated as a record (core/base/records.h), not by malloc */
    /* counted among each input's pending consumers when made (deft_node_new_call) */
    bool pending_inputs;
    /* State that a layer above keeps per node (the imperative layer's record of
     * a recorded call), freed with the node; set once, before the node is shared. */
    void *ext;
    size_t ext_bytes; /* room for ext made with the node (deft_node_new_call), or 0 */
    void (*ext_free)(deft_node_t *node);
    void *held; /* what the operator's parameters name (deft_op_t hold), kept for the node's life */
    deft_node_t *free_next; /* used only while freeing (no recursion) */
    deft_entry_t inputs[];  /* each holds a reference to its node */
};

/* The outputs of an operator node that callers see (a variable has one). */
static inline int deft_node_num_visible_outputs(const deft_node_t *node) {
    return node->op ? deft_op_num_visible_outputs(node->op->op, node->params, node->num_outputs)
                    : node->num_outputs;
}

/* The name of output `index` of `node` named `name`, as MXNet lists it: the
 * variable's own name; name_<output_names[index]>; name_output for a node
 * with one visible output; else name_output<index>. Cut to fit len. */
void deft_node_output_name(const deft_node_t *node, const char *name, int index, char *buf,
                           size_t len);

/* Keys such as "__shape__", "ctx_group" or "lr_mult" are attributes of the
 * node, not parameters of its operator. */
bool deft_attr_is_annotation(const char *key);

/*
 * New variable node with one reference. `name` may be NULL (then `role`
 * names it after its consumer). Attributes are copied.
 */
int deft_node_new_variable(const char *name, const char *role, int num_attrs,
                           const char *const *keys, const char *const *vals, deft_node_t **out);

/*
 * New operator node with one reference; the inputs are retained. Keys that
 * are not annotations must be parameters of the operator; they are parsed
 * now, so a bad value is an error here. The input count must suit the op.
 */
int deft_node_new_op(const deft_op_entry_t *op, const char *name, int num_attrs,
                     const char *const *keys, const char *const *vals, int num_inputs,
                     const deft_entry_t *inputs, deft_node_t **out);

/*
 * The node of a recorded operator call: like deft_node_new_op with keys and
 * vals the call's parameters as given, and `params` their values, already
 * parsed and checked by the call (so they are not parsed again): when they
 * are a parameter cache slot's, the node shares the slot's set
 * (deft_param_set_take) instead of copying them. With ext_bytes, ext points
 * at that much room in the node's own allocation, not initialised, for the
 * layer above's state (one allocation per recorded call); ext stays NULL when
 * the room would not fit in a record. With `pending`, the node is also
 * counted once among the pending consumers of each input (in the same add
 * as its reference); whoever asks for that uncounts it.
 */
int deft_node_new_call(const deft_op_entry_t *op, const deft_param_value_t *params, int num_params,
                       const char *const *keys, const char *const *vals, int num_inputs,
                       const deft_entry_t *inputs, size_t ext_bytes, bool pending,
                       deft_node_t **out);

/* A copy of operator node `node` named `name` (NULL: unnamed) on other inputs
 * (as many as it has), its parameters copied as they are parsed, not parsed again
 * (or shared, when the node shares a parameter set). */
int deft_node_copy_op(const deft_node_t *node, const char *name, const deft_entry_t *inputs,
                      deft_node_t **out);

/* A copy of `node` with one attribute set (or replaced). */
int deft_node_with_attr(const deft_node_t *node, const char *key, const char *value,
                        deft_node_t **out);

deft_node_t *deft_node_retain(deft_node_t *node);
/* n more references at once (a node handed to several arrays). */
void deft_node_retain_many(deft_node_t *node, int n);
/* The references to a node now: 1 means the caller's is the only one (nobody else can take
 * one), whatever else may change. */
static inline uint32_t deft_node_refs(const deft_node_t *node) {
    return (uint32_t)(atomic_load_explicit(&node->counts, memory_order_acquire) & DEFT_NODE_REFS);
}
/* Drop a reference; frees the node (and releases its inputs) at zero.
 * Iterative, so a long chain of nodes does not overflow the stack. ext_free
 * runs before the inputs are released, so it may still look at them. */
void deft_node_release(deft_node_t *node);

/* The value of an attribute, or NULL. */
const char *deft_node_attr(const deft_node_t *node, const char *key);

#endif
