#!/usr/bin/env python3
"""ONNX Runtime with rnnjit's custom-op library against ONNX Runtime alone, as a user runs it.

Two sessions of one model in one process, one with librnnjit_onnxruntime.so registered and one
without, both with default session options but intra_op_num_threads=2 (--no-spin adds
session.intra_op.allow_spinning=0 to both); runs alternate between them; each reports the min and
the median of its times, and the ratio ORT alone / ORT with rnnjit (> 1: rnnjit faster).

Shapes: a tiny LSTM (H=8, T=1, N=1: the per-run overhead of each), the production shapes (streaming T=1 LSTMs, a BiLSTM encoder at N=32 and N=1, the cell of
an LSTMP on chunks of T=16..32) and DeepSpeech2's (T=300 N=20 I=H=800 LSTM and GRU). The LSTMP's
projection (1024 -> 512) cannot be said in an ONNX LSTM node (ONNX's LSTM has none; torch's
exporter refuses proj_size), so its row is the cell alone: LSTM I=512 H=1024.

    python bench/ort_suite.py [--reps 30] [--only lstm128] [--no-spin] [--json out.json]

Needs onnx, onnxruntime, numpy and rnnjit's Python package (or RNNJIT_ONNXRUNTIME_LIBRARY naming
the library). The models are made with onnx.helper (weights random, constant initializers).
"""

import argparse
import json
import platform
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

try:
    from rnnjit.onnxruntime import library_path, stats
except ImportError:  # the library alone, without the Python package
    import os

    def library_path():
        return os.environ["RNNJIT_ONNXRUNTIME_LIBRARY"]

    def stats():
        return {}

GATES = {"LSTM": 4, "GRU": 3}


