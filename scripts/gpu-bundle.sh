#!/usr/bin/env bash
# Build on a CPU machine with nvcc everything a GPU check runs, and pack it
# with the shared libraries a bare CUDA machine lacks:
#   build-gpu/deft-gpu-bundle.tar.xz   (run it there with scripts/gpu-check.sh)
# Contents: bin/ the C suites' executables (stripped), bench_gpu,
# bench_gpu_resnet with ResNet-18's symbol file, and their PyTorch peer script;
# python/ the Python package, its tests, and its module for each Python here; lib/ libdeft and the libraries they load (OpenBLAS, cJSON,
# libgfortran, libquadmath, libsubunit, libcudart; cuBLAS comes with the CUDA
# install there); suites.tsv, what ctest runs (name, environment, executable,
# arguments). The executables embed the same device code each, which xz's
# large window stores once per block.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
deft_install_packages
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
    { echo "gpu-bundle: nvcc not found: the CUDA toolkit is needed to build the GPU kernels" >&2; exit 1; }

build="$DEFT_ROOT/build-gpu"
deft_build build-gpu -DCMAKE_BUILD_TYPE=Release -DDEFT_BUILD_PYTHON=OFF -DDEFT_BUILD_JAVA=OFF \
    -DDEFT_BUILD_EXAMPLES=OFF
[ -x "$build/bench/bench_gpu" ] ||
    { echo "gpu-bundle: the build found no CUDA toolkit (no bench/bench_gpu)" >&2; exit 1; }

stage="$build/bundle"
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
# What ctest runs from the test executables built here: the tests that run
# scripts of the source tree, cmake or another toolchain (Go, Rust, Java)
# stay here, as does test_extension, which builds a module.
ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    if os.path.dirname(t["command"][0]) != sys.argv[1] or t["name"] == "test_extension": continue
    env = [v for p in t.get("properties", []) if p["name"] == "ENVIRONMENT" for v in p["value"]]
    command = t["command"]
    print(t["name"], " ".join(env), os.path.basename(command[0]), " ".join(command[1:]), sep="\t")
' "$build/tests" > "$stage/suites.tsv"
cut -f3 "$stage/suites.tsv" | sort -u | while read -r program; do
    strip -o "$stage/bin/$program" "$build/tests/$program"
done
strip -o "$stage/bin/bench_gpu" "$build/bench/bench_gpu"
strip -o "$stage/bin/bench_gpu_resnet" "$build/bench/bench_gpu_resnet"
cp "$DEFT_ROOT/tests/mxnet/corpus/model_resnet18_v1-symbol.json" "$stage/bin/resnet18_v1-symbol.json"
cp "$DEFT_ROOT/bench/python/bench_gpu_peers.py" "$DEFT_ROOT/bench/python/bench_resnet.py" "$stage/bin/"
cp -L "$build/libdeft.so.0" "$stage/lib/" && strip "$stage/lib/libdeft.so.0"
for lib in libopenblas.so.0 libcjson.so.1 libgfortran.so.5 libquadmath.so.0 libsubunit.so.0 libcudart.so.13; do
    path=$(ldd "$build/tests/deft_tests" | awk -v l="$lib" '$1 == l { print $3 }')
    [ -n "$path" ] && cp -L "$path" "$stage/lib/"
done
# The Python binding for every Python 3.10 or later here that has its headers
# (on PATH, or pyenv's), so that gpu-check runs the Python GPU tests with whichever
# Python the GPU machine has: SWIG's wrapper, compiled once per version
# (each module's name carries its version), beside the package and its tests.
mkdir -p "$stage/python" && cp -r "$DEFT_ROOT/bindings/python/deft" "$stage/python/"
cp -r "$DEFT_ROOT/bindings/python/tests" "$stage/python/"
swig -python -I"$DEFT_ROOT" -I"$DEFT_ROOT/capi/include" -builtin -O -DSWIGWORDSIZE64 -outdir "$build" \
    -interface _deft -o "$build/python_wrap.c" "$DEFT_ROOT/interface.i"
for python in $(compgen -c python3. | grep -x 'python3\.[0-9]*' | sort -u) ~/.pyenv/versions/*/bin/python3.*[0-9]; do
    read -r include suffix < <("$python" -c 'import sys, sysconfig as s
if sys.version_info >= (3, 10):  # the typemaps call Py_XDECREF as an expression
    print(s.get_paths()["include"], s.get_config_var("EXT_SUFFIX"))' 2> /dev/null) || continue
    module="$stage/python/deft/_deft$suffix"
    [ -f "$include/Python.h" ] && [ ! -f "$module" ] || continue
    cc -shared -fPIC -O1 -fvisibility=hidden -w -DSWIGWORDSIZE64 -I"$include" -I"$DEFT_ROOT" \
        -I"$DEFT_ROOT/capi/include" "$build/python_wrap.c" -o "$module" -L"$build" -ldeft
done
git -C "$DEFT_ROOT" rev-parse --short HEAD > "$stage/commit" 2>/dev/null || echo unknown > "$stage/commit"
# xz's threads each start a block afresh: blocks of 512 MiB keep the copies
# of the device code few (192 MiB blocks, the default, made 31 MB).
tar -C "$stage" -cf - . | xz -9 -T"$DEFT_JOBS" --block-size=$((512 << 20)) > "$build/deft-gpu-bundle.tar.xz"
echo "gpu-bundle: $(du -h "$build/deft-gpu-bundle.tar.xz" | cut -f1) in build-gpu/deft-gpu-bundle.tar.xz" \
    "($(wc -l < "$stage/suites.tsv") suites, Python modules" \
    "$(ls "$stage/python/deft" | sed -n 's/^_deft\.cpython-\([0-9]*\).*/\1/p' | tr '\n' ' ')commit $(cat "$stage/commit"))"
