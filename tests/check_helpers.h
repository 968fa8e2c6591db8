/* Shared by the Check suites: a runner and assertions on deft's error contract. */
#ifndef DEFT_TESTS_CHECK_HELPERS_H
#define DEFT_TESTS_CHECK_HELPERS_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <deft/c_api.h>

/* Assert that `call` fails with -1, the given kind and a message containing `text`. */
#define ck_assert_fails(call, kind, text)                                                          \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        ck_assert_msg(status_ == -1, "%s returned %d, expected -1", #call, status_);               \
        ck_assert_msg(DeftGetLastErrorKind() == (kind), "%s: error kind %d, expected %d (%s)",     \
                      #call, DeftGetLastErrorKind(), (int)(kind), DeftGetLastError());             \
        ck_assert_msg(strstr(DeftGetLastError(), (text)) != NULL,                                  \
                      "%s: error '%s' does not contain '%s'", #call, DeftGetLastError(), (text));  \
    } while (0)

/* Only a failure reaches Check: a passing ck_assert records a mark point (a
 * write to Check's pipe), which in the suites' bulk loops of helper calls
 * cost more than the library calls under test. */
#define ck_assert_ok(call)                                                                         \
    do {                                                                                           \
        if ((call) != 0) ck_abort_msg("%s failed: %s", #call, DeftGetLastError());                 \
    } while (0)

/* Length of the million-operation loops: DEFT_TEST_LOOP_OPS overrides it
 * (the sanitizer builds run shorter loops; the release build runs them all). */
static inline int loop_ops(void) {
    const char *text = getenv("DEFT_TEST_LOOP_OPS");
    return text && atoi(text) > 0 ? atoi(text) : 1000000;
}

static inline int run_suite(Suite *suite) {
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
