"""Blocks, hybridization, losses and optimizers."""
import numpy as np
import pytest

import deft
from deft import autograd, nn
from deft.optim import SGD, Adam


def make_net(seed=3, in_units=5):
    """The same network for the same seed: parameters are drawn at once (in_units given)."""
    deft.random.seed(seed)
    net = nn.HybridSequential(nn.Dense(8, activation="tanh", in_units=in_units), nn.Dense(3, in_units=8))
    net.initialize()
    return net


def loss_and_grads(net, x, y):
    with autograd.record():
        loss = nn.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()
    return loss.mean().item(), [p.grad().asnumpy().copy() for p in net.collect_params().values()]


@pytest.fixture
def batch(rng):
    x = deft.array(rng.standard_normal((6, 5)).astype(np.float32))
    y = deft.array(np.arange(6) % 3)
    return x, y


def test_parameters_get_their_shapes_from_the_first_input(batch):
    net = nn.HybridSequential(nn.Dense(8, activation="tanh"), nn.Dense(3))
    net.initialize()
    params = net.collect_params()
    assert list(params) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert params["0.weight"].shape == (8, 0)
    net(batch[0])
    assert params["0.weight"].shape == (8, 5) and params["1.weight"].shape == (3, 8)


def test_hybridized_block_matches_eager_outputs_and_gradients(batch):
    x, y = batch
    eager, hybrid = make_net(), make_net()
    np.testing.assert_array_equal(eager(x).asnumpy(), hybrid(x).asnumpy())
    hybrid.hybridize()
    out = hybrid(x)
    np.testing.assert_allclose(out.asnumpy(), eager(x).asnumpy(), rtol=1e-6)
    le, ge = loss_and_grads(eager, x, y)
    lh, gh = loss_and_grads(hybrid, x, y)
    assert abs(le - lh) < 1e-6
    for a, b in zip(ge, gh):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_hybridize_reuses_the_graph_and_respecialises_on_new_shapes(batch):
    x, _ = batch
    net = make_net()
    net.hybridize()
    net(x)
    net(x * 2)
    assert len(net._graphs) == 1
    small = deft.array(np.ones((2, 5), np.float32))
    np.testing.assert_allclose(net(small).asnumpy(), make_net()(small).asnumpy(), rtol=1e-6)
    empty = deft.zeros((0, 5))
    assert net(empty).shape == (0, 3)
    assert len(net._graphs) == 3


def test_reading_a_value_inside_a_hybridized_forward_is_an_error(batch):
    class Branchy(nn.HybridBlock):
        def forward(self, x):
            if x.sum().item() > 0:  # data-dependent Python control flow
                return x * 2
            return x

    block = Branchy()
    np.testing.assert_array_equal(block(deft.array([1.0])).asnumpy(), [2])  # eager: fine
    block.hybridize()
    with pytest.raises(deft.ndarray.DataDependentError, match="hybridized forward"):
        block(deft.array([1.0]))


def test_dropout_only_while_training():
    drop = nn.Dropout(0.5)
    x = deft.ones((1000,))
    np.testing.assert_array_equal(drop(x).asnumpy(), np.ones(1000))  # not training
    with autograd.train_mode():
        kept = drop(x).asnumpy()
    assert set(np.unique(kept)) <= {0.0, 2.0} and 300 < (kept > 0).sum() < 700
    with pytest.raises(ValueError, match="expected 0 <= rate < 1"):
        nn.Dropout(1.5)


@pytest.mark.parametrize("make_opt", [lambda p: SGD(p, lr=0.5),
                                      lambda p: SGD(p, lr=0.2, momentum=0.9),
                                      lambda p: Adam(p, lr=0.05)], ids=["sgd", "momentum", "adam"])
def test_optimizers_reduce_the_loss(make_opt, batch):
    x, y = batch
    net = make_net()
    net(x)
    opt = make_opt(net.collect_params())
    first, _ = loss_and_grads(net, x, y)
    for _ in range(30):
        loss_and_grads(net, x, y)
        opt.step()
    last, _ = loss_and_grads(net, x, y)
    assert last < first * 0.5


def test_optimizer_errors():
    with pytest.raises(ValueError, match="no parameters"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="has no gradient"):
        SGD([deft.zeros(3)], lr=0.1).step()


def test_export_writes_symbol_and_parameters(batch, tmp_path):
    x, _ = batch
    net = make_net()
    with pytest.raises(RuntimeError, match="hybridized block that has run"):
        net.export(tmp_path / "m")
    net.hybridize()
    expected = net(x).asnumpy()
    files = net.export(tmp_path / "m", epoch=3)
    assert files == (f"{tmp_path}/m-symbol.json", f"{tmp_path}/m-0003.params")
    sym = deft.Symbol.load(tmp_path / "m-symbol.json")
    params = deft.nd.load(tmp_path / "m-0003.params")  # MXNet's names: arg:<parameter>
    names = list(net.collect_params())
    assert sym.list_inputs() == ["data"] + names
    assert list(params) == [f"arg:{k}" for k in names]
    out = deft.CachedOp(sym)(x, *[params[f"arg:{k}"] for k in names])
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-6)
    other = make_net(seed=9)
    other.load_parameters(tmp_path / "m-0003.params")
    np.testing.assert_allclose(other(x).asnumpy(), expected, rtol=1e-6)


def test_plain_block_and_sequential(batch):
    class Twice(nn.Block):
        def forward(self, x):
            return x * 2

    seq = nn.Sequential(Twice(), Twice())
    assert len(seq) == 2 and isinstance(seq[0], Twice)
    np.testing.assert_array_equal(seq(deft.array([1.0])).asnumpy(), [4])
    with pytest.raises(NotImplementedError, match="must define forward"):
        nn.Block()(deft.array([1.0]))
    with pytest.raises(RuntimeError, match="has no value yet"):
        nn.Parameter("w", (2, 0)).data()


def test_hybridized_dropout_trains_and_draws_new_masks(batch):
    x, y = batch
    deft.random.seed(5)
    net = nn.HybridSequential(nn.Dense(16, activation="relu", in_units=5), nn.Dropout(0.2),
                              nn.Dense(3, in_units=16))
    net.initialize()
    net.hybridize()
    with autograd.train_mode():
        first, second = net(x).asnumpy(), net(x).asnumpy()
    assert not np.array_equal(first, second)  # each run draws a new mask
    with autograd.predict_mode():
        np.testing.assert_array_equal(net(x).asnumpy(), net(x).asnumpy())
    opt = SGD(net.collect_params(), lr=0.1, momentum=0.9)
    start, _ = loss_and_grads(net, x, y)
    for _ in range(60):
        loss_and_grads(net, x, y)
        opt.step(x.shape[0])
    with autograd.predict_mode():
        end = nn.SoftmaxCrossEntropyLoss()(net(x), y).mean().item()
    assert end < start * 0.5
