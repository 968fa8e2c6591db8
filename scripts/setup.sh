# Sourced by demo.sh and test.sh: installs what deft needs and builds it.
# Every step is skipped when there is nothing to do, so a second run is quick.

DEFT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEFT_JOBS="$(nproc 2>/dev/null || echo 2)"

# Debian packages deft builds and tests with.
DEFT_APT_PACKAGES=(
    gcc make cmake pkg-config
    libopenblas-dev libcjson-dev libdlpack-dev
    check doxygen
)

deft_install_packages() {
    local missing=() pkg
    for pkg in "${DEFT_APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" ||
            missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "deft: installing ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then
            sudo="sudo"
        else
            echo "deft: missing Debian packages ${missing[*]}; install them as root" >&2
            return 1
        fi
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}

# deft_build DIR [cmake options...]: configure (fast when cached) and build.
deft_build() {
    local dir="$DEFT_ROOT/$1"
    mkdir -p "$dir"
    shift
    cmake -S "$DEFT_ROOT" -B "$dir" "$@" >"$dir/configure.log" 2>&1 ||
        { cat "$dir/configure.log" >&2; return 1; }
    cmake --build "$dir" -j "$DEFT_JOBS" -- --no-print-directory >"$dir/build.log" 2>&1 ||
        { cat "$dir/build.log" >&2; return 1; }
}
