"""rnnjit.torch.quantize_dynamic: int8 inference modules for LSTM, GRU and RNN (docs/quantization.md).

    model = rnnjit.torch.quantize_dynamic(model.eval())   # every LSTM/GRU/RNN inside: int8 on rnnjit
    torch.save(model.state_dict(), "int8.pt")              # int8 weights and their scales

A QuantizedRNN holds each weight matrix of the layer it replaced as int8 with one scale per row
(symmetric: scale = max|row| / 127, as rnnjit's int8 plan quantizes them), biases as float32, all
as buffers, so state_dict saves and loads the quantized weights. Forward runs rnnjit with
quantize="int8_dynamic": the weights dequantized once into rnnjit's canonical buffer are
quantized again per row as they are packed (the same int8 values and scales: the round trip is
exact), packed once per (T, N) and reused until a buffer changes. Inference only, on the CPU.
"""

import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

import rnnjit

_MAX_SHAPES = 8  # executions (and packed weights) kept per module, the least recently used dropped


def _cell_of(layer):
    if isinstance(layer, torch.nn.LSTM):
        return "lstm"
    if isinstance(layer, torch.nn.GRU):
        return "gru"
    return "rnn_tanh" if layer.nonlinearity == "tanh" else "rnn_relu"


def quantize_rows(weight):
    """Symmetric int8 per row: (int8 values, float32 scale per row) with scale = max|row| / 127
    (1 for an all-zero row)."""
    w = weight.detach().to(torch.float32)
    scale = w.abs().amax(dim=1) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(w / scale[:, None]), -127, 127).to(torch.int8)
    return q, scale


