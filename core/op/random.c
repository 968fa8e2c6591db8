#include "core/op/random.h"

#include <pthread.h>

#include "core/base/error.h"
#include "core/math/philox.h"
#include "core/op/simd.h"

/* A lock, not atomics: seed and counter must change together. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stream_seed = 0x5EED5EEDu, stream_counter;
static deft_var_t *stream_var; /* made once, under the lock; never freed */

deft_var_t *deft_random_stream_var(void) {
    deft_var_t *var = __atomic_load_n(&stream_var, __ATOMIC_ACQUIRE);
    if (var) return var;
    pthread_mutex_lock(&lock);
    if (!stream_var) __atomic_store_n(&stream_var, deft_var_new(), __ATOMIC_RELEASE);
    var = stream_var;
    pthread_mutex_unlock(&lock);
    return var;
}

int deft_random_seed(uint64_t seed) {
    deft_var_t *var = deft_random_stream_var();
    if (!var) return -1;
    if (deft_engine_wait_to_overwrite(var)) return -1; /* a failed draw is not reported */
    pthread_mutex_lock(&lock);
    stream_seed = seed;
    stream_counter = 0;
    pthread_mutex_unlock(&lock);
    deft_engine_overwritten(var);
    return 0;
}

uint64_t deft_random_reserve(uint64_t n, uint64_t *seed) {
    pthread_mutex_lock(&lock);
    uint64_t first = stream_counter;
    stream_counter += n;
    *seed = stream_seed;
    pthread_mutex_unlock(&lock);
    return first;
}

/* The scalar generator, block by block. */
static void philox_words_scalar(uint64_t seed, uint64_t first, int64_t n, uint32_t *words) {
    for (int64_t b = 0; b < n; b++) {
        deft_philox_block_t block = deft_philox(seed, first + (uint64_t)b);
        for (int w = 0; w < 4; w++) words[4 * b + w] = block.v[w];
    }
}

#if DEFT_SIMD_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f"), always_inline)) static inline

/* 32x32 -> 64-bit products of each lane: the high halves and the low.
 * vpmuludq multiplies the even lanes; the odd ones are moved down first, and
 * the halves put back in place, by shuffles, not shifts and vpmulld: those
 * share the one port the multiplies run on, which bounds the rounds. */
AVX512 void mul_hi_lo(__m512i a, __m512i m, __m512i *hi, __m512i *lo) {
    __m512i even = _mm512_mul_epu32(a, m);
    __m512i odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_DDBB), m);
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_shuffle_epi32(even, _MM_PERM_DDBB), odd);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_shuffle_epi32(odd, _MM_PERM_CCAA));
}

/* The four words of 16 blocks, word k of block j in lane j of c[k]. */
typedef struct lanes {
    __m512i c[4];
} lanes_t;

AVX512 lanes_t counters(uint64_t first) {
    uint32_t lo[16], hi[16];
    for (int j = 0; j < 16; j++) {
        uint64_t counter = first + (uint64_t)j;
        lo[j] = (uint32_t)counter, hi[j] = (uint32_t)(counter >> 32);
    }
    return (lanes_t){{_mm512_loadu_si512(lo), _mm512_loadu_si512(hi), _mm512_setzero_si512(),
                      _mm512_setzero_si512()}};
}

AVX512 void philox_round(lanes_t *s, __m512i k0, __m512i k1) {
    __m512i hi0, lo0, hi2, lo2;
    mul_hi_lo(s->c[0], _mm512_set1_epi32((int)0xD2511F53u), &hi0, &lo0);
    mul_hi_lo(s->c[2], _mm512_set1_epi32((int)0xCD9E8D57u), &hi2, &lo2);
    *s = (lanes_t){{_mm512_xor_si512(_mm512_xor_si512(hi2, s->c[1]), k0), lo2,
                    _mm512_xor_si512(_mm512_xor_si512(hi0, s->c[3]), k1), lo0}};
}

/* The 16 blocks' words in order: within each 128-bit lane L, u[k] gets
 * block 4 L + k's four words. */
AVX512 void store_blocks(const lanes_t *s, uint32_t *out) {
    __m512i t0 = _mm512_unpacklo_epi32(s->c[0], s->c[1]),
            t1 = _mm512_unpackhi_epi32(s->c[0], s->c[1]);
    __m512i t2 = _mm512_unpacklo_epi32(s->c[2], s->c[3]),
            t3 = _mm512_unpackhi_epi32(s->c[2], s->c[3]);
    __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                    _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
    for (int k = 0; k < 4; k++) {
        _mm_storeu_si128((__m128i *)(out + 4 * k), _mm512_castsi512_si128(u[k]));
        _mm_storeu_si128((__m128i *)(out + 4 * (4 + k)), _mm512_extracti32x4_epi32(u[k], 1));
        _mm_storeu_si128((__m128i *)(out + 4 * (8 + k)), _mm512_extracti32x4_epi32(u[k], 2));
        _mm_storeu_si128((__m128i *)(out + 4 * (12 + k)), _mm512_extracti32x4_epi32(u[k], 3));
    }
}

/* deft_philox's rounds on 16 counters side by side, in vector registers:
 * the same integer operations, so the same bits. (GCC's own vectorisation
 * of the scalar rounds was 10x slower than scalar code.) Two groups of 16
 * go through the rounds together, so one group's multiplies fill the
 * other's latency (1024 blocks, a 32 x 128 Dropout mask: 2.1 -> 1.7 us). */
