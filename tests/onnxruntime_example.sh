#!/usr/bin/env bash
# examples/onnxruntime_embed.cpp against PyPI's ONNX Runtime: $RNNJIT_TEST_PYTHON (default python3)
# writes an LSTM + GRU model with onnx and names its wheel's libonnxruntime.so.1.x; the example
# runs the model with and without rnnjit's library. Skips (77) where onnx/onnxruntime are missing.
#   tests/onnxruntime_example.sh EXAMPLE LIBRNNJIT_ONNXRUNTIME WORKDIR
set -euo pipefail
example=$1 library=$2 work=$3
python=${RNNJIT_TEST_PYTHON:-python3}
mkdir -p "$work"
if ! ort=$("$python" - "$work/model.onnx" <<'PY'
import glob, os, sys
import numpy as np, onnx, onnxruntime
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = lambda *s: numpy_helper.from_array((rng.uniform(-1, 1, s) * 0.3).astype(np.float32), f"w{len(inits)}")
inits = []
inits.append(w(2, 64, 5)); inits.append(w(2, 64, 16)); inits.append(w(2, 128))
inits.append(w(1, 36, 5)); inits.append(w(1, 36, 12))
nodes = [helper.make_node("LSTM", ["X", "w0", "w1", "w2"], ["Y", "Y_h"], hidden_size=16, direction="bidirectional"),
         helper.make_node("GRU", ["X", "w3", "w4"], ["G", "G_h"], hidden_size=12)]
graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [7, "N", 5])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "G", "G_h")],
                          inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), sys.argv[1])
capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
print(sorted(glob.glob(os.path.join(capi, "libonnxruntime.so.1*")))[-1])
PY
); then
  echo "onnxruntime_example: skipped: $python has no onnx and onnxruntime (or its wheel no libonnxruntime.so.1.x)"
  exit 77
fi
out=$("$example" "$ort" "$library" "$work/model.onnx")
echo "$out"
# Both nodes ran on rnnjit, and the outputs agree to float32 rounding over a short sequence.
[[ $out =~ max\ \|with\ rnnjit\ -\ without\|\ =\ ([0-9.e+-]+),\ rnnjit\ runs\ 2$ ]] || { echo "unexpected output"; exit 1; }
awk -v d="${BASH_REMATCH[1]}" 'BEGIN { exit !(d < 1e-5) }' || { echo "outputs differ by ${BASH_REMATCH[1]}"; exit 1; }
echo "onnxruntime_example: ok"
