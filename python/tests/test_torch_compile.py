"""rnnjit.torch under PyTorch 2.x's compilers and exporters: torch.compile(fullgraph=True)
forward and backward, torch.export round trips, the custom operators' own checks
(torch.library.opcheck), and torch.onnx.export by both exporters, run in ONNX Runtime."""

import io

import pytest

from conftest import torch_nn_call, torch_or_skip

torch = torch_or_skip()
import rnnjit.torch  # noqa: E402

if not (hasattr(torch.library, "custom_op") and hasattr(torch, "export")):
    pytest.skip(f"torch {torch.__version__}: torch.library.custom_op came with PyTorch 2.4",
                allow_module_level=True)

CELLS = [(rnnjit.torch.LSTM, torch.nn.LSTM, {"proj_size": 3}), (rnnjit.torch.LSTM, torch.nn.LSTM, {}),
         (rnnjit.torch.GRU, torch.nn.GRU, {}), (rnnjit.torch.RNN, torch.nn.RNN, {"nonlinearity": "relu"})]
IDS = ["lstm_proj", "lstm", "gru", "rnn_relu"]


def pair(ours_cls, theirs_cls, kwargs, **more):
    torch.manual_seed(0)
    ours = ours_cls(5, 7, num_layers=2, bidirectional=True, **kwargs, **more)
    theirs = theirs_cls(5, 7, num_layers=2, bidirectional=True, **kwargs, **more)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def outputs(result):
    y, h = result
    return [y, *(h if isinstance(h, tuple) else (h,))]


def assert_outputs_close(got, want, rtol=1e-5, atol=1e-5):
    for g, w in zip(outputs(got), outputs(want)):
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS, ids=IDS)
def test_compile_fullgraph_forward_and_backward(ours_cls, theirs_cls, kwargs):
    torch._dynamo.reset()
    ours, theirs = pair(ours_cls, theirs_cls, kwargs, batch_first=True)
    compiled = torch.compile(ours, fullgraph=True)  # a graph break raises
    x = torch.rand(3, 4, 5, requires_grad=True)
    state = torch.rand(4, 3, 3 if kwargs.get("proj_size") else 7)
    hx = (state, torch.rand(4, 3, 7)) if ours_cls is rnnjit.torch.LSTM else state
    got = compiled(x, hx)
    want = theirs(x, hx)
    assert_outputs_close(got, want)
    sum(o.sum() for o in outputs(got)).backward()
    grad_ours = x.grad.clone()
    x.grad = None
    sum(o.sum() for o in outputs(want)).backward()
    torch.testing.assert_close(grad_ours, x.grad, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    with torch.no_grad():  # inference: another graph, the inference plan
        assert_outputs_close(compiled(x), theirs(x))


def test_compiled_inference_sees_parameter_updates():
    torch._dynamo.reset()
    ours, theirs = pair(rnnjit.torch.GRU, torch.nn.GRU, {})
    ours.eval()
    compiled = torch.compile(ours, fullgraph=True)
    x = torch.rand(2, 3, 5)
    with torch.no_grad():
        compiled(x)
        ours.weight_hh_l1.mul_(-1)
        theirs.load_state_dict(ours.state_dict())
        assert_outputs_close(compiled(x), theirs(x))


@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS, ids=IDS)
def test_export_round_trip_runs(ours_cls, theirs_cls, kwargs):
    ours, theirs = pair(ours_cls, theirs_cls, kwargs)
    ours.eval()
    x = torch.rand(4, 2, 5)
    program = torch.export.export(ours, (x,))
    assert "rnnjit.rnn_forward" in str(program.graph), "one opaque operator, not rnnjit's internals"
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    x2 = torch.rand(4, 2, 5)
    assert_outputs_close(loaded.module()(x2), theirs(x2))
    assert_outputs_close(program.module()(x2), theirs(x2))


def test_operators_pass_opcheck():
    import rnnjit.torch._ops  # noqa: F401  (registers the operators; a traced layer imports it)
    ours, _ = pair(rnnjit.torch.LSTM, torch.nn.LSTM, {})
    params = ours._rnnjit_params()
    x = torch.rand(3, 2, 5, requires_grad=True)
    config = [5, 7, 2, 1, 0, 1, 0]
    args = (x, None, None, params, None, torch.zeros(1, dtype=torch.int64), config, "lstm", 0.0, True)
    # Training: not test_aot_dispatch_dynamic, which compares every output bytewise between two
    # calls, the reserve too: its scratch bytes (not what backward reads) differ from call to call.
    torch.library.opcheck(torch.ops.rnnjit.rnn_forward.default, args,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    with torch.no_grad():
        args = (x.detach(), None, None, [p.detach() for p in params], None, torch.zeros(1, dtype=torch.int64),
                config, "lstm", 0.0, False)
        torch.library.opcheck(torch.ops.rnnjit.rnn_forward.default, args)


onnx_ops = {"LSTM", "GRU", "RNN"}


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS[1:], ids=IDS[1:])
def test_onnx_export_writes_onnx_rnn_operators(ours_cls, theirs_cls, kwargs, dynamo, tmp_path):
    onnx = pytest.importorskip("onnx", reason="onnx is not installed here")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed here")
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    ours, theirs = pair(ours_cls, theirs_cls, kwargs)
    ours.eval()
    theirs.eval()
    x = torch.rand(4, 2, 5)
    path = str(tmp_path / "model.onnx")
    torch.onnx.export(ours, (x,), path, dynamo=dynamo)
    model = onnx.load(path)
    types = {node.op_type for node in model.graph.node}
    torch.onnx.export(theirs, (x,), str(tmp_path / "theirs.onnx"), dynamo=dynamo)
    assert types == {node.op_type for node in onnx.load(str(tmp_path / "theirs.onnx")).graph.node}, \
        "the operators torch.nn's layer exports as"
    if ours_cls is not rnnjit.torch.RNN:  # the dynamo exporter writes a ReLU RNN as MatMuls
        assert types & onnx_ops, f"standard ONNX RNN operators, got {sorted(types)}"
    assert all(node.domain in ("", "ai.onnx") for node in model.graph.node), "no custom domain"
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    got = session.run(None, {name: x.numpy()})
    with torch.no_grad():
        want = outputs(theirs(x))
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.from_numpy(g), w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS, ids=IDS)
def test_compile_under_cpu_autocast_and_bf16_modules(ours_cls, theirs_cls, kwargs):
    torch._dynamo.reset()
    from rnnjit.torch import modules
    modules._AUTOCAST_RESULTS.clear()  # the probe runs while Dynamo traces
    ours, theirs = pair(ours_cls, theirs_cls, kwargs)
    x = torch.rand(4, 2, 5)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = torch.compile(ours, fullgraph=True)(x)
        want = torch_nn_call(theirs, x)
    for g, w in zip(outputs(got), outputs(want)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g.float(), w.float(), rtol=3e-2, atol=3e-2)
    ours.to(torch.bfloat16)
    with torch.no_grad():
        y = torch.compile(ours, fullgraph=True)(x.to(torch.bfloat16))[0]
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), theirs(x)[0], rtol=3e-2, atol=3e-2)
