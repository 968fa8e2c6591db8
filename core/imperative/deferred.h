/*
 * Deferred compute (MXNet's deferred-compute RFC): while the calling thread
 * is in deferred mode, operator calls are recorded as graph nodes and return
 * lazy arrays, whose shapes and dtypes are inferred at once but whose values
 * are computed only when something needs them, as one memory-planned graph
 * run of just the part of the recorded graph they depend on.
 */
#ifndef DEFT_CORE_DEFERRED_H
#define DEFT_CORE_DEFERRED_H

#include "core/graph/symbol.h"
#include "core/imperative/ndarray.h"
#include "core/op/registry.h"

/* The calling thread's mode. */
bool deft_deferred_enabled(void);
void deft_deferred_set(bool on, bool *prev);

/*
 * Record a call whose parameters, inputs and outputs (out_desc) were checked
 * by deft_invoke: out[0..nout) receive new lazy arrays (out[] must be all
 * NULL: a recorded call has no arrays to write into). Normal inputs are kept
 * by the node until it is computed.
 */
int deft_deferred_record(const deft_op_entry_t *entry, const deft_param_value_t *params, int nin,
                         deft_ndarray_t *const *in, int nout, const deft_desc_t *out_desc,
                         int nparams, const char *const *keys, const char *const *vals,
                         deft_ndarray_t **out);

/*
 * Compute the lazy arrays among arrays[0..n) (NULL entries are skipped): the recorded nodes they
 * depend on that are not computed yet run as one graph run pushed to the engine (each node once;
 * every live lazy array among them gets its value). Wait on the arrays to see the values.
 */
int deft_deferred_compute(int n, deft_ndarray_t *const *arrays);

/* The position of the first lazy array among arrays[0..n) (NULL entries
 * skipped), or -1: writing into one is an error. */
int deft_deferred_find_lazy(int n, deft_ndarray_t *const *arrays);

/*
 * The recorded graph from inputs to outputs as a symbol whose arguments are
 * the inputs, named in_names, in order, and whose outputs are the outputs,
 * their nodes named out_names. With no inputs, the leaves must all be
 * arrays bound to variables (deft_deferred_bind), which become the arguments.
 */
int deft_deferred_export(int nin, deft_ndarray_t *const *in, const char *const *in_names, int nout,
                         deft_ndarray_t *const *out, const char *const *out_names,
                         deft_symbol_t **sym);

/* Bind arrays made outside deferred compute to graph variables named names[i]. */
int deft_deferred_bind(int n, deft_ndarray_t *const *arrays, const char *const *names);

/* Compute what is lazy, then forget the arrays' recorded history. */
int deft_deferred_clear(int n, deft_ndarray_t *const *arrays);

#endif
