/* FNV-1a: the hash of cache keys and name tables (short keys, no adversary). */
#ifndef DEFT_CORE_HASH_H
#define DEFT_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t deft_hash_bytes(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

#endif
