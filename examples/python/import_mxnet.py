"""Run models that MXNet 1.9.1 exported, with deft.

MXNet's HybridBlock.export writes a graph (`name-symbol.json`) and its
parameters (`name-0000.params`, MXNet's binary NDArray-list format). deft
loads both with nn.SymbolBlock.imports, as MXNet's Gluon does, and runs the
graph. The models come from deft's MXNet conformance corpus
(tests/mxnet/corpus, made by tests/mxnet/make_corpus.py), which also holds the
inputs MXNet was given and the outputs it computed: the script prints deft's
output and its largest difference from MXNet's, and fails above 1e-5 (relative
to the output's magnitude, for ResNet-18's larger values).

    python examples/python/import_mxnet.py [--models model_lenet model_resnet18_v1]

ResNet-18's parameters (45 MB) are not committed: the corpus made them from a
seed with tests/mxnet/corpus_values.py, so they are rebuilt the same way here
(NumPy only) and written to a temporary .params file with deft.nd.save first.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

import deft
from deft import autograd, nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "mxnet", "corpus")
TOLERANCE = 1e-5


def case(name):
    with open(os.path.join(CORPUS, "manifest.json")) as f:
        cases = {c["name"]: c for c in json.load(f)["cases"]}
    if name not in cases:
        raise SystemExit(f"{name} is not in the corpus ({CORPUS}/manifest.json)")
    return cases[name]


def rebuild_params(c, path):
    """Write the parameters the corpus generator made from the case's seed (the file
    was too large to commit) under MXNet's export names, "arg:" and "aux:"."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "mxnet"))
    from corpus_values import param_values  # the generator's own recipe
    arrays = {f"{kind}:{name}": deft.array(param_values(c["seed"], name, shape))
              for kind, table in (("arg", c["params"]), ("aux", c["aux"]))
              for name, shape in table.items()}
    deft.nd.save(path, arrays)
    print(f"  rebuilt {len(arrays)} parameter arrays from seed {c['seed']} "
          f"(tests/mxnet/corpus_values.py) into {path}")


def run(name, workdir):
    c = case(name)
    files = {k: os.path.join(CORPUS, v) for k, v in c["files"].items()}
    print(f"{name}: {os.path.basename(files['symbol'])} + {os.path.basename(files['params'])}")
    if not c["params_committed"]:
        files["params"] = os.path.join(workdir, os.path.basename(files["params"]))
        rebuild_params(c, files["params"])
    net = nn.SymbolBlock.imports(files["symbol"], c["data"], files["params"])
    inputs = deft.nd.load(files["inputs"])
    want = deft.nd.load(files["outputs"])[c["outputs"][0]].asnumpy()
    with autograd.predict_mode():  # as MXNet ran it: BatchNorm uses its moving statistics
        got = net(*[inputs[n] for n in c["data"]]).asnumpy()
    print(f"  input {tuple(inputs[c['data'][0]].shape)}, output {got.shape}: "
          f"{np.array2string(got.ravel()[:6], precision=4)}"
          f"{' ...' if got.size > 6 else ''}")
    if got.ndim == 2:
        print(f"  predicted classes {got.argmax(axis=1).tolist()}, "
              f"MXNet's {want.argmax(axis=1).tolist()}")
    diff = float(np.abs(got.astype(np.float64) - want).max())
    scale = max(1.0, float(np.abs(want).max()))
    print(f"  max |deft - MXNet| = {diff:.3g} (output magnitude up to {scale:.3g})")
    return diff / scale


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["model_lenet", "model_resnet18_v1"],
                        help="corpus cases to run (see tests/mxnet/corpus/manifest.json)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        worst = {name: run(name, workdir) for name in args.models}
    bad = {k: v for k, v in worst.items() if v > TOLERANCE}
    if bad:
        raise SystemExit(f"deft differs from MXNet by more than {TOLERANCE}: {bad}")
    print(f"all {len(worst)} models match MXNet within {TOLERANCE}")


if __name__ == "__main__":
    main()
