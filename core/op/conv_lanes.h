/*
 * The widths of conv_direct_lanes_t.h's kernels, for conv_direct_lanes.c to
 * choose from by the SIMD level: deft_conv_lanes_avx512 (16 lanes) and
 * deft_conv_lanes_avx2 (8), tables of the same kernels (as pool_vec.h's).
 * g is a geometry where deft_conv_lanes_raise_fits or
 * deft_conv_lanes_wgrad_fits holds at that width (for a forward: its
 * data-gradient twin, conv_direct_lanes.c).
 */
#ifndef DEFT_CORE_OP_CONV_LANES_H
#define DEFT_CORE_OP_CONV_LANES_H

#include <stdbool.h>

#include "core/op/conv.h"

typedef struct deft_conv_lanes {
    int lanes;
    /* image = the data gradient of colside through w (oc, ic, taps), or with
     * flip through w (ic, oc, taps) with its taps reversed; plus bias per
     * channel of image (NULL: none), then max(image, 0) with relu. */
    int (*raise)(const deft_conv_geom_t *g, const float *colside, const float *w, bool flip,
                 const float *bias, bool relu, float *image);
    /* dw, and db (or NULL) = colside's sums per channel. */
    int (*wgrad)(const deft_conv_geom_t *g, const float *image, const float *colside, float *dw,
                 float *db);
} deft_conv_lanes_t;

extern const deft_conv_lanes_t deft_conv_lanes_avx512;
extern const deft_conv_lanes_t deft_conv_lanes_avx2;

#endif
