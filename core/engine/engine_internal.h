/* Shared between the engine's files: operations, variables and error values. */
#ifndef DEFT_CORE_ENGINE_INTERNAL_H
#define DEFT_CORE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/base/error.h"
#include "core/engine/engine.h"

/* A failure, shared by every variable it reached. */
typedef struct engine_error {
    atomic_int refcount;
    deft_error_kind_t kind;
    const char *message; /* stored after the record, or static */
} engine_error_t;

engine_error_t *engine_error_new(deft_error_kind_t kind, const char *message);
engine_error_t *engine_error_retain(engine_error_t *error);
void engine_error_release(engine_error_t *error);

#define OP_INLINE_VARS 8

typedef struct engine_op engine_op_t;

/* One variable of an operation; also its place in that variable's queue. */
typedef struct op_var {
    deft_var_t *var; /* retained */
    engine_op_t *op;
    struct op_var *next; /* in the variable's queue while waiting */
    bool write;
    bool read; /* a write the operation also reads (an in-place update) */
} op_var_t;

struct engine_op {
    deft_engine_fn fn;
    deft_engine_free_fn free_ctx;
    void *ctx;
    const char *name, *origin;
    int priority;
    bool small;
    size_t bytes;    /* counted in the engine's pending bytes until it finishes */
    uint32_t thread; /* the thread its failure is reported to (see deft_engine_wait_all) */
    deft_device_t device;
    atomic_int wait; /* dependencies not yet satisfied, plus one held by push */
    int num_reads, num_writes;
    op_var_t *vars; /* reads, then writes */
    struct engine_op *next_ready;
    op_var_t inline_vars[OP_INLINE_VARS];
};

/* A list of operations that became ready, to run or schedule. */
typedef struct ready_list {
    engine_op_t *head, *tail;
} ready_list_t;

void ready_list_add(ready_list_t *list, engine_op_t *op);

/*
 * Dependency bookkeeping (var.c). var_append registers one variable of an
 * operation (it cannot fail: the queue link lives in the operation);
 * operations whose last dependency is met go to `ready`.
 */
void var_append(op_var_t *entry, ready_list_t *ready);
void var_complete_read(deft_var_t *var, ready_list_t *ready);
void var_complete_write(deft_var_t *var, ready_list_t *ready);

/* True when nothing queued or running would block a read (or a write). */
bool var_idle(deft_var_t *var, bool for_write);
/* Start a read (or write) at once if the variable is free and holds no error. */
bool var_try_start(deft_var_t *var, bool write);

/*
 * Hold a variable's lock for a read that runs while it is held: true when
 * the lock was free and no write runs, waits or failed. What would touch the
 * variable waits meanwhile, so only short work that takes no variable's lock
 * may run before var_unhold. false: nothing taken (busy, or it must wait).
 */
bool var_try_hold(deft_var_t *var);
void var_unhold(deft_var_t *var);

/*
 * A variable's failure is sticky: it stays until a write that does not read
 * the variable succeeds (the value is then new), or the variable dies.
 */
/* The error a variable holds, retained, or NULL. */
engine_error_t *var_error(deft_var_t *var);
/* Attach an error to a variable, replacing the one it held (the newest failure wins). */
void var_set_error(deft_var_t *var, engine_error_t *error);
/* Forget the variable's failure: its value was overwritten. */
void var_clear_error(deft_var_t *var);

/* Count down one dependency of op; adds it to `ready` when none remain. */
void op_dependency_met(engine_op_t *op, ready_list_t *ready);

#endif
