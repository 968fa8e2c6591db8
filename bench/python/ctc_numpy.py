"""The NumPy CTC that deft.nn.CTCLoss ran, as a custom operator, before
deft had a CTCLoss operator (core/op/ctc_loss.c): bench_ctc.py's reference.

Connectionist temporal classification (Graves et al. 2006): the loss of each
sample and its gradient by the forward-backward recursions in log space,
computed in NumPy, a loop over time steps per sample.

Operator _ctc_loss_numpy: data (T, N, C) activations (softmax is applied
inside), label (N, L) class indices padded with -1, data_lengths (N,) and
label_lengths (N,) where a negative length means "all T steps" and "up to
the first -1". The blank is the last class, C - 1 (Gluon's blank_label
"last"). Output: (N,) negative log-likelihoods.
"""
import numpy as np

from deft import operator as _operator
from deft.ndarray import array


OPERATOR = "_ctc_loss_numpy"


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _lse(*xs):
    """logsumexp of arrays element by element (-inf where all are -inf)."""
    top = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(x - safe) for x in xs))


def _extended(label, blank):
    ext = np.full(2 * len(label) + 1, blank, np.int64)
    ext[1::2] = label
    # s may come from s - 2 where ext[s] is a label unlike ext[s - 2]
    skip = np.zeros(len(ext), bool)
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    return ext, skip


def _alphas(lp, ext, skip):
    steps, size = lp.shape[0], len(ext)
    alpha = np.full((steps, size), -np.inf)
    alpha[0, 0] = lp[0, ext[0]]
    if size > 1:
        alpha[0, 1] = lp[0, ext[1]]
    for t in range(1, steps):
        prev = alpha[t - 1]
        one = np.concatenate(([-np.inf], prev[:-1]))
        two = np.where(skip, np.concatenate(([-np.inf, -np.inf], prev[:-2])), -np.inf)
        alpha[t] = _lse(prev, one, two) + lp[t, ext]
    return alpha


def _betas(lp, ext, skip):
    steps, size = lp.shape[0], len(ext)
    beta = np.full((steps, size), -np.inf)
    beta[-1, -1] = lp[-1, ext[-1]]
    if size > 1:
        beta[-1, -2] = lp[-1, ext[-2]]
    skip_from = np.concatenate((skip[2:], [False, False]))  # s + 2 may come from s
    for t in range(steps - 2, -1, -1):
        nxt = beta[t + 1]
        one = np.concatenate((nxt[1:], [-np.inf]))
        two = np.where(skip_from, np.concatenate((nxt[2:], [-np.inf, -np.inf])), -np.inf)
        beta[t] = _lse(nxt, one, two) + lp[t, ext]
    return beta


def _samples(data, label, data_lengths, label_lengths):
    """Per sample: its log-probabilities over its steps and its label."""
    steps, batch, classes = data.shape
    for n in range(batch):
        t_n = steps if data_lengths[n] < 0 else int(data_lengths[n])
        row = label[n].astype(np.int64)
        if label_lengths[n] >= 0:
            l_n = int(label_lengths[n])
        else:
            pad = np.nonzero(row < 0)[0]
            l_n = int(pad[0]) if len(pad) else len(row)
        if not 0 < t_n <= steps or not 0 <= l_n <= len(row):
            raise ValueError(f"CTC sample {n}: length {t_n} of {steps} steps, label length "
                             f"{l_n} of {len(row)}")
        lab = row[:l_n]
        if np.any((lab < 0) | (lab >= classes - 1)):
            raise ValueError(f"CTC sample {n}: labels must be in [0, {classes - 1}) (class "
                             f"{classes - 1} is the blank), got {lab.tolist()}")
        yield n, t_n, _log_softmax(data[:t_n, n].astype(np.float64)), lab


def ctc_forward(data, label, data_lengths, label_lengths):
    """(N,) losses of NumPy inputs."""
    blank = data.shape[2] - 1
    loss = np.zeros(data.shape[1])
    for n, _, lp, lab in _samples(data, label, data_lengths, label_lengths):
        ext, skip = _extended(lab, blank)
        alpha = _alphas(lp, ext, skip)
        loss[n] = -_lse(alpha[-1, -1], alpha[-1, -2] if len(ext) > 1 else -np.inf)
    return loss


def ctc_gradient(data, label, data_lengths, label_lengths, out_grad):
    """The gradient of sum(out_grad * loss) with respect to data (0 where infinite)."""
    blank = data.shape[2] - 1
    grad = np.zeros(data.shape)
    for n, t_n, lp, lab in _samples(data, label, data_lengths, label_lengths):
        ext, skip = _extended(lab, blank)
        alpha, beta = _alphas(lp, ext, skip), _betas(lp, ext, skip)
        log_p = _lse(alpha[-1, -1], alpha[-1, -2] if len(ext) > 1 else -np.inf)
        if not np.isfinite(log_p):
            continue  # no alignment: the loss is infinite, its gradient left 0
        occupancy = alpha + beta  # log of alpha beta, which counts lp[t, ext[s]] twice
        g = np.exp(lp)  # d(-log p)/du = softmax - (1 / (p y)) sum_s alpha beta
        for k in np.unique(ext):
            at = _lse(*[occupancy[:, s] for s in np.nonzero(ext == k)[0]])
            g[:, k] -= np.exp(at - log_p - lp[:, k])
        grad[:t_n, n] = g * out_grad[n]
    return grad


class _CTC(_operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        args = [x.asnumpy() for x in in_data]
        loss = ctc_forward(*args)
        self.assign(out_data[0], req[0], _as(loss, out_data[0]))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        args = [x.asnumpy() for x in in_data]
        grad = ctc_gradient(*args, out_grad[0].asnumpy())
        self.assign(in_grad[0], req[0], _as(grad, in_grad[0]))
        for r, g in zip(req[1:], in_grad[1:]):
            self.assign(g, r, _as(np.zeros(g.shape), g))


def _as(values, like):
    return array(values.astype(like.dtype), device=like.device)


@_operator.register(OPERATOR)
class _CTCProp(_operator.CustomOpProp):
    def list_arguments(self):
        return ["data", "label", "data_lengths", "label_lengths"]

    def infer_shape(self, in_shape):
        data, label = in_shape[0], in_shape[1]
        if len(data) != 3 or len(label) != 2 or label[0] != data[1]:
            raise ValueError(f"_ctc_loss: data {data} must be (steps, batch, classes) and label "
                             f"{label} (batch, length)")
        return in_shape, [(data[1],)], []

    def create_operator(self, ctx, shapes, dtypes):
        return _CTC()
