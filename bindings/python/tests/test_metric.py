"""deft.metric against NumPy and scikit-learn references, over several updates,
from NDArrays, NumPy arrays and lists of them."""
import math

import numpy as np
import pytest

import deft
from deft import metric

rng = np.random.default_rng(11)
BATCHES = [(rng.integers(0, 4, 8), rng.random((8, 4))) for _ in range(3)]  # labels, scores
BINARY = [(rng.integers(0, 2, 10), rng.random((10, 2))) for _ in range(3)]
REGRESSION = [(rng.standard_normal(6), rng.standard_normal(6)) for _ in range(3)]


def _deft(x):
    return deft.array(x.astype(np.float32))


def test_accuracy_over_updates_and_input_kinds():
    m = metric.Accuracy()
    assert math.isnan(m.get()[1])
    for i, (label, pred) in enumerate(BATCHES):
        if i == 0:
            m.update(_deft(label), _deft(pred))           # NDArrays
        elif i == 1:
            m.update([label], [pred])                     # lists of NumPy arrays
        else:
            m.update(label, pred.argmax(axis=1))          # classes, not scores
    labels = np.concatenate([b[0] for b in BATCHES])
    preds = np.concatenate([b[1] for b in BATCHES]).argmax(axis=1)
    assert m.get() == ("accuracy", pytest.approx((labels == preds).mean()))
    assert m.get_name_value() == [("accuracy", pytest.approx((labels == preds).mean()))]
    m.reset()
    assert math.isnan(m.get()[1])


def test_top_k_accuracy():
    m = metric.TopKAccuracy(top_k=2)
    for label, pred in BATCHES:
        m.update([_deft(label)], [_deft(pred)])
    hits = sum(int(l in np.argsort(p)[-2:]) for label, pred in BATCHES
               for l, p in zip(label, pred))
    assert m.get() == ("top_k_accuracy_2", pytest.approx(hits / 24))


@pytest.mark.parametrize("average", ["macro", "micro"])
def test_f1_and_mcc_match_sklearn(average):
    sk = pytest.importorskip("sklearn.metrics")
    f1, mcc = metric.F1(average=average), metric.MCC(average=average)
    for label, pred in BINARY:
        f1.update(_deft(label), _deft(pred))
        mcc.update(label, pred)
    per = [(sk.f1_score(l, p.argmax(1)), sk.matthews_corrcoef(l, p.argmax(1))) for l, p in BINARY]
    labels = np.concatenate([b[0] for b in BINARY])
    preds = np.concatenate([b[1] for b in BINARY]).argmax(1)
    if average == "macro":
        want_f1, want_mcc = np.mean([p[0] for p in per]), np.mean([p[1] for p in per])
    else:
        want_f1, want_mcc = sk.f1_score(labels, preds), sk.matthews_corrcoef(labels, preds)
    assert f1.get()[1] == pytest.approx(want_f1)
    assert mcc.get()[1] == pytest.approx(want_mcc)


def test_f1_refuses_more_than_two_classes():
    with pytest.raises(ValueError, match="binary"):
        metric.F1().update(np.array([0, 2]), np.array([0, 1]))


@pytest.mark.parametrize("cls,fn", [
    (metric.MAE, lambda d: np.abs(d).mean()),
    (metric.MSE, lambda d: (d ** 2).mean()),
    (metric.RMSE, lambda d: np.sqrt((d ** 2).mean())),
])
def test_regression_metrics_average_their_updates(cls, fn):
    m = cls()
    for label, pred in REGRESSION:
        m.update([_deft(label)], [_deft(pred)])
    want = np.mean([fn(l.astype(np.float32) - p.astype(np.float32)) for l, p in REGRESSION])
    assert m.get()[1] == pytest.approx(want, rel=1e-6)


def test_cross_entropy_and_perplexity():
    ce, ppl = metric.CrossEntropy(), metric.Perplexity(ignore_label=None)
    total, count = 0.0, 0
    for label, scores in BATCHES:
        prob = scores / scores.sum(1, keepdims=True)
        ce.update(_deft(label), _deft(prob))
        ppl.update(label, prob)
        total += -np.log(prob[np.arange(len(label)), label]).sum()
        count += len(label)
    assert ce.get()[1] == pytest.approx(total / count, rel=1e-6)
    assert ppl.get()[1] == pytest.approx(math.exp(total / count), rel=1e-6)


def test_perplexity_ignores_a_label():
    label, scores = BATCHES[0]
    prob = scores / scores.sum(1, keepdims=True)
    m = metric.Perplexity(ignore_label=0)
    m.update(label, prob)
    keep = label != 0
    want = math.exp(-np.log(prob[np.arange(8), label][keep]).mean())
    assert m.get()[1] == pytest.approx(want)


@pytest.mark.parametrize("average", ["macro", "micro"])
def test_pearson_correlation(average):
    m = metric.PearsonCorrelation(average=average)
    for label, pred in REGRESSION:
        m.update(label, pred)
    if average == "macro":
        want = np.mean([np.corrcoef(p, l)[0, 1] for l, p in REGRESSION])
    else:
        want = np.corrcoef(np.concatenate([b[1] for b in REGRESSION]),
                           np.concatenate([b[0] for b in REGRESSION]))[0, 1]
    assert m.get()[1] == pytest.approx(want)


def test_composite_metric():
    m = metric.CompositeEvalMetric(["acc", metric.TopKAccuracy(top_k=3)])
    m.add("ce")
    label, scores = BATCHES[0]
    prob = scores / scores.sum(1, keepdims=True)
    m.update([_deft(label)], [_deft(prob)])
    names, values = m.get()
    assert names == ["accuracy", "top_k_accuracy_3", "cross-entropy"]
    assert values[0] == pytest.approx((prob.argmax(1) == label).mean())
    assert m.get_metric(2).get()[1] == pytest.approx(values[2])
    assert dict(m.get_name_value())["accuracy"] == pytest.approx(values[0])
    m.reset()
    assert all(math.isnan(v) for v in m.get()[1])
    with pytest.raises(IndexError, match="metric index 5"):
        m.get_metric(5)


def test_mismatched_inputs_are_errors():
    with pytest.raises(ValueError, match="2 labels and 1 predictions"):
        metric.Accuracy().update([np.zeros(2), np.zeros(2)], [np.zeros(2)])
    with pytest.raises(ValueError, match="metric 'nope'"):
        metric.create("nope")
    with pytest.raises(ValueError, match="outside the 4 classes"):
        metric.CrossEntropy().update(np.array([7]), np.full((1, 4), 0.25))
