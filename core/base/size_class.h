/*
 * Size classes of the memory pools: four per power of two (64, 80, 96, 112,
 * 128, 160, ...), so a cached block wastes at most a fifth of its size and
 * a freed block fits every later request of its class.
 */
#ifndef DEFT_CORE_SIZE_CLASS_H
#define DEFT_CORE_SIZE_CLASS_H

#include <stddef.h>

#define DEFT_CLASS_SMALLEST_LOG2 6  /* 64 bytes */
#define DEFT_CLASS_LARGEST_LOG2  40 /* 1 TiB: larger blocks are not cached */
#define DEFT_CLASS_COUNT         (1 + (DEFT_CLASS_LARGEST_LOG2 - DEFT_CLASS_SMALLEST_LOG2) * 4)

static inline size_t deft_class_capacity(int cls) {
    if (cls == 0) return (size_t)1 << DEFT_CLASS_SMALLEST_LOG2;
    int log2 = DEFT_CLASS_SMALLEST_LOG2 + (cls - 1) / 4;
    return (size_t)((cls - 1) % 4 + 5) << (log2 - 2);
}

/* The class of nbytes, its capacity in *capacity; -1 when too large to cache. */
static inline int deft_size_class(size_t nbytes, size_t *capacity) {
    if (nbytes <= ((size_t)1 << DEFT_CLASS_SMALLEST_LOG2)) {
        *capacity = (size_t)1 << DEFT_CLASS_SMALLEST_LOG2;
        return 0;
    }
    int log2 = 63 - __builtin_clzll((unsigned long long)(nbytes - 1)); /* 2^log2 < n */
    if (log2 >= DEFT_CLASS_LARGEST_LOG2) return -1;
    size_t step = (size_t)1 << (log2 - 2);
    *capacity = (nbytes + step - 1) & ~(step - 1);
    return 1 + (log2 - DEFT_CLASS_SMALLEST_LOG2) * 4 + (int)(*capacity / step) - 5;
}

#endif
