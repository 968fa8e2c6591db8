/*
 * bfloat16 matrix products on CPUs with AVX512-BF16 (gemm_bf16.h).
 *
 * VDPBF16PS multiplies 32 pairs of bfloat16 and adds each pair's two
 * products into one of 16 float32 lanes: twice the multiply-adds of a
 * float32 FMA per instruction, at the same rate on Zen 4. To use it, the
 * operands are packed in pairs along k:
 *   - B in panels of NR = 32 columns: for each pair p, 32 words, word j
 *     holding B(2p, j) in its low half and B(2p+1, j) in its high half,
 *     which two vectors load;
 *   - A in panels of MR = 12 rows: for each pair p, 12 words (A(i, 2p),
 *     A(i, 2p+1)), each broadcast to all lanes.
 * A 12 x 32 tile of C then lives in 24 registers while the kernel walks k.
 * An odd k pads its last pair with a zero; ragged edges pad with zeros and
 * store under a mask. C accumulates in float32 (in registers, and between k
 * blocks in an m x n scratch) and is rounded to bfloat16 once, at the end,
 * like the widened path it replaces (VCVTNEPS2BF16: to nearest even).
 *
 * Blocking: k in blocks of KC, so that one block of packed B (KC x n) stays
 * in the core's L2 while every row panel of this thread's rows passes over
 * it; a row panel's block (MR x KC, 6 KiB) stays in L1 across the columns.
 *
 * On CPUs with AMX (Sapphire Rapids on), where VDPBF16PS runs at 0.7x
 * float32's FMA rate, TDPBF16PS multiplies a tile of A (16 rows of 16
 * pairs) by a tile of B (16 pairs of 16 columns) into a 16 x 16 float32
 * tile of C: 8192 multiply-adds an instruction. The B panels above are
 * already its B tiles (pair p of columns j..j+15 at p * NR + j, rows NR
 * words apart); A packs in panels of AMX_MR = 32 rows, each row's pairs
 * side by side, and both pad k to whole tiles of 16 pairs with zeros. A
 * 32 x 32 block of C is four tiles. Linux lends the tile registers to a
 * process that asks (arch_prctl), once.
 *
 * Both instructions treat denormal inputs and results as zero (DAZ/FTZ
 * whatever MXCSR says), as oneDNN's and PyTorch's bfloat16 kernels on the
 * same CPUs do.
 */
#define _GNU_SOURCE /* syscall */
#include "core/op/gemm_bf16.h"

#include <stdatomic.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/scratch.h"
#include "core/op/half_compute.h"
#include "core/op/simd.h"

#if DEFT_SIMD_X86
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define MR         12
#define AMX_MR     32 /* rows of an AMX panel: two tiles */
#define NR         32
#define KC         384 /* k values per block: 192 pairs, twelve AMX tiles */
#define TILE_PAIRS 16

/* Products of fewer rows keep to VDPBF16PS: a tile's 16 rows would idle. */
#define AMX_LEAST_ROWS 16

/* Below this many multiply-adds a product stays on one thread. */
#define PARALLEL_MACS (1 << 20)

typedef struct {
    int64_t m, n, k, kp; /* kp: pairs along k as packed, ceil(k / 2) (whole tiles for AMX) */
    const uint32_t *ap;  /* packed A: [ceil(m / MR)][kp][MR], AMX [ceil(m / AMX_MR)][AMX_MR][kp] */
    const uint32_t *bp;  /* packed B: [ceil(n / NR)][kp][NR] */
    float *cf;           /* m x n float32: C so far (the result itself when c is NULL) */
    int64_t ldcf;        /* of cf */
    bool add;            /* cf already holds beta C */
    uint16_t *c;         /* the bfloat16 result, or NULL for a float32 one (in cf) */
    int64_t ldc;         /* of c and cf */
    int64_t block;       /* pairs per k block */
    const float *bias;   /* per row of C, or NULL */
} bf16_job_t;

