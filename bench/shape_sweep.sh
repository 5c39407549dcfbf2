#!/usr/bin/env bash
# Beside DeepSpeech2's shapes, two sets of one-layer-or-more cases, each timed against oneDNN's
# RNN primitives interleaved in one process (rnn-jit bench --compare), inference and training;
# prints a Markdown table. Run on an otherwise idle machine.
#   shapes (default): small and large batches, hidden sizes from 40 to 1024, inputs smaller and
#     larger than the hidden size, one layer. Where bench/ds2_suite.sh measures the headline
#     shape, this looks for shapes where rnnjit falls behind.
#   features: what oneDNN's primitives also have beside the plain networks: the LSTM projection
#     and peepholes, the sigmoid RNN and the leaky ReLU, the reverse direction, summed
#     directions, batch-first tensors and no biases.
#   bench/shape_sweep.sh [BUILD_DIR] [PEERS] [shapes|features]   (default: build, onednn, shapes;
#                                                                 PEERS "" for rnnjit alone)
# REPS and WARMUP (environment) override the 7 timed and 2 warm-up repetitions of each case.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
peers=${2-onednn}
set_name=${3:-shapes}
cli="$build/bin/rnn-jit"

#            cell        I     H    T    N  rnn-jit flags
shapes='lstm          64   128  100  64
lstm         512   512   50 128
lstm         300   600   60   1
lstm        1000   256   80   8
lstm        1024  1024   20   4
gru          256   256  100  32
gru          512  1024   50  64
gru           40    40  500   4
gru           32    50   10  64
gru           64   300   50  64
rnn_tanh     256  1024  100  16
rnn_relu     200   500   40  50'
features='lstm         800   800  300  20  --proj-size 400
lstm          80  1024  200  16  --proj-size 256 --layers 2 --bidirectional
lstm         800   800  300  20  --peephole
rnn_sigmoid  800   800  300  20  --direction reverse
rnn_relu     800   800  300  20  --relu-alpha 0.1
gru          512   512  100  32  --direction bidirectional_sum --layers 2
gru          512   512  100  32  --batch-first --no-bias'
case $set_name in
  shapes) rows=$shapes ;;
  features) rows=$features ;;
  *) echo "shape_sweep.sh: unknown set '$set_name' (expected shapes or features)" >&2; exit 2 ;;
esac

column=""  # the flags column, in the features table only
[[ $set_name == features ]] && column=" flags |"
echo "| cell | I | H | T | N |$column mode | rnnjit ms | ${peers:-peer} ms | ratio ${peers:-peer}/rnnjit |"
echo "|---|---|---|---|---|${column:+---|}---|---|---|---|"
while read -r cell I H T N flags; do
  read -r -a extra <<<"$flags"
  for mode in infer train; do
    args=(--cell "$cell" --input-size "$I" --hidden-size "$H" --seq "$T" --batch "$N" --mode "$mode"
          --reps ${REPS:-7} --warmup ${WARMUP:-2} --json "${extra[@]}")
    [[ -n $peers ]] && args+=(--compare "$peers")
    json=$("$cli" bench "${args[@]}")
    python3 - "$json" "$cell" "$I" "$H" "$T" "$N" "$mode" "$peers" "${column:+$flags}" <<'PY'
import json, sys
j = json.loads(sys.argv[1]); cell, I, H, T, N, mode, peers, flags = sys.argv[2:]
peer = j.get("peers", {}).get(peers.split(",")[0]) if peers else None
pm = f"{peer['median_ms']:.2f}" if peer else "-"
ratio = f"{peer['ratio']:.2f}" if peer else "-"
column = f" `{flags}` |" if flags else ""
print(f"| {cell} | {I} | {H} | {T} | {N} |{column} {mode} | {j['median_ms']:.2f} | {pm} | {ratio} |")
PY
  done
done <<<"$rows"
