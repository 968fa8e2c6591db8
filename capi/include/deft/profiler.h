/**
 * @file profiler.h
 * @brief The profiler: a Chrome trace of operator runs, engine waits, memory
 *        events and user objects, and aggregate statistics per operator.
 *
 * Configure with DeftProfilerSetConfig(), start with DeftProfilerSetState(1),
 * write the trace with DeftProfilerDump() (chrome://tracing and Perfetto
 * open it; the file is valid JSON after every dump) and read the aggregate
 * table with DeftProfilerDumps(). While the profiler is stopped or paused,
 * nothing is recorded and operator dispatch pays one predictable branch.
 */
#ifndef DEFT_PROFILER_H
#define DEFT_PROFILER_H

#include "deft/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle on a profiling domain (a group of user objects). */
typedef struct DeftProfileDomain *DeftProfileDomainHandle;
/** Opaque handle on a user task, frame, event or counter. */
typedef struct DeftProfileObject *DeftProfileObjectHandle;

/** Formats of DeftProfilerDumps(). */
typedef enum DeftProfilerFormat {
    DEFT_PROFILER_TABLE = 0, /**< a text table, one row per operator */
    DEFT_PROFILER_JSON = 1   /**< JSON: {"domain": {"name": {count, total, min, max, mean}}} */
} DeftProfilerFormat;

/**
 * @brief Set profiler options, as key/value strings.
 *
 * Keys: `profile_all` (everything), `profile_imperative` (operator calls run
 * one by one), `profile_symbolic` (each node of executor and deferred-compute
 * runs), `profile_memory` (allocations and frees), `profile_api` (engine
 * waits), `aggregate_stats` (keep the statistics DeftProfilerDumps() reads),
 * `continuous_dump` (each dump appends what is new and keeps the file valid)
 * — each "true"/"false" or "1"/"0" — and `filename` (default
 * "profile.json"). Options not given keep their values; defaults are
 * imperative and symbolic on, the rest off.
 * @param num_params number of keys and values.
 * @param keys option names.
 * @param vals their values.
 * @return 0 on success; -1 on an unknown key, a value that does not parse, or
 *         NULL arrays with a count; nothing changes then.
 */
DEFT_API int DeftProfilerSetConfig(int num_params, const char *const *keys,
                                   const char *const *vals);

/**
 * @brief Start (1) or stop (0) recording.
 * @param running 1 to record, 0 to stop.
 * @return 0 on success; -1 if @p running is neither 0 nor 1.
 */
DEFT_API int DeftProfilerSetState(int running);

/**
 * @brief Pause (1) or resume (0) recording without stopping the profiler.
 * @param paused 1 to pause, 0 to resume.
 * @return 0 on success; -1 if @p paused is neither 0 nor 1.
 */
DEFT_API int DeftProfilerPause(int paused);

/**
 * @brief Write the events recorded since the last dump to the trace file.
 *
 * Recorded events move into the aggregate statistics and are dropped from
 * memory. Without `continuous_dump` each dump rewrites the file with the new
 * events; with it, they are appended. Either way the file is complete JSON
 * when the call returns. @p finished ends the file: the next dump starts a
 * new one.
 * @param finished 1 to end the file after this dump.
 * @return 0 on success; -1 if the file cannot be written (the message names it).
 */
DEFT_API int DeftProfilerDump(int finished);

/**
 * @brief The aggregate statistics: count, total, min, max and mean time per
 *        operator and per domain, in microseconds.
 * @param reset 1 to clear the statistics after reading them.
 * @param format a ::DeftProfilerFormat value.
 * @param[out] out receives the text, owned by the library and valid until the
 *             next call of this function on any thread.
 * @return 0 on success; -1 on a bad format or NULL @p out.
 */
DEFT_API int DeftProfilerDumps(int reset, int format, const char **out);

/**
 * @brief Drop the recorded events and the statistics.
 * @return 0.
 */
DEFT_API int DeftProfilerReset(void);

/**
 * @brief A domain: the category user objects appear under.
 * @param name the domain's name (copied).
 * @param[out] out receives a handle (DeftProfileDomainFree()).
 * @return 0 on success; -1 on a NULL argument or out of memory.
 */
DEFT_API int DeftProfileCreateDomain(const char *name, DeftProfileDomainHandle *out);

/** Kinds of user object (DeftProfileCreateObject()). */
typedef enum DeftProfileKind {
    DEFT_PROFILE_TASK = 0,   /**< a span that may start and stop on different threads */
    DEFT_PROFILE_FRAME = 1,  /**< a span, shown like a task (one per iteration, say) */
    DEFT_PROFILE_EVENT = 2,  /**< a span on the thread that starts and stops it */
    DEFT_PROFILE_COUNTER = 3 /**< a value over time */
} DeftProfileKind;

/**
 * @brief A task, frame, event or counter in a domain.
 * @param domain its domain.
 * @param kind a ::DeftProfileKind value.
 * @param name its name (copied).
 * @param[out] out receives a handle (DeftProfileObjectFree()).
 * @return 0 on success; -1 on a bad handle or kind, NULL arguments, or out of memory.
 */
DEFT_API int DeftProfileCreateObject(DeftProfileDomainHandle domain, int kind, const char *name,
                                     DeftProfileObjectHandle *out);

/**
 * @brief Start a task, frame or event.
 * @param obj the object.
 * @return 0 on success; -1 on a bad handle, a counter, or an object already started.
 */
DEFT_API int DeftProfileDurationStart(DeftProfileObjectHandle obj);

/**
 * @brief Stop a started task, frame or event: its span is recorded.
 * @param obj the object.
 * @return 0 on success; -1 on a bad handle, a counter, or an object not started.
 */
DEFT_API int DeftProfileDurationStop(DeftProfileObjectHandle obj);

/**
 * @brief Set (@p add 0) or change (@p add 1) a counter's value.
 * @param obj a counter.
 * @param value the new value, or the change.
 * @param add 1 to add @p value to the counter, 0 to set it.
 * @return 0 on success; -1 on a bad handle or an object that is not a counter.
 */
DEFT_API int DeftProfileSetCounter(DeftProfileObjectHandle obj, int64_t value, int add);

/**
 * @brief An instant marker.
 * @param domain its domain.
 * @param name its name.
 * @param scope "global", "process" or "thread".
 * @return 0 on success; -1 on a bad handle, NULL name or an unknown scope.
 */
DEFT_API int DeftProfileSetMarker(DeftProfileDomainHandle domain, const char *name,
                                  const char *scope);

/**
 * @brief Release a user object. NULL is a no-op.
 * @param obj the object.
 * @return 0 on success; -1 on a bad handle.
 */
DEFT_API int DeftProfileObjectFree(DeftProfileObjectHandle obj);

/**
 * @brief Release a domain (objects made in it stay valid). NULL is a no-op.
 * @param domain the domain.
 * @return 0 on success; -1 on a bad handle.
 */
DEFT_API int DeftProfileDomainFree(DeftProfileDomainHandle domain);

#ifdef __cplusplus
}
#endif

#endif /* DEFT_PROFILER_H */
