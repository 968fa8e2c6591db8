#include "core/op/random.h"

#include <pthread.h>

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
