"""rnnjit.torch.quantize_dynamic (docs/quantization.md, docs/python.md): every LSTM, GRU and RNN in a
model becomes a QuantizedRNN whose outputs stay within the quantization bound of the FP32 layer's
(and, where torch.ao's dynamic quantization runs here, no further from them than torch's own int8
LSTM and GRU); state_dict saves and loads the int8 weights and scales; packed weights follow
loaded weights; trained models keep their accuracy; bad use (gradients, training dropout, wrong
inputs) raises."""

import io
import math

import numpy as np
import pytest

from conftest import assert_close, torch_or_skip

torch = torch_or_skip()
import rnnjit  # noqa: E402
import rnnjit.torch  # noqa: E402
from rnnjit.torch.quantized import QuantizedRNN, quantize_rows  # noqa: E402

def int8_plan_or_skip():
    """Skips the module where rnnjit's plans here are not int8 (no int8 unit, or RNNJIT_ISA=avx2)."""
    config = rnnjit.RnnConfig(cell="lstm", input_size=8, hidden_size=16)
    rnn = rnnjit.Rnn(config, rnnjit.Options(quantize="int8_dynamic"))
    plan = rnn.prepare((2, 1), "inference").plan_text()
    if "quantize=int8_dynamic" not in plan.splitlines()[0]:
        notes = [line for line in plan.splitlines() if "quantize" in line]
        pytest.skip(f"rnnjit's plans here are not int8: {notes[0] if notes else plan.splitlines()[0]}",
                    allow_module_level=True)


int8_plan_or_skip()


def quantization_bound(layer, x, outputs, seq_len):
    """tests/test_int8_rnn.cpp's bound against FP32: both operands of every product rounded to
    within half a step (max|w| / 127 and max|a| / L_a, L_a the unit's activation levels: 127, or
    63 on avx2) each side, independently, so a dot product of K terms errs with a standard
    deviation of sqrt(K / 12) * max|a| * max|w| * sqrt(1 / L_a^2 + 1 / 127^2); 6 of them, grown by
    sqrt(T * L) over the steps and layers."""
    w_max = max(float(p.detach().abs().max()) for n, p in layer.named_parameters() if n.startswith("weight"))
    a_max = max([1.0, float(x.abs().max())] + [float(o.abs().max()) for o in outputs])
    levels = rnnjit.int8_activation_quantization(rnnjit.int8_unit())[0]
    D = 2 if layer.bidirectional else 1
    S = getattr(layer, "proj_size", 0) or layer.hidden_size
    k = max(layer.input_size, D * S) + max(S, layer.hidden_size)
    return (6 * math.sqrt(k / 12) * w_max * a_max * math.sqrt(1 / levels**2 + 1 / 127**2) *
            math.sqrt(seq_len * layer.num_layers))


def flat_outputs(out):
    y, state = out
    return [y] + (list(state) if isinstance(state, tuple) else [state])


CASES = [
    ("LSTM", dict(input_size=24, hidden_size=64)),
    ("LSTM", dict(input_size=40, hidden_size=96, num_layers=2, bidirectional=True)),
    ("LSTM", dict(input_size=16, hidden_size=48, proj_size=20, batch_first=True)),
    ("GRU", dict(input_size=33, hidden_size=80, num_layers=2)),
    ("RNN", dict(input_size=17, hidden_size=64, nonlinearity="tanh", bidirectional=True)),
    ("RNN", dict(input_size=17, hidden_size=32, nonlinearity="relu")),
]


