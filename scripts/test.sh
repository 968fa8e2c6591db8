#!/usr/bin/env bash
# Every test: the C suites in a release build, the Python binding's pytest
# suite, the API docs (doxygen, warnings are errors), and the C suites again
# under AddressSanitizer + UBSan and under ThreadSanitizer.
set -euo pipefail
source "$(dirname "$0")/setup.sh"

deft_install_packages

echo "== release build: C suites"
deft_build build
ctest --test-dir "$DEFT_ROOT/build" --output-on-failure -j "$DEFT_JOBS"

echo "== Python binding: pip install . into build/venv, then pytest"
deft_python_env
"$DEFT_VENV/bin/python" -m pytest -q "$DEFT_ROOT/bindings/python/tests"

echo "== API documentation (doxygen)"
cmake --build "$DEFT_ROOT/build" --target docs

echo "== ASan + UBSan build: C suites"
deft_build build-asan -DCMAKE_BUILD_TYPE=Debug -DDEFT_SANITIZE=address -DDEFT_BUILD_EXAMPLES=OFF \
    -DDEFT_BUILD_PYTHON=OFF
ctest --test-dir "$DEFT_ROOT/build-asan" --output-on-failure -j "$DEFT_JOBS"

echo "== TSan build: C suites"
deft_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DDEFT_SANITIZE=thread -DDEFT_BUILD_EXAMPLES=OFF \
    -DDEFT_BUILD_PYTHON=OFF
ctest --test-dir "$DEFT_ROOT/build-tsan" --output-on-failure -j "$DEFT_JOBS"
