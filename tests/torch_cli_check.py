#!/usr/bin/env python3
"""`rnn-jit run --backend jit` against PyTorch on random configurations.

Usage: torch_cli_check.py RNN_JIT [--cases N] [--seed S] [--big]

Each case draws a cell (LSTM with or without projection, GRU, RNN tanh/relu), sizes with tails,
layers, direction, batch-first, bias or not, variable lengths (x NaN past them) and 1 or 2 threads; builds PyTorch's module with
random parameters (for the bidirectional topologies PyTorch has not, --direction bidirectional_sum
and --independent-stacks, the same network of one-layer unidirectional modules: reverse directions
read each sequence backwards within its length, and the layers' outputs are summed or each
direction stacked on its own), runs it in float64 on float32 data (forward, then backward of a random linear
loss of y, hy and cy), and runs the same float32 files through the CLI: forward, backward data
and every parameter's gradient must agree within 2e-4 of the largest magnitude, or within twice
PyTorch's own float32 error where float32 cannot do better (ReLU networks: a pre-activation
within rounding of 0 falls on the other side in float64; ReLU cases with a pre-activation within
1e-6 of 0 compare y and hy only). --big draws
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



def relu_margin(named, x, h0, lengths, bf, L, D, indep, summed):
    """The smallest |pre-activation| of a ReLU network (parameters by rnnjit's names), in float64."""
    p = {name: t.detach().double() for name, t in named}
    below = (x.transpose(0, 1) if bf else x).double()
    T, N = below.shape[0], below.shape[1]
    lens = lengths if lengths is not None else [T] * N
    margin = float("inf")
    for l in range(L):
        outs = []
        for dd in range(D):
            suffix = f"_l{l}" + ("_reverse" if dd else "")
            w, u = p["weight_ih" + suffix], p["weight_hh" + suffix]
            b = p.get("bias_ih" + suffix, 0) + p.get("bias_hh" + suffix, 0)
            inp = below[dd] if indep and l > 0 else below
            h = h0[l * D + dd].double().clone()
            out = torch.zeros(T, N, w.shape[0], dtype=torch.float64)
            for s in range(T):
                live = [n for n in range(N) if s < lens[n]]
                times = [lens[n] - 1 - s if dd else s for n in live]
                a = inp[times, live] @ w.T + b + h[live] @ u.T
                margin = min(margin, a.abs().min().item())
                h[live] = a.clamp(min=0)
                out[times, live] = h[live]
            outs.append(out)
        below = outs if indep and l < L - 1 else (outs[0] + outs[1] if summed else torch.cat(outs, 2))
    return margin


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
    # Bidirectional topologies beyond PyTorch's: summed directions, independent stacks, or both.
    summed = indep = False
    if bidir and rng.random() < 0.35:
        summed, indep = rng.choice([(True, False), (False, True), (True, True)])
    D = 2 if bidir else 1
    S = proj or H
    Y = S if summed else D * S

    def module(**kw):
        if cell == "lstm":
            return torch.nn.LSTM(proj_size=proj, bias=bias, **kw)
        if cell == "gru":
            return torch.nn.GRU(bias=bias, **kw)
        return torch.nn.RNN(nonlinearity="tanh" if cell == "rnn_tanh" else "relu", bias=bias, **kw)

    # m: PyTorch's own network; or, for the other topologies, parts[(l, d)]: one-layer modules whose
    # parameters carry rnnjit's names (weight_ih_l{l}[_reverse], ...).
    emulated = summed or indep
    if not emulated:
        m = module(input_size=I, hidden_size=H, num_layers=L, bidirectional=bidir, batch_first=bf)
        named = list(m.named_parameters())
    else:
        parts = {}
        for l in range(L):
            for dd in range(D):
                width = I if l == 0 else S if indep else Y
                parts[(l, dd)] = module(input_size=width, hidden_size=H)
        m = torch.nn.ModuleList(parts.values())
        named = [(name.replace("_l0", f"_l{l}{'_reverse' if dd else ''}"), p)
                 for (l, dd), part in parts.items() for name, p in part.named_parameters()]
    d = os.path.join(root, f"c{case}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d + "/params")
    with torch.no_grad():
        for name, p in named:
            p.uniform_(-2.0 / H ** 0.5, 2.0 / H ** 0.5)  # twice PyTorch's default range
            np.save(f"{d}/params/{name}.npy", p.detach().float().numpy())
    xs = (N, T, I) if bf else (T, N, I)
    ys = (N, T, Y) if bf else (T, N, Y)
    data = {"x": torch.randn(*xs), "h0": torch.randn(L * D, N, S), "c0": torch.randn(L * D, N, H),
            "dy": torch.randn(*ys), "dhy": torch.randn(L * D, N, S), "dcy": torch.randn(L * D, N, H)}
    lengths = None
    if varlen:
        lengths = [rng.randint(1, T) for _ in range(N)]
        lengths[rng.randrange(N)] = T
        if rng.random() < 0.5:  # longest first, as pack_padded_sequence wants them by default
            lengths.sort(reverse=True)
    # ReLU: a pre-activation within float32's rounding of 0 may take either side in float32, and
    # the gradients then differ by O(1) from float64's where it does; PyTorch's own float32 run
    # need not take the side rnnjit's takes (seed 1202, case 1 of --big: |a| = 4e-7, that unit's
    # bias gradient off by 0.37). Large cases have millions of pre-activations, so such a
    # near-tie is common there: those cases compare the forward results only (continuous at 0).
    kink = cell == "rnn_relu" and relu_margin(named, data["x"], data["h0"], lengths, bf, L, D, indep, summed) < 1e-6
    if lengths is not None:
        for n, length in enumerate(lengths):  # padding that neither side may read
            if bf: data["x"][n, length:] = float("nan")
            else: data["x"][length:, n] = float("nan")
    for name, t in data.items():
        np.save(f"{d}/{name}.npy", t.numpy())
    if lengths is not None:
        np.save(f"{d}/len.npy", np.array(lengths, dtype=np.int32))

    def within_lengths_reversed(seq):
        """seq [T, N, *] with each element's first length[n] steps in reverse order (the rest kept)."""
        lens = lengths if lengths is not None else [T] * N
        idx = torch.tensor([[lens[n] - 1 - s if s < lens[n] else s for n in range(N)] for s in range(T)])
        return torch.gather(seq, 0, idx[:, :, None].expand(-1, -1, seq.shape[2]))

    def run_direction(part, inp, h0, c0, reverse):
        """One direction of one layer on sequence-major inp: its output [T, N, S] and final states."""
        if reverse:
            inp = within_lengths_reversed(inp)
        if lengths is not None:
            inp = torch.nn.utils.rnn.pack_padded_sequence(inp, torch.tensor(lengths), enforce_sorted=False)
        out, state = part(inp, (h0, c0) if cell == "lstm" else h0)
        if lengths is not None:
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
        return (within_lengths_reversed(out) if reverse else out), state

    def emulate(t):
        """The summed / independent-stack network from its one-layer parts: y, hy, cy."""
        below = t["x"].transpose(0, 1) if bf else t["x"]
        hys, cys = [], []
        for l in range(L):
            outs = []
            for dd in range(D):
                k = l * D + dd
                inp = below[dd] if indep and l > 0 else below
                out, state = run_direction(parts[(l, dd)], inp, t["h0"][k:k + 1], t["c0"][k:k + 1], dd == 1)
                outs.append(out)
                hys.append(state[0] if cell == "lstm" else state)
                if cell == "lstm":
                    cys.append(state[1])
            top = l == L - 1
            if indep and not top:
                below = outs
            else:
                below = outs[0] + outs[1] if summed else torch.cat(outs, 2)
        y = below.transpose(0, 1) if bf else below
        return y, torch.cat(hys), (torch.cat(cys) if cell == "lstm" else None)

    def torch_results(dtype):
        """PyTorch's outputs and gradients, in `dtype`, on the float32 data, as float64 arrays."""
        mt = m.to(dtype)
        t = {k: v.to(dtype) for k, v in data.items()}
        for k in ("x", "h0", "c0"):
            t[k].requires_grad_(True)
        if emulated:
            out, hy, cy = emulate(t)
        else:
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
        for name, p in named:
            res["grad_" + name] = p.grad
        return {k: v.detach().double().numpy() for k, v in res.items()}

    want, want32 = torch_results(torch.float64), torch_results(torch.float32)
    cmd = [RNNJIT, "run", "--cell", cell, "--input-size", str(I), "--hidden-size", str(H), "--layers", str(L),
           "--params", d + "/params", "--x", d + "/x.npy", "--h0", d + "/h0.npy", "--out", d + "/out",
           "--dy", d + "/dy.npy", "--dhy", d + "/dhy.npy", "--backend", "jit", "--threads", str(threads)]
    if bidir: cmd += ["--direction", "bidirectional_sum" if summed else "bidirectional"]
    if indep: cmd.append("--independent-stacks")
    if bf: cmd.append("--batch-first")
    if not bias: cmd.append("--no-bias")
    if proj: cmd += ["--proj-size", str(proj)]
    if cell == "lstm": cmd += ["--c0", d + "/c0.npy", "--dcy", d + "/dcy.npy"]
    if lengths is not None: cmd += ["--seq-lengths", d + "/len.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    desc = (f"case {case}: {cell} I={I} H={H} L={L} D={D} P={proj} T={T} N={N} bf={bf} "
            f"varlen={lengths is not None} bias={bias} thr={threads} sum={summed} indep={indep}")
    if r.returncode != 0:
        print("FAIL run", desc, r.stderr.strip()); fails += 1; continue
    o = d + "/out/"
    bad = []
    for name, ref in want.items():
        if kink and name not in ("y", "hy"):
            continue
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
        print("ok  ", desc + (" (forward only: a ReLU pre-activation within 1e-6 of 0)" if kink else ""), flush=True)
    shutil.rmtree(d, ignore_errors=True)
shutil.rmtree(root, ignore_errors=True)
print("worst relative errors:", {k: f"{v:.1e}" for k, v in worst.items()})
print(f"{fails} of {n_cases} failed")
sys.exit(1 if fails else 0)
