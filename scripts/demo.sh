#!/usr/bin/env bash
# deft's main job: install what is missing, build deft and its Python
# package, and train the demo MLP on handwritten digits (eager, then
# hybridized through deferred compute), writing the exported graph, its log
# and its curves to build/; a checkpoint-and-resume run of it;
# then a CNN on the same digits, and models MXNet exported (tests/mxnet/corpus).
set -euo pipefail
source "$(dirname "$0")/setup.sh"

deft_install_packages
deft_build build
deft_python_env
"$DEFT_VENV/bin/python" "$DEFT_ROOT/examples/python/mlp_digits.py" --out "$DEFT_ROOT/build/mlp_digits"
"$DEFT_VENV/bin/python" "$DEFT_ROOT/examples/python/checkpoint_resume.py" --out "$DEFT_ROOT/build/ckpt"
"$DEFT_VENV/bin/python" "$DEFT_ROOT/examples/python/cnn_digits.py" --out "$DEFT_ROOT/build/cnn_digits"
"$DEFT_VENV/bin/python" "$DEFT_ROOT/examples/python/import_mxnet.py"
