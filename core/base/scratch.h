/*
 * Kernel workspaces: im2col columns, partial sums, transposed copies.
 *
 * A training loop asks for the same workspace sizes every step. From malloc,
 * a large block comes back as fresh pages once it was returned to the
 * system, and each page is faulted in and zeroed again: a LeNet step spent
 * a tenth of its time so. These blocks come from the CPU pool instead
 * (cpu_pool.c), which keeps freed blocks for the next request of their size.
 */
#ifndef DEFT_CORE_SCRATCH_H
#define DEFT_CORE_SCRATCH_H

#include <stddef.h>

/* At least nbytes (0 is allowed), 64-byte aligned, uninitialised; NULL with
 * the error set when out of memory. */
void *deft_scratch_alloc(size_t nbytes);
/* Give back a block from deft_scratch_alloc (NULL is ignored). */
void deft_scratch_free(void *ptr);

#endif
