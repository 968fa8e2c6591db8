/*
 * Weights kept packed between calls (conv_packed.c), for the direct
 * float32 kernels and the bfloat16 products of predict-mode convolutions.
 */
#ifndef DEFT_CORE_OP_CONV_PACKED_H
#define DEFT_CORE_OP_CONV_PACKED_H

#include "core/op/conv.h"
#include "core/op/op.h"

/* What a packed copy of weights is kept by (conv_packed.c): the weights'
 * contents, and their layout: where they are, and the packed shape (the
 * direct kernels' output and input channels and kernel size; bfloat16
 * products' filters, im2col rows, groups and a negative tag). */
typedef struct deft_conv_pack_key {
    deft_content_key_t content;
    const void *w;
    int64_t dims[4];
} deft_conv_pack_key_t;
typedef struct deft_conv_packed deft_conv_packed_t;

/* The kept copy of weights for key, or one that pack(ctx, dst) makes now
 * (`floats` 32-bit words) and that is kept for later calls; NULL when out of
 * memory. The caller lets *held go when it is done reading. x86 only. */
const float *deft_conv_packed_get(const deft_conv_pack_key_t *key, size_t floats,
                                  void (*pack)(void *ctx, float *dst), void *ctx,
                                  deft_conv_packed_t **held);
void deft_conv_packed_release(deft_conv_packed_t *held);

#endif
