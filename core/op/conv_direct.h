/*
 * What the direct AVX-512 convolution kernels share (conv_direct.c: forward
 * and data gradient; conv_direct_wgrad.c: weight gradient): the shape of a
 * call, and the input band packed into blocks of 16 channels,
 * (row, channel block, column, 16 channels), zero-padded.
 */
#ifndef DEFT_CORE_OP_CONV_DIRECT_H
#define DEFT_CORE_OP_CONV_DIRECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/op/conv.h"
#include "core/op/conv_packed.h"
#include "core/op/op.h"
#include "core/op/simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DEFT_CONV_DIRECT_X86 1
#include <immintrin.h>

#define VEC_LANES 16 /* vf_transpose: a 16 x 16 transpose in registers */
#include "core/op/simd_vec.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define ALWAYS __attribute__((always_inline)) inline

enum {
    CB = 16,        /* channels per block (one zmm of float32) */
    MAX_PIX = 14,   /* output pixels per register tile */
    MAX_BLOCKS = 2, /* output-channel blocks per register tile */
};

/* Input bands hold about this many bytes (an L2 share). */
#define BAND_BYTES (192 << 10)
/* Below this many multiply-adds per work item, items are merged into chunks. */
#define ITEM_MACS (1 << 20)

/* The shape of one call, and its operands. */
typedef struct direct_job {
    int64_t batch;
    int64_t ic, oc, icp, icb, ocp;  /* channels; icp, ocp rounded up to CB; icp / CB */
    int64_t ih, iw, oh, ow;         /* spatial sizes */
    int64_t kh, kw, sh, sw, ph, pw; /* kernel, stride, padding */
    int64_t wp;                     /* packed columns: those the row's taps read */
    int64_t step;                   /* 2: a 1x1 kernel at stride 2, no padding, run at stride 1
                                       on the image's even rows and columns (the packing
                                       picks them); 1 otherwise */
    int edges;                      /* conv_direct.c: the image edges whose padding taps the
                                       tiles skip */
    int64_t band, nbands;           /* output rows per work item */
    int64_t osplits;                /* runs of output channels per band (forward items) */
    const float *image, *bias;      /* bias: NULL, or ocp entries */
    const float *scale;             /* NULL, or ocp entries: out = sum scale + bias */
    bool relu;                      /* then out = max(out, 0) */
    const float *wpk;               /* packed weights, or NULL: items pack their own */
    const float *w;                 /* the weights as given, */
    bool flip;                      /* read for the data gradient */
    float *out;
    const float *dy; /* the weight gradient's: output gradient, */
    float *dwp;      /* its packed partial sums, one per part */
    int64_t parts;
    atomic_bool failed;
} direct_job_t;

static inline int64_t round_up(int64_t n, int64_t to) {
    return (n + to - 1) / to * to;
}

/* The mask of the first n <= 16 lanes. */
static inline __mmask16 first_lanes(int64_t n) {
    return (__mmask16)((1u << n) - 1u);
}

/* dst row c (c < cols, stride dld, 16 lanes) = column c of `rows` rows of src
 * (stride sld), zero in the lanes past rows. */
static ALWAYS AVX512 void transpose_block(const float *src, int64_t sld, int rows, int cols,
                                          float *dst, int64_t dld) {
    __m512 r[16], out[16];
    const __mmask16 cm = first_lanes(cols);
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, src + i * sld) : _mm512_setzero_ps();
    vf_transpose(r, out);
    for (int c = 0; c < cols; c++) _mm512_storeu_ps(dst + c * dld, out[c]);
}

/* A register tile out to the channels-first output: acc[b][p], pixel p < P
 * of output channel b CB + lane, goes to dst[(b CB + lane) plane + p], for
 * the first `chans` channels (the rest are padding). */
static ALWAYS AVX512 void deft_direct_store_tile(__m512 acc[MAX_BLOCKS][MAX_PIX], int P, int NB,
                                                 int64_t chans, int64_t plane, float *dst) {
    const __mmask16 pm = first_lanes(P);
    for (int b = 0; b < NB; b++) {
        __m512 r[16], cols[16];
        for (int p = 0; p < 16; p++) r[p] = p < P ? acc[b][p] : _mm512_setzero_ps();
        vf_transpose(r, cols);
        int64_t n = chans - b * CB < CB ? chans - b * CB : CB;
        float *at = dst + b * CB * plane;
        for (int64_t o = 0; o < n; o++) _mm512_mask_storeu_ps(at + o * plane, pm, cols[o]);
    }
}

