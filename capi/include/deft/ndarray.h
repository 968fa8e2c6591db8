/**
 * @file ndarray.h
 * @brief N-dimensional arrays: creation, copies to and from host memory,
 *        shape, data type, device, synchronisation and release.
 *
 * An NDArray handle is owned by the caller, who releases it exactly once with
 * DeftNDArrayFree(). Freeing drops the caller's reference only: the storage
 * lives on while anything inside the library still uses it, so a handle may
 * be freed from any thread at any time.
 */
#ifndef DEFT_NDARRAY_H
#define DEFT_NDARRAY_H

#include "deft/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle on an n-dimensional array. */
typedef struct DeftNDArray *DeftNDArrayHandle;

/**
 * @brief Create an array filled with zeros.
 * @param shape @p ndim dimensions, each >= 0; may be NULL when @p ndim is 0.
 * @param ndim number of dimensions, 0 (a scalar) to DEFT_MAX_NDIM.
 * @param dtype a ::DeftDType value.
 * @param dev_type a ::DeftDeviceType value.
 * @param dev_id device number (0 for the CPU).
 * @param[out] out receives a new handle, owned by the caller (DeftNDArrayFree()).
 * @return 0 on success; -1 on a bad shape, dtype or device, a shape whose byte
 *         size overflows, or when memory runs out (DEFT_ERROR_OUT_OF_MEMORY).
 */
DEFT_API int DeftNDArrayCreate(const int64_t *shape, int ndim, int dtype, int dev_type, int dev_id,
                               DeftNDArrayHandle *out);

/**
 * @brief Create an array holding a copy of host data.
 * @param shape @p ndim dimensions, each >= 0; may be NULL when @p ndim is 0.
 * @param ndim number of dimensions, 0 to DEFT_MAX_NDIM.
 * @param dtype a ::DeftDType value.
 * @param dev_type a ::DeftDeviceType value.
 * @param dev_id device number (0 for the CPU).
 * @param data @p nbytes bytes of elements in row-major order; the library
 *        copies them and keeps no reference. May be NULL when @p nbytes is 0.
 * @param nbytes size of @p data; must equal the array's size in bytes.
 * @param[out] out receives a new handle, owned by the caller (DeftNDArrayFree()).
 * @return 0 on success; -1 on the errors of DeftNDArrayCreate() or when
 *         @p nbytes does not match the shape and dtype.
 */
DEFT_API int DeftNDArrayCreateFromData(const int64_t *shape, int ndim, int dtype, int dev_type,
                                       int dev_id, const void *data, size_t nbytes,
                                       DeftNDArrayHandle *out);

/**
 * @brief A view: an array over a contiguous run of another's elements.
 *
 * The view shares the array's memory and its order of operations: a write
 * through either is seen by the other, and work on both runs in the order it
 * was issued. It has no autograd history (a recorded computation should read
 * the array through an operator such as `slice`). Basic slices of leading
 * axes (x[2], x[1:3], x[1, 2:4]) are such runs.
 *
 * @param handle the array; not a lazy one (deferred compute) before it is computed.
 * @param offset elements from the array's first element to the view's first.
 * @param shape @p ndim dimensions, each >= 0; may be NULL when @p ndim is 0.
 * @param ndim number of dimensions, 0 to DEFT_MAX_NDIM.
 * @param[out] out receives a new handle, owned by the caller (DeftNDArrayFree()).
 * @return 0 on success; -1 on a lazy array, a bad shape, or a window that does
 *         not fit in the array (DEFT_ERROR_INDEX).
 */
DEFT_API int DeftNDArrayView(DeftNDArrayHandle handle, int64_t offset, const int64_t *shape,
                             int ndim, DeftNDArrayHandle *out);

