/*
 * bfloat16 matrix products with AVX512-BF16, or AMX where the CPU has it
 * (gemm_bf16.c): float32 accumulation, the result rounded to bfloat16 once.
 */
#ifndef DEFT_CORE_OP_GEMM_BF16_H
#define DEFT_CORE_OP_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether this CPU runs deft_gemm_bf16 (AVX512-BF16 and -BW, and the SIMD
 * AVX-512 variants not capped by deft_simd_cap). */
bool deft_gemm_bf16_available(void);

/* Whether deft_gemm_bf16 multiplies with AMX tiles (products of 16 rows or
 * more): the CPU has AMX-BF16, Linux lent the tile registers, and
 * deft_gemm_bf16_use_amx has not turned them off. */
bool deft_gemm_bf16_amx(void);

/* Let deft_gemm_bf16 use AMX where it can (the default), or keep to
 * AVX512-BF16 (tests run both). */
void deft_gemm_bf16_use_amx(bool on);

/* C (m x n) = op(A) op(B) + beta C, row-major and dense, bfloat16, on the CPU;
 * only where deft_gemm_bf16_available(). -1 when scratch memory ran out. */
int deft_gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                   const uint16_t *b, double beta, uint16_t *c);

/* The same with a float32 C: the float32 sums themselves, not rounded
 * (bfloat16 convolutions sum their gradients so, and round once at the end). */
int deft_gemm_bf16_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                       const uint16_t *b, double beta, float *c);

/*
 * Products that share A (a convolution's weights over many tiles of its
 * columns): A packed once, each B packed by the tile's call. A tile's
 * product runs on the calling thread, k in blocks as deft_gemm_bf16 takes
 * it; the caller keeps n to a few hundred columns, so that a block of B
 * stays in the core's L2 cache.
 */
typedef struct deft_bf16_a {
    int64_t m, k, ks; /* ks: pairs per panel row as packed */
    bool amx;
    uint32_t *panels;
} deft_bf16_a_t;

/* Pack A (m x k, or k x m when ta; rows lda apart); -1 when out of memory. */
int deft_gemm_bf16_pack_a(bool ta, int64_t m, int64_t k, const uint16_t *a, int64_t lda,
                          deft_bf16_a_t *out);
/* The same in memory of the caller's (weights kept packed between calls):
 * the layout an m x k A packs into (panels NULL), the 32-bit words it
 * takes, and the packing into a->panels. */
deft_bf16_a_t deft_gemm_bf16_a_layout(int64_t m, int64_t k);
size_t deft_gemm_bf16_a_words(const deft_bf16_a_t *a);
void deft_gemm_bf16_a_fill(const deft_bf16_a_t *a, bool ta, const uint16_t *src, int64_t lda);
void deft_gemm_bf16_a_free(deft_bf16_a_t *a);
/* Part `part` of `parts` runs of A's row panels, as an A of its own (not to
 * be freed); *row0 receives its first row. An empty part has m 0. */
deft_bf16_a_t deft_gemm_bf16_a_part(const deft_bf16_a_t *a, int64_t part, int64_t parts,
                                    int64_t *row0);

/* Where a tile's product goes: bfloat16 c, or, without c, float32 cf. */
typedef struct deft_bf16_out {
    uint16_t *c;       /* m x n bfloat16 (rounded once), or NULL */
    float *cf;         /* m x n float32 when c is NULL */
    int64_t ldc;       /* of c or cf */
    const float *bias; /* added to row i's sums: bias[i]; or NULL */
    bool add;          /* cf += the product (else =); float32 only */
} deft_bf16_out_t;

/* C = A B (+ bias), B k x n (or n x k when tb) with rows ldb apart, k >= 1.
 * -1 when out of memory. */
int deft_gemm_bf16_tile(const deft_bf16_a_t *a, bool tb, int64_t n, const uint16_t *b, int64_t ldb,
                        const deft_bf16_out_t *out);

#endif
