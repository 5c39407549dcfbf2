"""The autograd Function: forward training, then backward data and backward weights.

Forward runs rnnjit's training plan, which keeps what backward needs in the Execution's
reserve; the Execution stays on the autograd context until backward has run both backward
calls on that reserve (no recomputation), then goes back to its pool.
"""

import torch
from torch.autograd.function import once_differentiable


class Call:
    """What one call hands to the Function besides its tensors."""

    __slots__ = ("lease", "flat", "blocks", "lengths", "dropout_seed", "y_shape", "h_shape", "c_shape", "dtypes")

    def __init__(self, lease, flat, blocks, lengths, dropout_seed, y_shape, h_shape, c_shape, dtypes):
        self.lease = lease        # the borrowed Execution (rnnjit.torch._pool.Lease)
        self.flat = flat          # the canonical float32 weight buffer (the parameters' views, or their copy)
        self.blocks = blocks      # rnnjit.ParamBlock of each parameter, in the layout's order
        self.lengths = lengths    # int32 sequence lengths on the CPU, or None for all T
        self.dropout_seed = dropout_seed
        self.y_shape, self.h_shape, self.c_shape = y_shape, h_shape, c_shape  # c_shape: None but LSTM
        self.dtypes = dtypes      # of y, h_n, c_n (float32, or bfloat16: rnnjit computes in float32)


def raw(t):
    """A tensor the layer checked (float32, contiguous, on the Execution's device) as the binding's
    (address, elements) pair; None stays None (the C++ API's empty span)."""
    return None if t is None else (t.data_ptr(), t.numel())


def order_after_torch(t):
    """rnnjit's CUDA executor orders its work after the legacy default stream's; work that torch
    queued on another stream (torch.cuda.stream(...)) is waited for first."""
    if t.is_cuda:
        stream = torch.cuda.current_stream(t.device)
        if stream != torch.cuda.default_stream(t.device):
            stream.synchronize()


def float32(t):
    """t as a contiguous float32 tensor (itself where it is one); None stays None."""
    if t is None or (t.dtype is torch.float32 and t.is_contiguous()):
        return t
    return t.to(torch.float32).contiguous()


def run_forward(execution, call, x, hx, cx, packed=None):
    """One forward call on `execution` with float32 contiguous x, hx and cx: returns y, hy and cy
    (None but for LSTM), float32."""
    y = x.new_empty(call.y_shape)
    hy = x.new_empty(call.h_shape)
    cy = x.new_empty(call.c_shape) if call.c_shape is not None else None
    execution._forward_raw(raw(call.flat), raw(x), raw(y), raw(hx), raw(cx), raw(hy), raw(cy), raw(call.lengths),
                           call.dropout_seed, raw(packed))
    return y, hy, cy


def cast(t, dtype):
    return t if t is None or t.dtype is dtype else t.to(dtype)


class RnnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, x, hx, cx, *weights):
        # x, hx and cx in any float dtype (bf16, or float32 under autocast); rnnjit reads float32.
        x32 = float32(x)
        y, hy, cy = run_forward(call.lease.execution, call, x32, float32(hx), float32(cx))
        ctx.call = call
        ctx.dtypes = x.dtype, None if hx is None else hx.dtype, None if cx is None else cx.dtype
        ctx.save_for_backward(x32, *weights)  # their version counters catch in-place updates before backward
        ctx.set_materialize_grads(False)      # an unused hy or cy needs no zeros: rnnjit takes "none"
        y, hy, cy = cast(y, call.dtypes[0]), cast(hy, call.dtypes[1]), cast(cy, call.dtypes[2])
        return (y, hy, cy) if cy is not None else (y, hy)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dhy, dcy=None):
        call, ctx.call = ctx.call, None
        if call is None:
            raise RuntimeError("rnnjit.torch: backward already ran through this graph and consumed its reserve; "
                               "a second backward (retain_graph=True) is not supported")
        x, *weights = ctx.saved_tensors
        needs = ctx.needs_input_grad
        x_dtype, hx_dtype, cx_dtype = ctx.dtypes
        try:
            for name, g, dtype in zip(("y", "h_n", "c_n"), (dy, dhy, dcy), call.dtypes):
                if g is not None and (g.dtype != dtype or g.device != x.device):
                    raise TypeError(f"rnnjit.torch: the gradient of {name} is {g.dtype} on {g.device}, "
                                    f"expected {dtype} on {x.device}")
            dy = torch.zeros(call.y_shape, dtype=x.dtype, device=x.device) if dy is None else float32(dy)
            dhy, dcy = float32(dhy), float32(dcy)
            dx = torch.empty_like(x)
            dhx = x.new_empty(call.h_shape) if hx_dtype is not None and needs[2] else None
            dcx = x.new_empty(call.c_shape) if cx_dtype is not None and needs[3] else None
            dw = call.flat.new_empty(call.flat.shape) if any(needs[4:]) else None
            order_after_torch(dy)
            call.lease.execution._backward_raw(raw(call.flat), raw(dy), raw(dhy), raw(dcy), raw(dx), raw(dhx),
                                               raw(dcx), raw(x), raw(dw))
            weight_grads = [None] * len(weights)
            if dw is not None:
                weight_grads = [cast(dw[b.offset:b.offset + b.size].view(w.shape), w.dtype) if need else None
                                for b, w, need in zip(call.blocks, weights, needs[4:])]
        finally:
            call.lease.release()
        return (None, cast(dx, x_dtype) if needs[1] else None, cast(dhx, hx_dtype), cast(dcx, cx_dtype), *weight_grads)
