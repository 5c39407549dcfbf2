"""The low-level API (rnnjit.Rnn, Execution) on numpy arrays: against a float64 numpy LSTM/GRU/RNN
written from the equations, the reference backend, finite differences, and the cache."""

import numpy as np
import pytest

import rnnjit
from conftest import assert_close, tolerance


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def numpy_forward(cell, w, blocks, x, hidden):
    """One layer, one direction, seq-major, in float64, from PyTorch's equations."""
    p = {b.name: w[b.offset:b.offset + b.size].reshape(b.shape).astype(np.float64) for b in blocks}
    w_ih, w_hh, b_ih, b_hh = p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"]
    h = np.zeros((x.shape[1], hidden))
    c = np.zeros_like(h)
    ys = []
    for t in range(x.shape[0]):
        gi, gh = x[t] @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        if cell == "lstm":
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
        elif cell == "gru":
            r = sigmoid(gi[:, :hidden] + gh[:, :hidden])
            z = sigmoid(gi[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden])
            n = np.tanh(gi[:, 2 * hidden:] + r * gh[:, 2 * hidden:])
            h = (1 - z) * n + z * h
        elif cell == "rnn_tanh":
            h = np.tanh(gi + gh)
        else:
            h = np.maximum(gi + gh, 0)
        ys.append(h)
    return np.stack(ys), h, c


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("seq_len,batch,input_size,hidden", [(1, 1, 1, 1), (5, 3, 17, 15), (7, 17, 33, 31)])
def test_forward_matches_the_equations(cell, seq_len, batch, input_size, hidden):
    rng = np.random.default_rng(seq_len * 100 + hidden)
    config = rnnjit.RnnConfig(cell=cell, input_size=input_size, hidden_size=hidden)
    rnn = rnnjit.Rnn(config)
    w = rng.uniform(-0.5, 0.5, rnn.weights_size()).astype(np.float32)
    x = rng.uniform(-1, 1, (seq_len, batch, input_size)).astype(np.float32)
    y = np.empty((seq_len, batch, hidden), np.float32)
    hy = np.empty((1, batch, hidden), np.float32)
    cy = np.empty((1, batch, hidden), np.float32) if cell == "lstm" else None
    ex = rnn.prepare((seq_len, batch), "inference")
    ex.forward(w, x, y, hy=hy, cy=cy)
    want_y, want_h, want_c = numpy_forward(cell, w, rnn.weight_layout, x.astype(np.float64), hidden)
    tol = tolerance(input_size, hidden, hidden, 1, 1, seq_len, batch, gradient=False)
    assert_close(y, want_y, tol, "y")
    assert_close(hy[0], want_h, tol, "hy")
    if cy is not None:
        assert_close(cy[0], want_c, tol, "cy")