static inline uint32_t pair(uint16_t lo, uint16_t hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

#if DEFT_SIMD_X86
/*
 * dst[p * ds + r] = src[r * ss + p], for r < 16 and p < 16, 32-bit words:
 * rows r >= rows read as zeros, pairs p >= pairs are neither read nor
 * written, and `store` masks the words written per p (the first 12 for A's
 * panels). Four rounds of shuffles: words within 128-bit lanes (4 x 4
 * blocks), then the lanes across registers.
 */
__attribute__((target("avx512f"))) static void transpose16(const uint32_t *src, int64_t ss,
                                                           int rows, int pairs, uint32_t *dst,
                                                           int64_t ds, __mmask16 store) {
    __mmask16 live = pairs >= 16 ? 0xffff : (__mmask16)((1u << pairs) - 1);
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_maskz_loadu_epi32(live, src + i * ss) : _mm512_setzero_si512();
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* r[4i + c], lane L: rows 4i..4i+3 of word 4L + c */
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i even0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88); /* lanes 0, 2 */
        __m512i odd0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);  /* lanes 1, 3 */
        __m512i even1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
        __m512i odd1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
        __m512i word[4] = {
            _mm512_shuffle_i32x4(even0, even1, 0x88), _mm512_shuffle_i32x4(odd0, odd1, 0x88),
            _mm512_shuffle_i32x4(even0, even1, 0xdd), _mm512_shuffle_i32x4(odd0, odd1, 0xdd)};
        for (int l = 0; l < 4; l++)
            if (4 * l + c < pairs) _mm512_mask_storeu_epi32(dst + (4 * l + c) * ds, store, word[l]);
    }
}
#endif

/*
 * Rows of k values, ld apart from x on (`rows` of them; zeros up to
 * `width`), packed as pairs: dst[p * width + r] holds row r's pair p. A
 * full pair is one 32-bit word of its row (x86 is little-endian: the lower
 * address is the low half, as pair() puts it), so the packing is a
 * transpose of words; an odd k's last pair has a zero high half.
 */
static void pack_rows(const uint16_t *x, int64_t ld, int64_t k, int rows, int width, int64_t kp,
                      uint32_t *dst) {
    int64_t full = k / 2;
#if DEFT_SIMD_X86
    const uint32_t *words =
        (const uint32_t *)x; /* row r starts at word r * ld / 2 when ld is even */
    if (k % 2 == 0 && ld % 2 == 0) {
        __mmask16 store = width >= 16 ? 0xffff : (__mmask16)((1u << width) - 1);
        for (int r0 = 0; r0 < width; r0 += 16)
            for (int64_t p = 0; p < full; p += 16)
                transpose16(words + r0 * (ld / 2) + p, ld / 2, rows - r0,
                            (int)(full - p < 16 ? full - p : 16), dst + p * width + r0, width,
                            store);
        return;
    }
#endif
    for (int64_t p = 0; p < kp; p++)
        for (int r = 0; r < width; r++)
            dst[p * width + r] =
                r >= rows ? 0 : pair(x[r * ld + 2 * p], 2 * p + 1 < k ? x[r * ld + 2 * p + 1] : 0);
}

/* A's row panels: A is m x k (or k x m when ta), rows lda apart. Rows past
 * m pack as zeros. */
static void pack_a(const uint16_t *a, bool ta, int64_t m, int64_t k, int64_t lda, int64_t kp,
                   uint32_t *ap) {
    for (int64_t i0 = 0; i0 < m; i0 += MR, ap += kp * MR) {
        int rows = m - i0 < MR ? (int)(m - i0) : MR;
        if (!ta) {
            pack_rows(a + i0 * lda, lda, k, rows, MR, kp, ap);
            continue;
        }
        if (rows < MR) memset(ap, 0, sizeof *ap * (size_t)(kp * MR));
        for (int64_t p = 0; p < kp; p++) {
            const uint16_t *lo = a + 2 * p * lda + i0, *hi = lo + lda;
            for (int r = 0; r < rows; r++) ap[p * MR + r] = pair(lo[r], 2 * p + 1 < k ? hi[r] : 0);
        }
    }
}

/* A's AMX panels: AMX_MR rows of ks pairs each, row r's pairs side by
 * side; rows past m and pairs past k pack as zeros. */
