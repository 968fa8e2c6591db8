"""Gluon-style layers against NumPy references; hybridize, export and MXNet files.

Layers whose operators deft does not register yet are skipped, naming the
operator; the check runs against the registry, so they run once it has them.
"""
import itertools
import json
import os

import numpy as np
import pytest

import deft
from deft import autograd, nn
from deft._lib import lib
from deft.optim import SGD

from mxnet_peer import needs_mxnet, run_mxnet

REGISTERED = set(lib.DeftListOperators())
CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "mxnet", "corpus")


def needs(*ops):
    """Skip unless deft registers every operator in `ops`."""
    missing = [op for op in ops if op not in REGISTERED]
    return pytest.mark.skipif(bool(missing), reason=f"operator {', '.join(missing)} is not "
                                                    f"registered in deft yet")


def arr(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- NumPy references ----

def conv_ref(x, w, b, stride, pad, dilate, groups):
    """Cross-correlation of (N, C, *spatial) x with (F, C / groups, *kernel) w."""
    dims = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    kernel = w.shape[2:]
    out_sp = [(x.shape[2 + d] - dilate[d] * (kernel[d] - 1) - 1) // stride[d] + 1
              for d in range(dims)]
    n, f = x.shape[0], w.shape[0]
    cin, fg = w.shape[1], f // groups
    y = np.zeros((n, f, *out_sp), np.float64)
    for pos in itertools.product(*[range(o) for o in out_sp]):
        window = tuple(slice(pos[d] * stride[d], pos[d] * stride[d] + dilate[d] * (kernel[d] - 1)
                             + 1, dilate[d]) for d in range(dims))
        patch = x[(slice(None), slice(None)) + window]  # (N, C, *kernel)
        for g in range(groups):
            part = patch[:, g * cin:(g + 1) * cin].reshape(n, -1)
            y[(slice(None), slice(g * fg, (g + 1) * fg)) + pos] = (
                part @ w[g * fg:(g + 1) * fg].reshape(fg, -1).T)
    if b is not None:
        y += b.reshape((1, f) + (1,) * dims)
    return y


def deconv_ref(x, w, b, stride, pad, dilate, adj, groups):
    """Transposed convolution: each input element scatters w (C, F / groups, *kernel)."""
    dims = x.ndim - 2
    kernel = w.shape[2:]
    full = [(x.shape[2 + d] - 1) * stride[d] + dilate[d] * (kernel[d] - 1) + 1 + adj[d]
            for d in range(dims)]
    n, c, fg = x.shape[0], x.shape[1], w.shape[1]
    cg = c // groups
    y = np.zeros((n, fg * groups, *full), np.float64)
    for pos in itertools.product(*[range(s) for s in x.shape[2:]]):
        window = tuple(slice(pos[d] * stride[d], pos[d] * stride[d] + dilate[d] * (kernel[d] - 1)
                             + 1, dilate[d]) for d in range(dims))
        for g in range(groups):
            xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + pos]  # (N, cg)
            contrib = np.tensordot(xs, w[g * cg:(g + 1) * cg], axes=(1, 0))  # (N, fg, *kernel)
            y[(slice(None), slice(g * fg, (g + 1) * fg)) + window] += contrib
    out = [full[d] - 2 * pad[d] for d in range(dims)]
    y = y[(slice(None), slice(None)) + tuple(slice(pad[d], pad[d] + out[d]) for d in range(dims))]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * dims)
    return y


