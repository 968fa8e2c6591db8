/*
 * The RNN operator's geometry and memory layout, shared by its descriptor
 * (rnn.c: parameters, inference, the forward driver), its CPU kernels and
 * backward (rnn_cpu.c) and its GPU kernels (rnn.cu).
 *
 * Parameters are one flat vector, MXNet's layout (rnn_impl.h): first every
 * weight, per layer l and direction d (in the order l * D + d), W_i2h (G H x
 * in_l) then W_h2h (G H x H), with in_0 = I and in_l = D H after; then every
 * bias in the same order, b_i2h (G H) then b_h2h (G H).
 *
 * The reserve (the hidden last output) keeps what backward needs, per
 * layer-direction in the order l * D + d: the activated gates per time step
 * (LSTM and GRU: T N 4H), the state after each time step (T N H) and the
 * LSTM's cell (T N H); then per layer below the top one its output (T N DH)
 * and, with dropout, its mask and the next layer's input (dropped output);
 * last the forward's working space, the input projection of one
 * layer-direction and one hidden projection ((T + 1) N G H), so the forward
 * allocates nothing on either device. (The CPU adds each step's hidden
 * projection to its input projection there, but GRU's, which a gate scales.)
 * Its last element is a flag: 1 where the gates are there, 0 where a
 * predict-mode forward on the CPU left the LSTM's out (the largest piece,
 * which only backward reads; a backward after such a forward, as a symbolic
 * gradient graph run in predict mode does, runs the forward again).
 */
#ifndef DEFT_CORE_OP_RNN_H
#define DEFT_CORE_OP_RNN_H

#include "core/math/rnn_math.h"
#include "core/op/op.h"

typedef struct deft_rnn_geom {
    int mode;
    int64_t T, N, In, H, L, D, G; /* In: the input size (I is complex.h's) */
    double p;                     /* dropout between layers */
    bool state_outputs, lengths;
    bool clip, clip_nan;
    double clip_min, clip_max;
} deft_rnn_geom_t;

/* The parameter vector's size: MXNet's GetRnnParamSize without projection. */
int64_t deft_rnn_param_size(const deft_rnn_geom_t *g);
/* Offsets (elements) of layer-direction ld's weights and biases in the vector. */
int64_t deft_rnn_w_offset(const deft_rnn_geom_t *g, int64_t ld);
int64_t deft_rnn_b_offset(const deft_rnn_geom_t *g, int64_t ld);

/* Where a layer-direction's reserve pieces are (elements from the reserve's start). */
typedef struct deft_rnn_slots {
    int64_t gates, h, c;   /* per layer-direction; gates, c are -1 where the mode has none */
    int64_t y, mask, drop; /* per layer below the top; mask, drop -1 without dropout */
    int64_t xproj, hproj;  /* the working space */
    int64_t kept;          /* the flag: 1 where the gates were kept, 0 where they were not */
} deft_rnn_slots_t;

void deft_rnn_slots(const deft_rnn_geom_t *g, int64_t l, int64_t d, deft_rnn_slots_t *s);
int64_t deft_rnn_reserve_size(const deft_rnn_geom_t *g);

/* The geometry from the operator's parameters and the data's shape (T, N, I). */
void deft_rnn_geom(const deft_param_value_t *p, const deft_shape_t *data, deft_rnn_geom_t *g);

/* Where the inputs and outputs of RNN are, from its parameters. */
typedef struct deft_rnn_io {
    int state_cell, lengths; /* input index, -1 when absent */
    int hy, cy, reserve;     /* output index, -1 when absent */
} deft_rnn_io_t;
void deft_rnn_io(const deft_param_value_t *p, deft_rnn_io_t *io);

/* The forward's operands: the driver's (rnn.c), handed to the devices' kernels. */
typedef struct deft_rnn_run {
    const deft_rnn_geom_t *g;
    deft_device_t dev;
    deft_dtype_t dtype;
    size_t elem;
    const char *x, *w, *hx, *cx;
    const void *lengths;
    deft_dtype_t length_dtype;
    char *y, *hy, *cy, *rs;
    const deft_tensor_t *reserve;
    bool keep;    /* write the gates (LSTM's may be left out in predict mode) */
    bool drawing; /* draw dropout masks (training mode), else masks of ones */
} deft_rnn_run_t;

