/**
 * @file dlpack.h
 * @brief Zero-copy exchange of arrays with other libraries through DLPack
 *        (NumPy, PyTorch, JAX, CuPy, ...).
 *
 * An exported tensor shares the array's memory: writes through either side
 * are seen by the other. deft arrays are always compact and row-major, so
 * exports are too; imports must be compact row-major CPU tensors.
 */
#ifndef DEFT_DLPACK_H
#define DEFT_DLPACK_H

#include <dlpack/dlpack.h>

#include "deft/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Lend an array's memory as a DLPack tensor.
 *
 * A lazy array is computed and pending writes to the array finish first.
 * The tensor holds a reference to the array, so the handle may be freed at
 * once; the memory stays valid until the consumer calls the tensor's
 * deleter.
 * @param handle the array.
 * @param[out] out receives the tensor; call `(*out)->deleter(*out)` when done.
 * @return 0 on success; -1 on a bad handle, a dtype DLPack cannot describe,
 *         a failed computation of the array, or out of memory.
 */
DEFT_API int DeftNDArrayToDLPack(DeftNDArrayHandle handle, DLManagedTensor **out);

/**
 * @brief Make an array over a DLPack tensor's memory, without copying it.
 *
 * On success the array owns @p tensor and calls its deleter when the last
 * user of the memory is gone; on failure the caller still owns it.
 * @param tensor a CPU tensor, compact row-major (strides NULL or matching),
 *        of a dtype deft has (float16/32/64, bfloat16, int8/32/64, uint8),
 *        whose data + byte_offset is aligned for that dtype (a multiple of
 *        its element size).
 * @param[out] out receives a new handle, owned by the caller (DeftNDArrayFree()).
 * @return 0 on success; -1 on a NULL argument, a non-CPU device, an unknown
 *         dtype, a shape deft cannot hold (its element count or byte size
 *         overflowing included), non-compact strides, a misaligned
 *         byte_offset, or out of memory.
 */
DEFT_API int DeftNDArrayFromDLPack(DLManagedTensor *tensor, DeftNDArrayHandle *out);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_DLPACK_H */
