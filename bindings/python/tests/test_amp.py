"""deft.amp.LossScaler (dynamic loss scaling) and float16 / bfloat16 products
and softmax through autograd."""
import numpy as np
import pytest

import deft
from deft import amp, autograd, nd, nn
from test_trainer import data as batch, make_net, weights  # the same small net and data


def backward(net, x, y, scaler=None):
    with autograd.record():
        loss = nn.SoftmaxCrossEntropyLoss()(net(x), y)
    (scaler.scale(loss) if scaler else loss).backward()


def test_scaled_steps_equal_plain_steps():
    """The scale multiplies the gradients and the step divides it out again."""
    plain, scaled = make_net(), make_net()
    t_plain = deft.Trainer(plain.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    t_scaled = deft.Trainer(scaled.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9})
    scaler = amp.LossScaler(init_scale=1024.0)
    for s in range(3):
        x, y = batch(s)
        backward(plain, x, y)
        backward(scaled, x, y, scaler)
        g_plain = plain.collect_params()["0.weight"].grad().asnumpy()
        g_scaled = scaled.collect_params()["0.weight"].grad().asnumpy()
        np.testing.assert_allclose(g_scaled, 1024 * g_plain, rtol=1e-5, atol=1e-6)
        t_plain.step(x.shape[0])
        assert scaler.step(t_scaled, x.shape[0])
        scaler.update()
    for a, b in zip(weights(plain), weights(scaled)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_overflowed_step_is_skipped_and_the_scale_adapts():
    net, twin = make_net(), make_net()
    trainer = deft.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    t_twin = deft.Trainer(twin.collect_params(), "adam", {"learning_rate": 0.01})
    scaler = amp.LossScaler(init_scale=8.0, growth_interval=2)
    x, y = batch(0)
    backward(net, x, y, scaler)
    before = weights(net)
    net.collect_params()["1.bias"].grad()[1] = np.inf  # an overflow
    assert not scaler.step(trainer, x.shape[0])
    for a, b in zip(before, weights(net)):
        np.testing.assert_array_equal(a, b)
    scaler.update()
    assert scaler.get_scale() == 4.0
    # Adam's moments were left alone too: the next steps equal a run without the bad one
    for s in range(1, 3):
        x, y = batch(s)
        backward(net, x, y, scaler)
        backward(twin, x, y)
        assert scaler.step(trainer, x.shape[0])
        t_twin.step(x.shape[0])
        scaler.update()
    for a, b in zip(weights(net), weights(twin)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert scaler.get_scale() == 8.0  # two good steps: grown back
    nan_grad = net.collect_params()["0.weight"].grad()
    nan_grad[0, 0] = np.nan
    assert not scaler.step(trainer, 6)
    scaler.update()
    assert scaler.loss_scale == 4.0


def test_disabled_scaler_passes_through():
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    scaler = amp.GradScaler(enabled=False)
    x, y = batch(0)
    backward(net, x, y, scaler)
    assert scaler.get_scale() == 1.0
    assert scaler.step(trainer, x.shape[0])
    scaler.update()
    assert scaler.get_scale() == 1.0


@pytest.mark.parametrize("kwargs, message", [
    ({"init_scale": 0}, "init_scale is 0.0, expected a finite number > 0"),
    ({"init_scale": float("inf")}, "init_scale is inf"),
    ({"growth_factor": 1.0}, "growth_factor is 1.0, expected > 1"),
    ({"backoff_factor": 1.5}, "backoff_factor is 1.5, expected < 1"),
    ({"backoff_factor": -0.5}, "backoff_factor is -0.5, expected a finite number > 0"),
    ({"growth_interval": 0}, "growth_interval is 0, expected an integer >= 1"),
    ({"growth_interval": 2.5}, "growth_interval is 2.5"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        amp.LossScaler(**kwargs)


def test_state_dict_round_trip_and_set_scale():
    scaler = amp.LossScaler(init_scale=64.0, growth_interval=3)
    scaler._found_inf = False
    scaler.update()
    state = scaler.state_dict()
    other = amp.LossScaler()
    other.load_state_dict(state)
    assert other.state_dict() == state
    with pytest.raises(KeyError, match="missing \\['scale'\\]"):
        other.load_state_dict({k: v for k, v in state.items() if k != "scale"})
    other.update(new_scale=2.0)
    assert other.get_scale() == 2.0
    with pytest.raises(ValueError, match="new_scale is -1.0"):
        other.update(new_scale=-1)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_fully_connected_and_softmax_gradients_follow_float32(dtype):
    """FullyConnected and log_softmax in a half dtype compute in float32 and
    round: forward and gradients within the dtype's precision of float32's."""
    rng = np.random.default_rng(3)
    x32, w32, b32 = (rng.uniform(-1, 1, s).astype(np.float32) for s in [(4, 6), (5, 6), (5,)])
    tol = 2 ** -7 if dtype == "bfloat16" else 2 ** -10

    def run(cast):
        x, w, b = (nd.array(a).astype(cast) for a in (x32, w32, b32))
        for a in (x, w, b):
            a.attach_grad()
        with autograd.record():
            y = nd.log_softmax(nd.FullyConnected(x, w, b, num_hidden=5))
            loss = nd.sum(y * nd.array(np.arange(5, dtype=np.float32)).astype(cast))
        loss.backward()
        assert y.dtype == cast and x.grad.dtype == cast
        return [a.astype("float32").asnumpy() for a in (y, x.grad, w.grad, b.grad)]

    for half, full in zip(run(dtype), run("float32")):
        np.testing.assert_allclose(half, full, rtol=8 * tol, atol=8 * tol)
