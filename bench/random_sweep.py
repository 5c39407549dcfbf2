#!/usr/bin/env python3
"""Random configurations timed against a peer: where bench/ds2_suite.sh and shape_sweep.sh time
chosen shapes, this draws cells, sizes (odd ones included), batches, layers, directions and
features from a seed and times each drawn configuration with `rnn-jit bench --compare`, rnnjit
and the peer interleaved in one process. It looks for the shapes where rnnjit falls behind: the
table ends with the cases under 1.0 and the range of the ratios. A seed always draws the same
configurations, so a sweep is rerun with its seed.

  bench/random_sweep.py [--build DIR] [--peer onednn] [--seed S] [--count N] [--reps R]

Run on an otherwise idle machine; a case the peer refuses (a feature it lacks) is skipped.
"""
import argparse
import json
import random
import subprocess
import sys

CELLS = ["lstm", "gru", "rnn_tanh", "rnn_relu", "gru_reset_before"]
SIZES = [1, 7, 16, 33, 40, 64, 100, 128, 129, 200, 256, 257, 300, 384, 500, 512, 640, 800,
         1000, 1024]
BATCHES = [1, 2, 3, 4, 6, 8, 16, 20, 32, 50, 64, 128, 256]


def draw(rng):
    """One configuration's flags and its forward GFLOP, sized so that a call takes up to about a
    second."""
    cell = rng.choice(CELLS)
    hidden = rng.choice([s for s in SIZES if s >= 16])
    inp = rng.choice(SIZES)
    batch = rng.choice(BATCHES)
    layers = rng.choice([1, 1, 1, 2, 3])
    seq = rng.choice([1, 3, 10, 23, 50, 100, 300])
    # Keep a direction's forward pass under about 20 GFLOP (training about triples it; every
    # layer counted as if its input were I wide): shrink T first, then N.
    gates = {"lstm": 4, "gru": 3, "gru_reset_before": 3}.get(cell, 1)
    def flops():
        return 2.0 * seq * batch * gates * hidden * (inp + hidden) * layers
    while flops() > 2e10 and seq > 1:
        seq = max(1, seq // 3)
    while flops() > 2e10 and batch > 1:
        batch = max(1, batch // 2)
    flags = ["--cell", cell, "--input-size", str(inp), "--hidden-size", str(hidden),
             "--layers", str(layers), "--seq", str(seq), "--batch", str(batch)]
    direction = rng.choice(["forward", "forward", "bidirectional", "bidirectional", "reverse",
                            "bidirectional_sum"])
    flags += ["--direction", direction]
    if cell == "lstm" and rng.random() < 0.15 and hidden > 16:
        flags += ["--proj-size", str(rng.randint(8, hidden - 1))]
    elif cell == "lstm" and rng.random() < 0.15:
        flags += ["--peephole"]
    if rng.random() < 0.15:
        flags += ["--batch-first"]
    return flags, flops() * (2 if direction.startswith("bidirectional") else 1) / 1e9


def run_case(args, flags, gflop, mode):
    # Short calls are noisy: more of them, for about 0.2 s a contender at 100 GFLOPS.
    seconds = gflop * (3 if mode == "train" else 1) / 100
    reps = max(args.reps, min(200, int(0.2 / max(seconds, 1e-6))))
    cmd = [f"{args.build}/bin/rnn-jit", "bench", *flags, "--mode", mode, "--reps", str(reps),
           "--warmup", "2", "--json", "--compare", args.peer]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
    return json.loads(done.stdout), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--peer", default="onednn")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=30, help="configurations drawn")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions of each (at least; short calls more)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    print(f"| # | configuration | mode | rnnjit ms | {args.peer} ms | ratio {args.peer}/rnnjit |")
    print("|---|---|---|---|---|---|")
    ratios, behind = [], []
    for index in range(args.count):
        flags, gflop = draw(rng)
        mode = rng.choice(["infer", "train"])
        result, error = run_case(args, flags, gflop, mode)
        shown = " ".join(flags).replace("--", "")
        if result is None or args.peer not in result.get("peers", {}):
            print(f"| {index} | `{shown}` | {mode} | - | - | skipped: {error or 'peer refused'} |")
            continue
        peer = result["peers"][args.peer]
        ratios.append(peer["ratio"])
        if peer["ratio"] < 1.0:
            behind.append(f"{index}: {shown} {mode} ({peer['ratio']:.2f})")
        print(f"| {index} | `{shown}` | {mode} | {result['median_ms']:.2f} | "
              f"{peer['median_ms']:.2f} | {peer['ratio']:.2f} |", flush=True)
    if ratios:
        print(f"\nseed {args.seed}: {len(ratios)} timed, ratios {min(ratios):.2f}-{max(ratios):.2f}, "
              f"{len(behind)} under 1.0")
        for line in behind:
            print(f"  behind: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
