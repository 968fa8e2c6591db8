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
Then each of ResNet-18's convolution shapes at batch 16 (forward; other
batches with --resnet-batches): where bench_resnet.py's time goes.

    python bench/python/bench_conv_peers.py [--threads 1 2] [--rounds 7] [--iters 3]
        [--resnet-rounds 3] [--resnet-batches 1 16]
"""
import argparse
import os
import sys

from bench_resnet import PEER_PYTHONS, Server, alternate, load_line, peer_python, serve

# A case: "mode:N,C,K,R,stride,H" (square images and kernels, pad R // 2, no bias).
ISSUE_SPEC = (32, 64, 64, 3, 1, 56)
ISSUE_CASES = {"forward": f"forward:{','.join(map(str, ISSUE_SPEC))}",
               "forward+backward": f"forward+backward:{','.join(map(str, ISSUE_SPEC))}"}
# ResNet-18's convolutions at 224x224 (C, K, R, stride, H; count in the net), at each batch
# of --resnet-batches:
# where bench_resnet.py's time goes, shape by shape.
RESNET18 = [((3, 64, 7, 2, 224), 1), ((64, 64, 3, 1, 56), 4), ((64, 128, 3, 2, 56), 1),
            ((64, 128, 1, 2, 56), 1), ((128, 128, 3, 1, 28), 3), ((128, 256, 3, 2, 28), 1),
            ((128, 256, 1, 2, 28), 1), ((256, 256, 3, 1, 14), 3), ((256, 512, 3, 2, 14), 1),
            ((256, 512, 1, 2, 14), 1), ((512, 512, 3, 1, 7), 3)]


def resnet_cases(batch):
    """{case: count in the net} of ResNet-18's convolutions at this batch."""
    return {f"forward:{batch},{','.join(map(str, spec))}": count for spec, count in RESNET18}


GOAL = 0.9
# Issue 25's peers (this machine class, best of N) at 1 / 2 threads, ms.
ISSUE_PEERS = {"forward": {"MXNet": (50.9, 27.3), "PyTorch": (73.7, 45.1)},
               "forward+backward": {"MXNet": (176, 97.7), "PyTorch": (232, 129)}}


def parse(case):
    """(mode, (N, C, K, R, stride, H)) of a case name."""
    mode, spec = case.split(":")
    return mode, tuple(int(v) for v in spec.split(","))


