/*
 * RNN (vanilla ReLU/tanh, LSTM, GRU; stacked, bidirectional), as MXNet's
 * fused operator, with its backward _backward_RNN and _rnn_param_concat, the
 * Concat that Gluon's fused layers join their flattened weights with.
 *
 * The forward runs layer by layer and direction by direction: one GEMM
 * projects the inputs of every time step, then each step is one GEMM for
 * the hidden projection and one fused kernel for the gates (rnn_math.h),
 * on the CPU (rnn_cpu.c) or a GPU (rnn.cu, cuBLAS for the GEMMs). It always
 * keeps the gates and states in its hidden reserve output (rnn.h), so the
 * gradient, built as one _backward_RNN node (rnn_backward.c, either device),
 * never runs the forward again. Dropout between layers (p) draws from the seeded Philox stream in
 * training mode only, as Dropout does.
 *
 * Beyond MXNet's CPU kernels (but as its cuDNN ones): sequence_length and
 * the LSTM cell clipping. Not implemented: projection_size (LSTMP).
 */
#include <string.h>

#include "core/base/parallel.h"
#include "core/op/gemm.h"
#include "core/op/gpu_ops.h"
#include "core/op/grad.h"
#include "core/math/dtype_math.h"
#include "core/op/index_check.h"
#include "core/op/op.h"
#include "core/op/random.h"
#include "core/op/registry.h"
#include "core/op/rnn.h"

static const char *const rnn_modes[] = {"rnn_relu", "rnn_tanh", "lstm", "gru", NULL};

static const deft_param_def_t rnn_params[] = {
    {"state_size", DEFT_PARAM_INT, NULL, "size of the state of each layer", NULL, false},
    {"num_layers", DEFT_PARAM_INT, NULL, "number of stacked layers", NULL, false},
    {"bidirectional", DEFT_PARAM_BOOL, "false", "whether the layers run both ways", NULL, false},
    {"mode", DEFT_PARAM_ENUM, NULL, "the type of RNN", rnn_modes, false},
    {"p", DEFT_PARAM_FLOAT, "0", "dropout rate on the outputs of each layer but the last", NULL,
     false},
    {"state_outputs", DEFT_PARAM_BOOL, "false", "whether the final states are outputs", NULL,
     false},
    {"projection_size", DEFT_PARAM_INT, "None", "size of the LSTM projection (not implemented)",
     NULL, true},
    {"lstm_state_clip_min", DEFT_PARAM_FLOAT, "None", "minimum of the LSTM cell state", NULL, true},
    {"lstm_state_clip_max", DEFT_PARAM_FLOAT, "None", "maximum of the LSTM cell state", NULL, true},
    {"lstm_state_clip_nan", DEFT_PARAM_BOOL, "false",
     "clip NaN cell states to the minimum instead of propagating them", NULL, false},
    {"use_sequence_length", DEFT_PARAM_BOOL, "false",
     "take a sequence_length input: the valid steps of each batch element", NULL, false},
    {0}};

enum {
    P_STATE_SIZE,
    P_NUM_LAYERS,
    P_BIDIRECTIONAL,
    P_MODE,
    P_P,
    P_STATE_OUTPUTS,
    P_PROJECTION,
    P_CLIP_MIN,
    P_CLIP_MAX,
    P_CLIP_NAN,
    P_USE_LENGTHS
};

static const char *const rnn_outputs[] = {"output", "state_output", "statecell_output", NULL};
static const char *const rnn_inputs[] = {"data",       "parameters",      "state",
                                         "state_cell", "sequence_length", NULL};

/* ---- geometry (rnn.h) ---- */

void deft_rnn_geom(const deft_param_value_t *p, const deft_shape_t *data, deft_rnn_geom_t *g) {
    memset(g, 0, sizeof *g);
    g->mode = (int)p[P_MODE].i;
    g->T = data->dims[0], g->N = data->dims[1], g->In = data->dims[2];
    g->H = p[P_STATE_SIZE].i, g->L = p[P_NUM_LAYERS].i, g->D = p[P_BIDIRECTIONAL].i ? 2 : 1;
    g->G = deft_rnn_gates(g->mode);
    g->p = p[P_P].f;
    g->state_outputs = p[P_STATE_OUTPUTS].i;
    g->lengths = p[P_USE_LENGTHS].i;
    g->clip = !p[P_CLIP_MIN].none;
    g->clip_nan = p[P_CLIP_NAN].i;
    g->clip_min = p[P_CLIP_MIN].f, g->clip_max = p[P_CLIP_MAX].f;
}

