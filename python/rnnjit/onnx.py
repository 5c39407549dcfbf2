"""ONNX models for rnnjit's ONNX Runtime library (rnnjit.onnxruntime, docs/onnxruntime.md).

``to_rnnjit_domain`` rewrites a model's LSTM, GRU and RNN nodes into the domain ``com.rnnjit``, the
library's stable route (its ops of ONNX's own domain replace ONNX Runtime's kernels, which ONNX
Runtime's maintainers call unofficial)::

    import onnx, onnxruntime as ort, rnnjit.onnx, rnnjit.onnxruntime
    model = rnnjit.onnx.to_rnnjit_domain(onnx.load("model.onnx"))
    options = rnnjit.onnxruntime.session_options()
    session = ort.InferenceSession(model.SerializeToString(), options)
"""

DOMAIN = "com.rnnjit"
OPS = ("LSTM", "GRU", "RNN")


def _graphs(graph):
    """The graph and every subgraph of its nodes' attributes (If, Loop, Scan bodies)."""
    import onnx

    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _graphs(g)


def to_rnnjit_domain(model, ops=OPS):
    """A copy of ``model`` (an onnx.ModelProto) whose nodes of ``ops`` in ONNX's own domain are in
    ``com.rnnjit`` (same attributes, inputs and outputs), with that domain imported."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    rewritten = 0
    for graph in _graphs(out.graph):
        for node in graph.node:
            if node.op_type in ops and node.domain in ("", "ai.onnx"):
                node.domain = DOMAIN
                rewritten += 1
    if rewritten and not any(o.domain == DOMAIN for o in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid(DOMAIN, 1))
    return out


def rnnjit_nodes(model):
    """The names (or op types, where unnamed) of the model's nodes in ``com.rnnjit``."""
    return [n.name or n.op_type for g in _graphs(model.graph) for n in g.node if n.domain == DOMAIN]
