"""ResNet-18 v1 inference (224x224, batch 1 and 16): deft against MXNet and PyTorch,
and the planned memory of ResNet-18's inference and training graphs.

Two of issue 25's goals:
- "ResNet-18 inference takes no longer than MXNet's time", at the same thread
  count, measured in the same run;
- "planned memory of a ResNet-18 training graph is <= 0.5 of naive allocation".

Inference: deft.vision.resnet18_v1, MXNet 1.9.1's
mx.gluon.model_zoo.vision.resnet18_v1 (both hybridized; MXNet with
static_alloc and static_shape, its fastest setting) and the same network in
plain torch.nn (torchvision is not needed), in predict mode on random weights
and inputs. Each framework runs in a server process of its own, one per
thread count (DEFT_NUM_THREADS, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set
to it; deft and PyTorch also set their own pools): the parent asks each in
turn for one round (`iters` inferences, waited for), so the rounds alternate
and a noisy neighbour slows every framework alike. A short pause between two
rounds lets the previous process's spinning OpenMP threads go to sleep. The
best and the median of the rounds are printed, and the ratios deft / peer of
the best times. MXNet runs with the Python DEFT_MXNET_PYTHON names, PyTorch
with DEFT_TORCH_PYTHON's (or this interpreter where it has them); a peer no
interpreter can import is skipped with a message. deft sets OpenBLAS to one
thread itself (its own pool splits the work).

Memory: resnet18_v1 hybridized, exported (symbol JSON and .params) and loaded
back as a deft.Symbol; a CachedOp of it (inference) and one with backward=True
(DEFT_CACHED_OP_BACKWARD: forward and the gradient of every argument, the
training graph) run once at batch --plan-batch, and DeftCachedOpGetPlanStat
gives the arena they allocated against one buffer per intermediate entry.

    python bench/python/bench_resnet.py [--threads 1 2] [--rounds1 10] [--iters1 5]
        [--rounds16 5] [--iters16 1] [--plan-batch 16]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)
HERE = os.path.dirname(SCRIPT)
SIZE, CLASSES = 224, 1000
TIME_GOAL = 1.0  # deft / MXNet
MEMORY_GOAL = 0.5  # arena / naive
PAUSE_S = 0.3  # between rounds of different processes (OpenMP spin-wait, KMP_BLOCKTIME)
# Issue 25's peers (this machine class, best of N) at 1 / 2 threads, ms per batch.
ISSUE_PEERS = {1: {"MXNet": (28.0, 15.4), "PyTorch": (36.4, 23.8)},
               16: {"MXNet": (383, 230), "PyTorch": (581, 360)}}
# Peer: (the variable naming an interpreter that has it, its module).
PEER_PYTHONS = {"MXNet": ("DEFT_MXNET_PYTHON", "mxnet"),
                "PyTorch": ("DEFT_TORCH_PYTHON", "torch")}


# --- the servers: each builds its ResNet-18, warms it up, then answers rounds ---

def deft_runner(threads, batches):
    import numpy as np

    import deft

    deft.random.seed(0)
    net = deft.vision.resnet18_v1()
    net.initialize()
    net.hybridize()
    rng = np.random.default_rng(0)
    inputs = {b: deft.array(rng.standard_normal((b, 3, SIZE, SIZE)).astype(np.float32))
              for b in batches}

    def run(batch, iters):
        for _ in range(iters):
            y = net(inputs[int(batch)])
        y.wait_to_read()

    return {"version": deft.__version__}, run


def mxnet_runner(threads, batches):
    import mxnet as mx

    mx.random.seed(0)
    net = mx.gluon.model_zoo.vision.resnet18_v1()
    net.initialize()
    net.hybridize(static_alloc=True, static_shape=True)
    inputs = {b: mx.nd.random.normal(shape=(b, 3, SIZE, SIZE)) for b in batches}

    def run(batch, iters):
        for _ in range(iters):
            y = net(inputs[int(batch)])
        y.wait_to_read()

    return {"version": mx.__version__}, run


def torch_resnet18(nn):
    """ResNet-18 v1 in plain torch.nn (torchvision's resnet18 / Gluon's resnet18_v1)."""

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, CLASSES)]
    return nn.Sequential(*layers)


def torch_runner(threads, batches):
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = torch_resnet18(torch.nn).eval()
    inputs = {b: torch.randn(b, 3, SIZE, SIZE) for b in batches}

    def run(batch, iters):
        with torch.no_grad():
            for _ in range(iters):
                net(inputs[int(batch)])

    return {"version": torch.__version__}, run


RUNNERS = {"deft": deft_runner, "MXNet": mxnet_runner, "PyTorch": torch_runner}


def serve(run, info, warmup):
    """Warm up, say "ready" (print `info`); then for each line "case iters" on stdin time
    one round of run(case, iters) and print the seconds per iteration, until stdin
    closes. Shared with bench_conv_peers.py."""
    for case in warmup:  # shapes, graphs, plans, oneDNN primitives
        run(case, 2)
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        case, iters = line.split()
        start = time.perf_counter()
        run(case, int(iters))
        print(json.dumps((time.perf_counter() - start) / int(iters)), flush=True)


class Server:
    """One framework at one thread count: `script --serve side --threads n *extra` in a
    process of its own, answering rounds (see serve)."""

    def __init__(self, python, script, side, threads, extra=()):
        env = dict(os.environ, DEFT_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        self.side, self.log = side, tempfile.TemporaryFile("w+")
        # cwd: a folder of its own, so no stray module beside it shadows the stdlib
        self.proc = subprocess.Popen(
            [python, script, "--serve", side, "--threads", str(threads), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=env, cwd=HERE)

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"{self.side} failed:\n{self.log.read()[-4000:]}")
        return json.loads(line)

    def round(self, case, iters):
        self.proc.stdin.write(f"{case} {iters}\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def alternate(servers, case, rounds, iters):
    """{side: {min, median}} in ms per iteration: one round of each server in turn."""
    times = {side: [] for side in servers}
    for _ in range(rounds):
        for side, server in servers.items():
            time.sleep(PAUSE_S)
            times[side].append(server.round(case, iters))
    return {side: summary(t) for side, t in times.items()}


def peer_python(side):
    """An interpreter that can import the peer: its variable's, or this one; else None."""
    var, module = PEER_PYTHONS[side]
    for python in (os.environ.get(var), sys.executable):
        if python and subprocess.run(
                [python, "-c", f"import {module}"], capture_output=True,
                cwd=HERE).returncode == 0:
            return python
    return None


