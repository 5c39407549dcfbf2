"""Shared helpers of the Python tests: tolerances from the accumulation depth, as the C++ tests'
(tests/rnn_case.hpp), and the comparison they are used with."""

import math

import numpy as np
import pytest

EPS32 = float(np.finfo(np.float32).eps)


def tolerance(input_size, hidden_size, state_size, directions, num_layers, seq_len, batch, gradient):
    """Bound on |got - want| / (1 + |want|) for float32 results of an RNN against a float64 one."""
    width = max(input_size, directions * state_size) + hidden_size
    depth = width * seq_len * num_layers
    if gradient:
        depth *= 2 + batch
    return 4 * EPS32 * math.sqrt(depth) * math.sqrt(width) + 8 * EPS32


def assert_close(got, want, tol, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if got.size == 0:
        return
    err = np.abs(got - want) / (1 + np.abs(want))
    worst = int(np.nanargmax(err)) if not np.isnan(err).any() else int(np.argmax(np.isnan(err)))
    assert err.flat[worst] <= tol, (f"{what}: worst error {err.flat[worst]:.3g} > {tol:.3g} at {worst}: "
                                    f"{got.flat[worst]} vs {want.flat[worst]}")


def torch_or_skip():
    return pytest.importorskip("torch", reason="PyTorch is not installed here: the rnnjit.torch tests need it")


def torch_nn_call(module, *args):
    """torch.nn's `module` called on `args`, through torch's own CPU kernel where oneDNN refuses
    the call (oneDNN's bf16 LSTM, torch.nn's path under CPU autocast, needs AVX-512)."""
    import torch
    try:
        return module(*args)
    except RuntimeError:
        with torch.backends.mkldnn.flags(enabled=False):
            return module(*args)
