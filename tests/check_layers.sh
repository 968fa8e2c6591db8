#!/bin/sh
# The layers of DESIGN.md, kept true: a file under core/<layer> may include
# only its own layer and those below it. Prints every upward include and
# fails if there is one. Usage: check_layers.sh [source root]
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2

# layer: the layers it may include (besides itself)
allowed() {
    case $1 in
    base) echo "" ;;
    math) echo "base" ;;
    engine) echo "base" ;;
    gpu) echo "base math" ;;
    op) echo "base math gpu engine" ;;
    graph) echo "base math gpu engine op" ;;
    imperative) echo "base math gpu engine op graph" ;;
    *) echo "?" ;;
    esac
}

bad=0
out="${TMPDIR:-/tmp}/check_layers.$$"
for dir in core/*/; do
    layer=$(basename "$dir")
    ok="$layer $(allowed "$layer")"
    case $ok in *"?"*) echo "core/$layer: a layer DESIGN.md does not name; add it to $0"; bad=1; continue ;; esac
    # every '#include "core/<other>/...' in the layer's files
    grep -HnoE '#include "core/[a-z_]+/' "$dir"* | while IFS= read -r hit; do
        used=$(echo "$hit" | sed -E 's|.*"core/([a-z_]+)/$|\1|')
        case " $ok " in *" $used "*) ;; *) echo "${hit%%:#*}: core/$layer includes core/$used (an upper layer)" ;; esac
    done
done >"$out"
if [ -s "$out" ]; then cat "$out"; bad=1; fi
rm -f "$out"
[ $bad -eq 0 ] && echo "layers: every include goes down"
exit $bad
