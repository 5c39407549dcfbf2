"""com.microsoft:DynamicQuantizeLSTM on rnnjit (librnnjit_onnxruntime.so, docs/onnxruntime.md): models
made by onnxruntime.quantization.quantize_dynamic (a scale per direction and per channel) run on
rnnjit's int8 plan (the library's counters say so), with an error against the FP32 model no larger
than ONNX Runtime's own DynamicQuantizeLSTM kernel gives on the same model (on the avx2 unit, whose
activations have 7 bits, that bound grows by the ratio of its product quantization step to 8-bit
activations', as tests/test_int8_ort.cpp derives it); malformed DynamicQuantizeLSTM nodes are ONNX
Runtime errors."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed here (tools/test.sh installs it from PyPI)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed here (tools/test.sh installs it)")
quantization = pytest.importorskip("onnxruntime.quantization", reason="this onnxruntime has no quantization tools")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rnnjit  # noqa: E402
import rnnjit.onnxruntime  # noqa: E402

try:
    LIBRARY = rnnjit.onnxruntime.library_path()
except FileNotFoundError as e:
    pytest.skip(str(e), allow_module_level=True)

def why_plans_are_not_int8():
    """None where rnnjit's plans here are int8, else the plan's note (no int8 unit, or RNNJIT_ISA=avx2)."""
    config = rnnjit.RnnConfig(cell="lstm", input_size=8, hidden_size=16)
    rnn = rnnjit.Rnn(config, rnnjit.Options(quantize="int8_dynamic"))
    plan = rnn.prepare((2, 1), "inference").plan_text()
    if "quantize=int8_dynamic" in plan.splitlines()[0]:
        return None
    notes = [line for line in plan.splitlines() if "quantize" in line]
    return notes[0] if notes else plan.splitlines()[0]


NOT_INT8 = why_plans_are_not_int8()


def without_int8_plans(test):
    """Marks a test that does not need rnnjit's plans to be int8 (the fallback to ONNX Runtime's kernel)."""
    test.without_int8_plans = True
    return test


@pytest.fixture(autouse=True)
def int8_plans(request):
    """Skips every other test where rnnjit's plans here are not int8."""
    if NOT_INT8 and not getattr(request.function, "without_int8_plans", False):
        pytest.skip(f"rnnjit's plans here are not int8: {NOT_INT8}")


def step_ratio():
    """How much larger a product's quantization error is on this CPU's int8 unit than with 8-bit
    activations (ONNX Runtime's): sqrt(1/L_a^2 + 1/127^2) / sqrt(2/127^2); 1 but on avx2."""
    levels = rnnjit.int8_activation_quantization(rnnjit.int8_unit())[0]
    return float(np.sqrt(1 / levels**2 + 1 / 127**2) / np.sqrt(2 / 127**2))


