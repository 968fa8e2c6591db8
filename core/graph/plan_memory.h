/*
 * Memory planning (NNVM's PlanMemory): give every intermediate entry of a
 * graph an offset in one arena, reusing memory as soon as its last reader
 * has run.
 *
 *  - Reference counts: an entry's storage is free once every node reading
 *    it has run. Graph inputs and outputs live outside the arena.
 *  - In place: an operator that may write an output over an input (its
 *    inplace hint) does so when that input has no other reader left and the
 *    sizes match.
 *  - Sharing: otherwise the output takes the smallest free block that is
 *    large enough and not more than `match_range` times too large, else a
 *    new block. The planner tries several match ranges and keeps the
 *    smallest arena (MXNet documents this sweep but only runs it when an
 *    environment variable asks).
 */
#ifndef DEFT_CORE_PLAN_MEMORY_H
#define DEFT_CORE_PLAN_MEMORY_H

#include "core/base/storage.h"
#include "core/base/tensor.h"
#include "core/graph/infer.h"

typedef struct deft_memory_plan {
    int num_entries;
    int64_t *offset; /* byte offset in the arena, or -1: not in the arena */
    size_t arena_bytes;
    /* what other plans of the same graph would need, for reports: filled only by
     * deft_plan_memory_report (three more planner runs that nothing but a report reads) */
    size_t naive_bytes, inplace_only_bytes, sharing_only_bytes;
} deft_memory_plan_t;

/* `types` must be complete. Entries of leaves and graph outputs get -1, and
 * so do entries marked in `pinned` (may be NULL): values kept after the run. */
int deft_plan_memory(const deft_graph_t *g, const deft_graph_types_t *types, bool enabled,
                     const bool *pinned, deft_memory_plan_t *out);

/* Fill plan's report figures (naive, in-place only, sharing only) for the graph and
 * pinned entries it was planned for. */
int deft_plan_memory_report(const deft_graph_t *g, const deft_graph_types_t *types,
                            const bool *pinned, deft_memory_plan_t *plan);
void deft_memory_plan_free(deft_memory_plan_t *plan);

/* An arena on each device that planned entries live on (entry e on
 * devices[e]), each of the plan's full size, so entries on different devices
 * never meet; tensors[e] of every planned entry is pointed into its device's
 * arena (shape and dtype from types). arenas has DEFT_DEVICE_SLOTS slots,
 * NULL where unused; release them with deft_plan_arenas_release. */
int deft_plan_arenas(const deft_memory_plan_t *plan, const deft_graph_types_t *types,
                     const deft_device_t *devices, deft_storage_t **arenas, deft_tensor_t *tensors);
void deft_plan_arenas_release(deft_storage_t **arenas);

#endif
