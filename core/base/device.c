#include "core/base/device.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"

static const deft_gpu_backend_t *gpu_backend;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int gpu_count;

void deft_device_register_gpu(const deft_gpu_backend_t *backend) {
    gpu_backend = backend;
}

const deft_gpu_backend_t *deft_device_gpu_backend(void) {
    return gpu_backend;
}

static void probe(void) {
    int count = gpu_backend ? gpu_backend->probe() : 0;
    gpu_count = count < DEFT_MAX_GPUS ? count : DEFT_MAX_GPUS;
}

int deft_device_gpu_count(void) {
    pthread_once(&probe_once, probe);
    return gpu_count;
}

int deft_device_gpu_name(int id, const char *what, const char **out) {
    deft_device_t dev;
    if (deft_device_check(DEFT_DEV_GPU, id, what, &dev)) return -1;
    return gpu_backend->name(id, out);
}

int deft_device_gpu_memory(int id, const char *what, size_t *free_bytes, size_t *total_bytes) {
    deft_device_t dev;
    if (deft_device_check(DEFT_DEV_GPU, id, what, &dev)) return -1;
    return gpu_backend->memory(id, free_bytes, total_bytes);
}

int deft_device_copy(void *dst, deft_device_t dst_dev, const void *src, deft_device_t src_dev,
                     size_t nbytes) {
    if (nbytes == 0) return 0;
    if (dst_dev.type == DEFT_DEV_CPU && src_dev.type == DEFT_DEV_CPU) {
        memmove(dst, src, nbytes);
        return 0;
    }
    return gpu_backend->copy(dst, dst_dev, src, src_dev, nbytes);
}

int deft_device_zero(void *dst, deft_device_t dev, size_t nbytes) {
    if (nbytes == 0) return 0;
    if (dev.type == DEFT_DEV_CPU) {
        memset(dst, 0, nbytes);
        return 0;
    }
    return gpu_backend->zero(dst, dev, nbytes);
}

int deft_device_synchronize(deft_device_t dev, bool whole_device) {
    return dev.type == DEFT_DEV_GPU ? gpu_backend->synchronize(dev.id, whole_device) : 0;
}

int deft_device_synchronize_used(void) {
    return gpu_backend ? gpu_backend->synchronize_used() : 0;
}

void *deft_device_timer_start(deft_device_t dev, const char *name) {
    return dev.type == DEFT_DEV_GPU ? gpu_backend->timer_start(dev.id, name) : NULL;
}

void deft_device_timer_stop(deft_device_t dev, void *timer) {
    if (dev.type == DEFT_DEV_GPU) gpu_backend->timer_stop(timer);
}

void deft_device_flush_timings(void) {
    if (gpu_backend) gpu_backend->flush_timings();
}

const char *deft_device_format(deft_device_t dev, char *buf, size_t len) {
    snprintf(buf, len, "%s(%d)", dev.type == DEFT_DEV_GPU ? "gpu" : "cpu", dev.id);
    return buf;
}

int deft_device_check(int type, int id, const char *what, deft_device_t *out) {
    if (type == DEFT_DEV_CPU) {
        if (id != 0) { /* say what there is: the one CPU, and the GPUs if any */
            int gpus = deft_device_gpu_count();
            char others[48] = "no GPU";
            if (gpus == 1) snprintf(others, sizeof others, "gpu(0)");
            if (gpus > 1) snprintf(others, sizeof others, "gpu(0) to gpu(%d)", gpus - 1);
            return deft_error(DEFT_ERR_VALUE,
                              "%s is cpu(%d), expected cpu(0): the devices are cpu(0) and %s", what,
                              id, others);
        }
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