def lstm_model(I, H, direction, seed, peepholes=False, seq_lens=False):
    """A one-node FP32 LSTM with random weights as initializers (those quantize_dynamic quantizes)."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    s = 1 / np.sqrt(H)
    inits = {"W": rng.uniform(-s, s, (D, 4 * H, I)), "R": rng.uniform(-s, s, (D, 4 * H, H)),
             "B": rng.uniform(-s, s, (D, 8 * H))}
    if peepholes:
        inits["P"] = rng.uniform(-s, s, (D, 3 * H))
    inputs = ["X", "W", "R", "B", "sequence_lens" if seq_lens else "", "", "", "P" if peepholes else ""]
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("LSTM", inputs, ["Y", "Y_h", "Y_c"], hidden_size=H, direction=direction, name="lstm")
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])]
    if seq_lens:
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, ["N"]))
    graph = helper.make_graph(
        [node], "lstm", graph_inputs,
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def quantized(model, per_channel, tmp_path):
    src, dst = tmp_path / "fp32.onnx", tmp_path / f"int8_{per_channel}.onnx"
    onnx.save(model, src)
    quantization.quantize_dynamic(str(src), str(dst), per_channel=per_channel, weight_type=quantization.QuantType.QInt8)
    q = onnx.load(dst)
    ops = [n.op_type for n in q.graph.node]
    assert "DynamicQuantizeLSTM" in ops, f"quantize_dynamic made {ops}"
    return q


def session(model, with_library):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    if with_library:
        options.register_custom_ops_library(LIBRARY)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def worst(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("I,H,direction,T,N", [(40, 64, "forward", 7, 3), (33, 96, "bidirectional", 5, 2),
                                               (128, 256, "forward", 4, 1)])
def test_quantize_dynamic_models_run_on_rnnjit_int8(per_channel, I, H, direction, T, N, tmp_path):
    fp32 = lstm_model(I, H, direction, seed=H + I)
    int8 = quantized(fp32, per_channel, tmp_path)
    x = np.random.default_rng(7).uniform(-1, 1, (T, N, I)).astype(np.float32)
    want = session(fp32, False).run(None, {"X": x})
    theirs = session(int8, False).run(None, {"X": x})
    before = rnnjit.onnxruntime.stats()
    ours = session(int8, True).run(None, {"X": x})
    after = rnnjit.onnxruntime.stats()
    assert after["rnnjit_kernels"] - before["rnnjit_kernels"] == 1
    assert after["rnnjit_runs"] - before["rnnjit_runs"] == 1
    for name, o, t, w in zip(("Y", "Y_h", "Y_c"), ours, theirs, want):
        assert o.shape == w.shape, name
        err_ours, err_theirs = worst(o, w), worst(t, w)
        # rnnjit's grid is never coarser than ONNX Runtime's (weights per row, activations per
        # row rather than per tensor): its error stays within ONNX Runtime's, with a margin for
        # the different rounding points.
        assert err_ours <= 1.25 * step_ratio() * err_theirs + 1e-3, \
            f"{name}: rnnjit {err_ours:.3g}, ONNX Runtime {err_theirs:.3g}"
        assert err_ours > 0, f"{name}: equal to FP32 to the bit: the int8 plan did not run"


def test_sequence_lengths_and_peepholes(tmp_path):
    fp32 = lstm_model(24, 48, "bidirectional", seed=3, peepholes=True, seq_lens=True)
    int8 = quantized(fp32, True, tmp_path)
    rng = np.random.default_rng(1)
    feeds = {"X": rng.uniform(-1, 1, (6, 3, 24)).astype(np.float32),
             "sequence_lens": np.array([6, 2, 4], np.int32)}
    want = session(fp32, False).run(None, feeds)
    theirs = session(int8, False).run(None, feeds)
    ours = session(int8, True).run(None, feeds)
    for o, t, w in zip(ours, theirs, want):
        assert worst(o, w) <= 1.25 * step_ratio() * worst(t, w) + 1e-3
    assert np.all(ours[0][2:, :, 1] == 0), "Y past a sequence's length must be zero"


def test_packed_once_for_many_runs(tmp_path):
    int8 = quantized(lstm_model(16, 32, "forward", seed=5), False, tmp_path)
    s = session(int8, True)
    before = rnnjit.onnxruntime.stats()
    x = np.random.default_rng(2).uniform(-1, 1, (3, 2, 16)).astype(np.float32)
    first = s.run(None, {"X": x})
    for _ in range(3):
        again = s.run(None, {"X": x})
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)
    after = rnnjit.onnxruntime.stats()
    assert after["weight_packs"] - before["weight_packs"] == 1
    assert after["rnnjit_runs"] - before["rnnjit_runs"] == 4


def with_initializer(model, name, value):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i, init in enumerate(m.graph.initializer):
        if init.name == name:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(value, name))
            return m
    raise KeyError(name)


def initializer(model, name):
    return next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == name)


def node_input(model, index):
    return next(n for n in model.graph.node if n.op_type == "DynamicQuantizeLSTM").input[index]


# (description, input index of DynamicQuantizeLSTM, how to change that initializer's value)
BAD = [
    ("W_scale of 3 values", 8, lambda v: np.ones(3, np.float32)),
    ("W_scale rank 3", 8, lambda v: np.ones((1,) + v.shape + (1,), np.float32)),
    ("W_scale zero", 8, lambda v: np.zeros_like(v)),
    ("W_scale NaN", 8, lambda v: np.full_like(v, np.nan)),
    ("W_zero_point uint8 beside int8 W", 9, lambda v: v.astype(np.uint8)),
    ("W_zero_point of another shape", 9, lambda v: np.zeros(5, v.dtype)),
    ("R_scale int", 10, lambda v: v.astype(np.int32)),
    ("R_zero_point of another shape", 11, lambda v: np.zeros((1, 2, 3), v.dtype)),
    ("W transposed", 1, lambda v: np.ascontiguousarray(v.transpose(0, 2, 1))),
    ("R float", 2, lambda v: v.astype(np.float32)),
    ("R too short", 2, lambda v: v[:, :-1, :]),
]


@without_int8_plans
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("what,index,change", BAD, ids=[b[0] for b in BAD])
def test_malformed_nodes_are_errors(what, index, change, per_channel, tmp_path):
    int8 = quantized(lstm_model(8, 16, "forward", seed=11), per_channel, tmp_path)
    name = node_input(int8, index)
    bad = with_initializer(int8, name, change(initializer(int8, name)))
    x = np.zeros((2, 1, 8), np.float32)
    with pytest.raises(Exception) as e:  # at session creation (constant weights) or at the run
        session(bad, True).run(None, {"X": x})
    assert "rnnjit" in str(e.value) or "DynamicQuantizeLSTM" in str(e.value) or "type" in str(e.value).lower(), \
        str(e.value)


def as_uint8(model):
    """The model with DynamicQuantizeLSTM's int8 W, R and zero points as uint8 shifted by 128: the
    same dequantized weights (quantize_dynamic writes int8 for LSTMs whatever weight_type says)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    names = [node_input(model, i) for i in (1, 2, 9, 11)]
    for i, init in enumerate(m.graph.initializer):
        if init.name in names:
            v = numpy_helper.to_array(init)
            assert v.dtype == np.int8
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array((v.astype(np.int16) + 128).astype(np.uint8),
                                                                    init.name))
    return m


