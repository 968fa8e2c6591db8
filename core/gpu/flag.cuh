/*
 * Checks that must fail a call (bad labels, indices out of range) run on
 * the device: a kernel notes the first offending position in a slot
 * (gpu_check.h) with atomicMin, a second one notes the value there, and
 * the slot is copied to page-locked host memory on the same stream.
 *
 * Inside a run that collects checks (core/base/fence.h: an engine
 * operation, outside the naive engine) the call returns without waiting:
 * the check travels with the buffers the operation writes and is resolved
 * when the host waits for them (device_check.h). The checked kernels stay
 * in bounds whatever the indices, so they may run before the verdict.
 * Elsewhere the host waits for the verdict at once: outside a run nothing
 * would carry the check to a later wait, and the naive engine asks for it
 * (a bad call fails where it is made). No checked operator needs the
 * verdict to go on (its output shapes come from inference, not from the
 * indices), so none waits for it inside a run.
 */
#ifndef DEFT_CORE_GPU_FLAG_CUH
#define DEFT_CORE_GPU_FLAG_CUH

#include <cuda_runtime_api.h>

#include "core/base/device_check.h"
#include "core/gpu/gpu.h"
#include "core/gpu/gpu_check.h"
#include "core/math/dtype_math.h"

namespace {

/* Note position `at` as offending (the smallest noted wins). */
__device__ inline void flag_first(deft_check_verdict_t *verdict, int64_t at) {
    atomicMin(reinterpret_cast<unsigned long long *>(&verdict->first), (unsigned long long)at);
}

/* The value at the first offending position, for the message. */
__global__ void note_value(deft_check_verdict_t *verdict, const void *values, deft_dtype_t dtype) {
    if (verdict->first != DEFT_CHECK_PASSED)
        verdict->value = deft_load_double(values, dtype, (int64_t)verdict->first);
}

/* Queue the check and its copy to the host (slot taken, stream entered). */
template <typename Launch>
int queue_flagged(deft_gpu_check_slot_t *slot, cudaStream_t stream, Launch launch,
                  const void *values, deft_dtype_t dtype) {
    slot->host->first = DEFT_CHECK_PENDING; /* before the copy is queued: nothing races it */
    /* all ones: DEFT_CHECK_PASSED, and a NaN value */
    if (deft_gpu_check(cudaMemsetAsync(slot->device, 0xff, sizeof *slot->device, stream),
                       "cudaMemsetAsync"))
        return -1;
    launch(stream, slot->device);
    note_value<<<1, 1, 0, stream>>>(slot->device, values, dtype);
    if (deft_gpu_check(cudaGetLastError(), "launching a checked kernel")) return -1;
    return deft_gpu_check(cudaMemcpyAsync((void *)slot->host, slot->device, sizeof *slot->device,
                                          cudaMemcpyDeviceToHost, stream),
                          "cudaMemcpyAsync");
}

/* Wait for a check now: 0, or the report's error. No lock is held meanwhile. */
inline int wait_flagged(deft_gpu_check_slot_t *slot, cudaStream_t stream,
                        const deft_check_report_t *report) {
    int status = deft_gpu_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    deft_check_verdict_t seen = {slot->host->first, slot->host->value};
    deft_gpu_check_slot_give(slot);
    if (status || seen.first == DEFT_CHECK_PASSED) return status;
    return report->fn(report->ctx, (int64_t)seen.first, seen.value);
}

/*
 * Run launch(stream, verdict) on GPU `dev`, a kernel that flags the first
 * offending position of `values` (elements of `dtype`). 0 when the check
 * passed or was deferred; -1 with report's message when it failed (waited
 * for here), or with a CUDA error.
 */
template <typename Launch>
int run_flagged(int dev, Launch launch, const void *values, deft_dtype_t dtype,
                const deft_check_report_t *report) {
    deft_gpu_stream_t stream;
    deft_gpu_check_slot_t *slot;
    if (deft_gpu_enter(dev, &stream) || deft_gpu_check_slot_take(dev, &slot)) return -1;
    if (queue_flagged(slot, stream, launch, values, dtype)) {
        /* No copy to wait for, or a failed one: the slot may be taken again.
         * On this stream only, so after whatever of it was queued. */
        slot->host->first = DEFT_CHECK_PASSED;
        deft_gpu_check_slot_give(slot);
        return -1;
    }
    if (!deft_check_deferring()) return wait_flagged(slot, stream, report);
    deft_check_t *check =
        deft_check_new(dev, slot->stream, slot->host, report, deft_gpu_check_slot_give, slot);
    if (!check) {
        deft_gpu_check_slot_give(slot);
        return -1;
    }
    return deft_check_defer(check);
}

} // namespace

#endif
