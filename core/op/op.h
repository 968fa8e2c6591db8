/*
 * Operators.
 *
 * An operator is a static descriptor: its name (MXNet's where MXNet has the
 * operator), documentation, inputs, a parameter table, one function that
 * infers output shapes and dtypes, the CPU kernel, in-place and mutation
 * hints, and a gradient slot that the graph layer fills. Each family of
 * operators lives in one file as a table of these descriptors; the registry
 * collects the tables and is the single source the C API, graph JSON and
 * the bindings read.
 *
 * Parameters arrive as strings (MXNet's convention, so every language and
 * saved graph passes them alike) and are parsed into deft_params_t once per
 * distinct set of strings (see registry.c for the cache).
 */
#ifndef DEFT_CORE_OP_H
#define DEFT_CORE_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/base/tensor.h"

#define DEFT_OP_MAX_PARAMS  16
#define DEFT_OP_MAX_INPUTS  64
#define DEFT_OP_MAX_OUTPUTS 64

typedef enum deft_param_type {
    DEFT_PARAM_INT,    /* "3", "-1" */
    DEFT_PARAM_FLOAT,  /* "0.5", "1e-3", "inf", "nan" */
    DEFT_PARAM_BOOL,   /* "true", "false", "1", "0" (any case) */
    DEFT_PARAM_TUPLE,  /* "(2,3)", "[2, 3]", "2", "()"; entries may be "None" if allowed */
    DEFT_PARAM_ENUM,   /* one of a fixed list of words */
    DEFT_PARAM_DTYPE,  /* a dtype name: "float32", ... */
    DEFT_PARAM_DEVICE, /* "cpu(0)", "gpu(1)": t.v[0] the device type, t.v[1] the id */
    DEFT_PARAM_STRING, /* any text; s points at storage owned by whoever owns the params */
} deft_param_type_t;

typedef struct deft_param_def {
    const char *name;
    deft_param_type_t type;
    const char *default_value; /* NULL: required */
    const char *doc;
    const char *const *choices; /* ENUM: NULL-terminated list of words */
    bool allow_none;            /* "None" is a valid value (and a tuple entry) */
} deft_param_def_t;

/* A tuple entry that was written "None" (slice bounds). */
#define DEFT_TUPLE_NONE INT64_MIN

typedef struct deft_tuple {
    int n;
    int64_t v[DEFT_SHAPE_MAX_NDIM];
} deft_tuple_t;

typedef struct deft_param_value {
    bool none; /* the value was "None" */
    int64_t i; /* INT, BOOL (0/1), ENUM (index into choices), DTYPE (code) */
    double f;  /* FLOAT */
    deft_tuple_t t;
    const char *s; /* STRING: a graph node's attribute, or the parameter cache's copy */
} deft_param_value_t;

/* Parsed parameters, in the order of the operator's parameter table. Kernels
 * see them as an array (p[k]) so a queued call can keep just the ones it has. */
typedef struct deft_params {
    deft_param_value_t v[DEFT_OP_MAX_PARAMS];
} deft_params_t;

/* Shape and dtype of an input or output, known before any data exists. */
typedef struct deft_desc {
    deft_shape_t shape;
    deft_dtype_t dtype;
} deft_desc_t;

typedef struct deft_op deft_op_t;

/* Check inputs and fill *nout and out[0..*nout); -1 naming the op and input. */
typedef int (*deft_infer_fn)(const deft_op_t *op, const deft_param_value_t *p, int nin,
                             const deft_desc_t *in, int *nout, deft_desc_t *out);

/* Compute outputs (already allocated as inferred). Inputs never alias outputs
 * unless the op's inplace hint says that output may reuse that input. */
typedef int (*deft_forward_fn)(const deft_op_t *op, const deft_param_value_t *p, int nin,
                               const deft_tensor_t *in, int nout, const deft_tensor_t *out);

/* Fill in[i] (and set known[i]) for inputs that follow from the known ones
 * and the outputs; never changes a known input. Returns 0 (nothing to say is fine). */
typedef int (*deft_infer_inputs_fn)(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                    deft_desc_t *in, bool *known, const deft_desc_t *out,
                                    const bool *out_known);

/* Forward of broadcast_to and broadcast_like: input 0 broadcast to output 0's shape. */
int deft_forward_broadcast_input(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                 const deft_tensor_t *in, int nout, const deft_tensor_t *out);

/* The rule of elementwise operators: every input has the output's shape and dtype. */
int deft_infer_inputs_like_output(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  deft_desc_t *in, bool *known, const deft_desc_t *out,
                                  const bool *out_known);

