#!/usr/bin/env bash
# The installed package works for a consumer outside the tree (ctest: install_consumer).
#
#   install_consumer.sh BUILD SOURCE WORK CASE_TOOL CMAKE CC [EXTRA_FLAGS]
#
# 1. cmake --install BUILD --prefix WORK/prefix, and the expected files are there;
# 2. CASE_TOOL (install_consumer_case) writes ONNX LSTM inputs as .npy files;
# 3. examples/consumer/ (find_package(rnnjit CONFIG REQUIRED)) is configured and built against
#    the prefix; its onnx_lstm runs on each case and its Y_h is checked by CASE_TOOL;
# 4. examples/onnx_lstm.c is built with `CC $(pkg-config --cflags --libs rnnjit)` and checked
#    the same way (skipped, with a message, when pkg-config is not installed).
# EXTRA_FLAGS (sanitizer builds) go to every compile and link of the consumers.
set -euo pipefail
if (($# < 6)); then
  echo "usage: $0 BUILD SOURCE WORK CASE_TOOL CMAKE CC [EXTRA_FLAGS]" >&2
  exit 2
fi
build=$1 source=$2 work=$3 tool=$4 cmake=$5 cc=$6 extra=${7:-}
prefix=$work/prefix

step() { echo "== $*"; }

rm -rf "$work"
mkdir -p "$work"

step "install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(dirname "$(find "$prefix" -name 'librnnjit.so' | head -n 1)")
if [[ -z $libdir || ! -e $libdir/librnnjit.so ]]; then
  echo "librnnjit.so was not installed" >&2
  exit 1
fi
for f in include/rnnjit.h include/rnnjit/rnn.hpp include/rnnjit/config.hpp include/rnnjit/weights.hpp \
         include/rnnjit/error.hpp "${libdir#"$prefix"/}/cmake/rnnjit/rnnjitConfig.cmake" \
         "${libdir#"$prefix"/}/cmake/rnnjit/rnnjitConfigVersion.cmake" \
         "${libdir#"$prefix"/}/cmake/rnnjit/rnnjitTargets.cmake" "${libdir#"$prefix"/}/pkgconfig/rnnjit.pc"; do
  if [[ ! -f $prefix/$f ]]; then
    echo "missing from the install: $f" >&2
    exit 1
  fi
done
if find "$prefix" -name 'librnnjit.a' | grep -q .; then
  echo "the static library was installed; only the shared one should be" >&2
  exit 1
fi

step "write the .npy inputs"
"$tool" gen "$work/data"

# Runs onnx_lstm binary $1 on every case and checks Y_h; $2 names the build in messages.
run_cases() {
  local exe=$1 how=$2 case
  if command -v ldd >/dev/null 2>&1; then
    if ! ldd "$exe" | grep 'librnnjit\.so' | grep -qF "$prefix"; then
      echo "$how: $exe does not load librnnjit.so from $prefix:" >&2
      ldd "$exe" >&2
      exit 1
    fi
  fi
  for case in fwd bi peep; do
    "$exe" "$work/data/$case" >"$work/$how-$case.txt"
    cat "$work/$how-$case.txt"
    "$tool" check "$work/data/$case" "$work/$how-$case.txt"
  done
}

step "CMake consumer: find_package(rnnjit CONFIG REQUIRED)"
"$cmake" -S "$source/examples/consumer" -B "$work/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$extra" \
  -DCMAKE_EXE_LINKER_FLAGS="$extra" >"$work/consumer-configure.log"
"$cmake" --build "$work/consumer-build" >"$work/consumer-build.log"
run_cases "$work/consumer-build/onnx_lstm" cmake

step "pkg-config consumer: cc \$(pkg-config --cflags --libs rnnjit)"
if ! command -v pkg-config >/dev/null 2>&1; then
  echo "pkg-config is not installed: the pkg-config build is skipped (Debian package pkgconf)"
  exit 0
fi
export PKG_CONFIG_PATH=$libdir/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
echo "pkg-config --cflags --libs rnnjit: $(pkg-config --cflags --libs rnnjit)"
echo "pkg-config --modversion rnnjit: $(pkg-config --modversion rnnjit)"
# shellcheck disable=SC2046,SC2086  # word splitting of the flags is intended
"$cc" -std=c99 $extra "$source/examples/onnx_lstm.c" -o "$work/onnx_lstm_pkgconfig" $(pkg-config --cflags --libs rnnjit)
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run_cases "$work/onnx_lstm_pkgconfig" pkgconfig
echo "install_consumer: ok"
