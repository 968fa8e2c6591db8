"""Train an MLP on scikit-learn's handwritten digits with deft.

The data set ships inside scikit-learn (nothing is downloaded). The first
epoch runs eagerly, operator by operator; then the network is hybridized and
its whole training step compiled (deft.compile_step): forward, loss,
backward and the optimizer's update are recorded once under deferred
compute as one graph, and each step is one run of a memory-planned executor.
The script prints loss and accuracy per epoch, the test accuracy, how much
faster a hybridized step is than an eager one (measured in this run), and
writes the exported graph.

    python examples/python/mlp_digits.py [--epochs 12] [--out mlp_digits]
"""
import argparse
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


def load(seed):
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
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


def eager_step(net, loss_fn, opt):
    """A training step under autograd: record the forward (op by op, or one graph call
    when net is hybridized), backward, then the optimizer's update."""
    def step(xb, yb):
        with autograd.record():
            loss = loss_fn(net(xb), yb)
        loss.backward()  # of the per-sample losses: their sum
        opt.step(xb.shape[0])  # divided by the batch size: the batch's mean gradient
        return loss
    return step


def compiled_step(net, loss_fn, opt):
    """The whole step as one graph (its gradients divided by the batch size, as
    opt.step(batch_size) does)."""
    net.hybridize()
    return deft.compile_step(net, loss_fn, opt)


def run_epoch(step, x, y, batch, rng):
    """One pass over the training set: mean loss and seconds per step."""
    losses, steps = [], 0
    start = time.perf_counter()
    for xb, yb in batches(x, y, batch, rng):
        losses.append(step(xb, yb))
        steps += 1
    total = float(sum(v.mean().item() for v in losses))  # reading waits for the last step
    return total / steps, (time.perf_counter() - start) / steps


def build_net(in_units=0):
    """The MLP; in_units=0 leaves the first layer's input size to the first batch."""
    return nn.HybridSequential(nn.Dense(128, activation="relu", in_units=in_units),
                               nn.Dropout(0.1),
                               nn.Dense(64, activation="relu", in_units=128),
                               nn.Dense(10, in_units=64))


def compare_speed(xb, yb, steps=40, rounds=15):
    """Milliseconds per training step, eager and hybridized: two copies of the
    same network doing the same steps, timed in alternating rounds, so a noisy
    neighbour slows both alike. Returns {mode: (min, median)}."""
    runs, loss_fn = {}, nn.SoftmaxCrossEntropyLoss()
    for mode in ("eager", "hybridized"):
        deft.random.seed(1)
        net = build_net(in_units=xb.shape[1])
        net.initialize()
        opt = SGD(net.collect_params(), lr=0.01, momentum=0.9)
        if mode == "eager":
            runs[mode] = eager_step(net, loss_fn, opt)
        else:
            runs[mode] = compiled_step(net, loss_fn, opt)
    times = {mode: [] for mode in runs}
    for _ in range(rounds):
        for mode, step in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                loss = step(xb, yb)
            loss.wait_to_read()
            times[mode].append((time.perf_counter() - start) / steps)
    return {mode: (min(t), statistics.median(t)) for mode, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--out", default="mlp_digits", help="prefix of the exported files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x_train, x_test, y_train, y_test = load(args.seed)
    rng = np.random.default_rng(args.seed)
    deft.random.seed(args.seed)
    net = build_net()
    net.initialize()
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    opt = SGD(net.collect_params(), lr=0.1, momentum=0.9)
    step = eager_step(net, loss_fn, opt)
    print(f"digits: {len(x_train)} training and {len(x_test)} test images of 8x8 pixels")

    for epoch in range(1, args.epochs + 1):
        mode = "eager" if epoch == 1 else "hybridized"
        if epoch == 2:  # the first compiled step records and plans the step's graph
            step = compiled_step(net, loss_fn, opt)
        loss, seconds = run_epoch(step, x_train, y_train, args.batch, rng)
        print(f"epoch {epoch:2d} ({mode:10s}) loss {loss:.4f}  train accuracy "
              f"{accuracy(net, x_train, y_train):.3f}  test accuracy "
              f"{accuracy(net, x_test, y_test):.3f}  {seconds * 1e6:6.0f} us/step")

    test_acc = accuracy(net, x_test, y_test)
    print(f"final test accuracy: {test_acc:.3f}")
    sym_file, params_file = net.export(args.out)
    print(f"exported {sym_file} and {params_file} (MXNet's files: SymbolBlock.imports loads them)")

    xb, yb = next(batches(x_train, y_train, args.batch, rng))
    speed = compare_speed(xb, yb)
    (eager, eager_median), (hybrid, hybrid_median) = speed["eager"], speed["hybridized"]
    print(f"training step (batch {args.batch}), best and median of 15 alternating rounds: "
          f"eager {eager * 1e6:.0f} us ({eager_median * 1e6:.0f}), hybridized "
          f"{hybrid * 1e6:.0f} us ({hybrid_median * 1e6:.0f}): hybridized is "
          f"{eager / hybrid:.2f}x as fast ({eager_median / hybrid_median:.2f}x by the medians)")
    if test_acc < 0.95:
        raise SystemExit(f"test accuracy {test_acc:.3f} is below 0.95")


if __name__ == "__main__":
    main()