void deft_rnn_io(const deft_param_value_t *p, deft_rnn_io_t *io) {
    bool lstm = p[P_MODE].i == DEFT_RNN_LSTM;
    io->state_cell = lstm ? 3 : -1;
    io->lengths = p[P_USE_LENGTHS].i ? (lstm ? 4 : 3) : -1;
    io->hy = p[P_STATE_OUTPUTS].i ? 1 : -1;
    io->cy = p[P_STATE_OUTPUTS].i && lstm ? 2 : -1;
    io->reserve = 1 + (io->hy > 0) + (io->cy > 0);
}

/* Weights of layer-direction ld: W_i2h (G H x in) and W_h2h (G H x H). */
static int64_t w_size(const deft_rnn_geom_t *g, int64_t ld) {
    int64_t in = ld < g->D ? g->In : g->D * g->H;
    return g->G * g->H * (in + g->H);
}

int64_t deft_rnn_w_offset(const deft_rnn_geom_t *g, int64_t ld) {
    int64_t at = 0;
    for (int64_t k = 0; k < ld; k++) at += w_size(g, k);
    return at;
}

int64_t deft_rnn_b_offset(const deft_rnn_geom_t *g, int64_t ld) {
    return deft_rnn_w_offset(g, g->L * g->D) + ld * 2 * g->G * g->H;
}

int64_t deft_rnn_param_size(const deft_rnn_geom_t *g) {
    return deft_rnn_b_offset(g, g->L * g->D);
}

void deft_rnn_slots(const deft_rnn_geom_t *g, int64_t l, int64_t d, deft_rnn_slots_t *s) {
    int64_t tnh = g->T * g->N * g->H, gate_slots = g->mode >= DEFT_RNN_LSTM ? 4 * tnh : 0;
    int64_t cell = g->mode == DEFT_RNN_LSTM ? tnh : 0;
    int64_t per_ld = gate_slots + tnh + cell, ld = l * g->D + d;
    int64_t layer = g->D * tnh * (g->p > 0 ? 3 : 1), layers = g->L * g->D * per_ld;
    s->gates = gate_slots ? ld * per_ld : -1;
    s->h = ld * per_ld + gate_slots;
    s->c = cell ? s->h + tnh : -1;
    s->y = layers + l * layer;
    s->mask = g->p > 0 ? s->y + g->D * tnh : -1;
    s->drop = g->p > 0 ? s->y + 2 * g->D * tnh : -1;
    s->xproj = layers + (g->L - 1) * layer;
    s->hproj = s->xproj + g->T * g->N * g->G * g->H;
    s->kept = s->hproj + g->N * g->G * g->H;
}

int64_t deft_rnn_reserve_size(const deft_rnn_geom_t *g) {
    deft_rnn_slots_t s;
    deft_rnn_slots(g, 0, 0, &s);
    return s.kept + 1;
}

/* ---- inference ---- */

static int rnn_num_inputs(const deft_param_value_t *p) {
    return 3 + (p[P_MODE].i == DEFT_RNN_LSTM) + (int)p[P_USE_LENGTHS].i;
}

static int rnn_num_visible(const deft_param_value_t *p) {
    if (!p[P_STATE_OUTPUTS].i) return 1;
    return p[P_MODE].i == DEFT_RNN_LSTM ? 3 : 2;
}

static int rnn_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return rnn_num_visible(p) + 1;
}