def as_graph_inputs(model):
    """The model with DynamicQuantizeLSTM's initializers fed as graph inputs instead, and the feeds."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    feeds = {}
    for init in m.graph.initializer:
        v = numpy_helper.to_array(init)
        feeds[init.name] = v
        m.graph.input.append(helper.make_tensor_value_info(init.name, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                           list(v.shape)))
    del m.graph.initializer[:]
    return m, feeds


@pytest.mark.parametrize("per_channel", [False, True])
def test_uint8_weights_with_zero_points_dequantize_alike(per_channel, tmp_path):
    int8 = quantized(lstm_model(20, 32, "bidirectional", seed=9), per_channel, tmp_path)
    x = np.random.default_rng(3).uniform(-1, 1, (4, 2, 20)).astype(np.float32)
    want = session(int8, True).run(None, {"X": x})
    got = session(as_uint8(int8), True).run(None, {"X": x})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_weights_fed_as_inputs_are_dequantized_each_run(tmp_path):
    int8 = quantized(lstm_model(20, 32, "forward", seed=10), True, tmp_path)
    x = np.random.default_rng(4).uniform(-1, 1, (4, 2, 20)).astype(np.float32)
    want = session(int8, True).run(None, {"X": x})
    fed, feeds = as_graph_inputs(int8)
    s = session(fed, True)
    before = rnnjit.onnxruntime.stats()
    got = s.run(None, {"X": x, **feeds})
    after = rnnjit.onnxruntime.stats()
    assert after["rnnjit_runs"] - before["rnnjit_runs"] == 1 and after["weight_packs"] == before["weight_packs"]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    scale = node_input(fed, 8)
    with pytest.raises(Exception, match="W_scale"):
        s.run(None, {"X": x, **feeds, scale: -feeds[scale]})
    again = s.run(None, {"X": x, **feeds})  # the kernel runs on after a failed run
    np.testing.assert_array_equal(again[0], want[0])


def test_torch_exported_two_layer_lstm(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    import inspect
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(48, 64, num_layers=2).eval()
    x = torch.rand(6, 3, 48) * 2 - 1
    path = tmp_path / "exported.onnx"
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(lstm, (x,), str(path), input_names=["X"], output_names=["y", "h", "c"], opset_version=14,
                      dynamic_axes={"X": {0: "T", 1: "N"}}, **legacy)
    fp32 = onnx.load(path)
    int8 = quantized(fp32, True, tmp_path)
    assert sum(n.op_type == "DynamicQuantizeLSTM" for n in int8.graph.node) == 2
    feeds = {"X": x.numpy()}
    want = session(fp32, False).run(None, feeds)
    theirs = session(int8, False).run(None, feeds)
    before = rnnjit.onnxruntime.stats()
    ours = session(int8, True).run(None, feeds)
    after = rnnjit.onnxruntime.stats()
    assert after["rnnjit_kernels"] - before["rnnjit_kernels"] == 2 and after["rnnjit_runs"] - before["rnnjit_runs"] == 2
    with torch.no_grad():
        y_torch = lstm(x)[0].numpy()
    np.testing.assert_allclose(want[0], y_torch, atol=1e-5)
    for o, t, w in zip(ours, theirs, want):
        assert worst(o, w) <= 1.25 * step_ratio() * worst(t, w) + 1e-3, (worst(o, w), worst(t, w))


def test_other_com_microsoft_ops_still_run(tmp_path):
    """The library registers a custom domain named com.microsoft: ONNX Runtime's own contrib ops of
    that domain (Gelu here) must still resolve to its kernels in sessions that load it."""
    import math
    fp32 = lstm_model(16, 32, "forward", seed=1)
    g = fp32.graph
    g.node.append(helper.make_node("Squeeze", ["Y", "axis1"], ["Ys"]))
    g.node.append(helper.make_node("MatMul", ["Ys", "Wout"], ["Z"]))
    g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    g.initializer.append(numpy_helper.from_array(np.random.default_rng(0).uniform(-1, 1, (32, 10)).astype(np.float32),
                                                 "Wout"))
    int8 = quantized(fp32, True, tmp_path)
    int8.graph.node.append(helper.make_node("Gelu", ["Z"], ["G"], domain="com.microsoft"))
    del int8.graph.output[:]
    int8.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Z", "G")])
    x = np.random.default_rng(2).uniform(-1, 1, (4, 2, 16)).astype(np.float32)
    before = rnnjit.onnxruntime.stats()
    y, z, gelu = session(int8, True).run(None, {"X": x})
    assert rnnjit.onnxruntime.stats()["rnnjit_runs"] - before["rnnjit_runs"] == 1
    want = z * 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    np.testing.assert_allclose(gelu, want, atol=1e-5)


@without_int8_plans
@pytest.mark.parametrize("index", [8, 9, 10, 11])
def test_absent_scales_and_zero_points_are_errors_at_session_creation(index, tmp_path):
    int8 = quantized(lstm_model(8, 16, "forward", seed=12), True, tmp_path)
    name = node_input(int8, index)
    next(n for n in int8.graph.node if n.op_type == "DynamicQuantizeLSTM").input[index] = ""
    with pytest.raises(Exception, match=f"{name.split('_quantized')[0]} is a required input"):
        session(int8, True)


def with_node_attributes(model, **attributes):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = next(n for n in m.graph.node if n.op_type == "DynamicQuantizeLSTM")
    node.attribute.extend([helper.make_attribute(k, v) for k, v in attributes.items()])
    return m


# Valid DynamicQuantizeLSTM nodes that rnnjit does not run (activation_alpha or activation_beta
# entries that none of the activations reads: ONNX Runtime's kernel ignores them, rnnjit refuses
# them as it does for LSTM): ONNX Runtime's own contrib kernel runs them inside the library's
# sessions (the library's counters say so), with its results.
UNSUPPORTED = [("alpha no activation reads", "forward", {"activation_alpha": [0.5]}),
               ("betas no activation reads", "bidirectional", {"activation_beta": [1.0, 2.0]})]


@without_int8_plans
@pytest.mark.parametrize("uint8", [False, True], ids=["int8", "uint8"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("what,direction,attributes", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_nodes_run_on_onnxruntime_kernel(what, direction, attributes, per_channel, uint8, tmp_path):
    int8 = quantized(lstm_model(12, 24, direction, seed=13), per_channel, tmp_path)
    int8 = with_node_attributes(as_uint8(int8) if uint8 else int8, **attributes)  # uint8: the contrib kernel's T2
    feeds = {"X": np.random.default_rng(5).uniform(-1, 1, (5, 3, 12)).astype(np.float32)}
    want = session(int8, False).run(None, feeds)
    before = rnnjit.onnxruntime.stats()
    s = session(int8, True)
    got = s.run(None, feeds)
    again = s.run(None, feeds)
    after = rnnjit.onnxruntime.stats()
    delta = {k: after[k] - before[k] for k in after}
    assert delta["builtin_kernels"] == 1 and delta["builtin_runs"] == 2, delta
    assert delta["rnnjit_kernels"] == 0 and delta["rnnjit_runs"] == 0, delta
    for name, g, a, w in zip(("Y", "Y_h", "Y_c"), got, again, want):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6, err_msg=name)
        np.testing.assert_array_equal(a, g, err_msg=name)
