/**
 * @file symbol.h
 * @brief Symbolic graphs: variables, operator symbols and their composition,
 *        groups, introspection, attributes, MXNet-compatible JSON and DOT.
 *
 * A symbol is a handle on one or more outputs of a graph. Graph nodes never
 * change once made; the calls that "modify" a symbol (compose, set an
 * attribute) point the handle at new nodes. Nodes without a name get one
 * from their graph, deterministically ("fullyconnected0",
 * "fullyconnected0_weight"). Every handle returned is owned by the caller
 * and released with DeftSymbolFree(). Strings and lists a symbol call
 * returns belong to that handle and stay valid until the next call on it
 * that returns strings, or until it is freed.
 */
#ifndef DEFT_SYMBOL_H
#define DEFT_SYMBOL_H

#include "deft/op.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle on a symbol. */
typedef struct DeftSymbol *DeftSymbolHandle;

/**
 * @brief A variable: a named input of a graph.
 * @param name a non-empty name.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on an empty or NULL name or NULL @p out.
 */
DEFT_API int DeftSymbolCreateVariable(const char *name, DeftSymbolHandle *out);

/**
 * @brief An operator symbol, not yet connected to inputs (see DeftSymbolCompose()).
 * @param op the operator.
 * @param num_params number of parameters (and attributes such as "__shape__").
 * @param keys parameter names.
 * @param vals parameter values, as strings.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a bad operator handle or a bad parameter, named.
 */
DEFT_API int DeftSymbolCreateAtomic(DeftOpHandle op, int num_params, const char *const *keys,
                                    const char *const *vals, DeftSymbolHandle *out);

/**
 * @brief Connect an operator symbol to its inputs.
 *
 * Inputs not given become variables named after the node and the input
 * ("fc_weight"). The symbol then stands for the new node's outputs.
 * @param sym a symbol from DeftSymbolCreateAtomic(), not yet composed.
 * @param name the node's name, or NULL for a name given by its graph.
 * @param num_args number of inputs given.
 * @param keys input names (see DeftOpGetInputs()), or NULL to pass inputs by position.
 * @param args single-output symbols, the inputs.
 * @return 0 on success; -1 if @p sym is not an uncomposed operator symbol, an input
 *         name is unknown or repeated, an input has other than one output, or
 *         there are too many inputs.
 */
DEFT_API int DeftSymbolCompose(DeftSymbolHandle sym, const char *name, int num_args,
                               const char *const *keys, const DeftSymbolHandle *args);

/**
 * @brief A symbol with the outputs of several symbols, in order.
 * @param num_symbols number of symbols.
 * @param symbols the symbols (each composed).
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a bad handle or NULL pointers.
 */
DEFT_API int DeftSymbolCreateGroup(int num_symbols, const DeftSymbolHandle *symbols,
                                   DeftSymbolHandle *out);

/**
 * @brief Another handle on the same outputs.
 * @param sym the symbol.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a bad handle or NULL @p out.
 */
DEFT_API int DeftSymbolCopy(DeftSymbolHandle sym, DeftSymbolHandle *out);

/**
 * @brief Release a symbol handle. NULL is a no-op.
 * @param sym the symbol, or NULL.
 * @return 0 on success; -1 if @p sym is not a live symbol handle.
 */
DEFT_API int DeftSymbolFree(DeftSymbolHandle sym);

/**
 * @brief Number of outputs of a symbol.
 * @param sym the symbol.
 * @param[out] out receives the count.
 * @return 0 on success; -1 on a bad handle, an uncomposed symbol or NULL @p out.
 */
DEFT_API int DeftSymbolGetNumOutputs(DeftSymbolHandle sym, int *out);

/**
 * @brief One output of a symbol, as a symbol.
 * @param sym the symbol.
 * @param index the output, in [0, number of outputs).
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a bad handle, an index out of range (DEFT_ERROR_INDEX) or NULL @p
 * out.
 */
DEFT_API int DeftSymbolGetOutput(DeftSymbolHandle sym, int index, DeftSymbolHandle *out);

/**
 * @brief Every output of every node the symbol reaches, inputs first.
 * @param sym the symbol.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a bad handle or NULL @p out.
 */
DEFT_API int DeftSymbolGetInternals(DeftSymbolHandle sym, DeftSymbolHandle *out);

/**
 * @brief The inputs of the symbol's (single) node, as a group (empty for a variable).
 * @param sym a symbol whose outputs all come from one node.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a bad handle, a group of several nodes, or NULL @p out.
 */
DEFT_API int DeftSymbolGetChildren(DeftSymbolHandle sym, DeftSymbolHandle *out);

