#!/usr/bin/env bash
# Benchmarks: install what is missing, build, and print ratios against
# references measured in the same run (see bench/bench_ops.c and
# bench/bench_engine.c).
set -euo pipefail
source "$(dirname "$0")/setup.sh"

deft_install_packages
deft_build build
"$DEFT_ROOT/build/bench/bench_ops" "$@"
"$DEFT_ROOT/build/bench/bench_engine"
"$DEFT_ROOT/build/bench/bench_graph"
"$DEFT_ROOT/build/bench/bench_autograd"
"$DEFT_ROOT/build/bench/bench_profiler"
"$DEFT_ROOT/build/bench/bench_half"
# built when CUDA is found; it says so and exits when there is no GPU
if [[ -x "$DEFT_ROOT/build/bench/bench_gpu" ]]; then "$DEFT_ROOT/build/bench/bench_gpu"; fi
# ResNet-18 on gpu(0) (PyTorch's times come from gpu-check's peer file); says so without a GPU
"$DEFT_ROOT/build/bench/bench_gpu_resnet" "$DEFT_ROOT/tests/mxnet/corpus/model_resnet18_v1-symbol.json"
deft_python_env
"$DEFT_VENV/bin/python" "$DEFT_ROOT/bench/python/bench_python.py"
"$DEFT_VENV/bin/python" "$DEFT_ROOT/bench/python/bench_recording.py" "$DEFT_ROOT/build"
# the demo MLP's step: eager, hybridized, compiled, the bare-C floor (and PyTorch, as below)
"$DEFT_VENV/bin/python" "$DEFT_ROOT/bench/python/bench_mlp_step.py"
# PyTorch beside it when DEFT_TORCH_PYTHON names a Python that has torch
"$DEFT_VENV/bin/python" "$DEFT_ROOT/bench/python/bench_lenet.py"
# MXNet and PyTorch beside deft when DEFT_MXNET_PYTHON / DEFT_TORCH_PYTHON name Pythons that have them
"$DEFT_VENV/bin/python" "$DEFT_ROOT/bench/python/bench_resnet.py"
"$DEFT_VENV/bin/python" "$DEFT_ROOT/bench/python/bench_conv_peers.py"
"$DEFT_ROOT/bench/instructions.sh" "$DEFT_ROOT/build"
