/*
 * The training flag: whether kernels compute in training mode (Dropout
 * drops, BatchNorm normalises with the batch's statistics and updates its
 * moving ones) or in predict mode.
 *
 * It is a thread's flag, as in MXNet: the thread that makes a call sets it
 * (DeftAutogradSetIsTraining), and whoever runs the call's kernels later,
 * perhaps on an engine worker, sets the worker's flag to the one the call
 * was made with while they run. Kernels read it with deft_op_training().
 */
#include "core/op/op.h"

#include "core/base/tls.h"

static DEFT_TLS_FAST bool tl_training;

bool deft_op_training(void) {
    return tl_training;
}

void deft_op_set_training(bool on, bool *prev) {
    if (prev) *prev = tl_training;
    tl_training = on;
}
