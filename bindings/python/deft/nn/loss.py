"""Losses with MXNet Gluon 1.x's semantics.

Every loss returns one value per sample: the element losses, times
`sample_weight` (broadcast against them) and the scalar `weight`, averaged
over every axis but `batch_axis` (shape (batch,)). Backward of that vector
sums it (its head gradient is ones), and `Trainer.step(batch_size)` divides
by the batch size: the mean over the batch, as in Gluon.

The losses are HybridBlocks: they run eagerly, under autograd, and
hybridized (recorded by deferred compute into one graph).
"""
import math

from .. import nd as F
from ..ndarray import invoke
from .block import HybridBlock

__all__ = ["Loss", "L1Loss", "L2Loss", "HuberLoss", "SoftmaxCrossEntropyLoss", "SoftmaxCELoss",
           "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss", "KLDivLoss", "CosineEmbeddingLoss",
           "HingeLoss", "TripletLoss", "PoissonNLLLoss", "CTCLoss"]


def _apply_weighting(loss, weight=None, sample_weight=None):
    """loss * sample_weight (broadcast) * weight (a number), as Gluon's loss.py."""
    if sample_weight is not None:
        loss = F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        if not isinstance(weight, (int, float)):
            raise TypeError(f"weight must be a number, got {type(weight).__name__}")
        loss = loss * weight
    return loss


def _max_scalar(x, value):
    return invoke("_maximum_scalar", (x,), {"scalar": value})


def _reshape_like(x, y):
    """x with y's shape (labels given as (batch,) for predictions of (batch, 1))."""
    if x.shape == y.shape:
        return x
    if x.size != y.size:
        raise ValueError(f"the label has shape {x.shape}, which does not reshape to the "
                         f"prediction's {y.shape}")
    return x.reshape(y.shape)


class Loss(HybridBlock):
    """Base of the losses: `weight` scales the loss, `batch_axis` is the samples' axis."""

    def __init__(self, weight=None, batch_axis=0):
        super().__init__()
        self._weight, self._batch_axis = weight, batch_axis

    def _per_sample(self, loss, sample_weight):
        """The weighted element losses averaged over every axis but the batch axis."""
        return self._mean_but_batch(_apply_weighting(loss, self._weight, sample_weight))

    def _mean_but_batch(self, loss):
        ndim = len(loss.shape)
        axis = self._batch_axis + ndim if self._batch_axis < 0 else self._batch_axis
        if not 0 <= axis < ndim:
            raise ValueError(f"{type(self).__name__}: batch_axis {self._batch_axis} is out of "
                             f"range for a loss of shape {loss.shape}")
        if ndim == 1:
            return loss
        return F.mean(loss, axis=axis, exclude=True)

    def __repr__(self):
        return f"{type(self).__name__}(batch_axis={self._batch_axis}, w={self._weight})"


class L2Loss(Loss):
    """0.5 * weight * (label - pred)^2 (Gluon's factor 1/2)."""

    def __init__(self, weight=1.0, batch_axis=0):
        super().__init__(weight, batch_axis)

    def forward(self, pred, label, sample_weight=None):
        loss = F.square(_reshape_like(label, pred) - pred)
        weight = 1.0 if self._weight is None else self._weight
        return self._mean_but_batch(_apply_weighting(loss, weight / 2, sample_weight))


class L1Loss(Loss):
    """|label - pred|."""

    def forward(self, pred, label, sample_weight=None):
        return self._per_sample(F.abs(_reshape_like(label, pred) - pred), sample_weight)


