/**
 * @file base.h
 * @brief Conventions every deft C API function follows: version, errors,
 *        data types, devices and memory statistics.
 *
 * Every function returns 0 on success and -1 on failure. Results travel
 * through out-parameters, which are left untouched when a call fails. After a
 * failure, DeftGetLastError() returns a message that names the function, the
 * argument and what was wrong, and DeftGetLastErrorKind() its category, so a
 * binding can raise the exception type its users expect. Both are
 * thread-local: read them on the thread (and, for Go, inside the same native
 * call) that saw the failure.
 */
#ifndef DEFT_BASE_H
#define DEFT_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
/** Marks a function exported from libdeft (the library hides everything else). */
#define DEFT_API __attribute__((visibility("default")))
#else
/** Marks a function exported from libdeft. */
#define DEFT_API
#endif

/** Major version of the library. */
#define DEFT_VERSION_MAJOR 0
/** Minor version of the library. */
#define DEFT_VERSION_MINOR 1
/** Patch version of the library. */
#define DEFT_VERSION_PATCH 0
/** The version as one integer: major * 10000 + minor * 100 + patch. */
#define DEFT_VERSION (DEFT_VERSION_MAJOR * 10000 + DEFT_VERSION_MINOR * 100 + DEFT_VERSION_PATCH)
/**
 * ABI version of the extension interface. Libraries loaded at run time
 * (custom passes and operators) must be built against the same value.
 */
#define DEFT_ABI_VERSION 1

/** Most dimensions an array may have. */
#define DEFT_MAX_NDIM 8

/** Most outputs an operator call may produce (the room DeftImperativeInvoke() uses at most). */
#define DEFT_MAX_OUTPUTS 64

/** Category of the last error, so that bindings raise a matching exception. */
typedef enum DeftErrorKind {
    DEFT_ERROR_NONE = 0,            /**< no error has happened on this thread */
    DEFT_ERROR_VALUE = 1,           /**< a bad argument value (Python ValueError) */
    DEFT_ERROR_TYPE = 2,            /**< a wrong data type or handle type (TypeError) */
    DEFT_ERROR_INDEX = 3,           /**< an index or axis out of range (IndexError) */
    DEFT_ERROR_NOT_IMPLEMENTED = 4, /**< valid, but not supported by this build */
    DEFT_ERROR_OUT_OF_MEMORY = 5,   /**< an allocation failed (MemoryError) */
    DEFT_ERROR_PARSE = 6,           /**< a string (parameter, JSON) did not parse */
    DEFT_ERROR_INTERNAL = 7         /**< a bug in deft: please report it */
} DeftErrorKind;

/** Element types. The numbers are MXNet's type flags, so saved graphs agree. */
typedef enum DeftDType {
    DEFT_FLOAT32 = 0,  /**< 32-bit IEEE float */
    DEFT_FLOAT64 = 1,  /**< 64-bit IEEE float */
    DEFT_FLOAT16 = 2,  /**< 16-bit IEEE float (CPU arithmetic through float32) */
    DEFT_UINT8 = 3,    /**< unsigned 8-bit integer */
    DEFT_INT32 = 4,    /**< signed 32-bit integer */
    DEFT_INT8 = 5,     /**< signed 8-bit integer */
    DEFT_INT64 = 6,    /**< signed 64-bit integer */
    DEFT_BOOL = 7,     /**< boolean stored in one byte, 0 or 1 */
    DEFT_BFLOAT16 = 12 /**< bfloat16 (CPU arithmetic through float32) */
} DeftDType;

/** Kinds of device. The numbers are DLPack's device types. */
typedef enum DeftDeviceType {
    DEFT_CPU = 1, /**< host memory */
    DEFT_GPU = 2  /**< an NVIDIA GPU through CUDA */
} DeftDeviceType;

/** Counters kept per device, read with DeftGetMemoryStat(). */
typedef enum DeftMemoryStat {
    DEFT_MEM_LIVE_BYTES = 0,   /**< bytes of array storage now in use */
    DEFT_MEM_LIVE_BUFFERS = 1, /**< number of storage buffers now in use */
    DEFT_MEM_PEAK_BYTES = 2,   /**< the most DEFT_MEM_LIVE_BYTES has been */
    DEFT_MEM_CACHED_BYTES = 3, /**< bytes the pool holds, free, for reuse */
    DEFT_MEM_SYSTEM_ALLOCS = 4 /**< calls the pool made to the system allocator */
} DeftMemoryStat;

/**
 * @brief Get the library's version.
 * @param[out] out receives DEFT_VERSION of the library actually loaded.
 * @return 0 on success; -1 if @p out is NULL.
 */
DEFT_API int DeftGetVersion(int *out);