def pool_ref(x, kernel, stride, pad, pool_type, ceil_mode=False, count_include_pad=True):
    """Max or average pooling with MXNet's windows: a window is clipped to the padded
    extent for the average's divisor (count_include_pad) and to the data for its values."""
    dims = x.ndim - 2
    size = x.shape[2:]
    rnd = np.ceil if ceil_mode else np.floor
    out_sp = [int(rnd((size[d] + 2 * pad[d] - kernel[d]) / stride[d])) + 1 for d in range(dims)]
    y = np.zeros(x.shape[:2] + tuple(out_sp), np.float64)
    for pos in itertools.product(*[range(o) for o in out_sp]):
        start = [pos[d] * stride[d] - pad[d] for d in range(dims)]
        end = [min(start[d] + kernel[d], size[d] + pad[d]) for d in range(dims)]
        padded_count = np.prod([end[d] - start[d] for d in range(dims)])
        lo = [max(s, 0) for s in start]
        hi = [min(e, size[d]) for d, e in enumerate(end)]
        window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(lo, hi))]
        flat = window.reshape(x.shape[0], x.shape[1], -1)
        if pool_type == "max":
            y[(slice(None), slice(None)) + pos] = flat.max(axis=2)
        else:
            count = padded_count if count_include_pad else flat.shape[2]
            y[(slice(None), slice(None)) + pos] = flat.sum(axis=2) / count
    return y


def run(block, *xs):
    return block(*[deft.array(x) for x in xs]).asnumpy()


# ---- convolution ----

CONV_CASES = [  # layer, input shape, kwargs
    (nn.Conv1D, (2, 4, 9), dict(channels=6, kernel_size=3, strides=2, padding=1, dilation=2,
                                groups=2)),
    (nn.Conv2D, (2, 3, 7, 6), dict(channels=4, kernel_size=(3, 2), strides=(2, 1),
                                   padding=(1, 0))),
    (nn.Conv2D, (1, 4, 5, 5), dict(channels=4, kernel_size=3, padding=1, groups=4,
                                   use_bias=False)),
    (nn.Conv3D, (1, 2, 4, 5, 4), dict(channels=3, kernel_size=(2, 3, 2), strides=(1, 2, 1),
                                      padding=(1, 1, 0), dilation=(1, 1, 2))),
]


@pytest.mark.parametrize("layer, shape, kwargs", CONV_CASES)
def test_convolution_matches_numpy_and_infers_in_channels(layer, shape, kwargs, rng):
    conv = layer(**kwargs)
    conv.initialize()
    dims = len(shape) - 2
    groups = kwargs.get("groups", 1)
    assert conv.weight.shape[:2] == (kwargs["channels"], 0)  # unknown until the first call
    x = arr(rng, *shape)
    got = run(conv, x)
    assert conv.weight.shape[1] == shape[1] // groups
    w = conv.weight.data().asnumpy()
    b = conv.bias.data().asnumpy() if kwargs.get("use_bias", True) else None
    assert b is None or not b.any()  # biases start at zero
    tup = lambda v: (v,) * dims if isinstance(v, int) else tuple(v)  # noqa: E731
    want = conv_ref(x, w, b, tup(kwargs.get("strides", 1)), tup(kwargs.get("padding", 0)),
                    tup(kwargs.get("dilation", 1)), groups)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_convolution_with_in_channels_and_activation(rng):
    conv = nn.Conv2D(5, 3, in_channels=2, activation="relu", bias_initializer="ones")
    conv.initialize()
    assert conv.weight.shape == (5, 2, 3, 3) and conv.weight.data().shape == (5, 2, 3, 3)
    w = conv.weight.data().asnumpy()
    bound = np.sqrt(6.0 / (2 * 9 + 5 * 9))  # Xavier over the receptive field
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    x = arr(rng, 2, 2, 5, 5)
    want = np.maximum(conv_ref(x, w, np.ones(5), (1, 1), (0, 0), (1, 1), 1), 0)
    np.testing.assert_allclose(run(conv, x), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="kernel_size is \\(3, 3, 3\\): expected an int or 2"):
        nn.Conv2D(1, (3, 3, 3))


DECONV_CASES = [
    (nn.Conv1DTranspose, (2, 4, 5), dict(channels=2, kernel_size=3, strides=2, padding=1,
                                         output_padding=1, groups=2)),
    (nn.Conv2DTranspose, (1, 3, 4, 3), dict(channels=2, kernel_size=(3, 2), strides=(2, 2),
                                            padding=(1, 0), output_padding=(1, 0),
                                            dilation=(2, 1))),
    (nn.Conv3DTranspose, (1, 2, 2, 3, 2), dict(channels=3, kernel_size=2, strides=(2, 1, 2))),
]


