"""Checkpoint and resume: a run stopped part-way and resumed from its files
gets the same loss curve as a run that never stopped.

Three runs train the digits MLP for --epochs epochs with SGD, momentum and a
cosine schedule. The first runs straight through. The second stops after
--stop epochs and leaves a checkpoint: the parameters (MXNet's .params
format, `save_parameters`), the Trainer's states (momentum, step count and
schedule, `Trainer.save_states`) and the log of its epochs. The third starts
from nothing but those files and trains the remaining epochs.

Each epoch draws its shuffle and its dropout masks from seeds made from the
epoch's number, so a resumed epoch sees the same batches and masks as the
uninterrupted one. The script prints both curves and their largest
difference, and fails if they differ by more than float rounding.

    python examples/python/checkpoint_resume.py [--epochs 6] [--stop 3] [--out ckpt]
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import deft  # noqa: E402
from deft import autograd, nn  # noqa: E402
from deft.data import ArrayDataset, DataLoader  # noqa: E402
from deft.lr_scheduler import CosineScheduler  # noqa: E402

BATCH = 32


def dataset():
    digits = load_digits()
    return ArrayDataset((digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64))


def build(steps):
    deft.random.seed(7)
    net = nn.HybridSequential(nn.Dense(64, activation="relu"), nn.Dropout(0.1), nn.Dense(10))
    net.initialize(deft.init.Xavier())
    net.hybridize()
    schedule = CosineScheduler(max_update=steps, base_lr=0.1, final_lr=0.001, warmup_steps=20)
    trainer = deft.Trainer(net.collect_params(), "sgd",
                           {"learning_rate": 0.1, "momentum": 0.9, "lr_scheduler": schedule})
    return net, trainer


def train(data, epochs, first=0, last=None, checkpoint=None, resume=None):
    """Train epochs [first, last) of a run of `epochs`; save a checkpoint at the
    end when asked; start from one when asked. Returns the log."""
    last = epochs if last is None else last
    steps = epochs * (len(data) // BATCH)
    net, trainer = build(steps)
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    if resume:
        net.load_parameters(resume + ".params")
        trainer.load_states(resume + ".states")
        log = deft.TrainingLog.load(resume + "_log.jsonl")
    else:
        log = deft.TrainingLog()
    for epoch in range(first, last):
        deft.random.seed(1000 + epoch)  # this epoch's dropout masks
        loader = DataLoader(data, batch_size=BATCH, shuffle=True, last_batch="discard",
                            seed=epoch)  # and its order
        total = 0.0
        for x, y in loader:
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])
            total += loss.mean().item()
        log.log(epoch=epoch + 1, loss=total / len(loader), lr=trainer.learning_rate)
    if checkpoint:
        net.save_parameters(checkpoint + ".params")
        trainer.save_states(checkpoint + ".states")
        if os.path.exists(checkpoint + "_log.jsonl"):
            os.remove(checkpoint + "_log.jsonl")
        with open(os.devnull, "w") as quiet:  # the rows were printed as they came
            saved = deft.TrainingLog(checkpoint + "_log.jsonl", file=quiet)
            for row in log.records:
                saved.log(**row)
    return log


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--stop", type=int, default=3)
    parser.add_argument("--out", default="ckpt", help="prefix of the checkpoint's files")
    args = parser.parse_args()
    data = dataset()

    print(f"uninterrupted: {args.epochs} epochs")
    straight = train(data, args.epochs)
    print(f"interrupted after epoch {args.stop}: checkpoint {args.out}.params, "
          f"{args.out}.states, {args.out}_log.jsonl")
    train(data, args.epochs, last=args.stop, checkpoint=args.out)
    print("resumed from the checkpoint's files")
    resumed = train(data, args.epochs, first=args.stop, resume=args.out)

    want = np.array(straight.history["loss"])
    got = np.array(resumed.history["loss"])
    gap = float(np.abs(want - got).max())
    print(f"loss curves: uninterrupted {np.round(want, 4).tolist()}")
    print(f"             resumed       {np.round(got, 4).tolist()}")
    print(f"largest difference between the curves: {gap:.2e}")
    try:
        path = resumed.plot(args.out + "_curves.png", metrics=["loss"])
        print(f"wrote the resumed run's loss curve to {path}")
    except ImportError:
        print("curve not drawn: matplotlib is not installed (pip install matplotlib)")
    if len(got) != len(want) or gap > 1e-5:
        raise SystemExit("the resumed run's loss curve differs from the uninterrupted one")


if __name__ == "__main__":
    main()
