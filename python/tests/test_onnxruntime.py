"""rnnjit inside ONNX Runtime (librnnjit_onnxruntime.so, docs/onnxruntime.md): sessions with the
library give the outputs of sessions without it, node by node, for every attribute, optional input
and output of LSTM, GRU and RNN, in ONNX's domain and in com.rnnjit; the library's counters prove
that rnnjit (not ONNX Runtime's kernel) ran; bad models and runs are ONNX Runtime errors; sessions
made, run and released from several threads neither crash nor leak threads."""

import os
import threading
import zlib

import numpy as np
import pytest

from conftest import EPS32, tolerance

onnx = pytest.importorskip("onnx", reason="onnx is not installed here (tools/test.sh installs it from PyPI)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed here (tools/test.sh installs it)")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rnnjit.onnx  # noqa: E402
import rnnjit.onnxruntime  # noqa: E402

try:
    LIBRARY = rnnjit.onnxruntime.library_path()
except FileNotFoundError as e:
    pytest.skip(str(e), allow_module_level=True)

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


class Node:
    """An LSTM/GRU/RNN node as a one-node model: its attributes, which optional inputs it has (and
    whether its weights are initializers or graph inputs), which outputs, and random data."""

    def __init__(self, op, hidden, input_size, seed, direction="forward", layout=0, constant=True, bias=True,
                 seq_lens=False, initial_h=False, initial_c=False, peepholes=False, outputs=("Y", "Y_h", "Y_c"),
                 opset=14, domain="", **attrs):
        self.op, self.H, self.I, self.layout, self.opset, self.domain = op, hidden, input_size, layout, opset, domain
        self.D = 2 if direction == "bidirectional" else 1
        self.rng = np.random.default_rng(seed)
        G, H, D = GATES[op], hidden, self.D
        scale = float(1 / np.sqrt(H))
        self.weights = {"W": self.rand(D, G * H, input_size) * scale, "R": self.rand(D, G * H, H) * scale}
        if bias:
            self.weights["B"] = self.rand(D, 2 * G * H) * scale
        if peepholes:
            self.weights["P"] = self.rand(D, 3 * H) * scale
        names = ["X", "W", "R", "B" if bias else "", "sequence_lens" if seq_lens else "",
                 "initial_h" if initial_h else ""]
        if op == "LSTM":
            names += ["initial_c" if initial_c else "", "P" if peepholes else ""]
        while names and names[-1] == "":
            names.pop()
        self.inputs = names
        outs = [o if o in outputs else "" for o in (["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"])]
        while outs and outs[-1] == "":
            outs.pop()
        self.outputs = outs
        self.constant = constant
        self.attrs = dict(attrs, hidden_size=hidden)
        if direction != "forward":
            self.attrs["direction"] = direction
        if layout:
            self.attrs["layout"] = layout

    def rand(self, *shape):
        return self.rng.uniform(-1, 1, shape).astype(np.float32)

    def model(self, domain=None):
        domain = self.domain if domain is None else domain
        node = helper.make_node(self.op, self.inputs, self.outputs, domain=domain, name=f"{self.op.lower()}_node",
                                **self.attrs)
        fdims = lambda *d: [x if isinstance(x, int) else x for x in d]  # noqa: E731
        T, N = "T", "N"
        x_dims = [N, T, self.I] if self.layout else [T, N, self.I]
        inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_dims)]
        inits = []
        for name, value in self.weights.items():
            if self.constant:
                inits.append(numpy_helper.from_array(value, name))
            else:
                inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
        if "sequence_lens" in self.inputs:
            inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [N]))
        state = [N, self.D, self.H] if self.layout else [self.D, N, self.H]
        for name in ("initial_h", "initial_c"):
            if name in self.inputs:
                inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, fdims(*state)))
        outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in self.outputs if o]
        graph = helper.make_graph([node], "g", inputs, outputs, inits)
        imports = [helper.make_opsetid("", self.opset)]
        if domain:
            imports.append(helper.make_opsetid(domain, 1))
        return helper.make_model(graph, opset_imports=imports, ir_version=8)

    def feeds(self, T, N, lengths=None):
        x = self.rand(N, T, self.I) if self.layout else self.rand(T, N, self.I)
        f = {"X": x}
        if not self.constant:
            f.update(self.weights)
        if "sequence_lens" in self.inputs:
            f["sequence_lens"] = (np.asarray(lengths, np.int32) if lengths is not None
                                  else self.rng.integers(1, T + 1, N).astype(np.int32))
        state = (N, self.D, self.H) if self.layout else (self.D, N, self.H)
        for name in ("initial_h", "initial_c"):
            if name in self.inputs:
                f[name] = self.rand(*state)
        return f

    def tol(self, T, N):
        # Both sides round in float32: twice the bound of one against exact arithmetic.
        return 2 * tolerance(self.I, self.H, self.H, self.D, 1, T, N, False) + 16 * EPS32


