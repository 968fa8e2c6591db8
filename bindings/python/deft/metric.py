"""Evaluation metrics, as MXNet 1.x's mx.metric.

    acc = deft.metric.Accuracy()
    acc.update(labels=[y], preds=[net(x)])   # NDArrays, NumPy arrays, or lists of them
    name, value = acc.get()                  # ("accuracy", 0.93)

update() takes a label and a prediction, or lists of them (one pair per
output); get() gives (name, value), value NaN before any update;
get_name_value() gives [(name, value)]; reset() starts again. Values are
computed in NumPy (reading the arrays waits for them).
"""
import math

import numpy as np

__all__ = ["EvalMetric", "Accuracy", "TopKAccuracy", "F1", "MCC", "MAE", "MSE", "RMSE",
           "CrossEntropy", "Perplexity", "PearsonCorrelation", "CompositeEvalMetric", "create"]


def _numpy(x):
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _pairs(labels, preds):
    """(label, pred) NumPy pairs from single arrays or lists of them."""
    if not isinstance(labels, (list, tuple)):
        labels = [labels]
    if not isinstance(preds, (list, tuple)):
        preds = [preds]
    if len(labels) != len(preds):
        raise ValueError(f"{len(labels)} labels and {len(preds)} predictions: expected one "
                         f"label per prediction")
    return [(_numpy(label), _numpy(pred)) for label, pred in zip(labels, preds)]


def _checked_average(average):
    if average not in ("macro", "micro"):
        raise ValueError(f"average is {average!r}, expected 'macro' or 'micro'")
    return average


class EvalMetric:
    """The base: a running sum and count; get() is their ratio."""

    def __init__(self, name, output_names=None, label_names=None):
        self.name, self.output_names, self.label_names = str(name), output_names, label_names
        self.reset()

    def reset(self):
        self.num_inst, self.sum_metric = 0, 0.0

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            self._update_one(label, pred)

    def _update_one(self, label, pred):
        raise NotImplementedError(f"{type(self).__name__} must define update")

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, float(self.sum_metric / self.num_inst)

    def get_name_value(self):
        name, value = self.get()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))

    def __str__(self):
        return f"EvalMetric: {dict(self.get_name_value())}"


class Accuracy(EvalMetric):
    """The fraction of predictions equal to the labels; predictions of another
    shape than the labels are scores, their argmax along `axis` the class."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        self.axis = axis
        super().__init__(name, output_names, label_names)

    def _update_one(self, label, pred):
        if pred.shape != label.shape:
            pred = pred.argmax(axis=self.axis)
        pred, label = pred.astype(np.int64).ravel(), label.astype(np.int64).ravel()
        if pred.shape != label.shape:
            raise ValueError(f"Accuracy: {label.size} labels for {pred.size} predictions")
        self.sum_metric += int((pred == label).sum())
        self.num_inst += label.size


class TopKAccuracy(EvalMetric):
    """The fraction of samples whose label is among the top_k scores."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        if top_k < 1:
            raise ValueError(f"TopKAccuracy: top_k is {top_k}, expected 1 or more")
        self.top_k = top_k
        super().__init__(f"{name}_{top_k}", output_names, label_names)

    def _update_one(self, label, pred):
        if pred.ndim != 2:
            raise ValueError(f"TopKAccuracy: predictions of shape {pred.shape}, expected "
                             f"(samples, classes)")
        label = label.astype(np.int64).ravel()
        k = min(self.top_k, pred.shape[1])
        top = np.argpartition(pred, -k, axis=1)[:, -k:]
        self.sum_metric += int((top == label[:, None]).any(axis=1).sum())
        self.num_inst += label.size


class _Binary(EvalMetric):
    """Counts of a binary classification: predictions are (samples, 2) scores
    (the class is their argmax) or (samples,) classes; labels are 0 or 1.
    average "macro" averages the value of each update, "micro" takes the
    value of all the counts together."""

    def __init__(self, name, average="macro", output_names=None, label_names=None):
        self.average = _checked_average(average)
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self.counts = np.zeros(4, np.int64)  # tp, fp, fn, tn over what the value covers

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            pred = pred.argmax(axis=1) if pred.ndim == 2 else pred
            pred, label = pred.astype(np.int64).ravel(), label.astype(np.int64).ravel()
            if np.any((label != 0) & (label != 1)) or np.any((pred != 0) & (pred != 1)):
                raise ValueError(f"{type(self).__name__} is binary: labels and predicted "
                                 f"classes must be 0 or 1")
            self.counts += [np.sum((pred == 1) & (label == 1)), np.sum((pred == 1) & (label == 0)),
                            np.sum((pred == 0) & (label == 1)), np.sum((pred == 0) & (label == 0))]
        value = self._value(*(float(c) for c in self.counts))
        if self.average == "macro":
            self.sum_metric += value
            self.num_inst += 1
            self.counts[:] = 0
        else:
            self.num_inst = int(self.counts.sum())
            self.sum_metric = value * self.num_inst


