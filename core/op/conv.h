/*
 * Convolution and Deconvolution: what the operators (conv.c) share with
 * their CPU kernels (conv_cpu.c) and GPU kernels (conv.cu).
 *
 * Both operators are described by one geometry, in the convolution's terms:
 * an "image" (channels x img spatial) is lowered by im2col into columns, one
 * per position of the "column side" (filt x col spatial), and
 *   lower:  colside = W . im2col(image)       (Convolution forward)
 *   raise:  image   = col2im(W^T . colside)   (its data gradient)
 *   wgrad:  dW      = colside . im2col(image)^T
 * with W (filt, chan / groups, k...). A Deconvolution is the same three with
 * the roles swapped: its output is the image and its input the column side,
 * so its forward is `raise` and its data gradient `lower`.
 *
 * Every geometry is three-dimensional: 1-D and 2-D ones lead with spatial
 * dimensions of size 1 (kernel 1, stride 1, no padding), so each kernel has
 * one loop nest for all ranks.
 */
#ifndef DEFT_CORE_OP_CONV_H
#define DEFT_CORE_OP_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

struct deft_content_key; /* op.h */

typedef struct deft_conv_geom {
    int64_t batch, groups;
    int64_t chan;                   /* image channels */
    int64_t filt;                   /* column-side channels (rows of W) */
    int64_t img[3], col[3];         /* spatial sizes of the image and the column side */
    int64_t k[3], s[3], p[3], d[3]; /* kernel, stride, padding, dilation */
} deft_conv_geom_t;

static inline int64_t deft_conv_img_size(const deft_conv_geom_t *g) {
    return g->img[0] * g->img[1] * g->img[2];
}
static inline int64_t deft_conv_col_size(const deft_conv_geom_t *g) {
    return g->col[0] * g->col[1] * g->col[2];
}
static inline int64_t deft_conv_kernel_size(const deft_conv_geom_t *g) {
    return g->k[0] * g->k[1] * g->k[2];
}
/* Rows of one group's im2col matrix: its channels times the kernel's positions. */
/* Whether im2col is the image itself: a 1x1 kernel at stride 1 without padding. */
static inline bool deft_conv_pointwise(const deft_conv_geom_t *g) {
    return deft_conv_kernel_size(g) == 1 && g->s[0] == 1 && g->s[1] == 1 && g->s[2] == 1 &&
           g->p[0] == 0 && g->p[1] == 0 && g->p[2] == 0;
}
static inline int64_t deft_conv_col_rows(const deft_conv_geom_t *g) {
    return g->chan / g->groups * deft_conv_kernel_size(g);
}
/* lo..hi: the output columns x (of `cols`) whose tap x * s + off lands inside [0, size). */
static inline void deft_conv_tap_range(int64_t off, int64_t s, int64_t size, int64_t cols,
                                       int64_t *lo, int64_t *hi) {
    int64_t first = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t last = size - 1 - off >= 0 ? (size - 1 - off) / s + 1 : 0;
    *hi = last < cols ? last : cols;
    *lo = first < *hi ? first : *hi;
}

/* The three products, on the CPU (float32, float64, float16 or bfloat16; contiguous arrays).
 * bias (or NULL) is added to each column-side channel by lower, to each
 * image channel by raise. wkey (or NULL): the key of W's contents (op.h),
 * where a kernel may keep what it derives from W for later calls. */
int deft_conv_lower_cpu(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                        const void *w, const void *bias, void *colside,
                        const struct deft_content_key *wkey);
int deft_conv_raise_cpu(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *colside,
                        const void *w, const void *bias, void *image);
/* wgrad with db (or NULL): then also the bias gradient, the column side's
 * sums per channel (deft_conv_bias_grad_cpu), which the few-channel kernel
 * takes as it reads the column side for dW. */
int deft_conv_wgrad_cpu(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                        const void *colside, void *dw, void *db);
/* db[c] = the sum of y over the batch and space of channel c; y (batch, channels, space). */
void deft_conv_bias_grad_cpu(deft_dtype_t dtype, int64_t batch, int64_t channels, int64_t space,
                             const void *y, void *db);

/*
 * The same for float16 and bfloat16 (conv_half.c; the functions above call
 * these): float32 sums, each result rounded once.
 */
int deft_conv_lower_half(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                         const void *w, const void *bias, void *colside,
                         const struct deft_content_key *wkey);
int deft_conv_raise_half(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *colside,
                         const void *w, const void *bias, void *image);
int deft_conv_wgrad_half(const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                         const void *colside, void *dw);
void deft_conv_bias_grad_half(deft_dtype_t dtype, int64_t batch, int64_t channels, int64_t space,
                              const void *y, void *db);
/* conv_cpu.c's loops for them, on outer rows [r0, r1) of one group of one
 * image (conv_cpu_t.h): im2col's 16-bit words (leading dimension ld), and
 * col2im's sum of a float32 tile (its rows (r1 - r0) col[2] apart). */
void deft_conv_im2col_half(const deft_conv_geom_t *g, const uint16_t *img, int64_t r0, int64_t r1,
                           uint16_t *col, int64_t ld);
void deft_conv_col2im_float(const deft_conv_geom_t *g, const float *col, int64_t r0, int64_t r1,
                            float *img);

/*
 * The direct float32 kernels (conv_direct.c), where they fit: 2-D, groups 1,
 * no dilation, width stride 1 or 2, on a CPU with AVX-512 (chosen at run
 * time). deft_conv_lower_cpu and deft_conv_raise_cpu call them when they
 * fit; deft_conv_direct_enable(false) turns them off (tests of the im2col path).
 */
