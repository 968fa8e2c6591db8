#include "core/base/scratch.h"

#include "core/base/allocator.h"

/* Each block starts with its capacity, one alignment unit before the
 * caller's pointer, so freeing needs nothing but the pointer. */
typedef struct {
    size_t capacity;
} scratch_header_t;

void *deft_scratch_alloc(size_t nbytes) {
    void *block;
    size_t capacity;
    deft_fences_t *fences;
    if (deft_cpu_pool.alloc(deft_device_cpu(), nbytes + DEFT_CPU_ALIGN, &block, &capacity,
                            &fences))
        return NULL;
    ((scratch_header_t *)block)->capacity = capacity;
    return (char *)block + DEFT_CPU_ALIGN;
}

void deft_scratch_free(void *ptr) {
    if (!ptr) return;
    char *block = (char *)ptr - DEFT_CPU_ALIGN;
    deft_cpu_pool.free(deft_device_cpu(), block, ((scratch_header_t *)block)->capacity, NULL);
}