/*
 * Gradients are graph nodes, so gradients of gradients come free. An
 * operator's gradient function builds them through this interface, which
 * the graph layer implements (the operator layer sits below the graph
 * layer and never sees its nodes).
 */
typedef struct deft_gref {
    void *node; /* NULL: no value (a zero gradient) */
    int index;
} deft_gref_t;

typedef struct deft_grad_builder deft_grad_builder_t;
struct deft_grad_builder {
    /* A new node applying `op` (by name) with NULL-terminated key/value
     * params; its output `output`. Failures are recorded and yield NULL refs. */
    deft_gref_t (*apply)(deft_grad_builder_t *b, const char *op, int nin, const deft_gref_t *in,
                         const char *const *params, int output);
    deft_gref_t (*input)(deft_grad_builder_t *b, int k);          /* the forward node's input k */
    deft_gref_t (*output)(deft_grad_builder_t *b, int k);         /* its output k */
    deft_gref_t (*out_grad)(deft_grad_builder_t *b, int k);       /* the gradient of output k */
    const char *(*attr)(deft_grad_builder_t *b, const char *key); /* a parameter as given */
    const deft_op_t *op; /* the operator whose gradient is being built (set by the caller) */
};

/* Fill in_grads[k] for each input that has a gradient (leave node NULL for none). */
typedef int (*deft_gradient_fn)(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                                deft_gref_t *in_grads);

/* The gradient of piecewise-constant operators (comparisons, sign, argmax):
 * zero wherever it exists, so nothing flows back. */
int deft_gradient_zero(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads);

/* Forward of operators whose output is input 0's bytes in another shape
 * (Reshape, Flatten, reshape_like, ...), and their gradient: the output
 * gradient reshaped back like input 0. */
int deft_forward_copy(const deft_op_t *op, const deft_param_value_t *p, int nin,
                      const deft_tensor_t *in, int nout, const deft_tensor_t *out);
int deft_gradient_reshape_back(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                               deft_gref_t *in_grads);

struct deft_op {
    const char *name;
    const char *description;
    const char *const *input_names; /* NULL-terminated; for variadic ops, one name */
    int min_inputs, max_inputs;
    const deft_param_def_t *params; /* NULL-terminated by name */
    deft_infer_fn infer;
    deft_forward_fn forward;
    int inplace_input;      /* output 0 may be written over this input; -1 none */
    uint32_t mutate_inputs; /* bit k: input k is updated in place (optimizer state) */
    /* Whether input k of a call with nin inputs is updated in place, for
     * operators whose updated inputs depend on their count (the multi-tensor
     * steps); NULL: mutate_inputs says. Ask deft_op_mutates. */
    bool (*mutates)(int nin, int k);
    /* bit k: only input k's shape and dtype are read, never its values (the
     * `like` of the _like operators), so autograd need not keep that value */
    uint32_t shape_inputs;
    const void *data; /* family-specific: the scalar function, reduction, ... */
    /* Outputs, known from the parameters and input count alone (graphs need
     * the count before shapes are known); NULL means one. */
    int (*num_outputs)(const deft_param_value_t *p, int num_inputs);
    /* Outputs that callers see, the first ones (MXNet's FNumVisibleOutputs): the
     * rest are kept for the gradient (Dropout's mask, BatchNorm's batch
     * statistics), listed by no symbol and returned by no call. NULL: all. */
    int (*num_visible_outputs)(const deft_param_value_t *p);
    /* Names of the visible outputs, in order (MXNet's FListOutputNames: RNN's
     * output, state_output, ...); symbols list output k of node x as x_name.
     * NULL: x_output for one output, x_output0, x_output1, ... for several. */
    const char *const *output_names;
    /* Inputs, when the parameters decide it (FullyConnected without a bias);
     * NULL means max_inputs for fixed-arity operators. */
    int (*num_inputs)(const deft_param_value_t *p);
    /* Backward inference for graphs: fill unknown inputs from what is known
     * (other inputs, outputs). NULL: inputs are never inferred. */
    deft_infer_inputs_fn infer_inputs;
    /* Two calls with equal inputs may differ (random numbers): never merged by CSE. */
    bool nondeterministic;
    /* Elementwise: output k has the broadcast shape of the inputs, element by
     * element, so the fusion pass may evaluate it in tiles. */
    bool elementwise;
    /* Made by passes, with string parameters that only graph nodes keep alive:
     * imperative invoke refuses it. */
    bool graph_only;
    /* The kernel waits for a host-language callback (custom operators): it
     * never runs on a thread that called the API (which may hold the host's
     * lock the callback needs), only on engine workers. */
    bool blocking;
    deft_gradient_fn gradient; /* NULL: not differentiable (or not yet) */
    /* The kernel for arrays on a GPU, queued on the calling thread's stream; NULL
     * when the operator has none (set with DEFT_GPU, NULL without CUDA). */
    deft_forward_fn forward_gpu;
    /* Where the outputs go, when a parameter says (copies to a device,
     * creation with `ctx`); -1 on a device that does not exist. NULL: on
     * the inputs' device (the CPU for operators without inputs). */
    int (*output_device)(const deft_op_t *op, const deft_param_value_t *p, deft_device_t *out);
    /* Copies: inputs and given outputs may be on different devices. */
    bool any_device;
    /* The kernel may keep what it derives from input 1's contents (the
     * convolution's packed weights) where a runner vouches for them (content
     * key below): imperative calls in predict mode vouch for that input. */
    bool keys_weights;
    /* For parameters that name an object living in this process (_CachedOp's
     * graph id): a reference to it, taken by every graph node of the operator
     * and dropped (unhold) when the node goes, so the object outlives every
     * node that names it. NULL with the error set when it names nothing. */
    void *(*hold)(const deft_op_t *op, const deft_param_value_t *p);
    void (*unhold)(void *held);
};

