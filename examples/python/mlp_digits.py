"""Train an MLP on scikit-learn's handwritten digits with deft's training front end.

The data set ships inside scikit-learn (nothing is downloaded). A DataLoader
shuffles and batches it, a Trainer applies SGD with momentum under a cosine
learning-rate schedule with warmup, and an Accuracy metric and a progress
bar follow each epoch. The first epoch runs eagerly, operator by operator.
Then the network is hybridized and its whole training step compiled
(deft.compile_step): forward, loss, backward and the Trainer's update are
recorded once under deferred compute as one graph, and each step is one run
of a memory-planned executor.

The script prints loss and accuracy per epoch, the test accuracy, and how
much faster a hybridized step is than an eager one (measured in this run).
It writes the exported graph, a log of the epochs (JSON lines), and the loss
and accuracy curves as a PNG when matplotlib is installed.

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
from deft.data import ArrayDataset, DataLoader  # noqa: E402
from deft.lr_scheduler import CosineScheduler  # noqa: E402
from deft.metric import Accuracy  # noqa: E402


def load(seed):
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    return train_test_split(x, digits.target.astype(np.int64), test_size=0.25,
                            random_state=seed, stratify=digits.target)


def build_net(in_units=0):
    """The MLP; in_units=0 leaves the first layer's input size to the first batch."""
    return nn.HybridSequential(nn.Dense(128, activation="relu", in_units=in_units),
                               nn.Dropout(0.1),
                               nn.Dense(64, activation="relu", in_units=128),
                               nn.Dense(10, in_units=64))


def make_trainer(net, lr, steps):
    """SGD with momentum; the learning rate warms up over the first epoch's worth of
    steps, then follows a cosine down to 1% of lr by the last step."""
    schedule = CosineScheduler(max_update=steps, base_lr=lr, final_lr=lr / 100,
                               warmup_steps=min(50, steps // 4))
    return deft.Trainer(net.collect_params(), "sgd",
                        {"learning_rate": lr, "momentum": 0.9, "lr_scheduler": schedule})


def eager_step(net, loss_fn, trainer):
    """A training step under autograd: record the forward (op by op, or one graph call
    when net is hybridized), backward through the per-sample losses, then the update
    with their mean gradient."""
    def step(data, label):
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(data.shape[0])
        return loss
    return step


def compiled_step(net, loss_fn, trainer):
    """The whole step as one graph: one C call per step."""
    net.hybridize()
    return deft.compile_step(net, loss_fn, trainer)


def run_epoch(step, loader, desc):
    """One pass over the loader: the mean loss and seconds per step."""
    losses = []
    start = time.perf_counter()
    for data, label in deft.progress(loader, desc=desc, leave=False):
        losses.append(step(data, label))
    total = float(sum(v.mean().item() for v in losses))  # reading waits for the last step
    return total / len(losses), (time.perf_counter() - start) / len(losses)


def accuracy(net, x, y):
    metric = Accuracy()
    with autograd.predict_mode():
        metric.update(deft.array(y), net(deft.array(x)))
    return metric.get()[1]


def compare_speed(data, label, steps=40, rounds=15):
    """Seconds per training step, eager and hybridized: two copies of the same
    network doing the same steps, timed in alternating rounds, so a noisy
    neighbour slows both alike. Returns {mode: (min, median)}."""
    runs, loss_fn = {}, nn.SoftmaxCrossEntropyLoss()
    for mode in ("eager", "hybridized"):
        deft.random.seed(1)
        net = build_net(in_units=data.shape[1])
        net.initialize()
        trainer = deft.Trainer(net.collect_params(), "sgd",
                               {"learning_rate": 0.01, "momentum": 0.9})
        make = eager_step if mode == "eager" else compiled_step
        runs[mode] = make(net, loss_fn, trainer)
    times = {mode: [] for mode in runs}
    for _ in range(rounds):
        for mode, step in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                loss = step(data, label)
            loss.wait_to_read()
            times[mode].append((time.perf_counter() - start) / steps)
    return {mode: (min(t), statistics.median(t)) for mode, t in times.items()}


def save_curves(log, prefix):
    """The loss and accuracy curves as a PNG, when matplotlib is there."""
    try:
        path = log.plot(prefix + "_curves.png", metrics=["loss", "train_accuracy",
                                                         "test_accuracy"])
        print(f"wrote the loss and accuracy curves to {path}")
    except ImportError:
        print("curves not drawn: matplotlib is not installed (pip install matplotlib)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--out", default="mlp_digits", help="prefix of the files written")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x_train, x_test, y_train, y_test = load(args.seed)
    # full batches only: every step has one graph shape
    loader = DataLoader(ArrayDataset(x_train, y_train), batch_size=args.batch, shuffle=True,
                        last_batch="discard", seed=args.seed)
    deft.random.seed(args.seed)
    net = build_net()
    net.initialize(deft.init.Xavier())
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    trainer = make_trainer(net, args.lr, args.epochs * len(loader))
    step = eager_step(net, loss_fn, trainer)
    if os.path.exists(args.out + "_log.jsonl"):  # a log appends: start this run's afresh
        os.remove(args.out + "_log.jsonl")
    log = deft.TrainingLog(args.out + "_log.jsonl")
    print(f"digits: {len(x_train)} training and {len(x_test)} test images of 8x8 pixels")

    for epoch in range(1, args.epochs + 1):
        mode = "eager" if epoch == 1 else "hybridized"
        if epoch == 2:  # the first compiled step records and plans the step's graph
            step = compiled_step(net, loss_fn, trainer)
        loss, seconds = run_epoch(step, loader, f"epoch {epoch}")
        log.log(epoch=epoch, mode=mode, loss=loss,
                train_accuracy=accuracy(net, x_train, y_train),
                test_accuracy=accuracy(net, x_test, y_test),
                lr=trainer.learning_rate, us_per_step=round(seconds * 1e6))

    test_acc = accuracy(net, x_test, y_test)
    print(f"final test accuracy: {test_acc:.3f}")
    sym_file, params_file = net.export(args.out)
    print(f"exported {sym_file} and {params_file} (MXNet's files: SymbolBlock.imports loads them)")
    print(f"wrote the epochs' log to {args.out}_log.jsonl")
    save_curves(log, args.out)

    data, label = next(iter(loader))
    speed = compare_speed(data, label)
    (eager, eager_median), (hybrid, hybrid_median) = speed["eager"], speed["hybridized"]
    print(f"training step (batch {args.batch}), best and median of 15 alternating rounds: "
          f"eager {eager * 1e6:.0f} us ({eager_median * 1e6:.0f}), hybridized "
          f"{hybrid * 1e6:.0f} us ({hybrid_median * 1e6:.0f}): hybridized is "
          f"{eager / hybrid:.2f}x as fast ({eager_median / hybrid_median:.2f}x by the medians)")
    if test_acc < 0.95:
        raise SystemExit(f"test accuracy {test_acc:.3f} is below 0.95")


if __name__ == "__main__":
    main()
