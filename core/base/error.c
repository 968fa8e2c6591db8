#include "core/base/error.h"
#include "core/base/tls.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The message buffer lives on the heap: a 1 KiB thread-local array would
 * not fit the static TLS reserve that dlopen leaves (tls.h). */
static DEFT_TLS_FAST const char *tl_function; /* set on every API call */
static DEFT_TLS_FAST deft_error_kind_t tl_kind;
static DEFT_TLS_FAST char *tl_message;
static pthread_key_t message_key; /* frees a thread's buffer when it exits */
static pthread_once_t message_once = PTHREAD_ONCE_INIT;
/* What a thread that cannot allocate its buffer reads instead. */
static const char no_buffer[] = "out of memory (no room for the error message)";

static void make_message_key(void) {
    pthread_key_create(&message_key, free);
}

static char *message_buffer(void) {
    if (tl_message) return tl_message;
    pthread_once(&message_once, make_message_key);
    if ((tl_message = malloc(DEFT_ERROR_MAX))) {
        tl_message[0] = '\0';
        pthread_setspecific(message_key, tl_message);
    }
    return tl_message;
}

void deft_error_enter(const char *function) {
    tl_function = function;
}

const char *deft_error_swap_function(const char *function) {
    const char *previous = tl_function;
    tl_function = function;
    return previous;
}

int deft_error(deft_error_kind_t kind, const char *fmt, ...) {
    char *message = message_buffer();
    tl_kind = message ? kind : DEFT_ERR_OUT_OF_MEMORY;
    if (!message) return -1;
    size_t used = 0;
    if (tl_function) {
        int n = snprintf(message, DEFT_ERROR_MAX, "%s: ", tl_function);
        used = n > 0 && n < DEFT_ERROR_MAX ? (size_t)n : 0;
    }
    va_list args;
    va_start(args, fmt);
    vsnprintf(message + used, DEFT_ERROR_MAX - used, fmt, args);
    va_end(args);
    return -1;
}

int deft_error_restore(deft_error_kind_t kind, const char *message) {
    char *buffer = message_buffer();
    tl_kind = buffer ? kind : DEFT_ERR_OUT_OF_MEMORY;
    if (buffer && message != buffer) snprintf(buffer, DEFT_ERROR_MAX, "%s", message);
    return -1;
}

const char *deft_error_message(void) {
    if (tl_message) return tl_message;
    return tl_kind == DEFT_ERR_NONE ? "" : no_buffer;
}

deft_error_kind_t deft_error_kind(void) {
    return tl_kind;
}
