"""rnnjit's threads inside a PyTorch process: parallel regions of torch's own OpenMP pool.

torch runs its intra-op work on an OpenMP pool of torch.get_num_threads() threads, whose
workers spin for a while after each parallel region (libgomp's default wait policy) before
they sleep. rnnjit's own workers, started beside them, found those cores busy: right after a
torch op (a Linear before the LSTM) a 2-layer LSTM-640 decoder step took several times its
time alone, the two pools taking turns on the same cores. So in a torch process rnnjit runs
each parallel stage as a region of torch's pool (GOMP_parallel in the OpenMP runtime torch
loaded, libgomp or libiomp5: no build against libtorch, any torch version), with
torch.get_num_threads() threads: whichever ran last, the same threads run next, and the ones
still spinning pick the work up at once. docs/python.md has the measurements.
"""

import os

import torch

from rnnjit import _rnnjit


def torch_openmp_library():
    """The path of the OpenMP runtime torch's intra-op pool runs on, or None (another backend,
    or none found)."""
    try:
        info = torch.__config__.parallel_info()
    except Exception:  # pragma: no cover - very old torch
        return None
    if "parallel backend: OpenMP" not in info:
        return None
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libgomp" in line or "/libiomp5" in line}
    except OSError:
        return None
    torch_dir = os.path.dirname(os.path.realpath(torch.__file__))
    own = sorted(p for p in paths if os.path.realpath(p).startswith(torch_dir))  # PyPI's wheels bundle theirs
    if own:
        return own[0]
    return paths.pop() if len(paths) == 1 else None


def use_torch_threads(enabled=True):
    """Runs rnnjit's threads as regions of torch's OpenMP pool (the default in rnnjit.torch,
    where torch's backend is OpenMP), or on rnnjit's own workers (enabled=False, or the
    environment's RNNJIT_TORCH_THREADS=rnnjit at import). Returns whether torch's pool is used."""
    library = torch_openmp_library() if enabled else None
    _rnnjit._use_openmp(library or "")
    return library is not None


use_torch_threads(os.environ.get("RNNJIT_TORCH_THREADS", "torch") != "rnnjit")
