#!/usr/bin/env bash
# Instructions per operator call (bench/call_loop.c) in each mode (trigger: one
# call recorded in deferred mode, then read; chain: per node of a recorded
# 100-node chain; one-off: per node of such a chain recorded, exported and run
# once as a graph), counted by callgrind: the count
# for 20,000 calls less the count for 10,000, so start-up cancels out. Counts are the same on a loaded machine; times are not.
# Usage: bench/instructions.sh [build dir, default build]
set -euo pipefail
build="${1:-$(dirname "$0")/../build}"
if ! command -v valgrind > /dev/null; then
    echo "instructions: skipped: valgrind is not installed (apt-get install valgrind)"
    exit 0
fi
count() { # total instructions of one run
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/bench/call_loop" "$1" "$2" 2>&1 |
        awk '/Collected/ { print $NF }'
}
echo "instructions per call, 1-element sum; chain and one-off: per node (callgrind)"
for mode in plain deferred autograd trigger chain one-off; do
    a=$(count "$mode" 10000)
    b=$(count "$mode" 20000)
    printf '  %-9s %6d\n' "$mode" $(((b - a) / 10000))
done
