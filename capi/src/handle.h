/*
 * Handle shells.
 *
 * A public handle points at a small shell that holds one reference to an
 * internal object. Shells come from slabs that are never returned to the
 * system, so reading the magic word of a freed handle is always safe: a
 * stale handle is reported as "already freed" instead of corrupting memory.
 * Freed shells are reused first-in first-out, which keeps a stale handle
 * detectable for as long as possible. A foreign pointer is caught by the
 * magic word when it points to readable memory; that is the cheap check.
 */
#ifndef DEFT_CAPI_HANDLE_H
#define DEFT_CAPI_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum deft_handle_kind {
    DEFT_HANDLE_NDARRAY = 0,
    DEFT_HANDLE_SYMBOL = 1,
    DEFT_HANDLE_CACHED_OP = 2,
    DEFT_HANDLE_PROFILE_DOMAIN = 3,
    DEFT_HANDLE_PROFILE_OBJECT = 4,
    DEFT_HANDLE_KIND_COUNT
} deft_handle_kind_t;

/* Wrap object in a new shell; NULL (with the error set) when out of memory. */
void *deft_handle_new(deft_handle_kind_t kind, void *object);

/* The object behind a live handle of `kind`; -1 naming `what` otherwise. */
int deft_handle_get(const void *handle, deft_handle_kind_t kind, const char *what, void **object);

/*
 * Retire a live handle and give back its object, whose reference the caller
 * now drops. Exactly one of two racing frees of one handle succeeds.
 */
int deft_handle_retire(void *handle, deft_handle_kind_t kind, const char *what, void **object);

/* Fast checks for hot loops; call deft_handle_get for the error message. */
bool deft_handle_valid(const void *handle, deft_handle_kind_t kind);
void *deft_handle_object(const void *handle);

int64_t deft_handle_live_count(deft_handle_kind_t kind);

#endif
