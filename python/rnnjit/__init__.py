"""rnnjit: JIT-generated fused RNN kernels (LSTM, GRU, vanilla RNN) for inference and training.

The low-level API mirrors the C++ one (rnnjit/rnn.hpp)::

    import numpy as np, rnnjit
    config = rnnjit.RnnConfig(cell="lstm", input_size=32, hidden_size=64)
    rnn = rnnjit.Rnn(config)
    ex = rnn.prepare((10, 4), "training")             # plans and compiles, through the cache
    w = np.random.rand(rnn.weights_size()).astype(np.float32)
    x = np.random.rand(10, 4, 32).astype(np.float32)
    y = np.empty((10, 4, 64), np.float32)
    ex.forward(w, x, y)                                # keeps the reserve for backward

Arrays are any float32 C-contiguous numpy arrays or torch tensors (DLPack), used in place.
``rnnjit.torch`` has the drop-in ``torch.nn.LSTM/GRU/RNN`` layers.
"""

from rnnjit._rnnjit import (
    Backend,
    CacheStats,
    CellKind,
    Device,
    Error,
    Execution,
    FpMath,
    Isa,
    KernelCode,
    Mode,
    Options,
    ParamBlock,
    ParamKind,
    ProjectionGemm,
    Quantize,
    Rnn,
    RnnConfig,
    Shape,
    __version__,
    amx_bf16_usable,
    bf16_unit,
    cache_stats,
    cell_state_elements,
    clear_cache,
    cpu_isa,
    detect_isa,
    int8_unit,
    int8_activation_quantization,
    state_elements,
    x_elements,
    y_elements,
)

__all__ = [
    "Backend", "CacheStats", "CellKind", "Device", "Error", "Execution", "FpMath", "Isa", "KernelCode", "Mode",
    "Options", "ParamBlock", "ParamKind", "ProjectionGemm", "Rnn", "RnnConfig", "Shape", "__version__",
    "amx_bf16_usable", "bf16_unit", "cache_stats", "cell_state_elements", "clear_cache", "cpu_isa", "detect_isa", "state_elements",
    "x_elements", "y_elements",
    "Quantize", "int8_unit", "int8_activation_quantization",
]
