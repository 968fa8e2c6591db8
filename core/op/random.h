/* The global random stream: a seed and a count of blocks drawn so far. */
#ifndef DEFT_CORE_RANDOM_H
#define DEFT_CORE_RANDOM_H

#include <stdint.h>

#include "core/engine/engine.h"

/* Restart the stream: the same seed then gives the same numbers. Draws queued
 * before it are made first (with the old seed). -1 when out of memory. */
int deft_random_seed(uint64_t seed);

/*
 * The engine variable that orders the draws: a kernel reserves its blocks
 * when it runs, so every operation that draws (op.h, `nondeterministic`), and
 * every graph run with such a node, writes this variable, and the engine runs
 * them in the order the host pushed them. Without it, two draws on two
 * workers took their blocks in whichever order they started, and the same
 * seed gave other numbers run to run. NULL (error set) when out of memory.
 */
deft_var_t *deft_random_stream_var(void);
/* Reserve n blocks; returns the first counter and the seed they belong to. */
uint64_t deft_random_reserve(uint64_t n, uint64_t *seed);

/* The words of blocks [first, first + n) of the seed's Philox stream, four
 * a block: words[4 * b + w] = deft_philox(seed, first + b).v[w], computed
 * 16 blocks at a time in vector registers (10x the scalar rate). */
void deft_philox_words(uint64_t seed, uint64_t first, int64_t n, uint32_t *words);

#endif