/* Whether input k of a call of op with nin inputs is updated in place. */
static inline bool deft_op_mutates(const deft_op_t *op, int nin, int k) {
    return op->mutates ? op->mutates(nin, k) : k < 32 && (op->mutate_inputs >> k) & 1u;
}

/* Whether some call of op updates an input in place. */
static inline bool deft_op_mutates_any(const deft_op_t *op) {
    return op->mutate_inputs || op->mutates;
}

/* The training flag of the calling thread (mode.c): kernels read it to
 * behave as in training; runners set it to their call's flag around them. */
bool deft_op_training(void);
void deft_op_set_training(bool on, bool *prev);
/* Whether output k of the kernel running on this thread is read by anyone: a
 * kernel may skip making an unwanted one (its buffer then holds garbage). */
bool deft_op_output_wanted(int k);
/* Set by the graph runner around a kernel: bit k, output k is unwanted. */
void deft_op_set_unwanted(uint64_t mask);

/*
 * Contents a kernel may derive something from and keep (the convolution's
 * packed weights): a key of an input's contents as of when its call was
 * made, its storage's id and version (storage.h). Only a runner knows that
 * no write reaches the storage unseen between the call and the kernel (a
 * graph run's bound input arrays, which the graph itself does not write),
 * so runners list the storages they vouch for around their kernels; for
 * any other (an arena's intermediate values) there is no key.
 */
typedef struct deft_content_key {
    uint64_t id;
    unsigned version;
} deft_content_key_t;
typedef struct deft_vouched {
    const deft_storage_t *storage;
    deft_content_key_t key;
} deft_vouched_t;
/* The key of t's contents: false where no runner vouches for its storage. */
bool deft_op_content_key(const deft_tensor_t *t, deft_content_key_t *key);
/* Set by a runner around kernels (NULL, 0: none); the list before in *prev, *prev_n. */
void deft_op_set_vouched(const deft_vouched_t *list, int n, const deft_vouched_t **prev,
                         int *prev_n);

/* The list the calling thread's runner set (a runner handing a kernel to another thread). */
void deft_op_vouched(const deft_vouched_t **list, int *n);

/* output_device for operators whose parameter 0 is a DEFT_PARAM_DEVICE; -1 for a
 * device that does not exist (cpu(n) for n > 0 too: there is one host memory). */
int deft_output_device_param0(const deft_op_t *op, const deft_param_value_t *p, deft_device_t *out);

#ifdef DEFT_HAVE_CUDA
#define DEFT_GPU(forward) forward
#else
#define DEFT_GPU(forward) NULL
#endif

/* A family's table of descriptors, collected by the registry. */
typedef struct deft_op_family {
    const deft_op_t *ops;
    int count;
} deft_op_family_t;

/* Number of outputs of `op` with parameters p. */
static inline int deft_op_num_outputs(const deft_op_t *op, const deft_param_value_t *p,
                                      int num_inputs) {
    return op->num_outputs ? op->num_outputs(p, num_inputs) : 1;
}

/* num_outputs and num_visible_outputs of an operator with a result and one
 * hidden output its gradient reads (Dropout's mask, LRN's tmp_norm). */
int deft_op_two_outputs(const deft_param_value_t *p, int num_inputs);
int deft_op_one_visible(const deft_param_value_t *p);

