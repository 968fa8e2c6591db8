/* The operator registry: every family's descriptors, found by name, with parsed defaults. */
#ifndef DEFT_CORE_REGISTRY_H
#define DEFT_CORE_REGISTRY_H

#include <stdatomic.h>

#include "core/op/op.h"

typedef struct deft_op_entry {
    uint32_t magic;   /* lets the C API check an operator handle */
    const char *name; /* what it is found by: op->name, or one of MXNet's aliases of it */
    const deft_op_t *op;
    int num_params;
    bool has_required;      /* some parameter has no default */
    bool has_string_params; /* parsed values point at text their owner keeps */
    deft_params_t defaults;
} deft_op_entry_t;

#define DEFT_OP_ENTRY_MAGIC 0xDEF70F0Fu

/* Another name of an operator (aliases.c): MXNet registers many under two. */
typedef struct deft_op_alias {
    const char *alias, *name;
} deft_op_alias_t;
extern const deft_op_alias_t deft_op_aliases[]; /* ends with {NULL, NULL} */

int deft_registry_count(void);
/* Entries in alphabetical order of name. */
const deft_op_entry_t *deft_registry_at(int index);
/* All names, alphabetical, in one array that lives as long as the process. */
const char *const *deft_registry_names(void);
/* Write a suggestion for a mistyped name ("did you mean 'dot'?") into buf, or "". */
void deft_registry_suggest(const char *name, char *buf, size_t len);
/* NULL when no operator has that name. */
const deft_op_entry_t *deft_registry_find(const char *name);
/* deft_registry_find, remembered in *kept (a static of the caller's): entries never move
 * and a name is never registered twice, so a graph pass looks a built-in up once (a lookup,
 * a binary search by strcmp, cost 3.5 instructions per node of a one-off 100-node graph).
 * A name not found is looked up again next time (it may be added). */
const deft_op_entry_t *deft_registry_find_kept(const char *name,
                                               _Atomic(const deft_op_entry_t *) *kept);
/* Run operator `name`'s kernel (its GPU one for an output on a GPU) on one
 * input into one output, with parameter `key` parsed from `value` and the
 * others at their defaults: how a family reuses another's kernel. */
int deft_registry_run_kernel(const char *name, const char *key, const char *value,
                             const deft_tensor_t *in, const deft_tensor_t *out);
/* Add an operator made at run time (custom operators); `op` must live as long
 * as the process. -1 when the name is taken or memory runs out. */
int deft_registry_add(const deft_op_t *op);

/*
 * Parse string parameters. *out points to defaults or to a per-thread cache
 * slot that stays valid until this thread's next call. -1 naming the
 * operator and parameter on an unknown, duplicate, missing or bad value.
 */
int deft_op_parse_params(const deft_op_entry_t *entry, int n, const char *const *keys,
                         const char *const *vals, const deft_params_t **out);

/*
 * A cache slot's parameters as a graph node keeps them: the values and the keys and values as
 * given, sorted by key (string values point at them). Immutable, reference counted (nodes are
 * freed on any thread): a recorded call's node shares its slot's set instead of copying.
 */
typedef struct deft_param_set {
    atomic_int refs;
    const deft_op_entry_t *entry;
    int count;
    char **keys, **vals;
    deft_param_value_t *v; /* entry->num_params values */
} deft_param_set_t;

/* The set of this thread's cache slot whose values deft_op_parse_params gave as `v` for
 * `entry`, retained; NULL when v is no slot's (the defaults, a parse too long to cache). */
deft_param_set_t *deft_param_set_take(const deft_op_entry_t *entry, const deft_param_value_t *v);
deft_param_set_t *deft_param_set_retain(deft_param_set_t *set);
void deft_param_set_release(deft_param_set_t *set);

/* Parse one value as `def` says; -1 with an error naming op and parameter. */
int deft_param_parse(const deft_op_t *op, const deft_param_def_t *def, const char *text,
                     deft_param_value_t *out);

/* Human-readable type of a parameter for introspection, e.g. "int", "tuple of int". */
const char *deft_param_type_name(const deft_param_def_t *def);

#endif
