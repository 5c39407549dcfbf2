#!/usr/bin/env bash
# The DeepSpeech2 benchmark suite: LSTM, GRU and RNN-tanh on T=300, N=20, I=H=800, one layer
# unidirectional and five layers bidirectional, inference and training, plus N=1 inference; and
# one layer of the two cells oneDNN also has that PyTorch has not: the reset-before GRU (oneDNN's
# vanilla GRU) and the LSTM with peepholes.
# Each case times rnnjit and its peers interleaved in one process (rnn-jit bench --compare) and
# measures the FMA peak, the weight-streaming bound (the time to read W_hh once a step at the
# read rate measured then) and the FP32 GEMM ceiling (oneDNN's sgemm and rnnjit's generated GEMM
# on 2048^3, and the generated 5 x 5 tile with its operands in L1, as fractions of that peak)
# right after; prints a Markdown table. Run on an otherwise idle machine.
#   bench/ds2_suite.sh [BUILD_DIR] [PEERS]     (default: build, onednn when built in)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
peers=${2:-onednn}
cli="$build/bin/rnn-jit"

run_case() {  # variant layers bidirectional(0/1) mode batch reps
  local variant=$1 layers=$2 bi=$3 mode=$4 batch=$5 reps=$6
  local flags=(--cell "${variant%+*}" --input-size 800 --hidden-size 800 --layers "$layers" --seq 300
               --batch "$batch" --mode "$mode" --reps "$reps" --warmup 1 --peak --json)
  [[ $variant == *+peephole ]] && flags+=(--peephole)
  [[ $bi == 1 ]] && flags+=(--bidirectional)
  [[ -n $peers ]] && flags+=(--compare "$peers")
  "$cli" bench "${flags[@]}"
}

echo "| case | rnnjit ms | ${peers:-peer} ms | ratio ${peers:-peer}/rnnjit | rnnjit GFLOPS | % of measured FMA peak | W_hh streaming bound ms (% of rnnjit's time) | GEMM ceiling, % of the peak: sgemm (oneDNN or OpenBLAS), rnnjit GEMM, tile in L1 |"
echo "|---|---|---|---|---|---|---|---|"
for cell in lstm gru rnn_tanh gru_reset_before lstm+peephole; do
  for spec in "1 0 infer 20 7" "1 0 train 20 5" "5 1 infer 20 3" "5 1 train 20 3" "1 0 infer 1 7"; do
    read -r layers bi mode batch reps <<<"$spec"
    [[ $batch == 1 && $cell != lstm ]] && continue
    [[ ($cell == gru_reset_before || $cell == lstm+peephole) && $layers != 1 ]] && continue
    json=$(run_case "$cell" "$layers" "$bi" "$mode" "$batch" "$reps")
    python3 - "$json" "$cell" "$layers" "$bi" "$mode" "$batch" "$peers" <<'PY'
import json, sys
j = json.loads(sys.argv[1]); cell, layers, bi, mode, batch, peers = sys.argv[2:]
name = f"{cell} L={layers}{' bidir' if bi == '1' else ''} N={batch} {mode}"
peer = j.get("peers", {}).get(peers.split(",")[0]) if peers else None
pm = f"{peer['median_ms']:.1f}" if peer else "-"
ratio = f"{peer['ratio']:.2f}" if peer else "-"
frac = f"{100 * j['peak_fraction']:.0f}% of {j['peak_gflops']:.0f}" if "peak_fraction" in j else "-"
bound = (f"{j['weights_bound_ms']:.1f} ({100 * j['weights_bound_fraction']:.0f}%)"
         if "weights_bound_ms" in j else "-")
ceiling = "-"
if "gemm_ceiling" in j:
    g, peak = j["gemm_ceiling"], j["peak_gflops"]
    sgemm = g["onednn_gflops"] or g["openblas_gflops"]
    ceiling = " / ".join(f"{100 * v / peak:.0f}%" for v in (sgemm, g["rnnjit_gflops"], g["tile_in_l1_gflops"]))
print(f"| {name} | {j['median_ms']:.1f} | {pm} | {ratio} | {j['gflops']:.1f} | {frac} | {bound} | {ceiling} |")
PY
  done
done
