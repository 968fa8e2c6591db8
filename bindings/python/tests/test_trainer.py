"""deft.Trainer: Gluon's API over the fused optimizers; clipping, schedules,
checkpoints of the optimizer states, and compile_step with a Trainer."""
import numpy as np
import pytest

import deft
from deft import autograd, lr_scheduler, nn, optim
from deft.utils import clip_global_norm, global_norm


def make_net(seed=0):
    deft.random.seed(seed)
    net = nn.HybridSequential(nn.Dense(8, activation="relu", in_units=5), nn.Dense(3, in_units=8))
    net.initialize()
    return net


def data(seed=0, n=6):
    rng = np.random.default_rng(seed)
    return (deft.array(rng.standard_normal((n, 5)).astype(np.float32)),
            deft.array((np.arange(n) % 3).astype(np.float32)))


def weights(net):
    return [p.data().asnumpy().copy() for p in net.collect_params().values()]


def train(net, trainer, steps=3, seed=0):
    loss_fn, losses = nn.SoftmaxCrossEntropyLoss(), []
    for s in range(steps):
        x, y = data(seed + s)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
        losses.append(loss.asnumpy())
    return losses


def test_trainer_by_name_equals_the_optimizer_itself():
    a, b = make_net(), make_net()
    train(a, deft.Trainer(a.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}))
    opt = optim.SGD(b.collect_params(), lr=0.1, momentum=0.9)
    train(b, opt)
    for x, y in zip(weights(a), weights(b)):
        np.testing.assert_array_equal(x, y)


def test_trainer_takes_an_optimizer_instance():
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), optim.Adam(learning_rate=0.01))
    before = weights(net)
    train(net, trainer, steps=1)
    assert all(np.any(x != y) for x, y in zip(before, weights(net)))
    with pytest.raises(ValueError, match="optimizer_params go with an optimizer's name"):
        deft.Trainer(net.collect_params(), optim.Adam(), {"learning_rate": 0.1})


def test_per_sample_loss_and_batch_size_give_the_mean_gradient():
    """backward of the per-sample loss sums it; step(batch_size) divides: the same
    update as a loss of the batch's mean and step(1)."""
    a, b = make_net(), make_net()
    x, y = data()
    ta = deft.Trainer(a.collect_params(), "sgd", {"learning_rate": 0.5})
    tb = deft.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        la = nn.SoftmaxCELoss()(a(x), y)
    la.backward()
    ta.step(x.shape[0])
    with autograd.record():
        lb = nn.SoftmaxCELoss()(b(x), y).mean()
    lb.backward()
    tb.step(1)
    for p, q in zip(weights(a), weights(b)):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-7)


def test_learning_rate_property_and_setter():
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), "adam", {"lr": 0.002})
    assert trainer.learning_rate == 0.002
    trainer.set_learning_rate(0.5)
    assert trainer.learning_rate == 0.5 and trainer.optimizer.lr == 0.5


def test_scheduler_sets_each_steps_learning_rate():
    net = make_net()
    sched = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    trainer = deft.Trainer(net.collect_params(), "sgd", {"lr_scheduler": sched})
    seen = []
    for _ in range(5):
        train(net, trainer, steps=1)
        seen.append(trainer.learning_rate)
    assert seen == [1.0, 1.0, 0.5, 0.5, 0.25]
    with pytest.raises(UserWarning, match="lr_scheduler"):
        trainer.set_learning_rate(0.1)


def test_scheduler_learning_rate_is_the_one_applied():
    """A weight moved by SGD with a cosine schedule: w -= lr_t * g at each step t."""
    p = nn.Parameter("w", (1,), dtype="float64", init=0.0)
    p.initialize()
    sched = lr_scheduler.CosineScheduler(max_update=4, base_lr=0.4, warmup_steps=2,
                                         warmup_begin_lr=0.1)
    trainer = deft.Trainer([p], "sgd", {"lr_scheduler": sched})
    lrs = [0.1 + 0.3 * 1 / 2, 0.4, 0.2, 0.0, 0.0]  # warmup, then the cosine of 2 steps
    for _ in range(5):
        p.grad()[:] = 1.0
        trainer.step(1)
    np.testing.assert_allclose(p.data().asnumpy(), [-sum(lrs)])


def test_clip_global_norm_option_scales_the_step():
    p = nn.Parameter("w", (2,), dtype="float64", init=0.0)
    p.initialize()
    trainer = deft.Trainer([p], "sgd", {"learning_rate": 1.0}, clip_global_norm=1.0)
    p.grad()[:] = np.array([6.0, 8.0])  # norm 10, batch 2: 5 after the division
    trainer.step(2)
    np.testing.assert_allclose(p.data().asnumpy(), [-0.6, -0.8], rtol=1e-7)
    assert trainer.last_global_norm == pytest.approx(5.0)
    p.grad()[:] = np.array([0.3, 0.4])  # under the bound: unchanged
    trainer.step(1)
    np.testing.assert_allclose(p.data().asnumpy(), [-0.9, -1.2], rtol=1e-7)
    p.grad()[:] = np.array([np.nan, 0])
    with pytest.raises(ValueError, match="global norm is nan"):
        trainer.step(1)


