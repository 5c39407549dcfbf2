#!/usr/bin/env python3
"""rnnjit.torch against torch.nn and ONNX Runtime on the shapes RNNs run in production.

    build/python-venv-pypi/bin/python bench/production_shapes.py            # every case (PyPI torch 2.x)
    build/python-venv-pypi/bin/python bench/production_shapes.py --cases vad decoder --calls 2000
    build/python-venv-pypi/bin/python bench/production_shapes.py --json > results.json

(tools/test.sh makes build/python-venv-pypi: rnnjit installed beside PyPI's torch, onnx,
onnxruntime.) All cases take about 20-30 minutes on 2 cores, most of it torch.nn's DS2 training
steps; --cases picks some. Run it on an otherwise idle machine: each case times the three runners in turn,
round by round, in one process (interleaved: the same machine state for all), and prints the
minimum and median of single calls, in ms, and torch.nn's and ONNX Runtime's times over
rnnjit's (above 1: rnnjit is faster). The models get the same parameters; ONNX Runtime runs
torch.nn's model exported by torch.onnx.export (its LSTM/GRU operators), on the CPU provider
with --ort-threads intra-op threads (2 by default, as the issue's table). Every call passes
initial states, as streaming code does. Training (where the model trains) is forward plus
backward of y.sum() and of the states' sums, for rnnjit.torch and torch.nn.

Two more kinds of rows:
  - after a torch op: the same inference call timed right after a torch.nn.Linear on its input
    (untimed), as in a model, next to the call alone; torch's OpenMP workers still spin then.
  - per-call overhead: rnnjit.torch's T=1 N=1 call against the same call made on the C++
    Execution with packed weights (through the binding's raw-pointer entry, under 1 us of
    binding on top of Execution::forward), and with --cli, `rnn-jit bench` of the shape.

The machine is named from lscpu (--cpu-note adds what it does not say: a VM's host CPU).
"""

import argparse
import io
import contextlib
import json
import os
import platform
import statistics
import subprocess
import time
import warnings

import torch

import rnnjit
import rnnjit.torch

# name: (cell, input, hidden, layers, bidirectional, proj, T, N, trains)
CASES = {
    "vad": ("lstm", 64, 128, 1, False, 0, 1, 1, False),
    "decoder": ("lstm", 640, 640, 2, False, 0, 1, 1, False),
    "lstmp16": ("lstm", 512, 1024, 1, False, 512, 16, 1, False),
    "lstmp32": ("lstm", 512, 1024, 1, False, 512, 32, 1, False),
    "diarization": ("lstm", 128, 128, 2, True, 0, 200, 32, True),
    "tts": ("lstm", 512, 256, 1, True, 0, 200, 1, False),
    "ds2_lstm_n20": ("lstm", 800, 800, 1, True, 0, 300, 20, True),
    "ds2_lstm_n1": ("lstm", 800, 800, 1, True, 0, 300, 1, False),
    "ds2_gru_n20": ("gru", 800, 800, 1, True, 0, 300, 20, True),
    "ds2_gru_n1": ("gru", 800, 800, 1, True, 0, 300, 1, False),
}
LAYERS = {"lstm": (rnnjit.torch.LSTM, torch.nn.LSTM), "gru": (rnnjit.torch.GRU, torch.nn.GRU)}


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


def summary(samples):
    return {"min_ms": 1e3 * min(samples), "median_ms": 1e3 * statistics.median(samples)}


def make_models(case):
    cell, i, h, layers, bidir, proj, t, n, _ = case
    ours_cls, theirs_cls = LAYERS[cell]
    kwargs = dict(num_layers=layers, bidirectional=bidir)
    if proj:
        kwargs["proj_size"] = proj
    torch.manual_seed(0)
    ours = ours_cls(i, h, **kwargs)
    theirs = theirs_cls(i, h, **kwargs)
    theirs.load_state_dict(ours.state_dict())
    directions = 2 if bidir else 1
    x = torch.rand(t, n, i)
    h0 = torch.rand(layers * directions, n, proj or h)
    state = (h0, torch.rand(layers * directions, n, h)) if cell == "lstm" else h0
    return ours, theirs, x, state