def session(model, with_library, threads=2):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if with_library:
        options.register_custom_ops_library(LIBRARY)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def stats_delta(before):
    now = rnnjit.onnxruntime.stats()
    return {k: now[k] - before[k] for k in now}


def to_layout0(node, feeds):
    """The feeds of a layout-1 node for the same node in layout 0 (ONNX Runtime's kernel has no layout 1)."""
    f = dict(feeds)
    f["X"] = np.ascontiguousarray(feeds["X"].transpose(1, 0, 2))
    for name in ("initial_h", "initial_c"):
        if name in f:
            f[name] = np.ascontiguousarray(f[name].transpose(1, 0, 2))
    return f


def from_layout0(name, value):
    if name == "Y":  # [T, D, N, H] -> [N, T, D, H]
        return value.transpose(2, 0, 1, 3)
    return value.transpose(1, 0, 2)  # [D, N, H] -> [N, D, H]


def check_node(node, shapes=((None, None),), expect_rnnjit=True, seed_lengths=None):
    """Runs the node with and without the library at the shapes (T, N; None: random) on one
    session each, compares every output, and checks which kernel ran."""
    with_lib = session(node.model(), True)
    ref_node_model = node.model(domain="")
    if node.layout:
        node0 = Node.__new__(Node)
        node0.__dict__.update(node.__dict__)
        node0.layout = 0
        node0.attrs = {k: v for k, v in node.attrs.items() if k != "layout"}
        ref_node_model = node0.model(domain="")
    without = session(ref_node_model, False)
    for T, N in shapes:
        T = T or int(node.rng.integers(1, 10))
        N = N or int(node.rng.integers(1, 6))
        feeds = node.feeds(T, N, seed_lengths)
        before = rnnjit.onnxruntime.stats()
        got = with_lib.run(None, feeds)
        delta = stats_delta(before)
        want = without.run(None, to_layout0(node, feeds) if node.layout else feeds)
        names = [o for o in node.outputs if o]
        for name, g, w in zip(names, got, want):
            w = from_layout0(name, w) if node.layout else w
            assert g.shape == w.shape, f"{name}: shape {g.shape}, ONNX Runtime's {w.shape}"
            err = np.max(np.abs(g.astype(np.float64) - w) / (1 + np.abs(w))) if g.size else 0.0
            assert err <= node.tol(T, N), f"{name} T={T} N={N}: error {err:.3g} > {node.tol(T, N):.3g}"
        if expect_rnnjit:
            assert delta["rnnjit_runs"] == 1 and delta["builtin_runs"] == 0, delta
        else:
            assert delta["rnnjit_runs"] == 0 and delta["builtin_runs"] == 1, delta


# ---- every attribute, optional input and output ----

