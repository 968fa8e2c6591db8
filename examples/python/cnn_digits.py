"""Train a LeNet-style CNN on scikit-learn's handwritten digits with deft.

The data set ships inside scikit-learn (nothing is downloaded): 1797 images of
8x8 pixels. The network is two blocks of Conv2D + BatchNorm + relu + MaxPool2D,
then Flatten, Dense + Dropout and Dense. The first epoch runs eagerly; then the
whole training step is compiled (deft.compile_step): forward, loss, backward
and the optimizer's update run as one graph, one C call a step, with Dropout's
masks drawn and BatchNorm's running statistics updated inside it.
The script prints loss and accuracy per epoch, the test accuracy (it fails
below 0.98), the training-step and inference times of three copies of the
network doing the same work: eager, hybridized (the forward one graph,
recorded for autograd as one node that keeps the activations its gradient
reads) and compiled (median and best of alternating rounds, measured in this
run), and writes the exported graph.

    python examples/python/cnn_digits.py [--epochs 15] [--lr 0.2] [--out cnn_digits]

DEFT_DEMO_QUICK=1 trains 3 epochs, times fewer rounds and accepts 0.9 (the tests'
short run).
"""
import argparse
import math
import os
import statistics
import time

# deft runs its own threads; NumPy's and SciPy's BLAS pools would only spin
# beside them (the data here needs no BLAS on the NumPy side).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import deft  # noqa: E402
from deft import autograd, nn  # noqa: E402
from deft.optim import SGD  # noqa: E402

QUICK = os.environ.get("DEFT_DEMO_QUICK") == "1"


def load(seed):
    """Train and test images as (N, 1, 8, 8) in [0, 1], and their labels."""
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    return train_test_split(x, digits.target.astype(np.int64), test_size=0.25,
                            random_state=seed, stratify=digits.target)


def batches(x, y, size, rng):
    order = rng.permutation(len(x))
    for i in range(0, len(x) - size + 1, size):  # full batches: one graph shape
        idx = order[i:i + size]
        yield deft.array(x[idx]), deft.array(y[idx])


def accuracy(net, x, y):
    with autograd.predict_mode():
        return float((net(deft.array(x)).asnumpy().argmax(axis=1) == y).mean())


def build_net():
    """LeNet for 8x8 inputs: padded 3x3 convolutions keep the size, pooling halves it
    (8 -> 4 -> 2), so 64 channels of 2x2 reach the dense layers."""
    def conv_block(channels):
        return [nn.Conv2D(channels, 3, padding=1, use_bias=False), nn.BatchNorm(),
                nn.Activation("relu"), nn.MaxPool2D(2)]
    return nn.HybridSequential(*conv_block(32), *conv_block(64), nn.Flatten(),
                               nn.Dense(128, activation="relu"), nn.Dropout(0.25),
                               nn.Dense(10))


def train_step(net, loss_fn, opt, xb, yb):
    with autograd.record():
        loss = loss_fn(net(xb), yb)
    loss.backward()
    opt.step(xb.shape[0])  # the batch's mean gradient
    return loss


def run_epoch(step, x, y, batch, rng):
    """One pass over the training set with step(xb, yb): mean loss and seconds per step."""
    losses = []
    start = time.perf_counter()
    for xb, yb in batches(x, y, batch, rng):
        losses.append(step(xb, yb))
    total = float(sum(v.mean().item() for v in losses))  # reading waits for the last step
    return total / len(losses), (time.perf_counter() - start) / len(losses)


MODES = ("eager", "hybridized", "compiled")


def compare_speed(xb, yb, steps, rounds):
    """Seconds per training step and per inference in each of MODES: three copies of
    the network doing the same work, timed in alternating rounds so that a noisy
    neighbour slows them alike. Returns {(what, mode): (median, best)}."""
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    nets = {}
    for mode in MODES:
        deft.random.seed(1)
        net = build_net()
        net.initialize()
        net.hybridize(mode != "eager")
        opt = SGD(net.collect_params(), lr=0.01, momentum=0.9)
        if mode == "compiled":
            train = deft.compile_step(net, loss_fn, opt)
        else:
            def train(xb, yb, net=net, opt=opt):
                return train_step(net, loss_fn, opt, xb, yb)

        def infer(xb, yb, net=net):
            with autograd.predict_mode():
                return net(xb)
        nets[mode] = {"training step": train, "inference": infer}

    times = {}
    for what in ("training step", "inference"):
        for work in nets.values():
            work[what](xb, yb).wait_to_read()  # shapes inferred, graphs compiled
        for _ in range(rounds):
            for mode, work in nets.items():
                start = time.perf_counter()
                for _ in range(steps):
                    out = work[what](xb, yb)
                out.wait_to_read()
                times.setdefault((what, mode), []).append(
                    (time.perf_counter() - start) / steps)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3 if QUICK else 15)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.00625)
    parser.add_argument("--out", default="cnn_digits", help="prefix of the exported files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    goal = 0.9 if QUICK else 0.98

    start = time.perf_counter()
    x_train, x_test, y_train, y_test = load(args.seed)
    rng = np.random.default_rng(args.seed)
    deft.random.seed(args.seed)
    net = build_net()
    net.initialize()
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    opt = SGD(net.collect_params(), lr=args.lr, momentum=0.9)
    print(f"digits: {len(x_train)} training and {len(x_test)} test images of 8x8 pixels")

    def step(xb, yb):
        return train_step(net, loss_fn, opt, xb, yb)
    for epoch in range(1, args.epochs + 1):
        mode = "eager" if epoch == 1 else "compiled"
        if epoch == 2:  # the first compiled step records and plans the step's graph
            net.hybridize()
            step = deft.compile_step(net, loss_fn, opt)
        # cosine decay: large steps first, small ones settle on a minimum at the end
        opt.lr = args.lr * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / args.epochs))
        loss, seconds = run_epoch(step, x_train, y_train, args.batch, rng)
        print(f"epoch {epoch:2d} ({mode:10s}) loss {loss:.4f}  train accuracy "
              f"{accuracy(net, x_train, y_train):.3f}  test accuracy "
              f"{accuracy(net, x_test, y_test):.3f}  {seconds * 1e6:6.0f} us/step")

    test_acc = accuracy(net, x_test, y_test)
    print(f"final test accuracy: {test_acc:.4f} (training took "
          f"{time.perf_counter() - start:.1f} s)")
    sym_file, params_file = net.export(args.out)  # the inference graph, from accuracy()
    print(f"exported {sym_file} and {params_file} (MXNet's files: SymbolBlock.imports loads them)")

    xb, yb = next(batches(x_train, y_train, args.batch, rng))
    times = compare_speed(xb, yb, steps=10 if QUICK else 30, rounds=3 if QUICK else 7)
    for what in ("training step", "inference"):
        e_med, e_min = times[what, "eager"]
        line = f"{what} (batch {args.batch}), median (best) of alternating rounds: eager " \
            f"{e_med * 1e6:.0f} us ({e_min * 1e6:.0f})"
        for mode in MODES[1:] if what == "training step" else ("hybridized",):
            med, best = times[what, mode]
            line += f"; {mode} {med * 1e6:.0f} us ({best * 1e6:.0f}), " \
                f"{e_med / med:.2f}x as fast ({e_min / best:.2f}x by the best)"
        print(line)
    print("(a training step here is mostly the convolutions' gradients, which every "
          "mode computes with the same kernels)")
    if test_acc < goal:
        raise SystemExit(f"test accuracy {test_acc:.4f} is below {goal}")


if __name__ == "__main__":
    main()