/* The parameters on their own. */
static int check_params(const deft_op_t *op, const deft_param_value_t *p) {
    if (p[P_STATE_SIZE].i < 1 || p[P_STATE_SIZE].i > INT32_MAX)
        return deft_op_error(op, DEFT_ERR_VALUE, "state_size is %lld, expected >= 1",
                             (long long)p[P_STATE_SIZE].i);
    if (p[P_NUM_LAYERS].i < 1 || p[P_NUM_LAYERS].i > 1024)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_layers is %lld, expected 1 to 1024",
                             (long long)p[P_NUM_LAYERS].i);
    if (!(p[P_P].f >= 0 && p[P_P].f < 1))
        return deft_op_error(op, DEFT_ERR_VALUE, "p is %g, expected a dropout rate in [0, 1)",
                             p[P_P].f);
    bool lstm = p[P_MODE].i == DEFT_RNN_LSTM;
    if (!p[P_PROJECTION].none)
        return deft_op_error(op, DEFT_ERR_NOT_IMPLEMENTED,
                             lstm ? "projection_size (LSTM with projection) is not implemented"
                                  : "projection_size: projection is only supported for LSTM");
    if (p[P_CLIP_MIN].none && p[P_CLIP_MAX].none) return 0;
    if (!lstm)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "lstm_state_clip_min/max: state clipping is only supported for LSTM");
    if (p[P_CLIP_MIN].none || p[P_CLIP_MAX].none)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "lstm_state_clip_min and lstm_state_clip_max must be given together");
    if (!(p[P_CLIP_MAX].f >= p[P_CLIP_MIN].f))
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "lstm_state_clip_max (%g) must be greater than or equal to "
                             "lstm_state_clip_min (%g)",
                             p[P_CLIP_MAX].f, p[P_CLIP_MIN].f);
    return 0;
}

/* The name of input k (without state_cell, sequence_length comes third). */
static const char *input_name(const deft_rnn_io_t *io, int k) {
    return k == io->lengths ? "sequence_length" : rnn_inputs[k];
}

/* Input k has exactly `want`'s shape. */
static int check_shape(const deft_op_t *op, const deft_rnn_io_t *io, const deft_desc_t *in, int k,
                       const deft_shape_t *want) {
    if (deft_shape_equal(&in[k].shape, want)) return 0;
    char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
    return deft_op_error(op, DEFT_ERR_VALUE, "input %d (%s) has shape %s, expected %s", k,
                         input_name(io, k), deft_shape_format(&in[k].shape, a, sizeof a),
                         deft_shape_format(want, b, sizeof b));
}

/* The shapes every input must have, from the parameters and the data's shape. */
static void expected_inputs(const deft_param_value_t *p, const deft_shape_t *data,
                            deft_shape_t *want) {
    deft_rnn_geom_t g;
    deft_rnn_geom(p, data, &g);
    deft_rnn_io_t io;
    deft_rnn_io(p, &io);
    want[0] = *data;
    want[1] = (deft_shape_t){1, {deft_rnn_param_size(&g)}};
    want[2] = (deft_shape_t){3, {g.L * g.D, g.N, g.H}};
    if (io.state_cell >= 0) want[io.state_cell] = want[2];
    if (io.lengths >= 0) want[io.lengths] = (deft_shape_t){1, {g.N}};
}

static int rnn_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                     const deft_desc_t *in, int *nout, deft_desc_t *out) {
    if (check_params(op, p)) return -1;
    if (nin != rnn_num_inputs(p))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d", nin,
                             rnn_num_inputs(p));
    char s[DEFT_SHAPE_STR_MAX];
    if (in[0].shape.ndim != 3)
        return deft_op_error(op, DEFT_ERR_VALUE,
                             "input 0 (data) has shape %s, expected (sequence length, batch "
                             "size, input size)",
                             deft_shape_format(&in[0].shape, s, sizeof s));
    if (deft_op_check_dtype_float(op, 0, in[0].dtype)) return -1;
    deft_rnn_io_t io;
    deft_rnn_io(p, &io);
    deft_shape_t want[5];
    expected_inputs(p, &in[0].shape, want);
    for (int k = 1; k < nin; k++) {
        if (k == io.lengths) {
            if (deft_op_check_index_dtype(op, k, in[k].dtype)) return -1;
        } else if (in[k].dtype != in[0].dtype) {
            return deft_op_error(op, DEFT_ERR_TYPE, "input %d (%s) is %s, expected %s like data", k,
                                 input_name(&io, k), deft_dtype_name(in[k].dtype),
                                 deft_dtype_name(in[0].dtype));
        }
        if (check_shape(op, &io, in, k, &want[k])) return -1;
    }
    deft_rnn_geom_t g;
    deft_rnn_geom(p, &in[0].shape, &g);
    for (int k = 0; k < io.reserve; k++) out[k].dtype = in[0].dtype;
    out[0].shape = (deft_shape_t){3, {g.T, g.N, g.D * g.H}};
    if (io.hy > 0) out[io.hy].shape = want[2];
    if (io.cy > 0) out[io.cy].shape = want[2];
    out[io.reserve] = (deft_desc_t){{1, {deft_rnn_reserve_size(&g)}}, in[0].dtype};
    *nout = io.reserve + 1;
    return 0;
}