CASES = []
for op in ("LSTM", "GRU", "RNN"):
    for direction in ("forward", "reverse", "bidirectional"):
        CASES.append(dict(op=op, direction=direction, seq_lens=True, initial_h=True, initial_c=op == "LSTM"))
    CASES.append(dict(op=op, direction="bidirectional", bias=False, outputs=("Y_h",)))
    CASES.append(dict(op=op, direction="forward", outputs=("Y",), constant=False))
    CASES.append(dict(op=op, direction="bidirectional", constant=False, seq_lens=True, initial_h=True))
    CASES.append(dict(op=op, direction="forward", clip=0.7, initial_h=True))
    for layout in (1,):
        CASES.append(dict(op=op, direction="bidirectional", layout=layout, seq_lens=True, initial_h=True,
                          initial_c=op == "LSTM"))
        CASES.append(dict(op=op, direction="forward", layout=layout, outputs=("Y_h", "Y_c")))
    for opset in (7, 22):
        CASES.append(dict(op=op, direction="forward", opset=opset, initial_h=True))
CASES += [
    dict(op="LSTM", direction="bidirectional", peepholes=True, initial_c=True, seq_lens=True),
    dict(op="LSTM", direction="forward", peepholes=True, constant=False),
    dict(op="LSTM", direction="forward", input_forget=1, initial_c=True),
    dict(op="LSTM", direction="reverse", input_forget=1, peepholes=True, clip=1.5),
    dict(op="LSTM", direction="forward", outputs=("Y_c",)),
    dict(op="GRU", direction="forward", linear_before_reset=1, seq_lens=True),
    dict(op="GRU", direction="bidirectional", linear_before_reset=1, initial_h=True, clip=0.9),
    dict(op="RNN", direction="bidirectional", activations=["Relu", "Relu"], seq_lens=True),
    dict(op="RNN", direction="forward", activations=["Sigmoid"], initial_h=True),
    dict(op="RNN", direction="forward", activations=["LeakyRelu"], activation_alpha=[0.2]),
    dict(op="LSTM", direction="forward", activations=["Sigmoid", "Tanh", "Tanh"]),
]


# ---- every activation function ONNX names, in every role (rnnjit runs them: the counters say so) ----

# (name, alpha, beta): parameters where the function reads them, [] for ONNX Runtime's defaults.
FUNCTIONS = [("Relu", [], []), ("Tanh", [], []), ("Sigmoid", [], []), ("Affine", [0.7], [-0.2]),
             ("LeakyRelu", [0.15], []), ("LeakyRelu", [], []), ("ThresholdedRelu", [0.3], []),
             ("ThresholdedRelu", [], []), ("ScaledTanh", [1.3], [0.6]), ("HardSigmoid", [0.3], [0.45]),
             ("HardSigmoid", [], []), ("Elu", [0.8], []), ("Elu", [], []), ("Softsign", [], []),
             ("Softplus", [], [])]
STANDARD = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}

ACTIVATION_CASES = []
for name, alpha, beta in FUNCTIONS:
    for op, roles in STANDARD.items():
        for role in range(len(roles)):
            acts = list(roles)
            acts[role] = name
            direction = ("forward", "reverse", "bidirectional")[role]
            if direction == "bidirectional":  # a list per direction; the alphas and betas given are
                acts = acts * 2               # the forward one's, the reverse one's take the defaults
            case = dict(op=op, direction=direction, activations=acts,
                        initial_h=True, initial_c=op == "LSTM", seq_lens=role == 1)
            if alpha:
                case["activation_alpha"] = alpha
            if beta:
                case["activation_beta"] = beta
            ACTIVATION_CASES.append(case)
ACTIVATION_CASES += [  # a list per direction, with different functions and parameters
    dict(op="RNN", direction="bidirectional", activations=["Tanh", "Relu"]),
    dict(op="RNN", direction="bidirectional", activations=["LeakyRelu", "LeakyRelu"], activation_alpha=[0.3]),
    dict(op="LSTM", direction="bidirectional", activations=["HardSigmoid", "Elu", "Softsign", "Sigmoid", "Tanh",
                                                            "ScaledTanh"],
         activation_alpha=[0.25, 0.9, 1.1], activation_beta=[0.55, 0.7], peepholes=True, clip=2.0),
    dict(op="GRU", direction="bidirectional", activations=["Sigmoid", "Softplus", "Affine", "Tanh"],
         activation_alpha=[0.5], activation_beta=[0.1], linear_before_reset=1),
]


