#include "core/graph/plan_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/graph/pass.h"

#define LEAF (-2) /* planner_t hint: a leaf, whose value is given */

typedef struct block {
    size_t size;
    bool free;
    int owner; /* the entry whose last reader frees the block */
} block_t;

typedef struct planner {
    const deft_graph_t *g;
    const deft_graph_types_t *t;
    bool inplace, sharing;
    double match_range;
    bool range_mattered; /* the last run refused a free block for match_range alone */
    int *refs;           /* readers left, per entry */
    int *block_of;       /* block per entry, -1 none */
    block_t *blocks;
    int num_blocks;
    /* per node: the input its first output may take over in place (the operator's hint, if
     * in range), -1 none, or LEAF: found once, so that a run reads the graph's int tables
     * and not the nodes */
    int *hint;
    bool *outside;  /* variables and graph outputs */
    size_t *bytes;  /* per entry in the arena, its aligned size: found once for all the runs */
    size_t largest; /* of those: no plan's arena is smaller */
} planner_t;

static size_t entry_bytes(const planner_t *p, int e) {
    return p->bytes[e];
}

/* An entry's bytes, aligned, its element's size given. The product is deft_shape_size's,
 * inline (the call was a sixth of a one-off graph's planner set-up); a product that
 * overflows is left to it. */
static size_t aligned_bytes(const deft_desc_t *d, size_t elem) {
    int64_t count = 1;
    for (int i = 0; i < d->shape.ndim; i++)
        if (__builtin_mul_overflow(count, d->shape.dims[i], &count)) {
            count = deft_shape_size(&d->shape);
            break;
        }
    size_t n = (size_t)count * elem;
    return (n + DEFT_CPU_ALIGN - 1) & ~(size_t)(DEFT_CPU_ALIGN - 1);
}

static int take_block(planner_t *p, size_t size) {
    int best = -1;
    for (int b = 0; p->sharing && b < p->num_blocks; b++) {
        block_t *blk = &p->blocks[b];
        if (!blk->free || blk->size < size) continue;
        if ((double)blk->size > (double)size * p->match_range) {
            p->range_mattered = true;
            continue;
        }
        if (best < 0 || blk->size < p->blocks[best].size) best = b;
    }
    if (best < 0) {
        best = p->num_blocks++;
        p->blocks[best].size = size;
    }
    p->blocks[best].free = false;
    return best;
}

static void release_entry(planner_t *p, int e) {
    int b = p->block_of[e];
    if (--p->refs[e] == 0 && b >= 0 && p->blocks[b].owner == e) p->blocks[b].free = true;
}

/* One planning run; returns the arena size (sum of blocks). It reads the graph's
 * tables and the planner's, not the nodes (p->hint): a one-off graph plans once, and
 * a pointer to chase per node, to its operator's in-place hint, was a fifth of it. */
static size_t plan_once(planner_t *p) {
    const deft_graph_t *g = p->g;
    int entries = deft_graph_num_entries(g);
    memset(p->refs, 0, (size_t)entries * sizeof *p->refs);
    for (int e = 0; e < entries; e++) p->block_of[e] = -1;
    p->num_blocks = 0;
    p->range_mattered = false;
    for (int r = 0; r < g->in_ptr[g->num_nodes]; r++) p->refs[g->in_entry[r]]++;
    for (int i = 0; i < g->num_nodes; i++) {
        int hint = p->hint[i];
        if (hint == LEAF) continue;
        for (int e = g->row_ptr[i]; e < g->row_ptr[i + 1]; e++) {
            if (p->outside[e]) continue;
            if (p->inplace && e == g->row_ptr[i] && hint >= 0) {
                int src = deft_graph_input_entry(g, i, hint);
                int b = p->block_of[src];
                if (p->refs[src] == 1 && b >= 0 && p->blocks[b].owner == src &&
                    entry_bytes(p, src) == entry_bytes(p, e)) {
                    p->block_of[e] = b;
                    p->blocks[b].owner = e; /* handed over: freed after e's readers */
                    continue;
                }
            }
            p->block_of[e] = take_block(p, entry_bytes(p, e));
            p->blocks[p->block_of[e]].owner = e;
        }
        for (int r = g->in_ptr[i]; r < g->in_ptr[i + 1]; r++) release_entry(p, g->in_entry[r]);
        for (int e = g->row_ptr[i]; e < g->row_ptr[i + 1]; e++) /* outputs nobody reads */
            if (p->refs[e] == 0) {
                p->refs[e] = 1;
                release_entry(p, e);
            }
    }
    size_t total = 0; /* saturating: it only ranks the sweep's plans */
    for (int b = 0; b < p->num_blocks; b++)
        if (__builtin_add_overflow(total, p->blocks[b].size, &total)) return SIZE_MAX;
    return total;
}

