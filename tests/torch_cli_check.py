#!/usr/bin/env python3
"""`rnn-jit run --backend jit` against PyTorch on random configurations.

Usage: torch_cli_check.py RNN_JIT [--cases N] [--seed S] [--big]

Each case draws a cell (LSTM with or without projection, GRU, RNN tanh/relu), sizes with tails,
layers, direction, batch-first, bias or not, variable lengths (x NaN past them) and 1 or 2 threads; builds PyTorch's module with
random parameters, runs it in float64 on float32 data (forward, then backward of a random linear
loss of y, hy and cy), and runs the same float32 files through the CLI: forward, backward data
and every parameter's gradient must agree within 2e-4 of the largest magnitude, or within twice
PyTorch's own float32 error where float32 cannot do better (ReLU networks: a pre-activation
within rounding of 0 falls on the other side in float64). --big draws
I, H up to 1100 and N up to 70 (blocked GEMMs, split steps). Exits 1 when a case disagrees.
Needs torch and numpy; tests/test_reference_features.cpp runs it when both import.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("rnn_jit")
ap.add_argument("--cases", type=int, default=20)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--big", action="store_true")
args = ap.parse_args()
RNNJIT, n_cases, seed, big = args.rnn_jit, args.cases, args.seed, args.big
rng = random.Random(seed)
torch.manual_seed(seed)
root = tempfile.mkdtemp(prefix="rnnjit_torch_cli_")
worst = {}
fails = 0
for case in range(n_cases):
    cell = rng.choice(["lstm", "gru", "rnn_tanh", "rnn_relu"])
    if big:
        I = rng.randint(1, 1100); H = rng.randint(1, 1100); T = rng.randint(1, 30); N = rng.randint(1, 70)
        L = rng.randint(1, 2)
    else:
        I = rng.randint(1, 200); H = rng.randint(1, 200); T = rng.randint(1, 25); N = rng.randint(1, 70)
        L = rng.randint(1, 3)
    bidir = rng.random() < 0.5
    bf = rng.random() < 0.3
    proj = 0
    if cell == "lstm" and H > 1 and rng.random() < 0.3:
        proj = rng.randint(1, H - 1)
    varlen = rng.random() < 0.3
    threads = rng.choice([1, 2])
    bias = rng.random() >= 0.2
    D = 2 if bidir else 1
    S = proj or H
    kw = dict(input_size=I, hidden_size=H, num_layers=L, bidirectional=bidir, batch_first=bf, bias=bias)
    if cell == "lstm":
        m = torch.nn.LSTM(proj_size=proj, **kw)
    elif cell == "gru":
        m = torch.nn.GRU(**kw)
    else:
        m = torch.nn.RNN(nonlinearity="tanh" if cell == "rnn_tanh" else "relu", **kw)
    d = os.path.join(root, f"c{case}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d + "/params")
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.uniform_(-2.0 / H ** 0.5, 2.0 / H ** 0.5)  # twice PyTorch's default range
            np.save(f"{d}/params/{name}.npy", p.detach().float().numpy())
    xs = (N, T, I) if bf else (T, N, I)
    ys = (N, T, D * S) if bf else (T, N, D * S)
    data = {"x": torch.randn(*xs), "h0": torch.randn(L * D, N, S), "c0": torch.randn(L * D, N, H),
            "dy": torch.randn(*ys), "dhy": torch.randn(L * D, N, S), "dcy": torch.randn(L * D, N, H)}
    lengths = None
    if varlen:
        lengths = [rng.randint(1, T) for _ in range(N)]
        lengths[rng.randrange(N)] = T
        if rng.random() < 0.5:  # longest first, as pack_padded_sequence wants them by default
            lengths.sort(reverse=True)
        for n, length in enumerate(lengths):  # padding that neither side may read
            if bf: data["x"][n, length:] = float("nan")
            else: data["x"][length:, n] = float("nan")
    for name, t in data.items():
        np.save(f"{d}/{name}.npy", t.numpy())
    if lengths is not None:
        np.save(f"{d}/len.npy", np.array(lengths, dtype=np.int32))

    def torch_results(dtype):
        """PyTorch's outputs and gradients, in `dtype`, on the float32 data, as float64 arrays."""
        mt = m.to(dtype)
        t = {k: v.to(dtype) for k, v in data.items()}
        for k in ("x", "h0", "c0"):
            t[k].requires_grad_(True)
        inp = t["x"]
        if lengths is not None:
            inp = torch.nn.utils.rnn.pack_padded_sequence(inp, torch.tensor(lengths), batch_first=bf,
                                                          enforce_sorted=False)
        if cell == "lstm":
            out, (hy, cy) = mt(inp, (t["h0"], t["c0"]))
        else:
            out, hy = mt(inp, t["h0"]); cy = None
        if lengths is not None:
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=bf, total_length=T)
        mt.zero_grad()
        loss = (out * t["dy"]).sum() + (hy * t["dhy"]).sum() + ((cy * t["dcy"]).sum() if cy is not None else 0)
        loss.backward()
        res = {"y": out, "hy": hy, "dx": t["x"].grad, "dh0": t["h0"].grad}
        if cell == "lstm":
            res.update({"cy": cy, "dc0": t["c0"].grad})
        for name, p in mt.named_parameters():
            res["grad_" + name] = p.grad
        return {k: v.detach().double().numpy() for k, v in res.items()}

    want, want32 = torch_results(torch.float64), torch_results(torch.float32)
    cmd = [RNNJIT, "run", "--cell", cell, "--input-size", str(I), "--hidden-size", str(H), "--layers", str(L),
           "--params", d + "/params", "--x", d + "/x.npy", "--h0", d + "/h0.npy", "--out", d + "/out",
           "--dy", d + "/dy.npy", "--dhy", d + "/dhy.npy", "--backend", "jit", "--threads", str(threads)]
    if bidir: cmd.append("--bidirectional")
    if bf: cmd.append("--batch-first")
    if not bias: cmd.append("--no-bias")
    if proj: cmd += ["--proj-size", str(proj)]
    if cell == "lstm": cmd += ["--c0", d + "/c0.npy", "--dcy", d + "/dcy.npy"]
    if lengths is not None: cmd += ["--seq-lengths", d + "/len.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    desc = f"case {case}: {cell} I={I} H={H} L={L} D={D} P={proj} T={T} N={N} bf={bf} varlen={lengths is not None} bias={bias} thr={threads}"
    if r.returncode != 0:
        print("FAIL run", desc, r.stderr.strip()); fails += 1; continue
    o = d + "/out/"
    bad = []
    for name, ref in want.items():
        got = np.load(o + name + ".npy").astype(np.float64)
        if got.shape != ref.shape:
            bad.append(f"{name} shape {got.shape} vs {ref.shape}"); continue
        scale = max(1.0, np.abs(ref).max())
        err = np.abs(got - ref).max() / scale
        # Where float32 itself cannot do better (a ReLU pre-activation within rounding of 0 takes
        # the other side in float64 and its gradients differ), PyTorch's own float32 run shows it.
        err32 = np.abs(want32[name] - ref).max() / scale
        key = name if not name.startswith("grad_") else "grad"
        worst[key] = err if np.isnan(err) else max(worst.get(key, 0), err)
        if not err <= max(2e-4, 2 * err32):  # NaN fails too
            bad.append(f"{name} err {err:.2e} (PyTorch float32: {err32:.2e})")
    if bad:
        fails += 1
        print("FAIL", desc, "; ".join(bad))
    else:
        print("ok  ", desc, flush=True)
    shutil.rmtree(d, ignore_errors=True)
shutil.rmtree(root, ignore_errors=True)
print("worst relative errors:", {k: f"{v:.1e}" for k, v in worst.items()})
print(f"{fails} of {n_cases} failed")
sys.exit(1 if fails else 0)