@pytest.mark.parametrize("layer, shape, kwargs", DECONV_CASES)
def test_transposed_convolution_matches_numpy(layer, shape, kwargs, rng):
    deconv = layer(**kwargs)
    deconv.initialize()
    x = arr(rng, *shape)
    got = run(deconv, x)
    dims = len(shape) - 2
    groups = kwargs.get("groups", 1)
    assert deconv.weight.shape[:2] == (shape[1], kwargs["channels"] // groups)
    tup = lambda v: (v,) * dims if isinstance(v, int) else tuple(v)  # noqa: E731
    want = deconv_ref(x, deconv.weight.data().asnumpy(), deconv.bias.data().asnumpy(),
                      tup(kwargs.get("strides", 1)), tup(kwargs.get("padding", 0)),
                      tup(kwargs.get("dilation", 1)), tup(kwargs.get("output_padding", 0)),
                      groups)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---- pooling ----

POOL_CASES = [
    (nn.MaxPool1D, (2, 3, 9), dict(pool_size=3, strides=2, padding=1), "max"),
    (nn.MaxPool2D, (2, 2, 7, 6), dict(), "max"),
    (nn.MaxPool2D, (1, 2, 7, 6), dict(pool_size=3, strides=2, ceil_mode=True), "max"),
    (nn.MaxPool3D, (1, 2, 4, 5, 4), dict(pool_size=(2, 3, 2), padding=(1, 1, 0)), "max"),
    (nn.AvgPool1D, (2, 3, 8), dict(pool_size=3, strides=2, padding=1), "avg"),
    (nn.AvgPool2D, (1, 2, 7, 7), dict(pool_size=3, strides=2, padding=1,
                                      count_include_pad=False), "avg"),
    (nn.AvgPool2D, (1, 2, 6, 7), dict(pool_size=2, ceil_mode=True), "avg"),
    (nn.AvgPool3D, (1, 1, 4, 4, 5), dict(pool_size=2, strides=(1, 2, 2)), "avg"),
]


@pytest.mark.parametrize("layer, shape, kwargs, kind", POOL_CASES)
def test_pooling_matches_numpy(layer, shape, kwargs, kind, rng):
    dims = len(shape) - 2
    tup = lambda v: (v,) * dims if isinstance(v, int) else tuple(v)  # noqa: E731
    kernel = tup(kwargs.get("pool_size", 2))
    stride = tup(kwargs["strides"]) if "strides" in kwargs else kernel
    x = arr(rng, *shape)
    want = pool_ref(x, kernel, stride, tup(kwargs.get("padding", 0)), kind,
                    kwargs.get("ceil_mode", False), kwargs.get("count_include_pad", True))
    np.testing.assert_allclose(run(layer(**kwargs), x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_global_pooling_keeps_singleton_axes(dims, rng):
    x = arr(rng, 2, 3, *([4] * dims))
    axes = tuple(range(2, 2 + dims))
    for layer, ref in ((getattr(nn, f"GlobalAvgPool{dims}D"), np.mean),
                       (getattr(nn, f"GlobalMaxPool{dims}D"), np.max)):
        got = run(layer(), x)
        assert got.shape == (2, 3) + (1,) * dims
        np.testing.assert_allclose(got, ref(x, axis=axes, keepdims=True), rtol=1e-5, atol=1e-6)


# ---- basic layers ----

def test_dense_without_flatten_applies_to_the_last_axis(rng):
    dense = nn.Dense(4, flatten=False)
    dense.initialize()
    x = arr(rng, 2, 3, 5)
    got = run(dense, x)
    assert got.shape == (2, 3, 4) and dense.weight.shape == (4, 5)
    np.testing.assert_allclose(got, x @ dense.weight.data().asnumpy().T, rtol=1e-5, atol=1e-6)


def test_dropout_drops_in_training_mode_only():
    drop = nn.Dropout(0.25)
    x = deft.ones((4000,))
    np.testing.assert_array_equal(drop(x).asnumpy(), np.ones(4000))  # predict mode
    with autograd.train_mode():
        kept = drop(x).asnumpy()
    assert set(np.unique(kept)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.2 < (kept == 0).mean() < 0.3
    with autograd.train_mode():  # axes: one mask value along axis 1
        shared = nn.Dropout(0.5, axes=(1,))(deft.ones((50, 8))).asnumpy()
    assert (shared == shared[:, :1]).all() and 0 < (shared[:, 0] == 0).sum() < 50
    with autograd.train_mode():
        np.testing.assert_array_equal(nn.Dropout(0)(x).asnumpy(), np.ones(4000))


def test_hybridized_dropout_uses_the_operator_and_draws_new_masks(rng):
    net = nn.HybridSequential(nn.Dropout(0.5))
    net.hybridize()
    x = deft.array(arr(rng, 200))
    with autograd.train_mode():
        a, b = net(x).asnumpy(), net(x).asnumpy()
    assert not np.array_equal(a, b) and (a == 0).any()
    ops = [node["op"] for node in json.loads(net._last_symbol.tojson())["nodes"]]
    assert ops == ["null", "Dropout"]
    np.testing.assert_array_equal(net(x).asnumpy(), x.asnumpy())  # predict mode
    # a graph recorded in predict mode exports without its Dropout (a copy keeps the name)
    ops = [node["op"] for node in json.loads(net._last_symbol.tojson())["nodes"]]
    assert ops == ["null", "_copy"]


def test_hybridized_dropout_trains_with_the_mask_it_drew(rng):
    """Recorded as one node, the graph keeps its mask: the gradient is that mask."""
    net = nn.HybridSequential(nn.Dropout(0.5))
    net.hybridize()
    x = deft.array(arr(rng, 300))
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward()
    mask = y.asnumpy() / x.asnumpy()
    assert set(np.round(np.unique(mask), 5)) == {0.0, 2.0}
    np.testing.assert_allclose(x.grad.asnumpy(), mask, rtol=1e-6)


def test_embedding_picks_rows(rng):
    emb = nn.Embedding(10, 3)
    emb.initialize()
    idx = np.array([[0, 9], [4, 4]], np.float32)
    got = run(emb, idx)
    np.testing.assert_array_equal(got, emb.weight.data().asnumpy()[idx.astype(int)])


def test_flatten_and_lambdas(rng):
    x = arr(rng, 2, 3, 4)
    assert run(nn.Flatten(), x).shape == (2, 12)
    np.testing.assert_allclose(run(nn.Lambda("tanh"), x), np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(run(nn.Lambda(lambda a, b: a * b), x, x), x * x, rtol=1e-6)
    hybrid = nn.HybridLambda(lambda F, a: F.tanh(a) * 2)
    eager = run(hybrid, x)
    hybrid.hybridize()
    np.testing.assert_allclose(run(hybrid, x), eager, rtol=1e-6)
    np.testing.assert_allclose(eager, 2 * np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(run(nn.HybridLambda("sigmoid"), x), 1 / (1 + np.exp(-x)),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="'no_such_op' is not an operator"):
        nn.Lambda("no_such_op")
    with pytest.raises(ValueError, match="neither an operator name nor callable"):
        nn.HybridLambda(3)


def test_activation_and_swish(rng):
    x = arr(rng, 3, 4)
    np.testing.assert_allclose(run(nn.Activation("relu"), x), np.maximum(x, 0))
    np.testing.assert_allclose(run(nn.Swish(2.0), x), x / (1 + np.exp(-2 * x)), rtol=1e-5,
                               atol=1e-6)


@needs("LeakyReLU")
def test_leaky_relu_family(rng):
    from math import erf
    x = arr(rng, 3, 4)
    np.testing.assert_allclose(run(nn.LeakyReLU(0.1), x), np.where(x > 0, x, 0.1 * x),
                               rtol=1e-6)
    np.testing.assert_allclose(run(nn.ELU(0.5), x), np.where(x > 0, x, 0.5 * np.expm1(x)),
                               rtol=1e-5, atol=1e-6)
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    np.testing.assert_allclose(run(nn.SELU(), x),
                               scale * np.where(x > 0, x, alpha * np.expm1(x)), rtol=1e-5,
                               atol=1e-6)
    gelu = x * 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    np.testing.assert_allclose(run(nn.GELU(), x), gelu, rtol=1e-3, atol=1e-4)
    prelu = nn.PReLU(in_channels=4)
    prelu.initialize()
    np.testing.assert_allclose(run(prelu, x), np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    with pytest.raises(ValueError, match="no less than 0"):
        nn.LeakyReLU(-1)


# ---- normalization ----

def bn_ref(x, gamma, beta, mean, var, eps, axis=1):
    shape = [1] * x.ndim
    shape[axis] = -1
    r = lambda v: np.asarray(v).reshape(shape) if np.ndim(v) else v  # noqa: E731
    return (x - r(mean)) / np.sqrt(r(var) + eps) * r(gamma) + r(beta)


@needs("BatchNorm")
def test_batch_norm_training_updates_running_statistics(rng):
    bn = nn.BatchNorm(momentum=0.8)
    bn.initialize()
    x = arr(rng, 4, 3, 5) * 2 + 1
    np.testing.assert_allclose(run(bn, x), x / np.sqrt(1 + 1e-5), rtol=1e-5)  # predict mode
    assert bn.gamma.shape == (3,) and bn.running_var.grad_req == "null"
    with autograd.train_mode():
        got = run(bn, x)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    np.testing.assert_allclose(got, bn_ref(x, 1, 0, mean, var, 1e-5), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.2 * mean, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(bn.running_var.data().asnumpy(), 0.8 + 0.2 * var, rtol=1e-4)


@needs("BatchNorm")
def test_hybridized_batch_norm_updates_its_auxiliary_states_once_per_call(rng, tmp_path):
    x = arr(rng, 4, 3, 5)
    nets = []
    for _ in range(2):
        net = nn.HybridSequential(nn.BatchNorm(axis=2, momentum=0.5, scale=False))
        net.initialize()
        nets.append(net)
    nets[1].hybridize()
    for _ in range(2):
        with autograd.train_mode():
            eager, hybrid = run(nets[0], x), run(nets[1], x)
        np.testing.assert_allclose(hybrid, eager, rtol=1e-5, atol=1e-6)
    for name in ("0.running_mean", "0.running_var"):
        np.testing.assert_allclose(nets[1].collect_params()[name].data().asnumpy(),
                                   nets[0].collect_params()[name].data().asnumpy(), rtol=1e-6)
    mean = x.mean(axis=(0, 1))
    np.testing.assert_allclose(nets[1][0].running_mean.data().asnumpy(), 0.75 * mean,
                               rtol=1e-5, atol=1e-6)
    sym = nets[1]._last_symbol
    assert sym.list_auxiliary_states() == ["0.running_mean", "0.running_var"]
    _, params_file = nets[1].export(tmp_path / "bn")
    assert sorted(deft.nd.load(params_file)) == ["arg:0.beta", "arg:0.gamma",
                                                 "aux:0.running_mean", "aux:0.running_var"]


@needs("BatchNorm")
def trained_eager_and_hybridized(make_net, x, y):
    """The parameters (and predict-mode outputs) of a net after three SGD
    steps, eager and hybridized, from the same seed."""
    results = []
    for hybrid in (False, True):
        deft.random.seed(1)
        net = make_net()
        net.initialize()
        if hybrid:
            net.hybridize()
        opt = SGD(net.collect_params(), lr=0.1)
        for _ in range(3):
            with autograd.record():
                loss = nn.SoftmaxCrossEntropyLoss()(net(x), y)
            loss.backward()
            opt.step(x.shape[0])
        results.append([p.data().asnumpy() for p in net.collect_params().values()])
        results[-1].append(net(x).asnumpy())
    return results


def test_batch_norm_trains_hybridized_like_eager(rng):
    x, y = deft.array(arr(rng, 8, 3, 6)), deft.array(np.arange(8) % 2)
    eager, hybrid = trained_eager_and_hybridized(
        lambda: nn.HybridSequential(nn.Conv1D(4, 3, in_channels=3), nn.BatchNorm(),
                                    nn.Activation("relu"), nn.Flatten(), nn.Dense(2)), x, y)
    for a, b in zip(eager, hybrid):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_folded_conv_batch_norm_trains_and_predicts_like_eager(rng):
    """Executors fold a BatchNorm and relu into the convolution before them
    (_conv_bn_relu, which has no gradient): autograd records the graph as given."""
    x, y = deft.array(arr(rng, 4, 3, 7, 7)), deft.array(np.arange(4) % 2)
    eager, hybrid = trained_eager_and_hybridized(
        lambda: nn.HybridSequential(nn.Conv2D(4, 3, in_channels=3, use_bias=False),
                                    nn.BatchNorm(), nn.Activation("relu"), nn.Flatten(),
                                    nn.Dense(2)), x, y)
    for a, b in zip(eager, hybrid):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@needs("LayerNorm")
def test_layer_norm(rng):
    x = arr(rng, 2, 3, 5)
    ln = nn.LayerNorm()
    ln.initialize()
    got = run(ln, x)
    assert ln.gamma.shape == (5,)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs("InstanceNorm", "SwapAxis")
def test_instance_norm_on_another_axis(rng):
    x = arr(rng, 2, 5, 3)
    norm = nn.InstanceNorm(axis=2)
    norm.initialize()
    got = run(norm, x)
    assert norm.gamma.shape == (3,)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs("GroupNorm")
def test_group_norm(rng):
    x = arr(rng, 2, 4, 3)
    norm = nn.GroupNorm(num_groups=2)
    norm.initialize()
    got = run(norm, x)
    g = x.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(got, want.reshape(x.shape), rtol=1e-4, atol=1e-5)


# ---- hybridize, export, MXNet files ----

HYBRID_CASES = [  # (operators, make the layer, input shape)
    (("Convolution",), lambda: nn.Conv2D(3, 3, padding=1, activation="tanh"), (2, 2, 5, 5)),
    (("Deconvolution",), lambda: nn.Conv1DTranspose(2, 3, strides=2), (2, 3, 4)),
    (("Pooling",), lambda: nn.AvgPool2D(3, 2, 1, ceil_mode=True), (1, 2, 6, 6)),
    (("Pooling",), lambda: nn.GlobalMaxPool3D(), (1, 2, 3, 3, 3)),
    (("Embedding",), lambda: nn.Embedding(6, 4), None),
    (("Flatten", "FullyConnected"), lambda: nn.HybridSequential(nn.Flatten(), nn.Dense(3)),
     (2, 3, 4)),
    (("LeakyReLU",), lambda: nn.PReLU(), (2, 3)),
    (("LeakyReLU",), lambda: nn.GELU(), (2, 3)),
    (("BatchNorm",), lambda: nn.BatchNorm(), (2, 3, 4)),
    (("LayerNorm",), lambda: nn.LayerNorm(), (2, 3, 4)),
    (("InstanceNorm",), lambda: nn.InstanceNorm(), (2, 3, 4)),
    (("GroupNorm",), lambda: nn.GroupNorm(3), (2, 3, 4)),
]


def _case_input(shape, rng):
    if shape is None:  # indices
        return np.array([[1, 5, 0], [2, 2, 3]], np.float32)
    return arr(rng, *shape)


@pytest.mark.parametrize("ops, make, shape", HYBRID_CASES,
                         ids=[c[0][0] + str(i) for i, c in enumerate(HYBRID_CASES)])
def test_hybridized_export_and_import_match_eager(ops, make, shape, rng, tmp_path):
    missing = [op for op in ops if op not in REGISTERED]
    if missing:
        pytest.skip(f"operator {', '.join(missing)} is not registered in deft yet")
    x = _case_input(shape, rng)
    block = make()
    block.initialize()
    eager = run(block, x)
    block.hybridize()
    np.testing.assert_allclose(run(block, x), eager, rtol=1e-5, atol=1e-6)
    sym_file, params_file = block.export(tmp_path / "m")
    imported = nn.SymbolBlock.imports(sym_file, ["data"], params_file)
    np.testing.assert_allclose(run(imported, x), eager, rtol=1e-5, atol=1e-6)


def lenet_like():
    return nn.HybridSequential(nn.Conv2D(4, 3, activation="relu"), nn.MaxPool2D(),
                               nn.Flatten(), nn.Dense(10))


def test_small_cnn_trains(rng):
    deft.random.seed(0)
    x = deft.array(arr(rng, 16, 1, 8, 8))
    y = deft.array(rng.integers(0, 10, 16).astype(np.float32))
    net = lenet_like()
    net.initialize()
    net.hybridize()
    opt = SGD(net.collect_params(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(15):
        with autograd.record():
            loss = nn.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
        opt.step(x.shape[0])
        losses.append(loss.mean().item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_save_and_load_parameters_in_mxnet_format(rng, tmp_path):
    x = deft.array(arr(rng, 2, 1, 8, 8))
    net = lenet_like()
    net.initialize()
    want = net(x).asnumpy()
    net.save_parameters(tmp_path / "net.params")
    saved = deft.nd.load(tmp_path / "net.params")
    assert list(saved) == ["0.weight", "0.bias", "3.weight", "3.bias"]  # MXNet's dotted names
    other = lenet_like()  # shapes unknown: they come from the file
    other.load_parameters(tmp_path / "net.params")
    np.testing.assert_array_equal(other(x).asnumpy(), want)
    with pytest.raises(ValueError, match="parameter '4.weight' is missing"):
        nn.HybridSequential(*lenet_like(), nn.Dense(2)).load_parameters(tmp_path / "net.params")
    small = nn.HybridSequential(nn.Conv2D(4, 3))
    with pytest.raises(ValueError, match="holds '3.weight', which is not a parameter"):
        small.load_parameters(tmp_path / "net.params")
    small.load_parameters(tmp_path / "net.params", ignore_extra=True)
    wrong = nn.HybridSequential(nn.Conv2D(5, 3))
    with pytest.raises(ValueError, match="'weight' has shape \\(5, 0, 3, 3\\)"):
        wrong.load_parameters(tmp_path / "net.params", ignore_extra=True)


def test_symbol_block_runs_an_mxnet_exported_mlp():
    prefix = os.path.join(CORPUS, "model_mlp")
    block = nn.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
    assert list(block.collect_params())[:2] == ["mlp_dense0_weight", "mlp_dense0_bias"]
    data = deft.nd.load(prefix + "-inputs.params")["data"]
    want = deft.nd.load(prefix + "-outputs.params")["mlp_dense2_fwd_output"]
    np.testing.assert_allclose(block(data).asnumpy(), want.asnumpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="input 'x' is not an argument"):
        nn.SymbolBlock.imports(prefix + "-symbol.json", ["x"])
    with pytest.raises(TypeError, match="takes 1 inputs \\(data\\), got 2"):
        block(data, data)


@needs("BatchNorm")
def test_symbol_block_runs_an_mxnet_resnet_block_with_auxiliary_states():
    prefix = os.path.join(CORPUS, "model_resnet_block")
    block = nn.SymbolBlock.imports(prefix + "-symbol.json", "data", prefix + "-0000.params")
    assert block.collect_params()["batchnorm0_running_mean"].grad_req == "null"
    data = deft.nd.load(prefix + "-inputs.params")["data"]
    (want,) = deft.nd.load(prefix + "-outputs.params").values()
    np.testing.assert_allclose(block(data).asnumpy(), want.asnumpy(), rtol=1e-4, atol=1e-5)


@needs_mxnet
def test_mxnet_imports_what_deft_exports(rng, tmp_path):
    x = arr(rng, 2, 1, 8, 8)
    net = lenet_like()
    net.initialize()
    net.hybridize()
    want = run(net, x)
    sym_file, params_file = net.export(tmp_path / "lenet", epoch=7)
    np.save(tmp_path / "x.npy", x)
    script = (f"import mxnet as mx, numpy as np\n"
              f"net = mx.gluon.SymbolBlock.imports({sym_file!r}, ['data'], {params_file!r})\n"
              f"np.save({str(tmp_path / 'y.npy')!r}, "
              f"net(mx.nd.array(np.load({str(tmp_path / 'x.npy')!r}))).asnumpy())\n")
    run_mxnet(script, tmp_path, timeout=120)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-6)