def ort_session(theirs, x, state, threads):
    """ONNX Runtime on torch.nn's model, exported; None where onnx/onnxruntime are missing."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    states = state if isinstance(state, tuple) else (state,)
    names = ["x", "h0", "c0"][:1 + len(states)]
    if getattr(theirs, "proj_size", 0):
        return None  # neither of torch's exporters writes an LSTM projection ONNX Runtime runs
    model = None
    # The TorchScript exporter writes ONNX's LSTM/GRU operators; the dynamo one where it fails.
    for dynamo in (False, True):
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                program = torch.onnx.export(theirs.eval(), (x, state), dynamo=dynamo, input_names=names,
                                            **({} if dynamo else {"f": (buffer := io.BytesIO())}))
            model = buffer.getvalue() if not dynamo else program.model_proto.SerializeToString()
            break
        except Exception:  # noqa: BLE001 - the next exporter, or no ONNX Runtime row
            continue
    if model is None:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feeds = {name: t.numpy() for name, t in zip(names, (x, *states))}
    # Only a model that computes what torch.nn does is timed.
    try:
        got = session.run(None, feeds)[0]
    except Exception:  # noqa: BLE001
        return None
    with torch.no_grad():
        want = theirs(x, state)[0]
    if not torch.allclose(torch.from_numpy(got), want, rtol=1e-3, atol=1e-4):
        return None
    return lambda: session.run(None, feeds)


def train_step(layer, x, state):
    layer.zero_grad(set_to_none=True)
    y, s = layer(x, state)
    loss = y.sum() + sum(t.sum() for t in (s if isinstance(s, tuple) else (s,)))
    loss.backward()


def interleave(runners, rounds, calls, warmup):
    """{name: [seconds per call]}: each round runs `calls` calls of each runner in turn."""
    for fn in runners.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in runners}
    for _ in range(rounds):
        for name, fn in runners.items():
            samples[name] += [timed(fn) for _ in range(calls)]
    return samples


def calls_for(case, args):
    """Calls per runner and round: --calls for streaming shapes, a few for the long ones."""
    t, n = case[6], case[7]
    return args.calls if t * n <= 32 else max(2, args.calls // 200)


def run_case(name, args):
    case = CASES[name]
    ours, theirs, x, state = make_models(case)
    rows = []
    calls = calls_for(case, args)
    warmup = args.warmup if calls == args.calls else 1  # long calls: one warms up (plans, packs, pages)
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        runners = {"rnnjit.torch": lambda: ours(x, state), "torch.nn": lambda: theirs(x, state)}
        session = ort_session(theirs, x, state, args.ort_threads) if not args.no_ort else None
        if session is not None:
            runners["onnxruntime"] = session
        rows.append(("inference", interleave(runners, args.rounds, calls, warmup)))
        # After a torch op: the Linear runs untimed right before each timed call.
        linear = torch.nn.Linear(x.shape[-1], x.shape[-1])
        after = {}
        for label, layer in (("rnnjit.torch", ours), ("torch.nn", theirs)):
            def alone(layer=layer):
                return layer(x, state)

            def after_op(layer=layer):
                xi = linear(x)
                start = time.perf_counter()
                layer(xi, state)
                return time.perf_counter() - start
            after[label] = (alone, after_op)
        samples = {}
        for _ in range(args.rounds):
            for label, (alone, after_op) in after.items():
                samples.setdefault(f"{label} alone", []).extend(timed(alone) for _ in range(calls))
                samples.setdefault(f"{label} after a torch op", []).extend(after_op() for _ in range(calls))
        rows.append(("after a torch op", samples))
    if case[8] and not args.no_train:
        ours.train()
        theirs.train()
        xg = x.clone().requires_grad_()
        runners = {"rnnjit.torch": lambda: train_step(ours, xg, state), "torch.nn": lambda: train_step(theirs, xg, state)}
        rows.append(("training", interleave(runners, args.rounds, max(2, calls // 3), warmup)))
    return [{"case": name, "shape": shape_text(case), "row": row, **{k: summary(v) for k, v in s.items()}}
            for row, s in rows]


def shape_text(case):
    cell, i, h, layers, bidir, proj, t, n, _ = case
    text = f"{cell.upper()} I={i} H={h}" + (f" P={proj}" if proj else "") + f" L={layers}"
    return text + (" bidir" if bidir else "") + f" T={t} N={n}"


def overhead(args):
    """rnnjit.torch's T=1 N=1 call against the Execution's with packed weights (raw pointers)."""
    rows = []
    for i, h in ((64, 64), (64, 128)):
        layer = rnnjit.torch.LSTM(i, h).eval()
        x = torch.rand(1, 1, i)
        rnn = rnnjit.Rnn(rnnjit.RnnConfig(cell="lstm", input_size=i, hidden_size=h),
                         rnnjit.Options(threads=torch.get_num_threads()))
        ex = rnn.prepare((1, 1), "inference")
        with torch.no_grad():
            layer(x)
        flat = layer._rnnjit_weights()[0].detach()
        packed = torch.empty(ex.packed_weights_size(), dtype=torch.uint8)
        ex.pack_weights(flat, packed)
        y, hy, cy = torch.empty(1, 1, h), torch.empty(1, 1, h), torch.empty(1, 1, h)
        raw = [(t.data_ptr(), t.numel()) for t in (flat, x, y, hy, cy, packed)]
        runners = {"rnnjit.torch": lambda: layer(x),
                   "Execution, packed weights": lambda: ex._forward_raw(raw[0], raw[1], raw[2], None, None, raw[3],
                                                                        raw[4], None, 0, raw[5])}
        with torch.no_grad():
            samples = interleave(runners, args.rounds, args.calls, args.warmup)
        row = {"case": f"overhead I={i} H={h}", "shape": f"LSTM I={i} H={h} T=1 N=1", "row": "per-call overhead",
               **{k: summary(v) for k, v in samples.items()}}
        if args.cli:
            out = subprocess.run([args.cli, "bench", "--input-size", str(i), "--hidden-size", str(h), "--seq", "1",
                                  "--batch", "1", "--reps", str(args.calls), "--json"],
                                 capture_output=True, text=True, check=True).stdout
            j = json.loads(out)
            row["rnn-jit bench (C++)"] = {"min_ms": j["min_ms"], "median_ms": j["median_ms"]}
        rows.append(row)
    return rows


def print_rows(rows):
    for r in rows:
        names = [k for k in r if isinstance(r[k], dict)]
        base = r.get("rnnjit.torch") or r.get("rnnjit.torch alone")
        cells = "  ".join(f"{n} {r[n]['min_ms']:.4g}/{r[n]['median_ms']:.4g}" for n in names)
        ratios = ""
        if base and r["row"] in ("inference", "training"):
            ratios = "  " + "  ".join(f"{n}/rnnjit {r[n]['min_ms'] / base['min_ms']:.2f}x"
                                      for n in names if n != "rnnjit.torch")
        if r["row"] == "after a torch op":
            ratios = "  " + "  ".join(
                f"{who} after/alone (median) {r[who + ' after a torch op']['median_ms'] / r[who + ' alone']['median_ms']:.2f}"
                for who in ("rnnjit.torch", "torch.nn"))
        print(f"{r['shape']:42} {r['row']:17} (min/median ms) {cells}{ratios}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--rounds", type=int, default=3, help="rounds of interleaving")
    p.add_argument("--calls", type=int, default=400, help="calls per runner and round at T*N <= 32 (fewer above)")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--ort-threads", type=int, default=2, help="ONNX Runtime's intra_op_num_threads")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    p.add_argument("--rnnjit-threads", choices=["torch", "own"], default="torch",
                   help="rnnjit's threads as regions of torch's OpenMP pool (rnnjit.torch's default) or its own workers")
    p.add_argument("--no-ort", action="store_true")
    p.add_argument("--no-train", action="store_true")
    p.add_argument("--no-overhead", action="store_true")
    p.add_argument("--cli", help="the rnn-jit binary, to add the C++ API's own timing to the overhead rows")
    p.add_argument("--cpu-note", default="", help="added to the machine's name (e.g. the VM's host CPU)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rnnjit.torch.use_torch_threads(args.rnnjit_threads == "torch")
    report = {"cpu": cpu_name() + (f" ({args.cpu_note})" if args.cpu_note else ""), "cpus": os.cpu_count(),
              "torch": torch.__version__, "rnnjit": rnnjit.__version__, "torch_threads": torch.get_num_threads(),
              "isa": str(rnnjit.detect_isa()), "rnnjit_threads_on": rnnjit._rnnjit._openmp_library() or "own workers",
              "rows": []}
    try:
        import onnxruntime
        report["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        report["onnxruntime"] = None
    if not args.json:
        print(f"# {report['cpu']}, {report['cpus']} CPUs; torch {report['torch']} ({report['torch_threads']} threads); "
              f"onnxruntime {report['onnxruntime']} ({args.ort_threads} threads); rnnjit {report['rnnjit']} "
              f"{report['isa']}, threads on {report['rnnjit_threads_on']}", flush=True)
    for name in args.cases:
        rows = run_case(name, args)
        report["rows"] += rows
        if not args.json:
            print_rows(rows)
    if not args.no_overhead:
        rows = overhead(args)
        report["rows"] += rows
        if not args.json:
            print_rows(rows)
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
