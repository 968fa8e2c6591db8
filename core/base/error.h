/*
 * Thread-local error state.
 *
 * An internal function that fails calls deft_error() once, where the problem
 * is first known, and returns its -1; callers pass the -1 up unchanged. The
 * public API function that was entered names itself with deft_error_enter(),
 * so every message starts with the function the user called.
 */
#ifndef DEFT_CORE_ERROR_H
#define DEFT_CORE_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as the public DeftErrorKind (checked in capi/src). */
typedef enum deft_error_kind {
    DEFT_ERR_NONE = 0,
    DEFT_ERR_VALUE = 1,
    DEFT_ERR_TYPE = 2,
    DEFT_ERR_INDEX = 3,
    DEFT_ERR_NOT_IMPLEMENTED = 4,
    DEFT_ERR_OUT_OF_MEMORY = 5,
    DEFT_ERR_PARSE = 6,
    DEFT_ERR_INTERNAL = 7,
} deft_error_kind_t;

/* Longest message kept; longer ones are cut, never overflowed. */
#define DEFT_ERROR_MAX 1024

/* Name the public function now running on this thread (a static string). */
void deft_error_enter(const char *function);

/* Name another function (an operation run on behalf of an earlier call) and
 * return the one named before, to put back afterwards. */
const char *deft_error_swap_function(const char *function);

/* Record a failure and return -1, so `return deft_error(...)` reads well. */
int deft_error(deft_error_kind_t kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record a failure whose text is already complete (e.g. carried from another thread). */
int deft_error_restore(deft_error_kind_t kind, const char *message);

const char *deft_error_message(void);
deft_error_kind_t deft_error_kind(void);

#ifdef __cplusplus
}
#endif

#endif