class F1(_Binary):
    """The F1 score, 2 precision recall / (precision + recall), of class 1."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        super().__init__(name, average, output_names, label_names)

    @staticmethod
    def _value(tp, fp, fn, tn):
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


class MCC(_Binary):
    """Matthews' correlation coefficient (tp tn - fp fn) / sqrt(the product of the
    four margins, those that are not 0)."""

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        super().__init__(name, average, output_names, label_names)

    @staticmethod
    def _value(tp, fp, fn, tn):
        denominator = 1.0
        for margin in (tp + fp, tp + fn, tn + fp, tn + fn):
            if margin != 0:
                denominator *= margin
        return (tp * tn - fp * fn) / math.sqrt(denominator)


class _Regression(EvalMetric):
    """The mean of an error over each update's elements, averaged over updates
    (MXNet's); labels and predictions of (n,) are taken as (n, 1)."""

    def _update_one(self, label, pred):
        label = label.reshape(label.shape[0], 1) if label.ndim == 1 else label
        pred = pred.reshape(pred.shape[0], 1) if pred.ndim == 1 else pred
        if label.shape != pred.shape:
            raise ValueError(f"{type(self).__name__}: labels of shape {label.shape}, "
                             f"predictions of {pred.shape}")
        self.sum_metric += self._error(label.astype(np.float64) - pred.astype(np.float64))
        self.num_inst += 1


class MAE(_Regression):
    """Mean absolute error."""

    def __init__(self, name="mae", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(diff):
        return float(np.abs(diff).mean())


class MSE(_Regression):
    """Mean squared error."""

    def __init__(self, name="mse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(diff):
        return float((diff ** 2).mean())


class RMSE(_Regression):
    """Root of the mean squared error (of each update, averaged)."""

    def __init__(self, name="rmse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(diff):
        return float(np.sqrt((diff ** 2).mean()))


def _picked(label, pred):
    """pred[i, label[i]] for (samples, classes) probabilities and class labels."""
    label = label.astype(np.int64).ravel()
    pred = pred.reshape(-1, pred.shape[-1])
    if label.size != pred.shape[0]:
        raise ValueError(f"{label.size} labels for {pred.shape[0]} predictions")
    if label.size and (label.min() < 0 or label.max() >= pred.shape[1]):
        raise ValueError(f"a label is outside the {pred.shape[1]} classes")
    return label, pred[np.arange(label.size), label]


class CrossEntropy(EvalMetric):
    """Mean of -log(probability of the label); predictions are probabilities."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        self.eps = eps
        super().__init__(name, output_names, label_names)

    def _update_one(self, label, pred):
        label, prob = _picked(label, pred)
        self.sum_metric += float((-np.log(prob.astype(np.float64) + self.eps)).sum())
        self.num_inst += label.size


class Perplexity(EvalMetric):
    """exp of the mean of -log(probability of the label), labels equal to
    ignore_label left out."""

    def __init__(self, ignore_label=None, axis=-1, name="perplexity", output_names=None,
                 label_names=None):
        self.ignore_label, self.axis = ignore_label, axis
        super().__init__(name, output_names, label_names)

    def _update_one(self, label, pred):
        pred = np.moveaxis(pred, self.axis, -1)
        label, prob = _picked(label, pred)
        keep = np.ones(label.size, bool) if self.ignore_label is None else (
            label != self.ignore_label)
        self.sum_metric += float(-np.log(np.maximum(1e-10, prob[keep].astype(np.float64))).sum())
        self.num_inst += int(keep.sum())

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.sum_metric / self.num_inst)


class PearsonCorrelation(EvalMetric):
    """Pearson's correlation of predictions and labels: of each update, averaged
    (average "macro"), or of all the elements seen ("micro")."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        self.average = _checked_average(average)
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self._sums = np.zeros(6)  # n, sum x, sum y, sum xx, sum yy, sum xy

    def _update_one(self, label, pred):
        y, x = label.astype(np.float64).ravel(), pred.astype(np.float64).ravel()
        if x.shape != y.shape:
            raise ValueError(f"PearsonCorrelation: {y.size} labels for {x.size} predictions")
        if self.average == "macro":
            self.sum_metric += float(np.corrcoef(x, y)[0, 1])
            self.num_inst += 1
            return
        self._sums += [x.size, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum()]
        n, sx, sy, sxx, syy, sxy = self._sums
        cov, vx, vy = sxy - sx * sy / n, sxx - sx * sx / n, syy - sy * sy / n
        self.num_inst = 1
        self.sum_metric = cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else float("nan")


class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; get() gives their names and values as lists."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names, label_names)

    def add(self, metric):
        self.metrics.append(create(metric))

    def get_metric(self, index):
        if not 0 <= index < len(self.metrics):
            raise IndexError(f"metric index {index} is out of range: there are "
                             f"{len(self.metrics)}")
        return self.metrics[index]

    def reset(self):
        for m in getattr(self, "metrics", []):
            m.reset()

    def update(self, labels, preds):
        for m in self.metrics:
            m.update(labels, preds)

    def get(self):
        names, values = [], []
        for m in self.metrics:
            name, value = m.get()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values


_NAMES = {"acc": Accuracy, "accuracy": Accuracy, "top_k_accuracy": TopKAccuracy,
          "top_k_acc": TopKAccuracy, "f1": F1, "mcc": MCC, "mae": MAE, "mse": MSE, "rmse": RMSE,
          "ce": CrossEntropy, "cross-entropy": CrossEntropy, "perplexity": Perplexity,
          "pearsonr": PearsonCorrelation, "pearson_correlation": PearsonCorrelation}


def create(metric, *args, **kwargs):
    """A metric from a name ("acc", "f1", "rmse", ...), an EvalMetric (returned as
    it is), or a list of them (a CompositeEvalMetric)."""
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric([create(m) for m in metric])
    cls = _NAMES.get(str(metric).lower())
    if cls is None:
        raise ValueError(f"metric '{metric}' is not one deft has (expected one of "
                         f"{', '.join(sorted(_NAMES))})")
    return cls(*args, **kwargs)
