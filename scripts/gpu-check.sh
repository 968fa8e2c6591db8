#!/usr/bin/env bash
# Run on a GPU machine, from the bundle scripts/gpu-bundle.sh made, alone:
#   scripts/gpu-check.sh [build-gpu/deft-gpu-bundle.tar.xz]
# Every C suite as ctest runs it, compute-sanitizer memcheck over the GPU
# suite (where the CUDA install has it), the Python tests that use a GPU
# (where python3 has NumPy and pytest), then the GPU benchmarks, with
# PyTorch's times for the reductions, softmax and ResNet-18 where torch is
# installed.
# Prints a line per suite and ends with "N passed, N failed".
set -uo pipefail
bundle="${1:-$(dirname "$0")/../build-gpu/deft-gpu-bundle.tar.xz}"
[ -f "$bundle" ] || { echo "gpu-check: no bundle at $bundle (run scripts/gpu-bundle.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$bundle"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "gpu-check: commit $(cat "$work/commit"), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
cd "$work"
# OpenBLAS falls back to its oldest kernels (Prescott) on a CPU it does not
# know, which changes float32 results' rounding: say which it chose.
echo "gpu-check: CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
    "OpenBLAS $(OPENBLAS_VERBOSE=2 bin/deft_tests test_base 2>&1 | grep -m1 '^Core:' || echo 'core unknown')"
passed=0 failed=0
while IFS=$'\t' read -r name env program args; do
    start=$(date +%s%N)
    if env $env timeout 600 "bin/$program" $args > "log-$name" 2>&1; then
        passed=$((passed + 1)) result=ok
    else
        failed=$((failed + 1)) result=FAILED
    fi
    printf '%-28s %-6s %5d ms\n' "$name" "$result" $((($(date +%s%N) - start) / 1000000))
    [ "$result" = ok ] || tail -25 "log-$name"
done < suites.tsv
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$sanitizer" ]; then
    # API errors are not reported: the suite runs out of device memory on purpose.
    if CK_FORK=no "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 1 \
        bin/deft_tests test_gpu > log-memcheck 2>&1; then
        passed=$((passed + 1)) result=ok
    else
        failed=$((failed + 1)) result=FAILED
    fi
    echo "memcheck test_gpu             $result ($(grep -m1 "ERROR SUMMARY" log-memcheck))"
    [ "$result" = ok ] || tail -40 log-memcheck
else
    echo "memcheck: skipped, compute-sanitizer is not installed here"
fi
# The Python tests that use a GPU, where this machine's python3 has NumPy
# and pytest and the bundle has a module for its version.
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2> /dev/null)
if [ -n "$suffix" ] && [ -f "python/deft/_deft$suffix" ] && python3 -c 'import numpy, pytest' 2> /dev/null; then
    if (cd python/tests && PYTHONPATH="$work/python" timeout 300 python3 -m pytest -q -p no:cacheprovider \
        test_gpu.py test_data.py test_dtypes.py test_block_api.py test_optim.py test_amp.py \
        test_surface.py) > log-pytest 2>&1; then
        passed=$((passed + 1)) result=ok
    else
        failed=$((failed + 1)) result=FAILED
    fi
    echo "pytest (GPU files)           $result ($(tail -1 log-pytest))"
    [ "$result" = ok ] || tail -40 log-pytest
else
    echo "pytest: skipped, no module for this python3 ($suffix) in the bundle, or no NumPy/pytest"
fi
echo "== bench_gpu"
# PyTorch's times for the same cases on this GPU, where it is installed.
if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
    timeout 240 python3 bin/bench_gpu_peers.py > peers.tsv && export DEFT_GPU_PEERS="$work/peers.tsv"
fi
timeout 300 bin/bench_gpu 2>&1 | tail -60
echo "== bench_gpu_resnet"
timeout 300 bin/bench_gpu_resnet bin/resnet18_v1-symbol.json 2>&1 | tail -20
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
