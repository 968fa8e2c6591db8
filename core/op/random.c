#include "core/op/random.h"

#include <pthread.h>

#include "core/math/philox.h"
#include "core/op/kernel.h"

/* A lock, not atomics: seed and counter must change together. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stream_seed = 0x5EED5EEDu, stream_counter;

void deft_random_seed(uint64_t seed) {
    pthread_mutex_lock(&lock);
    stream_seed = seed;
    stream_counter = 0;
    pthread_mutex_unlock(&lock);
}

uint64_t deft_random_reserve(uint64_t n, uint64_t *seed) {
    pthread_mutex_lock(&lock);
    uint64_t first = stream_counter;
    stream_counter += n;
    *seed = stream_seed;
    pthread_mutex_unlock(&lock);
    return first;
}

/* deft_philox's rounds on LANES counters side by side: the same integer
 * operations, so the same bits; each lane's 32x32-bit products are the
 * vector unit's (vpmuludq). */
enum { LANES = 16 };

static inline void philox_lanes(uint64_t seed, uint64_t counter, uint32_t *words) {
    uint32_t c0[LANES], c1[LANES], c2[LANES] = {0}, c3[LANES] = {0};
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int j = 0; j < LANES; j++) {
        c0[j] = (uint32_t)(counter + (uint64_t)j);
        c1[j] = (uint32_t)((counter + (uint64_t)j) >> 32);
    }
    for (int round = 0; round < 10; round++) {
        for (int j = 0; j < LANES; j++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[j], p1 = (uint64_t)0xCD9E8D57u * c2[j];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[j] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[j] ^ k1;
            c1[j] = (uint32_t)p1;
            c3[j] = (uint32_t)p0;
            c0[j] = n0;
            c2[j] = n2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int j = 0; j < LANES; j++) {
        words[4 * j] = c0[j];
        words[4 * j + 1] = c1[j];
        words[4 * j + 2] = c2[j];
        words[4 * j + 3] = c3[j];
    }
}

DEFT_CLONES void deft_philox_words(uint64_t seed, uint64_t first, int64_t n, uint32_t *words) {
    int64_t b = 0;
    for (; b + LANES <= n; b += LANES) philox_lanes(seed, first + (uint64_t)b, words + 4 * b);
    for (; b < n; b++) {
        deft_philox_block_t block = deft_philox(seed, first + (uint64_t)b);
        for (int w = 0; w < 4; w++) words[4 * b + w] = block.v[w];
    }
}
