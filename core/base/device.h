/* Devices: which ones exist, how they are named in messages, and stats slots. */
#ifndef DEFT_CORE_DEVICE_H
#define DEFT_CORE_DEVICE_H

#include <stdbool.h>

/* Same numbers as the public DeftDeviceType (DLPack's). */
typedef enum deft_device_type {
    DEFT_DEV_CPU = 1,
    DEFT_DEV_GPU = 2,
} deft_device_type_t;

#define DEFT_MAX_GPUS 16
/* Slot 0 is the CPU, slot 1 + n is gpu(n): used to index per-device tables. */
#define DEFT_DEVICE_SLOTS (1 + DEFT_MAX_GPUS)

typedef struct deft_device {
    deft_device_type_t type;
    int id;
} deft_device_t;

static inline deft_device_t deft_device_cpu(void) {
    return (deft_device_t){DEFT_DEV_CPU, 0};
}

static inline int deft_device_slot(deft_device_t dev) {
    return dev.type == DEFT_DEV_CPU ? 0 : 1 + dev.id;
}

static inline bool deft_device_equal(deft_device_t a, deft_device_t b) {
    return a.type == b.type && a.id == b.id;
}

/* Validate a (type, id) pair from a caller; -1 with an error naming `what`. */
int deft_device_check(int type, int id, const char *what, deft_device_t *out);

/* Set by the GPU layer when it finds devices; 0 in a build without CUDA. */
void deft_device_set_gpu_count(int count);
int deft_device_gpu_count(void);

#endif
