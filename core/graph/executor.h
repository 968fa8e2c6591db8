/*
 * The executor (MXNet's CachedOp): runs a symbol's graph again and again.
 * For each distinct set of input shapes and dtypes it infers every entry,
 * plans memory once and allocates one arena, then keeps the plan; a run is
 * a walk of the nodes in order over tensors, with no per-node allocation or
 * dispatch. This layer runs graphs on tensors; calling an executor on arrays
 * through the engine is the imperative layer's (core/imperative/cached_call.h).
 *
 * A one-off graph (recorded, exported, made into an executor, run once) pays
 * for each step once: the executor of an exported symbol takes the index the
 * export made of its graph and, for inputs shaped as recorded, the recorded
 * types instead of inferring them (symbol.h); its nodes are named only when
 * a name is asked for (graph.h).
 *
 * Kept plans are bounded: an executor keeps at most DEFT_PLAN_CACHE_SIZE
 * plans (environment, default 64) and DEFT_PLAN_CACHE_BYTES bytes of their
 * arenas (default 512 MiB), dropping the least recently used first; the
 * plan a run is about to use is kept whatever its size. Both are read once,
 * when the first executor is made. A dropped plan's arenas go when the runs
 * queued on it are done; it is made again when its shapes come back.
 */
#ifndef DEFT_CORE_EXECUTOR_H
#define DEFT_CORE_EXECUTOR_H

#include "core/graph/branches.h"
#include "core/graph/plan_memory.h"
#include "core/engine/engine.h"
#include "core/graph/symbol.h"

typedef struct deft_cached_op deft_cached_op_t;
typedef struct deft_subgraph deft_subgraph_t;
/* An executor's plan for one input signature on given devices: shapes,
 * memory plan and arenas. Held by whoever acquired it, it keeps its executor
 * and its arenas alive (a run queued on it outlives the plan cache's trims). */
typedef struct deft_cached_plan deft_cached_plan_t;

/* Input i's tensor in a list of the caller's (of tensors, of arrays, ...). */
typedef const deft_tensor_t *(*deft_tensor_at_fn)(const void *list, int i);
/* deft_tensor_at_fn over an array of deft_tensor_t. */
const deft_tensor_t *deft_tensor_list_at(const void *list, int i);

int deft_cached_op_new(const deft_symbol_t *sym, bool plan_memory, deft_cached_op_t **out);
void deft_cached_op_release(deft_cached_op_t *op);

/* The plan for inputs `in` (the arguments in DeftSymbolListArguments order,
 * then the auxiliary states; read through `at`), made if new: held for the
 * caller until deft_cached_plan_release. */
int deft_cached_op_acquire(deft_cached_op_t *op, int nin, const void *in, deft_tensor_at_fn at,
                           deft_cached_plan_t **out);
void deft_cached_plan_release(deft_cached_plan_t *p);
/* Output o's description, and in *device where it lives. */
deft_desc_t deft_cached_plan_output(const deft_cached_plan_t *p, int o, deft_device_t *device);
size_t deft_cached_plan_arena_bytes(const deft_cached_plan_t *p);
/* The arena on device slot `slot`, or NULL. */
deft_storage_t *deft_cached_plan_arena(const deft_cached_plan_t *p, int slot);
/* Run the graph now, on this thread, in the plan's arenas (so one run of a
 * plan at a time: deft_cached_op_var orders them), on the inputs and outputs
 * read through `at`, in training mode or not. */
int deft_cached_plan_run(const deft_cached_plan_t *p, int nin, const void *in, int nout,
                         const void *out, deft_tensor_at_fn at, bool training);

/* The figures of the last invocation's plan (offset is NULL); -1 (error
 * set) if there was none. */
int deft_cached_op_last_plan(deft_cached_op_t *op, deft_memory_plan_t *out);

/* What the executor's branches learnt (branches.h). */
void deft_cached_op_branch_stat(const deft_cached_op_t *op, deft_branch_stat_t *out);

/* The bounds of a plan cache (DEFT_PLAN_CACHE_BYTES, DEFT_PLAN_CACHE_SIZE). */
void deft_plan_cache_limits(size_t *bytes, int *plans);
/* Bytes of arenas the executor keeps in its plans. */
size_t deft_cached_op_cached_bytes(deft_cached_op_t *op);
/* Every executor drops its plans with an arena on `dev`
 * (DeftMemoryReleaseCached); runs queued on them keep them until done. */
void deft_cached_ops_release_arenas(deft_device_t dev);

int deft_cached_op_num_inputs(const deft_cached_op_t *op);
/* The name and the node of input i (a variable of the graph). */
const char *deft_cached_op_input_name(const deft_cached_op_t *op, int i);
const deft_node_t *deft_cached_op_input_node(const deft_cached_op_t *op, int i);

/* The outputs' descriptions for inputs described by `in` (planned if new). */
int deft_cached_op_infer(deft_cached_op_t *op, int nin, const deft_desc_t *in, int *nout,
                         deft_desc_t *out);

/* Run the graph now, on this thread, on tensors, with an arena of its own:
 * how a recorded call of the executor (one _CachedOp node) is computed. */
int deft_cached_op_forward(deft_cached_op_t *op, int nin, const deft_tensor_t *in, int nout,
                           const deft_tensor_t *out);

/* The executor's graph registered as a subgraph (subgraph.h), keeping the
 * activations its gradient reads or not (deft_subgraph_new), made on first
 * use and kept by the executor (borrowed). */
int deft_cached_op_subgraph(deft_cached_op_t *op, bool keep, deft_subgraph_t **out);
/* The number of the graph's outputs. */
int deft_cached_op_num_outputs(const deft_cached_op_t *op);
/* The graph it runs (the executor's, after its own passes such as FoldBatchNorm). */
const deft_graph_t *deft_cached_op_graph(const deft_cached_op_t *op);
/* The symbol it was made from, before those passes: what autograd records,
 * as one node or node by node (its variables are the graph's). */
const deft_symbol_t *deft_cached_op_source(const deft_cached_op_t *op);

/* Whether a run writes some of its inputs (auxiliary states), or input i. */
bool deft_cached_op_updates_inputs(const deft_cached_op_t *op);
bool deft_cached_op_input_written(const deft_cached_op_t *op, int i);
/* Whether a node waits for a host callback (runs must not go inline). */
bool deft_cached_op_blocking(const deft_cached_op_t *op);
/* Whether a node draws random numbers (runs write deft_random_stream_var). */
bool deft_cached_op_draws(const deft_cached_op_t *op);
/* The engine variable every run writes: runs share their plan's arenas. */
deft_var_t *deft_cached_op_var(const deft_cached_op_t *op);

/* Run every operator node of g that is not a leaf, in order, over the
 * per-entry tensors t (leaves' entries filled in by the caller), in training
 * mode or not (deft_op_training). */
int deft_graph_forward(const deft_graph_t *g, deft_tensor_t *t, bool training);
/* The same, with the branch state of g (NULL: none): its nodes timed, or independent ones
 * paired (branches.h). graph_run.c holds both. */
int deft_graph_run(const deft_graph_t *g, deft_tensor_t *t, bool training, deft_branches_t *b);

#endif
