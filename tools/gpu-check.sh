#!/usr/bin/env bash
# The CUDA executor's checks as one prepared script, for a session on a machine with an NVIDIA
# GPU; safe to run anywhere (without a GPU it runs what needs none and says so).
#
#   1. configures and builds $RNNJIT_GPU_BUILD (default build-gpu; Release) with the CUDA path
#      (found automatically) - only rnn-jit and the CUDA tests; --prebuilt skips this and runs
#      the binaries already in $RNNJIT_GPU_BUILD/bin (built on another machine with the same
#      CUDA major version);
#   2. `rnn-jit device`: device, driver, the NVRTC target (cubin or PTX), cuBLAS and cuDNN;
#   3. with a GPU, the DeepSpeech2 suite (T=300, N=20, I=H=800; LSTM, GRU and RNN-tanh, one layer
#      unidirectional and five bidirectional, inference and training, and LSTM N=1 inference),
#      rnn-jit bench --device cuda --compare cudnn,cudnn_persistent, and rnnjit alone step by step
#      (RNNJIT_CUDA_PERSISTENT=0), as a Markdown table;
#   4. the CUDA tests (test_cuda_*): without a GPU their device tests skip with the reason; with
#      one, test_cuda_executor (run in $RNNJIT_GPU_SHARDS gtest shards at once, default up to 8:
#      NVRTC compiles are most of its time) compares the CUDA executor with the scalar reference
#      and cuDNN for every cell, uni/bidirectional, 1-2 layers, inference and training, tails
#      and features, and any skipped test of it counts as a failure.
#
# Exit status: 0 when everything that could run passed (also without a GPU, after saying so);
# 1 when a check failed or the CUDA toolkit was not found. Compiled kernels are cached in
# $RNNJIT_CACHE_DIR (default $BUILD/cuda-kernel-cache), so a second run compiles nothing. Each
# test's output is in $BUILD/<test>.log, the benchmark's JSON lines in $BUILD/bench.jsonl.
# Time limits: RNNJIT_GPU_TEST_TIMEOUT seconds a test binary (default 900),
# RNNJIT_GPU_BENCH_TIMEOUT a benchmark case (default 300). The table names the binaries' commit,
# RNNJIT_GPU_COMMIT (tools/gpu-bundle.sh sets it) or the checkout's.
# Usage: tools/gpu-check.sh [--no-bench] [--prebuilt]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
BUILD=${RNNJIT_GPU_BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
TEST_TIMEOUT=${RNNJIT_GPU_TEST_TIMEOUT:-900}
BENCH=1
PREBUILT=0
for arg in "$@"; do
  case $arg in
    --no-bench) BENCH=0 ;;
    --prebuilt) PREBUILT=1 ;;
    *) echo "usage: tools/gpu-check.sh [--no-bench] [--prebuilt]" >&2; exit 2 ;;
  esac
done
SHARDS=${RNNJIT_GPU_SHARDS:-$((JOBS < 8 ? JOBS : 8))}
mkdir -p "$BUILD"
export RNNJIT_CACHE_DIR=${RNNJIT_CACHE_DIR:-$PWD/$BUILD/cuda-kernel-cache}
TESTS=(test_cuda_executor test_cuda_driver test_cuda_source test_cuda_plan test_cuda_cache test_cuda_runner test_cuda_util_kernels)
failed=()
log() { printf '\n== gpu-check: %s\n' "$*"; }

if ((PREBUILT)); then
  log "prebuilt binaries in $BUILD/bin"
  for b in rnn-jit "${TESTS[@]}"; do
    [[ -x $BUILD/bin/$b ]] || { echo "gpu-check: FAILED: --prebuilt: no $BUILD/bin/$b" >&2; exit 1; }
  done
else
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
fi
RNNJIT="$BUILD/bin/rnn-jit"

log "rnn-jit device"
gpu=0
if "$RNNJIT" device; then gpu=1; fi