/* parameters, state and state_cell follow from the data's shape; sequence_length's shape too. */
static int rnn_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            deft_desc_t *in, bool *known, const deft_desc_t *out,
                            const bool *out_known) {
    (void)out, (void)out_known;
    if (!known[0] || in[0].shape.ndim != 3 || check_params(op, p) || nin != rnn_num_inputs(p))
        return 0;
    deft_shape_t want[5];
    expected_inputs(p, &in[0].shape, want);
    for (int k = 1; k < nin; k++) {
        if (known[k]) continue;
        in[k] = (deft_desc_t){want[k], in[0].dtype}; /* MXNet's rule, sequence_length too */
        known[k] = true;
    }
    return 0;
}

/* ---- forward ---- */

/* Element `elems` of an array (NULL for an empty one, which nothing reads). */
static char *at(const void *base, int64_t elems, size_t elem) {
    return base ? (char *)base + (size_t)elems * elem : NULL;
}

void deft_rnn_step_at(const deft_rnn_run_t *r, int64_t l, int64_t d, int64_t i, char *y,
                      deft_rnn_step_t *s) {
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, GH = g->G * g->H, NH = g->N * g->H;
    int64_t t = d ? g->T - 1 - i : i, prev = d ? t + 1 : t - 1;
    size_t es = r->elem;
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, l, d, &slot);
    const char *bx = at(r->w, deft_rnn_b_offset(g, ld), es), *hs = at(r->rs, slot.h, es);
    const char *cs = slot.c >= 0 ? at(r->rs, slot.c, es) : NULL;
    *s = (deft_rnn_step_t){.mode = g->mode,
                           .N = g->N,
                           .H = g->H,
                           .t = t,
                           .xproj = at(r->rs, slot.xproj + t * g->N * GH, es),
                           .hproj = at(r->rs, slot.hproj, es),
                           .bx = bx,
                           .bh = at(bx, GH, es),
                           .h_prev = i ? at(hs, prev * NH, es) : at(r->hx, ld * NH, es),
                           .c_prev =
                               cs ? (i ? at(cs, prev * NH, es) : at(r->cx, ld * NH, es)) : NULL,
                           .h = at(hs, t * NH, es),
                           .c = cs ? at(cs, t * NH, es) : NULL,
                           .gates = slot.gates >= 0 ? at(r->rs, slot.gates + t * 4 * NH, es) : NULL,
                           .y = at(y, t * g->N * g->D * g->H + d * g->H, es),
                           .y_stride = g->D * g->H,
                           .lengths = r->lengths,
                           .length_dtype = r->length_dtype,
                           .clip = g->clip,
                           .clip_nan = g->clip_nan,
                           .clip_min = g->clip_min,
                           .clip_max = g->clip_max};
}

