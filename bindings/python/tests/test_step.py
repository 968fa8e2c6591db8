"""deft.compile_step: a whole training step as one graph, equal to eager training."""
import numpy as np
import pytest

import deft
from deft import autograd, nn
from deft.optim import SGD, Adam


def make_net(seed, extra=()):
    deft.random.seed(seed)
    net = nn.HybridSequential(nn.Dense(16, activation="relu", in_units=8), *extra,
                              nn.Dense(3, in_units=16))
    net.initialize()
    return net


def batch(rng, n=6):
    x = rng.standard_normal((n, 8)).astype(np.float32)
    y = (np.arange(n) % 3).astype(np.float32)
    return deft.array(x), deft.array(y)


def eager_train(net, opt, batches):
    loss_fn, losses = nn.SoftmaxCrossEntropyLoss(), []
    for x, y in batches:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step(x.shape[0])
        losses.append(loss.asnumpy())
    return losses


def weights(net):
    return [p.data().asnumpy() for p in net.collect_params().values()]


@pytest.mark.parametrize("make_opt", [lambda p: SGD(p, lr=0.1, momentum=0.9, wd=0.01),
                                      lambda p: SGD(p, lr=0.2),
                                      lambda p: Adam(p, lr=0.01)])
@pytest.mark.parametrize("hybrid", [False, True])
def test_compiled_step_trains_as_eager(make_opt, hybrid):
    rng = np.random.default_rng(0)
    batches = [batch(rng) for _ in range(4)]
    eager_net, step_net = make_net(1), make_net(1)
    step_net.hybridize(hybrid)
    eager_losses = eager_train(eager_net, make_opt(eager_net.collect_params()), batches)
    step = deft.compile_step(step_net, nn.SoftmaxCrossEntropyLoss(),
                             make_opt(step_net.collect_params()))
    step_losses = [step(x, y).asnumpy() for x, y in batches]
    for got, want in zip(step_losses, eager_losses):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(weights(step_net), weights(eager_net)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(step._graphs) == 1


def conv_net():
    net = nn.HybridSequential(
        nn.Conv2D(6, 5, activation="relu", in_channels=1), nn.MaxPool2D(2),
        nn.Conv2D(16, 3, activation="relu", in_channels=6), nn.MaxPool2D(2), nn.Flatten(),
        nn.Dense(3, in_units=64))
    net.initialize()
    return net


@pytest.mark.parametrize("fuse", [False, True])
def test_compiled_conv_relu_pool_step_trains_as_eager(fuse):
    """The step of convolution, relu and max pooling blocks (fused by default: a
    convolution and its relu one node, the pooling's and relu's gradients one)."""
    rng = np.random.default_rng(2)
    batches = [(deft.array(rng.standard_normal((4, 1, 16, 16)).astype(np.float32)),
                deft.array((np.arange(4) % 3).astype(np.float32))) for _ in range(3)]
    eager_net, step_net = conv_net(), conv_net()
    for mine, theirs in zip(step_net.collect_params().values(),
                            eager_net.collect_params().values()):
        mine.set_data(deft.array(theirs.data().asnumpy()))
    eager_losses = eager_train(eager_net, SGD(eager_net.collect_params(), lr=0.1), batches)
    step = deft.compile_step(step_net, nn.SoftmaxCrossEntropyLoss(),
                             SGD(step_net.collect_params(), lr=0.1), fuse=fuse)
    step_losses = [step(x, y).asnumpy() for x, y in batches]
    for got, want in zip(step_losses, eager_losses):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(weights(step_net), weights(eager_net)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_batch_norm_statistics_update_once_per_step():
    rng = np.random.default_rng(1)
    batches = [batch(rng) for _ in range(3)]
    eager_net, step_net = (make_net(2, (nn.BatchNorm(in_channels=16),)) for _ in range(2))
    eager_train(eager_net, SGD(eager_net.collect_params(), lr=0.1), batches)
    step = deft.compile_step(step_net, nn.SoftmaxCrossEntropyLoss(),
                             SGD(step_net.collect_params(), lr=0.1))
    for x, y in batches:
        step(x, y)
    for got, want in zip(weights(step_net), weights(eager_net)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert step_net[1].running_mean.data().asnumpy().any()


def test_dropout_draws_masks_inside_the_step():
    rng = np.random.default_rng(2)
    x, y = batch(rng, 64)
    net = make_net(3, (nn.Dropout(0.5),))
    step = deft.compile_step(net, nn.SoftmaxCrossEntropyLoss(), SGD(net.collect_params(), lr=0.0))
    first, second = step(x, y).asnumpy(), step(x, y).asnumpy()
    assert not np.allclose(first, second)  # lr 0: only the masks differ
    with autograd.predict_mode():
        clean = nn.SoftmaxCrossEntropyLoss()(net(x), y).asnumpy()
    assert not np.allclose(first, clean)


def test_learning_rate_changes_numbers_not_the_graph():
    rng = np.random.default_rng(3)
    x, y = batch(rng)
    net = make_net(4)
    opt = SGD(net.collect_params(), lr=0.1)
    step = deft.compile_step(net, nn.SoftmaxCrossEntropyLoss(), opt)
    step(x, y)
    before = weights(net)
    opt.lr = 0.0
    step(x, y)
    for got, want in zip(weights(net), before):
        np.testing.assert_array_equal(got, want)
    assert len(step._graphs) == 1 and all(s == () for s in opt.states.values())


def test_optimizer_keeps_its_rescale_grad():
    """Optimizer.step(batch_size) scales by rescale_grad / batch_size; it used to
    overwrite rescale_grad with 1 / batch_size, silently dropping the constructor's."""
    w = deft.array(np.ones(3, np.float32))
    w.attach_grad()
    with autograd.record():
        loss = (w * 4).sum()
    loss.backward()
    SGD([w], lr=1.0, rescale_grad=2.0).step(4)  # w - 1 * 2 / 4 * 4
    np.testing.assert_allclose(w.asnumpy(), -np.ones(3))


def test_bad_optimizer_is_refused():
    net = make_net(5)

    class Other:
        pass

    with pytest.raises(TypeError, match="optimizer Other has no step graph"):
        deft.compile_step(net, nn.SoftmaxCrossEntropyLoss(), Other())


def test_eager_and_compiled_steps_share_the_optimizer_states():
    """A compiled step continues the momentum eager steps built (it used to start its own,
    so switching to compile_step mid-training silently reset the momentum)."""
    rng = np.random.default_rng(5)
    batches = [batch(rng) for _ in range(4)]
    nets = [make_net(7), make_net(7)]
    opts = [SGD(n.collect_params(), lr=0.1, momentum=0.9) for n in nets]
    eager_train(nets[0], opts[0], batches)
    eager_train(nets[1], opts[1], batches[:2])
    step = deft.compile_step(nets[1], nn.SoftmaxCrossEntropyLoss(), opts[1])
    for x, y in batches[2:]:
        step(x, y)
    for got, want in zip(weights(nets[1]), weights(nets[0])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_optimizer_updates_many_parameters_in_few_calls():
    """45 parameters: three calls of the multi-tensor update (20, 20, 5), every one updated."""
    ws = [deft.array(np.full(5, i + 1.0, np.float32)) for i in range(45)]
    for w in ws:
        w.attach_grad()
    with autograd.record():
        loss = sum((w * w).sum() for w in ws)
    loss.backward()  # grad 2w
    opt = SGD(ws, lr=0.1, momentum=0.9)
    opt.step()
    for i, w in enumerate(ws):
        np.testing.assert_allclose(w.asnumpy(), np.full(5, 0.8 * (i + 1)), rtol=1e-6)
        np.testing.assert_allclose(opt.states[i][0].asnumpy(), np.full(5, -0.2 * (i + 1)),
                                   rtol=1e-6)


def test_compile_step_refuses_an_optimizer_of_other_parameters():
    net, other = make_net(1), make_net(2)
    step = deft.compile_step(net, nn.SoftmaxCrossEntropyLoss(), SGD(other.collect_params(),
                                                                    momentum=0.9))
    with pytest.raises(ValueError, match="is not one the optimizer trains"):
        step(*batch(np.random.default_rng(0)))
