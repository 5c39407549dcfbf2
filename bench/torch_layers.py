#!/usr/bin/env python3
"""rnnjit.torch against torch.nn on the DeepSpeech2 shapes, interleaved in one process.

    python bench/torch_layers.py                      # every DS2 case, inference and training
    python bench/torch_layers.py --cells lstm --layers 1 --reps 5
    python bench/torch_layers.py --overhead-only --cli build/bin/rnn-jit

Each case times rnnjit.torch.X and torch.nn.X (the same parameters) in turn, rep by rep, so both
see the same machine; it prints the minimum and median of each and the ratio torch.nn / rnnjit
(above 1: rnnjit is faster). Inference runs under torch.no_grad(); training is forward plus
backward of y.sum() (gradients of the input and every parameter). The overhead section times
a tiny shape (T=1, N=1, H=64) through rnnjit.torch, through the low-level rnnjit.Execution on
preallocated tensors and, with --cli, through the C++ API (`rnn-jit bench`), which is the
Python-side cost per call. Name the CPU with --cpu-note where lscpu does not say it.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import time

import torch

import rnnjit
import rnnjit.torch

LAYERS = {"lstm": (rnnjit.torch.LSTM, torch.nn.LSTM), "gru": (rnnjit.torch.GRU, torch.nn.GRU),
          "rnn_tanh": (rnnjit.torch.RNN, torch.nn.RNN)}


def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown CPU"


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def step(layer, x, train):
    if train:
        x.grad = None
        layer.zero_grad(set_to_none=True)
        layer(x)[0].sum().backward()
    else:
        with torch.no_grad():
            layer(x)


def ds2_case(cell, layers, train, args):
    ours_cls, theirs_cls = LAYERS[cell]
    torch.manual_seed(0)
    ours = ours_cls(args.input_size, args.hidden_size, num_layers=layers, bidirectional=layers > 1)
    theirs = theirs_cls(args.input_size, args.hidden_size, num_layers=layers, bidirectional=layers > 1)
    theirs.load_state_dict(ours.state_dict())
    x = torch.rand(args.seq, args.batch, args.input_size, requires_grad=train)
    for _ in range(args.warmup):
        step(ours, x, train)
        step(theirs, x, train)
    times = {"rnnjit": [], "torch": []}
    for _ in range(args.reps):
        times["rnnjit"].append(timed(lambda: step(ours, x, train)))
        times["torch"].append(timed(lambda: step(theirs, x, train)))
    return times


def overhead(args):
    """Milliseconds per call at T=1, N=1, H=64 through each layer of the stack."""
    config = dict(input_size=64, hidden_size=64)
    layer = rnnjit.torch.LSTM(**config)
    reference = torch.nn.LSTM(**config)
    reference.load_state_dict(layer.state_dict())
    x = torch.rand(1, 1, 64)
    ex = rnnjit.Rnn(rnnjit.RnnConfig(cell="lstm", **config)).prepare((1, 1), "inference")
    flat = layer._rnnjit_weights()[0].detach()
    y = torch.empty(1, 1, 64)
    calls = {"rnnjit.torch.LSTM": lambda: layer(x), "torch.nn.LSTM": lambda: reference(x),
             "rnnjit.Execution.forward": lambda: ex.forward(flat, x, y)}
    reps = max(args.reps, 1) * 200
    result = {}
    with torch.no_grad():
        for name, fn in calls.items():
            for _ in range(50):
                fn()
            samples = [timed(fn) for _ in range(reps)]
            result[name] = {"min_ms": 1e3 * min(samples), "median_ms": 1e3 * statistics.median(samples)}
    if args.cli:
        out = subprocess.run([args.cli, "bench", "--input-size", "64", "--hidden-size", "64", "--seq", "1", "--batch",
                              "1", "--threads", str(args.threads), "--reps", str(reps), "--json"], capture_output=True, text=True, check=True).stdout
        j = json.loads(out)
        result["C++ Execution::forward (rnn-jit bench)"] = {"min_ms": j["min_ms"], "median_ms": j["median_ms"]}
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", nargs="+", default=["lstm", "gru", "rnn_tanh"], choices=sorted(LAYERS))
    p.add_argument("--layers", nargs="+", type=int, default=[1, 5], help="1: one direction; more: bidirectional")
    p.add_argument("--modes", nargs="+", default=["infer", "train"], choices=["infer", "train"])
    p.add_argument("--seq", type=int, default=300)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--input-size", type=int, default=800)
    p.add_argument("--hidden-size", type=int, default=800)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="threads of both: torch.set_num_threads and RNNJIT_NUM_THREADS (default: every CPU)")
    p.add_argument("--cli", help="the rnn-jit binary, to time the same tiny call through the C++ API")
    p.add_argument("--overhead-only", action="store_true")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["RNNJIT_NUM_THREADS"] = str(args.threads)  # read when each layer makes its rnnjit.Rnn

    report = {"cpu": cpu_name(), "torch": torch.__version__, "rnnjit": rnnjit.__version__,
              "torch_threads": torch.get_num_threads(), "isa": str(rnnjit.detect_isa()), "cases": []}
    if not args.overhead_only:
        for cell in args.cells:
            for layers in args.layers:
                for mode in args.modes:
                    t = ds2_case(cell, layers, mode == "train", args)
                    case = {"cell": cell, "layers": layers, "bidirectional": layers > 1, "mode": mode,
                            "rnnjit_min_ms": 1e3 * min(t["rnnjit"]), "torch_min_ms": 1e3 * min(t["torch"]),
                            "rnnjit_median_ms": 1e3 * statistics.median(t["rnnjit"]),
                            "torch_median_ms": 1e3 * statistics.median(t["torch"])}
                    case["ratio"] = case["torch_min_ms"] / case["rnnjit_min_ms"]
                    report["cases"].append(case)
                    if not args.json:
                        print(f"{cell:8} L={layers} {'bidir' if layers > 1 else 'fwd  '} {mode:5}  rnnjit "
                              f"{case['rnnjit_min_ms']:9.1f} ms  torch.nn {case['torch_min_ms']:9.1f} ms  "
                              f"torch.nn/rnnjit {case['ratio']:.2f}", flush=True)
    report["overhead"] = overhead(args)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"per call at T=1 N=1 I=H=64 (inference; min / median of {max(args.reps, 1) * 200}):")
    for name, v in report["overhead"].items():
        print(f"  {name:40} {v['min_ms'] * 1e3:8.1f} / {v['median_ms'] * 1e3:8.1f} us")
    print(f"CPU: {report['cpu']}; isa {report['isa']}; torch {report['torch']} on {report['torch_threads']} threads")


if __name__ == "__main__":
    main()
