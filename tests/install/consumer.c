/* Uses the installed headers and library: prints the version and round-trips an array. */
#include <stdio.h>

#include <deft/c_api.h>

int main(void) {
    int version;
    const int64_t shape[1] = {3};
    const int32_t in[3] = {7, 8, 9};
    int32_t out[3] = {0};
    DeftNDArrayHandle arr;
    if (DeftGetVersion(&version) ||
        DeftNDArrayCreateFromData(shape, 1, DEFT_INT32, DEFT_CPU, 0, in, sizeof in, &arr) ||
        DeftNDArrayCopyToHost(arr, out, sizeof out) || DeftNDArrayFree(arr)) {
        fprintf(stderr, "consumer: %s\n", DeftGetLastError());
        return 1;
    }
    if (version != DEFT_VERSION || out[0] != 7 || out[1] != 8 || out[2] != 9) {
        fprintf(stderr, "consumer: wrong version %d or data %d %d %d\n", version, out[0], out[1],
                out[2]);
        return 1;
    }
    printf("consumer: deft %d works\n", version);
    return 0;
}