#ifdef DEFT_HAVE_CUDA
/* The GPU's steps: a GEMM for the hidden projection, then the step kernel. */
static int gpu_steps(const deft_rnn_run_t *r, int64_t l, int64_t d, char *y) {
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, in = l ? g->D * g->H : g->In, GH = g->G * g->H;
    const char *w_h2h = at(r->w, deft_rnn_w_offset(g, ld) + GH * in, r->elem);
    for (int64_t i = 0; i < g->T; i++) {
        deft_rnn_step_t s;
        deft_rnn_step_at(r, l, d, i, y, &s);
        if (deft_gemm(r->dev, r->dtype, false, true, g->N, GH, g->H, s.h_prev, w_h2h, 0.0,
                      (void *)s.hproj) ||
            deft_gpu_rnn_step(r->dev.id, &s, r->dtype))
            return -1;
    }
    return 0;
}
#endif

static int copy_state(const deft_rnn_run_t *r, char *dst, const char *src) {
    size_t bytes = (size_t)(r->g->N * r->g->H) * r->elem;
    return bytes ? deft_device_copy(dst, r->dev, src, r->dev, bytes) : 0;
}

/* Layer l, direction d over every time step: x (T N x in) in, column block d of y (T N x D H) out.
 * One GEMM projects every step's input, then the device runs the steps. */
static int run_direction(const deft_rnn_run_t *r, int64_t l, int64_t d, const char *x, char *y) {
    const deft_rnn_geom_t *g = r->g;
    int64_t ld = l * g->D + d, in = l ? g->D * g->H : g->In, GH = g->G * g->H, NH = g->N * g->H;
    size_t es = r->elem;
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, l, d, &slot);
    const char *w_i2h = at(r->w, deft_rnn_w_offset(g, ld), es);
    char *hs = at(r->rs, slot.h, es), *cs = slot.c >= 0 ? at(r->rs, slot.c, es) : NULL;
    if (deft_gemm(r->dev, r->dtype, false, true, g->T * g->N, GH, in, x, w_i2h, 0.0,
                  at(r->rs, slot.xproj, es)))
        return -1;
#ifdef DEFT_HAVE_CUDA
    if (r->dev.type == DEFT_DEV_GPU) {
        if (gpu_steps(r, l, d, y)) return -1;
    } else
#endif
        deft_rnn_steps_cpu(r, l, d, y);
    /* the final state: after the last step, or the initial one when there are no steps */
    int64_t last = d ? 0 : g->T - 1;
    if (r->hy && copy_state(r, at(r->hy, ld * NH, es),
                            g->T ? at(hs, last * NH, es) : at(r->hx, ld * NH, es)))
        return -1;
    if (r->cy && copy_state(r, at(r->cy, ld * NH, es),
                            g->T ? at(cs, last * NH, es) : at(r->cx, ld * NH, es)))
        return -1;
    return 0;
}

/* A piece of the reserve as a 1-d tensor (for the GPU's elementwise kernels). */
static deft_tensor_t reserve_piece(const deft_rnn_run_t *r, int64_t slot, int64_t n) {
    deft_tensor_t t = *r->reserve;
    t.offset += (size_t)slot * r->elem;
    t.shape = (deft_shape_t){1, {n}};
    return t;
}

/* The next layer's input: layer l's output times a dropout mask, drawn in training mode
 * (ones in predict mode, so backward reads one mask either way). */
static int run_dropout(const deft_rnn_run_t *r, int64_t l) {
    const deft_rnn_geom_t *g = r->g;
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, l, 0, &slot);
    int64_t n = g->T * g->N * g->D * g->H;
    bool drawing = r->drawing;
    if (r->dev.type == DEFT_DEV_CPU) {
        deft_rnn_dropout_cpu(r->dtype, at(r->rs, slot.y, r->elem), at(r->rs, slot.mask, r->elem),
                             at(r->rs, slot.drop, r->elem), n, 1 - g->p, drawing);
        return 0;
    }
#ifdef DEFT_HAVE_CUDA
    deft_tensor_t y = reserve_piece(r, slot.y, n), mask = reserve_piece(r, slot.mask, n);
    deft_tensor_t drop = reserve_piece(r, slot.drop, n);
    if (drawing) {
        uint64_t seed, first = deft_random_reserve(((uint64_t)n + 3) / 4, &seed);
        if (deft_gpu_dropout_mask(r->dev.id, deft_tensor_data(&mask), r->dtype, n, seed, first,
                                  1 - g->p))
            return -1;
    } else {
        const double one[DEFT_GPU_MAX_OPS] = {[1] = 1.0};
        if (deft_gpu_elementwise(DEFT_GPU_FN_FILL, &mask, 0, NULL, one)) return -1;
    }
    const deft_tensor_t *operands[2] = {&y, &mask};
    return deft_gpu_elementwise(DEFT_GPU_FN_mul, &drop, 2, operands, NULL);
