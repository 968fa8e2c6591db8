"""Optimizer steps: deft.optim's fused update (one _step_* call per group of
parameters) against the same kernels called once per parameter, for each
optimizer, on two sets of float32 parameters: a ResNet-like mix (60
tensors, 2.5M elements, a few large) and many small ones (200 tensors of
1000 elements, where a call's cost dominates). Both alternate round by
round in one process; min and median per step, and the fused step's speed-up.

    python bench/python/bench_optimizers.py [--rounds 15] [--steps 50]
"""
import argparse

import numpy as np

import deft
from deft import optim
from deft.ndarray import invoke_text

from step_bench import print_load, time_rounds

MODELS = {
    "resnet-like": ([(256, 256, 3, 3)] * 2 + [(128, 128, 3, 3)] * 4 + [(64, 64, 3, 3)] * 6
                    + [(256,)] * 16 + [(128,)] * 16 + [(64,)] * 12 + [(1000, 512)] + [(1000,)] * 3),
    "many small": [(1000,)] * 200,
}
OPTIMIZERS = {"sgd": {"momentum": 0.9}, "nag": {}, "adam": {}, "adamw": {},
              "rmsprop": {"centered": True}, "adagrad": {}, "adadelta": {}, "lamb": {}}


def make(name, shapes):
    rng = np.random.default_rng(0)
    params = []
    for shape in shapes:
        p = deft.array(rng.standard_normal(shape).astype(np.float32) * 0.1)
        p.attach_grad()
        deft.array(rng.standard_normal(shape).astype(np.float32)).copyto(p.grad)
        params.append(p)
    return optim.create(name, params, learning_rate=1e-4, **OPTIMIZERS[name])


def per_parameter(opt):
    """The same update as opt.step(), one _step_ call per parameter."""
    opt.step()  # lays out the states
    name = "_step_" + opt.kind

    def run():
        hyper = opt.hyper_array(opt.next_hyper(), deft.cpu())
        for i, p in enumerate(opt.params):
            invoke_text(name, [p, p.grad, *opt.states[i], hyper], (), ())
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    for model, shapes in MODELS.items():
        elements = sum(int(np.prod(s)) for s in shapes)
        print_load(f"{model}: optimizer step over {len(shapes)} float32 tensors, {elements} "
                   f"elements", args.rounds, args.steps)
        for name in OPTIMIZERS:
            fused, single = make(name, shapes), make(name, shapes)
            runs = {"fused": fused.step, "per parameter": per_parameter(single)}
            ms = time_rounds(runs, args.rounds, args.steps, wait=lambda _: deft.waitall())
            f, s = ms["fused"], ms["per parameter"]
            print(f"{name:9s} fused {f['min']:.3f} ms (median {f['median']:.3f}), per parameter "
                  f"{s['min']:.3f} ms (median {s['median']:.3f}): fused is "
                  f"{s['median'] / f['median']:.2f}x as fast")
    deft.waitall()


if __name__ == "__main__":
    main()