/**
 * @brief A strided view: an array whose elements lie anywhere in another's
 *        memory, as NumPy's basic slices make them (x[:, 1:3], x[::2], x[..., 0]).
 *
 * Element (i0, i1, ...) of the view is element
 * `offset + i0 * strides[0] + i1 * strides[1] + ...` of the array's root: the
 * array itself, or the array a strided view views (DeftNDArrayGetLayout()
 * reports an array's place in its root in these units). As with
 * DeftNDArrayView(), the view shares the root's memory and order of
 * operations: it reads what the root holds when an operation reads it, and
 * what is written into it lands in the root. It has no autograd history,
 * and a recorded computation or a CachedOp call reads a copy of it; it
 * cannot be marked as a variable. Windows that are one dense run make a
 * plain view. CPU arrays only.
 *
 * @param handle the array; not a lazy one (deferred compute) before it is computed.
 * @param offset the root's element at the view's first, counted from the root's first.
 * @param shape @p ndim dimensions, each >= 0; may be NULL when @p ndim is 0.
 * @param strides @p ndim element steps, any sign (0 repeats an element).
 * @param ndim number of dimensions, 0 to DEFT_MAX_NDIM.
 * @param[out] out receives a new handle, owned by the caller (DeftNDArrayFree()).
 * @return 0 on success; -1 on a lazy or GPU array, a bad shape, or an element
 *         outside the root (DEFT_ERROR_INDEX).
 */
DEFT_API int DeftNDArrayStridedView(DeftNDArrayHandle handle, int64_t offset, const int64_t *shape,
                                    const int64_t *strides, int ndim, DeftNDArrayHandle *out);

/**
 * @brief Where an array's elements lie in its root (see DeftNDArrayStridedView()).
 *
 * @param handle the array.
 * @param[out] strides receives one element step per dimension (room for DEFT_MAX_NDIM):
 *        the dense row-major steps unless the array is a strided view.
 * @param[out] offset receives the root's element at the array's first (0 unless
 *        the array is a strided view).
 * @param[out] is_view receives 1 when the array is a strided view, else 0; may be NULL.
 * @return 0 on success; -1 on a bad handle or NULL output.
 */
DEFT_API int DeftNDArrayGetLayout(DeftNDArrayHandle handle, int64_t *strides, int64_t *offset,
                                  int *is_view);

/**
 * @brief A copy of an array in page-locked ("pinned") host memory, which GPUs
 *        copy from and to at full speed (PyTorch's `pin_memory()`).
 *
 * The copy is a CPU array like any other; its memory comes from a cache of
 * page-locked blocks, so pinning every batch of a data loader costs a copy,
 * not a page-locking system call.
 *
 * @param handle the array, on any device (its pending writes are waited for).
 * @param[out] out receives a new handle, owned by the caller (DeftNDArrayFree()).
 * @return 0 on success; -1 with DEFT_ERROR_NOT_IMPLEMENTED when deft was built
 *         without CUDA or finds no GPU (there is then nothing to pin for).
 */
DEFT_API int DeftNDArrayPinMemory(DeftNDArrayHandle handle, DeftNDArrayHandle *out);

/**
 * @brief Whether an array's memory is page-locked host memory.
 * @param handle the array.
 * @param[out] out receives 1 or 0.
 * @return 0 on success; -1 on a bad handle or NULL @p out.
 */
DEFT_API int DeftNDArrayIsPinned(DeftNDArrayHandle handle, int *out);

/**
 * @brief Copy an array's elements to host memory, after waiting for pending
 *        writes to it.
 * @param handle the array.
 * @param[out] data receives @p nbytes bytes in row-major order.
 * @param nbytes size of @p data; must equal the array's size in bytes.
 * @return 0 on success; -1 on a bad handle, a NULL @p data with a non-zero
 *         size, or a size mismatch (nothing is written then).
 */
DEFT_API int DeftNDArrayCopyToHost(DeftNDArrayHandle handle, void *data, size_t nbytes);