__attribute__((target("avx512f"))) static void philox_words_avx512(uint64_t seed, uint64_t first,
                                                                   int64_t n, uint32_t *words) {
    int64_t b = 0;
    for (int width; (width = n - b >= 32 ? 2 : n - b >= 16 ? 1 : 0) > 0; b += 16 * width) {
        lanes_t s[2] = {counters(first + (uint64_t)b), counters(first + (uint64_t)b + 16)};
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            __m512i v0 = _mm512_set1_epi32((int)k0), v1 = _mm512_set1_epi32((int)k1);
            philox_round(&s[0], v0, v1);
            if (width == 2) philox_round(&s[1], v0, v1);
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        for (int g = 0; g < width; g++) store_blocks(&s[g], words + 4 * (b + 16 * g));
    }
    philox_words_scalar(seed, first + (uint64_t)b, n - b, words + 4 * b);
}

/* The same on 8 counters a vector (AVX2): vpmuludq multiplies the even lanes. */
#define AVX2 __attribute__((target("avx2"), always_inline)) static inline

AVX2 void mul_hi_lo_avx2(__m256i a, __m256i m, __m256i *hi, __m256i *lo) {
    __m256i even = _mm256_mul_epu32(a, m);
    __m256i odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, _MM_SHUFFLE(3, 3, 1, 1)), m);
    *hi = _mm256_blend_epi32(_mm256_shuffle_epi32(even, _MM_SHUFFLE(3, 3, 1, 1)), odd, 0xAA);
    *lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, _MM_SHUFFLE(2, 2, 0, 0)), 0xAA);
}

typedef struct lanes8 {
    __m256i c[4];
} lanes8_t;

AVX2 lanes8_t counters_avx2(uint64_t first) {
    uint32_t lo[8], hi[8];
    for (int j = 0; j < 8; j++) {
        uint64_t counter = first + (uint64_t)j;
        lo[j] = (uint32_t)counter, hi[j] = (uint32_t)(counter >> 32);
    }
    return (lanes8_t){{_mm256_loadu_si256((const __m256i *)lo),
                       _mm256_loadu_si256((const __m256i *)hi), _mm256_setzero_si256(),
                       _mm256_setzero_si256()}};
}

AVX2 void philox_round_avx2(lanes8_t *s, __m256i k0, __m256i k1) {
    __m256i hi0, lo0, hi2, lo2;
    mul_hi_lo_avx2(s->c[0], _mm256_set1_epi32((int)0xD2511F53u), &hi0, &lo0);
    mul_hi_lo_avx2(s->c[2], _mm256_set1_epi32((int)0xCD9E8D57u), &hi2, &lo2);
    *s = (lanes8_t){{_mm256_xor_si256(_mm256_xor_si256(hi2, s->c[1]), k0), lo2,
                     _mm256_xor_si256(_mm256_xor_si256(hi0, s->c[3]), k1), lo0}};
}

/* The 8 blocks' words in order: 128-bit lane L of u[k] holds block 4 L + k. */
AVX2 void store_blocks_avx2(const lanes8_t *s, uint32_t *out) {
    __m256i t0 = _mm256_unpacklo_epi32(s->c[0], s->c[1]),
            t1 = _mm256_unpackhi_epi32(s->c[0], s->c[1]);
    __m256i t2 = _mm256_unpacklo_epi32(s->c[2], s->c[3]),
            t3 = _mm256_unpackhi_epi32(s->c[2], s->c[3]);
    __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                    _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    for (int k = 0; k < 4; k++) {
        _mm_storeu_si128((__m128i *)(out + 4 * k), _mm256_castsi256_si128(u[k]));
        _mm_storeu_si128((__m128i *)(out + 4 * (4 + k)), _mm256_extracti128_si256(u[k], 1));
    }
}

/* As philox_words_avx512, two groups of 8 through the rounds together. */
__attribute__((target("avx2"))) static void philox_words_avx2(uint64_t seed, uint64_t first,
                                                              int64_t n, uint32_t *words) {
    int64_t b = 0;
    for (int width; (width = n - b >= 16 ? 2 : n - b >= 8 ? 1 : 0) > 0; b += 8 * width) {
        lanes8_t s[2] = {counters_avx2(first + (uint64_t)b),
                         counters_avx2(first + (uint64_t)b + 8)};
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            __m256i v0 = _mm256_set1_epi32((int)k0), v1 = _mm256_set1_epi32((int)k1);
            philox_round_avx2(&s[0], v0, v1);
            if (width == 2) philox_round_avx2(&s[1], v0, v1);
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        for (int g = 0; g < width; g++) store_blocks_avx2(&s[g], words + 4 * (b + 8 * g));
    }
    philox_words_scalar(seed, first + (uint64_t)b, n - b, words + 4 * b);
}
#endif

void deft_philox_words(uint64_t seed, uint64_t first, int64_t n, uint32_t *words) {
#if DEFT_SIMD_X86
    if (deft_simd_avx2()) {
        (deft_simd_avx512() ? philox_words_avx512 : philox_words_avx2)(seed, first, n, words);
        return;
    }
#endif
    philox_words_scalar(seed, first, n, words);
}
