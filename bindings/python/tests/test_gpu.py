"""GPUs from Python: queries and errors everywhere; arrays, operators and
autograd on gpu(0) against the CPU where a GPU is present."""
import numpy as np
import pytest

import deft

HAS_GPU = deft.num_gpus() > 0
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no GPU on this machine")


def test_gpu_queries_and_errors_without_such_gpu():
    n = deft.num_gpus()
    assert n >= 0
    with pytest.raises(deft.DeftError, match=r"dev_id is gpu\(%d\)" % n):
        deft.gpu_name(n)
    with pytest.raises(deft.DeftError, match=r"gpu\(%d\)" % n):
        deft.zeros((2, 3), device=deft.gpu(n))


@needs_gpu
def test_arrays_move_between_devices():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = deft.array(x, device=deft.gpu(0))
    assert g.device == deft.gpu(0)
    np.testing.assert_array_equal(g.asnumpy(), x)
    back = g.to(deft.cpu())
    assert back.device == deft.cpu()
    np.testing.assert_array_equal(back.asnumpy(), x)
    free, total = deft.gpu_memory_info(0)
    assert 0 < free <= total
    assert deft.gpu_name(0)


@needs_gpu
def test_operators_and_autograd_agree_with_the_cpu():
    rng = np.random.default_rng(3)
    xs, ws = rng.standard_normal((8, 5), np.float32), rng.standard_normal((4, 5), np.float32)
    grads = []
    for dev in (deft.cpu(), deft.gpu(0)):
        x, w = deft.array(xs, device=dev), deft.array(ws, device=dev)
        w.attach_grad()
        with deft.autograd.record():
            y = deft.nd.FullyConnected(x, w, num_hidden=4, no_bias=True)
            loss = deft.nd.sum(deft.nd.tanh(y))
        loss.backward()
        assert w.grad.device == dev
        grads.append((y.asnumpy(), w.grad.asnumpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-5, atol=1e-6)


@needs_gpu
def test_a_hybridized_network_trains_on_the_gpu_as_on_the_cpu():
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((16, 6), np.float32)
    labels = rng.integers(0, 3, 16).astype(np.int32)
    losses = []
    for dev in (deft.cpu(), deft.gpu(0)):
        deft.random.seed(1)
        net = deft.nn.HybridSequential(deft.nn.Dense(8, activation="relu"), deft.nn.Dense(3))
        net.initialize(device=dev)
        net.hybridize()
        trainer = deft.optim.SGD(net.collect_params().values(), lr=0.1)
        x, y = deft.array(xs, device=dev), deft.array(labels, device=dev)
        run = []
        for _ in range(3):
            with deft.autograd.record():
                loss = deft.nd.softmax_cross_entropy(net(x), y)
            loss.backward()
            trainer.step()
            run.append(float(loss.asnumpy()[0]))
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)
