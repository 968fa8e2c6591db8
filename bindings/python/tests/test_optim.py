"""deft.optim against NumPy references of each optimizer's formulas, over
several steps, float64 (to 1e-10) and float32; the update is fused (one call
per device and multiplier group)."""
import numpy as np
import pytest

import deft
from deft import nn, optim


def _clip(g, c):
    return g if c is None else np.clip(g, -c, c)


class Ref:
    """The reference: one NumPy step per call, states kept per parameter."""

    def __init__(self, kind, lr, wd=0.0, rescale=1.0, clip=None, **h):
        self.kind, self.lr, self.wd, self.rescale, self.clip = kind, lr, wd, rescale, clip
        self.h = h
        self.t, self.state = 0, {}

    def step(self, i, w, g):
        self.t += 1 if i == 0 else 0
        h, t, lr, wd = self.h, self.t, self.lr, self.wd
        s = self.state.setdefault(i, [np.zeros_like(w) for _ in range(3)])
        c = _clip(g * self.rescale, self.clip)  # plain
        e = c + wd * w                         # with the decay
        k = self.kind
        if k == "sgd":
            return w - lr * e
        if k == "sgd_mom":
            s[0] = h["momentum"] * s[0] - lr * e
            return w + s[0]
        if k == "nag":
            s[0] = h["momentum"] * s[0] + e
            return w - lr * (e + h["momentum"] * s[0])
        if k == "adam":
            b1, b2 = h["beta1"], h["beta2"]
            s[0] = b1 * s[0] + (1 - b1) * e
            s[1] = b2 * s[1] + (1 - b2) * e * e
            lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            return w - lr_t * s[0] / (np.sqrt(s[1]) + h["epsilon"])
        if k == "adamw":  # PyTorch's AdamW
            b1, b2 = h["beta1"], h["beta2"]
            w = w - lr * wd * w
            s[0] = b1 * s[0] + (1 - b1) * c
            s[1] = b2 * s[1] + (1 - b2) * c * c
            m_hat, v_hat = s[0] / (1 - b1 ** t), s[1] / (1 - b2 ** t)
            return w - lr * m_hat / (np.sqrt(v_hat) + h["epsilon"])
        if k == "rmsprop":
            s[0] = h["gamma1"] * s[0] + (1 - h["gamma1"]) * e * e
            return w - lr * e / np.sqrt(s[0] + h["epsilon"])
        if k == "rmsprop_centered":
            g1 = h["gamma1"]
            s[0] = g1 * s[0] + (1 - g1) * e * e
            s[1] = g1 * s[1] + (1 - g1) * e
            s[2] = h["gamma2"] * s[2] - lr * e / np.sqrt(s[0] - s[1] ** 2 + h["epsilon"])
            return w + s[2]
        if k == "adagrad":
            s[0] = s[0] + c * c
            return w - lr * (c / np.sqrt(s[0] + h["epsilon"]) + wd * w)
        if k == "adadelta":
            rho, eps = h["rho"], h["epsilon"]
            s[0] = rho * s[0] + (1 - rho) * c * c
            d = np.sqrt(s[1] + eps) / np.sqrt(s[0] + eps) * c
            s[1] = rho * s[1] + (1 - rho) * d * d
            return w - lr * (d + wd * w)
        if k == "lamb":
            b1, b2 = h["beta1"], h["beta2"]
            s[0] = b1 * s[0] + (1 - b1) * c
            s[1] = b2 * s[1] + (1 - b2) * c * c
            u = s[0] / (1 - b1 ** t) / (np.sqrt(s[1] / (1 - b2 ** t)) + h["epsilon"]) + wd * w
            r1, r2 = np.linalg.norm(w), np.linalg.norm(u)
            if h.get("lower_bound") is not None:
                r1 = max(r1, h["lower_bound"])
            if h.get("upper_bound") is not None:
                r1 = min(r1, h["upper_bound"])
            ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
            return w - lr * ratio * u
        raise AssertionError(k)