static int layout(const planner_t *p, deft_memory_plan_t *plan) {
    int64_t *block_offset =
        malloc((size_t)(p->num_blocks ? p->num_blocks : 1) * sizeof *block_offset);
    if (!block_offset) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a memory plan");
    size_t at = 0;
    for (int b = 0; b < p->num_blocks; b++) {
        block_offset[b] = (int64_t)at;
        /* Each value fits (inference checks it); together they may not. */
        if (__builtin_add_overflow(at, p->blocks[b].size, &at) || at > DEFT_SHAPE_MAX_BYTES) {
            free(block_offset);
            return deft_error(DEFT_ERR_VALUE,
                              "the graph's intermediate values need more than %zu bytes in all",
                              DEFT_SHAPE_MAX_BYTES);
        }
    }
    for (int e = 0; e < plan->num_entries; e++)
        plan->offset[e] = p->block_of[e] >= 0 ? block_offset[p->block_of[e]] : -1;
    plan->arena_bytes = at;
    free(block_offset);
    return 0;
}

static void planner_free(planner_t *p) {
    free(p->bytes); /* the start of the one allocation of all the tables */
    p->bytes = NULL;
}

/* A planner over g's entries: leaves, graph outputs and `pinned` entries live outside. */
static int planner_init(planner_t *p, const deft_graph_t *g, const deft_graph_types_t *t,
                        const bool *pinned) {
    int entries = deft_graph_num_entries(g);
    *p = (planner_t){.g = g, .t = t};
    /* One allocation, widest first; only `outside` needs zeros (a block's fields are set when
     * it is made, refs and block_of by each run). */
    size_t n = (size_t)(entries ? entries : 1), nodes = (size_t)g->num_nodes + 1;
    char *at = malloc(n * (sizeof *p->bytes + sizeof *p->blocks + 2 * sizeof(int) + 1) +
                      nodes * sizeof(int));
    if (!at) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a memory plan");
    p->bytes = (size_t *)at, at += n * sizeof *p->bytes;
    p->blocks = (block_t *)at, at += n * sizeof *p->blocks;
    p->refs = (int *)at, at += n * sizeof(int);
    p->block_of = (int *)at, at += n * sizeof(int);
    p->hint = (int *)at, at += nodes * sizeof(int);
    p->outside = memset(at, 0, n);
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        int hint = deft_graph_is_leaf(g, i) ? LEAF : node->op->op->inplace_input;
        p->hint[i] = hint < node->num_inputs ? hint : -1;
        for (int k = 0; hint == LEAF && k < node->num_outputs; k++)
            p->outside[g->row_ptr[i] + k] = true;
    }
    for (int e = 0; pinned && e < entries; e++) p->outside[e] = p->outside[e] || pinned[e];
    for (int o = 0; o < g->num_outputs; o++) p->outside[deft_graph_output_entry(g, o)] = true;
    deft_dtype_t dtype = DEFT_DT_FLOAT32; /* the last entry's, and its element size */
    size_t elem = deft_dtype_size(dtype);
    for (int e = 0; e < entries; e++) {
        if (!p->outside[e] && t->desc[e].dtype != dtype)
            dtype = t->desc[e].dtype, elem = deft_dtype_size(dtype);
        p->bytes[e] = p->outside[e] ? 0 : aligned_bytes(&t->desc[e], elem);
        if (p->bytes[e] > p->largest) p->largest = p->bytes[e];
    }
    p->match_range = 1e300;
    return 0;
}

int deft_plan_memory(const deft_graph_t *g, const deft_graph_types_t *t, bool enabled,
                     const bool *pinned, deft_memory_plan_t *out) {
    int entries = deft_graph_num_entries(g);
    planner_t p;
    deft_memory_plan_t plan = {.num_entries = entries,
                               .offset = malloc((size_t)(entries ? entries : 1) * sizeof(int64_t))};
    if (!plan.offset) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a memory plan");
    if (planner_init(&p, g, t, pinned)) {
        free(plan.offset);
        return -1;
    }
    /* The sweep: keep the match range, with in-place writes or without, giving
     * the smallest arena. In-place writes are greedy: a block handed to an
     * output lives as long as that output's readers, and can cost more than
     * it saves (a 10-layer MLP's training graph once relu's gradient read its
     * output: 42240 bytes, 41600 without them). The in-place sweep goes last
     * and wins a tie, so where it wins, as it mostly does, its last run is
     * the plan and none runs again (a chain plans twice, not three times). */
    static const double ranges[] = {1, 2, 4, 8, 16, 32, 1e300};
    double best_range = 1e300;
    bool best_inplace = enabled;
    size_t best = (size_t)-1;
    p.sharing = enabled;
    double last_range = -1; /* of the run whose result p holds */
    /* An in-place plan as small as the largest entry cannot be beaten, and is
     * what the sweep would choose (the first in-place range to reach the
     * smallest size, winning a tie): a chain of equal sizes plans once. */
    p.inplace = true, p.match_range = ranges[0];
    bool settled = enabled && plan_once(&p) == p.largest;
    if (settled) last_range = best_range = ranges[0];
    for (int inplace = 0; enabled && !settled && inplace <= 1; inplace++) {
        p.inplace = inplace;
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            p.match_range = last_range = ranges[r];
            size_t bytes = plan_once(&p);
            if (bytes < best || (inplace && !best_inplace && bytes == best))
                best = bytes, best_range = ranges[r], best_inplace = inplace;
            /* No block was refused for the range: every wider range decides alike (a
             * chain of equal sizes plans once here, not seven times). */
            if (!p.range_mattered) break;
        }
    }
    bool rerun = !enabled || p.inplace != best_inplace || last_range != best_range;
    p.match_range = best_range, p.inplace = best_inplace;
    if (rerun) plan_once(&p);
    int status = layout(&p, &plan);
    planner_free(&p);
    if (status) {
        free(plan.offset);
        return -1;
    }
    *out = plan;
    return 0;
}