static void pack_a_amx(const uint16_t *a, bool ta, int64_t m, int64_t k, int64_t lda, int64_t ks,
                       uint32_t *ap) {
    int64_t panels = (m + AMX_MR - 1) / AMX_MR;
    memset(ap, 0, sizeof *ap * (size_t)(panels * AMX_MR * ks));
    for (int64_t i = 0; i < m; i++) {
        uint32_t *row = ap + i * ks;
        if (!ta) {
            memcpy(row, a + i * lda, sizeof *a * (size_t)k); /* little-endian: pairs as they lie */
            continue;
        }
        for (int64_t kk = 0; kk < k; kk++) ((uint16_t *)row)[kk] = a[kk * lda + i];
    }
}

#if DEFT_SIMD_X86
/* Two rows of a row-major B, 32 columns from j, interleaved into one pair
 * panel row (AVX-512BW's two-table permute does the interleave). */
__attribute__((target("avx512f,avx512bw"))) static void
interleave_rows(const uint16_t *r0, const uint16_t *r1, int cols, uint32_t *out) {
    __mmask32 live = cols >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << cols) - 1;
    __m512i lo = _mm512_maskz_loadu_epi16(live, r0);
    __m512i hi = r1 ? _mm512_maskz_loadu_epi16(live, r1) : _mm512_setzero_si512();
    /* Words 0..15 of the result take elements 0..15 of both rows, 16..31 the rest. */
    const __m512i first =
        _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
    _mm512_storeu_si512(out, _mm512_permutex2var_epi16(lo, first, hi));
    _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi16(lo, second, hi));
}
#endif

/* B's column panels: B is k x n (or n x k when tb), rows ldb apart, kp
 * pairs in panels of `ks` >= kp pairs. Columns past n and pairs past kp
 * pack as zeros. */
static void pack_b(const uint16_t *b, bool tb, int64_t k, int64_t n, int64_t ldb, int64_t kp,
                   int64_t ks, uint32_t *bp) {
    for (int64_t j0 = 0; j0 < n; j0 += NR, bp += ks * NR) {
        int cols = n - j0 < NR ? (int)(n - j0) : NR;
        memset(bp + kp * NR, 0, sizeof *bp * (size_t)((ks - kp) * NR));
        if (tb) {
            pack_rows(b + j0 * ldb, ldb, k, cols, NR, kp, bp);
            continue;
        }
#if DEFT_SIMD_X86
        for (int64_t p = 0; p < kp; p++) {
            int64_t kk = 2 * p;
            interleave_rows(b + kk * ldb + j0, kk + 1 < k ? b + (kk + 1) * ldb + j0 : NULL, cols,
                            bp + p * NR);
        }
#endif
    }
}

#if DEFT_SIMD_X86
/*
 * One MR x NR tile of C over pairs [0, kp) of the panels a and b, `rows` x
 * `cols` of it inside C. The sum goes to the float32 tile cf (plus what cf
 * holds when `add`), or, on the last k block, rounded to bfloat16 into c:
 * a product in one k block never touches cf. Without c (a float32 result),
 * every block's sum goes to cf.
 */
typedef struct {
    float *cf;
    uint16_t *c;
    const float *bias; /* added to each row's sum on the last k block, or NULL */
    int64_t ldc, ldcf; /* of c and cf */
    int rows, cols;
    bool add, last;
} tile_out_t;