/**
 * @brief Overwrite an array's elements with host data.
 * @param handle the array.
 * @param data @p nbytes bytes in row-major order, copied before returning.
 * @param nbytes size of @p data; must equal the array's size in bytes.
 * @return 0 on success; -1 on a bad handle, a NULL @p data with a non-zero
 *         size, or a size mismatch (the array is left unchanged then).
 */
DEFT_API int DeftNDArrayCopyFromHost(DeftNDArrayHandle handle, const void *data, size_t nbytes);

/**
 * @brief Copy one array's elements into another, on any two devices.
 *
 * Asynchronous like an operator call (it is the `_copyto` operator, and
 * autograd records it): later reads of @p dst wait for it. Copies between
 * the CPU and a GPU, and between GPUs, go through the CUDA runtime.
 * @param src the array to read.
 * @param dst an array of the same shape and dtype, on any device.
 * @return 0 on success; -1 on a bad handle, a shape or dtype mismatch, or a
 *         lazy @p dst (deferred compute), with @p dst unchanged.
 */
DEFT_API int DeftNDArrayCopyTo(DeftNDArrayHandle src, DeftNDArrayHandle dst);

/**
 * @brief Number of dimensions of an array.
 * @param handle the array.
 * @param[out] out receives the number of dimensions (0 for a scalar).
 * @return 0 on success; -1 on a bad handle or a NULL @p out.
 */
DEFT_API int DeftNDArrayGetNDim(DeftNDArrayHandle handle, int *out);

/**
 * @brief Shape of an array.
 * @param handle the array.
 * @param[out] out_shape receives the dimensions; room for @p capacity values.
 * @param capacity number of values @p out_shape can hold (DEFT_MAX_NDIM always
 *        suffices).
 * @param[out] out_ndim receives the number of dimensions.
 * @return 0 on success; -1 on a bad handle, NULL out-pointers, or a
 *         @p capacity smaller than the number of dimensions.
 */
DEFT_API int DeftNDArrayGetShape(DeftNDArrayHandle handle, int64_t *out_shape, int capacity,
                                 int *out_ndim);

/**
 * @brief Number of elements of an array (the product of its dimensions).
 * @param handle the array.
 * @param[out] out receives the count.
 * @return 0 on success; -1 on a bad handle or a NULL @p out.
 */
DEFT_API int DeftNDArrayGetSize(DeftNDArrayHandle handle, int64_t *out);

/**
 * @brief Size of an array's elements in bytes, as the copy functions expect.
 * @param handle the array.
 * @param[out] out receives the byte count.
 * @return 0 on success; -1 on a bad handle or a NULL @p out.
 */
DEFT_API int DeftNDArrayGetNBytes(DeftNDArrayHandle handle, size_t *out);

/**
 * @brief Data type of an array.
 * @param handle the array.
 * @param[out] out receives a ::DeftDType value.
 * @return 0 on success; -1 on a bad handle or a NULL @p out.
 */
DEFT_API int DeftNDArrayGetDType(DeftNDArrayHandle handle, int *out);

/**
 * @brief Device an array lives on.
 * @param handle the array.
 * @param[out] out_type receives a ::DeftDeviceType value.
 * @param[out] out_id receives the device number.
 * @return 0 on success; -1 on a bad handle or NULL out-pointers.
 */
DEFT_API int DeftNDArrayGetDevice(DeftNDArrayHandle handle, int *out_type, int *out_id);

