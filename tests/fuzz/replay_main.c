/*
 * A fuzz target's inputs replayed without libFuzzer: the driver the tests
 * build link a target with when the compiler has no libFuzzer (gcc), so that
 * the sanitizer builds replay the corpora and the regressions under the C
 * suites' own sanitizers. It calls LLVMFuzzerInitialize once, then each file
 * named on the command line in order, printing libFuzzer's "Running: FILE"
 * before each, so that a failure's last such line names the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole of file path in a malloc'd buffer (*size bytes); NULL on failure. */
static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    uint8_t *data = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        /* one byte more, so that an empty input is a real pointer too */
        data = malloc((size_t)n + 1);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    *size = (size_t)n;
    return data;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        size_t size;
        uint8_t *data = read_file(argv[i], &size);
        if (data == NULL) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 1;
        }
        printf("Running: %s\n", argv[i]);
        fflush(stdout);
        LLVMFuzzerTestOneInput(data, size);
        free(data);
    }
    printf("Executed %d inputs\n", argc - 1);
    return 0;
}
