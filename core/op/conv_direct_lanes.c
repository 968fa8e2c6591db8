/*
 * Where the few-channel kernels with the batch in the vector lanes
 * (conv_direct_lanes_t.h) apply, and which width runs: 16 lanes on AVX-512,
 * 8 on AVX2.
 *
 * On AVX-512 they take the gradients of LeNet's second layer from the small
 * kernels (conv_direct_small.c), which keep the forwards and the layers with
 * few products per element. A CPU with AVX2 and no AVX-512 has no small
 * kernels, so there they take the forward too, where im2col's GEMM would
 * have 6 or 16 rows (LeNet on a Zen 3, one thread, forward and both
 * gradients: its first layer 1728 -> 503 us, its second 2133 -> 517 us).
 */
#include "core/base/error.h"
#include "core/op/conv.h"
#include "core/op/conv_lanes.h"
#include "core/op/simd.h"

/* The kernels of the SIMD level: 16 lanes on AVX-512, 8 on AVX2; NULL below. */
static const deft_conv_lanes_t *lanes_kernels(void) {
#if DEFT_SIMD_X86
    switch (deft_simd_level()) {
    case DEFT_SIMD_AVX512:
        return &deft_conv_lanes_avx512;
    case DEFT_SIMD_AVX2:
        return &deft_conv_lanes_avx2;
    default:
        break;
    }
#endif
    return NULL;
}

/* Their vector width, or 0 (none). */
static int64_t lanes_width(void) {
    const deft_conv_lanes_t *k = lanes_kernels();
    return k ? k->lanes : 0;
}

/* Float32, 2-D, groups 1, stride and dilation 1, padding at most k - 1 (the
 * data gradient's reads, and the flipped forward's padding k - 1 - p), a
 * batch of whole vectors of vl images, two or more, and small images: the
 * tiles sweep whole channels of dy and the image, which stay in cache only
 * there. On AVX-512, against the small kernels, 256 pixels at most (12 -> 12
 * at 3x3 on 32x32, batch 32: dW 931 -> 1462 us; 4 -> 16 at 5x5 on 24x24 ran
 * slower at 2 threads); on AVX2, against im2col, 1024 (Zen 3, one thread,
 * batch 32, forward and both gradients: LeNet's first layer 1728 -> 503 us,
 * 12 -> 12 at 3x3 on 32x32 11.3 -> 8.0 ms, 3 -> 8 on 32x32 2.9 -> 1.6 ms). */
static bool lanes_shape(const deft_conv_geom_t *g, deft_dtype_t dtype, int64_t vl) {
    if (!vl || dtype != DEFT_DT_FLOAT32 || !deft_conv_direct_on() || g->groups != 1) return false;
    if (g->batch < 2 * vl || g->batch % vl) return false;
    if (g->img[0] != 1 || g->k[0] != 1 || g->p[0] != 0 || g->s[0] != 1) return false;
    for (int d = 1; d < 3; d++)
        if (g->s[d] != 1 || g->d[d] != 1 || g->p[d] > g->k[d] - 1) return false;
    return g->img[1] * g->img[2] <= (vl == 8 ? 1024 : 256) && g->chan > 0 && g->filt > 0 &&
           g->col[1] > 0 && g->col[2] > 0;
}

/* AVX2: few channels on one side (else im2col's GEMM has rows enough), more
 * than one tap, and padded rows at most twice the output's. */
static bool few_channels(const deft_conv_geom_t *g) {
    const int64_t few = g->chan < g->filt ? g->chan : g->filt;
    return few < 16 && g->chan <= 64 && g->filt <= 64 && g->k[1] * g->k[2] > 1 &&
           2 * g->col[2] >= g->img[2] + 2 * g->p[2];
}

/* AVX-512: enough products per element transposed to beat the small
 * kernels. LeNet's first layer (1 channel, 25 taps) and the CNN demo's
 * (1, 9) ran slower (dW 60 -> 77 and 14 -> 27 us), its second (6, 25) faster. */
static bool beats_small(const deft_conv_geom_t *g) {
    return g->chan >= 4 && g->chan * g->k[1] * g->k[2] >= 100;
}

bool deft_conv_lanes_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    return lanes_width() == 8 && lanes_shape(g, dtype, 8) && few_channels(g);
}

bool deft_conv_lanes_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    switch (lanes_width()) {
    case 16:
        return lanes_shape(g, dtype, 16) && beats_small(g) && deft_conv_small_raise_fits(g, dtype);
    case 8:
        return lanes_shape(g, dtype, 8) && few_channels(g);
    default:
        return false;
    }
}

bool deft_conv_lanes_wgrad_fits(const deft_conv_geom_t *g, deft_dtype_t dtype) {
    switch (lanes_width()) {
    case 16:
        return lanes_shape(g, dtype, 16) && beats_small(g) && deft_conv_small_fits(g, dtype);
    case 8:
        return lanes_shape(g, dtype, 8) && few_channels(g);
    default:
        return false;
    }
}

static int raise_run(const deft_conv_geom_t *g, const float *colside, const float *w, bool flip,
                     const float *bias, bool relu, float *image) {
    const deft_conv_lanes_t *k = lanes_kernels();
    if (!k)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no vector kernel on this CPU");
    return k->raise(g, colside, w, flip, bias, relu, image);
}

/* The forward as a data gradient: y = x * w (correlation, padding p) is the
 * data gradient, from x, of a convolution from y with the kernel flipped,
 * the channels swapped and padding k - 1 - p. */
int deft_conv_lanes_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                          const float *bias, bool relu, float *colside) {
    deft_conv_geom_t t = *g;
    t.chan = g->filt, t.filt = g->chan;
    for (int d = 1; d < 3; d++) {
        t.img[d] = g->col[d], t.col[d] = g->img[d];
        t.p[d] = g->k[d] - 1 - g->p[d];
    }
    return raise_run(&t, image, w, true, bias, relu, colside);
}

int deft_conv_lanes_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                          const float *bias, float *image) {
    return raise_run(g, colside, w, false, bias, false, image);
}

int deft_conv_lanes_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                          float *dw, float *db) {
    const deft_conv_lanes_t *k = lanes_kernels();
    if (!k)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED, "convolution: no vector kernel on this CPU");
    return k->wgrad(g, image, colside, dw, db);
}
