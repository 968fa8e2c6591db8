/*
 * _backward_RNN for either device: layer by layer from the top, direction by
 * direction, the steps backwards (on the CPU each thread takes a block of
 * batch rows through every step, rnn_cpu.c; on a GPU a kernel and a cuBLAS
 * GEMM per step, rnn.cu), then each weight gradient as one GEMM over every
 * step, and the layer input's gradient as one more, as the forward's input
 * projection was. It reads the gates and states the forward kept in its
 * reserve (rnn.h) and runs no forward step again, unless a predict-mode
 * forward left the gates out: then it runs the forward once more, keeping
 * them, into its working memory.
 */
#include "core/base/fence.h"
#include "core/base/storage.h"
#include "core/math/dtype_math.h"
#include "core/op/gemm.h"
#include "core/op/rnn.h"

/* Element `elems` of an array (NULL for an empty one, which nothing reads). */
static char *at(const void *base, int64_t elems, size_t elem) {
    return base ? (char *)base + (size_t)elems * elem : NULL;
}

static bool on_gpu(const deft_rnn_backward_t *b) {
    return b->dev.type == DEFT_DEV_GPU;
}

void deft_rnn_back_step_at(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w, int64_t l,
                           int64_t d, int64_t i, const char *dy, deft_rnn_back_step_t *s) {
    const deft_rnn_geom_t *g = b->g;
    int64_t ld = l * g->D + d, NH = g->N * g->H, GH = g->G * g->H, DH = g->D * g->H;
    int64_t t = d ? g->T - 1 - i : i, prev = d ? t + 1 : t - 1;
    size_t es = deft_dtype_size(b->dtype);
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, l, d, &slot);
    const char *hs = at(b->reserve, slot.h, es);
    const char *cs = slot.c >= 0 ? at(b->reserve, slot.c, es) : NULL;
    *s = (deft_rnn_back_step_t){
        .mode = g->mode,
        .N = g->N,
        .H = g->H,
        .t = t,
        .gates = slot.gates >= 0 ? at(b->reserve, slot.gates + t * 4 * NH, es) : NULL,
        .h = at(hs, t * NH, es),
        .c = cs ? at(cs, t * NH, es) : NULL,
        .h_prev = i ? at(hs, prev * NH, es) : at(b->hx, ld * NH, es),
        .c_prev = cs ? (i ? at(cs, prev * NH, es) : at(b->cx, ld * NH, es)) : NULL,
        .dy = at(dy, t * g->N * DH + d * g->H, es),
        .dy_stride = DH,
        .dh = w->dh,
        .dc = w->dc,
        .dgx = at(w->dgx, t * g->N * GH, es),
        .dgh = at(w->dgh, t * g->N * GH, es),
        .lengths = b->lengths,
        .length_dtype = b->length_dtype,
        .clip = g->clip,
        .clip_min = g->clip_min,
        .clip_max = g->clip_max};
}

/* ---- the device's pieces ---- */

static int gemm(const deft_rnn_backward_t *b, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                const void *a, const void *bm, double beta, void *c) {
    return deft_gemm(b->dev, b->dtype, ta, tb, m, n, k, a, bm, beta, c);
}

static int copy(const deft_rnn_backward_t *b, void *dst, const void *src, size_t bytes) {
    return bytes ? deft_device_copy(dst, b->dev, src, b->dev, bytes) : 0;
}

static int zero(const deft_rnn_backward_t *b, void *dst, size_t bytes) {
    return bytes ? deft_device_zero(dst, b->dev, bytes) : 0;
}

static int column_sums(const deft_rnn_backward_t *b, const void *m, int64_t rows, int64_t cols,
                       void *sum) {
#ifdef DEFT_HAVE_CUDA
    if (on_gpu(b)) return deft_gpu_rnn_column_sums(b->dev.id, b->dtype, m, rows, cols, sum);
#endif
    deft_rnn_column_sums_cpu(b->dtype, m, rows, cols, sum);
    return 0;
}

static int multiply(const deft_rnn_backward_t *b, void *x, const void *m, int64_t n) {
#ifdef DEFT_HAVE_CUDA
    if (on_gpu(b)) return deft_gpu_rnn_multiply(b->dev.id, b->dtype, x, m, n);
#endif
    deft_rnn_multiply_cpu(b->dtype, x, m, n);
    return 0;
}

