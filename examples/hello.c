/*
 * A first look at deft's C API: make arrays, copy data in and out, read
 * their metadata and memory counters, and see what a bad call reports.
 */
#include <stdio.h>

#include <deft/c_api.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "error: %s\n", DeftGetLastError());                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int print_array(const char *name, DeftNDArrayHandle arr) {
    int64_t shape[DEFT_MAX_NDIM];
    int ndim, dtype;
    const char *dtype_name;
    float values[64];
    size_t nbytes;
    CHECK(DeftNDArrayGetShape(arr, shape, DEFT_MAX_NDIM, &ndim));
    CHECK(DeftNDArrayGetDType(arr, &dtype));
    CHECK(DeftDTypeGetName(dtype, &dtype_name));
    CHECK(DeftNDArrayGetNBytes(arr, &nbytes));
    CHECK(DeftNDArrayCopyToHost(arr, values, nbytes));
    printf("%s: %s array of shape (%lld, %lld)\n", name, dtype_name, (long long)shape[0],
           (long long)shape[1]);
    for (int64_t i = 0; i < shape[0]; i++) {
        printf("  [");
        for (int64_t j = 0; j < shape[1]; j++) printf(" %6.2f", values[i * shape[1] + j]);
        printf(" ]\n");
    }
    return 0;
}

int main(void) {
    int version;
    CHECK(DeftGetVersion(&version));
    printf("deft %d.%d.%d\n", version / 10000, version / 100 % 100, version % 100);

    const int64_t shape[2] = {2, 3};
    const float data[6] = {1.5f, -2.0f, 3.25f, 0.0f, 10.0f, -0.5f};
    DeftNDArrayHandle a, z;
    CHECK(DeftNDArrayCreateFromData(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, data, sizeof data, &a));
    CHECK(DeftNDArrayCreate(shape, 2, DEFT_FLOAT32, DEFT_CPU, 0, &z));
    if (print_array("a", a) || print_array("zeros", z)) return 1;

    const float doubled[6] = {3.0f, -4.0f, 6.5f, 0.0f, 20.0f, -1.0f};
    CHECK(DeftNDArrayCopyFromHost(z, doubled, sizeof doubled));
    if (print_array("zeros, overwritten", z)) return 1;

    int64_t live, bytes;
    CHECK(DeftGetLiveNDArrayCount(&live));
    CHECK(DeftGetMemoryStat(DEFT_CPU, 0, DEFT_MEM_LIVE_BYTES, &bytes));
    printf("live arrays: %lld, live bytes on cpu(0): %lld\n", (long long)live, (long long)bytes);

    float too_small[2];
    if (DeftNDArrayCopyToHost(a, too_small, sizeof too_small) != 0)
        printf("a bad call reports: %s\n", DeftGetLastError());

    CHECK(DeftNDArrayFree(a));
    CHECK(DeftNDArrayFree(z));
    CHECK(DeftGetLiveNDArrayCount(&live));
    printf("after freeing both: %lld live arrays\n", (long long)live);
    return 0;
}
