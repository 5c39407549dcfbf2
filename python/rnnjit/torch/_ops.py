"""rnnjit's forward and backward as torch.library custom operators (PyTorch >= 2.4, imported
only there), for torch.compile and torch.export.

A compiled or exported graph cannot call into rnnjit with data pointers while it is traced
(its tensors are fake then), so a layer traced by torch.compile or torch.export records one
opaque operator, rnnjit::rnn_forward, with a fake kernel that gives its outputs' shapes, and
an autograd formula that calls rnnjit::rnn_backward. Everything the C++ call needs is an
argument: the configuration as integers, the parameters as a list, and the training reserve
as a uint8 tensor output that backward takes back (eager calls keep it inside a borrowed
Execution instead; here the graph owns it). The kernels borrow Executions from a process-wide
pool and reuse packed weights for inference as eager calls do (rnnjit.torch._packs).

torch.onnx.export does not go through these: a layer being exported runs torch.nn's forward,
which both exporters write as ONNX's LSTM, GRU and RNN operators.
"""

import threading
from typing import List, Optional, Tuple

import torch

import rnnjit
from rnnjit.torch import _packs
from rnnjit.torch._function import cast, float32, raw
from rnnjit.torch._pool import ExecutionPool

Tensor = torch.Tensor

_POOL = ExecutionPool()
_RNNS = {}
_RNNS_LOCK = threading.Lock()

# config: [input_size, hidden_size, num_layers, bidirectional, proj_size, bias, batch_first]


def _fpmath(bf16):
    if bf16:
        return "bf16"
    return "bf16" if torch.get_float32_matmul_precision() == "medium" else "strict"


def _rnn(cell, config, dropout, device, fpmath, threads):
    key = (cell, tuple(config), dropout, device, fpmath, threads)
    with _RNNS_LOCK:
        rnn = _RNNS.get(key)
        if rnn is None:
            input_size, hidden_size, num_layers, bidirectional, proj_size, bias, batch_first = config
            rnn = _RNNS[key] = rnnjit.Rnn(
                rnnjit.RnnConfig(cell=cell, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                                 bidirectional=bool(bidirectional), proj_size=proj_size, bias=bool(bias),
                                 batch_first=bool(batch_first), dropout=dropout),
                rnnjit.Options(device="cuda" if device.type == "cuda" else "cpu", fpmath=fpmath, threads=threads))
    return key, rnn


def _shapes(x, config, cell):
    input_size, hidden_size, num_layers, bidirectional, proj_size, bias, batch_first = config
    directions = 2 if bidirectional else 1
    seq_len, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    state = proj_size or hidden_size
    width = directions * state
    y_shape = (batch, seq_len, width) if batch_first else (seq_len, batch, width)
    h_shape = (num_layers * directions, batch, state)
    c_shape = (num_layers * directions, batch, hidden_size) if cell == "lstm" else (0,)
    return (seq_len, batch), y_shape, h_shape, c_shape


def _canonical(weights):
    """The parameters as one canonical buffer: a view where they are consecutive views of one
    (rnnjit.torch's layers keep them so), else a copy."""
    first = weights[0]
    item = first.element_size()
    pointer = first.data_ptr()
    total = 0
    consecutive = True
    for w in weights:
        if w.dtype != first.dtype or not w.is_contiguous() or w.data_ptr() != pointer + total * item:
            consecutive = False
            break
        total += w.numel()
    if consecutive:
        return first.as_strided((total,), (1,))
    return torch.cat([w.detach().reshape(-1) for w in weights])


def _execution(cell, config, dropout, x, weights, training):
    bf16 = x.dtype == torch.bfloat16
    threads = torch.get_num_threads() if x.device.type == "cpu" else 0
    key, rnn = _rnn(cell, config, dropout, x.device, _fpmath(bf16), threads)
    shape, y_shape, h_shape, c_shape = _shapes(x, config, cell)
    mode = "training" if training else "inference"
    pool_key = (key, shape, mode)
    return pool_key, _POOL.take(pool_key, rnn, shape, mode), y_shape, h_shape, c_shape


