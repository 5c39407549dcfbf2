#!/usr/bin/env python3
"""rnnjit int8 against the int8 peers of issue 57, in one process, runs interleaved rep by rep.

For each case (the DS2 LSTM I=H=800 T=300 at N=20 and N=1; the 2-layer H=640 LSTM decoder step,
T=1 N=1), the same random FP32 weights run as:
  ort-fp32         ONNX Runtime's LSTM, FP32
  ort-int8         ONNX Runtime's DynamicQuantizeLSTM (onnxruntime.quantization.quantize_dynamic,
                   --per-channel for a scale per row; its default is one per direction)
  ort+rnnjit-int8  the same quantized model with librnnjit_onnxruntime.so: DynamicQuantizeLSTM on
                   rnnjit's int8 plan
  torch-int8       PyTorch's dynamic quantized LSTM (torch.ao.quantization.quantize_dynamic, fbgemm)
  rnnjit.torch-int8  rnnjit.torch.quantize_dynamic (packed weights cached)
Prints a Markdown table of medians (ms) and the ratios peer / rnnjit (> 1: rnnjit faster).

    python bench/int8_peers.py [--reps 9] [--threads 2] [--per-channel] [--only n1] [--peers a,b]

The peers share the process's cores: a peer whose threads spin after their work (torch's OpenMP
pool, ONNX Runtime's without allow_spinning=0, which this script sets) slows the next one.
Where a row looks like that, time the peers apart (--peers torch-int8,rnnjit.torch-int8, then
--peers ort-int8,ort+rnnjit-int8) and say so beside the table.

Needs numpy; each peer whose package is missing (onnx/onnxruntime, torch, rnnjit's Python
package or its ORT library) is left out with a note. Run on an otherwise idle machine.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# name, I, H, layers, T, N
CASES = [("ds2_lstm_t300_n20", 800, 800, 1, 300, 20), ("ds2_lstm_t300_n1", 800, 800, 1, 300, 1),
         ("decoder_lstm640x2_t1_n1", 640, 640, 2, 1, 1)]


def weights(I, H, layers, seed=0):
    """torch.nn.LSTM's parameters per layer (gates i, f, g, o), uniform in +-1/sqrt(H)."""
    rng = np.random.default_rng(seed)
    s = 1 / np.sqrt(H)
    out = []
    for layer in range(layers):
        width = I if layer == 0 else H
        out.append({"weight_ih": rng.uniform(-s, s, (4 * H, width)).astype(np.float32),
                    "weight_hh": rng.uniform(-s, s, (4 * H, H)).astype(np.float32),
                    "bias_ih": rng.uniform(-s, s, 4 * H).astype(np.float32),
                    "bias_hh": rng.uniform(-s, s, 4 * H).astype(np.float32)})
    return out


def onnx_model(params, I, H):
    """The stack as ONNX LSTM nodes (gates reordered to ONNX's i, o, f, c), weights initializers."""
    from onnx import TensorProto, helper, numpy_helper
    iofc = lambda a: np.concatenate([a[0:H], a[3 * H:4 * H], a[H:2 * H], a[2 * H:3 * H]])  # noqa: E731
    nodes, inits, x = [], [], "X"
    for layer, p in enumerate(params):
        W, R = iofc(p["weight_ih"])[None], iofc(p["weight_hh"])[None]
        B = np.concatenate([iofc(p["bias_ih"]), iofc(p["bias_hh"])])[None]
        for name, v in (("W", W), ("R", R), ("B", B)):
            inits.append(numpy_helper.from_array(np.ascontiguousarray(v), f"{name}{layer}"))
        y = f"Y{layer}"
        nodes.append(helper.make_node("LSTM", [x, f"W{layer}", f"R{layer}", f"B{layer}"], [y], hidden_size=H,
                                      name=f"lstm{layer}"))
        x = f"Y{layer}s"
        nodes.append(helper.make_node("Squeeze", [y, "axis1"], [x]))  # [T, 1, N, H] -> [T, N, H]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    graph = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def ort_peers(params, I, H, threads, per_channel, notes):
    try:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        notes.append(f"ONNX Runtime peers left out: {e}")
        return {}
    try:
        from rnnjit.onnxruntime import library_path
        library = library_path()
    except (ImportError, FileNotFoundError) as e:
        library = None
        notes.append(f"ort+rnnjit-int8 left out: {e}")
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(onnx_model(params, I, H), src)
        quantize_dynamic(src, dst, per_channel=per_channel, weight_type=QuantType.QInt8)
        fp32, int8 = open(src, "rb").read(), open(dst, "rb").read()

    def session(model, with_library):
        o = ort.SessionOptions()
        o.intra_op_num_threads = threads
        o.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if with_library:
            o.add_session_config_entry("rnnjit.num_threads", str(threads))
            o.register_custom_ops_library(library)
        s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
        return lambda x: s.run(None, {"X": x})[0]

    peers = {"ort-fp32": session(fp32, False), "ort-int8": session(int8, False)}
    if library:
        peers["ort+rnnjit-int8"] = session(int8, True)
    return peers


