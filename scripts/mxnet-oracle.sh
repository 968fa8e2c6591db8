#!/usr/bin/env bash
# The MXNet 1.9.1 oracle: a virtual environment with mxnet==1.9.1 and
# numpy==1.23.5 (Python 3.11), made once at $DEFT_MXNET_VENV (default
# /work/venv-mxnet), then, from the repository:
#   - tests/mxnet/format_files.py: the MXNet-written files of test_ndarray_file.c
#   - tests/mxnet/make_corpus.py: the conformance corpus (tests/mxnet/corpus)
#   - tests/mxnet/check_writer.py: MXNet reads back what deft's writer wrote
#     (needs the deft binding, build/venv: scripts/setup.sh deft_python_env)
#   - tests/mxnet/mxnet-1.9.1-operators.txt: every operator name MXNet registers
#     (tests/mxnet/operator_count.py counts deft's against it)
# Usage: scripts/mxnet-oracle.sh [venv|format|corpus|check|ops|all]   (default all)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DEFT_MXNET_VENV:-/work/venv-mxnet}"
PYTHON="${PYTHON:-python3}"
# one thread, naive engine: the same bits on every run
export OMP_NUM_THREADS=1 MXNET_ENGINE_TYPE=NaiveEngine

make_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV"
    fi
    if ! "$VENV/bin/python" -c 'import mxnet' 2>/dev/null; then
        "$VENV/bin/pip" install -q --disable-pip-version-check mxnet==1.9.1 numpy==1.23.5
    fi
}

# Python puts the script's folder and the current one on its path: run from
# a scratch folder, so no stray file there (a bisect.py) shadows a standard module.
in_scratch() {
    local dir
    dir="$(mktemp -d)"
    (cd "$dir" && "$@")
    rm -rf "$dir"
}

step="${1:-all}"
make_venv
case "$step" in venv) exit 0 ;; esac
if [ "$step" = format ] || [ "$step" = all ]; then
    in_scratch "$VENV/bin/python" "$ROOT/tests/mxnet/format_files.py" "$ROOT/tests/mxnet/format"
fi
if [ "$step" = corpus ] || [ "$step" = all ]; then
    in_scratch "$VENV/bin/python" "$ROOT/tests/mxnet/make_corpus.py"
fi
if [ "$step" = ops ] || [ "$step" = all ]; then
    in_scratch "$VENV/bin/python" -c '
import ctypes, sys
from mxnet.base import _LIB, check_call, py_str
n, names = ctypes.c_uint(), ctypes.POINTER(ctypes.c_char_p)()
check_call(_LIB.MXListAllOpNames(ctypes.byref(n), ctypes.byref(names)))
print("\n".join(sorted(py_str(names[i]) for i in range(n.value))), end="")
' >"$ROOT/tests/mxnet/mxnet-1.9.1-operators.txt"
fi
if [ "$step" = check ] || [ "$step" = all ]; then
    out="$(mktemp -d)"
    "$ROOT/build/venv/bin/python" "$ROOT/tests/mxnet/check_writer.py" write "$out"
    in_scratch "$VENV/bin/python" "$ROOT/tests/mxnet/check_writer.py" check "$out"
    rm -rf "$out"
fi
