/* Version, errors, data types and memory statistics. */
#include "capi/src/api.h"
#include "core/base/allocator.h"
#include "core/base/dtype.h"
#include "core/base/memstat.h"
#include "core/graph/executor.h"
#include "core/op/conv.h"

_Static_assert(DEFT_ERROR_INTERNAL == (int)DEFT_ERR_INTERNAL, "error kinds must match");
_Static_assert(DEFT_BFLOAT16 == (int)DEFT_DT_BFLOAT16 && DEFT_INT64 == (int)DEFT_DT_INT64,
               "dtype codes must match");
_Static_assert(DEFT_GPU == (int)DEFT_DEV_GPU, "device types must match");
_Static_assert(DEFT_MEM_SYSTEM_ALLOCS == (int)DEFT_MEMSTAT_SYSTEM_ALLOCS, "stats must match");
_Static_assert(DEFT_MAX_NDIM == DEFT_SHAPE_MAX_NDIM, "ndim limits must match");

int DeftGetVersion(int *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    *out = DEFT_VERSION;
    return 0;
}

const char *DeftGetLastError(void) {
    return deft_error_message();
}

int DeftGetLastErrorKind(void) {
    return (int)deft_error_kind();
}

int DeftDTypeGetName(int dtype, const char **out) {
    API_BEGIN();
    if (deft_dtype_check(dtype, "dtype") || api_check_out(out, "out")) return -1;
    *out = deft_dtype_name((deft_dtype_t)dtype);
    return 0;
}

int DeftDTypeGetSize(int dtype, size_t *out) {
    API_BEGIN();
    if (deft_dtype_check(dtype, "dtype") || api_check_out(out, "out")) return -1;
    *out = deft_dtype_size((deft_dtype_t)dtype);
    return 0;
}

int DeftDTypeFromName(const char *name, int *out) {
    API_BEGIN();
    if (!name) return deft_error(DEFT_ERR_VALUE, "name is NULL, expected a dtype name");
    deft_dtype_t dtype;
    if (api_check_out(out, "out") || deft_dtype_from_name(name, &dtype)) return -1;
    *out = (int)dtype;
    return 0;
}

int DeftGetMemoryStat(int dev_type, int dev_id, int stat, int64_t *out) {
    API_BEGIN();
    deft_device_t dev;
    if (deft_device_check(dev_type, dev_id, "device", &dev) || api_check_out(out, "out")) return -1;
    if (stat < 0 || stat >= DEFT_MEMSTAT_COUNT)
        return deft_error(DEFT_ERR_VALUE, "stat is %d, expected a DeftMemoryStat in [0, %d)", stat,
                          DEFT_MEMSTAT_COUNT);
    *out = deft_memstat_get(dev, (deft_memstat_kind_t)stat);
    return 0;
}

int DeftGetLiveNDArrayCount(int64_t *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    *out = deft_handle_live_count(DEFT_HANDLE_NDARRAY);
    return 0;
}

int DeftMemoryReleaseCached(int dev_type, int dev_id) {
    API_BEGIN();
    deft_device_t dev;
    if (deft_device_check(dev_type, dev_id, "device", &dev)) return -1;
    /* The executors' kept arenas first: they go back to the pool, then to the system. */
    deft_cached_ops_release_arenas(dev);
    deft_allocator_get(dev.type)->release_cached(dev);
    if (dev.type == DEFT_DEV_CPU) deft_conv_packed_drop_all(); /* malloc'd, not pooled */
    return 0;
}

int DeftGetGPUCount(int *out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    *out = deft_device_gpu_count();
    return 0;
}

int DeftGetGPUName(int dev_id, const char **out) {
    API_BEGIN();
    if (api_check_out(out, "out")) return -1;
    return deft_device_gpu_name(dev_id, "dev_id", out);
}

int DeftGetGPUMemoryInfo(int dev_id, size_t *free_bytes, size_t *total_bytes) {
    API_BEGIN();
    if (api_check_out(free_bytes, "free_bytes") || api_check_out(total_bytes, "total_bytes"))
        return -1;
    return deft_device_gpu_memory(dev_id, "dev_id", free_bytes, total_bytes);
}