class HuberLoss(Loss):
    """Smooth L1: 0.5 / rho * d^2 where |d| <= rho, |d| - 0.5 * rho beyond."""

    def __init__(self, rho=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._rho = rho

    def forward(self, pred, label, sample_weight=None):
        d = F.abs(_reshape_like(label, pred) - pred)
        loss = F.where(d > self._rho, d - 0.5 * self._rho, (0.5 / self._rho) * F.square(d))
        return self._per_sample(loss, sample_weight)


class SoftmaxCrossEntropyLoss(Loss):
    """-log softmax(pred)[label] along `axis`: labels are class indices (sparse_label)
    or distributions; from_logits=True takes pred as log-probabilities already."""

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None,
                 batch_axis=0):
        super().__init__(weight, batch_axis)
        self._axis, self._sparse_label, self._from_logits = axis, sparse_label, from_logits

    def forward(self, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        # (batch, classes) unweighted: the loss of each sample is the picked value itself
        keep = not (len(pred.shape) == 2 and self._axis % 2 != self._batch_axis % 2
                    and sample_weight is None)
        if self._sparse_label:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=keep)
        else:
            loss = -F.sum(pred * _reshape_like(label, pred), axis=self._axis, keepdims=keep)
        if not keep:
            return _apply_weighting(loss, self._weight)
        return self._per_sample(loss, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of sigmoid(pred) (from_sigmoid=False, computed stably from
    the logits) or of pred itself; pos_weight scales the positive term."""

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._from_sigmoid = from_sigmoid

    def forward(self, pred, label, sample_weight=None, pos_weight=None):
        label = _reshape_like(label, pred)
        if not self._from_sigmoid:
            # log(1 + exp(-|x|)) + max(x, 0) - x * label: no overflow for large |x|
            softplus = F.softrelu(-F.abs(pred))
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + softplus
            else:
                log_weight = 1 + F.broadcast_mul(pos_weight - 1, label)
                loss = pred - pred * label + log_weight * (softplus + F.relu(-pred))
        else:
            eps = 1e-12
            positive = F.log(pred + eps) * label
            if pos_weight is not None:
                positive = F.broadcast_mul(positive, pos_weight)
            loss = -(positive + F.log(1.0 - pred + eps) * (1.0 - label))
        return self._per_sample(loss, sample_weight)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class KLDivLoss(Loss):
    """label * (log(label) - pred): pred holds log-probabilities (from_logits=True,
    Gluon's default) or scores that log_softmax along `axis` turns into them."""

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._from_logits, self._axis = from_logits, axis

    def forward(self, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        return self._per_sample(loss, sample_weight)


class HingeLoss(Loss):
    """max(0, margin - pred * label), labels -1 or 1."""

    def __init__(self, margin=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, label, sample_weight=None):
        loss = F.relu(self._margin - pred * _reshape_like(label, pred))
        return self._per_sample(loss, sample_weight)


class TripletLoss(Loss):
    """max(0, |pred - positive|^2 - |pred - negative|^2 + margin) per sample."""

    def __init__(self, margin=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, positive, negative, sample_weight=None):
        positive, negative = _reshape_like(positive, pred), _reshape_like(negative, pred)
        gap = F.square(positive - pred) - F.square(negative - pred)
        if len(gap.shape) > 1:
            gap = F.sum(gap, axis=self._batch_axis, exclude=True)
        loss = F.relu(gap + self._margin)
        return _apply_weighting(loss, self._weight, sample_weight)


class CosineEmbeddingLoss(Loss):
    """1 - cos(input1, input2) where label is 1, max(0, cos - margin) where it is -1;
    the cosine is along the last axis."""

    def __init__(self, weight=None, batch_axis=0, margin=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, input1, input2, label, sample_weight=None):
        input1 = _reshape_like(input1, input2)
        dot = F.sum(input1 * input2, axis=-1)
        norms = F.norm(input1, axis=-1) * F.norm(input2, axis=-1)
        cos = dot / _max_scalar(norms, 1e-12)
        label = _reshape_like(label, cos)
        loss = F.where(label == 1, 1 - cos, F.clip(cos - self._margin, a_min=0.0, a_max=1 - 1e-12))
        return _apply_weighting(loss, self._weight, sample_weight)


class PoissonNLLLoss(Loss):
    """exp(pred) - target * pred (from_logits, pred is the log of the rate) or
    pred - target * log(pred + epsilon); compute_full adds Stirling's term.
    Per sample (MXNet 1.x averages this loss over the whole batch instead)."""

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False):
        super().__init__(weight, batch_axis)
        self._from_logits, self._compute_full = from_logits, compute_full

    def forward(self, pred, target, sample_weight=None, epsilon=1e-08):
        target = _reshape_like(target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            # log(target!) by Stirling, where target > 1 (0 elsewhere, where it is exact)
            safe = _max_scalar(target, 1.0)
            stirling = safe * F.log(safe) - safe + 0.5 * F.log(2 * math.pi * safe)
            loss = loss + stirling * (target > 1)
        return self._per_sample(loss, sample_weight)



class CTCLoss(Loss):
    """Connectionist temporal classification loss (-log p(label | pred)) per sample.

    pred holds activations (softmax is applied inside) of layout "NTC" or
    "TNC"; label holds class indices in [0, C - 1) padded with -1, of layout
    "NT" or "TN"; the blank is class C - 1 (Gluon's). pred_lengths and
    label_lengths (N,) give each sample's lengths, or else all T steps and
    the label up to its first -1. Runs deft's CTCLoss operator (MXNet's, with
    blank_label "last"; core/op/ctc_loss.c).
    """

    def __init__(self, layout="NTC", label_layout="NT", weight=None):
        if layout not in ("NTC", "TNC"):
            raise ValueError(f"CTCLoss: layout is {layout!r}, expected 'NTC' or 'TNC'")
        if label_layout not in ("NT", "TN"):
            raise ValueError(f"CTCLoss: label_layout is {label_layout!r}, expected 'NT' or 'TN'")
        super().__init__(weight, label_layout.find("N"))
        self._layout = layout

    def forward(self, pred, label, pred_lengths=None, label_lengths=None, sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, dim1=0, dim2=1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, dim1=0, dim2=1)
        lengths = tuple(x for x in (pred_lengths, label_lengths) if x is not None)
        loss = invoke("CTCLoss", (pred, label) + lengths,
                      {"use_data_lengths": pred_lengths is not None,
                       "use_label_lengths": label_lengths is not None, "blank_label": "last"})
        return _apply_weighting(loss, self._weight, sample_weight)
