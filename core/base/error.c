#include "core/base/error.h"
#include "core/base/tls.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static DEFT_TLS_FAST const char *tl_function; /* set on every API call */
static _Thread_local deft_error_kind_t tl_kind;
static _Thread_local char tl_message[DEFT_ERROR_MAX];

void deft_error_enter(const char *function) {
    tl_function = function;
}

const char *deft_error_swap_function(const char *function) {
    const char *previous = tl_function;
    tl_function = function;
    return previous;
}

int deft_error(deft_error_kind_t kind, const char *fmt, ...) {
    size_t used = 0;
    if (tl_function) {
        int n = snprintf(tl_message, sizeof tl_message, "%s: ", tl_function);
        used = n > 0 && (size_t)n < sizeof tl_message ? (size_t)n : 0;
    }
    va_list args;
    va_start(args, fmt);
    vsnprintf(tl_message + used, sizeof tl_message - used, fmt, args);
    va_end(args);
    tl_kind = kind;
    return -1;
}

int deft_error_restore(deft_error_kind_t kind, const char *message) {
    if (message != tl_message) snprintf(tl_message, sizeof tl_message, "%s", message);
    tl_kind = kind;
    return -1;
}

const char *deft_error_message(void) {
    return tl_message;
}

deft_error_kind_t deft_error_kind(void) {
    return tl_kind;
}