def summary(seconds):
    return {"min": min(seconds) * 1e3, "median": statistics.median(seconds) * 1e3}


def time_inference(threads, pythons, cases):
    """{batch: {side: {min, median}}} in ms per inference, rounds alternating."""
    batches = [str(b) for b, _, _ in cases]
    servers = {side: Server(python, SCRIPT, side, threads, ["--batches", *batches])
               for side, python in pythons.items()}
    versions = {side: s.read()["version"] for side, s in servers.items()}
    results = {batch: alternate(servers, batch, rounds, iters) for batch, rounds, iters in cases}
    for server in servers.values():
        server.close()
    return results, versions


def report_inference(threads, results, versions, cases):
    """Print one thread count's figures; True where deft <= MXNet at every batch."""
    met = True
    for batch, rounds, iters in cases:
        r = results[batch]
        print(f"  batch {batch:2d} ({rounds} rounds of {iters}):")
        for side, t in r.items():
            print(f"    {side:7s} {versions[side]:12s} min {t['min']:8.2f} ms  "
                  f"median {t['median']:8.2f} ms")
        mine = r["deft"]["min"]
        for side in r:
            if side != "deft":
                print(f"    deft / {side} (here): {mine / r[side]['min']:.3f} (min), "
                      f"{r['deft']['median'] / r[side]['median']:.3f} (median)")
        for side, ms in ISSUE_PEERS[batch].items():
            if threads in (1, 2):
                print(f"    deft / {side} (issue, {ms[threads - 1]} ms): "
                      f"{mine / ms[threads - 1]:.3f}")
        if "MXNet" in r:
            ok = mine <= TIME_GOAL * r["MXNet"]["min"]
            met &= ok
            print(f"    goal deft <= MXNet (here): {'met' if ok else 'NOT met'}")
    return met


