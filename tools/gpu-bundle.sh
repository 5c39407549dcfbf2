#!/usr/bin/env bash
# Runs tools/gpu-check.sh on a GPU machine that cannot build rnnjit: one with the NVIDIA driver
# and a CUDA toolkit of the same major version (NVRTC, cuBLAS, cuDNN) but without the project's
# build dependencies (Xbyak, OpenBLAS, fmt, Zydis, GoogleTest, ...) and no way to install them,
# as a lent GPU machine without network access is.
#
#   tools/gpu-bundle.sh pack [BUILD] [ARCHIVE]   on the build machine (default build,
#       build/gpu-bundle.tar.xz): the CUDA binaries of BUILD (rnn-jit and test_cuda_*), the
#       shared libraries they load that are neither the C runtime's nor CUDA's (the GPU
#       machine's driver and toolkit provide those), and the fmt and Xbyak headers that the
#       tests compiling generated source on the host include.
#   tools/gpu-bundle.sh run ARCHIVE [gpu-check.sh flags]   on the GPU machine, in a checkout of
#       the same commit: unpacks the binaries into their build folder there and runs
#       tools/gpu-check.sh --prebuilt with the libraries and headers on the search paths. The
#       test binaries know the source folder they were built from (RNNJIT_SOURCE_DIR); where the
#       checkout is elsewhere and nothing is there, that path becomes a link to the checkout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

pack() {
  local build=${1:-build} archive=${2:-}
  archive=${archive:-$build/gpu-bundle.tar.xz}
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/lib" "$stage/include"
  local bins=("$build/bin/rnn-jit" "$build"/bin/test_cuda_*)
  cp "${bins[@]}" "$stage/bin/"
  # Every library a binary loads, but the C runtime's (the GPU machine's glibc and libstdc++
  # are at least as new on any current distribution) and CUDA's.
  ldd "${bins[@]}" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case $name in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libstdc++.so* | libgcc_s.so*) ;;
      libcuda.so* | libnvrtc* | libcublas* | libcudnn*) ;;
      *) cp -L "$path" "$stage/lib/$name" ;;
    esac
  done
  # -lfmt for the host-compile tests (test_cuda_source builds the generated source with fmt).
  local fmt_so
  fmt_so=$(cd "$stage/lib" && ls libfmt.so.* | head -n 1)
  ln -s "$fmt_so" "$stage/lib/libfmt.so"
  for header in fmt xbyak; do
    for dir in /usr/include /usr/local/include; do
      [[ -d $dir/$header ]] && { cp -r "$dir/$header" "$stage/include/"; break; }
    done
  done
  # Where the binaries expect the sources and themselves (RNNJIT_SOURCE_DIR, RNNJIT_CLI_PATH).
  local source_dir
  source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  echo "$source_dir" >"$stage/source_dir"
  realpath --relative-to="$source_dir" "$build" >"$stage/build_dir"
  git describe --always --dirty >"$stage/commit" 2>/dev/null || echo "?" >"$stage/commit"
  XZ_OPT=${XZ_OPT:--T0} tar -C "$stage" -cJf "$archive" .
  echo "gpu-bundle: $archive ($(du -h "$archive" | cut -f1)): $(ls "$stage/bin" | wc -l) binaries, $(ls "$stage/lib" | wc -l) libraries"
}

run() {
  local archive=$1
  shift
  local unpacked=${TMPDIR:-/tmp}/rnnjit-gpu-bundle
  rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -C "$unpacked" -xJf "$archive"
  local build source_dir
  build=$(cat "$unpacked/build_dir")
  source_dir=$(cat "$unpacked/source_dir")
  mkdir -p "$build/bin" && cp "$unpacked"/bin/* "$build/bin/"
  if [[ $source_dir != "$PWD" && ! -e $source_dir ]]; then
    mkdir -p "$(dirname "$source_dir")" && ln -s "$PWD" "$source_dir"
    echo "gpu-bundle: $source_dir -> $PWD (the tests' source folder)"
  fi
  # The toolkit's libraries wherever this machine keeps them (a toolkit's targets/ folder, a
  # distribution's cuDNN package).
  local extra=""
  for so in libnvrtc.so libcublas.so libcudnn.so; do
    f=$(find /usr/local/cuda/ /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu -name "$so.*" 2>/dev/null | head -n 1 || true)
    [[ -n $f ]] && extra+=":$(dirname "$f")"
    echo "gpu-bundle: $so: ${f:-not found}"
  done
  export LD_LIBRARY_PATH="$unpacked/lib$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPLUS_INCLUDE_PATH="$unpacked/include" LIBRARY_PATH="$unpacked/lib"
  if ldd "$build/bin/rnn-jit" | grep 'not found'; then
    echo "gpu-bundle: FAILED: libraries missing for $build/bin/rnn-jit" >&2
    exit 1
  fi
  # The binaries' commit (the checkout here may not be a git repository, or another commit).
  RNNJIT_GPU_COMMIT=$(cat "$unpacked/commit") RNNJIT_GPU_BUILD=$build exec tools/gpu-check.sh --prebuilt "$@"
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) [[ $# -ge 2 ]] || { echo "usage: tools/gpu-bundle.sh run ARCHIVE [gpu-check flags]" >&2; exit 2; }; shift; run "$@" ;;
  *) echo "usage: tools/gpu-bundle.sh pack [BUILD] [ARCHIVE] | run ARCHIVE [gpu-check flags]" >&2; exit 2 ;;
esac
