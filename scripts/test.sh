#!/usr/bin/env bash
# Every test: the C suites in a release build, the Python binding's pytest
# suite, the API docs (doxygen, warnings are errors), the C suites again
# under AddressSanitizer + UBSan and under ThreadSanitizer, and the C suites
# built by clang. Among the C suites, the fuzz targets replay their seed
# corpora and regressions (tests/fuzz/replay.sh), under each build's sanitizers.
set -euo pipefail
source "$(dirname "$0")/setup.sh"

deft_install_packages

echo "== release build: C suites"
deft_build build
ctest --test-dir "$DEFT_ROOT/build" --output-on-failure -j "$DEFT_JOBS"

echo "== Python binding: pip install . into build/venv, then pytest"
deft_python_env
"$DEFT_VENV/bin/python" -m pytest -q "$DEFT_ROOT/bindings/python/tests" "$DEFT_ROOT/tests/mxnet"

echo "== API documentation (doxygen)"
cmake --build "$DEFT_ROOT/build" --target docs

# The sanitizer builds are optimised a little (-O1, as the sanitizers' manuals advise),
# assertions on: at -O0 the tests' reference loops made their runs minutes longer.
sanitizer_build=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" -DDEFT_BUILD_EXAMPLES=OFF
    -DDEFT_BUILD_PYTHON=OFF)

echo "== ASan + UBSan build: C suites"
deft_build build-asan "${sanitizer_build[@]}" -DDEFT_SANITIZE=address
ctest --test-dir "$DEFT_ROOT/build-asan" --output-on-failure -j "$DEFT_JOBS"

echo "== TSan build: C suites"
deft_build build-tsan "${sanitizer_build[@]}" -DDEFT_SANITIZE=thread
ctest --test-dir "$DEFT_ROOT/build-tsan" --output-on-failure -j "$DEFT_JOBS"

echo "== clang release build: C suites"
# Its CUDA code is compiled to PTX only (nvcc's host compiler is gcc here too, and the
# release build makes the machine code for each GPU): a third of the compile time.
deft_build build-clang -DCMAKE_C_COMPILER=clang -DDEFT_BUILD_PYTHON=OFF -DDEFT_BUILD_JAVA=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=80-virtual
# the bindings' runners: the release build runs them
ctest --test-dir "$DEFT_ROOT/build-clang" --output-on-failure -j "$DEFT_JOBS" \
    -E '^(rust_cargo_test|rust_user_crate|rust_bench_builds|go_test|go_test_race|go_user_module)$'

# CI's disk is shared and sometimes nearly full: say what this run took.
echo "== disk: $(du -sch "$DEFT_ROOT"/build* 2>/dev/null | tail -1 | cut -f1) in build folders," \
    "$(df -h "$DEFT_ROOT" | awk 'NR == 2 { print $4 }') left"
