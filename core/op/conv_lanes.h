/*
 * The widths of conv_direct_lanes_t.h's kernels, for conv_direct_lanes.c to
 * choose from: _avx512 (16 lanes) and _avx2 (8). g is a geometry where
 * deft_conv_lanes_raise_fits or deft_conv_lanes_wgrad_fits holds at that
 * width (for a forward: its data-gradient twin, conv_direct_lanes.c).
 */
#ifndef DEFT_CORE_OP_CONV_LANES_H
#define DEFT_CORE_OP_CONV_LANES_H

#include <stdbool.h>

#include "core/op/conv.h"

/* image = the data gradient of colside through w (oc, ic, taps), or with
 * flip through w (ic, oc, taps) with its taps reversed; plus bias per
 * channel of image (NULL: none), then max(image, 0) with relu. */
int deft_conv_lanes_raise_run_avx512(const deft_conv_geom_t *g, const float *colside,
                                     const float *w, bool flip, const float *bias, bool relu,
                                     float *image);
int deft_conv_lanes_raise_run_avx2(const deft_conv_geom_t *g, const float *colside, const float *w,
                                   bool flip, const float *bias, bool relu, float *image);
/* dw, and db (or NULL) = colside's sums per channel. */
int deft_conv_lanes_wgrad_run_avx512(const deft_conv_geom_t *g, const float *image,
                                     const float *colside, float *dw, float *db);
int deft_conv_lanes_wgrad_run_avx2(const deft_conv_geom_t *g, const float *image,
                                   const float *colside, float *dw, float *db);

#endif