/**
 * @brief Name of the symbol's first output node.
 * @param sym the symbol.
 * @param[out] out receives the name (owned by the handle).
 * @return 0 on success; -1 on a bad handle or NULL @p out.
 */
DEFT_API int DeftSymbolGetName(DeftSymbolHandle sym, const char **out);

/**
 * @brief Names of the graph's arguments: the variables it reads, in graph order.
 * @param sym the symbol.
 * @param[out] out_count receives the number of names.
 * @param[out] out_names receives the names (owned by the handle).
 * @return 0 on success; -1 on a bad handle or NULL out-pointers.
 */
DEFT_API int DeftSymbolListArguments(DeftSymbolHandle sym, int *out_count,
                                     const char *const **out_names);

/**
 * @brief Names of the symbol's outputs ("fc_output", or "split0_output1" for several).
 * @param sym the symbol.
 * @param[out] out_count receives the number of names.
 * @param[out] out_names receives the names (owned by the handle).
 * @return 0 on success; -1 on a bad handle or NULL out-pointers.
 */
DEFT_API int DeftSymbolListOutputs(DeftSymbolHandle sym, int *out_count,
                                   const char *const **out_names);

/**
 * @brief Names of the auxiliary states: variables that operators only update
 *        in place (such as optimizer state), never read as plain arguments.
 * @param sym the symbol.
 * @param[out] out_count receives the number of names.
 * @param[out] out_names receives the names (owned by the handle).
 * @return 0 on success; -1 on a bad handle or NULL out-pointers.
 */
DEFT_API int DeftSymbolListAuxiliaryStates(DeftSymbolHandle sym, int *out_count,
                                           const char *const **out_names);

/**
 * @brief An attribute (or operator parameter, as given) of the symbol's node.
 * @param sym a symbol whose outputs come from one node.
 * @param key the attribute's name.
 * @param[out] out_value receives the value (owned by the handle), or NULL.
 * @param[out] out_found receives 1 if the node has the attribute, else 0.
 * @return 0 on success; -1 on a bad handle or NULL pointers.
 */
DEFT_API int DeftSymbolGetAttr(DeftSymbolHandle sym, const char *key, const char **out_value,
                               int *out_found);

/**
 * @brief Set an attribute of the symbol's node ("__shape__", "ctx_group", or a parameter).
 *
 * Nodes never change: the symbol is pointed at a copy of its node with the
 * attribute set; other symbols that share the old node keep it.
 * @param sym a symbol whose outputs come from one node.
 * @param key the attribute's name.
 * @param value its value.
 * @return 0 on success; -1 on a bad handle, NULL strings, or a parameter value that does not parse.
 */
DEFT_API int DeftSymbolSetAttr(DeftSymbolHandle sym, const char *key, const char *value);

/**
 * @brief The symbol's graph as MXNet-compatible JSON.
 * @param sym the symbol.
 * @param[out] out_json receives the text (owned by the handle).
 * @return 0 on success; -1 on a bad handle, an uncomposed symbol or NULL @p out_json.
 */
DEFT_API int DeftSymbolSaveToJSON(DeftSymbolHandle sym, const char **out_json);

/**
 * @brief Load a symbol from JSON (deft's or MXNet 1.x's symbol layout).
 * @param json NUL-terminated JSON text; untrusted input is safe.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 (DEFT_ERROR_PARSE) with the JSON path of the first
 *         problem: malformed text, wrong types, missing fields, indices out of
 *         range or pointing forward, unknown operators, bad parameters.
 */
DEFT_API int DeftSymbolCreateFromJSON(const char *json, DeftSymbolHandle *out);

/**
 * @brief Save the symbol's JSON to a file.
 * @param sym the symbol.
 * @param path the file to write.
 * @return 0 on success; -1 on a bad handle or a file that cannot be written.
 */
DEFT_API int DeftSymbolSaveToFile(DeftSymbolHandle sym, const char *path);

/**
 * @brief Load a symbol from a JSON file.
 *
 * The file must be a regular file (not a directory, device or pipe) of at
 * most 256 MiB; it is read whole, by its size. Every error names the path.
 * @param path the file to read.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a file that cannot be opened or read, is not a
 *         regular file or is larger than 256 MiB (DEFT_ERROR_VALUE), holds a
 *         NUL byte (DEFT_ERROR_PARSE), or the errors of DeftSymbolCreateFromJSON().
 */
DEFT_API int DeftSymbolCreateFromFile(const char *path, DeftSymbolHandle *out);

/**
 * @brief The symbol's graph in Graphviz DOT (operators, names, known shapes).
 * @param sym the symbol.
 * @param[out] out_dot receives the text (owned by the handle).
 * @return 0 on success; -1 on a bad handle or NULL @p out_dot.
 */