# (deft optimizer name, its kwargs, the reference kind, the reference's hyper)
CASES = {
    "sgd": ("sgd", dict(learning_rate=0.1, wd=0.01), "sgd", {}),
    "sgd_mom": ("sgd", dict(lr=0.1, momentum=0.9, wd=0.01), "sgd_mom", dict(momentum=0.9)),
    "nesterov": ("sgd", dict(learning_rate=0.1, momentum=0.8, nesterov=True, wd=0.01), "nag",
                 dict(momentum=0.8)),
    "nag": ("nag", dict(learning_rate=0.1, momentum=0.7), "nag", dict(momentum=0.7)),
    "adam": ("adam", dict(learning_rate=0.01, wd=0.01), "adam",
             dict(beta1=0.9, beta2=0.999, epsilon=1e-8)),
    "adamw": ("adamw", dict(learning_rate=0.01, wd=0.1, beta1=0.8), "adamw",
              dict(beta1=0.8, beta2=0.999, epsilon=1e-8)),
    "rmsprop": ("rmsprop", dict(learning_rate=0.01, wd=0.01), "rmsprop",
                dict(gamma1=0.9, epsilon=1e-8)),
    "rmsprop_centered": ("rmsprop", dict(learning_rate=0.01, centered=True, gamma2=0.8),
                         "rmsprop_centered", dict(gamma1=0.9, gamma2=0.8, epsilon=1e-8)),
    "adagrad": ("adagrad", dict(learning_rate=0.1, wd=0.01), "adagrad", dict(epsilon=1e-7)),
    "adadelta": ("adadelta", dict(wd=0.01, rho=0.8), "adadelta", dict(rho=0.8, epsilon=1e-5)),
    "lamb": ("lamb", dict(learning_rate=0.01, wd=0.01), "lamb",
             dict(beta1=0.9, beta2=0.999, epsilon=1e-6)),
    "lamb_bounds": ("lamb", dict(learning_rate=0.01, lower_bound=3.0, upper_bound=5.0), "lamb",
                    dict(beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=3.0, upper_bound=5.0)),
}

SHAPES = [(4, 3), (5,), (2, 2, 3)]


def _params(dtype, rng):
    values = [rng.standard_normal(s) for s in SHAPES]
    values[1][:] = 0  # a zero weight: LAMB's trust ratio is 1 there
    arrays = [deft.array(v.astype(dtype)) for v in values]
    for a in arrays:
        a.attach_grad()
    return values, arrays


def _run(name, dtype, steps=4, batch_size=2, clip=None):
    opt_name, kwargs, kind, hyper = CASES[name]
    rng = np.random.default_rng(7)
    values, arrays = _params(dtype, rng)
    opt = optim.create(opt_name, arrays, clip_gradient=clip, **kwargs)
    ref = Ref(kind, kwargs.get("learning_rate", kwargs.get("lr", opt.lr)), kwargs.get("wd", 0.0),
              1.0 / batch_size, clip, **hyper)
    for _ in range(steps):
        for i, a in enumerate(arrays):
            g = rng.standard_normal(SHAPES[i]) * 3
            deft.array(g.astype(dtype)).copyto(a.grad)
            values[i] = ref.step(i, values[i], g)
        opt.step(batch_size)
    return [a.asnumpy() for a in arrays], values


@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("name", list(CASES))
def test_optimizer_matches_reference_float64(name, clip):
    got, want = _run(name, "float64", clip=clip)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_optimizer_matches_reference_float32(name):
    got, want = _run(name, "float32")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


TORCH = {  # deft name and kwargs -> torch.optim class name and kwargs
    "nesterov": ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01)),
    "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.1, betas=(0.8, 0.999), eps=1e-8)),
    "adagrad": ("Adagrad", dict(lr=0.1, eps=1e-7)),
}