/**
 * @brief Block until every pending write to the array is done.
 *
 * Operators run asynchronously. A failure inside one is kept on the arrays
 * it writes, and is *sticky*:
 * - every wait on or read of a failed array reports the failure, each time;
 * - an operator that reads a failed array does not run, and the arrays it
 *   writes fail with the same message (so does everything computed from them);
 * - an operator that reads and updates a failed array in place keeps it failed;
 * - the failure goes only when the array is overwritten: an operator writes
 *   it as an output without reading it and succeeds, or
 *   DeftNDArrayCopyFromHost() replaces its contents.
 *
 * A failed array's contents are never read as if they were valid.
 *
 * On a GPU, checks of an operator's indices or labels (an index out of
 * range, a label that is not a class) run on the device and do not make
 * the call wait: their failure is found when this wait (or a copy to the
 * host) waits for the device, and is then reported and kept as above.
 * @param handle the array.
 * @return 0 when the array can be read; -1 on a bad handle, or with the
 *         message and kind of the asynchronous failure kept on the array.
 *         Called from a custom operator's callback for an array that the
 *         operator itself writes, -1 at once (waiting would never end).
 */
DEFT_API int DeftNDArrayWaitToRead(DeftNDArrayHandle handle);

/**
 * @brief Block until every pending read and write of the array is done.
 * @param handle the array.
 * @return 0 when the array can be written; -1 on a bad handle or with the
 *         failure kept on the array (see DeftNDArrayWaitToRead()).
 */
DEFT_API int DeftNDArrayWaitToWrite(DeftNDArrayHandle handle);

/**
 * @brief Block until every pending operation in the library is done.
 *
 * Failures are reported to the thread whose call started the failed work:
 * each thread's DeftWaitAll() reports the failures of its own work since its
 * previous DeftWaitAll(), never another thread's. Arrays keep their failures
 * (see DeftNDArrayWaitToRead()); DeftWaitAll() clears none of them. It also
 * waits for the GPUs, and so reports the failed device-side checks of this
 * thread's work whose arrays are still alive.
 * @return 0 when none of this thread's work failed since its last
 *         DeftWaitAll(); -1 with the first such failure's message and kind,
 *         followed by how many more failed ("... (and 2 more failures since
 *         the last wait for all work)"). -1 at once when called from inside an
 *         engine operation or a custom operator's callback, where waiting for
 *         all work would wait for itself.
 */
DEFT_API int DeftWaitAll(void);

/**
 * @brief Finish pending work and stop the engine's worker threads.
 *
 * The library also does this when it is unloaded. Later calls start the
 * workers again. Call it before fork() if the child will use deft: a forked
 * child has none of the parent's threads (see the README on fork safety).
 * @return 0; -1 when called from inside an engine operation.
 */
DEFT_API int DeftShutdown(void);

/** Called before a thread sleeps waiting for the engine (see DeftSetBlockingHooks()). */
typedef void *(*DeftBlockingReleaseFn)(void);
/** Called after that sleep with what the release function returned. */
typedef void (*DeftBlockingReacquireFn)(void *state);

/**
 * @brief Functions called around every wait for the engine, for a binding
 *        whose interpreter has a global lock (Python's GIL).
 *
 * A thread may sleep waiting for the engine inside many calls: a push that
 * waits for room in the queue (back-pressure, see DEFT_ENGINE_MAX_PENDING and
 * DEFT_ENGINE_MAX_PENDING_BYTES), a wait for an array, a wait for all work.
 * Before it sleeps it calls @p release (on the thread that will sleep) and,
 * after, @p reacquire with what @p release returned; so other interpreter
 * threads run meanwhile, and so do custom operators' callbacks that need the
 * interpreter. @p release decides whether it has anything to give up (Python's
 * checks whether the thread holds the GIL). Engine worker threads never call
 * them.
 * @param release called before sleeping; its result goes to @p reacquire.
 * @param reacquire called after sleeping.
 * @return 0; -1 when exactly one of the two is NULL. Both NULL: no hooks.
 */
DEFT_API int DeftSetBlockingHooks(DeftBlockingReleaseFn release, DeftBlockingReacquireFn reacquire);

/**
 * @brief Release the caller's reference to an array.
 *
 * Never blocks. Freeing NULL is a no-op. The handle must not be used again;
 * using or freeing it again is reported as an error where it can be detected.
 * @param handle the array, or NULL.
 * @return 0 on success; -1 if @p handle is not a live NDArray handle.
 */