/* Row r of a tile of C from its float32 sums v0 (columns 0-15) and v1 (16-31). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static inline void
put_row(const tile_out_t *o, int r, __m512 v0, __m512 v1) {
    __mmask16 m0 = o->cols >= 16 ? 0xffff : (__mmask16)((1u << o->cols) - 1);
    __mmask16 m1 = o->cols >= 32   ? 0xffff
                   : o->cols <= 16 ? 0
                                   : (__mmask16)((1u << (o->cols - 16)) - 1);
    float *cf = o->cf + r * o->ldcf;
    if (o->add) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cf));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cf + 16));
    }
    if (o->last && o->bias) {
        v0 = _mm512_add_ps(v0, _mm512_set1_ps(o->bias[r]));
        v1 = _mm512_add_ps(v1, _mm512_set1_ps(o->bias[r]));
    }
    if (o->last && o->c) {
        uint16_t *c = o->c + r * o->ldc;
        _mm256_mask_storeu_epi16(c, m0, (__m256i)_mm512_cvtneps_pbh(v0));
        _mm256_mask_storeu_epi16(c + 16, m1, (__m256i)_mm512_cvtneps_pbh(v1));
    } else {
        _mm512_mask_storeu_ps(cf, m0, v0);
        _mm512_mask_storeu_ps(cf + 16, m1, v1);
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
tile(int64_t kp, const uint32_t *a, const uint32_t *b, tile_out_t o) {
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++, a += MR, b += NR) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
    for (int r = 0; r < o.rows; r++) put_row(&o, r, acc[r][0], acc[r][1]);
}

/*
 * One AMX_MR x NR block of C over pairs [0, kp) (whole tiles) of the AMX
 * panel a (rows ks pairs apart) and the B panel b; the tile configuration
 * is loaded. Tiles 0-3 hold C's four quarters, 4-5 A's two halves, 6-7
 * B's two halves.
 */
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16"))) static void
amx_block(int64_t kp, const uint32_t *a, int64_t ks, const uint32_t *b, tile_out_t o) {
    float c[AMX_MR][NR];
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < kp; p += TILE_PAIRS) {
        _tile_loadd(4, a + p, ks * 4);
        _tile_loadd(5, a + TILE_PAIRS * ks + p, ks * 4);
        _tile_loadd(6, b + p * NR, NR * 4);
        _tile_loadd(7, b + p * NR + 16, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, &c[0][0], NR * 4);
    _tile_stored(1, &c[0][16], NR * 4);
    _tile_stored(2, &c[16][0], NR * 4);
    _tile_stored(3, &c[16][16], NR * 4);
    for (int r = 0; r < o.rows; r++)
        put_row(&o, r, _mm512_loadu_ps(&c[r][0]), _mm512_loadu_ps(&c[r][16]));
}

/* The tile shapes amx_block uses: eight tiles of 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes[16];
    uint8_t rows[16];
} tile_config_t;

static const tile_config_t amx_config = {
    .palette = 1,
    .bytes = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};
#endif

/* Row panels [begin, end) of C (of `mr` rows), every k block over them:
 * AVX512-BF16 tiles, or AMX blocks when mr is AMX_MR. */
static void panel_rows(const bf16_job_t *g, int mr, int64_t begin, int64_t end) {
#if DEFT_SIMD_X86
    int64_t panels_n = (g->n + NR - 1) / NR;
    for (int64_t p0 = 0; p0 < g->kp; p0 += g->block) {
        int64_t pairs = g->kp - p0 < g->block ? g->kp - p0 : g->block;
        tile_out_t o = {
            .ldc = g->ldc, .ldcf = g->ldcf, .add = g->add || p0 > 0, .last = p0 + pairs == g->kp};
        for (int64_t ip = begin; ip < end; ip++) {
            o.rows = g->m - ip * mr < mr ? (int)(g->m - ip * mr) : mr;
            for (int64_t jp = 0; jp < panels_n; jp++) {
                o.cols = g->n - jp * NR < NR ? (int)(g->n - jp * NR) : NR;
                o.cf = g->cf ? g->cf + ip * mr * g->ldcf + jp * NR : NULL;
                o.c = g->c ? g->c + ip * mr * g->ldc + jp * NR : NULL;
                o.bias = g->bias ? g->bias + ip * mr : NULL;
                const uint32_t *b = g->bp + (jp * g->kp + p0) * NR;
                if (mr == AMX_MR)
                    amx_block(pairs, g->ap + ip * AMX_MR * g->kp + p0, g->kp, b, o);
                else
                    tile(pairs, g->ap + (ip * g->kp + p0) * MR, b, o);
            }
        }
    }
#else
    (void)g, (void)mr, (void)begin, (void)end;
#endif
}

