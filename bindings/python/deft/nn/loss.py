"""Losses."""
from ..ndarray import invoke
from .block import HybridBlock


class SoftmaxCrossEntropyLoss(HybridBlock):
    """Mean over the batch of -log softmax(pred)[label]; labels are class indices."""

    def forward(self, pred, label):
        total = invoke("softmax_cross_entropy", (pred, label))
        return total * (1.0 / pred.shape[0])