def test_clip_global_norm_helper():
    a = deft.array(np.array([3.0, 0.0], np.float32))
    b = deft.array(np.array([[4.0]], np.float32))
    assert global_norm([a, b]) == pytest.approx(5.0)
    assert clip_global_norm([a, b], 1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(a.asnumpy(), [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.asnumpy(), [[0.8]], rtol=1e-6)
    assert clip_global_norm([a, b], 10.0) == pytest.approx(1.0, rel=1e-6)
    np.testing.assert_allclose(a.asnumpy(), [0.6, 0.0], rtol=1e-6)
    with pytest.raises(ValueError, match="max_norm is 0"):
        clip_global_norm([a], 0)


def test_zero_grad():
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), "sgd")
    x, y = data()
    with autograd.record():
        loss = nn.SoftmaxCELoss()(net(x), y)
    loss.backward()
    assert any(np.any(p.grad().asnumpy()) for p in net.collect_params().values())
    trainer.zero_grad()
    assert not any(np.any(p.grad().asnumpy()) for p in net.collect_params().values())


def test_frozen_layer_keeps_its_weights():
    net = make_net()
    for p in net[0].collect_params().values():
        p.grad_req = "null"
    frozen = weights(net)[:2]
    train(net, deft.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1}))
    for x, y in zip(frozen, weights(net)[:2]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name,kwargs", [
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
    ("adam", {"learning_rate": 0.01}),
    ("rmsprop", {"learning_rate": 0.01, "centered": True}),
    ("adadelta", {}),
    ("lamb", {"learning_rate": 0.01}),
])
def test_save_and_load_states_resume_exactly(tmp_path, name, kwargs):
    """Train 2 steps, save parameters and states, train 2 more; a fresh net and
    trainer loaded from the files trains those 2 steps to the same weights."""
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), name, dict(kwargs))
    train(net, trainer, steps=2)
    path = str(tmp_path / "trainer.states")
    trainer.save_states(path)
    saved = weights(net)
    train(net, trainer, steps=2, seed=10)
    other = make_net(seed=5)
    for p, value in zip(other.collect_params().values(), saved):
        p.set_data(value)
    resumed = deft.Trainer(other.collect_params(), name, dict(kwargs, learning_rate=0.777))
    resumed.load_states(path)  # the exact path, with the hyper-parameters saved
    assert resumed.optimizer.num_update == 2 and resumed.learning_rate == trainer.learning_rate
    train(other, resumed, steps=2, seed=10)
    for x, y in zip(weights(net), weights(other)):
        np.testing.assert_array_equal(x, y)


def test_load_states_of_another_optimizer_is_an_error(tmp_path):
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), "adam")
    train(net, trainer, steps=1)
    trainer.save_states(str(tmp_path / "s"))
    with pytest.raises(ValueError, match="holds the states of Adam, not SGD"):
        deft.Trainer(net.collect_params(), "sgd").load_states(str(tmp_path / "s"))


@pytest.mark.parametrize("name,kwargs", [
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True}),
    ("rmsprop", {"learning_rate": 0.01, "centered": True}),
    ("adagrad", {"learning_rate": 0.1}),
    ("adadelta", {}),
    ("adamw", {"learning_rate": 0.01, "wd": 0.1}),
    ("lamb", {"learning_rate": 0.01, "wd": 0.01}),
])
def test_compile_step_with_a_trainer_trains_as_eager(name, kwargs):
    eager, compiled = make_net(), make_net()
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.9)
    eager_losses = train(eager, deft.Trainer(eager.collect_params(), name,
                                             dict(kwargs, lr_scheduler=sched)))
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.9)
    trainer = deft.Trainer(compiled.collect_params(), name, dict(kwargs, lr_scheduler=sched))
    step = deft.compile_step(compiled, nn.SoftmaxCrossEntropyLoss(), trainer)
    for s, want in enumerate(eager_losses):
        np.testing.assert_allclose(step(*data(s)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    for x, y in zip(weights(compiled), weights(eager)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_compile_step_refuses_what_its_graph_cannot_do():
    net = make_net()
    trainer = deft.Trainer(net.collect_params(), "sgd", clip_global_norm=1.0)
    with pytest.raises(ValueError, match="clips the gradients' global norm"):
        deft.compile_step(net, nn.SoftmaxCELoss(), trainer)
    net[0].weight.lr_mult = 0.1
    step = deft.compile_step(net, nn.SoftmaxCELoss(), deft.Trainer(net.collect_params(), "sgd"))
    with pytest.raises(ValueError, match="lr_mult or wd_mult"):
        step(*data())


def test_bad_trainer_arguments():
    net = make_net()
    with pytest.raises(TypeError, match="params must be a dict"):
        deft.Trainer(net, "sgd")
    with pytest.raises(ValueError, match="clip_global_norm is -1"):
        deft.Trainer(net.collect_params(), "sgd", clip_global_norm=-1)
    with pytest.raises(ValueError, match="optimizer 'nope'"):
        deft.Trainer(net.collect_params(), "nope")
