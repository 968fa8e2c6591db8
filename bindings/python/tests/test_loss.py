"""Losses against NumPy references: per-sample values, and gradients (of their sum)
against central differences of the reference, eagerly and hybridized."""
import numpy as np
import pytest

import deft
from deft import autograd, nn
from numeric import central_differences


def _log_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def _mean_but0(v):
    return v.reshape(v.shape[0], -1).mean(axis=1)


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _stirling(t):
    s = np.maximum(t, 1.0)
    return np.where(t > 1, s * np.log(s) - s + 0.5 * np.log(2 * np.pi * s), 0.0)


rng = np.random.default_rng(3)
P = rng.standard_normal((4, 3, 5))      # predictions: (batch, 3, 5)
R = rng.random((4, 3, 5)) + 0.05        # positive targets (probabilities, counts)
S = np.sign(rng.standard_normal((4, 3, 5)))  # -1 / 1 labels
CLASSES = rng.integers(0, 5, (4, 3)).astype(np.float64)
SW = rng.random((4, 1, 1))              # sample weights, broadcast

# (loss, its inputs after pred, NumPy reference of pred -> element losses before the mean)
CASES = {
    "l2": (nn.L2Loss(), (R,), lambda p: 0.5 * (R - p) ** 2),
    "l2_weight": (nn.L2Loss(weight=3.0), (R,), lambda p: 1.5 * (R - p) ** 2),
    "l1": (nn.L1Loss(), (R,), lambda p: np.abs(R - p)),
    "huber": (nn.HuberLoss(rho=0.7), (R,), lambda p: np.where(
        np.abs(R - p) > 0.7, np.abs(R - p) - 0.35, 0.5 / 0.7 * (R - p) ** 2)),
    "softmax_ce": (nn.SoftmaxCrossEntropyLoss(), (CLASSES,), lambda p: -np.take_along_axis(
        _log_softmax(p), CLASSES[..., None].astype(int), -1)),
    "softmax_ce_axis1_dense": (
        nn.SoftmaxCELoss(axis=1, sparse_label=False), (R / R.sum(1, keepdims=True),),
        lambda p: -(_log_softmax(p, 1) * (R / R.sum(1, keepdims=True))).sum(1)),
    "softmax_ce_from_logits": (
        nn.SoftmaxCELoss(from_logits=True, weight=0.5), (CLASSES,),
        lambda p: -0.5 * np.take_along_axis(p, CLASSES[..., None].astype(int), -1)),
    "sigmoid_bce": (nn.SigmoidBinaryCrossEntropyLoss(), (R / R.max(),), lambda p: (
        _softplus(p) - p * (R / R.max()))),
    "sigmoid_bce_from_sigmoid": (
        nn.SigmoidBCELoss(from_sigmoid=True), (R / R.max(),),
        lambda p: -(np.log(_sig(p) + 1e-12) * (R / R.max())
                    + np.log(1 - _sig(p) + 1e-12) * (1 - R / R.max()))),
    "kl_div": (nn.KLDivLoss(), (R,), lambda p: R * (np.log(R + 1e-12) - p)),
    "kl_div_softmax": (nn.KLDivLoss(from_logits=False, axis=1), (R,),
                       lambda p: R * (np.log(R + 1e-12) - _log_softmax(p, 1))),
    "hinge": (nn.HingeLoss(margin=0.5), (S,), lambda p: np.maximum(0, 0.5 - p * S)),
    "poisson": (nn.PoissonNLLLoss(), (R * 4,), lambda p: np.exp(p) - R * 4 * p),
    "poisson_full": (nn.PoissonNLLLoss(compute_full=True), (R * 4,),
                     lambda p: np.exp(p) - R * 4 * p + _stirling(R * 4)),
}


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _run(loss, pred, *others, hybrid=False, sample_weight=None):
    if hybrid:
        loss.hybridize()
    x = deft.array(pred)
    x.attach_grad()
    args = [deft.array(o) for o in others]
    if sample_weight is not None:
        args.append(deft.array(sample_weight))
    with autograd.record():
        out = loss(x, *args)
    out.backward()
    loss.hybridize(False)
    return out.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybrid"])
@pytest.mark.parametrize("name", list(CASES))
def test_loss_values_and_gradients(name, hybrid):
    loss, others, ref = CASES[name]
    pred = P if name != "sigmoid_bce_from_sigmoid" else _sig(P)
    inner = ref if name != "sigmoid_bce_from_sigmoid" else (lambda p: ref(_logit(p)))
    value, grad = _run(loss, pred, *others, hybrid=hybrid)
    assert value.shape == (4,)
    np.testing.assert_allclose(value, _mean_but0(inner(pred)), rtol=1e-6, atol=1e-9)
    want = central_differences(lambda p: _mean_but0(inner(p)), pred)
    np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-6)


