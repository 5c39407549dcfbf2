#!/usr/bin/env bash
# The DeepSpeech2 cases (T=300, I=H=800: one layer N=20, five layers bidirectional N=20, and the
# LSTM at N=1 in inference; inference and training) with --fpmath bf16 (the GEMMs on AMX-BF16
# tiles, else AVX512_BF16), timed in one process interleaved rep by rep with oneDNN's RNN
# primitives on bf16 data and weights (onednn_bf16, its x and y converted each call as rnnjit's
# are; in training with FP32 gradients), rnnjit's FP32 plan (strict) and oneDNN's FP32
# primitives. Prints a Markdown table. Run on an otherwise idle machine with AMX-BF16 or
# AVX512_BF16 (elsewhere the bf16 plan is FP32). A build against oneDNN 3.x (tools/onednn3.sh:
# build-onednn3) compares with oneDNN 3.x's bf16. BF16_CASES (a bash regular expression) runs
# only the cases whose name matches, e.g. BF16_CASES=' train$'.
#   bench/bf16_suite.sh [BUILD_DIR] [PEERS]     (default: build, "onednn_bf16,strict,onednn" or "strict")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
cli="$build/bin/rnn-jit"
default_peers=strict
"$cli" bench --cell lstm --input-size 4 --hidden-size 4 --seq 1 --batch 1 --reps 1 --compare onednn >/dev/null 2>&1 &&
  default_peers=onednn_bf16,strict,onednn
peers=${2:-$default_peers}

echo "| case | rnnjit bf16 ms | oneDNN bf16 ms | oneDNN bf16 / rnnjit bf16 | rnnjit FP32 ms | oneDNN FP32 ms | rnnjit FP32 / bf16 |"
echo "|---|---|---|---|---|---|---|"
for spec in "lstm 1 0 20 infer 7" "gru 1 0 20 infer 7" "rnn_tanh 1 0 20 infer 7" "gru_reset_before 1 0 20 infer 7" \
            "lstm+peephole 1 0 20 infer 7" "lstm 5 1 20 infer 3" "gru 5 1 20 infer 3" "rnn_tanh 5 1 20 infer 3" \
            "lstm 1 0 1 infer 7" "lstm 1 0 20 train 5" "gru 1 0 20 train 5" "rnn_tanh 1 0 20 train 5" \
            "lstm 5 1 20 train 3" "gru 5 1 20 train 3" "rnn_tanh 5 1 20 train 3"; do
  read -r variant layers bi batch mode reps <<<"$spec"
  case_name="$variant L=$layers$([[ $bi == 1 ]] && echo " bidir" || true) N=$batch $mode"
  [[ -n ${BF16_CASES:-} && ! $case_name =~ $BF16_CASES ]] && continue
  flags=(--cell "${variant%+*}" --input-size 800 --hidden-size 800 --layers "$layers" --seq 300 --batch "$batch"
         --mode "$mode" --reps "$reps" --warmup 1 --fpmath bf16 --compare "$peers" --json)
  [[ $variant == *+peephole ]] && flags+=(--peephole)
  [[ $bi == 1 ]] && flags+=(--bidirectional)
  json=$("$cli" bench "${flags[@]}")
  python3 - "$json" "$case_name" <<'PY'
import json, sys
j = json.loads(sys.argv[1]); name = sys.argv[2]
peers = j.get("peers", {})
strict, onednn, onednn16 = peers.get("strict"), peers.get("onednn"), peers.get("onednn_bf16")
cell = lambda p, key, fmt: fmt.format(p[key]) if p else "-"
print(f"| {name} | {j['median_ms']:.1f} | "
      f"{cell(onednn16, 'median_ms', '{:.1f}')} | {cell(onednn16, 'ratio', '{:.2f}')} | "
      f"{cell(strict, 'median_ms', '{:.1f}')} | {cell(onednn, 'median_ms', '{:.1f}')} | "
      f"{cell(strict, 'ratio', '{:.2f}')} |")
PY
done
