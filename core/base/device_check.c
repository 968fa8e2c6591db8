#include "core/base/device_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

struct deft_check {
    atomic_int refcount;
    /* In the list of live checks (wait-all finds the failed ones there),
     * under `checks.lock`. */
    struct deft_check *prev, *next;
    uint32_t owner;
    bool reported;
    int id, slot;
    volatile const deft_check_verdict_t *verdict;
    deft_check_report_fn report;
    void (*release)(void *);
    void *release_arg;
    size_t ctx_size;
    _Alignas(16) unsigned char ctx[]; /* the report's context, copied */
};

static atomic_long live_checks;

/* Every live check, oldest first. A check stays only while a buffer
 * carries it: one nobody can read any more is nobody's failure. */
static struct {
    pthread_mutex_t lock;
    deft_check_t *head, *tail;
} checks = {.lock = PTHREAD_MUTEX_INITIALIZER};
static _Atomic(uint32_t (*)(void)) owner_fn;

void deft_check_set_owner_fn(uint32_t (*owner)(void)) {
    atomic_store(&owner_fn, owner);
}

static void link_check(deft_check_t *c) {
    pthread_mutex_lock(&checks.lock);
    c->prev = checks.tail, c->next = NULL;
    if (checks.tail)
        checks.tail->next = c;
    else
        checks.head = c;
    checks.tail = c;
    pthread_mutex_unlock(&checks.lock);
}

static void unlink_check(deft_check_t *c) {
    pthread_mutex_lock(&checks.lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        checks.head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        checks.tail = c->prev;
    pthread_mutex_unlock(&checks.lock);
}

deft_check_t *deft_check_new(int id, int slot, volatile const deft_check_verdict_t *verdict,
                             const deft_check_report_t *report, void (*release)(void *),
                             void *release_arg) {
    deft_check_t *c = malloc(sizeof *c + report->ctx_size);
    if (!c) {
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a device-side check");
        return NULL;
    }
    atomic_init(&c->refcount, 1);
    c->id = id, c->slot = slot;
    c->verdict = verdict;
    c->report = report->fn;
    c->release = release, c->release_arg = release_arg;
    c->ctx_size = report->ctx_size;
    if (report->ctx_size) memcpy(c->ctx, report->ctx, report->ctx_size);
    uint32_t (*owner)(void) = atomic_load(&owner_fn);
    c->owner = owner ? owner() : 0;
    c->reported = false;
    link_check(c);
    atomic_fetch_add_explicit(&live_checks, 1, memory_order_relaxed);
    return c;
}

deft_check_t *deft_check_retain(deft_check_t *check) {
    atomic_fetch_add_explicit(&check->refcount, 1, memory_order_relaxed);
    return check;
}

void deft_check_release(deft_check_t *check) {
    if (!check || atomic_fetch_sub_explicit(&check->refcount, 1, memory_order_acq_rel) != 1) return;
    unlink_check(check);
    if (check->release) check->release(check->release_arg);
    atomic_fetch_sub_explicit(&live_checks, 1, memory_order_relaxed);
    free(check);
}

int deft_check_device(const deft_check_t *check) {
    return check->id;
}

int deft_check_slot(const deft_check_t *check) {
    return check->slot;
}

/* The device writes the verdict by DMA: read its words through a volatile
 * pointer, and only after the host has waited for the copy when it matters
 * (resolve). An aligned 8-byte word is written whole. */
bool deft_check_passed(const deft_check_t *check) {
    return check->verdict->first == DEFT_CHECK_PASSED;
}

bool deft_check_pending(const deft_check_t *check) {
    return check->verdict->first == DEFT_CHECK_PENDING;
}

int deft_check_resolve(const deft_check_t *check) {
    uint64_t first = check->verdict->first;
    if (first == DEFT_CHECK_PASSED) return 0;
    if (first == DEFT_CHECK_PENDING)
        return deft_error(DEFT_ERR_INTERNAL,
                          "a device-side check was read before the device answered it");
    return check->report(check->ctx, (int64_t)first, check->verdict->value);
}

long deft_check_live(void) {
    return atomic_load_explicit(&live_checks, memory_order_relaxed);
}

deft_check_t *deft_checks_take_failed(uint32_t owner, long *failed) {
    deft_check_t *first = NULL;
    *failed = 0;
    pthread_mutex_lock(&checks.lock);
    for (deft_check_t *c = checks.head; c; c = c->next) {
        if (c->owner != owner || c->reported) continue; /* another thread's verdicts are theirs */
        uint64_t verdict = c->verdict->first;
        if (verdict == DEFT_CHECK_PASSED || verdict == DEFT_CHECK_PENDING) continue;
        c->reported = true;
        if ((*failed)++ == 0) first = deft_check_retain(c);
    }
    pthread_mutex_unlock(&checks.lock);
    return first;
}