/**
 * @brief Message of the last failure on the calling thread.
 *
 * The text names the function, the argument and what was wrong, e.g.
 * "DeftNDArrayCreate: shape[1] is -3, expected a dimension >= 0".
 * @return a NUL-terminated string owned by the library, valid until the next
 *         failing call on this thread; "" if no call has failed yet.
 */
DEFT_API const char *DeftGetLastError(void);

/**
 * @brief Category of the last failure on the calling thread.
 * @return a ::DeftErrorKind value; DEFT_ERROR_NONE if no call has failed yet.
 */
DEFT_API int DeftGetLastErrorKind(void);

/**
 * @brief Name of a data type, such as "float32".
 * @param dtype a ::DeftDType value.
 * @param[out] out receives a static string owned by the library.
 * @return 0 on success; -1 if @p dtype is unknown or @p out is NULL.
 */
DEFT_API int DeftDTypeGetName(int dtype, const char **out);

/**
 * @brief Size in bytes of one element of a data type.
 * @param dtype a ::DeftDType value.
 * @param[out] out receives the size.
 * @return 0 on success; -1 if @p dtype is unknown or @p out is NULL.
 */
DEFT_API int DeftDTypeGetSize(int dtype, size_t *out);

/**
 * @brief Look a data type up by name ("float32", "int64", ...).
 * @param name NUL-terminated UTF-8 name.
 * @param[out] out receives the ::DeftDType value.
 * @return 0 on success; -1 if @p name is NULL or unknown, or @p out is NULL.
 */
DEFT_API int DeftDTypeFromName(const char *name, int *out);

/**
 * @brief Read one memory counter of a device.
 *
 * Bindings' leak tests compare these before and after dropping objects.
 * @param dev_type a ::DeftDeviceType value.
 * @param dev_id device number (0 for the CPU).
 * @param stat a ::DeftMemoryStat value.
 * @param[out] out receives the counter.
 * @return 0 on success; -1 on an unknown device or counter, or NULL @p out.
 */
DEFT_API int DeftGetMemoryStat(int dev_type, int dev_id, int stat, int64_t *out);

/**
 * @brief Number of NDArray handles created and not yet freed, in this process.
 * @param[out] out receives the count.
 * @return 0 on success; -1 if @p out is NULL.
 */
DEFT_API int DeftGetLiveNDArrayCount(int64_t *out);

/**
 * @brief Return the free blocks a device's memory pool caches to the system.
 *
 * First every executor (DeftCachedOpCreate(), and autograd's backward
 * executors) drops the memory plans whose arenas are on the device, so
 * their arenas return too (see executor.h; the sizes of these caches are
 * set by DEFT_PLAN_CACHE_BYTES and DEFT_PLAN_CACHE_SIZE). An arena a run
 * still uses, queued or running, goes when that run is done; plans are made
 * again when next needed. On the CPU, the convolution weights kept packed
 * between predict-mode calls go too (they are packed again on the next
 * call). Other memory in use is not affected. Afterwards
 * DEFT_MEM_CACHED_BYTES is 0 (until such a run returns its arena).
 * @param dev_type a ::DeftDeviceType value.
 * @param dev_id device number (0 for the CPU).
 * @return 0 on success; -1 on an unknown device.
 */
DEFT_API int DeftMemoryReleaseCached(int dev_type, int dev_id);

/**
 * @brief Number of GPUs deft can use.
 *
 * 0 when the library was built without CUDA, when no CUDA driver is
 * installed, or when the machine has no NVIDIA GPU; never an error.
 * @param[out] out receives the count; GPUs are numbered 0 to count - 1.
 * @return 0 on success; -1 if @p out is NULL.
 */
DEFT_API int DeftGetGPUCount(int *out);

/**
 * @brief Name of a GPU, such as "NVIDIA H100 80GB HBM3".
 * @param dev_id GPU number, 0 to DeftGetGPUCount() - 1.
 * @param[out] out receives a string owned by the library, valid until it unloads.
 * @return 0 on success; -1 if there is no such GPU or @p out is NULL.
 */
DEFT_API int DeftGetGPUName(int dev_id, const char **out);

/**
 * @brief Free and total memory of a GPU, as the CUDA driver reports them.
 *
 * Memory deft's pool caches counts as used here; see DeftGetMemoryStat()
 * and DeftMemoryReleaseCached().
 * @param dev_id GPU number, 0 to DeftGetGPUCount() - 1.
 * @param[out] free_bytes receives the bytes not allocated on the device.
 * @param[out] total_bytes receives the device's memory size.
 * @return 0 on success; -1 if there is no such GPU, an output is NULL, or
 *         CUDA fails.
 */
DEFT_API int DeftGetGPUMemoryInfo(int dev_id, size_t *free_bytes, size_t *total_bytes);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_BASE_H */