def case_id(c):
    return "-".join(f"{k}={v}" if not isinstance(v, (list, tuple)) else f"{k}={'+'.join(map(str, v))}"
                    for k, v in c.items())


@pytest.mark.parametrize("domain", ["", "com.rnnjit"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_node_equals_onnxruntime(case, domain):
    seed = abs(hash((case_id(case), domain))) % (2**31)
    rng = np.random.default_rng(seed)
    node = Node(hidden=int(rng.integers(1, 33)), input_size=int(rng.integers(1, 20)), seed=seed, domain=domain,
                **case)
    check_node(node, shapes=((None, None), (None, None), (1, 1)))


def test_zero_lengths_are_zero_outputs():
    node = Node("LSTM", hidden=7, input_size=3, seed=5, direction="bidirectional", seq_lens=True, initial_h=True,
                initial_c=True)
    check_node(node, shapes=((6, 4),), seed_lengths=[6, 0, 3, 1])


def test_dynamic_shapes_reuse_packed_weights():
    node = Node("LSTM", hidden=40, input_size=24, seed=9)
    s = session(node.model(), True)
    before = rnnjit.onnxruntime.stats()
    for T, N in [(5, 2), (5, 2), (9, 3), (5, 2), (1, 1), (9, 3)]:
        s.run(None, node.feeds(T, N))
    delta = stats_delta(before)
    assert delta["rnnjit_runs"] == 6
    assert delta["weight_packs"] <= 3, f"constant weights packed {delta['weight_packs']} times for 3 shapes"


# ---- what rnnjit does not run ----

# activation_alpha or activation_beta with more entries than the activations read (ONNX Runtime
# ignores the rest; rnnjit refuses the node rather than guess).
FALLBACK = [
    dict(op="RNN", direction="forward", activations=["Tanh"], activation_alpha=[0.5]),
    dict(op="GRU", direction="forward", activations=["HardSigmoid", "Tanh"], activation_alpha=[0.3],
         activation_beta=[0.4, 0.1]),
    dict(op="LSTM", direction="forward", activations=["Sigmoid", "Elu", "Softplus"], activation_alpha=[1.0, 0.5],
         initial_c=True),
]


@pytest.mark.parametrize("domain", ["", "com.rnnjit"])
@pytest.mark.parametrize("case", ACTIVATION_CASES, ids=case_id)
def test_activation_equals_onnxruntime(case, domain):
    if rnnjit_cannot_read_activations():
        pytest.skip("this ONNX Runtime's C API cannot read string-list attributes (needs 1.25)")
    seed = zlib.crc32(f"{case_id(case)} {domain}".encode())  # the same data in every run
    node = Node(hidden=int(np.random.default_rng(seed).integers(3, 20)), input_size=5, seed=seed, domain=domain,
                **case)
    # Unbounded functions as gates (a GRU's z = Softplus(...) > 1) make h grow step after step:
    # weights of half the usual scale and up to 6 steps keep every output finite, where both
    # sides' rounding stays comparable.
    node.weights = {k: v * 0.5 for k, v in node.weights.items()}
    check_node(node, shapes=((6, 3), (2, 5)))


@pytest.mark.parametrize("case", FALLBACK, ids=case_id)
def test_unsupported_goes_to_onnxruntime_kernel_in_default_domain(case):
    if rnnjit_cannot_read_activations():
        pytest.skip("this ONNX Runtime's C API cannot read string-list attributes (needs 1.25)")
    node = Node(hidden=6, input_size=4, seed=3, **case)
    check_node(node, expect_rnnjit=False)


@pytest.mark.parametrize("case", FALLBACK[:2], ids=case_id)
def test_unsupported_is_an_error_in_rnnjit_domain(case):
    node = Node(hidden=6, input_size=4, seed=3, domain="com.rnnjit", **case)
    with pytest.raises(Exception, match="rnnjit.*(not supported|cannot be read)"):
        session(node.model(), True)


def rnnjit_cannot_read_activations():
    major, minor = (int(v) for v in ort.__version__.split(".")[:2])
    return (major, minor) < (1, 25)


# ---- bad models and runs: errors, never a crash ----

def bad_model(**change):
    node = Node("LSTM", hidden=5, input_size=3, seed=1, seq_lens=True, initial_h=True)
    for k, v in change.items():
        if k in node.weights:
            node.weights[k] = v
        else:
            node.attrs[k] = v
    return node


@pytest.mark.parametrize("domain", ["", "com.rnnjit"])
@pytest.mark.parametrize("change", [
    dict(hidden_size=6),                                   # W's rows say 5
    dict(W=np.zeros((1, 20, 3, 1), np.float32)),           # rank 4
    dict(R=np.zeros((1, 20, 4), np.float32)),
    dict(B=np.zeros((1, 30), np.float32)),
    dict(direction="sideways"),
    dict(layout=2),
    dict(clip=-1.0),
    dict(input_forget=3),
], ids=lambda c: next(iter(c)) + ("_" + str(c[next(iter(c))]) if np.isscalar(c[next(iter(c))]) else "_shape"))
def test_bad_models_are_errors(change, domain):
    node = bad_model(**change)
    with pytest.raises(Exception):
        s = session(node.model(domain=domain), True)
        s.run(None, node.feeds(3, 2))


@pytest.mark.parametrize("domain", ["", "com.rnnjit"])
def test_bad_runs_are_errors(domain):
    node = Node("LSTM", hidden=5, input_size=3, seed=1, seq_lens=True, initial_h=True, domain=domain)
    s = session(node.model(), True)
    good = node.feeds(4, 2)
    s.run(None, good)
    for name, value in [("sequence_lens", np.array([5, 1], np.int32)),  # > T
                        ("sequence_lens", np.array([-1, 1], np.int32)),
                        ("sequence_lens", np.array([1, 1, 1], np.int32)),
                        ("initial_h", np.zeros((1, 3, 5), np.float32)),
                        ("X", np.zeros((4, 2, 7), np.float32))]:
        feeds = dict(good, **{name: value})
        with pytest.raises(Exception, match="rnnjit|sequence_lens|Got invalid dimensions|shape"):
            s.run(None, feeds)
    s.run(None, good)  # the kernel still runs after the errors


# ---- sessions and threads ----

def thread_count():
    return len(os.listdir("/proc/self/task"))


def test_sessions_created_and_released_100_times():
    node = Node("GRU", hidden=16, input_size=8, seed=2, direction="bidirectional")
    model = node.model().SerializeToString()
    feeds = node.feeds(4, 3)
    want = None
    counts = []
    for i in range(100):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.register_custom_ops_library(LIBRARY)
        s = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        got = s.run(None, feeds)
        want = want or got
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        del s, options
        counts.append(thread_count())
    assert counts[-1] <= counts[9] + 2, f"threads grew from {counts[9]} to {counts[-1]} over 90 sessions"


def test_two_sessions_four_threads():
    a = Node("LSTM", hidden=24, input_size=10, seed=4, direction="bidirectional", seq_lens=True)
    b = Node("GRU", hidden=20, input_size=6, seed=6, initial_h=True)
    runs = []
    for node in (a, b):
        s = session(node.model(), True)
        feeds = [node.feeds(int(node.rng.integers(1, 12)), int(node.rng.integers(1, 5))) for _ in range(3)]
        runs.append((s, feeds, [s.run(None, f) for f in feeds]))
    errors = []

    def work(k):
        try:
            s, feeds, want = runs[k % 2]
            for i in range(30):
                j = (i + k) % len(feeds)
                for g, w in zip(s.run(None, feeds[j]), want[j]):
                    np.testing.assert_array_equal(g, w)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ---- the rewrite helper ----

def test_to_rnnjit_domain_rewrites_every_rnn_node():
    node = Node("GRU", hidden=8, input_size=4, seed=7)
    model = rnnjit.onnx.to_rnnjit_domain(node.model(domain=""))
    assert rnnjit.onnx.rnnjit_nodes(model) == ["gru_node"]
    assert any(o.domain == "com.rnnjit" for o in model.opset_import)
    check_node(Node("GRU", hidden=8, input_size=4, seed=7, domain="com.rnnjit"))
    before = rnnjit.onnxruntime.stats()
    session(model, True).run(None, node.feeds(3, 2))
    assert stats_delta(before)["rnnjit_runs"] == 1


# ---- models exported from torch.nn ----

TORCH_CASES = [
    dict(mode="LSTM", layers=1),
    dict(mode="LSTM", layers=2, bidirectional=True, initial=True),
    dict(mode="LSTM", layers=3, batch_first=True),
    dict(mode="LSTM", layers=1, bidirectional=True, batch_first=True, initial=True),
    dict(mode="GRU", layers=1, initial=True),
    dict(mode="GRU", layers=2, bidirectional=True, batch_first=True),
    dict(mode="RNN_TANH", layers=2, initial=True),
    dict(mode="RNN_RELU", layers=1, bidirectional=True, batch_first=True),
    dict(mode="RNN_RELU", layers=3, initial=True),
]


def export_torch(torch, module, args, names, dynamic, path):
    import inspect

    # The TorchScript exporter: torch 2.x's default is the dynamo one (dynamo=False picks it back);
    # torch 1.13 has only it.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(module, args, path, input_names=names, output_names=["y", "h"], dynamic_axes=dynamic,
                      opset_version=14, **legacy)


@pytest.mark.parametrize("case", TORCH_CASES, ids=case_id)
def test_torch_exported_models(case, tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    if not hasattr(torch, "onnx"):
        pytest.skip("this PyTorch has no ONNX exporter")
    rng = np.random.default_rng(abs(hash(case_id(case))) % (2**31))
    torch.manual_seed(int(rng.integers(1 << 30)))
    I, H = int(rng.integers(2, 24)), int(rng.integers(2, 40))
    mode, layers = case["mode"], case["layers"]
    bidirectional, batch_first = case.get("bidirectional", False), case.get("batch_first", False)
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    if mode == "LSTM":
        module = torch.nn.LSTM(I, H, **kw)
    elif mode == "GRU":
        module = torch.nn.GRU(I, H, **kw)
    else:
        module = torch.nn.RNN(I, H, nonlinearity="tanh" if mode == "RNN_TANH" else "relu", **kw)
    module.eval()
    D = 2 if bidirectional else 1

    class Wrap(torch.nn.Module):  # y and h only: the exports of every mode look alike
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x, *state):
            y, h = self.inner(x, *state) if state else self.inner(x)
            return y, (h[0] if isinstance(h, tuple) else h)

    def inputs(T, N):
        x = torch.randn(*((N, T, I) if batch_first else (T, N, I)))
        if not case.get("initial"):
            return (x,)
        h = torch.randn(layers * D, N, H)
        return (x, (h, torch.randn(layers * D, N, H))) if mode == "LSTM" else (x, h)

    T0, N0 = int(rng.integers(2, 8)), int(rng.integers(2, 5))
    example = inputs(T0, N0)
    names = ["x"] + (["h0", "c0"] if case.get("initial") and mode == "LSTM" else ["h0"] if case.get("initial") else [])
    dynamic = {"x": {0: "N", 1: "T"} if batch_first else {0: "T", 1: "N"}, "y": {0: "d0", 1: "d1"}}
    for n in names[1:]:
        dynamic[n] = {1: "N"}
    path = str(tmp_path / "model.onnx")
    with torch.no_grad():
        export_torch(torch, Wrap(module), example, names, dynamic, path)
    model = onnx.load(path)
    n_nodes = sum(1 for n in model.graph.node if n.op_type in GATES)
    assert n_nodes == layers
    for domain_model in (model, rnnjit.onnx.to_rnnjit_domain(model)):
        with_lib, without = session(domain_model, True), session(model, False)
        for _ in range(2):
            T, N = int(rng.integers(1, 9)), int(rng.integers(1, 5))
            args = inputs(T, N)
            flat = [args[0]] + ([t for t in args[1]] if mode == "LSTM" and len(args) > 1 else list(args[1:]))
            feeds = {name: t.numpy() for name, t in zip(names, flat)}
            before = rnnjit.onnxruntime.stats()
            got = with_lib.run(None, feeds)
            assert stats_delta(before)["rnnjit_runs"] == layers
            want = without.run(None, feeds)
            with torch.no_grad():
                torch_out = [t.numpy() for t in Wrap(module)(*args)]
            tol = 2 * tolerance(I, H, H, D, layers, T, N, False) + 16 * EPS32
            for g, w, t in zip(got, want, torch_out):
                assert g.shape == w.shape == t.shape
                assert np.max(np.abs(g - w) / (1 + np.abs(w))) <= tol
                assert np.max(np.abs(g - t) / (1 + np.abs(t))) <= tol


# ---- the README's examples ----

@pytest.mark.parametrize("example", ["onnxruntime_override.py", "onnxruntime_domain.py"])
def test_examples_run_on_rnnjit(example, tmp_path):
    import re
    import subprocess
    import sys

    node = Node("LSTM", hidden=12, input_size=5, seed=11, direction="bidirectional")
    path = tmp_path / "model.onnx"
    onnx.save(node.model(domain=""), str(path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, os.path.join(root, "examples", example), str(path)], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, RNNJIT_VERBOSE="1"))
    assert run.returncode == 0, run.stderr
    m = re.search(r"'rnnjit_runs': (\d+), 'builtin_runs': (\d+)", run.stdout)
    assert m and int(m.group(1)) == 1 and int(m.group(2)) == 0, run.stdout
    # RNNJIT_VERBOSE logs, from inside ONNX Runtime, the node's route and the plan rnnjit made for it.
    assert re.search(r"rnnjit: LSTM node 'lstm_node' \(domain '(com\.rnnjit)?'\) runs on rnnjit", run.stderr), run.stderr
    assert re.search(r"rnnjit: plan lstm I=5 H=12 L=1 D=2 T=4 N=4 inference", run.stderr), run.stderr