def flop(case):
    """Multiply-adds x 2 of the forward; x 3 with the backward (data and weight)."""
    mode, (n, c, k, r, stride, h) = parse(case)
    out = (h + 2 * (r // 2) - r) // stride + 1
    forward = 2 * n * k * c * r * r * out * out
    return forward * (3 if mode == "forward+backward" else 1)


def make_runner(setup):
    """run(case, iters) over cases whose arrays setup(spec) makes on first use and whose
    setup returns (forward(), forward_backward())."""
    made = {}

    def run(case, iters):
        mode, spec = parse(case)
        if spec not in made:
            made[spec] = setup(spec)
        step = made[spec][0 if mode == "forward" else 1]
        for _ in range(iters):
            y = step()
        if y is not None:
            y.wait_to_read()

    return run


def deft_runner(threads):
    import numpy as np

    import deft

    rng = np.random.default_rng(0)

    def setup(spec):
        n, c, k, r, stride, h = spec
        x = deft.array(rng.standard_normal((n, c, h, h)).astype(np.float32))
        w = deft.array(rng.standard_normal((k, c, r, r)).astype(np.float32) * 0.05)
        x.attach_grad()
        w.attach_grad()

        def forward():
            return deft.nd.Convolution(x, w, kernel=(r, r), stride=(stride, stride),
                                       pad=(r // 2, r // 2), num_filter=k, no_bias=True)

        def forward_backward():
            with deft.autograd.record():
                y = forward()
            y.backward(deft.ones(y.shape))
            return w.grad

        return forward, forward_backward

    return {"version": deft.__version__}, make_runner(setup)


def mxnet_runner(threads):
    import mxnet as mx

    mx.random.seed(0)

    def setup(spec):
        n, c, k, r, stride, h = spec
        x = mx.nd.random.normal(shape=(n, c, h, h))
        w = mx.nd.random.normal(scale=0.05, shape=(k, c, r, r))
        x.attach_grad()
        w.attach_grad()

        def forward():
            return mx.nd.Convolution(x, w, kernel=(r, r), stride=(stride, stride),
                                     pad=(r // 2, r // 2), num_filter=k, no_bias=True)

        def forward_backward():
            with mx.autograd.record():
                y = forward()
            y.backward(mx.nd.ones(y.shape))
            return w.grad

        return forward, forward_backward

    return {"version": mx.__version__}, make_runner(setup)


def torch_runner(threads):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def setup(spec):
        n, c, k, r, stride, h = spec
        x = torch.randn(n, c, h, h, requires_grad=True)
        w = (torch.randn(k, c, r, r) * 0.05).requires_grad_()

        def forward():
            with torch.no_grad():
                F.conv2d(x, w, stride=stride, padding=r // 2)

        def forward_backward():
            x.grad = w.grad = None
            y = F.conv2d(x, w, stride=stride, padding=r // 2)
            y.backward(torch.ones_like(y))

        return forward, forward_backward

    return {"version": torch.__version__}, make_runner(setup)


RUNNERS = {"deft": deft_runner, "MXNet": mxnet_runner, "PyTorch": torch_runner}


def gflops_of(case, result):
    return {side: flop(case) / (t["min"] * 1e-3) / 1e9 for side, t in result.items()}


def report(threads, name, result, versions):
    """Print the issue's case at one thread count; True where deft reaches GOAL x the
    best peer's GFLOP/s."""
    gflops = gflops_of(ISSUE_CASES[name], result)
    print(f"  {name}:")
    for side, t in result.items():
        print(f"    {side:7s} {versions[side]:12s} min {t['min']:8.2f} ms  median "
              f"{t['median']:8.2f} ms  {gflops[side]:6.1f} GFLOP/s")
    for side in result:
        if side != "deft":
            print(f"    deft / {side} GFLOP/s (here): {gflops['deft'] / gflops[side]:.3f}")
    if threads in (1, 2):
        for side, ms in ISSUE_PEERS[name].items():
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


def report_resnet(batch, results):
    """Print ResNet-18's convolutions, GFLOP/s each and ms in the whole net (x count)."""
    print(f"  ResNet-18's convolutions, forward, batch {batch} (C->K RxR /stride @H, x count in "
          "the net): GFLOP/s, and ms in the net")
    totals = {}
    for case, count in resnet_cases(batch).items():
        result = results[case]
        gflops = gflops_of(case, result)
        _, (_, c, k, r, stride, h) = parse(case)
        cells = []
        for side, t in result.items():
            totals[side] = totals.get(side, 0.0) + count * t["min"]
            cells.append(f"{side} {gflops[side]:6.1f} ({count * t['min']:6.1f} ms)")
        print(f"    {c:3d}->{k:3d} {r}x{r} /{stride} @{h:3d} x{count}: " + "  ".join(cells))
    print("    all 20: " + ", ".join(f"{side} {ms:.1f} ms" for side, ms in totals.items())
          + "".join(f"; deft / {side} {totals['deft'] / ms:.3f}" for side, ms in totals.items()
                    if side != "deft"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=7,
                        help="rounds of the issue's case (0: skip it)")
    parser.add_argument("--iters", type=int, default=3, help="calls a round")
    parser.add_argument("--resnet-rounds", type=int, default=3,
                        help="rounds of one call for ResNet-18's shapes (0: skip them)")
    parser.add_argument("--resnet-batches", type=int, nargs="+", default=[16],
                        help="batches of ResNet-18's shapes (1 shows how one image's work "
                             "is split between threads)")
    parser.add_argument("--serve", choices=tuple(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--cases", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        info, run = RUNNERS[args.serve](args.threads[0])
        return serve(run, info, args.cases)

    print(f"Conv2D {ISSUE_SPEC[3]}x{ISSUE_SPEC[3]}, {ISSUE_SPEC[1]} -> {ISSUE_SPEC[2]}, "
          f"{ISSUE_SPEC[5]}x{ISSUE_SPEC[5]}, batch {ISSUE_SPEC[0]}, float32, pad 1, no bias; "
          f"best and median of {args.rounds} rounds of {args.iters}; {load_line('')}",
          flush=True)
    pythons = {"deft": sys.executable}
    for side in PEER_PYTHONS:
        python = peer_python(side)
        if python:
            pythons[side] = python
        else:
            print(f"{side}: not importable (set {PEER_PYTHONS[side][0]} to a Python that has "
                  f"it): skipped")
    issue = list(ISSUE_CASES.items()) if args.rounds else []
    resnet = {batch: resnet_cases(batch) for batch in args.resnet_batches} if args.resnet_rounds \
        else {}
    cases = [case for _, case in issue] + [case for c in resnet.values() for case in c]
    met = True
    script = os.path.abspath(__file__)
    for threads in args.threads:
        print(f"threads {threads}:", flush=True)
        servers = {side: Server(python, script, side, threads, ["--cases", *cases])
                   for side, python in pythons.items()}
        versions = {side: s.read()["version"] for side, s in servers.items()}
        for name, case in issue:
            met &= report(threads, name, alternate(servers, case, args.rounds, args.iters),
                          versions)
        for batch, batch_cases in resnet.items():
            report_resnet(batch, {case: alternate(servers, case, args.resnet_rounds, 1)
                                  for case in batch_cases})
        for server in servers.values():
            server.close()
        print(f"  {load_line('now ')}", flush=True)
    if issue:
        print(f"goal (deft >= {GOAL}x the best peer's GFLOP/s): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
