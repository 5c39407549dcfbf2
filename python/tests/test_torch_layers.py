"""rnnjit.torch.LSTM/GRU/RNN against torch.nn on random configurations: outputs, final states and
the gradients of the input, the initial states and every parameter, against torch.nn run in
float64 on the same parameters."""

import random

import numpy as np
import pytest

from conftest import assert_close, tolerance, torch_or_skip

torch = torch_or_skip()
import rnnjit  # noqa: E402
import rnnjit.torch  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402


def random_case(seed):
    rng = random.Random(seed)
    cell = ["lstm", "gru", "rnn_tanh", "rnn_relu"][seed % 4]  # every cell, in turn
    case = dict(cell=cell, input_size=rng.choice([1, 3, 16, 17]), hidden_size=rng.choice([1, 5, 16, 33]),
                num_layers=rng.randint(1, 3), bidirectional=rng.random() < 0.5, batch_first=rng.random() < 0.5,
                bias=rng.random() < 0.8, seq_len=rng.randint(1, 7), batch=rng.choice([1, 2, 5, 16]),
                packed=rng.random() < 0.3, given_state=rng.random() < 0.6, proj_size=0)
    if cell == "lstm" and case["hidden_size"] > 1 and rng.random() < 0.4:
        case["proj_size"] = rng.randint(1, case["hidden_size"] - 1)
    return case


def make_layers(case):
    kwargs = dict(input_size=case["input_size"], hidden_size=case["hidden_size"], num_layers=case["num_layers"],
                  bias=case["bias"], batch_first=case["batch_first"], bidirectional=case["bidirectional"])
    cell = case["cell"]
    if cell == "lstm":
        ours, theirs = rnnjit.torch.LSTM(**kwargs, proj_size=case["proj_size"]), torch.nn.LSTM
        kwargs["proj_size"] = case["proj_size"]
    elif cell == "gru":
        ours, theirs = rnnjit.torch.GRU(**kwargs), torch.nn.GRU
    else:
        kwargs["nonlinearity"] = cell[4:]
        ours, theirs = rnnjit.torch.RNN(**kwargs), torch.nn.RNN
    reference = theirs(**kwargs).double()
    reference.load_state_dict({k: v.double() for k, v in ours.state_dict().items()})
    return ours, reference


def run(layer, case, x, states, lengths, dtype):
    """Forward and backward of sum(r * outputs): the outputs and the gradients, as float64 numpy."""
    x = x.detach().to(dtype).requires_grad_()
    states = [s.detach().to(dtype).requires_grad_() for s in states]
    hx = None if not states else (tuple(states) if case["cell"] == "lstm" else states[0])
    inp = x
    if lengths is not None:
        inp = pack_padded_sequence(x, lengths, batch_first=case["batch_first"], enforce_sorted=False)
    y, h = layer(inp, hx)
    if lengths is not None:
        y, _ = pad_packed_sequence(y, batch_first=case["batch_first"], total_length=case["seq_len"])
    outs = [y] + (list(h) if case["cell"] == "lstm" else [h])
    gen = torch.Generator().manual_seed(99)
    loss = sum((torch.rand(o.shape, generator=gen, dtype=torch.float64) - 0.5).to(dtype).mul(o).sum() for o in outs)
    loss.backward()
    grads = [x.grad] + [s.grad for s in states] + [p.grad for p in layer.parameters()]
    as_np = lambda t: t.detach().double().numpy()  # noqa: E731
    return [as_np(o) for o in outs], [as_np(g) for g in grads]


@pytest.mark.parametrize("seed", range(40))
def test_matches_torch_nn(seed):
    case = random_case(seed)
    torch.manual_seed(seed)
    ours, reference = make_layers(case)
    T, N, I, H = case["seq_len"], case["batch"], case["input_size"], case["hidden_size"]
    D, L = 2 if case["bidirectional"] else 1, case["num_layers"]
    S = case["proj_size"] or H
    x = torch.rand((N, T, I) if case["batch_first"] else (T, N, I)) - 0.5
    states = []
    if case["given_state"]:
        states.append(torch.rand(L * D, N, S) - 0.5)
        if case["cell"] == "lstm":
            states.append(torch.rand(L * D, N, H) - 0.5)
    lengths = None
    if case["packed"]:
        rng = random.Random(seed)
        lengths = torch.tensor([rng.randint(1, T) for _ in range(N)])
    got_out, got_grads = run(ours, case, x, states, lengths, torch.float32)
    want_out, want_grads = run(reference, case, x, states, lengths, torch.float64)
    tol = tolerance(I, H, S, D, L, T, N, gradient=False)
    gtol = tolerance(I, H, S, D, L, T, N, gradient=True)
    names = ["dx"] + [f"d{n}" for n in ("h0", "c0")[:len(states)]] + [n for n, _ in ours.named_parameters()]
    for name, got, want in zip(["y", "h_n", "c_n"], got_out, want_out):
        assert_close(got, want, tol, f"{case} {name}")
    assert len(got_grads) == len(want_grads)
    for name, got, want in zip(names, got_grads, want_grads):
        assert_close(got, want, gtol, f"{case} {name}")


