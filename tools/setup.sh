# shellcheck shell=bash
# Shared set-up for tools/run.sh and tools/test.sh (sourced, not run): installs the Debian
# packages the build needs when running as root and any is missing, then configures and builds
# a Release build in build/. Works from any directory: it changes to the repository root.

cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1

# nlohmann-json3-dev: JSON output of plans and benchmarks; libdnnl-dev: the optional oneDNN peer,
# with ocl-icd-opencl-dev, which its CMake config needs (a recommendation apt leaves out here);
# pkgconf: the install test builds a consumer through rnnjit.pc; python3-venv: tools/test.sh's
# environments (onnx and onnxruntime; the Python package); python3-dev: the headers the Python
# extension builds against; python3-torch and python3-numpy: rnnjit.torch's tests (Debian's torch
# installs in seconds, PyPI's pulls gigabytes of CUDA libraries).
# ccache: the builds (build/, the sanitizers', the wheel's, a fresh clone's) share one compiler
# cache, its paths taken relative to the clone so that any clone hits.
# RNNJIT_EXTRA_PACKAGES (space-separated) adds more, e.g. fuzz/run.sh's clang.
read -r -a rnnjit_extra_packages <<<"${RNNJIT_EXTRA_PACKAGES:-}"
RNNJIT_PACKAGES=(build-essential cmake libxbyak-dev libopenblas-dev libfmt-dev libgtest-dev libcli11-dev libzydis-dev
                 nlohmann-json3-dev ccache libdnnl-dev ocl-icd-opencl-dev pkgconf python3-venv python3-dev python3-numpy
                 python3-torch "${rnnjit_extra_packages[@]}")

export CCACHE_BASEDIR="$PWD" CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

rnnjit_install_packages() {
  local missing=() pkg status
  for pkg in "${RNNJIT_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [[ $status != "install ok installed" ]]; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]} (not root: not installing them)" >&2
    return 0
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
}

# rnnjit_build [BUILD_DIR [CMAKE_ARGS...]]: a Release build, in build/ unless told otherwise.
rnnjit_build() {
  local dir=${1:-build}
  shift || true
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$dir" -j"$(nproc)"
}

# rnnjit_python_venv DIR: a virtual environment of Debian's python3 that sees its system packages
# (torch, numpy) and has the Python package's build tools and pytest from PyPI. Bounded in time;
# prints why and returns 1 when they cannot be installed.
rnnjit_python_venv() {
  local venv=$1
  if ! "$venv/bin/python" -c 'import nanobind, scikit_build_core, pytest' 2>/dev/null; then
    /usr/bin/python3 -m venv --system-site-packages "$venv" &&
      timeout 300 "$venv/bin/pip" install -q --timeout 20 --retries 2 'nanobind>=2.4' 'scikit-build-core>=0.10' pytest ||
      { echo "setup: could not install nanobind, scikit-build-core and pytest into $venv" >&2; return 1; }
  fi
}

if command -v dpkg-query >/dev/null 2>&1; then
  rnnjit_install_packages
fi

# ONNX Runtime's C headers, for the custom-op library librnnjit_onnxruntime.so (onnxruntime/):
# PyPI's onnxruntime ships none and Debian bookworm has no package, so Debian's libonnxruntime-dev
# (85-150 KB, MIT: headers only) is fetched from Debian's archive, not installed: apt-get download
# with a private sources list and its own apt state under the cache folder, then dpkg-deb -x.
# experimental's (1.27: API 27, which reads string-list attributes such as `activations`) is
# preferred, trixie's (1.21: API 21) taken otherwise. Later builds find the headers there by
# default (CMakeLists.txt: RNNJIT_ORT_INCLUDE_DIR). Bounded in time; without network or apt it
# says so and the library is not built.
RNNJIT_ORT_HEADERS=${RNNJIT_ORT_HEADERS:-$HOME/.cache/rnnjit/onnxruntime-headers}
rnnjit_fetch_ort_headers() {
  local dir=$RNNJIT_ORT_HEADERS
  [[ -f $dir/include/onnxruntime_c_api.h ]] && return 0
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "setup: no apt-get/dpkg-deb: ONNX Runtime headers not fetched (librnnjit_onnxruntime.so not built)" >&2
    return 0
  fi
  mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/deb" || return 0
  printf '%s\n' "deb http://deb.debian.org/debian trixie main" "deb http://deb.debian.org/debian experimental main" \
    >"$dir/apt/sources.list"
  local apt=(apt-get -q -o "Dir::Etc::sourcelist=$dir/apt/sources.list" -o Dir::Etc::sourceparts=-
             -o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache" -o Dir::State::status=/dev/null
             -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
  if ! timeout 120 "${apt[@]}" update >"$dir/apt/update.log" 2>&1; then
    echo "setup: could not reach Debian's archive (see $dir/apt/update.log): ONNX Runtime headers not fetched" >&2
    return 0
  fi
  rm -f "$dir"/deb/*.deb
  if ! (cd "$dir/deb" && { timeout 60 "${apt[@]}" download libonnxruntime-dev/experimental ||
                           timeout 60 "${apt[@]}" download libonnxruntime-dev; }) >"$dir/apt/download.log" 2>&1; then
    echo "setup: could not download libonnxruntime-dev (see $dir/apt/download.log): ONNX Runtime headers not fetched" >&2
    return 0
  fi
  rm -rf "$dir/root" "$dir/include"
  dpkg-deb -x "$dir"/deb/libonnxruntime-dev_*.deb "$dir/root" &&
    ln -sfn root/usr/include/onnxruntime "$dir/include" &&
    echo "setup: ONNX Runtime headers $(basename "$dir"/deb/*.deb) in $dir/include" >&2
}
rnnjit_fetch_ort_headers || echo "setup: ONNX Runtime headers not fetched: librnnjit_onnxruntime.so is not built" >&2