def case_id(c):
    return c[0] + "-" + "-".join(f"{k}{v}" for k, v in c[1].items())


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_outputs_within_the_quantization_bound(case):
    if case[1].get("proj_size") and not hasattr(torch.nn.LSTM(1, 2), "proj_size"):
        pytest.skip("this torch's LSTM has no proj_size")
    torch.manual_seed(0)
    layer = getattr(torch.nn, case[0])(**case[1]).eval()
    T, N = 9, 3
    shape = (N, T, layer.input_size) if layer.batch_first else (T, N, layer.input_size)
    x = torch.rand(shape) * 2 - 1
    with torch.no_grad():
        want = flat_outputs(layer(x))
        q = rnnjit.torch.quantize_dynamic(layer)
        assert isinstance(q, QuantizedRNN)
        got = flat_outputs(q(x))
    tol = quantization_bound(layer, x, want, T)
    for name, g, w in zip(("output", "h_n", "c_n"), got, want):
        assert_close(g.numpy(), w.numpy(), tol, name)
    assert any(float((g - w).abs().max()) > 0 for g, w in zip(got, want)), "equal to FP32: int8 did not run"
    assert "quantize=int8_dynamic" in q.plan_text(T, N).splitlines()[0]


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_no_further_from_fp32_than_torch_int8(cls):
    try:
        from torch.ao.quantization import quantize_dynamic as torch_quantize_dynamic
    except ImportError:
        pytest.skip("this torch has no torch.ao.quantization")
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        pytest.skip("this torch has no fbgemm engine")
    torch.manual_seed(1)
    fp32 = torch.nn.Sequential(getattr(torch.nn, cls)(64, 128, num_layers=2)).eval()
    x = torch.rand(20, 4, 64) * 2 - 1
    with torch.no_grad():
        want = flat_outputs(fp32[0](x))
        try:
            theirs = flat_outputs(torch_quantize_dynamic(fp32, {getattr(torch.nn, cls)}, dtype=torch.qint8)[0](x))
        except (RuntimeError, NotImplementedError) as e:
            pytest.skip(f"torch's dynamic quantization does not run here: {e}")
        ours = flat_outputs(rnnjit.torch.quantize_dynamic(fp32)[0](x))
    for g, t, w in zip(ours, theirs, want):
        err_ours, err_theirs = float((g - w).abs().max()), float((t - w).abs().max())
        assert err_ours <= 1.25 * err_theirs + 1e-3, f"rnnjit {err_ours:.3g}, torch {err_theirs:.3g}"


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(10, 12), torch.nn.LSTM(12, 32, batch_first=True))
        self.decoder = torch.nn.ModuleDict({"gru": rnnjit.torch.GRU(32, 16), "head": torch.nn.Linear(16, 5)})

    def forward(self, x):
        h, _ = self.encoder(x)
        y, _ = self.decoder["gru"](h.transpose(0, 1))
        return self.decoder["head"](y)


def test_nested_models_state_dict_round_trip():
    torch.manual_seed(2)
    model = Nested().eval()
    x = torch.rand(4, 7, 10)
    with torch.no_grad():
        want = model(x)
        q = rnnjit.torch.quantize_dynamic(model)
        assert q is model
        assert isinstance(q.encoder[1], QuantizedRNN) and isinstance(q.decoder["gru"], QuantizedRNN)
        assert isinstance(q.encoder[0], torch.nn.Linear)
        got = q(x)
    assert float((got - want).abs().max()) < 0.05
    state = q.state_dict()
    assert state["encoder.1.weight_ih_l0"].dtype == torch.int8
    assert state["encoder.1.weight_ih_l0_scale"].shape == (4 * 32,)
    assert state["decoder.gru.bias_hh_l0"].dtype == torch.float32
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    fresh = rnnjit.torch.quantize_dynamic(Nested().eval())  # other random weights
    with torch.no_grad():
        before = fresh(x)
        fresh.load_state_dict(torch.load(buffer))
        after = fresh(x)  # the packed weights of the old ones must not be served
    assert not torch.equal(before, after)
    assert torch.equal(after, got)


def test_weights_quantize_symmetric_per_row():
    w = torch.tensor([[0.6, -1.0, 0.25], [0.0, 0.0, 0.0], [3.0, 1.0, -2.0]])
    q, scale = quantize_rows(w)
    assert q.dtype == torch.int8
    np.testing.assert_allclose(scale.numpy(), [1 / 127, 1.0, 3 / 127], rtol=1e-6)
    np.testing.assert_array_equal(q.numpy(), [[76, -127, 32], [0, 0, 0], [127, 42, -85]])


def test_buffer_updated_in_place_repacks():
    torch.manual_seed(3)
    q = rnnjit.torch.quantize_dynamic(torch.nn.LSTM(8, 16).eval())
    x = torch.rand(3, 2, 8)
    with torch.no_grad():
        first = q(x)[0]
        q.weight_hh_l0_scale.mul_(2)
        second = q(x)[0]
        q.weight_hh_l0_scale.div_(2)
        third = q(x)[0]
    assert not torch.equal(first, second)
    assert torch.equal(first, third)


