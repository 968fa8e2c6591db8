/*
 * Handle shells.
 *
 * A public handle names a small shell that holds one reference to an
 * internal object. The handle is a generation-tagged index, not an address
 * (see handle.c): a freed handle stays "already freed" even after its shell
 * serves a new object, and a foreign pointer is refused without being read.
 * Shells come from slabs that are never returned to the system, and freed
 * shells are reused first-in first-out, after a quarantine.
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

/* The object behind a live handle of `kind`, or NULL: the fast check for hot
 * loops (call deft_handle_get for the error message). */
void *deft_handle_lookup(const void *handle, deft_handle_kind_t kind);

int64_t deft_handle_live_count(deft_handle_kind_t kind);

#endif