def torch_peers(params, I, H, threads, notes):
    try:
        import torch
    except ImportError as e:
        notes.append(f"torch peers left out: {e}")
        return {}
    torch.set_num_threads(threads)
    lstm = torch.nn.LSTM(I, H, num_layers=len(params)).eval()
    with torch.no_grad():
        for layer, p in enumerate(params):
            for name, v in p.items():
                getattr(lstm, f"{name}_l{layer}").copy_(torch.from_numpy(v))
    peers = {}
    try:
        from torch.ao.quantization import quantize_dynamic
        theirs = quantize_dynamic(torch.nn.Sequential(lstm), {torch.nn.LSTM}, dtype=torch.qint8)[0]
        peers["torch-int8"] = lambda x: theirs(torch.from_numpy(x))[0]
    except (ImportError, RuntimeError) as e:
        notes.append(f"torch-int8 left out: {e}")
    try:
        import rnnjit.torch
        ours = rnnjit.torch.quantize_dynamic(lstm)  # a new QuantizedRNN; lstm stays as it was
        peers["rnnjit.torch-int8"] = lambda x: ours(torch.from_numpy(x))[0]
    except ImportError as e:
        notes.append(f"rnnjit.torch-int8 left out: {e}")
    return peers


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--per-channel", action="store_true", help="quantize_dynamic(per_channel=True) for ORT")
    p.add_argument("--only", default="", help="cases whose name contains this")
    p.add_argument("--peers", default="", help="comma-separated peers to run (default: all)")
    args = p.parse_args()
    os.environ["RNNJIT_NUM_THREADS"] = str(args.threads)
    notes = []
    rows = []
    for name, I, H, layers, T, N in CASES:
        if args.only not in name:
            continue
        params = weights(I, H, layers)
        peers = {**ort_peers(params, I, H, args.threads, args.per_channel, notes),
                 **torch_peers(params, I, H, args.threads, notes)}
        if args.peers:
            peers = {k: f for k, f in peers.items() if k in args.peers.split(",")}
        x = np.random.default_rng(1).uniform(-1, 1, (T, N, I)).astype(np.float32)
        import contextlib
        try:
            import torch
            no_grad = torch.no_grad
        except ImportError:
            no_grad = contextlib.nullcontext
        with no_grad():
            results = {k: np.asarray(f(x)) for k, f in peers.items()}  # warm-up: plans, packing
            fp32 = results.get("ort-fp32")
            errors = {k: float(np.max(np.abs(v.reshape(fp32.shape) - fp32))) if fp32 is not None else None
                      for k, v in results.items()}
            times = {k: [] for k in peers}
            for _ in range(args.reps):
                for k, f in peers.items():
                    t0 = time.perf_counter()
                    f(x)
                    times[k].append((time.perf_counter() - t0) * 1e3)
        rows.append((name, {k: statistics.median(t) for k, t in times.items()}, errors))
    keys = ["ort-fp32", "ort-int8", "ort+rnnjit-int8", "torch-int8", "rnnjit.torch-int8"]
    print(f"threads={args.threads}, ORT quantize_dynamic per_channel={args.per_channel}; ms (median), "
          "max |error| vs ORT FP32 in brackets")
    print("| case | " + " | ".join(keys) + " | ort-int8 / ort+rnnjit | torch-int8 / rnnjit.torch |")
    print("|---" * (len(keys) + 3) + "|")
    for name, ms, err in rows:
        cell = lambda k: f"{ms[k]:.3f} [{err[k]:.3g}]" if k in ms and err.get(k) is not None else (  # noqa: E731
            f"{ms[k]:.3f}" if k in ms else "-")
        ratio = lambda a, b: f"{ms[a] / ms[b]:.2f}" if a in ms and b in ms else "-"  # noqa: E731
        print(f"| {name} | " + " | ".join(cell(k) for k in keys) +
              f" | {ratio('ort-int8', 'ort+rnnjit-int8')} | {ratio('torch-int8', 'rnnjit.torch-int8')} |")
    for n in dict.fromkeys(notes):
        print(f"note: {n}")


if __name__ == "__main__":
    main()
