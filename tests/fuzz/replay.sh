#!/usr/bin/env bash
# Replays a fuzz target's seed corpus and regressions (a ctest test):
#
#   replay.sh TARGET-BINARY CORPUS-DIR REGRESSIONS-DIR LOG-DIR
#
# The corpus runs in one process; each regression in a process of its own:
# a file alone, a folder's files together in name order (a defect that takes
# several calls). On a failure, the last "Running:" line names the input.
set -euo pipefail
bin="$1" corpus="$2" regressions="$3" logs="$4"
name="$(basename "$bin")"
mkdir -p "$logs"

# replay LABEL FILES...: the files in one process, its output in a log
replay() {
    local log="$logs/replay-$name-$1.log"
    shift
    "$bin" "$@" >"$log" 2>&1 || { grep -E "Running:" "$log" | tail -1; tail -60 "$log"; return 1; }
}

mapfile -t seeds < <(find "$corpus" -type f | sort)
[ ${#seeds[@]} -gt 0 ] || { echo "$name: no seeds in $corpus"; exit 1; }
replay corpus "${seeds[@]}"
count=0
for entry in "$regressions"/*; do
    [ -e "$entry" ] || continue
    mapfile -t inputs < <(find "$entry" -type f | sort)
    replay "$(basename "$entry")" "${inputs[@]}"
    count=$((count + 1))
done
echo "$name: ${#seeds[@]} seeds, $count regressions"