def rnn_model(op, I, H, layers, bidirectional, T, N):
    """A stack of `layers` ONNX nodes (the input of each layer above the first: the one below's Y,
    its directions concatenated), weights random constant initializers."""
    rng = np.random.default_rng(0)
    D, G = (2 if bidirectional else 1), GATES[op]
    nodes, inits = [], []
    x = "X"
    for layer in range(layers):
        width = I if layer == 0 else D * H
        scale = float(1 / np.sqrt(H))
        for name, shape in (("W", (D, G * H, width)), ("R", (D, G * H, H)), ("B", (D, 2 * G * H))):
            inits.append(numpy_helper.from_array((rng.uniform(-1, 1, shape) * scale).astype(np.float32),
                                                 f"{name}{layer}"))
        attrs = dict(hidden_size=H, direction="bidirectional" if bidirectional else "forward")
        if op == "GRU":
            attrs["linear_before_reset"] = 1  # PyTorch's GRU, as exported
        y = f"Y{layer}"
        nodes.append(helper.make_node(op, [x, f"W{layer}", f"R{layer}", f"B{layer}"], [y, f"Yh{layer}"],
                                      name=f"{op}{layer}", **attrs))
        # Y [T, D, N, H] -> [T, N, D*H] for the next layer (and the output).
        nodes.append(helper.make_node("Transpose", [y], [f"{y}t"], perm=[0, 2, 1, 3]))
        shape = f"shape{layer}"
        inits.append(numpy_helper.from_array(np.array([0, 0, D * H], np.int64), shape))
        x = f"{y}r"
        nodes.append(helper.make_node("Reshape", [f"{y}t", shape], [x]))
    graph = helper.make_graph(nodes, "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


# name, op, I, H, layers, bidirectional, T (a list: chunks of those lengths in turn), N
SHAPES = [
    ("overhead_lstm8_t1_n1", "LSTM", 8, 8, 1, False, [1], 1),  # a run's fixed cost, next to no arithmetic
    ("lstm128_t1_n1", "LSTM", 128, 128, 1, False, [1], 1),
    ("lstm640x2_t1_n1", "LSTM", 640, 640, 2, False, [1], 1),
    ("lstmp1024_cell_i512_t16-32_n1", "LSTM", 512, 1024, 1, False, list(range(16, 33, 4)), 1),
    ("bilstm128_t200_n32", "LSTM", 128, 128, 1, True, [200], 32),
    ("bilstm256_t200_n1", "LSTM", 256, 256, 1, True, [200], 1),
    ("ds2_lstm_t300_n20_h800", "LSTM", 800, 800, 1, False, [300], 20),
    ("ds2_gru_t300_n20_h800", "GRU", 800, 800, 1, False, [300], 20),
]


def session(model_bytes, with_library, spin, rnnjit_threads=0):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if with_library:
        if rnnjit_threads:
            options.add_session_config_entry("rnnjit.num_threads", str(rnnjit_threads))
        options.register_custom_ops_library(library_path())
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def bench_shape(shape, reps, spin, rnnjit_threads=0):
    name, op, I, H, layers, bidirectional, Ts, N = shape
    model = rnn_model(op, I, H, layers, bidirectional, Ts[0], N).SerializeToString()
    sessions = {"ort": session(model, False, spin), "ort+rnnjit": session(model, True, spin, rnnjit_threads)}
    rng = np.random.default_rng(1)
    inputs = [{"X": rng.standard_normal((T, N, I)).astype(np.float32)} for T in Ts]
    outputs = {}
    for key, s in sessions.items():  # warm-up (plans, kernels, packing) and a check of the results
        for feeds in inputs:
            outputs.setdefault(key, []).append(s.run(None, feeds)[0])
    for a, b in zip(outputs["ort"], outputs["ort+rnnjit"]):
        err = float(np.max(np.abs(a - b)))
        assert err < 1e-3 * max(1.0, float(np.max(np.abs(a)))), f"{name}: results differ by {err}"
    times = {key: [] for key in sessions}
    for _ in range(reps):
        for key, s in sessions.items():  # alternating
            t0 = time.perf_counter()
            for feeds in inputs:
                s.run(None, feeds)
            times[key].append((time.perf_counter() - t0) * 1e3 / len(inputs))
    row = {"shape": name}
    for key, t in times.items():
        row[key] = {"min_ms": min(t), "median_ms": statistics.median(t)}
    row["ratio_min"] = row["ort"]["min_ms"] / row["ort+rnnjit"]["min_ms"]
    row["ratio_median"] = row["ort"]["median_ms"] / row["ort+rnnjit"]["median_ms"]
    return row


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=30, help="alternating runs of each session (default 30)")
    p.add_argument("--only", default="", help="shapes whose name contains this")
    p.add_argument("--no-spin", action="store_true", help="session.intra_op.allow_spinning=0 in both sessions")
    p.add_argument("--rnnjit-threads", type=int, default=0,
                   help="the session config entry rnnjit.num_threads of the session with the library (0: unset)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    print(f"# {cpu_name()}; onnxruntime {ort.__version__}, onnx {onnx.__version__}; intra_op_num_threads=2"
          f"{', allow_spinning=0' if args.no_spin else ''}"
          f"{f', rnnjit.num_threads={args.rnnjit_threads}' if args.rnnjit_threads else ''}; {args.reps} alternating runs")
    print(f"{'shape':32s} {'ORT min':>9s} {'ORT med':>9s} {'+rnnjit min':>11s} {'+rnnjit med':>11s} "
          f"{'x min':>6s} {'x med':>6s}")
    rows = []
    for shape in SHAPES:
        if args.only and args.only not in shape[0]:
            continue
        r = bench_shape(shape, args.reps, not args.no_spin, args.rnnjit_threads)
        rows.append(r)
        print(f"{r['shape']:32s} {r['ort']['min_ms']:9.3f} {r['ort']['median_ms']:9.3f} "
              f"{r['ort+rnnjit']['min_ms']:11.3f} {r['ort+rnnjit']['median_ms']:11.3f} "
              f"{r['ratio_min']:6.2f} {r['ratio_median']:6.2f}", flush=True)
    print(f"# library: {stats()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "onnxruntime": ort.__version__, "spin": not args.no_spin, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