class QuantizedRNN(torch.nn.Module):
    """An int8 LSTM, GRU or RNN for inference on rnnjit, made from a float one (from_float or
    rnnjit.torch.quantize_dynamic); its forward takes and returns what torch.nn's layer does."""

    def __init__(self, cell, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0):
        super().__init__()
        self.cell, self.input_size, self.hidden_size = cell, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = dropout, bidirectional, proj_size
        self._make_rnn()
        for b in self._blocks:
            if b.name.startswith("weight"):
                self.register_buffer(b.name, torch.zeros(tuple(b.shape), dtype=torch.int8))
                self.register_buffer(b.name + "_scale", torch.ones(b.shape[0], dtype=torch.float32))
            else:
                self.register_buffer(b.name, torch.zeros(tuple(b.shape), dtype=torch.float32))

    def _make_rnn(self):
        """rnnjit's objects (not picklable: made again by __setstate__, for copy.deepcopy and
        torch.save of the whole module)."""
        config = rnnjit.RnnConfig(cell=self.cell, input_size=self.input_size, hidden_size=self.hidden_size,
                                  num_layers=self.num_layers, bidirectional=self.bidirectional,
                                  proj_size=self.proj_size, bias=self.bias, batch_first=self.batch_first)
        self._rnn = rnnjit.Rnn(config, rnnjit.Options(quantize="int8_dynamic"))
        self._blocks = list(self._rnn.weight_layout)
        self._weights_key = None  # what the canonical buffer below was made from
        self._flat = None         # the dequantized weights in rnnjit's canonical layout
        self._shapes = {}         # (T, N) -> (Execution, packed weights), most recently used last

    def __getstate__(self):
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__
        return {k: v for k, v in state.items() if k not in ("_rnn", "_blocks", "_weights_key", "_flat", "_shapes")}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._make_rnn()

    @classmethod
    def from_float(cls, layer):
        """The int8 twin of a torch.nn (or rnnjit.torch) LSTM, GRU or RNN."""
        q = cls(_cell_of(layer), layer.input_size, layer.hidden_size, layer.num_layers, layer.bias,
                layer.batch_first, layer.dropout, layer.bidirectional, getattr(layer, "proj_size", 0))
        with torch.no_grad():
            for b in q._blocks:
                value = getattr(layer, b.name).detach().to("cpu", torch.float32)
                if b.name.startswith("weight"):
                    values, scale = quantize_rows(value)
                    getattr(q, b.name).copy_(values)
                    getattr(q, b.name + "_scale").copy_(scale)
                else:
                    getattr(q, b.name).copy_(value)
        return q

    def extra_repr(self):
        s = f"{self.cell}, {self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, int8"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.batch_first:
            s += ", batch_first=True"
        return s

    # ---- weights: dequantized, packed per shape, rebuilt whenever a buffer changed ----

    def _canonical_weights(self):
        # load_state_dict and in-place updates bump a tensor's version; .to() and assignment
        # replace its storage: either makes a new key, and the packed weights are made again.
        key = tuple((id(t), t.data_ptr(), t._version) for t in self._buffers.values())
        if key != self._weights_key:
            for t in self._buffers.values():
                if t.device.type != "cpu":
                    raise RuntimeError(f"rnnjit.torch.QuantizedRNN runs on the CPU; its buffers are on {t.device}")
            parts = []
            for b in self._blocks:
                t = getattr(self, b.name)
                if b.name.startswith("weight"):
                    t = t.to(torch.float32) * getattr(self, b.name + "_scale")[:, None]
                parts.append(t.reshape(-1).to(torch.float32))
            self._flat = torch.cat(parts).contiguous()
            self._shapes.clear()
            self._weights_key = key
        return self._flat

    def _execution(self, flat, seq_len, batch):
        entry = self._shapes.pop((seq_len, batch), None)
        if entry is None:
            ex = self._rnn.prepare((seq_len, batch), "inference")
            packed = torch.empty(ex.packed_weights_size(), dtype=torch.uint8)
            if packed.numel() > 0:
                ex.pack_weights(flat.numpy(), packed.numpy())
            entry = (ex, packed if packed.numel() > 0 else None)
            while len(self._shapes) >= _MAX_SHAPES:
                self._shapes.pop(next(iter(self._shapes)))
        self._shapes[(seq_len, batch)] = entry
        return entry

    def plan_text(self, seq_len, batch):
        """rnnjit's plan for a call of this shape (its first line says quantize=int8_dynamic and the
        unit, or its notes why the plan fell back to bf16 or FP32)."""
        return self._execution(self._canonical_weights(), seq_len, batch)[0].plan_text()

    # ---- forward ----

    def forward(self, input, hx=None):
        name = type(self).__name__
        lstm = self.cell == "lstm"
        packed = isinstance(input, PackedSequence)
        if packed:
            x, lengths = pad_packed_sequence(input)
            batch_first, batched = False, True
        else:
            x, lengths, batch_first = input, None, self.batch_first
            if x.dim() not in (2, 3):
                raise ValueError(f"{name}: expected a 2D or 3D input, got {x.dim()}D")
            batched = x.dim() == 3
            if not batched:
                x = x.unsqueeze(0 if batch_first else 1)
        states = [] if hx is None else (list(hx) if lstm else [hx])
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in [x, *states]):
            raise RuntimeError(f"{name}: int8 modules are for inference only and have no gradients; run them under "
                               "torch.no_grad() (or torch.inference_mode()) on inputs that need none")
        if self.training and self.dropout > 0 and self.num_layers > 1:
            raise RuntimeError(f"{name}: dropout between layers needs training, which int8 modules do not do: call "
                               ".eval() first")
        if x.dtype != torch.float32 or x.device.type != "cpu":
            raise TypeError(f"{name}: input must be float32 on the CPU, got {x.dtype} on {x.device}")
        if x.size(-1) != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be {self.input_size}, got {x.size(-1)}")
        seq_len, batch = (x.size(1), x.size(0)) if batch_first else (x.size(0), x.size(1))
        directions = 2 if self.bidirectional else 1
        state = self.proj_size or self.hidden_size
        h_shape = (self.num_layers * directions, batch, state)
        c_shape = (self.num_layers * directions, batch, self.hidden_size)
        if lstm and hx is not None and len(states) != 2:
            raise ValueError(f"{name}: hx must be a pair (h_0, c_0)")
        h0 = self._state(name, states[0] if states else None, h_shape, batched, "h_0")
        c0 = self._state(name, states[1] if states else None, c_shape, batched, "c_0") if lstm else None
        if batch_first != self.batch_first:  # a PackedSequence of a batch_first layer
            x = x.transpose(0, 1)
        x = x.contiguous()

        flat = self._canonical_weights()
        ex, packed_weights = self._execution(flat, seq_len, batch)
        out_width = directions * state
        y = torch.empty((batch, seq_len, out_width) if self.batch_first else (seq_len, batch, out_width))
        hy = torch.empty(h_shape)
        cy = torch.empty(c_shape) if lstm else None
        n = lambda t: None if t is None else t.numpy()  # noqa: E731
        with torch.no_grad():
            ex.forward(flat.numpy(), x.numpy(), y.numpy(), hx=n(h0), cx=n(c0), hy=hy.numpy(), cy=n(cy),
                       packed_weights=n(packed_weights),
                       seq_lengths=None if lengths is None else lengths.to(torch.int32).numpy())
        if packed:
            if self.batch_first:
                y = y.transpose(0, 1)
            output = pack_padded_sequence(y, lengths, enforce_sorted=False)
        else:
            output = y if batched else y.squeeze(0 if batch_first else 1)
        if not batched:
            hy = hy.squeeze(1)
            cy = cy.squeeze(1) if cy is not None else None
        return (output, (hy, cy)) if lstm else (output, hy)

    @staticmethod
    def _state(name, t, shape, batched, what):
        if t is None:
            return None
        if not batched:
            t = t.unsqueeze(1)
        if tuple(t.shape) != shape:
            raise RuntimeError(f"{name}: {what} has shape {tuple(t.shape)}, expected {shape}")
        if t.dtype != torch.float32 or t.device.type != "cpu":
            raise TypeError(f"{name}: {what} must be float32 on the CPU, got {t.dtype} on {t.device}")
        return t.detach().contiguous()


def _quantizable(module):
    # Exact types: torch.nn's layers and rnnjit.torch's (which subclass them); other subclasses
    # may change forward, and are left alone (as rnnjit.torch.convert does).
    from rnnjit.torch.modules import GRU, LSTM, RNN
    return type(module) in (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN, LSTM, GRU, RNN)


def quantize_dynamic(model):
    """Replaces every torch.nn or rnnjit.torch LSTM, GRU and RNN inside `model` (in place) by a
    QuantizedRNN with its weights quantized to int8, and returns the model; where `model` itself
    is one of them, returns its QuantizedRNN. For inference: the result has no gradients."""
    if _quantizable(model):
        return QuantizedRNN.from_float(model)
    if isinstance(model, QuantizedRNN):
        return model
    for name, child in model.named_children():
        quantized = quantize_dynamic(child)
        if quantized is not child:
            setattr(model, name, quantized)
    return model