/* Every layer forward (rnn.c), on r->dev: -1 with the error set (only a GPU's fails). */
int deft_rnn_run(const deft_rnn_run_t *r);

/* Step i (time step T - 1 - i for d = 1) of layer l, direction d: where it reads and writes, y
 * the layer's output (rnn.c). */
void deft_rnn_step_at(const deft_rnn_run_t *r, int64_t l, int64_t d, int64_t i, char *y,
                      deft_rnn_step_t *s);

/* CPU kernels (rnn_cpu.c). The time steps of layer l, direction d, its input projection in the
 * reserve's xproj: column block d of y (T N x D H) and the layer-direction's reserve pieces out. */
void deft_rnn_steps_cpu(const deft_rnn_run_t *r, int64_t l, int64_t d, char *y);
/* y * mask into drop, mask drawn (keep probability keep) or all ones when !drawing. */
void deft_rnn_dropout_cpu(deft_dtype_t dtype, const void *y, void *mask, void *drop, int64_t n,
                          double keep, bool drawing);

/* What _backward_RNN reads and writes (NULL: absent head gradient, or not wanted), on dev. */
typedef struct deft_rnn_backward {
    const deft_rnn_geom_t *g;
    deft_device_t dev;
    deft_dtype_t dtype;
    const void *x, *w, *hx, *cx, *lengths, *reserve;
    deft_dtype_t length_dtype;
    const void *dy, *dhy, *dcy;
    void *dx, *dw, *dhx, *dcx;
} deft_rnn_backward_t;

/* The backward's working memory, on its device. */
typedef struct deft_rnn_back_space {
    char *dgx, *dgh; /* T N G H each: the gates' gradients (dgh is dgx but for GRU) */
    char *dh, *dc;   /* N H each: the state's gradient, carried back step by step */
    char *dlayer[2]; /* T N D H: a layer's input gradient, the output gradient of the one below */
} deft_rnn_back_space_t;

/* _backward_RNN on either device (rnn_backward.c): -1 with op's error set. */
int deft_rnn_backward(const deft_op_t *op, const deft_rnn_backward_t *b);

/* Step i (time T - 1 - i for d = 1) backwards of layer l, direction d, dy the layer output's
 * gradient (T N x D H): where it reads and writes. */
void deft_rnn_back_step_at(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w, int64_t l,
                           int64_t d, int64_t i, const char *dy, deft_rnn_back_step_t *s);

/* The CPU's backward kernels (rnn_cpu.c): every step of (l, d) backwards, the weights' W_h2h;
 * column sums of a rows x cols matrix; x *= m elementwise. */
void deft_rnn_back_steps_cpu(const deft_rnn_backward_t *b, const deft_rnn_back_space_t *w,
                             int64_t l, int64_t d, const char *dy, const void *w_h2h);
void deft_rnn_column_sums_cpu(deft_dtype_t dtype, const void *m, int64_t rows, int64_t cols,
                              void *sum);
void deft_rnn_multiply_cpu(deft_dtype_t dtype, void *x, const void *m, int64_t n);

#ifdef DEFT_HAVE_CUDA
/* rnn.cu, on GPU dev and the calling thread's stream: one step forward, one backward; column
 * sums; x *= m. */
int deft_gpu_rnn_step(int dev, const deft_rnn_step_t *s, deft_dtype_t dtype);
int deft_gpu_rnn_back_step(int dev, const deft_rnn_back_step_t *s, deft_dtype_t dtype);
int deft_gpu_rnn_column_sums(int dev, deft_dtype_t dtype, const void *m, int64_t rows, int64_t cols,
                             void *sum);
int deft_gpu_rnn_multiply(int dev, deft_dtype_t dtype, void *x, const void *m, int64_t n);
/* dropout.cu: Dropout's mask of n elements on GPU dev. */
int deft_gpu_dropout_mask(int dev, void *mask, deft_dtype_t dtype, int64_t n, uint64_t seed,
                          uint64_t first, double keep);
#endif

#endif