/* Every step of (l, d) backwards: the CPU's blocks of rows, or the GPU's step after step. */
static int steps(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w, int64_t l, int64_t d,
                 const char *dy, const void *w_h2h) {
    if (!on_gpu(b)) {
        deft_rnn_back_steps_cpu(b, w, l, d, dy, w_h2h);
        return 0;
    }
#ifdef DEFT_HAVE_CUDA
    const deft_rnn_geom_t *g = b->g;
    for (int64_t i = g->T - 1; i >= 0; i--) {
        deft_rnn_back_step_t s;
        deft_rnn_back_step_at(b, w, l, d, i, dy, &s);
        if (deft_gpu_rnn_back_step(b->dev.id, &s, b->dtype) ||
            gemm(b, false, false, g->N, g->H, g->G * g->H, s.dgh, w_h2h, 1.0, w->dh))
            return -1;
    }
#endif
    return 0;
}

/* ---- the layers ---- */

/* Layer-direction (l, d)'s steps backwards: gate gradients into w->dgx/dgh, the initial state's
 * gradient into dhx, dcx. dy: the layer output's gradient (T N x D H). */
static int back_steps(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w, int64_t l,
                      int64_t d, const char *dy) {
    const deft_rnn_geom_t *g = b->g;
    int64_t ld = l * g->D + d, NH = g->N * g->H, GH = g->G * g->H, in = l ? g->D * g->H : g->In;
    size_t es = deft_dtype_size(b->dtype), state_bytes = (size_t)NH * es;
    bool lstm = g->mode == DEFT_RNN_LSTM;
    if ((b->dhy ? copy(b, w->dh, at(b->dhy, ld * NH, es), state_bytes)
                : zero(b, w->dh, state_bytes)) ||
        (lstm && (b->dcy ? copy(b, w->dc, at(b->dcy, ld * NH, es), state_bytes)
                         : zero(b, w->dc, state_bytes))) ||
        steps(b, w, l, d, dy, at(b->w, deft_rnn_w_offset(g, ld) + GH * in, es)) ||
        copy(b, at(b->dhx, ld * NH, es), w->dh, state_bytes))
        return -1;
    return b->dcx ? copy(b, at(b->dcx, ld * NH, es), w->dc, state_bytes) : 0;
}

/* Layer-direction (l, d)'s weight and bias gradients from the gate gradients, and its part of
 * the layer input's gradient dx (added to the other direction's). x: the layer's input. */
static int back_weights(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w, int64_t l,
                        int64_t d, const char *x, char *dx) {
    const deft_rnn_geom_t *g = b->g;
    int64_t ld = l * g->D + d, NH = g->N * g->H, GH = g->G * g->H, in = l ? g->D * g->H : g->In;
    int64_t TN = g->T * g->N, steps = g->T > 0 ? g->T - 1 : 0;
    size_t es = deft_dtype_size(b->dtype);
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, l, d, &slot);
    const char *w_i2h = at(b->w, deft_rnn_w_offset(g, ld), es);
    char *dw_i2h = at(b->dw, deft_rnn_w_offset(g, ld), es), *dw_h2h = at(dw_i2h, GH * in, es);
    char *db = at(b->dw, deft_rnn_b_offset(g, ld), es);
    const char *hs = at(b->reserve, slot.h, es);
    /* W_h2h saw h_prev: the states of the steps before (in time order for direction 0, the
     * states after for direction 1), and the initial state at the first step */
    const char *dg_later = at(w->dgh, d ? 0 : g->N * GH, es), *h_earlier = at(hs, d ? NH : 0, es);
    if (gemm(b, true, false, GH, in, TN, w->dgx, x, 0.0, dw_i2h) ||
        gemm(b, true, false, GH, g->H, steps * g->N, dg_later, h_earlier, 0.0, dw_h2h) ||
        (g->T > 0 &&
         gemm(b, true, false, GH, g->H, g->N, at(w->dgh, (d ? g->T - 1 : 0) * g->N * GH, es),
              at(b->hx, ld * NH, es), 1.0, dw_h2h)) ||
        column_sums(b, w->dgx, TN, GH, db) || column_sums(b, w->dgh, TN, GH, at(db, GH, es)))
        return -1;
    return gemm(b, false, false, TN, in, GH, w->dgx, w_i2h, d ? 1.0 : 0.0, dx);
}

typedef struct back_run {
    const deft_rnn_backward_t *b;
    deft_rnn_back_space_t w;
    deft_storage_t *redone; /* NULL, or room for the forward again: a reserve and an output */
} back_run_t;

/* The forward again, into r->redone, with the gates kept and the masks of a predict-mode
 * forward (ones): the reserve backward reads instead of the one given. */