def loss_and_grads(ex, w, x, r):
    """sum(r * y) and its gradients (dx, dw) through forward training and both backward calls."""
    y = np.empty(r.shape, np.float32)
    ex.forward(w, x, y)
    dx, dw = np.empty_like(x), np.empty_like(w)
    ex.backward_data(w, r, dx)
    ex.backward_weights(x, dw)
    return float(np.sum(r.astype(np.float64) * y)), dx, dw


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh"])
def test_gradients_match_finite_differences(cell):
    rng = np.random.default_rng(7)
    config = rnnjit.RnnConfig(cell=cell, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    rnn = rnnjit.Rnn(config)
    shape = rnnjit.Shape(4, 2)
    ex = rnn.prepare(shape, rnnjit.Mode.training)
    w = rng.uniform(-0.5, 0.5, rnn.weights_size()).astype(np.float32)
    x = rng.uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    r = rng.uniform(-1, 1, (4, 2, 8)).astype(np.float32)
    _, dx, dw = loss_and_grads(ex, w, x, r)
    # Central differences in float32 with a step of 1e-2: truncation ~1e-4 times the third
    # derivative, rounding ~eps * |loss| / step; both well under 2e-3 for these sizes.
    step = 1e-2
    for array, grad, picks in ((x, dx, rng.choice(x.size, 6, replace=False)),
                               (w, dw, rng.choice(w.size, 12, replace=False))):
        for i in picks:
            saved = array.flat[i]
            array.flat[i] = saved + step
            up, _, _ = loss_and_grads(ex, w, x, r)
            array.flat[i] = saved - step
            down, _, _ = loss_and_grads(ex, w, x, r)
            array.flat[i] = saved
            numeric = (up - down) / (2 * step)
            assert abs(numeric - grad.flat[i]) <= 2e-3 * (1 + abs(numeric)), (i, numeric, grad.flat[i])


def test_jit_matches_the_reference_backend_with_every_feature():
    rng = np.random.default_rng(3)
    config = rnnjit.RnnConfig(cell="lstm", input_size=13, hidden_size=11, num_layers=2, bidirectional=True,
                              proj_size=5, batch_first=True)
    shape = (6, 5)
    results = []
    for backend in ("jit", "reference"):
        rnn = rnnjit.Rnn(config, rnnjit.Options(backend=backend))
        ex = rnn.prepare(shape, "training")
        w = np.random.default_rng(1).uniform(-0.4, 0.4, rnn.weights_size()).astype(np.float32)
        x = np.random.default_rng(2).uniform(-1, 1, (5, 6, 13)).astype(np.float32)
        lengths = np.array([6, 1, 4, 6, 3], np.int32)
        y = np.empty((5, 6, 10), np.float32)
        hy = np.empty((4, 5, 5), np.float32)
        cy = np.empty((4, 5, 11), np.float32)
        ex.forward(w, x, y, hy=hy, cy=cy, seq_lengths=lengths)
        dy = rng.uniform(-1, 1, y.shape).astype(np.float32) if not results else results[0][-1]
        dx, dw = np.empty_like(x), np.empty_like(w)
        ex.backward_data(w, dy, dx)
        ex.backward_weights(x, dw)
        results.append((y, hy, cy, dx, dw, dy))
    tol = tolerance(13, 11, 5, 2, 2, 6, 5, gradient=True)
    for name, got, want in zip(("y", "hy", "cy", "dx", "dw"), results[0], results[1]):
        assert_close(got, want, tol, name)
    assert np.all(results[0][0][1, 1:] == 0), "y past a sequence's length is zero"


def test_a_second_prepare_of_the_same_shape_compiles_nothing():
    config = rnnjit.RnnConfig(cell="gru", input_size=9, hidden_size=10)
    rnnjit.Rnn(config).prepare((3, 2), "training")
    before = rnnjit.cache_stats()
    ex = rnnjit.Rnn(config).prepare((3, 2), "training")
    after = rnnjit.cache_stats()
    assert after.kernel_misses == before.kernel_misses
    assert after.plan_misses == before.plan_misses
    assert after.plan_hits == before.plan_hits + 1
    assert ex.allocations() == 0


def test_sizes_plan_and_kernels_are_reported():
    config = rnnjit.RnnConfig(cell="lstm", input_size=8, hidden_size=16, num_layers=2)
    rnn = rnnjit.Rnn(config)
    ex = rnn.prepare(rnnjit.Shape(seq_len=4, batch=3), "training")
    assert ex.reserve_size() > 0 and ex.workspace_size() >= 0 and ex.packed_weights_size() >= 0
    assert rnnjit.x_elements(config, rnnjit.Shape(4, 3)) == 4 * 3 * 8
    assert rnnjit.y_elements(config, rnnjit.Shape(4, 3)) == 4 * 3 * 16
    assert "lstm" in ex.plan_text()
    assert '"forward"' in ex.plan_json()
    kernels = ex.kernels()
    assert kernels and all(k.name and k.disassembly.startswith(k.name) for k in kernels)
    names = [b.name for b in rnn.weight_layout]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert sum(b.size for b in rnn.weight_layout) == rnn.weights_size()


def test_packed_weights_give_the_same_outputs():
    config = rnnjit.RnnConfig(cell="lstm", input_size=12, hidden_size=20)
    rnn = rnnjit.Rnn(config)
    ex = rnn.prepare((5, 4), "inference")
    w = np.random.default_rng(5).uniform(-0.3, 0.3, rnn.weights_size()).astype(np.float32)
    x = np.random.default_rng(6).uniform(-1, 1, (5, 4, 12)).astype(np.float32)
    y1, y2 = np.empty((5, 4, 20), np.float32), np.empty((5, 4, 20), np.float32)
    ex.forward(w, x, y1)
    packed = np.empty(ex.packed_weights_size(), np.uint8)
    ex.pack_weights(w, packed)
    ex.forward(w, x, y2, packed_weights=packed if packed.size else None)
    np.testing.assert_array_equal(y1, y2)


def test_bf16_plans_name_the_unit_that_runs_them():
    unit = rnnjit.bf16_unit()
    assert unit in (None, "amx", "avx512_bf16")
    if rnnjit.amx_bf16_usable():
        assert unit == "amx"
    config = rnnjit.RnnConfig(cell="gru", input_size=24, hidden_size=40)
    ex = rnnjit.Rnn(config, rnnjit.Options(backend="jit", fpmath="bf16")).prepare((3, 5), "inference")
    if unit is None:
        assert "fpmath=bf16" not in ex.plan_text()
    else:
        assert f"fpmath=bf16 bf16_unit={unit}" in ex.plan_text()
