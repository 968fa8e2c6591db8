"""What the training-step benchmarks share (bench_lenet.py, bench_mlp_step.py).

Each side of a comparison (deft, PyTorch) runs in a process of its own per
thread count, because DEFT_NUM_THREADS is read when deft starts; the child
prints its results as one JSON line. Within a process the ways of training
alternate round by round, so a noisy neighbour slows them alike.
"""
import json
import os
import statistics
import subprocess
import sys
import time


def summary(seconds):
    """{min, median} in ms of a list of seconds."""
    return {"min": min(seconds) * 1e3, "median": statistics.median(seconds) * 1e3}


def time_rounds(runs, rounds, steps, wait=lambda result: result.wait_to_read()):
    """{name: {min, median}} in ms per step: each of `runs` (name -> a function doing
    one step and returning something `wait` waits for) does `steps` steps a round,
    the runs alternating, after a warm-up of 3 steps each."""
    for run in runs.values():
        for _ in range(3):
            wait(run())
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                result = run()
            wait(result)
            times[name].append((time.perf_counter() - start) / steps)
    return {name: summary(t) for name, t in times.items()}


def torch_python():
    """An interpreter that can import torch: DEFT_TORCH_PYTHON, or this one; else None."""
    for python in (os.environ.get("DEFT_TORCH_PYTHON"), sys.executable):
        if python and subprocess.run([python, "-c", "import torch"],
                                     capture_output=True).returncode == 0:
            return python
    return None


def measure(script, python, side, threads, args):
    """Run `script --child side` at `threads` threads under `python`; its JSON result."""
    env = dict(os.environ, DEFT_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS="1")
    cmd = [python, os.path.abspath(script), "--child", side, "--threads", str(threads),
           "--rounds", str(args.rounds), "--steps", str(args.steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{side} at {threads} thread(s) failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def print_load(what, rounds, steps):
    """The header line with the load average, and a warning when the machine is busy."""
    load = os.getloadavg()
    print(f"{what}; best and median of {rounds} rounds of {steps} steps; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores", flush=True)
    if load[0] > os.cpu_count():
        print(f"the machine is busy (load {load[0]:.1f} on {os.cpu_count()} cores): every "
              f"time below is inflated, the multi-threaded ones most")


def parse_args(doc, steps):
    """The step benchmarks' command line: --threads, --rounds, --steps (and --child)."""
    import argparse
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--child", choices=("deft", "torch"), dest="side",
                        help=argparse.SUPPRESS)
    return parser.parse_args()


def compare(script, args, report, goal):
    """Per thread count: deft's side and PyTorch's (when some Python has torch), each in
    a process of its own, then report(threads, deft, torch or None) -> goals met."""
    python = torch_python()
    if python is None:
        print("PyTorch: not importable here (set DEFT_TORCH_PYTHON to a Python that has it)")
    met = True
    for threads in args.threads:
        deft_ms = measure(script, sys.executable, "deft", threads, args)
        torch_ms = measure(script, python, "torch", threads, args) if python else None
        met &= report(threads, deft_ms, torch_ms)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{goal}: {'met' if met else 'NOT met'}")


def time_torch(net, opt, xb, yb, rounds, steps):
    """{"PyTorch": {min, median}, "version"}: PyTorch's step of net under cross-entropy."""
    import torch
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(xb), yb).backward()
        opt.step()

    result = time_rounds({"PyTorch": step}, rounds, steps, wait=lambda _: None)
    return dict(result, version=torch.__version__)
