/*
 * Counter-based random numbers (Philox4x32-10, Salmon et al., SC 2011).
 *
 * Element i of a random operator draws from block (seed, offset + i) (or
 * one word of block offset + i / 4, when 32 bits are enough), so the numbers
 * depend only on the seed and on how many were drawn before, never on thread
 * count or device: CPU and GPU kernels share this code and agree.
 */
#ifndef DEFT_CORE_PHILOX_H
#define DEFT_CORE_PHILOX_H

#include "core/math/device_fn.h"

typedef struct deft_philox_block {
    uint32_t v[4];
} deft_philox_block_t;

DEFT_DEVICE_FN deft_philox_block_t deft_philox(uint64_t seed, uint64_t counter) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    deft_philox_block_t out = {{c0, c1, c2, c3}};
    return out;
}

/* Uniform in [0, 1) with 24 (float, from one word of a block) or 53 (double) random bits. */
DEFT_DEVICE_FN float deft_uniform_word_f(uint32_t word) {
    return (float)(word >> 8) * (1.0f / 16777216.0f);
}
DEFT_DEVICE_FN double deft_uniform_d(deft_philox_block_t b) {
    uint64_t bits = ((uint64_t)b.v[0] << 21) ^ (b.v[1] >> 11);
    return (double)(bits & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* Standard normal by Box-Muller; u1 is in (0, 1] so the logarithm is finite. */
DEFT_DEVICE_FN double deft_normal_d(deft_philox_block_t b) {
    double u1 = ((double)(b.v[0] >> 8) + 1.0) * (1.0 / 16777216.0);
    u1 = u1 - (double)(b.v[1] >> 11) * (1.0 / 16777216.0 / 2097152.0);
    double u2 = (double)b.v[2] * (1.0 / 4294967296.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The values of random operators, element by element (init.c explains the
 * layout of blocks): float32 uniforms from one word, the rest from a block. */
DEFT_DEVICE_FN float deft_random_uniform_f(uint32_t word, float low, float width) {
    return low + width * deft_uniform_word_f(word);
}
DEFT_DEVICE_FN float deft_random_normal_f(deft_philox_block_t b, double loc, double scale) {
    return (float)(loc + scale * deft_normal_d(b));
}
/* Dropout's mask element from one word: 1 / keep with probability keep, else 0. */
DEFT_DEVICE_FN double deft_dropout_mask(uint32_t word, double keep) {
    return (double)deft_uniform_word_f(word) < keep ? 1.0 / keep : 0.0;
}

/* uniform in [a, b) or normal with mean a and deviation b */
DEFT_DEVICE_FN double deft_random_d(deft_philox_block_t block, bool normal, double a, double b) {
    return normal ? a + b * deft_normal_d(block) : a + (b - a) * deft_uniform_d(block);
}

#endif