static int redo_forward(const back_run_t *r, deft_rnn_backward_t *with) {
    const deft_rnn_backward_t *b = r->b;
    const deft_rnn_geom_t *g = b->g;
    size_t es = deft_dtype_size(b->dtype);
    int64_t size = deft_rnn_reserve_size(g);
    deft_tensor_t reserve = {{1, {size}}, b->dtype, b->dev, r->redone, 0};
    deft_rnn_run_t f = {.g = g,
                        .dev = b->dev,
                        .dtype = b->dtype,
                        .elem = es,
                        .x = b->x,
                        .w = b->w,
                        .hx = b->hx,
                        .cx = b->cx,
                        .lengths = b->lengths,
                        .length_dtype = b->length_dtype,
                        .y = (char *)r->redone->data + (size_t)size * es,
                        .rs = r->redone->data,
                        .reserve = &reserve,
                        .keep = true,
                        .drawing = false};
    with->reserve = f.rs;
    return deft_rnn_run(&f);
}

static int run_layers(void *arg) {
    const back_run_t *r = arg;
    deft_rnn_backward_t with = *r->b;
    if (r->redone && redo_forward(r, &with)) return -1;
    const deft_rnn_backward_t *b = &with;
    const deft_rnn_geom_t *g = b->g;
    size_t es = deft_dtype_size(b->dtype);
    const char *dy = b->dy;
    for (int64_t l = g->L - 1; l >= 0; l--) {
        deft_rnn_slots_t below;
        if (l) deft_rnn_slots(g, l - 1, 0, &below);
        const char *x = !l ? b->x : at(b->reserve, g->p > 0 ? below.drop : below.y, es);
        char *dx = l ? r->w.dlayer[l % 2] : b->dx;
        for (int64_t d = 0; d < g->D; d++)
            if (back_steps(b, &r->w, l, d, dy) || back_weights(b, &r->w, l, d, x, dx)) return -1;
        /* through the dropout to the output of the layer below */
        if (l && g->p > 0 &&
            multiply(b, dx, at(b->reserve, below.mask, es), g->T * g->N * g->D * g->H))
            return -1;
        dy = dx;
    }
    return 0;
}

/* The working memory's pieces, carved from one buffer of a multiple of 64 bytes each. */
static size_t lay_out_space(const deft_rnn_geom_t *g, size_t es, char *base,
                            deft_rnn_back_space_t *w) {
    size_t gates = (size_t)(g->T * g->N * g->G * g->H) * es, state = (size_t)(g->N * g->H) * es;
    size_t layer = g->L > 1 ? (size_t)(g->T * g->N * g->D * g->H) * es : 0, used = 0;
    bool gru = g->mode == DEFT_RNN_GRU;
    size_t sizes[6] = {gates, gru ? gates : 0, state, state, layer, layer};
    char **pieces[6] = {&w->dgx, &w->dgh, &w->dh, &w->dc, &w->dlayer[0], &w->dlayer[1]};
    for (int k = 0; k < 6; k++) {
        *pieces[k] = base && sizes[k] ? base + used : NULL;
        used += (sizes[k] + 63) / 64 * 64;
    }
    if (!gru) w->dgh = w->dgx;
    return used;
}

/* Whether the forward kept the gates: the reserve's flag (a copy to the host from a GPU). */
static int gates_kept(const deft_rnn_backward_t *b, bool *kept) {
    deft_rnn_slots_t slot;
    deft_rnn_slots(b->g, 0, 0, &slot);
    size_t es = deft_dtype_size(b->dtype);
    char value[8];
    if (deft_device_copy(value, deft_device_cpu(), at(b->reserve, slot.kept, es), b->dev, es))
        return -1;
    *kept = deft_load_double(value, b->dtype, 0) > 0;
    return 0;
}

static deft_storage_t *new_space(const deft_op_t *op, deft_device_t dev, size_t bytes) {
    deft_storage_t *space;
    if (deft_storage_new(dev, bytes, &space) == 0) return space;
    deft_op_error(op, DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of working space", bytes);
    return NULL;
}

int deft_rnn_backward(const deft_op_t *op, const deft_rnn_backward_t *b) {
    const deft_rnn_geom_t *g = b->g;
    back_run_t r = {.b = b};
    size_t es = deft_dtype_size(b->dtype), bytes = lay_out_space(g, es, NULL, &r.w);
    bool kept;
    if (gates_kept(b, &kept)) return -1;
    size_t redo = (size_t)(deft_rnn_reserve_size(g) + g->T * g->N * g->D * g->H) * es;
    deft_storage_t *space = new_space(op, b->dev, bytes);
    if (!space || (!kept && !(r.redone = new_space(op, b->dev, redo)))) {
        if (space) deft_storage_release(space);
        return -1;
    }
    lay_out_space(g, es, space->data, &r.w);
    /* on a GPU the work on the buffers waits for their blocks' last users, and their next for
     * this */
    deft_access_t access[2] = {{space, true, DEFT_VALUE_NEW}, {r.redone, true, DEFT_VALUE_NEW}};
    int status = deft_fence_run(access, r.redone ? 2 : 1, run_layers, &r);
    deft_storage_release(space);
    if (r.redone) deft_storage_release(r.redone);
    return status;
}
