/*
 * The fused elementwise operator, made by the Fuse graph pass.
 *
 * Its `program` parameter lists steps separated by ';'. A step is an
 * elementwise operator's name, its arguments and its parameters, separated
 * by spaces: `_plus_scalar i0 scalar=5; elemwise_mul t0 t0`. Argument `iK`
 * is the fused node's input K, `tJ` the result of step J (J earlier than
 * the step reading it); the last step's result is the node's output.
 * Parameter values hold no spaces, ';' or '='.
 */
#ifndef DEFT_CORE_FUSED_H
#define DEFT_CORE_FUSED_H

#define DEFT_FUSED_OP_NAME   "_fused_elemwise"
#define DEFT_FUSED_MAX_STEPS 32
/* Parameters one step may carry (clip has two, Activation one). */
#define DEFT_FUSED_MAX_STEP_PARAMS 4

/* Chains run on a GPU as one kernel so far (the tests check fusion happened). */
long deft_fused_gpu_chains(void);

#endif
