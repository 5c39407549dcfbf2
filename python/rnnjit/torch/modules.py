"""rnnjit.torch.LSTM, GRU and RNN: torch.nn's layers with rnnjit's fused kernels inside.

Each subclasses its torch.nn twin, so construction, parameter names and initialisation,
state_dict, repr and isinstance checks are torch.nn's own; forward runs rnnjit. The parameters
are views into one canonical weight buffer (rnnjit's layout is PyTorch's state_dict order), so
a call hands rnnjit the weights without a copy; whatever replaces their storage (.to(),
load_state_dict(assign=True), a DDP broadcast) is caught before the next call and re-flattened.
"""

import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

import rnnjit
from rnnjit.torch._function import Call, RnnFunction, order_after_torch, run_forward
from rnnjit.torch._pool import ExecutionPool


def _fpmath():
    """rnnjit's fpmath for torch's float32 matmul precision: 'medium' lets torch's matmuls run
    on bf16 inputs (torch.set_float32_matmul_precision), and so rnnjit's GEMMs (where the CPU has
    a bf16 unit; elsewhere the plan stays FP32)."""
    return "bf16" if torch.get_float32_matmul_precision() == "medium" else "strict"


class _RnnjitLayer:
    """What LSTM, GRU and RNN share; mixed in before their torch.nn base class."""

    _rnnjit_cell = None  # rnnjit's cell name, set by each class

    # ---- the canonical weight buffer ----

    def flatten_parameters(self):
        """Makes every parameter a view into one canonical weight buffer (a no-op when they are)."""
        params = [getattr(self, name) for name in self._flat_weights_names]
        flat = self.__dict__.get("_rnnjit_flat")
        if flat is not None and _views_of(flat, params):
            return
        total = sum(p.numel() for p in params)
        with torch.no_grad():
            flat = torch.empty(total, dtype=params[0].dtype, device=params[0].device)
            offset = 0
            for p in params:
                flat[offset:offset + p.numel()].copy_(p.detach().reshape(-1))
                p.data = flat[offset:offset + p.numel()].view(p.shape)
                offset += p.numel()
        self.__dict__["_rnnjit_flat"] = flat

    def _rnnjit_weights(self):
        """The canonical buffer and the parameters (in its order), re-flattened if need be."""
        params = [getattr(self, name) for name in self._flat_weights_names]
        flat = self.__dict__.get("_rnnjit_flat")
        if flat is None or not _views_of(flat, params):
            self.flatten_parameters()
            flat = self.__dict__["_rnnjit_flat"]
        return flat, params

    # ---- rnnjit objects ----

    def _rnnjit_config(self, batch_first, dropout):
        return rnnjit.RnnConfig(cell=self._rnnjit_cell, input_size=self.input_size, hidden_size=self.hidden_size,
                                num_layers=self.num_layers, bidirectional=self.bidirectional,
                                proj_size=getattr(self, "proj_size", 0), bias=self.bias, batch_first=batch_first,
                                dropout=dropout)

    def _rnnjit_rnn(self, key):
        """The rnnjit.Rnn of (batch_first, dropout, device, fpmath), made once per module."""
        rnns = self.__dict__.setdefault("_rnnjit_rnns", {})
        rnn = rnns.get(key)
        if rnn is None:
            batch_first, dropout, device, fpmath = key
            options = rnnjit.Options(device="cuda" if device.type == "cuda" else "cpu", fpmath=fpmath)
            rnn = rnns[key] = rnnjit.Rnn(self._rnnjit_config(batch_first, dropout), options)
        return rnn

    def _rnnjit_pool(self):
        pool = self.__dict__.get("_rnnjit_executions")
        if pool is None:
            pool = self.__dict__["_rnnjit_executions"] = ExecutionPool()
        return pool

    # ---- forward ----

    def _rnnjit_forward(self, input, hx, cx):
        """Runs the layer: returns output, h_n and c_n (None but for LSTM), as torch.nn does."""
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        if packed:
            x, lengths = pad_packed_sequence(input)  # [T, N, I], the batch in its original order
            batch_first, batched = False, True
        else:
            x, lengths = input, None
            batch_first = self.batch_first
            if x.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {x.dim()}D instead")
            batched = x.dim() == 3
            if not batched:
                x = x.unsqueeze(0 if batch_first else 1)
        flat, params = self._rnnjit_weights()
        _check_tensor(name, "input", x, flat)
        if x.size(-1) != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.size(-1)}")
        seq_len, batch = (x.size(1), x.size(0)) if batch_first else (x.size(0), x.size(1))
        directions = 2 if self.bidirectional else 1
        state = getattr(self, "proj_size", 0) or self.hidden_size
        h_shape = (self.num_layers * directions, batch, state)
        c_shape = (self.num_layers * directions, batch, self.hidden_size) if self._rnnjit_cell == "lstm" else None
        hx = _checked_state(name, hx, h_shape, batched, "hidden[0]" if c_shape else "hx", flat)
        cx = _checked_state(name, cx, c_shape, batched, "hidden[1]", flat) if c_shape else None

        dropout = self.dropout if self.training and self.num_layers > 1 else 0.0
        grad = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params) or
                                            (hx is not None and hx.requires_grad) or
                                            (cx is not None and cx.requires_grad))
        mode = "training" if grad or dropout > 0 else "inference"
        key = (batch_first, dropout, x.device, _fpmath())
        rnn = self._rnnjit_rnn(key)
        lease = self._rnnjit_pool().acquire((key, seq_len, batch, mode), rnn, (seq_len, batch), mode)
        out_width = directions * state
        y_shape = (batch, seq_len, out_width) if batch_first else (seq_len, batch, out_width)
        seed = int(torch.randint(0, 2**62, (1,)).item()) if dropout > 0 else 0
        call = Call(lease, flat, None, None if lengths is None else lengths.to(torch.int32), seed, y_shape, h_shape,
                    c_shape)
        x = x.contiguous()
        order_after_torch(x)
        if grad:
            call.blocks = rnn.weight_layout
            y, hy, *cy = RnnFunction.apply(call, x, hx, cx, *params)
            cy = cy[0] if cy else None
        else:
            try:
                y, hy, cy = run_forward(call, x.detach(), _detached(hx), _detached(cx))
            finally:
                lease.release()
        if packed:
            y = PackedSequence(y[_packed_rows(input)], input.batch_sizes, input.sorted_indices,
                               input.unsorted_indices)
        elif not batched:
            y, hy = y.squeeze(0 if batch_first else 1), hy.squeeze(1)
            cy = cy.squeeze(1) if cy is not None else None
        return y, hy, cy

    def _apply(self, *args, **kwargs):
        # Moving or converting the module makes new parameter tensors: flatten them again, and
        # forget Executions and configurations made for the old device.
        self.__dict__.pop("_rnnjit_executions", None)
        self.__dict__.pop("_rnnjit_rnns", None)
        return super()._apply(*args, **kwargs)


