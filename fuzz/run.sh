#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS (default 60) from its committed seed corpus fuzz/corpus/<target>/. Fails (status 1) if
# any target crashes, leaks, trips a sanitizer or its own checks; the reproducer is left in
# build-fuzz/artifacts/. New corpus entries go to build-fuzz/corpus/<target>/ (not committed).
#
#   fuzz/run.sh [SECONDS]            every target
#   fuzz/run.sh SECONDS fuzz_npy     one target
#   RNNJIT_FUZZ_JOBS=N               parallel build jobs (default: nproc)
#   RNNJIT_FUZZ_CXX=clang++-16 RNNJIT_FUZZ_CC=clang-16   another clang (on a fresh build-fuzz/)
#
# Reproduce a crash: build-fuzz/fuzz_npy build-fuzz/artifacts/fuzz_npy-crash-<sha1>
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The library's packages, plus clang and its libFuzzer runtime (installed when root and missing).
RNNJIT_EXTRA_PACKAGES="clang-14 libclang-rt-14-dev" source tools/setup.sh

seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]} > 0)) || targets=(fuzz_npy fuzz_config fuzz_cli)

cxx=${RNNJIT_FUZZ_CXX:-clang++-14}
cc=${RNNJIT_FUZZ_CC:-clang-14}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  cmake -S fuzz -B build-fuzz "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc"
fi
cmake --build build-fuzz -j"${RNNJIT_FUZZ_JOBS:-$(nproc)}" --target "${targets[@]}"

mkdir -p build-fuzz/artifacts
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  dict=()
  [[ -f fuzz/${t#fuzz_}.dict ]] && dict=(-dict="fuzz/${t#fuzz_}.dict")
  echo "== $t: ${seconds} s =="
  # New inputs are written to the first directory only; the committed seeds stay as they are.
  if "build-fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$t-" "${dict[@]}" "build-fuzz/corpus/$t" "fuzz/corpus/$t" \
      2>"build-fuzz/$t.log"; then
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)' "build-fuzz/$t.log" || true
    grep -E '^#[0-9]+ +DONE' "build-fuzz/$t.log" | tail -1 || true
  else
    echo "$t: FAILED (log: build-fuzz/$t.log)"
    grep -E -A20 'ERROR|==ERROR|runtime error|fuzz_[a-z]+: |Test unit written' "build-fuzz/$t.log" | head -60 || true
    failed+=("$t")
  fi
done
if ((${#failed[@]} > 0)); then
  echo "fuzz: crashes in ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crashes in ${targets[*]} (${seconds} s each)"
