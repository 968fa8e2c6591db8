"""CTC loss, forward + backward: deft's CTCLoss operator (core/op/ctc_loss.c)
against the NumPy custom operator deft.nn.CTCLoss ran before it
(ctc_numpy.py), in one process, rounds alternating. Both take the same
(T, N, C) float32 activations and (N, L) labels padded with -1 (blank last),
with random label lengths from L/2 to L, and compute the losses and the
gradient of their sum under autograd. Prints min and median ms per step,
the speed-up, and the load average.

    python bench/python/bench_ctc.py [--shape T N C L] [--rounds 7] [--steps 5]
"""
import argparse

import numpy as np

import deft
from deft import autograd
from deft.ndarray import invoke

import ctc_numpy
from step_bench import print_load, time_rounds


def inputs(steps, batch, classes, length):
    rng = np.random.default_rng(0)
    data = deft.array(rng.standard_normal((steps, batch, classes)).astype(np.float32))
    label = np.full((batch, length), -1.0, np.float32)
    for n in range(batch):
        used = rng.integers(length // 2, length + 1)
        label[n, :used] = rng.integers(0, classes - 1, used)
    data.attach_grad()
    return data, deft.array(label)


def step(data, run):
    def one():
        with autograd.record():
            loss = run()
        loss.backward()
        return data.grad
    return one


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, default=[100, 32, 30, 20],
                        metavar=("T", "N", "C", "L"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    steps, batch, classes, length = args.shape
    data, label = inputs(steps, batch, classes, length)
    unknown = deft.array(-np.ones(batch, np.float32))
    runs = {
        "deft CTCLoss": step(data, lambda: invoke("CTCLoss", (data, label),
                                                  {"blank_label": "last"})),
        "NumPy custom op": step(data, lambda: invoke(ctc_numpy.OPERATOR,
                                                     (data, label, unknown, unknown))),
    }
    grads = [run().asnumpy().copy() for run in runs.values()]  # the same gradients first
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)
    print_load(f"CTC loss forward + backward, T={steps} N={batch} C={classes} L={length}, "
               f"float32", args.rounds, args.steps)
    ms = time_rounds(runs, args.rounds, args.steps)
    new, ref = ms["deft CTCLoss"], ms["NumPy custom op"]
    print(f"deft CTCLoss    {new['min']:.3f} ms (median {new['median']:.3f})")
    print(f"NumPy custom op {ref['min']:.3f} ms (median {ref['median']:.3f})")
    print(f"deft is {ref['median'] / new['median']:.1f}x as fast (medians), "
          f"{ref['min'] / new['min']:.1f}x (minima)")


if __name__ == "__main__":
    main()
