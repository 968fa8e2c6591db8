"""MXNet 1.9.1 as an oracle in a venv of its own (scripts/mxnet-oracle.sh venv).

Its interpreter runs scripts in a subprocess without the caller's PYTHONPATH:
a path that brings another NumPy (PyTorch's venv, NumPy 2) would break
MXNet's import of NumPy 1.23.
"""
import os
import subprocess

import pytest

MXNET_PYTHON = os.path.join(os.environ.get("DEFT_MXNET_VENV", "/work/venv-mxnet"), "bin",
                            "python")
needs_mxnet = pytest.mark.skipif(not os.path.exists(MXNET_PYTHON),
                                 reason="no MXNet 1.9.1 oracle venv (scripts/mxnet-oracle.sh "
                                        "venv)")


def run_mxnet(script, cwd, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([MXNET_PYTHON, "-c", script], check=True, cwd=cwd, timeout=timeout, env=env)
