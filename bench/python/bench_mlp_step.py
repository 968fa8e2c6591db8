"""The demo MLP's training step: deft eager, hybridized and compiled, against
the bare-C floor and PyTorch.

Issue 26's case: examples/python/mlp_digits.py's network (Dense 128 relu,
Dropout 0.1, Dense 64 relu, Dense 10), batch 32 of 64 features, softmax
cross-entropy, SGD with momentum. deft trains it three ways, alternating
round by round in one process: op by op (eager), hybridized under autograd
(the forward one graph, then backward and one update call), and as one
compiled graph per step (deft.compile_step: forward, loss, backward and
update in one executor run). The floor is the same step in plain C with
sgemm (bench/mlp_floor.c, built as build/bench/libdeft_bench_mlp_floor.so),
timed in the same rounds. PyTorch runs the step in a process of its own when
DEFT_TORCH_PYTHON (or this interpreter) can import torch.

Goals: compiled (deft's hybridized step) >= 2x eager, and <= 1.3x the floor.

    python bench/python/bench_mlp_step.py [--threads 1 2] [--rounds 15] [--steps 200]
"""
import ctypes
import json
import os
import sys

from step_bench import compare, parse_args, print_load, time_rounds, time_torch

BATCH, FEATURES, CLASSES = 32, 64, 10
LR, MOMENTUM = 0.01, 0.9
MODES = ("eager", "hybridized", "compiled")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def floor_library():
    path = os.environ.get("DEFT_MLP_FLOOR",
                          os.path.join(ROOT, "build", "bench", "libdeft_bench_mlp_floor.so"))
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: build the benchmarks (cmake --build build) "
                         "or set DEFT_MLP_FLOOR")
    lib = ctypes.CDLL(path)
    lib.deft_mlp_floor_run.restype = ctypes.c_double
    lib.deft_mlp_floor_run.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return lib


def run_deft(rounds, steps):
    import numpy as np

    import deft
    from deft import nn
    from deft.optim import SGD

    sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
    from mlp_digits import build_net, compiled_step, eager_step  # the demo's own steps

    rng = np.random.default_rng(0)
    xb = deft.array(rng.random((BATCH, FEATURES), dtype=np.float32))
    yb = deft.array(rng.integers(0, CLASSES, BATCH).astype(np.int64))
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    runs = {}
    for mode in MODES:
        deft.random.seed(1)
        net = build_net(in_units=FEATURES)
        net.initialize()
        opt = SGD(net.collect_params(), lr=LR, momentum=MOMENTUM)
        if mode == "compiled":
            step = compiled_step(net, loss_fn, opt)
        else:
            net.hybridize(mode == "hybridized")
            step = eager_step(net, loss_fn, opt)
        runs[mode] = lambda step=step: step(xb, yb)
    floor = floor_library()
    runs["C floor"] = lambda: floor.deft_mlp_floor_run(1, None)
    return time_rounds(runs, rounds, steps,
                       wait=lambda r: r if isinstance(r, float) else r.wait_to_read())


def run_torch(rounds, steps, threads):
    import numpy as np
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    rng = np.random.default_rng(0)
    xb = torch.from_numpy(rng.random((BATCH, FEATURES), dtype=np.float32))
    yb = torch.from_numpy(rng.integers(0, CLASSES, BATCH).astype(np.int64))
    net = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Dropout(0.1),
                        nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    return time_torch(net, opt, xb, yb, rounds, steps)


def report(threads, deft_ms, torch_ms):
    """Print one thread count's times and ratios; True where both goals are met."""
    print(f"threads {threads}:")
    rows = dict(deft_ms)
    if torch_ms:
        rows[f"PyTorch {torch_ms['version']}"] = torch_ms["PyTorch"]
    for name, t in rows.items():
        print(f"  {name:22s} min {t['min'] * 1e3:7.1f} us  median {t['median'] * 1e3:7.1f} us")
    eager, floor = deft_ms["eager"]["min"], deft_ms["C floor"]["min"]
    for mode in ("hybridized", "compiled"):
        t = deft_ms[mode]["min"]
        print(f"  {mode}: {eager / t:.2f}x as fast as eager, {t / floor:.2f}x the C floor")
    if torch_ms:
        peer = torch_ms["PyTorch"]["min"]
        print("  PyTorch / deft: " + ", ".join(f"{mode} {peer / deft_ms[mode]['min']:.2f}x"
                                               for mode in MODES))
    best = min(deft_ms[mode]["min"] for mode in ("hybridized", "compiled"))
    fast, near = eager / best >= 2, best <= 1.3 * floor
    print(f"  goals: >= 2x eager {'met' if fast else 'NOT met'} ({eager / best:.2f}x), "
          f"<= 1.3x the floor {'met' if near else 'NOT met'} ({best / floor:.2f}x)")
    return fast and near


def main():
    args = parse_args(__doc__, steps=200)
    if args.side == "torch":
        return print(json.dumps(run_torch(args.rounds, args.steps, args.threads[0])))
    if args.side == "deft":
        return print(json.dumps(run_deft(args.rounds, args.steps)))

    print_load(f"demo MLP training step, batch {BATCH} of {FEATURES}, 64-128-64-10, "
               "dropout 0.1, SGD momentum", args.rounds, args.steps)
    compare(__file__, args, report, "goals (compiled >= 2x eager, <= 1.3x the C floor)")


if __name__ == "__main__":
    main()
