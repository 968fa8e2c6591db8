"""How many of MXNet 1.9.1's operators deft registers (the count the README keeps).

mxnet-1.9.1-operators.txt lists every name MXNet 1.9.1 registers
(MXListAllOpNames, written by scripts/mxnet-oracle.sh ops), so this needs no
MXNet. Run: python tests/mxnet/operator_count.py [--missing]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Names of MXNet's NumPy front end and of its gradient internals: deft's legacy
# names are counted against MXNet's legacy ones.
NOT_LEGACY = ("_np", "_backward_")


def counts(deft_names):
    with open(os.path.join(HERE, "mxnet-1.9.1-operators.txt")) as f:
        mxnet = set(f.read().split())
    legacy = {n for n in mxnet if not n.startswith(NOT_LEGACY)}
    return {"mxnet": len(mxnet), "legacy": len(legacy), "deft": len(deft_names),
            "shared": len(mxnet & deft_names), "legacy_shared": len(legacy & deft_names),
            "missing": sorted(legacy - deft_names)}


def line(c):
    """The README's sentence."""
    return (f"deft registers {c['deft']} operator names; {c['legacy_shared']} of MXNet 1.9.1's "
            f"{c['legacy']} operators outside its NumPy front end and gradient internals")


if __name__ == "__main__":
    import deft
    c = counts(set(deft._lib.DeftListOperators()))
    print(line(c))
    if "--missing" in sys.argv:
        print("missing:", " ".join(c["missing"]))
