#include "core/base/device.h"

#include <stdatomic.h>

#include "core/base/error.h"

static atomic_int gpu_count;

void deft_device_set_gpu_count(int count) {
    atomic_store(&gpu_count, count < DEFT_MAX_GPUS ? count : DEFT_MAX_GPUS);
}

int deft_device_gpu_count(void) {
    return atomic_load(&gpu_count);
}

int deft_device_check(int type, int id, const char *what, deft_device_t *out) {
    if (type == DEFT_DEV_CPU) {
        if (id != 0) return deft_error(DEFT_ERR_VALUE, "%s is cpu(%d), expected cpu(0)", what, id);
        *out = deft_device_cpu();
        return 0;
    }
    if (type != DEFT_DEV_GPU)
        return deft_error(DEFT_ERR_VALUE, "%s has device type %d, expected cpu (1) or gpu (2)",
                          what, type);
    int count = deft_device_gpu_count();
    if (count == 0)
        return deft_error(DEFT_ERR_NOT_IMPLEMENTED,
                          "%s is gpu(%d), but no GPU is available to deft (no CUDA device "
                          "found, or deft was built without CUDA)",
                          what, id);
    if (id < 0 || id >= count)
        return deft_error(DEFT_ERR_INDEX, "%s is gpu(%d), expected a GPU number in [0, %d)", what,
                          id, count);
    *out = (deft_device_t){DEFT_DEV_GPU, id};
    return 0;
}
