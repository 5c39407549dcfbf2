"""rnnjit.torch: drop-in replacements for torch.nn.LSTM, GRU and RNN, run by rnnjit.

    import rnnjit.torch
    lstm = rnnjit.torch.LSTM(800, 800, num_layers=5, bidirectional=True)  # torch.nn.LSTM's arguments
    lstm.load_state_dict(torch_lstm.state_dict())                         # the same parameter names
    model = rnnjit.torch.convert(model)                                   # or swap a model's RNNs

Forward, autograd (backward data and weights from forward's reserve), PackedSequence inputs,
torch.no_grad() and eval(), state_dict both ways and DistributedDataParallel work as with
torch.nn; inference reuses packed weights until a parameter changes (drop_packed_weights() after
edits through .data). rnnjit runs float32 and bfloat16 (and CPU autocast) on the CPU, float32 on
CUDA in builds with CUDA; anything else runs torch.nn's implementation (FallbackWarning). On
PyTorch >= 2.4, torch.compile(fullgraph=True) and torch.export trace the layers to custom
operators; torch.onnx.export writes ONNX's RNN operators. docs/python.md has the details.
rnnjit.torch.quantize_dynamic(model) swaps them for int8 inference modules (QuantizedRNN).
"""

try:
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("rnnjit.torch needs PyTorch (pip install torch, or Debian's python3-torch); "
                      "the rest of rnnjit works without it") from e

from rnnjit.torch._threads import use_torch_threads
from rnnjit.torch.convert import convert
from rnnjit.torch.modules import GRU, LSTM, RNN, FallbackWarning
from rnnjit.torch.quantized import QuantizedRNN, quantize_dynamic

__all__ = ["GRU", "LSTM", "RNN", "FallbackWarning", "QuantizedRNN", "convert", "quantize_dynamic", "use_torch_threads"]