DEFT_API int DeftSymbolToDot(DeftSymbolHandle sym, const char **out_dot);

/** Groups of a symbol's entries, as listed by the List functions. */
typedef enum DeftSymbolGroup {
    DEFT_ARGUMENTS = 0,       /**< DeftSymbolListArguments() order */
    DEFT_OUTPUTS = 1,         /**< DeftSymbolListOutputs() order */
    DEFT_AUXILIARY_STATES = 2 /**< DeftSymbolListAuxiliaryStates() order */
} DeftSymbolGroup;

/**
 * @brief Infer the shapes and dtypes of every argument, output and auxiliary state.
 *
 * Arguments not given use their "__shape__"/"__dtype__" attributes if they
 * have them. Inference runs forward, and backward where an operator allows
 * (FullyConnected's weight and bias from its data, elementwise inputs from
 * their outputs). Read the results with DeftSymbolGetInferredShape().
 * @param sym the symbol.
 * @param num_args number of arguments described.
 * @param names their names.
 * @param ndims their numbers of dimensions.
 * @param dims all their dimensions, one argument after another; -1 marks a
 *        dimension not known yet (a partial shape such as (-1, 784)), which
 *        inference fills in and checks against the known ones.
 * @param dtypes their ::DeftDType values, or NULL for float32.
 * @param[out] out_complete receives 1 if every shape is known, else 0.
 * @return 0 on success (complete or not); -1 on an unknown argument name, a bad
 *         shape or dtype, or an operator that rejects its inputs (named by node).
 */
DEFT_API int DeftSymbolInferShape(DeftSymbolHandle sym, int num_args, const char *const *names,
                                  const int *ndims, const int64_t *dims, const int *dtypes,
                                  int *out_complete);

/**
 * @brief A shape and dtype found by the last DeftSymbolInferShape() on this handle.
 * @param sym the symbol.
 * @param group a ::DeftSymbolGroup value.
 * @param index position in that group's list.
 * @param[out] out_dims receives the dimensions; room for @p capacity values.
 * @param capacity room in @p out_dims (DEFT_MAX_NDIM always suffices).
 * @param[out] out_ndim receives the number of dimensions, or -1 if still unknown.
 *             An argument given a partial shape that inference could not
 *             complete reports that shape, with -1 for the unknown dimensions.
 * @param[out] out_dtype receives the ::DeftDType, or -1 if unknown.
 * @return 0 on success; -1 if no inference has run, on a bad group, an index out
 *         of range (DEFT_ERROR_INDEX), too small a capacity, or NULL pointers.
 */
DEFT_API int DeftSymbolGetInferredShape(DeftSymbolHandle sym, int group, int index,
                                        int64_t *out_dims, int capacity, int *out_ndim,
                                        int *out_dtype);

/**
 * @brief Run graph passes by name, in order, and get the resulting symbol.
 *
 * Passes: "DCE" (drop nodes the outputs do not depend on), "CSE" (merge
 * equal deterministic nodes), "InferShape" (write inferred shapes and dtypes
 * into the variables' "__shape__"/"__dtype__" attributes), "Fuse" (replace
 * chains of elementwise operators whose intermediates are read only inside
 * the chain by one "_fused_elemwise" node, evaluated in cache-sized tiles;
 * gradients of the result work as before), "PlanMemory" (plan memory as
 * DeftCachedOpCreate() does and write each operator output's byte offset in
 * the arena, or -1 outside it, into its node's "__storage_offset__"
 * attribute; every shape must be known from the variables' "__shape__"
 * attributes), "Gradient" (DeftSymbolGradient() with respect to every
 * argument) and "PlaceDevice" (DeftSymbolPlaceDevice() with default cpu(0)
 * and no groups). The input symbol is unchanged.
 * @param sym the symbol.
 * @param passes comma-separated pass names, e.g. "InferShape,CSE,PlanMemory".
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on an unknown pass (the message lists the known
 *         ones) or the failure of a pass.
 */
DEFT_API int DeftSymbolApplyPasses(DeftSymbolHandle sym, const char *passes, DeftSymbolHandle *out);

/**
 * @brief The gradient graph of a symbol.
 *
 * Built in reverse topological order from every operator's gradient, which is
 * itself made of operators, so the result can be differentiated again.
 * Gradients that meet at an entry are summed.
 * @param sym the symbol to differentiate.
 * @param num_wrt number of arguments to differentiate with respect to.
 * @param wrt their names (see DeftSymbolListArguments()).
 * @param[out] out receives a new symbol (owned by the caller) whose outputs are
 *             the outputs of @p sym, then the gradient of each @p wrt argument,
 *             and whose arguments add one head gradient per output of @p sym,
 *             named "<output name>_head_grad".
 * @return 0 on success; -1 on an unknown argument name, or an operator on the
 *         path that has no gradient (DEFT_ERROR_NOT_IMPLEMENTED, naming the node).
 */
