/*
 * What the Convolution operator (conv.c) lends operators built on it
 * (conv_bn.c): its checks and geometry, with its parameters parsed.
 */
#ifndef DEFT_CORE_OP_CONV_OP_H
#define DEFT_CORE_OP_CONV_OP_H

#include "core/op/conv.h"
#include "core/op/op.h"

/* The geometry of Convolution with parameters p (its table's order) on data
 * and weight in[0], in[1] (no bias); -1 with Convolution's error otherwise. */
int deft_conv_forward_geometry(const deft_param_value_t *p, const deft_desc_t *in,
                               deft_conv_geom_t *g);

#endif
