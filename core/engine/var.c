/*
 * Engine variables: per-variable queues of waiting operations, as in
 * MXNet's ThreadedVar. A variable lets any number of reads run together, or
 * one write alone, in the order operations were pushed:
 *
 *   pending_reads   reads started and not finished
 *   pending_write   a write started and not finished
 *   head ... tail   operations waiting their turn, oldest first
 *
 * A read may start when no write is running and none is queued before it;
 * a write when nothing is running and nothing is queued before it. When a
 * write finishes, the reads at the head of the queue start together; when
 * the last read finishes, a write at the head starts.
 *
 * The critical sections are a handful of instructions, so a spinlock guards
 * each variable; a pthread mutex cost more than the rest of a push. One
 * section is longer: a small CPU read run at once may hold the lock across
 * its kernel (var_try_hold), which saves the locked instruction of counting
 * the read out again, the dearest part of an operator call.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/refcount.h"
#include "core/base/records.h"
#include "core/engine/engine_internal.h"

struct deft_var {
    atomic_int refcount;
    atomic_bool locked;
    op_var_t *head, *tail;
    int pending_reads;
    bool pending_write;
    _Atomic(engine_error_t *) error; /* read without the lock, changed under it */
};

_Static_assert(sizeof(struct deft_var) <= DEFT_RECORD_SIZE, "records hold variables");

static inline void lock(deft_var_t *var) {
    while (atomic_exchange_explicit(&var->locked, true, memory_order_acquire)) {
        while (atomic_load_explicit(&var->locked, memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
}

static inline void unlock(deft_var_t *var) {
    atomic_store_explicit(&var->locked, false, memory_order_release);
}

deft_var_t *deft_var_new(void) {
    deft_var_t *var = deft_record_alloc();
    if (!var) {
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an engine variable");
        return NULL;
    }
    memset(var, 0, sizeof *var);
    atomic_init(&var->refcount, 1);
    atomic_init(&var->locked, false);
    atomic_init(&var->error, NULL);
    return var;
}

deft_var_t *deft_var_retain(deft_var_t *var) {
    atomic_fetch_add_explicit(&var->refcount, 1, memory_order_relaxed);
    return var;
}

bool deft_var_reusable(deft_var_t *var) {
    return atomic_load_explicit(&var->refcount, memory_order_acquire) == 1 &&
           !atomic_load_explicit(&var->error, memory_order_acquire);
}

void deft_var_release(deft_var_t *var) {
    if (!var || !deft_release_last(&var->refcount)) return;
    /* Operations hold references, so nothing is queued on a dying variable. */
    engine_error_release(atomic_load(&var->error));
    deft_record_free(var);
}

static void enqueue(deft_var_t *var, op_var_t *entry) {
    entry->next = NULL;
    if (var->tail)
        var->tail->next = entry;
    else
        var->head = entry;
    var->tail = entry;
}

static op_var_t *detach_head(deft_var_t *var) {
    op_var_t *entry = var->head;
    var->head = entry->next;
    if (!var->head) var->tail = NULL;
    entry->next = NULL;
    return entry;
}

void var_append(op_var_t *entry, ready_list_t *ready) {
    deft_var_t *var = entry->var;
    lock(var);
    bool start = entry->write ? !var->head && !var->pending_write && var->pending_reads == 0
                              : !var->head && !var->pending_write;
    if (start && entry->write)
        var->pending_write = true;
    else if (start)
        var->pending_reads++;
    else
        enqueue(var, entry);
    unlock(var);
    if (start) op_dependency_met(entry->op, ready);
}

void var_complete_read(deft_var_t *var, ready_list_t *ready) {
    op_var_t *next = NULL;
    lock(var);
    if (--var->pending_reads == 0 && var->head && var->head->write) {
        var->pending_write = true;
        next = detach_head(var);
    }
    unlock(var);
    if (next) op_dependency_met(next->op, ready);
}

void var_complete_write(deft_var_t *var, ready_list_t *ready) {
    op_var_t *started = NULL, **tail = &started;
    lock(var);
    var->pending_write = false;
    while (var->head && !var->head->write) { /* every read waiting at the head */
        var->pending_reads++;
        *tail = detach_head(var);
        tail = &(*tail)->next;
    }
    if (!started && var->head) { /* else the next write */
        var->pending_write = true;
        started = detach_head(var);
    }
    unlock(var);
    while (started) {
        op_var_t *entry = started;
        started = entry->next; /* read before the op may run and be freed */
        op_dependency_met(entry->op, ready);
    }
}

bool var_try_start(deft_var_t *var, bool write) {
    if (atomic_load_explicit(&var->error, memory_order_acquire)) return false;
    lock(var);
    bool start = write ? !var->head && !var->pending_write && var->pending_reads == 0
                       : !var->head && !var->pending_write;
    if (start && write)
        var->pending_write = true;
    else if (start)
        var->pending_reads++;
    unlock(var);
    return start;
}

bool var_try_hold(deft_var_t *var) {
    if (atomic_load_explicit(&var->error, memory_order_acquire)) return false;
    if (atomic_exchange_explicit(&var->locked, true, memory_order_acquire)) return false;
    if (!var->head && !var->pending_write) return true;
    unlock(var);
    return false;
}

void var_unhold(deft_var_t *var) {
    unlock(var);
}

bool var_idle(deft_var_t *var, bool for_write) {
    lock(var);
    bool idle = !var->head && !var->pending_write && (!for_write || var->pending_reads == 0);
    unlock(var);
    return idle;
}

engine_error_t *var_error(deft_var_t *var) {
    if (!atomic_load_explicit(&var->error, memory_order_acquire)) return NULL; /* the usual case */
    lock(var);
    engine_error_t *error = atomic_load(&var->error);
    if (error) engine_error_retain(error);
    unlock(var);
    return error;
}

void var_set_error(deft_var_t *var, engine_error_t *error) {
    engine_error_retain(error);
    lock(var);
    engine_error_t *old = atomic_exchange(&var->error, error);
    unlock(var);
    engine_error_release(old);
}

void var_clear_error(deft_var_t *var) {
    if (!atomic_load_explicit(&var->error, memory_order_acquire)) return; /* the usual case */
    lock(var);
    engine_error_t *old = atomic_exchange(&var->error, NULL);
    unlock(var);
    engine_error_release(old);
}