def test_unbatched_input_and_states():
    torch.manual_seed(1)
    ours = rnnjit.torch.LSTM(4, 6, num_layers=2)
    reference = torch.nn.LSTM(4, 6, num_layers=2)
    reference.load_state_dict(ours.state_dict())
    x, h0, c0 = torch.rand(5, 4), torch.rand(2, 6), torch.rand(2, 6)
    y, (h, c) = ours(x, (h0, c0))
    ry, (rh, rc) = reference(x, (h0, c0))
    assert y.shape == ry.shape == (5, 6) and h.shape == rh.shape == (2, 6)
    for got, want in ((y, ry), (h, rh), (c, rc)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_packed_output_keeps_the_input_order_and_indices():
    torch.manual_seed(2)
    ours = rnnjit.torch.GRU(3, 4, bidirectional=True)
    reference = torch.nn.GRU(3, 4, bidirectional=True)
    reference.load_state_dict(ours.state_dict())
    x = torch.rand(6, 5, 3)
    packed = pack_padded_sequence(x, torch.tensor([2, 6, 3, 3, 1]), enforce_sorted=False)
    y, h = ours(packed)
    ry, rh = reference(packed)
    assert torch.equal(y.batch_sizes, ry.batch_sizes)
    assert torch.equal(y.sorted_indices, ry.sorted_indices)
    assert torch.equal(y.unsorted_indices, ry.unsorted_indices)
    torch.testing.assert_close(y.data, ry.data, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h, rh, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh"])
def test_medium_matmul_precision_trains_on_bf16(cell):
    """torch.set_float32_matmul_precision('medium') lets rnnjit's GEMMs round their inputs to bf16,
    as it lets torch's matmuls: outputs and gradients then match float64 to bf16's precision and
    differ from the FP32 ('highest') run."""
    if rnnjit.bf16_unit() is None:
        pytest.skip("this CPU (or OS) runs neither AMX-BF16 nor AVX512_BF16")
    case = dict(cell=cell, input_size=24, hidden_size=40, num_layers=2, bidirectional=True, batch_first=False,
                bias=True, seq_len=6, batch=5, packed=False, given_state=True, proj_size=0)
    torch.manual_seed(7)
    ours, reference = make_layers(case)
    x = torch.rand(6, 5, 24) - 0.5
    states = [torch.rand(4, 5, 40) - 0.5] + ([torch.rand(4, 5, 40) - 0.5] if cell == "lstm" else [])
    want_out, want_grads = run(reference, case, x, states, None, torch.float64)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        got_out, got_grads = run(ours, case, x, states, None, torch.float32)
    finally:
        torch.set_float32_matmul_precision(before)
    for p in ours.parameters():
        p.grad = None
    strict_out, _ = run(ours, case, x, states, None, torch.float32)
    # bf16 keeps 8 significant bits of each GEMM input: 2^-9 relative, summed over the GEMM's
    # width and carried through T steps and L layers (and, for gradients, over the batch).
    depth = (2 * 40 + 40) * 6 * 2  # width (2 directions of input + H) x T x L
    tol, gtol = 2**-9 * depth**0.5, 2**-9 * (depth * (2 + 5))**0.5
    for got, want in zip(got_out, want_out):
        assert_close(got, want, tol, f"{cell} bf16 output")
    for got, want in zip(got_grads, want_grads):
        assert_close(got, want, gtol, f"{cell} bf16 gradient")
    assert np.abs(got_out[0] - strict_out[0]).max() > 1e-5, "bf16 output equals FP32's: was bf16 used?"
