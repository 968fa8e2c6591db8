#!/usr/bin/env bash
# deft's main job: install what is missing, build, and run the demo.
set -euo pipefail
source "$(dirname "$0")/setup.sh"

deft_install_packages
deft_build build
"$DEFT_ROOT/build/deft_hello"
"$DEFT_ROOT/build/deft_train"