DEFT_API int DeftNDArrayFree(DeftNDArrayHandle handle);

/**
 * @brief Read a list of arrays from a file in MXNet's NDArray format
 *        (`.params` files, `mx.nd.save`).
 *
 * Dense arrays of every dtype deft has are read, from the format of MXNet
 * 1.x (and the older array records it still reads). They land on the CPU,
 * whichever device they were saved from. The file is checked as it is read:
 * a truncated or damaged file, a wrong magic number, more than DEFT_MAX_NDIM
 * dimensions, sizes larger than the file, a dtype deft lacks (int16, uint16,
 * uint32, uint64) or sparse storage is an error naming the file and the array.
 * @param path the file.
 * @param[out] out_count receives the number of arrays.
 * @param[out] out_arrays receives @p out_count new handles, owned by the caller.
 * @param[out] out_names receives @p out_count names ("arg:fc1_weight",
 *        "aux:bn_moving_mean", ...), or NULL when the file has none (saved
 *        from a list rather than a dictionary).
 * @return 0 on success; -1 on NULL arguments, a file that cannot be read or
 *         is not a valid NDArray file, or when memory runs out, with nothing
 *         returned. Free what it returns with DeftNDArrayListFree().
 */
DEFT_API int DeftNDArrayLoad(const char *path, int *out_count, DeftNDArrayHandle **out_arrays,
                             const char ***out_names);

/**
 * @brief Read a list of arrays from the bytes of an NDArray file in memory
 *        (as `mx.nd.load_frombuffer`).
 * @param data the file's @p nbytes bytes; the arrays copy what they need.
 * @param nbytes size of @p data.
 * @param[out] out_count receives the number of arrays.
 * @param[out] out_arrays receives @p out_count new handles, owned by the caller.
 * @param[out] out_names receives the names, or NULL (see DeftNDArrayLoad()).
 * @return 0 on success; -1 on the errors of DeftNDArrayLoad() (naming "buffer").
 */
DEFT_API int DeftNDArrayLoadFromBuffer(const void *data, size_t nbytes, int *out_count,
                                       DeftNDArrayHandle **out_arrays, const char ***out_names);

/**
 * @brief Free what DeftNDArrayLoad() or DeftNDArrayLoadFromBuffer() returned.
 *
 * Frees every non-NULL handle of @p arrays, then the two lists. A caller that
 * keeps some of the arrays sets their entries to NULL first (and frees those
 * handles itself later with DeftNDArrayFree()).
 * @param count the number of arrays returned.
 * @param arrays the handles returned, or NULL.
 * @param names the names returned, or NULL.
 * @return 0 on success; -1 when an entry is not a live NDArray handle (the
 *         others and the lists are freed all the same).
 */
DEFT_API int DeftNDArrayListFree(int count, DeftNDArrayHandle *arrays, const char **names);

/**
 * @brief Write arrays to a file in MXNet's NDArray format, which
 *        `mx.nd.load` and `gluon.SymbolBlock.imports` read.
 *
 * Waits for pending writes to the arrays. Arrays of one or more dimensions
 * are written as MXNet 1.x writes them; a 0-d array in the record of NumPy
 * shape semantics, the only one that can hold it (MXNet reads such a file
 * with `npx.load`).
 * @param path the file, created or replaced.
 * @param count number of arrays, >= 0.
 * @param arrays @p count handles.
 * @param names @p count names (parameter files name them "arg:NAME" and
 *        "aux:NAME"), or NULL to write the list without names.
 * @return 0 on success; -1 on a bad handle, a NULL name, an array whose
 *         computation failed, or a write error, with no file left at @p path.
 */
DEFT_API int DeftNDArraySave(const char *path, int count, const DeftNDArrayHandle *arrays,
                             const char *const *names);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_NDARRAY_H */