# --- planned memory ---

def plan_child(batch):
    """Arena and naive bytes of ResNet-18's inference and training executors, as JSON."""
    import numpy as np

    import deft
    from deft import serialize

    deft.random.seed(0)
    net = deft.vision.resnet18_v1()
    net.initialize()
    net.hybridize()
    x = deft.array(np.random.default_rng(0).standard_normal(
        (batch, 3, SIZE, SIZE)).astype(np.float32))
    net(x).wait_to_read()
    with tempfile.TemporaryDirectory() as folder:
        sym_file, params_file = net.export(os.path.join(folder, "resnet18_v1"))
        sym = deft.Symbol.load(sym_file)
        params = {k.split(":", 1)[1]: v for k, v in serialize.load(params_file).items()}
    params["data"] = x
    result = {}
    for name, backward in (("inference", False), ("training", True)):
        op = deft.CachedOp(sym, backward=backward)
        if backward:  # arguments, a head gradient per output, then the auxiliary states
            order = (sym.gradient(sym.list_inputs()).list_inputs()
                     + sym.list_auxiliary_states())
            heads = {n: deft.ones((batch, CLASSES)) for n in order if n not in params}
            inputs = [params[n] if n in params else heads[n] for n in order]
        else:
            order = sym.list_inputs() + sym.list_auxiliary_states()
            inputs = [params[n] for n in order]
        with deft.autograd.train_mode() if backward else deft.autograd.predict_mode():
            outs = op(*inputs)
        for y in outs if isinstance(outs, list) else [outs]:
            y.wait_to_read()
        result[name] = {stat: deft._lib.DeftCachedOpGetPlanStat(op, code) for stat, code in
                        (("arena", 0), ("naive", 1), ("inplace_only", 2), ("sharing_only", 3))}
        if backward:
            result[name]["heads"] = sorted(heads)
    print(json.dumps(result))


def report_plan(batch):
    """Print the plans' figures; True where the training graph meets the goal."""
    env = dict(os.environ, DEFT_NUM_THREADS="2", OMP_NUM_THREADS="2")
    done = subprocess.run([sys.executable, SCRIPT, "--plan-child",
                           str(batch)], env=env, capture_output=True, text=True,
                          cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"memory plan failed:\n{done.stderr[-4000:]}")
    plans = json.loads(done.stdout.splitlines()[-1])
    mib = 1 << 20
    print(f"ResNet-18 v1 memory plans at batch {batch} of 3x{SIZE}x{SIZE} (exported symbol, "
          f"DeftCachedOpGetPlanStat):")
    for name, p in plans.items():
        print(f"  {name:9s} arena {p['arena'] / mib:8.1f} MiB  naive {p['naive'] / mib:8.1f} MiB"
              f"  arena / naive {p['arena'] / p['naive']:.3f}  (in-place only "
              f"{p['inplace_only'] / p['naive']:.3f}, sharing only "
              f"{p['sharing_only'] / p['naive']:.3f} of naive)")
    ratio = plans["training"]["arena"] / plans["training"]["naive"]
    ok = ratio <= MEMORY_GOAL
    print(f"  goal training arena <= {MEMORY_GOAL} x naive: {ratio:.3f}: "
          f"{'met' if ok else 'NOT met'}")
    return ok


# --- where deft's time goes ---

