/* The C suites share one executable (tests/CMakeLists.txt says why):
 * deft_tests SUITE runs the suite whose main() was renamed SUITE_main. */
#ifndef DEFT_TESTS_SUITE_RUNNER_H
#define DEFT_TESTS_SUITE_RUNNER_H

typedef struct {
    const char *name;
    int (*main)(void);
} deft_test_suite_t;

/* Every suite, ended by an entry without a name (the generated suites.c). */
extern const deft_test_suite_t deft_test_suites[];

#endif