int deft_plan_memory_report(const deft_graph_t *g, const deft_graph_types_t *t, const bool *pinned,
                            deft_memory_plan_t *plan) {
    planner_t p;
    if (planner_init(&p, g, t, pinned)) return -1;
    plan->naive_bytes = plan_once(&p);
    p.inplace = true;
    plan->inplace_only_bytes = plan_once(&p);
    p.inplace = false, p.sharing = true;
    plan->sharing_only_bytes = plan_once(&p);
    planner_free(&p);
    return 0;
}

void deft_memory_plan_free(deft_memory_plan_t *plan) {
    free(plan->offset);
    plan->offset = NULL;
}

/* ---- the PlanMemory pass: the plan written into the nodes ---- */

static int first_unknown(const deft_graph_t *g, const deft_graph_types_t *t) {
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_outputs; k++)
            if (!t->known[g->row_ptr[i] + k]) return i;
    return -1;
}

/* "__storage_offset__": each output's byte offset in the arena, -1 outside it. */
static int annotate_offsets(const deft_graph_t *g, int id, const deft_memory_plan_t *plan,
                            deft_node_t **out) {
    char text[DEFT_OP_MAX_OUTPUTS * 24] = "";
    size_t used = 0;
    for (int k = 0; k < g->nodes[id]->num_outputs; k++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%lld", k ? "," : "",
                                 (long long)plan->offset[g->row_ptr[id] + k]);
    return deft_node_with_attr(g->nodes[id], "__storage_offset__", text, out);
}

int deft_pass_plan_memory(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g;
    deft_graph_types_t t = {0};
    deft_memory_plan_t plan = {0};
    if (deft_graph_build(in->num_outputs, in->outputs, &g)) return -1;
    int status = deft_graph_infer(g, NULL, NULL, &t), unknown = -1;
    if (status == 0 && (unknown = first_unknown(g, &t)) >= 0)
        status = deft_error(DEFT_ERR_VALUE,
                            "PlanMemory: the shape of '%s' is unknown (give the arguments "
                            "\"__shape__\" attributes, e.g. with the InferShape pass)",
                            g->names[unknown]);
    if (status == 0) status = deft_plan_memory(g, &t, true, NULL, &plan);
    deft_node_t **replace = status ? NULL : calloc((size_t)g->num_nodes + 1, sizeof *replace);
    if (status == 0 && !replace) status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    for (int i = 0; status == 0 && i < g->num_nodes; i++)
        if (g->nodes[i]->op) status = annotate_offsets(g, i, &plan, &replace[i]);
    if (status == 0) status = deft_graph_rebuild(g, NULL, replace, out);
    for (int i = 0; replace && i < g->num_nodes; i++) deft_node_release(replace[i]);
    free(replace);
    deft_memory_plan_free(&plan);
    deft_graph_types_free(&t);
    deft_graph_free(g);
    return status;
}

int deft_plan_arenas(const deft_memory_plan_t *plan, const deft_graph_types_t *types,
                     const deft_device_t *devices, deft_storage_t **arenas,
                     deft_tensor_t *tensors) {
    for (int s = 0; s < DEFT_DEVICE_SLOTS; s++) arenas[s] = NULL;
    for (int e = 0; e < plan->num_entries; e++) {
        if (plan->offset[e] < 0) continue;
        deft_storage_t **arena = &arenas[deft_device_slot(devices[e])];
        if (!*arena && deft_storage_new(devices[e], plan->arena_bytes, arena)) {
            deft_plan_arenas_release(arenas);
            return -1;
        }
        tensors[e] = (deft_tensor_t){types->desc[e].shape, types->desc[e].dtype, devices[e], *arena,
                                     (size_t)plan->offset[e]};
    }
    return 0;
}

void deft_plan_arenas_release(deft_storage_t **arenas) {
    for (int s = 0; s < DEFT_DEVICE_SLOTS; s++) {
        deft_storage_release(arenas[s]);
        arenas[s] = NULL;
    }
}