DEFT_API int DeftSymbolGradient(DeftSymbolHandle sym, int num_wrt, const char *const *wrt,
                                DeftSymbolHandle *out);

/**
 * @brief The training step of a loss: loss, gradient and optimizer updates as one graph.
 *
 * Run it with a CachedOp (DeftCachedOpCreate(), DeftCachedOpInvoke()): one
 * call per step computes the loss, differentiates output 0 of @p loss (with
 * a head gradient of ones, as DeftAutogradBackward() without head gradients)
 * with respect to @p params, and updates each parameter and its optimizer
 * states in place. The forward values the backward reads are planned with
 * the run, so nothing is recomputed and nothing outlives the step. Dropout
 * draws its masks inside the run, in the caller's training mode
 * (DeftAutogradSetIsTraining()).
 *
 * The step's arguments are those of @p loss, then "step_hyper": a 1-D float
 * array of at least 7 values (11 for "lamb"), read at every run (a schedule
 * changes values, not the graph): lr, wd, rescale_grad, clip_gradient
 * (negative: none), momentum ("sgd_mom", "nag") or beta1 ("adam", "adamw",
 * "lamb") or rho ("rmsprop", "rmsprop_centered", "adadelta"), beta2 (or
 * centered RMSProp's momentum gamma2), epsilon; "lamb" then reads its bias
 * corrections 1 - beta1^t and 1 - beta2^t (1: none) and the lower and upper
 * bound of its trust ratio's weight norm (negative: none). As MXNet's
 * adam_update, "adam" folds its bias correction into lr. Its auxiliary
 * states are those of @p loss, then each parameter's optimizer states,
 * named "<param>_<state>": mom ("sgd_mom", "nag"), mean and var ("adam",
 * "adamw", "lamb"), n ("rmsprop"), n, g and delta ("rmsprop_centered"),
 * history ("adagrad"), accg and accdelta ("adadelta"): arrays of the
 * parameter's shape and dtype, zeros before the first step. A parameter
 * that the loss does not depend on is not updated and has no states.
 * @param loss the loss symbol: output 0 is the loss, any others are passed on.
 * @param num_params number of parameters to train (at least 1).
 * @param params their names, arguments of @p loss.
 * @param optimizer "sgd", "sgd_mom" (momentum), "nag" (Nesterov momentum),
 *        "adam", "adamw" (Adam with decoupled weight decay), "rmsprop",
 *        "rmsprop_centered", "adagrad", "adadelta" or "lamb" (CPU only); the
 *        formulas are in core/math/step_math.h.
 * @param[out] out receives a new symbol (owned by the caller) whose outputs are
 *             those of @p loss, then one empty array.
 * @return 0 on success; -1 on an unknown optimizer, a name that is not an
 *         argument of @p loss (or is an auxiliary state, or is listed twice),
 *         a loss that depends on no parameter, or an operator without a gradient.
 */
DEFT_API int DeftSymbolTrainStep(DeftSymbolHandle loss, int num_params, const char *const *params,
                                 const char *optimizer, DeftSymbolHandle *out);

/**
 * @brief Place every node on a device and insert copies where edges cross devices.
 *
 * A node's device is its "__device__" attribute ("cpu(0)", "gpu(1)"), else
 * the device its "ctx_group" attribute maps to, else the default; a variable
 * with neither goes where its first reader runs. A "_copy_to_device" node is
 * inserted on every edge between different devices. Nodes made by
 * DeftSymbolGradient() carry their forward node's annotations, so a gradient
 * graph is placed forward and backward.
 * @param sym the symbol.
 * @param default_type ::DeftDeviceType of nodes without annotation.
 * @param default_id its device number.
 * @param num_groups number of ctx_group names mapped.
 * @param groups the group names.
 * @param types their ::DeftDeviceType values.
 * @param ids their device numbers.
 * @param[out] out receives a new handle, owned by the caller.
 * @return 0 on success; -1 on a group without a device, a bad "__device__"
 *         value (DEFT_ERROR_PARSE) or NULL pointers.
 */
DEFT_API int DeftSymbolPlaceDevice(DeftSymbolHandle sym, int default_type, int default_id,
                                   int num_groups, const char *const *groups, const int *types,
                                   const int *ids, DeftSymbolHandle *out);

/**
 * @brief Number of symbol handles created and not yet freed.
 * @param[out] out receives the count.
 * @return 0 on success; -1 if @p out is NULL.
 */
DEFT_API int DeftGetLiveSymbolCount(int64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_SYMBOL_H */
