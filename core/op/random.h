/* The global random stream: a seed and a count of blocks drawn so far. */
#ifndef DEFT_CORE_RANDOM_H
#define DEFT_CORE_RANDOM_H

#include <stdint.h>

/* Restart the stream: the same seed then gives the same numbers. */
void deft_random_seed(uint64_t seed);
/* Reserve n blocks; returns the first counter and the seed they belong to. */
uint64_t deft_random_reserve(uint64_t n, uint64_t *seed);

#endif