# The DS2 suite on the GPU, before the tests so that nothing else runs on the device: rnnjit
# against cuDNN's standard algorithm and its persistent kernels, interleaved in one process;
# where cuDNN refuses its persistent kernels for a case, against the standard algorithm alone.
# Then rnnjit alone without its persistent kernels (RNNJIT_CUDA_PERSISTENT=0: step by step), so
# the table shows what they bring.
bench_case() {  # peers (none: rnnjit alone) cell layers bidirectional(0/1) mode batch
  local flags=(bench --device cuda --cell "$2" --input-size 800 --hidden-size 800 --layers "$3"
               --seq 300 --batch "$6" --mode "$5" --reps 10 --warmup 3 --json)
  [[ $1 != none ]] && flags+=(--compare "$1")
  [[ $4 == 1 ]] && flags+=(--bidirectional)
  timeout "${RNNJIT_GPU_BENCH_TIMEOUT:-300}" "$RNNJIT" "${flags[@]}"
}
if ((gpu && BENCH)); then
  log "DS2 suite: rnn-jit bench --device cuda --compare cudnn,cudnn_persistent (T=300, I=H=800)"
  : >"$BUILD/bench.jsonl"
  table="| case | rnnjit ms | rnnjit step by step ms | cuDNN ms | ratio cuDNN/rnnjit | cuDNN persistent ms | ratio persistent/rnnjit | rnnjit GFLOPS |"
  table+=$'\n'"|---|---|---|---|---|---|---|---|"
  for cell in lstm gru rnn_tanh; do
    for spec in "1 0 infer 20" "1 0 train 20" "5 1 infer 20" "5 1 train 20" "1 0 infer 1"; do
      read -r layers bi mode batch <<<"$spec"
      [[ $batch == 1 && $cell != lstm ]] && continue
      name="$cell L=$layers$( ((bi)) && echo ' bidir') N=$batch $mode"
      refused=""
      if ! json=$(bench_case cudnn,cudnn_persistent "$cell" "$layers" "$bi" "$mode" "$batch" 2>"$BUILD/bench.err"); then
        refused=$(tail -n 1 "$BUILD/bench.err" | sed 's/^rnn-jit: error: //')
        json=$(bench_case cudnn "$cell" "$layers" "$bi" "$mode" "$batch" 2>"$BUILD/bench.err") || json=""
      fi
      stepwise=$(RNNJIT_CUDA_PERSISTENT=0 bench_case none "$cell" "$layers" "$bi" "$mode" "$batch" 2>/dev/null) ||
        stepwise=""
      if [[ -n $json ]]; then
        echo "$json" >>"$BUILD/bench.jsonl"
        row=$(python3 - "$json" "$name" "$refused" "$stepwise" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
def peer(name):
    p = j.get("peers", {}).get(name)
    return f"{p['median_ms']:.2f} | {p['ratio']:.2f}" if p else None
persistent = peer("cudnn_persistent") or f"refused ({sys.argv[3]}) | -"
stepwise = f"{json.loads(sys.argv[4])['median_ms']:.2f}" if sys.argv[4] else "failed"
print(f"| {sys.argv[2]} | {j['median_ms']:.2f} | {stepwise} | {peer('cudnn') or '- | -'} | {persistent} | {j['gflops']:.0f} |")
PY
)
      else
        row="| $name | failed: $(tail -n 1 "$BUILD/bench.err") | | | | | | |"
        failed+=("bench $name")
      fi
      echo "$row"
      table+=$'\n'"$row"
    done
  done
fi

for t in "${TESTS[@]}"; do
  log "$t"
  out="$BUILD/$t.log"
  shards=1
  ((gpu)) && [[ $t == test_cuda_executor ]] && shards=$SHARDS
  pids=()
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$TEST_TIMEOUT" "$BUILD/bin/$t" >"$out.$i" 2>&1 &
    pids+=($!)
  done
  ok=1
  for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
  cat "$out".* >"$out" && rm -f "$out".*
  if ((!ok)); then
    grep -E '^\[  FAILED|Failure|error' "$out" | head -40
    grep -E '^\[==========\] .* ran\.' "$out"
    failed+=("$t")
    continue
  fi
  grep -E '^\[(==========|  PASSED  |  SKIPPED )\] [0-9]+ test' "$out"
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

log "summary"
if ((gpu && BENCH)); then
  echo "DS2 suite on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) (rnnjit ${RNNJIT_GPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "?")}):"
  echo "$table"
fi
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