@pytest.mark.parametrize("name", list(TORCH))
def test_optimizer_matches_torch(name):
    torch = pytest.importorskip("torch")
    cls, kwargs = TORCH[name]
    opt_name, deft_kwargs = CASES[name][:2]
    if name == "adagrad":  # torch's eps is outside the root, and it decays into the history
        deft_kwargs = dict(learning_rate=0.1, epsilon=0.0)
        kwargs = dict(lr=0.1, eps=0.0)
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((4, 3))
    tw = torch.tensor(w0.copy(), requires_grad=True)
    topt = getattr(torch.optim, cls)([tw], **kwargs)
    dw = deft.array(w0)
    dw.attach_grad()
    dopt = optim.create(opt_name, [dw], **deft_kwargs)
    for _ in range(5):
        g = rng.standard_normal((4, 3))
        tw.grad = torch.tensor(g)
        topt.step()
        deft.array(g).copyto(dw.grad)
        dopt.step(1)
    np.testing.assert_allclose(dw.asnumpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_one_call_per_group(monkeypatch):
    """Eight parameters of two multiplier groups: two calls of the step operator."""
    calls = []
    real = optim.invoke_text
    monkeypatch.setattr(optim, "invoke_text",
                        lambda name, *a: calls.append(name) or real(name, *a))
    params = [nn.Parameter(f"p{i}", (3,), init=1.0) for i in range(8)]
    for p in params:
        p.initialize()
        p.grad()[:] = 1.0
    params[5].lr_mult = 0.5
    params[6].lr_mult = 0.5
    opt = optim.Adam(params, learning_rate=0.1)
    opt.step()
    assert calls == ["_step_adam", "_step_adam"]


def test_lr_mult_and_wd_mult_scale_their_parameters():
    params = [nn.Parameter(f"p{i}", (2,), dtype="float64", init=1.0) for i in range(3)]
    for p in params:
        p.initialize()
        p.grad()[:] = 2.0
    params[1].lr_mult = 0.5
    params[2].wd_mult = 0.0
    optim.SGD(params, learning_rate=0.1, wd=0.1).step()
    # w - lr lr_mult (g + wd wd_mult w)
    np.testing.assert_allclose(params[0].data().asnumpy(), 1 - 0.1 * (2 + 0.1))
    np.testing.assert_allclose(params[1].data().asnumpy(), 1 - 0.05 * (2 + 0.1))
    np.testing.assert_allclose(params[2].data().asnumpy(), 1 - 0.1 * 2)


def test_frozen_parameter_is_skipped_also_when_frozen_later():
    params = [nn.Parameter(f"p{i}", (2,), init=1.0) for i in range(2)]
    for p in params:
        p.initialize()
        p.grad()[:] = 1.0
    opt = optim.SGD(params, learning_rate=0.5, momentum=0.9)
    opt.step()
    params[1].grad_req = "null"  # after initialize() and a first step
    opt.step()
    np.testing.assert_allclose(params[0].data().asnumpy(), 1 - 0.5 - (0.9 * 0.5 + 0.5))
    np.testing.assert_allclose(params[1].data().asnumpy(), 0.5)


def test_shared_parameter_updates_once():
    p = nn.Parameter("w", (2,), dtype="float64", init=1.0)
    p.initialize()
    p.grad()[:] = 1.0
    optim.SGD([p, p], learning_rate=0.1).step()
    np.testing.assert_allclose(p.data().asnumpy(), 0.9)


def test_missing_gradient_is_named_unless_ignored():
    p, q = nn.Parameter("w", (2,), init=1.0), deft.array(np.ones(2, np.float32))
    p.initialize()
    p.grad()[:] = 1.0
    opt = optim.SGD([p, q], learning_rate=0.1)
    with pytest.raises(ValueError, match="parameter 1' has no gradient"):
        opt.step()
    opt.step(ignore_stale_grad=True)
    np.testing.assert_allclose(p.data().asnumpy(), 0.9, rtol=1e-6)
    np.testing.assert_allclose(q.asnumpy(), 1.0)


def test_bad_arguments_are_errors():
    a = deft.array(np.ones(2, np.float32))
    a.attach_grad()
    with pytest.raises(ValueError, match="optimizer 'lbfgs' is not one deft has"):
        optim.create("lbfgs", [a])
    with pytest.raises(TypeError, match="disagree"):
        optim.SGD([a], learning_rate=0.1, lr=0.2)
    with pytest.raises(ValueError, match="nesterov=True needs a momentum"):
        optim.SGD([a], nesterov=True)
    with pytest.raises(ValueError, match="no parameters"):
        optim.Adam([])


def test_lamb_on_gpu_is_a_clear_error():
    if deft.num_gpus() == 0:
        pytest.skip("no GPU")
    a = deft.array(np.ones(2, np.float32), device=deft.gpu(0))
    a.attach_grad()
    with pytest.raises(deft.DeftError, match="_step_lamb.*has no GPU kernel"):
        optim.LAMB([a]).step()
        a.asnumpy()
