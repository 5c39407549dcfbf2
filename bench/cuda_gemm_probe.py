# The per-step cost of a recurrent GEMM alone on a GPU: cuBLAS (through PyTorch, FP32 without
# TF32) in a CUDA graph of 300 steps, as rnnjit replays a sequence, with and without an
# elementwise kernel after each, and in TF32 for reference. Needs PyTorch with CUDA:
#   python3 bench/cuda_gemm_probe.py
import torch
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
def per_step(rows, cols, k, tf32=False, steps=300, gate=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    w = torch.randn(cols, k, device=dev); h = torch.randn(rows, k, device=dev) * 0.1
    outs = [torch.empty(rows, cols, device=dev) for _ in range(2)]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3): torch.mm(h, w.t(), out=outs[0])
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for t in range(steps):
            torch.mm(h, w.t(), out=outs[t % 2])
            if gate: torch.tanh(outs[t % 2], out=outs[(t + 1) % 2])
    for _ in range(3): g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = 1e9
    for _ in range(10):
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1))
    return best / steps * 1000
print(torch.cuda.get_device_name(), torch.__version__)
for rows, cols, k in [(20, 3200, 800), (20, 2400, 800), (20, 800, 800), (1, 3200, 800), (40, 3200, 800), (20, 1600, 800)]:
    print(f"M={rows} N={cols} K={k}: {per_step(rows, cols, k):6.2f} us/step fp32, "
          f"{per_step(rows, cols, k, gate=True):6.2f} with an elementwise kernel, {per_step(rows, cols, k, tf32=True):6.2f} tf32")
