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
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/records.h"
#include "core/engine/engine_internal.h"

typedef struct var_entry {
    engine_op_t *op;
    bool write;
    struct var_entry *next;
} var_entry_t;

struct deft_var {
    atomic_int refcount;
    pthread_mutex_t lock;
    var_entry_t *head, *tail;
    int pending_reads;
    bool pending_write;
    engine_error_t *error;
    /* membership of the list of variables holding errors (errors_lock) */
    struct deft_var *err_prev, *err_next;
    bool listed;
};

_Static_assert(sizeof(var_entry_t) <= DEFT_RECORD_SIZE, "records hold queue entries");
_Static_assert(sizeof(struct deft_var) <= DEFT_RECORD_SIZE, "records hold variables");

static pthread_mutex_t errors_lock = PTHREAD_MUTEX_INITIALIZER;
static deft_var_t *errored; /* variables holding an error, for wait-all to clear */

deft_var_t *deft_var_new(void) {
    deft_var_t *var = deft_record_alloc();
    if (!var) {
        deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an engine variable");
        return NULL;
    }
    memset(var, 0, sizeof *var);
    atomic_init(&var->refcount, 1);
    pthread_mutex_init(&var->lock, NULL);
    return var;
}

deft_var_t *deft_var_retain(deft_var_t *var) {
    atomic_fetch_add_explicit(&var->refcount, 1, memory_order_relaxed);
    return var;
}

static void unlist(deft_var_t *var) {
    if (!var->listed) return;
    if (var->err_prev) var->err_prev->err_next = var->err_next;
    else errored = var->err_next;
    if (var->err_next) var->err_next->err_prev = var->err_prev;
    var->listed = false;
}

void deft_var_release(deft_var_t *var) {
    if (!var || atomic_fetch_sub_explicit(&var->refcount, 1, memory_order_acq_rel) != 1) return;
    /* Operations hold references, so nothing is queued on a dying variable. */
    if (var->listed) {
        pthread_mutex_lock(&errors_lock);
        unlist(var);
        pthread_mutex_unlock(&errors_lock);
    }
    engine_error_release(var->error);
    pthread_mutex_destroy(&var->lock);
    deft_record_free(var);
}

static void enqueue(deft_var_t *var, var_entry_t *entry) {
    entry->next = NULL;
    if (var->tail) var->tail->next = entry;
    else var->head = entry;
    var->tail = entry;
}

/* Detach the head entry; the caller frees it after releasing the lock. */
static var_entry_t *detach_head(deft_var_t *var) {
    var_entry_t *entry = var->head;
    var->head = entry->next;
    if (!var->head) var->tail = NULL;
    entry->next = NULL;
    return entry;
}

var_entry_t *var_entry_new(void) { return deft_record_alloc(); }

void var_append(deft_var_t *var, engine_op_t *op, bool write, var_entry_t *entry,
                ready_list_t *ready) {
    pthread_mutex_lock(&var->lock);
    bool start = write ? !var->head && !var->pending_write && var->pending_reads == 0
                       : !var->head && !var->pending_write;
    if (start && write) var->pending_write = true;
    else if (start) var->pending_reads++;
    else {
        entry->op = op;
        entry->write = write;
        enqueue(var, entry);
    }
    pthread_mutex_unlock(&var->lock);
    if (start) {
        deft_record_free(entry);
        op_dependency_met(op, ready);
    }
}

void var_complete_read(deft_var_t *var, ready_list_t *ready) {
    var_entry_t *next = NULL;
    pthread_mutex_lock(&var->lock);
    if (--var->pending_reads == 0 && var->head && var->head->write) {
        var->pending_write = true;
        next = detach_head(var);
    }
    pthread_mutex_unlock(&var->lock);
    if (!next) return;
    op_dependency_met(next->op, ready);
    deft_record_free(next);
}

void var_complete_write(deft_var_t *var, ready_list_t *ready) {
    var_entry_t *started = NULL, **tail = &started;
    pthread_mutex_lock(&var->lock);
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
    pthread_mutex_unlock(&var->lock);
    while (started) {
        var_entry_t *entry = started;
        started = entry->next;
        op_dependency_met(entry->op, ready);
        deft_record_free(entry);
    }
}

bool var_idle(deft_var_t *var, bool for_write) {
    pthread_mutex_lock(&var->lock);
    bool idle = !var->head && !var->pending_write && (!for_write || var->pending_reads == 0);
    pthread_mutex_unlock(&var->lock);
    return idle;
}

engine_error_t *var_error(deft_var_t *var) {
    pthread_mutex_lock(&var->lock);
    engine_error_t *error = var->error ? engine_error_retain(var->error) : NULL;
    pthread_mutex_unlock(&var->lock);
    return error;
}

void var_set_error(deft_var_t *var, engine_error_t *error) {
    pthread_mutex_lock(&errors_lock);
    pthread_mutex_lock(&var->lock);
    if (!var->error) var->error = engine_error_retain(error);
    pthread_mutex_unlock(&var->lock);
    if (!var->listed) {
        var->err_next = errored;
        var->err_prev = NULL;
        if (errored) errored->err_prev = var;
        errored = var;
        var->listed = true;
    }
    pthread_mutex_unlock(&errors_lock);
}

engine_error_t *var_take_error(deft_var_t *var) {
    pthread_mutex_lock(&errors_lock);
    pthread_mutex_lock(&var->lock);
    engine_error_t *error = var->error;
    var->error = NULL;
    pthread_mutex_unlock(&var->lock);
    unlist(var);
    pthread_mutex_unlock(&errors_lock);
    return error;
}

void var_clear_all_errors(void) {
    pthread_mutex_lock(&errors_lock);
    while (errored) {
        deft_var_t *var = errored;
        pthread_mutex_lock(&var->lock);
        engine_error_t *error = var->error;
        var->error = NULL;
        pthread_mutex_unlock(&var->lock);
        engine_error_release(error);
        unlist(var);
    }
    pthread_mutex_unlock(&errors_lock);
}
