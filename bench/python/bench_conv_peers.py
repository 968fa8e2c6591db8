"""Conv2D 3x3, 64 -> 64, 56x56, batch 32: deft against MXNet and PyTorch, in one run.

Issue 25's convolution case (float32, NCHW, pad 1, stride 1, no bias): the
forward alone, and forward + backward (the gradients of the data and of the
weight, as training needs them), at 1 and 2 threads. deft runs through
deft.nd.Convolution (autograd for the backward), MXNet through
mx.nd.Convolution (its oneDNN kernel), PyTorch through
torch.nn.functional.conv2d. Each runs in a process of its own per thread
count and the rounds alternate between them (bench_resnet.py's servers); the
best and median of the rounds are printed with GFLOP/s (2*N*K*C*R*S*H*W for
the forward, three times that for forward + backward) and the ratios of
deft's GFLOP/s to each peer's. The goal: deft >= 0.9x the best peer's GFLOP/s.

    python bench/python/bench_conv_peers.py [--threads 1 2] [--rounds 7] [--iters 3]
"""
import argparse
import os
import sys

from bench_resnet import PEER_PYTHONS, Server, alternate, load_line, peer_python, serve

N, C, K, H, W, R = 32, 64, 64, 56, 56, 3
FORWARD_FLOP = 2 * N * K * C * R * R * H * W
FLOP = {"forward": FORWARD_FLOP, "forward+backward": 3 * FORWARD_FLOP}
GOAL = 0.9
# Issue 25's peers (this machine class, best of N) at 1 / 2 threads, ms.
ISSUE_PEERS = {"forward": {"MXNet": (50.9, 27.3), "PyTorch": (73.7, 45.1)},
               "forward+backward": {"MXNet": (176, 97.7), "PyTorch": (232, 129)}}


def deft_runner(threads):
    import numpy as np

    import deft

    rng = np.random.default_rng(0)
    x = deft.array(rng.standard_normal((N, C, H, W)).astype(np.float32))
    w = deft.array(rng.standard_normal((K, C, R, R)).astype(np.float32) * 0.05)
    head = deft.ones((N, K, H, W))
    x.attach_grad()
    w.attach_grad()

    def conv():
        return deft.nd.Convolution(x, w, kernel=(R, R), num_filter=K, pad=(1, 1), no_bias=True)

    def run(case, iters):
        for _ in range(iters):
            if case == "forward":
                y = conv()
            else:
                with deft.autograd.record():
                    y = conv()
                y.backward(head)
                y = w.grad
        y.wait_to_read()

    return {"version": deft.__version__}, run


def mxnet_runner(threads):
    import mxnet as mx

    mx.random.seed(0)
    x = mx.nd.random.normal(shape=(N, C, H, W))
    w = mx.nd.random.normal(scale=0.05, shape=(K, C, R, R))
    head = mx.nd.ones((N, K, H, W))
    x.attach_grad()
    w.attach_grad()

    def conv():
        return mx.nd.Convolution(x, w, kernel=(R, R), num_filter=K, pad=(1, 1), no_bias=True)

    def run(case, iters):
        for _ in range(iters):
            if case == "forward":
                y = conv()
            else:
                with mx.autograd.record():
                    y = conv()
                y.backward(head)
                y = w.grad
        y.wait_to_read()

    return {"version": mx.__version__}, run


def torch_runner(threads):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.randn(N, C, H, W, requires_grad=True)
    w = (torch.randn(K, C, R, R) * 0.05).requires_grad_()
    head = torch.ones(N, K, H, W)

    def run(case, iters):
        for _ in range(iters):
            if case == "forward":
                with torch.no_grad():
                    F.conv2d(x, w, padding=1)
            else:
                x.grad = w.grad = None
                F.conv2d(x, w, padding=1).backward(head)

    return {"version": torch.__version__}, run


RUNNERS = {"deft": deft_runner, "MXNet": mxnet_runner, "PyTorch": torch_runner}


def report(threads, case, result, versions):
    """Print one case at one thread count; True where deft reaches GOAL x the best peer."""
    gflops = {side: FLOP[case] / (t["min"] * 1e-3) / 1e9 for side, t in result.items()}
    print(f"  {case}:")
    for side, t in result.items():
        print(f"    {side:7s} {versions[side]:12s} min {t['min']:8.2f} ms  median "
              f"{t['median']:8.2f} ms  {gflops[side]:6.1f} GFLOP/s")
    for side in result:
        if side != "deft":
            print(f"    deft / {side} GFLOP/s (here): {gflops['deft'] / gflops[side]:.3f}")
    if threads in (1, 2):
        for side, ms in ISSUE_PEERS[case].items():
            print(f"    deft / {side} GFLOP/s (issue, {ms[threads - 1]} ms): "
                  f"{ms[threads - 1] / result['deft']['min']:.3f}")
    peers = {side: g for side, g in gflops.items() if side != "deft"}
    if not peers:
        return True
    best = max(peers, key=peers.get)
    ok = gflops["deft"] >= GOAL * peers[best]
    print(f"    goal deft >= {GOAL}x the best peer ({best}, here): "
          f"{gflops['deft'] / peers[best]:.3f}x: {'met' if ok else 'NOT met'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=3, help="calls a round")
    parser.add_argument("--serve", choices=tuple(RUNNERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        info, run = RUNNERS[args.serve](args.threads[0])
        return serve(run, info, FLOP)

    print(f"Conv2D {R}x{R}, {C} -> {K}, {H}x{W}, batch {N}, float32, pad 1, no bias; best and "
          f"median of {args.rounds} rounds of {args.iters}; {load_line('')}", flush=True)
    pythons = {"deft": sys.executable}
    for side in PEER_PYTHONS:
        python = peer_python(side)
        if python:
            pythons[side] = python
        else:
            print(f"{side}: not importable (set {PEER_PYTHONS[side][0]} to a Python that has "
                  f"it): skipped")
    met = True
    script = os.path.abspath(__file__)
    for threads in args.threads:
        print(f"threads {threads}:", flush=True)
        servers = {side: Server(python, script, side, threads)
                   for side, python in pythons.items()}
        versions = {side: s.read()["version"] for side, s in servers.items()}
        for case in FLOP:
            met &= report(threads, case, alternate(servers, case, args.rounds, args.iters),
                          versions)
        for server in servers.values():
            server.close()
        print(f"  {load_line('now ')}", flush=True)
    print(f"goal (deft >= {GOAL}x the best peer's GFLOP/s): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