#else
    (void)reserve_piece;
    return -1;
#endif
}

/* sequence_length: whole numbers in [0, T]. */
static int check_lengths(const deft_op_t *op, const deft_rnn_geom_t *g, const deft_rnn_io_t *io,
                         const deft_tensor_t *in) {
    if (io->lengths < 0) return 0;
    deft_index_check_t check;
    deft_index_check_init(&check, &in[io->lengths], 0, g->T);
    return deft_check_indices(op, io->lengths, &in[io->lengths], &check);
}

static int rnn_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_rnn_geom_t g;
    deft_rnn_geom(p, &in[0].shape, &g);
    deft_rnn_io_t io;
    deft_rnn_io(p, &io);
    if (check_lengths(op, &g, &io, in)) return -1;
    deft_rnn_run_t r = {.g = &g,
                        .dev = in[0].device,
                        .dtype = in[0].dtype,
                        .elem = deft_dtype_size(in[0].dtype),
                        .x = deft_tensor_data(&in[0]),
                        .w = deft_tensor_data(&in[1]),
                        .hx = deft_tensor_data(&in[2]),
                        .cx = io.state_cell >= 0 ? deft_tensor_data(&in[io.state_cell]) : NULL,
                        .lengths = io.lengths >= 0 ? deft_tensor_data(&in[io.lengths]) : NULL,
                        .length_dtype = io.lengths >= 0 ? in[io.lengths].dtype : DEFT_DT_INT32,
                        .y = deft_tensor_data(&out[0]),
                        .hy = io.hy > 0 ? deft_tensor_data(&out[io.hy]) : NULL,
                        .cy = io.cy > 0 ? deft_tensor_data(&out[io.cy]) : NULL,
                        .rs = deft_tensor_data(&out[io.reserve]),
                        .reserve = &out[io.reserve],
                        /* a predict-mode forward on the CPU leaves the LSTM's gates out (backward
                         * runs it again if it must); the GPU's and the other modes keep them */
                        .keep = deft_op_training() || in[0].device.type == DEFT_DEV_GPU ||
                                g.mode != DEFT_RNN_LSTM,
                        .drawing = deft_op_training()};
    return deft_rnn_run(&r);
}

int deft_rnn_run(const deft_rnn_run_t *r) {
    const deft_rnn_geom_t *g = r->g;
    const char *x = r->x;
    for (int64_t l = 0; l < g->L; l++) {
        deft_rnn_slots_t slot;
        deft_rnn_slots(g, l, 0, &slot);
        char *y = l == g->L - 1 ? r->y : at(r->rs, slot.y, r->elem);
        for (int64_t d = 0; d < g->D; d++)
            if (run_direction(r, l, d, x, y)) return -1;
        if (l == g->L - 1) break;
        if (g->p > 0 && run_dropout(r, l)) return -1;
        x = g->p > 0 ? at(r->rs, slot.drop, r->elem) : y;
    }
    /* the reserve's last element says whether the gates are there for backward */
    deft_rnn_slots_t slot;
    deft_rnn_slots(g, 0, 0, &slot);
    double flag = r->keep ? 1.0 : 0.0;
    char value[8];
    deft_store_double(value, r->dtype, 0, flag);
    return deft_device_copy(at(r->rs, slot.kept, r->elem), r->dev, value, deft_device_cpu(),
                            r->elem);
}

/* ---- gradient ---- */

static int backward_num_inputs(const deft_param_value_t *p) {
    return rnn_num_inputs(p) + 1 + rnn_num_visible(p); /* + reserve and head gradients */
}

static int backward_num_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)num_inputs;
    return p[P_MODE].i == DEFT_RNN_LSTM ? 4 : 3;
}

