"""rnnjit.torch: drop-in replacements for torch.nn.LSTM, GRU and RNN, run by rnnjit.

    import rnnjit.torch
    lstm = rnnjit.torch.LSTM(800, 800, num_layers=5, bidirectional=True)  # torch.nn.LSTM's arguments
    lstm.load_state_dict(torch_lstm.state_dict())                         # the same parameter names
    model = rnnjit.torch.convert(model)                                   # or swap a model's RNNs

Forward, autograd (backward data and weights from forward's reserve), PackedSequence inputs,
torch.no_grad() and eval(), state_dict both ways and DistributedDataParallel work as with
torch.nn. rnnjit runs float32 on the CPU (and on CUDA devices in builds with CUDA).
rnnjit.torch.quantize_dynamic(model) swaps them for int8 inference modules (QuantizedRNN).
"""

try:
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("rnnjit.torch needs PyTorch (pip install torch, or Debian's python3-torch); "
                      "the rest of rnnjit works without it") from e

from rnnjit.torch.convert import convert
from rnnjit.torch.modules import GRU, LSTM, RNN
from rnnjit.torch.quantized import QuantizedRNN, quantize_dynamic

__all__ = ["GRU", "LSTM", "RNN", "QuantizedRNN", "convert", "quantize_dynamic"]