static void bf16_rows(void *arg, int64_t begin, int64_t end) {
    panel_rows(arg, MR, begin, end);
}

#if DEFT_SIMD_X86
/* The tile configuration is a thread's own: each loads it, and lets the
 * registers go after (so the kernel's context switches stay small). */
__attribute__((target("amx-tile"))) static void amx_rows(void *arg, int64_t begin, int64_t end) {
    _tile_loadconfig(&amx_config);
    panel_rows(arg, AMX_MR, begin, end);
    _tile_release();
}

/* -1: not asked yet; else whether AMX runs (CPU, kernel, and deft_gemm_bf16_use_amx). */
static int amx_state = -1;
static atomic_bool amx_wanted = true;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_ask(void) {
    unsigned eax, ebx, ecx, edx;
    /* CPUID 7.0 EDX: bit 22 AMX-BF16, bit 24 AMX-TILE */
    bool cpu =
        __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 22 & 1) && (edx >> 24 & 1);
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
    amx_state = cpu && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#endif

static bool amx_on(void) {
#if DEFT_SIMD_X86
    pthread_once(&amx_once, amx_ask);
    return amx_state == 1 && atomic_load_explicit(&amx_wanted, memory_order_relaxed) &&
           deft_simd_avx512();
#else
    return false;
#endif
}

void deft_gemm_bf16_use_amx(bool on) {
#if DEFT_SIMD_X86
    atomic_store_explicit(&amx_wanted, on, memory_order_relaxed);
#else
    (void)on;
#endif
}

bool deft_gemm_bf16_amx(void) {
    return deft_gemm_bf16_available() && amx_on();
}

bool deft_gemm_bf16_available(void) {
#if DEFT_SIMD_X86
    return deft_simd_avx512() && __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("avx512bw");
#else
    return false;
#endif
}

/* deft_gemm_bf16 and deft_gemm_bf16_f32: the result to c (bfloat16) or, without c, to cf. */
static int gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                const uint16_t *b, double beta, uint16_t *c, float *cf) {
    bool amx = m >= AMX_LEAST_ROWS && amx_on();
    int mr = amx ? AMX_MR : MR;
    /* ks: the pairs a panel stores, whole tiles for AMX */
    int64_t kp = (k + 1) / 2, ks = amx ? (kp + TILE_PAIRS - 1) / TILE_PAIRS * TILE_PAIRS : kp;
    int64_t panels_m = (m + mr - 1) / mr, panels_n = (n + NR - 1) / NR;
    size_t na = (size_t)(panels_m * ks * mr), nb = (size_t)(panels_n * ks * NR);
    /* A float32 C of our own only for a bfloat16 result whose sum passes
     * several k blocks or starts from beta C. */
    size_t ncf = c && (ks > KC / 2 || beta != 0) ? (size_t)(m * n) : 0;
    uint32_t *ap = deft_scratch_alloc((na + nb) * sizeof *ap + ncf * sizeof(float));
    if (!ap) return -1;
    uint32_t *bp = ap + na;
    if (c) cf = (float *)(bp + nb);
    if (amx)
        pack_a_amx(a, ta, m, k, ta ? m : k, ks, ap);
    else
        pack_a(a, ta, m, k, ta ? m : k, kp, ap);
    pack_b(b, tb, k, n, tb ? k : n, kp, ks, bp);
    if (beta != 0) {
        if (c) deft_half_widen(c, 1, true, cf, m * n);
        if (beta != 1)
            for (int64_t i = 0; i < m * n; i++) cf[i] = (float)(beta * cf[i]);
    }
    bf16_job_t job = {m, n, k, ks, ap, bp, cf, n, beta != 0, c, n, KC / 2, NULL};
    deft_range_fn rows = bf16_rows;
#if DEFT_SIMD_X86
    if (amx) rows = amx_rows;
#endif
    int threads = (double)m * (double)n * (double)k >= PARALLEL_MACS ? deft_parallel_budget() : 1;
    if (threads < 2 || panels_m < 2)
        rows(&job, 0, panels_m);
    else
        deft_parallel_for(panels_m, (panels_m + threads - 1) / threads, rows, &job);
    deft_scratch_free(ap);
    return 0;
}

