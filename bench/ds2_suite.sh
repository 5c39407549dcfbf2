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
# With a second build against oneDNN 3.x (tools/onednn3.sh: build-onednn3/, oneDNN 3.2 from
# PyPI) and onednn among the peers, each case runs there too, right after the first (a process
# of its own, rnnjit and oneDNN 3.x interleaved rep by rep: one process loads one libdnnl), and
# the table gets oneDNN 3.x's time and its ratio to that run's rnnjit beside the first build's;
# the header names both versions (dnnl_version() in each build).
#   bench/ds2_suite.sh [BUILD_DIR] [PEERS] [ONEDNN3_BUILD_DIR]
#   (defaults: build; onednn; build-onednn3 where it has rnn-jit with a oneDNN peer, "none" for no second build)
# DS2_CASES (a bash regular expression) runs only the cases whose name matches, e.g.
# DS2_CASES='^lstm L=1 N=1 ' for the batch of one.
# DS2_ISA caps both sides at one instruction set, e.g. DS2_ISA=avx2 on an AVX-512 machine: rnnjit's
# plans (rnn-jit bench --isa avx2), oneDNN's JIT in both builds (the same flag caps it through
# dnnl::set_max_cpu_isa; DNNL_MAX_CPU_ISA and ONEDNN_MAX_CPU_ISA are exported as well, for 2.x and
# 3.x), and the FMA peak (ymm FMAs); the table's header names the cap.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
peers=${2:-onednn}
build3=${3:-build-onednn3}
cli="$build/bin/rnn-jit"
isa_flags=()
if [[ -n ${DS2_ISA:-} ]]; then
  isa_flags=(--isa "$DS2_ISA")
  [[ $DS2_ISA == avx2 ]] && export DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
fi

# The oneDNN that a build's peer runs ("oneDNN 3.2.0"), or nothing where it has none.
onednn_of() {
  "$1" bench --cell lstm --input-size 4 --hidden-size 4 --seq 1 --batch 1 --reps 1 --warmup 0 --compare onednn \
    "${isa_flags[@]}" --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["onednn_version"].split(" (")[0])' \
    2>/dev/null || true
}
version=$(onednn_of "$cli")
cli3=
version3=
if [[ $build3 != none && -x $build3/bin/rnn-jit && ,$peers, == *,onednn,* ]]; then
  version3=$(onednn_of "$build3/bin/rnn-jit")
  [[ -n $version3 ]] && cli3="$build3/bin/rnn-jit"
fi

run_case() {  # cli variant layers bidirectional(0/1) mode batch reps [flags...]
  local cli=$1 variant=$2 layers=$3 bi=$4 mode=$5 batch=$6 reps=$7
  shift 7
  local flags=(--cell "${variant%+*}" --input-size 800 --hidden-size 800 --layers "$layers" --seq 300
               --batch "$batch" --mode "$mode" --reps "$reps" --warmup 1 --json "${isa_flags[@]}" "$@")
  [[ $variant == *+peephole ]] && flags+=(--peephole)
  [[ $bi == 1 ]] && flags+=(--bidirectional)
  "$cli" bench "${flags[@]}"
}

[[ -n ${DS2_ISA:-} ]] && echo "Both sides capped at isa $DS2_ISA (rnn-jit bench --isa $DS2_ISA; oneDNN's max CPU ISA)."
first=${peers%%,*}
first_name=${first:-peer}
[[ $first == onednn && -n $version ]] && first_name=$version
header="| case | rnnjit ms | $first_name ms | ratio $first_name/rnnjit |"
rule="|---|---|---|---|"
if [[ -n $cli3 ]]; then
  header+=" $version3 ms (rnnjit ms in its run) | ratio $version3/rnnjit |"
  rule+="---|---|"
fi
echo "$header rnnjit GFLOPS | % of measured FMA peak | W_hh streaming bound ms (% of rnnjit's time) | GEMM ceiling, % of the peak: sgemm (oneDNN or OpenBLAS), rnnjit GEMM, tile in L1 |"
echo "$rule---|---|---|---|"
for cell in lstm gru rnn_tanh gru_reset_before lstm+peephole; do
  for spec in "1 0 infer 20 7" "1 0 train 20 5" "5 1 infer 20 3" "5 1 train 20 3" "1 0 infer 1 7"; do
    read -r layers bi mode batch reps <<<"$spec"
    [[ $batch == 1 && $cell != lstm ]] && continue
    [[ ($cell == gru_reset_before || $cell == lstm+peephole) && $layers != 1 ]] && continue
    case_name="$cell L=$layers$([[ $bi == 1 ]] && echo " bidir" || true) N=$batch $mode"
    [[ -n ${DS2_CASES:-} && ! $case_name =~ $DS2_CASES ]] && continue
    compare=()
    [[ -n $peers ]] && compare=(--compare "$peers")
    json=$(run_case "$cli" "$cell" "$layers" "$bi" "$mode" "$batch" "$reps" --peak "${compare[@]}")
    json3='{}'
    [[ -n $cli3 ]] && json3=$(run_case "$cli3" "$cell" "$layers" "$bi" "$mode" "$batch" "$reps" --compare onednn)
    python3 - "$json" "$json3" "$cell" "$layers" "$bi" "$mode" "$batch" "$peers" <<'PY'
import json, sys
j, j3 = json.loads(sys.argv[1]), json.loads(sys.argv[2])
cell, layers, bi, mode, batch, peers = sys.argv[3:]
name = f"{cell} L={layers}{' bidir' if bi == '1' else ''} N={batch} {mode}"  # as case_name above
peer = j.get("peers", {}).get(peers.split(",")[0]) if peers else None
pm = f"{peer['median_ms']:.1f}" if peer else "-"
ratio = f"{peer['ratio']:.2f}" if peer else "-"
second = ""
if j3:  # the oneDNN 3.x build's run of the same case
    p3 = j3["peers"]["onednn"]
    second = f" {p3['median_ms']:.1f} ({j3['median_ms']:.1f}) | {p3['ratio']:.2f} |"
frac = f"{100 * j['peak_fraction']:.0f}% of {j['peak_gflops']:.0f}" if "peak_fraction" in j else "-"
bound = (f"{j['weights_bound_ms']:.1f} ({100 * j['weights_bound_fraction']:.0f}%)"
         if "weights_bound_ms" in j else "-")
ceiling = "-"
if "gemm_ceiling" in j:
    g, peak = j["gemm_ceiling"], j["peak_gflops"]
    sgemm = g["onednn_gflops"] or g["openblas_gflops"]
    ceiling = " / ".join(f"{100 * v / peak:.0f}%" for v in (sgemm, g["rnnjit_gflops"], g["tile_in_l1_gflops"]))
print(f"| {name} | {j['median_ms']:.1f} | {pm} | {ratio} |{second} {j['gflops']:.1f} | {frac} | {bound} | {ceiling} |")
PY
  done
done
