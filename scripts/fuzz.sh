#!/usr/bin/env bash
# Fuzz every libFuzzer target (tests/fuzz) for SECONDS each (default 60):
#
#   ./scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Builds build-fuzz (clang, coverage, ASan + UBSan), copies each target's
# seed corpus into build-fuzz/corpus/<target> (new inputs go there, not into
# the repository), fuzzes it with libFuzzer's fork mode (one job at a time,
# going on past crashes, timeouts and out-of-memory), and prints each
# target's execution count. Crash reproducers go into the folder named at
# the end, build-fuzz/findings-<date>/<target>-crash-<sha1>; replay one with
# build-fuzz/tests/fuzz/<target> FILE, minimise it with -minimize_crash=1.
# Environment: DEFT_FUZZ_JOBS (parallel jobs, default 1), DEFT_FUZZ_FLAGS
# (more libFuzzer flags).
set -euo pipefail
source "$(dirname "$0")/setup.sh"

seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_symbol_json fuzz_invoke fuzz_dlpack)

deft_install_packages
deft_fuzz_build
findings="$DEFT_ROOT/build-fuzz/findings-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$findings"
for target in "${targets[@]}"; do
    bin="$DEFT_ROOT/build-fuzz/tests/fuzz/$target"
    work="$DEFT_ROOT/build-fuzz/corpus/$target"
    mkdir -p "$work"
    cp -n "$DEFT_ROOT/tests/fuzz/corpus/$target"/* "$work"/ 2>/dev/null || true
    flags=(-fork="${DEFT_FUZZ_JOBS:-1}" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1
           -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -max_len=4096
           -artifact_prefix="$findings/$target-")
    dict="$DEFT_ROOT/tests/fuzz/$target.dict"
    [ -f "$dict" ] && flags+=(-dict="$dict")
    log="$findings/$target.log"
    # shellcheck disable=SC2086 # DEFT_FUZZ_FLAGS is a list of flags
    "$bin" "${flags[@]}" ${DEFT_FUZZ_FLAGS:-} "$work" >"$log" 2>&1 || true
    # fork mode's status lines: "#<execs>: cov: .. exec/s: <rate> oom/timeout/crash: a/b/c time: <s>s .."
    status="$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)"
    execs="$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$status")"
    rate="$(sed -nE 's/.*exec\/s:? ([0-9]+).*/\1/p' <<<"$status")"
    faults="$(sed -nE 's/.*oom\/timeout\/crash: ([0-9\/]+).*/\1/p' <<<"$status")"
    echo "$target: ${execs:-0} executions in ${seconds}s (${rate:-0} exec/s), oom/timeout/crash ${faults:-0/0/0}"
done
echo "crash reproducers and logs: $findings"