def profile_child(batch, runs=2):
    """deft's hybridized inference by operator: [(name, ms, calls) per run], largest
    first, as JSON. Totals, not each call's fastest as bench_lenet.py takes them: the
    calls of one operator here differ in size (Convolution: 3x3 @56 and 1x1 @14)."""
    import numpy as np

    import deft
    from deft import profiler

    deft.random.seed(0)
    net = deft.vision.resnet18_v1()
    net.initialize()
    net.hybridize()
    x = deft.array(np.random.default_rng(0).standard_normal(
        (batch, 3, SIZE, SIZE)).astype(np.float32))
    net(x).wait_to_read()
    profiler.set_config(profile_all=True, aggregate_stats=True)
    profiler.set_state("run")
    for _ in range(runs):
        net(x).wait_to_read()
    profiler.set_state("stop")
    stats = profiler.dumps(reset=True, format="json").get("graph", {})
    ops = [(name, s["total"] / runs / 1e3, s["count"] / runs) for name, s in stats.items()]
    print(json.dumps(sorted(ops, key=lambda row: -row[1])))


def report_profile(batch):
    """Print where deft's time goes at one thread, operator by operator."""
    env = dict(os.environ, DEFT_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, SCRIPT, "--profile-child", str(batch)], env=env,
                          capture_output=True, text=True, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"profile failed:\n{done.stderr[-4000:]}")
    ops = json.loads(done.stdout.splitlines()[-1])
    total = sum(ms for _, ms, _ in ops)
    print(f"deft at batch {batch}, 1 thread, by operator (profiler; {total:.1f} ms in all): "
          + ", ".join(f"{name} {ms:.1f} ms ({calls:g} calls)" for name, ms, calls in ops[:8]))
    # executors fold each BatchNorm (and a relu after it) into its convolution
    # (_conv_bn, _conv_bn_relu: core/graph/fold_bn.c)
    conv = sum(ms for name, ms, _ in ops if name == "Convolution" or name.startswith("_conv_bn"))
    print(f"  Convolution (with the BatchNorm folded into it) is {conv / total:.0%} of it: "
          f"bench_conv_peers.py times each of ResNet-18's convolution shapes against the peers")


def load_line(when):
    load = os.getloadavg()
    return (f"load average {when}{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
            f"on {os.cpu_count()} cores")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds1", type=int, default=10, help="rounds at batch 1")
    parser.add_argument("--iters1", type=int, default=5, help="inferences a round, batch 1")
    parser.add_argument("--rounds16", type=int, default=5, help="rounds at batch 16")
    parser.add_argument("--iters16", type=int, default=1, help="inferences a round, batch 16")
    parser.add_argument("--plan-batch", type=int, default=16)
    parser.add_argument("--serve", choices=tuple(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--batches", type=int, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--plan-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        info, run = RUNNERS[args.serve](args.threads[0], args.batches)
        return serve(run, info, args.batches)
    if args.plan_child:
        return plan_child(args.plan_child)
    if args.profile_child:
        return profile_child(args.profile_child)

    cases = [(1, args.rounds1, args.iters1), (16, args.rounds16, args.iters16)]
    print(f"ResNet-18 v1 inference, 3x{SIZE}x{SIZE} float32, predict mode, hybridized; "
          f"best and median of the rounds; {load_line('')}", flush=True)
    pythons = {"deft": sys.executable}
    for side in PEER_PYTHONS:
        python = peer_python(side)
        if python:
            pythons[side] = python
        else:
            var = PEER_PYTHONS[side][0]
            print(f"{side}: not importable (set {var} to a Python that has it): skipped")
    met = True
    for threads in args.threads:
        print(f"threads {threads}:", flush=True)
        results, versions = time_inference(threads, pythons, cases)
        met &= report_inference(threads, results, versions, cases)
        print(f"  {load_line('now ')}", flush=True)
    report_profile(16)
    if "MXNet" in pythons:
        print(f"goal (ResNet-18 inference no longer than MXNet's): {'met' if met else 'NOT met'}")
    met_plan = report_plan(args.plan_batch)
    print(f"goal (training plan <= {MEMORY_GOAL} of naive): {'met' if met_plan else 'NOT met'}")
    print(load_line("after: "))


if __name__ == "__main__":
    main()
