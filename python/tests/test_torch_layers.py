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
