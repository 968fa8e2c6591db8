"""The README's count of MXNet's operators that deft registers is current."""
import json
import os
import subprocess
import sys

import deft

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_readme_keeps_the_operator_count():
    # in a fresh interpreter: other tests register custom operators in this one
    want = subprocess.run([sys.executable, os.path.join(HERE, "operator_count.py")], check=True,
                          capture_output=True, text=True).stdout.strip()
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = " ".join(f.read().split())
    assert want in readme, f"README.md should say: {want} (python tests/mxnet/operator_count.py)"


def test_every_operator_the_corpus_uses_is_registered():
    """The model zoo's and Gluon layers' operators: the corpus names what it uses."""
    with open(os.path.join(HERE, "corpus", "manifest.json")) as f:
        used = {op for c in json.load(f)["cases"] for op in c["operators"]}
    missing = sorted(used - set(deft._lib.DeftListOperators()))
    assert missing == [], missing