bool deft_conv_direct_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
bool deft_conv_direct_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
int deft_conv_direct_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                           const float *bias, float *colside, const struct deft_content_key *wkey);
/* The forward with an affine map per output channel after the sum:
 * colside = (W . im2col(image)) scale + shift (scale, shift: filt entries),
 * then max(colside, 0) with relu (BatchNorm and relu folded into the
 * convolution), where deft_conv_direct_scaled_fits: where
 * deft_conv_direct_fits, for 1x1 kernels too (with BatchNorm in its tiles
 * the direct kernel beats im2col's GEMM and a pass over the output), or
 * where deft_conv_stem_fits. */
bool deft_conv_direct_scaled_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
int deft_conv_direct_lower_scaled(const deft_conv_geom_t *g, const float *image, const float *w,
                                  const float *scale, const float *shift, bool relu, float *colside,
                                  const struct deft_content_key *wkey);
int deft_conv_direct_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                           const float *bias, float *image);
/* dw from the image and the column side: where deft_conv_direct_fits and
 * the batch has enough output pixels per weight. */
bool deft_conv_direct_wgrad_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
int deft_conv_direct_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                           float *dw);
void deft_conv_direct_enable(bool on);
bool deft_conv_direct_on(void);
/* Drop the weights the forward keeps packed between predict-mode
 * calls (conv_packed.c), as DeftMemoryReleaseCached does for the CPU; a call
 * still reading a copy frees it when it lets go. */
void deft_conv_packed_drop_all(void);
/* The bytes of packed weights kept now. */
size_t deft_conv_packed_bytes(void);

/*
 * The direct float32 kernels for few channels (conv_direct_small.c): 2-D,
 * groups 1, stride 1, fewer than 16 channels on one side, where the kernels
 * above do not fit, on a CPU with AVX-512; deft_conv_direct_enable turns
 * them off too. The data gradient's fit is its own (padding at most
 * (k - 1) d); the weight gradient fits where the forward does.
 */
bool deft_conv_small_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
bool deft_conv_small_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
/* relu: max(colside, 0) as the tiles are stored (_conv_relu). */
int deft_conv_small_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                          const float *bias, bool relu, float *colside);
int deft_conv_small_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                          const float *bias, float *image);
/* db (or NULL): the bias gradient too, colside's sums per channel. */
int deft_conv_small_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                          float *dw, float *db);

/*
 * The few-channel kernels with the batch in the vector lanes
 * (conv_direct_lanes.c): 2-D, groups 1, stride and dilation 1, padding at
 * most k - 1, a batch of two or more whole vectors (16 images on AVX-512,
 * 8 on AVX2) and images of at most 256 pixels (1024 on AVX2). On AVX-512
 * they serve the gradients where the small kernels above fit, at least 4
 * input channels and 100 products per output element (LeNet's second
 * layer, not its first); on AVX2, which has no small kernels, the forward
 * and both gradients where one side has fewer than 16 channels.
 * deft_conv_direct_enable turns them off too.
 */
bool deft_conv_lanes_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
/* relu: max(colside, 0) as it is stored (_conv_relu). */
int deft_conv_lanes_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                          const float *bias, bool relu, float *colside);
bool deft_conv_lanes_raise_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
int deft_conv_lanes_raise(const deft_conv_geom_t *g, const float *colside, const float *w,
                          const float *bias, float *image);
bool deft_conv_lanes_wgrad_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
/* db (or NULL): the bias gradient too. */
int deft_conv_lanes_wgrad(const deft_conv_geom_t *g, const float *image, const float *colside,
                          float *dw, float *db);

/*
 * The direct float32 forward for images of at most four channels
 * (conv_direct_stem.c: a network's first layer on RGB): 2-D, groups 1, no
 * dilation, width stride 1 or 2, where the small-channel kernels do not
 * fit, on a CPU with AVX-512; deft_conv_direct_enable turns it off too.
 */
bool deft_conv_stem_fits(const deft_conv_geom_t *g, deft_dtype_t dtype);
int deft_conv_stem_lower(const deft_conv_geom_t *g, const float *image, const float *w,
                         const float *bias, float *colside);
/* The same, then colside scale + shift and max(colside, 0) with relu, as
 * deft_conv_direct_lower_scaled. */
int deft_conv_stem_lower_scaled(const deft_conv_geom_t *g, const float *image, const float *w,
                                const float *scale, const float *shift, bool relu, float *colside);

#ifdef DEFT_HAVE_CUDA
/* The same on a GPU (conv.cu), queued on the calling thread's stream of
 * device dev; `cols` is room on that GPU for one image's im2col matrix
 * (chan x kernel size x col spatial elements). */
int deft_conv_lower_gpu(int dev, const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                        const void *w, const void *bias, void *colside, void *cols);
int deft_conv_raise_gpu(int dev, const deft_conv_geom_t *g, deft_dtype_t dtype, const void *colside,
                        const void *w, const void *bias, void *image, void *cols);
int deft_conv_wgrad_gpu(int dev, const deft_conv_geom_t *g, deft_dtype_t dtype, const void *image,
                        const void *colside, void *dw, void *cols);
int deft_conv_bias_grad_gpu(int dev, deft_dtype_t dtype, int64_t batch, int64_t channels,
                            int64_t space, const void *y, void *db);
#endif

#ifdef __cplusplus
}
#endif

#endif
