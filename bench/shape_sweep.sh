#!/usr/bin/env bash
# Shapes beside DeepSpeech2's: small and large batches, hidden sizes from 40 to 1024, inputs
# smaller and larger than the hidden size, one layer, inference and training, each timed
# against oneDNN's RNN primitives interleaved in one process (rnn-jit bench --compare). Where
# bench/ds2_suite.sh measures the headline shape, this one looks for shapes where rnnjit falls
# behind. Prints a Markdown table. Run on an otherwise idle machine.
#   bench/shape_sweep.sh [BUILD_DIR] [PEERS]     (default: build, onednn; "" for rnnjit alone)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
peers=${2-onednn}
cli="$build/bin/rnn-jit"

echo "| cell | I | H | T | N | mode | rnnjit ms | ${peers:-peer} ms | ratio ${peers:-peer}/rnnjit |"
echo "|---|---|---|---|---|---|---|---|---|"
#          cell      I     H    T    N
while read -r cell I H T N; do
  for mode in infer train; do
    flags=(--cell "$cell" --input-size "$I" --hidden-size "$H" --seq "$T" --batch "$N" --mode "$mode"
           --reps 7 --warmup 2 --json)
    [[ -n $peers ]] && flags+=(--compare "$peers")
    json=$("$cli" bench "${flags[@]}")
    python3 - "$json" "$cell" "$I" "$H" "$T" "$N" "$mode" "$peers" <<'PY'
import json, sys
j = json.loads(sys.argv[1]); cell, I, H, T, N, mode, peers = sys.argv[2:]
peer = j.get("peers", {}).get(peers.split(",")[0]) if peers else None
pm = f"{peer['median_ms']:.2f}" if peer else "-"
ratio = f"{peer['ratio']:.2f}" if peer else "-"
print(f"| {cell} | {I} | {H} | {T} | {N} | {mode} | {j['median_ms']:.2f} | {pm} | {ratio} |")
PY
  done
done <<'SHAPES'
lstm      64   128  100  64
lstm      512  512   50 128
lstm      300  600   60   1
lstm     1000  256   80   8
lstm     1024 1024   20   4
gru       256  256  100  32
gru       512 1024   50  64
gru        40   40  500   4
gru        32   50   10  64
gru        64  300   50  64
rnn_tanh  256 1024  100  16
rnn_relu  200  500   40  50
SHAPES