int deft_gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                   const uint16_t *b, double beta, uint16_t *c) {
    return gemm(ta, tb, m, n, k, a, b, beta, c, NULL);
}

int deft_gemm_bf16_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                       const uint16_t *b, double beta, float *c) {
    return gemm(ta, tb, m, n, k, a, b, beta, NULL, c);
}

deft_bf16_a_t deft_gemm_bf16_a_layout(int64_t m, int64_t k) {
    bool amx = m >= AMX_LEAST_ROWS && amx_on();
    int64_t kp = (k + 1) / 2, ks = amx ? (kp + TILE_PAIRS - 1) / TILE_PAIRS * TILE_PAIRS : kp;
    return (deft_bf16_a_t){m, k, ks, amx, NULL};
}

size_t deft_gemm_bf16_a_words(const deft_bf16_a_t *a) {
    int mr = a->amx ? AMX_MR : MR;
    return (size_t)((a->m + mr - 1) / mr * a->ks * mr);
}

void deft_gemm_bf16_a_fill(const deft_bf16_a_t *a, bool ta, const uint16_t *src, int64_t lda) {
    if (a->amx)
        pack_a_amx(src, ta, a->m, a->k, lda, a->ks, a->panels);
    else
        pack_a(src, ta, a->m, a->k, lda, a->ks, a->panels);
}

int deft_gemm_bf16_pack_a(bool ta, int64_t m, int64_t k, const uint16_t *a, int64_t lda,
                          deft_bf16_a_t *out) {
    *out = deft_gemm_bf16_a_layout(m, k);
    out->panels = deft_scratch_alloc(sizeof(uint32_t) * deft_gemm_bf16_a_words(out));
    if (!out->panels) return -1;
    deft_gemm_bf16_a_fill(out, ta, a, lda);
    return 0;
}

deft_bf16_a_t deft_gemm_bf16_a_part(const deft_bf16_a_t *a, int64_t part, int64_t parts,
                                    int64_t *row0) {
    int mr = a->amx ? AMX_MR : MR;
    int64_t panels = (a->m + mr - 1) / mr;
    int64_t p0 = panels * part / parts, p1 = panels * (part + 1) / parts;
    int64_t r1 = p1 * mr < a->m ? p1 * mr : a->m;
    *row0 = p0 * mr;
    return (deft_bf16_a_t){r1 - *row0, a->k, a->ks, a->amx, a->panels + p0 * a->ks * mr};
}

void deft_gemm_bf16_a_free(deft_bf16_a_t *a) {
    deft_scratch_free(a->panels);
    a->panels = NULL;
}

int deft_gemm_bf16_tile(const deft_bf16_a_t *a, bool tb, int64_t n, const uint16_t *b, int64_t ldb,
                        const deft_bf16_out_t *out) {
    int mr = a->amx ? AMX_MR : MR;
    int64_t kp = (a->k + 1) / 2, panels_m = (a->m + mr - 1) / mr, panels_n = (n + NR - 1) / NR;
    /* k in blocks as deft_gemm_bf16 takes it: a bfloat16 C over several
     * blocks sums in a float32 tile of our own */
    size_t nb = (size_t)(panels_n * a->ks * NR), ncf = out->c && a->ks > KC / 2 ? a->m * n : 0;
    uint32_t *bp = deft_scratch_alloc(sizeof *bp * nb + sizeof(float) * ncf);
    if (!bp) return -1;
    pack_b(b, tb, a->k, n, ldb, kp, a->ks, bp);
    bf16_job_t job = {a->m,     n,        a->k,   a->ks,    a->panels, bp,       out->cf,
                      out->ldc, out->add, out->c, out->ldc, KC / 2,    out->bias};
    if (ncf) job.cf = (float *)(bp + nb), job.ldcf = n;
#if DEFT_SIMD_X86
    (a->amx ? amx_rows : bf16_rows)(&job, 0, panels_m);
#else
    bf16_rows(&job, 0, panels_m);
#endif
    deft_scratch_free(bp);
    return 0;
}