def test_packed_sequence_and_unbatched():
    torch.manual_seed(4)
    layer = torch.nn.GRU(6, 12, batch_first=True).eval()
    q = QuantizedRNN.from_float(layer)
    x = torch.rand(3, 5, 6)
    lengths = torch.tensor([5, 2, 4])
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    with torch.no_grad():
        y, h = q(packed)
        y_ref, h_ref = layer(packed)
        pad, _ = torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True)
        pad_ref, _ = torch.nn.utils.rnn.pad_packed_sequence(y_ref, batch_first=True)
        assert pad.shape == pad_ref.shape and h.shape == h_ref.shape
        assert float((pad - pad_ref).abs().max()) < 0.05 and float((h - h_ref).abs().max()) < 0.05
        y1, h1 = q(x[1, :2])  # unbatched: [T, I]
    assert y1.shape == (2, 12) and h1.shape == (1, 12)
    torch.testing.assert_close(y1, pad[1, :2], rtol=0, atol=1e-5)


def test_bad_use_raises():
    q = rnnjit.torch.quantize_dynamic(torch.nn.LSTM(4, 8, num_layers=2, dropout=0.5))
    x = torch.rand(3, 2, 4)
    with pytest.raises(RuntimeError, match="dropout between layers"):
        q(x)  # still in training mode
    q.eval()
    with pytest.raises(RuntimeError, match="inference only"):
        q(x.requires_grad_())
    with pytest.raises(RuntimeError, match="input.size"):
        q(torch.rand(3, 2, 5))
    with pytest.raises(TypeError, match="float32"):
        q(torch.rand(3, 2, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="h_0 has shape"):
        q(torch.rand(3, 2, 4), (torch.zeros(1, 2, 8), torch.zeros(2, 2, 8)))
    assert list(q.parameters()) == []  # nothing for an optimizer


def test_deepcopy_and_whole_module_save():
    import copy
    torch.manual_seed(5)
    q = rnnjit.torch.quantize_dynamic(torch.nn.Sequential(torch.nn.GRU(8, 16))).eval()
    x = torch.rand(4, 2, 8)
    with torch.no_grad():
        want = q(x)[0]
        twin = copy.deepcopy(q)
        buffer = io.BytesIO()
        torch.save(q, buffer)
        buffer.seek(0)
        kwargs = {"weights_only": False} if "weights_only" in torch.load.__code__.co_varnames else {}
        loaded = torch.load(buffer, **kwargs)
        assert torch.equal(twin(x)[0], want) and torch.equal(loaded(x)[0], want)
        twin[0].weight_hh_l0.zero_()  # the copy's buffers are its own
        assert not torch.equal(twin(x)[0], want) and torch.equal(q(x)[0], want)


class Classifier(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = getattr(torch.nn, cell)(3, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 2)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def sequence_task(n, generator):
    """Is the first channel's sum over the sequence larger than the second's? (12 steps, noise in
    the third channel): the answer needs the whole sequence, carried in the state."""
    x = torch.rand(n, 12, 3, generator=generator) * 2 - 1
    return x, (x[:, :, 0].sum(1) > x[:, :, 1].sum(1)).long()


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_trained_model_keeps_its_accuracy(cell):
    torch.manual_seed(6)
    g = torch.Generator().manual_seed(7)
    model = Classifier(cell)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(80):
        x, label = sequence_task(64, g)
        loss = torch.nn.functional.cross_entropy(model(x), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    x, label = sequence_task(4000, g)
    with torch.no_grad():
        fp32 = (model(x).argmax(1) == label).float().mean().item()
        int8_model = rnnjit.torch.quantize_dynamic(model)
        assert isinstance(int8_model.rnn, QuantizedRNN)
        int8 = (int8_model(x).argmax(1) == label).float().mean().item()
    assert fp32 > 0.9, f"the FP32 model did not learn the task ({fp32:.3f}): the test would prove nothing"
    print(f"{cell}: FP32 {fp32:.4f}, int8 {int8:.4f}")
    assert int8 >= fp32 - 0.01, f"int8 accuracy {int8:.4f} vs FP32 {fp32:.4f}"
