/*
 * The training flag: whether kernels compute in training mode (Dropout
 * drops, BatchNorm normalises with the batch's statistics and updates its
 * moving ones) or in predict mode.
 *
 * It is a thread's flag, as in MXNet: the thread that makes a call sets it
 * (DeftAutogradSetIsTraining), and whoever runs the call's kernels later,
 * perhaps on an engine worker, sets the worker's flag to the one the call
 * was made with while they run. Kernels read it with deft_op_training().
 * The outputs a kernel's caller reads are a thread's state too (below).
 */
#include "core/op/op.h"

#include "core/base/tls.h"

static DEFT_TLS_FAST bool tl_training;
/* Inverted, so that a thread's zero start means every output is wanted. */
static DEFT_TLS_FAST uint64_t tl_unwanted;

bool deft_op_training(void) {
    return tl_training;
}

void deft_op_set_training(bool on, bool *prev) {
    if (prev) *prev = tl_training;
    tl_training = on;
}

/*
 * Which outputs of the running kernel someone reads. A graph run knows: an
 * output no node consumes and the graph does not return (the data gradient
 * of a network's first convolution, in a training step) is written nowhere
 * that matters, and a kernel making several outputs may skip its work.
 * Everywhere else every output is wanted.
 */
bool deft_op_output_wanted(int k) {
    return k >= 64 || !(tl_unwanted >> k & 1u);
}

void deft_op_set_unwanted(uint64_t mask) {
    tl_unwanted = mask;
}

/*
 * The storages whose contents the running kernel's runner vouches for
 * (op.h): a short list, searched by the few kernels that keep derived values.
 */
static DEFT_TLS_FAST const deft_vouched_t *tl_vouched;
static DEFT_TLS_FAST int tl_num_vouched;

bool deft_op_content_key(const deft_tensor_t *t, deft_content_key_t *key) {
    for (int i = 0; i < tl_num_vouched; i++)
        if (tl_vouched[i].storage == t->storage) {
            *key = tl_vouched[i].key;
            return true;
        }
    return false;
}

void deft_op_set_vouched(const deft_vouched_t *list, int n, const deft_vouched_t **prev,
                         int *prev_n) {
    if (prev) *prev = tl_vouched, *prev_n = tl_num_vouched;
    tl_vouched = list;
    tl_num_vouched = n;
}

void deft_op_vouched(const deft_vouched_t **list, int *n) {
    *list = tl_vouched;
    *n = tl_num_vouched;
}
