# Sourced by demo.sh and test.sh: installs what deft needs and builds it.
# Every step is skipped when there is nothing to do, so a second run is quick.

DEFT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEFT_JOBS="$(nproc 2>/dev/null || echo 2)"

# Debian packages deft builds and tests with.
DEFT_APT_PACKAGES=(
    gcc make cmake pkg-config
    clang libclang-rt-14-dev llvm
    libopenblas-dev libcjson-dev libdlpack-dev
    check doxygen
    graphviz
    swig python3 python3-dev python3-venv
    junit5 libsurefire-java libmaven-compiler-plugin-java libmaven-resources-plugin-java
    libmaven-jar-plugin-java libmaven-install-plugin-java
)

# Toolchains of the other bindings: each package is installed only when its
# command is missing (a toolchain installed another way is used as it is).
DEFT_APT_TOOLS=(cargo:cargo go:golang-go javac:default-jdk-headless mvn:maven)

# Python packages, from PyPI, in the virtual environment the Python binding
# is installed and tested in.
DEFT_PY_PACKAGES=(numpy pytest scikit-learn scikit-build-core matplotlib)
DEFT_VENV="$DEFT_ROOT/build/venv"

deft_install_packages() {
    local missing=() pkg
    for pkg in "${DEFT_APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" ||
            missing+=("$pkg")
    done
    local tool
    for tool in "${DEFT_APT_TOOLS[@]}"; do
        command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
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

# deft_python_env: make the virtual environment (once), install what it
# lacks from PyPI, then `pip install .` the binding around the library that
# `deft_build build` made (cmake/PythonPrebuilt.cmake: nothing is compiled
# again; its CMake folder is build/python-prebuilt).
deft_python_env() {
    if [ ! -x "$DEFT_VENV/bin/python" ]; then
        python3 -m venv "$DEFT_VENV"
    fi
    local stamp="$DEFT_VENV/.deft-packages" want="${DEFT_PY_PACKAGES[*]}"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "deft: installing Python packages: $want"
        "$DEFT_VENV/bin/pip" install -q --disable-pip-version-check "${DEFT_PY_PACKAGES[@]}"
        echo "$want" >"$stamp"
    fi
    "$DEFT_VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
        -C build-dir="$DEFT_ROOT/build/python-prebuilt" \
        -C cmake.define.DEFT_PYTHON_PREBUILT="$DEFT_ROOT/build" \
        "$DEFT_ROOT" >"$DEFT_ROOT/build/pip-install.log" 2>&1 ||
        { cat "$DEFT_ROOT/build/pip-install.log" >&2; return 1; }
}

# deft_fuzz_build: the libFuzzer targets (tests/fuzz) in build-fuzz: clang,
# coverage, ASan + UBSan; only the fuzz targets are built.
deft_fuzz_build() {
    local dir="$DEFT_ROOT/build-fuzz"
    mkdir -p "$dir"
    cmake -S "$DEFT_ROOT" -B "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DDEFT_FUZZ=ON -DDEFT_SANITIZE=address -DDEFT_CUDA=off -DDEFT_BUILD_TESTS=OFF \
        -DDEFT_BUILD_EXAMPLES=OFF -DDEFT_BUILD_BENCH=OFF -DDEFT_BUILD_PYTHON=OFF \
        -DDEFT_BUILD_JAVA=OFF >"$dir/configure.log" 2>&1 ||
        { cat "$dir/configure.log" >&2; return 1; }
    cmake --build "$dir" --target deft_fuzz -j "$DEFT_JOBS" -- --no-print-directory \
        >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; return 1; }
}