@torch.library.custom_op("rnnjit::rnn_forward", mutates_args=())
def rnn_forward(x: Tensor, hx: Optional[Tensor], cx: Optional[Tensor], weights: List[Tensor],
                lengths: Optional[Tensor], seed: Tensor, config: List[int], cell: str, dropout: float,
                training: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """y, h_n, c_n (empty but for LSTM) and the training reserve (empty in inference), in x's
    dtype (float32 arithmetic; bf16 GEMMs for bfloat16)."""
    with torch.no_grad():
        pool_key, execution, y_shape, h_shape, c_shape = _execution(cell, config, dropout, x, weights, training)
        try:
            flat = _canonical(weights)
            packed = None
            if training:
                flat32 = float32(flat)
            elif x.device.type == "cpu":
                flat32, packed = _packs.inference_weights(weights, flat, execution)
            else:
                flat32 = float32(flat)
            x32 = float32(x)
            y = x32.new_empty(y_shape)
            hy = x32.new_empty(h_shape)
            cy = x32.new_empty(c_shape) if cell == "lstm" else None
            # Zeros: bytes the plan leaves unwritten (padding) are then the same in every call.
            reserve = torch.zeros(execution.reserve_size() if training else 0, dtype=torch.uint8, device=x.device)
            lengths32 = None if lengths is None else lengths.to(torch.int32).cpu()
            execution._forward_raw(raw(flat32), raw(x32), raw(y), raw(float32(hx)), raw(float32(cx)), raw(hy), raw(cy),
                                   raw(lengths32), int(seed.item()), raw(packed), raw(reserve) if training else None)
        finally:
            _POOL._give_back(pool_key, execution)
    empty = x.new_empty((0,))
    return cast(y, x.dtype), cast(hy, x.dtype), (empty if cy is None else cast(cy, x.dtype)), reserve


@rnn_forward.register_fake
def _(x, hx, cx, weights, lengths, seed, config, cell, dropout, training):
    shape, y_shape, h_shape, c_shape = _shapes(x, config, cell)
    if not training:
        reserve_size = 0
    elif all(isinstance(n, int) for n in shape):
        # The plan's size (the plan cache makes this cheap; the real call prepares the same).
        pool_key, execution, *_ = _execution(cell, config, dropout, x, weights, training)
        reserve_size = execution.reserve_size()
        _POOL._give_back(pool_key, execution)
    else:
        reserve_size = torch.library.get_ctx().new_dynamic_size()
    return (x.new_empty(y_shape), x.new_empty(h_shape), x.new_empty(c_shape if cell == "lstm" else (0,)),
            x.new_empty((reserve_size,), dtype=torch.uint8))


@torch.library.custom_op("rnnjit::rnn_backward", mutates_args=())
def rnn_backward(dy: Tensor, dhy: Optional[Tensor], dcy: Optional[Tensor], x: Tensor, hx: Optional[Tensor],
                 cx: Optional[Tensor], weights: List[Tensor], reserve: Tensor, lengths: Optional[Tensor],
                 config: List[int], cell: str, dropout: float) -> Tuple[Tensor, Tensor, Tensor, List[Tensor]]:
    """dx, dh_0, dc_0 (empty where the state was not given) and each parameter's gradient,
    from the reserve forward training left."""
    with torch.no_grad():
        pool_key, execution, y_shape, h_shape, c_shape = _execution(cell, config, dropout, x, weights, True)
        try:
            flat32 = float32(_canonical(weights))
            x32 = float32(x)
            dx = torch.empty_like(x32)
            dhx = x32.new_empty(h_shape) if hx is not None else None
            dcx = x32.new_empty(c_shape) if cx is not None else None
            dw = torch.empty_like(flat32)
            execution._backward_raw(raw(flat32), raw(float32(dy)), raw(float32(dhy)), raw(float32(dcy)), raw(dx),
                                    raw(dhx), raw(dcx), raw(x32), raw(dw), raw(reserve))
        finally:
            _POOL._give_back(pool_key, execution)
    grads, offset = [], 0
    for w in weights:
        grads.append(cast(dw[offset:offset + w.numel()].view(w.shape), w.dtype).clone())
        offset += w.numel()
    return (cast(dx, x.dtype), x.new_empty((0,)) if dhx is None else cast(dhx, hx.dtype),
            x.new_empty((0,)) if dcx is None else cast(dcx, cx.dtype), grads)


@rnn_backward.register_fake
def _(dy, dhy, dcy, x, hx, cx, weights, reserve, lengths, config, cell, dropout):
    return (torch.empty_like(x), x.new_empty((0,)) if hx is None else torch.empty_like(hx),
            x.new_empty((0,)) if cx is None else torch.empty_like(cx), [torch.empty_like(w) for w in weights])


def _setup_context(ctx, inputs, output):
    x, hx, cx, weights, lengths, seed, config, cell, dropout, training = inputs
    ctx.config, ctx.cell, ctx.dropout = config, cell, dropout
    ctx.has_hx, ctx.has_cx, ctx.has_lengths = hx is not None, cx is not None, lengths is not None
    ctx.weights_count = len(weights)
    saved = [x, *weights, output[3]]
    saved += [t for t in (hx, cx, lengths) if t is not None]
    ctx.save_for_backward(*saved)


def _backward(ctx, dy, dhy, dcy, dreserve):
    saved = list(ctx.saved_tensors)
    x = saved.pop(0)
    weights = [saved.pop(0) for _ in range(ctx.weights_count)]
    reserve = saved.pop(0)
    hx = saved.pop(0) if ctx.has_hx else None
    cx = saved.pop(0) if ctx.has_cx else None
    lengths = saved.pop(0) if ctx.has_lengths else None
    if dcy is not None and dcy.numel() == 0:
        dcy = None
    if dy is None:
        dy = torch.zeros_like(x.new_empty(_shapes(x, ctx.config, ctx.cell)[1]))
    dx, dhx, dcx, dweights = rnn_backward(dy, dhy, dcy, x, hx, cx, weights, reserve, lengths, ctx.config, ctx.cell,
                                          ctx.dropout)
    return (dx, dhx if ctx.has_hx else None, dcx if ctx.has_cx else None, dweights, None, None, None, None, None,
            None)


rnn_forward.register_autograd(_backward, setup_context=_setup_context)


def run(module, x, hx, cx, lengths, batch_first, dropout, dtypes, training):
    """The layer's call as rnnjit::rnn_forward (x, hx, cx as the layer checked them): y, h_n, c_n
    in `dtypes`."""
    config = [module.input_size, module.hidden_size, module.num_layers, int(module.bidirectional),
              getattr(module, "proj_size", 0), int(module.bias), int(batch_first)]
    dtype = dtypes[0]
    if dtype != x.dtype:  # CPU autocast to bf16: torch.nn's operator casts its inputs too
        x, hx, cx = cast(x, dtype), cast(hx, dtype), cast(cx, dtype)
    seed = torch.randint(0, 2**62, (1,)) if dropout > 0 else torch.zeros(1, dtype=torch.int64)
    y, hy, cy, _ = rnn_forward(x, hx, cx, module._rnnjit_params(), lengths, seed, config, module._rnnjit_cell,
                               float(dropout), training)
    return cast(y, dtypes[0]), cast(hy, dtypes[1]), (cast(cy, dtypes[2]) if module._rnnjit_cell == "lstm" else None)