/* Number of the outputs that callers see (num_visible_outputs), of nout. */
static inline int deft_op_num_visible_outputs(const deft_op_t *op, const deft_param_value_t *p,
                                              int nout) {
    int visible = op->num_visible_outputs ? op->num_visible_outputs(p) : nout;
    return visible < nout ? visible : nout;
}

/* Define a family from its table: `DEFT_OP_FAMILY(deft_family_unary, unary_ops);`.
 * That is all it takes to register it: a pointer to the family goes into
 * the linker section deft_op_families, which the registry walks. */
#define DEFT_OP_FAMILY(name, table)                                                                \
    const deft_op_family_t name = {table, (int)(sizeof table / sizeof table[0])};                  \
    __attribute__((                                                                                \
        used, section("deft_op_families"))) static const deft_op_family_t *const name##_entry =    \
        &name

/* The name of input i: its own, or for an input past the operator's list (a
 * variadic operator's one name, _backward_RNN's heads) the first; NULL for
 * an operator without inputs. */
const char *deft_op_input_name(const deft_op_t *op, int i);

/* The input list of the many operators that take one array named "data". */
extern const char *const deft_op_data_input[];

/* Inference of one output with its input's shape and dtype (copies, BlockGrad). */
int deft_infer_same(const deft_op_t *op, const deft_param_value_t *p, int nin,
                    const deft_desc_t *in, int *nout, deft_desc_t *out);
/* Inference of a backward operator taking (out_grad, the forward's inputs...)
 * and giving the inputs' gradients: the forward's inference on those inputs
 * must give out_grad's shape and dtype; the gradients are shaped like them. */
int deft_infer_backward(const deft_op_t *op, deft_infer_fn forward, const deft_param_value_t *p,
                        int nin, const deft_desc_t *in, int *nout, deft_desc_t *out);
/* -1 with "operator 'x': got n inputs, expected ..." (nin is outside the op's range). */
int deft_op_input_count_error(const deft_op_t *op, int nin) __attribute__((cold));
/* -1 with a message that starts with the operator's name. */
int deft_op_error(const deft_op_t *op, deft_error_kind_t kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Common checks for infer functions. */
int deft_op_check_dtype_float(const deft_op_t *op, int input, deft_dtype_t dtype);
/* float32, float64, or float16/bfloat16 (computed through float32). */
int deft_op_check_dtype_float_or_half(const deft_op_t *op, int input, deft_dtype_t dtype);
int deft_op_check_same_dtype(const deft_op_t *op, int nin, const deft_desc_t *in);
/* An optimizer's first n inputs (weight, gradient, states): float, of one
 * dtype, each of the weight's shape. */
int deft_op_check_optimizer_inputs(const deft_op_t *op, int n, const deft_desc_t *in);
/* Variadic operators' input count, as MXNet names it: MXNet requires it (its
 * loader needs it in a graph, and export writes it, core/graph/json.c);
 * deft takes the inputs given when it is missing. */
#define DEFT_NUM_ARGS_PARAM                                                                        \
    { "num_args", DEFT_PARAM_INT, "None", "number of inputs (checked when given)", NULL, true }
/* -1 when num_args was given and differs from the nin inputs. */
int deft_op_check_num_args(const deft_op_t *op, const deft_param_value_t *num_args, int nin);
/* Normalise a possibly negative axis against ndim; -1 (IndexError) when out of range. */
int deft_op_axis(const deft_op_t *op, const char *param, int64_t axis, int ndim, int *out);

static inline bool deft_dtype_is_float(deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT32 || dtype == DEFT_DT_FLOAT64;
}

/* float16 and bfloat16: stored in 16 bits, computed through float32 on the CPU. */
static inline bool deft_dtype_is_half(deft_dtype_t dtype) {
    return dtype == DEFT_DT_FLOAT16 || dtype == DEFT_DT_BFLOAT16;
}

/* dtypes with kernels for arithmetic: float32, float64, int32, int64, uint8. */
static inline bool deft_dtype_is_arith(deft_dtype_t dtype) {
    return deft_dtype_is_float(dtype) || dtype == DEFT_DT_INT32 || dtype == DEFT_DT_INT64 ||
           dtype == DEFT_DT_UINT8;
}
int deft_op_check_dtype_arith(const deft_op_t *op, int input, deft_dtype_t dtype);

/* NumPy broadcasting of two shapes; -1 naming both shapes and the axis. */
int deft_broadcast_shape(const deft_op_t *op, const deft_shape_t *a, const deft_shape_t *b,
                         deft_shape_t *out);

#endif
