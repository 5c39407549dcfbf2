#!/usr/bin/env bash
# Issue 57's cases with --quantize int8 (int8 weights, x and h quantized per row, on
# AVX512-VNNI), timed in one process interleaved rep by rep with rnnjit's bf16 plan (--fpmath
# bf16: AMX-BF16 or AVX512_BF16) and its FP32 plan: the DS2 LSTM (I=H=800, T=300) at N=20 and
# N=1, the 2-layer H=640 LSTM decoder step (T=1, N=1), and the cells without an ONNX Runtime
# int8 peer (GRU, LSTM with a projection) at N=20 and N=1. Packed weights, as a deployed model
# runs (bench packs once). Prints a Markdown table. Run on an otherwise idle machine with
# AVX512_VNNI (elsewhere the int8 plan is bf16 or FP32 and the table says so). INT8_CASES (a
# bash regular expression) runs only the cases whose name matches, e.g. INT8_CASES='N=1$'.
# Where rnn-jit has the oneDNN peer, oneDNN's int8 RNN too (onednn_int8: u8 data, s8 weights,
# scales from the data; "-" where oneDNN runs no int8 of the cell, e.g. 2.6.3's lbr_gru, or the
# peer none of it, e.g. a projection).
# ONNX Runtime's DynamicQuantizeLSTM (alone and on rnnjit through librnnjit_onnxruntime.so) and
# PyTorch's dynamic quantized LSTM against rnnjit.torch.quantize_dynamic: bench/int8_peers.py.
#   bench/int8_suite.sh [BUILD_DIR] [THREADS]     (default: build, every hardware thread)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
cli="$build/bin/rnn-jit"
threads=()
[[ -n ${2:-} ]] && threads=(--threads "$2")

compare=bf16,strict
"$cli" bench --seq 2 --batch 1 --reps 1 --warmup 0 --compare onednn >/dev/null 2>&1 && compare+=,onednn

echo "| case | rnnjit int8 ms | rnnjit bf16 ms | rnnjit FP32 ms | oneDNN int8 ms | bf16 / int8 | FP32 / int8 | oneDNN int8 / int8 | int8 ran |"
echo "|---|---|---|---|---|---|---|---|---|"
# cell, I, H, layers, T, N, projection, reps
for spec in "lstm 800 800 1 300 20 0 9" "lstm 800 800 1 300 1 0 9" "lstm 640 640 2 1 1 0 2001" \
            "gru 800 800 1 300 20 0 9" "gru 800 800 1 300 1 0 9" "lstm 800 1024 1 300 20 512 9" \
            "lstm 800 1024 1 300 1 512 9" "lstm 1024 1024 1 100 1 0 9" "lstm 2048 2048 1 50 1 0 5"; do
  read -r cell in hidden layers seq batch proj reps <<<"$spec"
  case_name="$cell I=$in H=$hidden$([[ $proj != 0 ]] && echo " P=$proj" || true) L=$layers T=$seq N=$batch"
  [[ -n ${INT8_CASES:-} && ! $case_name =~ $INT8_CASES ]] && continue
  flags=(--cell "$cell" --input-size "$in" --hidden-size "$hidden" --layers "$layers" --seq "$seq" --batch "$batch"
         --mode infer --reps "$reps" --warmup 2 --quantize int8 --compare "$compare" --json "${threads[@]}")
  [[ $proj != 0 ]] && flags+=(--proj-size "$proj")
  json=$("$cli" bench "${flags[@]}")
  python3 - "$json" "$case_name" <<'PY'
import json, sys
j = json.loads(sys.argv[1]); name = sys.argv[2]
peers = j.get("peers", {})
bf16, strict, onednn = peers.get("bf16"), peers.get("strict"), peers.get("onednn_int8")
ms = lambda p: f"{p['median_ms']:.3f}" if p else "-"
ratio = lambda p: f"{p['ratio']:.2f}" if p else "-"
print(f"| {name} | {j['median_ms']:.3f} | {ms(bf16)} | {ms(strict)} | {ms(onednn)} | {ratio(bf16)} | {ratio(strict)} | "
      f"{ratio(onednn)} | "
      f"{'yes' if j.get('quantize') == 'int8_dynamic' else 'no (see rnn-jit plan --quantize int8)'} |")
PY
done