def _logit(p):
    return np.log(p / (1 - p))


def test_sample_weight_scales_each_sample():
    value, grad = _run(nn.L1Loss(), P, R, sample_weight=SW)
    np.testing.assert_allclose(value, _mean_but0(np.abs(R - P) * SW), rtol=1e-6)
    np.testing.assert_allclose(grad, -np.sign(R - P) * SW / 15, rtol=1e-6)


def test_batch_axis_one():
    value, _ = _run(nn.L2Loss(batch_axis=1), P, R)
    np.testing.assert_allclose(value, (0.5 * (R - P) ** 2).mean(axis=(0, 2)), rtol=1e-6)


def test_pos_weight_weighs_the_positive_term():
    label = (R > 0.5).astype(np.float64)
    pos_weight = np.full((1, 1, 5), 3.0)
    loss = nn.SigmoidBCELoss()
    got = loss(deft.array(P), deft.array(label), None, deft.array(pos_weight)).asnumpy()
    want = -(3.0 * label * np.log(_sig(P)) + (1 - label) * np.log(1 - _sig(P)))
    np.testing.assert_allclose(got, _mean_but0(want), rtol=1e-6)
    got = nn.SigmoidBCELoss(from_sigmoid=True)(
        deft.array(_sig(P)), deft.array(label), None, deft.array(pos_weight)).asnumpy()
    np.testing.assert_allclose(got, _mean_but0(want), rtol=1e-6)


def test_label_of_batch_shape_reshapes_to_prediction():
    pred, label = P[:, 0, :1], R[:, 0, 0]  # (4, 1) and (4,)
    value, _ = _run(nn.L2Loss(), pred, label)
    np.testing.assert_allclose(value, 0.5 * (label - pred[:, 0]) ** 2, rtol=1e-6)
    with pytest.raises(ValueError, match="does not reshape"):
        nn.L2Loss()(deft.array(P), deft.array(R[:, 0]))


def _triplet_ref(p, pos, neg, margin):
    gap = ((pos - p) ** 2 - (neg - p) ** 2).reshape(p.shape[0], -1).sum(1)
    return np.maximum(gap + margin, 0)


@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybrid"])
def test_triplet_loss(hybrid):
    pos, neg = R[:, 0], P[:, 1] * 0.3
    value, grad = _run(nn.TripletLoss(margin=2.0), P[:, 0], pos, neg, hybrid=hybrid)
    np.testing.assert_allclose(value, _triplet_ref(P[:, 0], pos, neg, 2.0), rtol=1e-6)
    want = central_differences(lambda p: _triplet_ref(p, pos, neg, 2.0), P[:, 0])
    np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-6)


def _cosine_ref(a, b, label, margin):
    cos = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1),
                                       1e-12)
    return np.where(label == 1, 1 - cos, np.clip(cos - margin, 0, 1 - 1e-12))


@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybrid"])
def test_cosine_embedding_loss(hybrid):
    a, b, label = P[:, 0], P[:, 1] + 0.5 * P[:, 0], np.array([1.0, -1.0, 1.0, -1.0])
    value, grad = _run(nn.CosineEmbeddingLoss(margin=-0.2), a, b, label, hybrid=hybrid)
    np.testing.assert_allclose(value, _cosine_ref(a, b, label, -0.2), rtol=1e-6)
    want = central_differences(lambda x: _cosine_ref(x, b, label, -0.2), a)
    np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-6)


def test_softmax_ce_matches_torch():
    torch = pytest.importorskip("torch")
    pred, label = P[:, 0], CLASSES[:, 0]
    want = torch.nn.functional.cross_entropy(torch.tensor(pred), torch.tensor(label).long(),
                                             reduction="none").numpy()
    np.testing.assert_allclose(nn.SoftmaxCELoss()(deft.array(pred), deft.array(label)).asnumpy(),
                               want, rtol=1e-6)


def test_bad_batch_axis_is_an_error():
    with pytest.raises(ValueError, match="batch_axis 3 is out of range"):
        nn.L1Loss(batch_axis=3)(deft.array(P), deft.array(R))


