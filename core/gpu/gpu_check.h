/*
 * Slots for device-side checks (core/base/device_check.h): a verdict in
 * device memory that a checking kernel notes into, and its page-locked
 * host copy. Slots are reused, never freed (like the pools' blocks), and
 * kept per device and stream: a slot given back goes to the free list of
 * the stream its last work was queued on, so the next work on it, queued
 * on that stream too, runs after that work is done on the device, without
 * an event or a wait; and it is handed out again only once its last copy to
 * the host has landed (its host verdict is no longer pending). Taking and
 * giving back lock the device's list only.
 */
#ifndef DEFT_CORE_GPU_CHECK_H
#define DEFT_CORE_GPU_CHECK_H

#include "core/base/device_check.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct deft_gpu_check_slot {
    deft_check_verdict_t *device;        /* where the kernels note */
    volatile deft_check_verdict_t *host; /* page-locked: the copy the host reads */
    int dev, stream;                     /* the stream its work is queued on */
    struct deft_gpu_check_slot *next;    /* in the free list */
} deft_gpu_check_slot_t;

/* A slot for work on the calling thread's stream of GPU `dev`; -1 (error
 * set) when device or page-locked memory runs out. */
int deft_gpu_check_slot_take(int dev, deft_gpu_check_slot_t **out);
/* Give a slot back (a deft_check_new release callback: void * is the slot). */
void deft_gpu_check_slot_give(void *slot);
/* Slots handed out and not given back (tests: none may leak). */
long deft_gpu_check_slots_out(void);

#ifdef __cplusplus
}
#endif

#endif