/* _backward_RNN(inputs of RNN..., reserve, d out, [d hy, [d cy]]) -> d data, d parameters,
 * d state, [d state_cell]. sequence_length has no gradient. */
static int rnn_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                        deft_gref_t *in_grads) {
    deft_rnn_io_t io;
    deft_rnn_io(p, &io);
    deft_gref_t args[10];
    int n = 0;
    for (int k = 0; k < nin; k++) args[n++] = b->input(b, k);
    args[n++] = b->output(b, io.reserve);
    for (int k = 0; k < io.reserve; k++) args[n++] = b->out_grad(b, k);
    const char *params[2 * DEFT_OP_MAX_PARAMS + 1];
    deft_gref_t r =
        b->apply(b, "_backward_RNN", n, args, g_forward_params(b, rnn_params, params), 0);
    int grads = backward_num_outputs(p, nin);
    for (int k = 0; k < grads; k++) in_grads[k] = (deft_gref_t){r.node, k};
    return 0;
}

static int backward_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                          const deft_desc_t *in, int *nout, deft_desc_t *out) {
    int nfwd = rnn_num_inputs(p);
    if (nin != backward_num_inputs(p))
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d inputs, expected %d", nin,
                             backward_num_inputs(p));
    deft_desc_t fwd[4];
    int nf;
    if (rnn_infer(op, p, nfwd, in, &nf, fwd)) return -1;
    for (int k = nfwd; k < nin; k++) {
        const deft_desc_t *want = &fwd[k == nfwd ? nf - 1 : k - nfwd - 1];
        if (!deft_shape_equal(&in[k].shape, &want->shape) || in[k].dtype != want->dtype) {
            char a[DEFT_SHAPE_STR_MAX], w[DEFT_SHAPE_STR_MAX];
            return deft_op_error(
                op, DEFT_ERR_VALUE, "input %d is %s %s, expected %s %s", k,
                deft_dtype_name(in[k].dtype), deft_shape_format(&in[k].shape, a, sizeof a),
                deft_dtype_name(want->dtype), deft_shape_format(&want->shape, w, sizeof w));
        }
    }
    *nout = backward_num_outputs(p, nin);
    for (int k = 0; k < *nout; k++) out[k] = in[k];
    return 0;
}

static int backward_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                            const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)nin, (void)nout;
    deft_rnn_geom_t g;
    deft_rnn_geom(p, &in[0].shape, &g);
    deft_rnn_io_t io;
    deft_rnn_io(p, &io);
    int heads = rnn_num_inputs(p) + 1;
    deft_rnn_backward_t b = {
        .g = &g,
        .dev = in[0].device,
        .dtype = in[0].dtype,
        .x = deft_tensor_data(&in[0]),
        .w = deft_tensor_data(&in[1]),
        .hx = deft_tensor_data(&in[2]),
        .cx = io.state_cell >= 0 ? deft_tensor_data(&in[io.state_cell]) : NULL,
        .lengths = io.lengths >= 0 ? deft_tensor_data(&in[io.lengths]) : NULL,
        .length_dtype = io.lengths >= 0 ? in[io.lengths].dtype : DEFT_DT_INT32,
        .reserve = deft_tensor_data(&in[heads - 1]),
        .dy = deft_tensor_data(&in[heads]),
        .dhy = io.hy > 0 ? deft_tensor_data(&in[heads + io.hy]) : NULL,
        .dcy = io.cy > 0 ? deft_tensor_data(&in[heads + io.cy]) : NULL,
        .dx = deft_tensor_data(&out[0]),
        .dw = deft_tensor_data(&out[1]),
        .dhx = deft_tensor_data(&out[2]),
        .dcx = io.state_cell >= 0 ? deft_tensor_data(&out[3]) : NULL,
    };
    return deft_rnn_backward(op, &b);
}

/* ---- _rnn_param_concat ---- */

static const deft_op_t *concat_op(void) {
    return deft_registry_find("Concat")->op;
}

