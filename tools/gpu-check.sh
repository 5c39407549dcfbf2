#!/usr/bin/env bash
# The CUDA executor's checks as one prepared script, for a session on a machine with an NVIDIA
# GPU; safe to run anywhere (without a GPU it runs what needs none and says so).
#
#   1. configures and builds $RNNJIT_GPU_BUILD (default build-gpu; Release) with the CUDA path
#      (found automatically) - only rnn-jit and the CUDA tests;
#   2. `rnn-jit device`: device, driver, the NVRTC target (cubin or PTX), cuBLAS and cuDNN;
#   3. the CUDA tests (test_cuda_*): without a GPU their device tests skip with the reason; with
#      one, test_cuda_executor compares the CUDA executor with the scalar reference and cuDNN for
#      every cell, uni/bidirectional, 1-2 layers, inference and training, tails and features,
#      and any skipped test of it counts as a failure;
#   4. with a GPU, a short DeepSpeech2 benchmark (T=300, N=20, I=H=800): --device cuda
#      --compare cudnn, LSTM and GRU, inference and training.
#
# Exit status: 0 when everything that could run passed (also without a GPU, after saying so);
# 1 when a check failed or the CUDA toolkit was not found. Compiled kernels are cached in
# $RNNJIT_CACHE_DIR (default $BUILD/cuda-kernel-cache), so a second run compiles nothing.
# Usage: tools/gpu-check.sh [--no-bench]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
BUILD=${RNNJIT_GPU_BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
BENCH=1
[[ ${1:-} == --no-bench ]] && BENCH=0
mkdir -p "$BUILD"
export RNNJIT_CACHE_DIR=${RNNJIT_CACHE_DIR:-$PWD/$BUILD/cuda-kernel-cache}
TESTS=(test_cuda_source test_cuda_plan test_cuda_cache test_cuda_runner test_cuda_util_kernels test_cuda_driver
       test_cuda_executor)
failed=()
log() { printf '\n== gpu-check: %s\n' "$*"; }

log "configure and build $BUILD"
if ! cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1; then
  cat "$BUILD/configure.log"
  echo "gpu-check: FAILED: cmake could not configure $BUILD" >&2
  exit 1
fi
grep 'rnnjit:' "$BUILD/configure.log"
if ! grep -q 'NVRTC and the GPU executor' "$BUILD/configure.log"; then
  echo "gpu-check: FAILED: CMake did not find the CUDA toolkit (nvcc/NVRTC under /usr/local/cuda or on PATH?)" >&2
  exit 1
fi
if ! cmake --build "$BUILD" -j"$JOBS" --target rnn-jit "${TESTS[@]}" >"$BUILD/build.log" 2>&1; then
  grep -E 'error|Error' "$BUILD/build.log" | head -40
  echo "gpu-check: FAILED: the build failed (see $BUILD/build.log)" >&2
  exit 1
fi
RNNJIT="$BUILD/bin/rnn-jit"

log "rnn-jit device"
gpu=0
if "$RNNJIT" device; then gpu=1; fi

for t in "${TESTS[@]}"; do
  log "$t"
  out="$BUILD/$t.log"
  if timeout 900 "$BUILD/bin/$t" >"$out" 2>&1; then
    grep -E '^\[(==========|  PASSED  |  SKIPPED )\] [0-9]+ test' "$out"
  else
    grep -E '^\[  FAILED|Failure|error' "$out" | head -40
    tail -n 5 "$out"
    failed+=("$t")
    continue
  fi
  # One "[  SKIPPED ] Suite.Test (N ms)" line per skipped test; the reason follows "...: Skipped".
  skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$out" || true)
  if ((skipped > 0)); then
    echo "$skipped skipped, e.g.: $(grep -A1 ': Skipped$' "$out" | sed -n 2p)"
  fi
  if ((gpu && skipped > 0)) && [[ $t == test_cuda_executor ]]; then
    echo "gpu-check: $t skipped $skipped tests on a machine with a GPU"
    failed+=("$t (skipped)")
  fi
done

if ((gpu && BENCH)); then
  for cell in lstm gru; do
    for mode in infer train; do
      log "bench DS2 $cell $mode --device cuda --compare cudnn"
      if ! timeout 600 "$RNNJIT" bench --device cuda --compare cudnn --cell "$cell" --input-size 800 --hidden-size 800 \
          --seq 300 --batch 20 --mode "$mode" --reps 5 --warmup 2; then
        failed+=("bench $cell $mode")
      fi
    done
  done
fi

log "summary"
if ((${#failed[@]} > 0)); then
  echo "gpu-check: FAILED: ${failed[*]}"
  exit 1
fi
if ((gpu)); then
  echo "gpu-check: OK: the CUDA tests passed on the GPU$( ((BENCH)) && echo ' and the benchmark ran')"
else
  echo "gpu-check: OK without a GPU: no CUDA device here ($("$RNNJIT" device 2>&1 >/dev/null | sed 's/^rnn-jit: error: //'));"
  echo "gpu-check: the non-GPU CUDA checks passed; the device tests skipped. Run this script on a GPU machine."
fi
exit 0
