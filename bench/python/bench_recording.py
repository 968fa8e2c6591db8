"""Recording cost per call, scaled to the machine libccv NNC was measured on.

The issue's reference figures for NNC (a 1-element sum: ~450 ns recording,
~150-350 ns with no_grad; deft's targets are half of those) come from
machines where np.add of two 1-element arrays took 280 ns. NNC cannot be
built here, but NumPy can be timed in the same run: batches of np.add
alternate with batches of deft's calls (bench/recording_calls.c, timed in
C through ctypes, the Python binding not involved), each keeps its best
batch, and deft's times are scaled by 280 ns over np.add's time here.

    build/venv/bin/python bench/python/bench_recording.py [build dir]
"""
import ctypes
import os
import sys
import timeit

import numpy as np

NNC_MACHINE_NUMPY_ADD_NS = 280.0
BATCH = 20000
ROUNDS = 40
MODES = [  # (mode number in recording_calls.c, label, target in ns on NNC's machine)
    (0, "imperative, not recording", "under 75-175 (half NNC's no-grad)"),
    (1, "deferred (recorded only)", "under 225 (half NNC's recording)"),
    (2, "imperative + autograd", "under 225 (half NNC's recording)"),
]


def load(build):
    lib = ctypes.CDLL(os.path.join(build, "bench", "libdeft_bench_calls.so"))
    lib.deft_bench_sum_ns.restype = ctypes.c_double
    lib.deft_bench_sum_ns.argtypes = [ctypes.c_int, ctypes.c_int]
    return lib


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    lib = load(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build"))
    a, b = np.ones(1, np.float32), np.ones(1, np.float32)
    timer = timeit.Timer("add(a, b)", globals={"add": np.add, "a": a, "b": b})
    lib.deft_bench_sum_ns(0, BATCH)  # warm up
    best = {"numpy": float("inf")}
    for _ in range(ROUNDS):
        best["numpy"] = min(best["numpy"], timer.timeit(BATCH) / BATCH * 1e9)
        for mode, _, _ in MODES:
            t = lib.deft_bench_sum_ns(mode, BATCH)
            if t < 0:
                sys.exit("deft_bench_sum_ns failed")
            best[mode] = min(best.get(mode, t), t)
    scale = NNC_MACHINE_NUMPY_ADD_NS / best["numpy"]
    print("recording cost, 1-element sum, scaled to NNC's machine by np.add "
          f"({NNC_MACHINE_NUMPY_ADD_NS:.0f} ns there, {best['numpy']:.0f} ns here)")
    for mode, label, target in MODES:
        print(f"  {label:26s} {best[mode]:5.0f} ns here, {best[mode] * scale:5.0f} ns there"
              f"  (target: {target})")


if __name__ == "__main__":
    main()
