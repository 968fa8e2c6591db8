/* deft_tests SUITE: run one C suite in this process, as its own executable
 * would; the exit status is the suite's. */
#include "suite_runner.h"

#include <stdio.h>
#include <string.h>

static void list_suites(FILE *out) {
    for (const deft_test_suite_t *s = deft_test_suites; s->name; s++)
        fprintf(out, "  %s\n", s->name);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SUITE, one of:\n", argv[0]);
        list_suites(stderr);
        return 2;
    }
    for (const deft_test_suite_t *s = deft_test_suites; s->name; s++)
        if (strcmp(s->name, argv[1]) == 0) return s->main();
    fprintf(stderr, "%s: no suite named '%s'; the suites are:\n", argv[0], argv[1]);
    list_suites(stderr);
    return 2;
}
