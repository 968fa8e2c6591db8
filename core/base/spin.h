/*
 * Polling for a short, fixed TIME before a thread sleeps.
 *
 * Why time and not rounds: waking a sleeping thread costs 10-50 us, and
 * work often comes in bursts, so deft's threads (engine workers, parallel-for
 * helpers, a parallel-for caller waiting for its chunks) poll briefly first.
 * A round of `pause` lasts 10 cycles on some x86 cores and 140 on others
 * (Skylake and later), so a count of rounds is 4 us on one machine and 50 us
 * on the next; a deadline on the monotonic clock is the same everywhere. The
 * clock (a vDSO call, about 20 ns) is read once every DEFT_SPIN_CHECK
 * pauses, so polling stays as cheap as a bare pause loop.
 */
#ifndef DEFT_CORE_SPIN_H
#define DEFT_CORE_SPIN_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* How long an idle thread polls before it sleeps: about one wake-up's cost. */
#define DEFT_SPIN_NS 20000
/* Pauses between two reads of the clock. */
#define DEFT_SPIN_CHECK 16

static inline void deft_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t deft_spin_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct deft_spin {
    int64_t deadline_ns;
    unsigned rounds;
} deft_spin_t;

/* Start polling for `ns` nanoseconds. */
static inline deft_spin_t deft_spin_start(int64_t ns) {
    return (deft_spin_t){deft_spin_clock_ns() + ns, 0};
}

/* Pause once; false once the time is up (then the caller sleeps). */
static inline bool deft_spin_again(deft_spin_t *spin) {
    deft_cpu_relax();
    return ++spin->rounds % DEFT_SPIN_CHECK != 0 || deft_spin_clock_ns() < spin->deadline_ns;
}

#endif
