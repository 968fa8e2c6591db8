/*
 * Denormal floats flushed to zero on the threads that run kernels.
 *
 * Why: a float that decays geometrically (SGD momentum under a small
 * gradient, Adam's second moment) reaches the denormal range after about a
 * thousand steps, and every arithmetic instruction on a denormal then takes a
 * microcode assist: a plain SGD loop slows about tenfold (3 to 31 us for the
 * demo MLP's parameters). With FTZ (results that would be denormal become 0)
 * and DAZ (denormal inputs read as 0) the hardware never assists; the values
 * lost are below 1.2e-38 (float) and 2.2e-308 (double), which no model needs.
 * MXNet and TensorFlow set the same flags on their worker threads.
 *
 * deft's own threads (engine workers, parallel-for helpers) set the flags
 * once when they start. A kernel may also run inline on the caller's thread,
 * whose floating-point mode belongs to the caller (NumPy on the same thread
 * must keep IEEE denormals): it gets the flags for the kernel's duration
 * only (deft_fpmode_enter / deft_fpmode_leave). On CPUs other than x86 these
 * are no-ops.
 */
#ifndef DEFT_CORE_FPMODE_H
#define DEFT_CORE_FPMODE_H

#if defined(__SSE2__) || defined(__x86_64__)
#include <xmmintrin.h>

#define DEFT_MXCSR_FTZ   0x8000u /* flush results to zero */
#define DEFT_MXCSR_DAZ   0x0040u /* read denormal inputs as zero */
#define DEFT_MXCSR_FLUSH (DEFT_MXCSR_FTZ | DEFT_MXCSR_DAZ)

/* Set FTZ and DAZ for the rest of this thread's life (deft's own threads). */
static inline void deft_fpmode_flush_denormals(void) {
    _mm_setcsr(_mm_getcsr() | DEFT_MXCSR_FLUSH);
}

/* Flush denormals until deft_fpmode_leave(the value returned). Where the
 * flags are already set (deft's threads) this is one read of the control
 * register, no write. */
static inline unsigned deft_fpmode_enter(void) {
    unsigned saved = _mm_getcsr();
    if ((saved & DEFT_MXCSR_FLUSH) != DEFT_MXCSR_FLUSH) _mm_setcsr(saved | DEFT_MXCSR_FLUSH);
    return saved;
}

static inline void deft_fpmode_leave(unsigned saved) {
    if ((saved & DEFT_MXCSR_FLUSH) != DEFT_MXCSR_FLUSH) _mm_setcsr(saved);
}

/* Whether this thread flushes denormals now (for tests). */
static inline int deft_fpmode_flushing(void) {
    return (_mm_getcsr() & DEFT_MXCSR_FLUSH) == DEFT_MXCSR_FLUSH;
}
#else
static inline void deft_fpmode_flush_denormals(void) {}
static inline unsigned deft_fpmode_enter(void) {
    return 0;
}
static inline void deft_fpmode_leave(unsigned saved) {
    (void)saved;
}
static inline int deft_fpmode_flushing(void) {
    return 0;
}
#endif

#endif