/* Ask for the lines that deft_direct_store_tile will write (the same
 * arguments), before the tile's products: its 16 NB stores each reach
 * another plane, where a large output (ResNet's stem: 3.2 MB an image) is
 * in no cache; the products hide the wait for them. */
static ALWAYS AVX512 void deft_direct_prefetch_tile(int P, int NB, int64_t chans, int64_t plane,
                                                    const float *dst) {
    const int64_t n = chans < NB * CB ? chans : NB * CB;
    for (int64_t o = 0; o < n; o++) {
        _mm_prefetch((const char *)(dst + o * plane), _MM_HINT_T0);
        _mm_prefetch((const char *)(dst + o * plane + P - 1), _MM_HINT_T0);
    }
}

/* A forward tile's last steps before the store: acc = acc scale + shift per
 * output channel where scale is not NULL (a BatchNorm folded in; the bias is
 * the tile's start otherwise), then max(acc, 0) with relu. scale and shift
 * are read for NB blocks from o0. */
static ALWAYS AVX512 void deft_direct_epilogue(__m512 acc[MAX_BLOCKS][MAX_PIX], int P, int NB,
                                               const float *scale, const float *shift, bool relu,
                                               int64_t o0) {
    for (int b = 0; scale && b < NB; b++) {
        __m512 s = _mm512_loadu_ps(scale + o0 + b * CB), t = _mm512_loadu_ps(shift + o0 + b * CB);
#pragma GCC unroll 14
        for (int p = 0; p < P; p++) acc[b][p] = _mm512_fmadd_ps(acc[b][p], s, t);
    }
    for (int b = 0; relu && b < NB; b++)
#pragma GCC unroll 14
        for (int p = 0; p < P; p++) acc[b][p] = _mm512_max_ps(acc[b][p], _mm512_setzero_ps());
}

/* A row kernel `name`: the tiles of output row y for channels o0 .., in NB
 * blocks, width stride SW, from tile_fn(j, band, wo, y0, y, x0, o0, out, P,
 * NB, SW) with its pixel count P a constant (MAX_PIX, then the tail's). */
#define DEFT_DIRECT_ROW_KERNEL(name, job_t, tile_fn, NB, SW)                                       \
    static AVX512 void name(const job_t *j, const float *band, const float *wo, int64_t y0,        \
                            int64_t y, int64_t o0, float *out) {                                   \
        int64_t x0 = 0;                                                                            \
        for (; x0 + MAX_PIX <= j->ow; x0 += MAX_PIX)                                               \
            tile_fn(j, band, wo, y0, y, x0, o0, out, MAX_PIX, NB, SW);                             \
        switch (j->ow - x0) {                                                                      \
        case 13:                                                                                   \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 13, NB, SW);                                  \
            break;                                                                                 \
        case 12:                                                                                   \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 12, NB, SW);                                  \
            break;                                                                                 \
        case 11:                                                                                   \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 11, NB, SW);                                  \
            break;                                                                                 \
        case 10:                                                                                   \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 10, NB, SW);                                  \
            break;                                                                                 \
        case 9:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 9, NB, SW);                                   \
            break;                                                                                 \
        case 8:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 8, NB, SW);                                   \
            break;                                                                                 \
        case 7:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 7, NB, SW);                                   \
            break;                                                                                 \
        case 6:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 6, NB, SW);                                   \
            break;                                                                                 \
        case 5:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 5, NB, SW);                                   \
            break;                                                                                 \
        case 4:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 4, NB, SW);                                   \
            break;                                                                                 \
        case 3:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 3, NB, SW);                                   \
            break;                                                                                 \
        case 2:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 2, NB, SW);                                   \
            break;                                                                                 \
        case 1:                                                                                    \
            tile_fn(j, band, wo, y0, y, x0, o0, out, 1, NB, SW);                                   \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

/* Shape, bands and operands for geometry g (2-D, groups 1), with bands of
 * rows small enough to make at least `items` (image, band) work items. */
void deft_direct_job_init(direct_job_t *j, const deft_conv_geom_t *g, int64_t items);
/* The input rows of output rows [r0, r1): from r0 sh - ph, (r1 - r0 - 1) sh + kh of them. */
int64_t deft_direct_band_rows(const direct_job_t *j, int64_t r0, int64_t r1);
/* buf (rows, icb, wp, CB) = image rows from `first` on, zero outside the image. */
AVX512 void deft_direct_pack_band(const direct_job_t *j, const float *img, int64_t first,
                                  int64_t rows, float *buf);

#endif
#endif