def _views_of(flat, params):
    """Whether the parameters are, in order, contiguous views covering the canonical buffer."""
    offset = 0
    base = flat.data_ptr()
    item = flat.element_size()
    for p in params:
        if (p.device != flat.device or p.dtype != flat.dtype or not p.is_contiguous() or
                p.data_ptr() != base + offset * item):
            return False
        offset += p.numel()
    return offset == flat.numel()


def _check_tensor(layer, what, t, flat):
    if t.dtype != torch.float32:
        raise TypeError(f"rnnjit.torch.{layer}: {what} has dtype {t.dtype}; rnnjit runs float32 only")
    if flat.dtype != torch.float32:
        raise TypeError(f"rnnjit.torch.{layer}: the parameters have dtype {flat.dtype}; rnnjit runs float32 only "
                        "(keep the module in float32)")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"rnnjit.torch.{layer}: {what} is on device {t.device}; rnnjit runs on cpu and cuda")
    if t.device != flat.device:
        raise ValueError(f"rnnjit.torch.{layer}: {what} is on {t.device} but the parameters are on {flat.device}")
    if t.is_cuda and t.device.index != 0:
        raise ValueError(f"rnnjit.torch.{layer}: {what} is on {t.device}; rnnjit's CUDA executor runs on cuda:0 "
                         "(choose the GPU with CUDA_VISIBLE_DEVICES)")


def _checked_state(layer, h, shape, batched, label, flat):
    """An initial state in rnnjit's [L*D, N, *] layout (contiguous), or None for zeros."""
    if h is None:
        return None
    if h.dim() != (3 if batched else 2):
        kind = "batched 3-D" if batched else "unbatched 2-D"
        raise RuntimeError(f"For {kind} input, {label} should also be {3 if batched else 2}-D but got "
                           f"{h.dim()}-D tensor")
    if not batched:
        h = h.unsqueeze(1)
    if tuple(h.shape) != shape:
        raise RuntimeError(f"Expected {label} size {shape}, got {list(h.shape)}")
    _check_tensor(layer, label, h, flat)
    return h.contiguous()


def _detached(t):
    return None if t is None else t.detach()


def _packed_rows(packed):
    """Row indices (t, n) of a padded [T, N, *] tensor, in the packed sequence's data order."""
    batch_sizes = packed.batch_sizes
    steps = torch.repeat_interleave(torch.arange(batch_sizes.numel()), batch_sizes)
    starts = torch.cumsum(batch_sizes, 0) - batch_sizes
    rank = torch.arange(steps.numel()) - starts[steps]  # place among the step's rows, longest first
    order = packed.sorted_indices
    columns = rank if order is None else order.cpu()[rank]
    device = packed.data.device
    return steps.to(device), columns.to(device)


class LSTM(_RnnjitLayer, torch.nn.LSTM):
    """torch.nn.LSTM run by rnnjit: the same arguments, parameters, inputs and outputs."""

    _rnnjit_cell = "lstm"

    def forward(self, input, hx=None):
        h0, c0 = (None, None) if hx is None else hx
        y, hy, cy = self._rnnjit_forward(input, h0, c0)
        return y, (hy, cy)


class GRU(_RnnjitLayer, torch.nn.GRU):
    """torch.nn.GRU (linear before reset, as PyTorch's) run by rnnjit."""

    _rnnjit_cell = "gru"

    def forward(self, input, hx=None):
        y, hy, _ = self._rnnjit_forward(input, hx, None)
        return y, hy


class RNN(_RnnjitLayer, torch.nn.RNN):
    """torch.nn.RNN (nonlinearity "tanh" or "relu") run by rnnjit."""

    @property
    def _rnnjit_cell(self):
        return "rnn_tanh" if self.nonlinearity == "tanh" else "rnn_relu"

    def forward(self, input, hx=None):
        y, hy, _ = self._rnnjit_forward(input, hx, None)
        return y, hy