def test_loading_blocks_intra_op_spinning_unless_told():
    options = ort.SessionOptions()
    options.register_custom_ops_library(LIBRARY)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    options.register_custom_ops_library(LIBRARY)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_session_thread_count_entry():
    major, minor = (int(v) for v in ort.__version__.split(".")[:2])
    if (major, minor) < (1, 24):
        pytest.skip("kernels read session config entries from ONNX Runtime 1.24")
    node = Node("LSTM", hidden=24, input_size=8, seed=12, direction="bidirectional", seq_lens=True)
    feeds = node.feeds(6, 3)
    want = session(node.model(), False).run(None, feeds)
    for value in ("1", "2"):
        options = ort.SessionOptions()
        options.add_session_config_entry("rnnjit.num_threads", value)
        options.register_custom_ops_library(LIBRARY)
        s = ort.InferenceSession(node.model().SerializeToString(), options, providers=["CPUExecutionProvider"])
        for g, w in zip(s.run(None, feeds), want):
            assert np.max(np.abs(g - w)) <= node.tol(6, 3)
    for bad in ("0", "x", "300"):
        options = ort.SessionOptions()
        options.add_session_config_entry("rnnjit.num_threads", bad)
        options.register_custom_ops_library(LIBRARY)
        with pytest.raises(Exception, match="rnnjit.num_threads must be an integer in"):
            ort.InferenceSession(node.model().SerializeToString(), options, providers=["CPUExecutionProvider"])
