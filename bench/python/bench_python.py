"""Python binding benchmarks, each against a reference measured in this run.

- Per-call cost of `x + 1` on a 1-element array: deft.NDArray vs NumPy
  (target: at most 3x NumPy), with the layers underneath shown apart: the
  raw SWIG call (_deft.DeftImperativeInvoke) and an empty Python call.
- The typed function of the same operator (deft.nd._internal._plus_scalar)
  against the operator `x + 1` (target: at most 1.3x).
(The demo MLP's training step is bench_mlp_step.py's.)

    build/venv/bin/python bench/python/bench_python.py
"""
import os
import timeit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import deft  # noqa: E402
from deft import _deft  # noqa: E402

ROUNDS = 15


def per_call(fn, number=20000):
    """Best of ROUNDS rounds, in microseconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=ROUNDS)) / number * 1e6


def overhead():
    x = deft.array([1.0])
    a = np.array([1.0], np.float32)
    op = _deft.DeftGetOperator("_plus_scalar")
    keys, vals, outs = ("scalar",), ("1",), (None,)
    invoke = _deft.DeftImperativeInvoke
    typed = deft.nd._internal._plus_scalar
    results = {}
    for _ in range(3):  # interleave the kinds so noise hits them alike
        for name, fn in [("numpy a + 1", lambda: a + 1),
                         ("deft  x + 1", lambda: x + 1),
                         ("typed _plus_scalar", lambda: typed(x, scalar=1)),
                         ("raw SWIG invoke", lambda: invoke(op, 1, (x,), outs, 1, keys, vals)),
                         ("empty Python call", lambda: None)]:
            t = per_call(fn)
            results[name] = min(results.get(name, t), t)
    deft.waitall()
    numpy_t = results["numpy a + 1"]
    print("per-call overhead of x + 1 on a 1-element float32 array (us per call)")
    for name, t in results.items():
        print(f"  {name:18s} {t:7.3f} us   {t / numpy_t:5.2f}x NumPy")
    ratio = results["deft  x + 1"] / numpy_t
    print(f"  deft/NumPy: {ratio:.2f}x (target: at most 3x)")
    typed_ratio = results["typed _plus_scalar"] / results["deft  x + 1"]
    print(f"  typed function / operator: {typed_ratio:.2f}x (target: at most 1.3x)")
    print(f"  load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    overhead()
