/* The hash of cache keys and name tables (short keys, no adversary): eight bytes a
 * step, then a final mix (byte-at-a-time FNV-1a chained a multiply per byte, and
 * naming a graph's nodes spent a quarter of its time there). */
#ifndef DEFT_CORE_HASH_H
#define DEFT_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t deft_hash_bytes(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 32;
}

#endif