/* Concat's parameters, in Concat's order, so its kernels read them as theirs. */
static const deft_param_def_t param_concat_params[] = {
    {"dim", DEFT_PARAM_INT, "1", "axis to join along", NULL, false}, DEFT_NUM_ARGS_PARAM, {0}};

static int param_concat_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                              const deft_desc_t *in, int *nout, deft_desc_t *out) {
    return concat_op()->infer(op, p, nin, in, nout, out);
}

static int param_concat_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    const deft_op_t *concat = concat_op();
#ifdef DEFT_HAVE_CUDA
    if (out[0].device.type == DEFT_DEV_GPU) return concat->forward_gpu(op, p, nin, in, nout, out);
#endif
    return concat->forward(op, p, nin, in, nout, out);
}

/* What sets this Concat apart: inputs of unknown shape (one or two, Gluon's
 * deferred weights) take the output's along the axis the known ones leave. */
static int param_concat_infer_inputs(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                     deft_desc_t *in, bool *known, const deft_desc_t *out,
                                     const bool *out_known) {
    (void)op;
    if (!out_known[0]) return 0;
    int axis, unknown = 0;
    if (deft_op_axis(op, "dim", p[0].i, out[0].shape.ndim, &axis)) return -1;
    int64_t rest = out[0].shape.dims[axis];
    for (int i = 0; i < nin; i++) {
        if (!known[i]) {
            unknown++;
        } else if (in[i].shape.ndim == out[0].shape.ndim) {
            rest -= in[i].shape.dims[axis];
        }
    }
    if (unknown == 0 || unknown > 2 || rest < 0) return 0;
    for (int i = 0; i < nin; i++) {
        if (known[i]) continue;
        in[i] = out[0];
        in[i].shape.dims[axis] = rest / unknown;
        known[i] = true;
    }
    return 0;
}

static int param_concat_gradient(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                                 deft_gref_t *in_grads) {
    return concat_op()->gradient(b, p, nin, in_grads);
}

static const char *const variadic_input[] = {"data", NULL};

static const deft_op_t rnn_ops[] = {
    {.name = "RNN",
     .description =
         "Recurrent layers (rnn_relu, rnn_tanh, lstm, gru), stacked and optionally "
         "bidirectional, over data (T, N, I) with one flat parameter vector (MXNet's layout); "
         "outputs (T, N, D H) and, with state_outputs, the final states.",
     .input_names = rnn_inputs,
     .min_inputs = 3,
     .max_inputs = 5,
     .params = rnn_params,
     .infer = rnn_infer,
     .forward = rnn_forward,
     .forward_gpu = DEFT_GPU(rnn_forward),
     .inplace_input = -1,
     .num_inputs = rnn_num_inputs,
     .num_outputs = rnn_num_outputs,
     .num_visible_outputs = rnn_num_visible,
     .output_names = rnn_outputs,
     .infer_inputs = rnn_infer_inputs,
     .nondeterministic = true,
     .gradient = rnn_gradient},
    {.name = "_backward_RNN",
     .description = "Gradient of RNN from its reserve: d data, d parameters, d state and "
                    "(LSTM) d state_cell.",
     .input_names = rnn_inputs,
     .min_inputs = 5,
     .max_inputs = 10,
     .params = rnn_params,
     .infer = backward_infer,
     .forward = backward_forward,
     .forward_gpu = DEFT_GPU(backward_forward),
     .inplace_input = -1,
     .num_inputs = backward_num_inputs,
     .num_outputs = backward_num_outputs},
    {.name = "_rnn_param_concat",
     .description = "Concat whose inference also fills one or two unknown input shapes from the "
                    "output's (Gluon's fused RNN layers join their weights with it).",
     .input_names = variadic_input,
     .min_inputs = 1,
     .max_inputs = DEFT_OP_MAX_INPUTS,
     .params = param_concat_params,
     .infer = param_concat_infer,
     .forward = param_concat_forward,
     .forward_gpu = DEFT_GPU(param_concat_forward),
     .inplace_input = -1,
     .infer_inputs = param_concat_infer_inputs,
     .gradient = param_concat_gradient},
};

DEFT_OP_FAMILY(deft_family_rnn, rnn_ops);
