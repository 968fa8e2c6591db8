/* Shorthands for building symbols in tests: failures end the test with the library's message. */
#ifndef DEFT_TESTS_SYMBOL_HELPERS_H
#define DEFT_TESTS_SYMBOL_HELPERS_H

#include "op_helpers.h"

static inline DeftSymbolHandle var(const char *name) {
    DeftSymbolHandle s;
    ck_assert_ok(DeftSymbolCreateVariable(name, &s));
    return s;
}

/* An operator symbol not composed yet, with NULL-terminated key/value parameters. */
static inline DeftSymbolHandle atomic(const char *op, const char *const *params) {
    int np = count_params(params);
    const char *keys[16], *vals[16];
    for (int i = 0; i < np; i++) keys[i] = params[2 * i], vals[i] = params[2 * i + 1];
    DeftSymbolHandle s;
    ck_assert_msg(DeftSymbolCreateAtomic(op_named(op), np, keys, vals, &s) == 0, "%s",
                  DeftGetLastError());
    return s;
}

/* An operator symbol composed with positional inputs (which stay the caller's). */
static inline DeftSymbolHandle apply(const char *op, const char *name, int nin,
                                     const DeftSymbolHandle *in, const char *const *params) {
    DeftSymbolHandle s = atomic(op, params);
    ck_assert_msg(DeftSymbolCompose(s, name, nin, NULL, in) == 0, "%s", DeftGetLastError());
    return s;
}

#endif
