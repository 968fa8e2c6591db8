#!/usr/bin/env bash
# Regenerate the seed corpora and dictionaries of the fuzz targets from the
# operator registry (tests/fuzz/gen_seeds.c): run after adding an operator.
# Uses (and builds) build-fuzz, the clang build scripts/fuzz.sh uses.
set -euo pipefail
source "$(dirname "$0")/../../scripts/setup.sh"
deft_fuzz_build
"$DEFT_ROOT/build-fuzz/tests/fuzz/fuzz_gen_seeds" "$DEFT_ROOT/tests/fuzz"
