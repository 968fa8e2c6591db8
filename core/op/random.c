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

/* 32x32 -> 64-bit products of each lane: the high halves (vpmuludq
 * multiplies the even lanes; the odd ones are shifted down first) and the low. */
__attribute__((target("avx512f"))) static inline void mul_hi_lo(__m512i a, __m512i m, __m512i *hi,
                                                                __m512i *lo) {
    __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    *lo = _mm512_mullo_epi32(a, m);
}

/* deft_philox's rounds on 16 counters side by side, in vector registers:
 * the same integer operations, so the same bits. (GCC's own vectorisation
 * of the scalar rounds was 10x slower than scalar code.) */
__attribute__((target("avx512f"))) static void philox_words_avx512(uint64_t seed, uint64_t first,
                                                                   int64_t n, uint32_t *words) {
    const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u),
                  m2 = _mm512_set1_epi32((int)0xCD9E8D57u);
    int64_t b = 0;
    for (; b + 16 <= n; b += 16) {
        uint32_t lo[16], hi[16];
        for (int j = 0; j < 16; j++) {
            uint64_t counter = first + (uint64_t)(b + j);
            lo[j] = (uint32_t)counter, hi[j] = (uint32_t)(counter >> 32);
        }
        __m512i c0 = _mm512_loadu_si512(lo), c1 = _mm512_loadu_si512(hi);
        __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            __m512i hi0, lo0, hi2, lo2;
            mul_hi_lo(c0, m0, &hi0, &lo0);
            mul_hi_lo(c2, m2, &hi2, &lo2);
            c0 = _mm512_xor_si512(_mm512_xor_si512(hi2, c1), _mm512_set1_epi32((int)k0));
            c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
            c1 = lo2;
            c3 = lo0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        /* Interleave: within each 128-bit lane L, u[k] gets block 4 L + k's four words. */
        __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
        __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
        __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                        _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
        uint32_t *out = words + 4 * b;
        for (int k = 0; k < 4; k++) {
            _mm_storeu_si128((__m128i *)(out + 4 * k), _mm512_castsi512_si128(u[k]));
            _mm_storeu_si128((__m128i *)(out + 4 * (4 + k)), _mm512_extracti32x4_epi32(u[k], 1));
            _mm_storeu_si128((__m128i *)(out + 4 * (8 + k)), _mm512_extracti32x4_epi32(u[k], 2));
            _mm_storeu_si128((__m128i *)(out + 4 * (12 + k)), _mm512_extracti32x4_epi32(u[k], 3));
        }
    }
    philox_words_scalar(seed, first + (uint64_t)b, n - b, words + 4 * b);
}
#endif

void deft_philox_words(uint64_t seed, uint64_t first, int64_t n, uint32_t *words) {
#if DEFT_SIMD_X86
    if (deft_simd_avx512()) {
        philox_words_avx512(seed, first, n, words);
        return;
    }
#endif
    philox_words_scalar(seed, first, n, words);
}