def _ctc_brute(pred, label, t_len=None):
    """-log p(label | pred) by summing every alignment of the steps (blank last)."""
    import itertools
    steps, classes = pred.shape
    steps = steps if t_len is None else t_len
    prob = np.exp(_log_softmax(pred[:steps]))
    total = 0.0
    for path in itertools.product(range(classes), repeat=steps):
        collapsed = [k for i, k in enumerate(path)
                     if k != classes - 1 and (i == 0 or path[i - 1] != k)]
        if collapsed == list(label):
            total += np.prod(prob[np.arange(steps), path])
    return -np.log(total)


CTC_PRED = rng.standard_normal((3, 4, 4))          # (N, T, C): blank is class 3
CTC_LABEL = np.array([[0, 1, -1], [2, 2, -1], [1, -1, -1]], np.float64)  # padded with -1


def _ctc_ref(pred, lengths=(None, None, None)):
    return np.array([_ctc_brute(pred[n], [int(v) for v in CTC_LABEL[n] if v >= 0], lengths[n])
                     for n in range(3)])


@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybrid"])
def test_ctc_loss_against_every_alignment(hybrid):
    value, grad = _run(nn.CTCLoss(), CTC_PRED, CTC_LABEL, hybrid=hybrid)
    np.testing.assert_allclose(value, _ctc_ref(CTC_PRED), rtol=1e-9)
    np.testing.assert_allclose(grad, central_differences(_ctc_ref, CTC_PRED), rtol=1e-5, atol=1e-7)


def test_ctc_loss_lengths_layouts_and_weight():
    pred_tnc, label_tn = CTC_PRED.transpose(1, 0, 2), CTC_LABEL.T
    lengths, label_lengths = np.array([3.0, 4.0, 2.0]), np.array([2.0, 1.0, 1.0])
    got = nn.CTCLoss(layout="TNC", label_layout="TN", weight=2.0)(
        deft.array(pred_tnc), deft.array(label_tn), deft.array(lengths),
        deft.array(label_lengths)).asnumpy()
    want = [_ctc_brute(CTC_PRED[0], [0, 1], 3), _ctc_brute(CTC_PRED[1], [2], 4),
            _ctc_brute(CTC_PRED[2], [1], 2)]
    np.testing.assert_allclose(got, 2.0 * np.array(want), rtol=1e-9)


def test_ctc_loss_matches_torch():
    torch = pytest.importorskip("torch")
    logp = torch.tensor(_log_softmax(CTC_PRED).transpose(1, 0, 2))
    targets = torch.tensor([0, 1, 2, 2, 1])
    want = torch.nn.functional.ctc_loss(logp, targets, torch.tensor([4, 4, 4]),
                                        torch.tensor([2, 2, 1]), blank=3, reduction="none")
    got = nn.CTCLoss()(deft.array(CTC_PRED), deft.array(CTC_LABEL)).asnumpy()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-9)


def test_ctc_loss_bad_labels_are_errors():
    bad = CTC_LABEL.copy()
    bad[0, 0] = 3  # the blank
    with pytest.raises(deft.DeftError, match=r"labels must be in \[0, 3\)"):
        nn.CTCLoss()(deft.array(CTC_PRED), deft.array(bad)).asnumpy()
    with pytest.raises(deft.DeftError, match="labels must be"):
        deft.waitall()  # the failure is this thread's until a wait for all work reports it
    with pytest.raises(ValueError, match="layout is 'NCT'"):
        nn.CTCLoss(layout="NCT")


@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybrid"])
def test_softmax_ce_of_two_dimensions_either_way(hybrid):
    """(batch, classes) takes the picked values as they are; (classes, batch) with
    axis 0 and batch_axis 1 too."""
    pred, label = P[:, 0], CLASSES[:, 0]
    want = -_log_softmax(pred)[np.arange(4), label.astype(int)]
    value, grad = _run(nn.SoftmaxCELoss(), pred, label, hybrid=hybrid)
    np.testing.assert_allclose(value, want, rtol=1e-6)
    np.testing.assert_allclose(grad, np.exp(_log_softmax(pred)) - np.eye(5)[label.astype(int)],
                               rtol=1e-6, atol=1e-9)
    value, _ = _run(nn.SoftmaxCELoss(axis=0, batch_axis=1), pred.T, label, hybrid=hybrid)
    np.testing.assert_allclose(value, want, rtol=1e-6)
    weights = rng.random((4, 1))
    value, _ = _run(nn.SoftmaxCELoss(weight=2.0), pred, label, hybrid=hybrid,
                    sample_weight=weights)
    np.testing.assert_allclose(value, 2.0 * want * weights[:, 0], rtol=1e-6)
