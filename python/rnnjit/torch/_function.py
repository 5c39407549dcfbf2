"""The autograd Function: forward training, then backward data and backward weights.

Forward runs rnnjit's training plan, which keeps what backward needs in the Execution's
reserve; the Execution stays on the autograd context until backward has run both backward
calls on that reserve (no recomputation), then goes back to its pool.
"""

import torch
from torch.autograd.function import once_differentiable


class Call:
    """What one call hands to the Function besides its tensors."""

    __slots__ = ("lease", "flat", "blocks", "lengths", "dropout_seed", "y_shape", "h_shape", "c_shape")

    def __init__(self, lease, flat, blocks, lengths, dropout_seed, y_shape, h_shape, c_shape):
        self.lease = lease        # the borrowed Execution (rnnjit.torch._pool.Lease)
        self.flat = flat          # the canonical weight buffer the parameters are views of
        self.blocks = blocks      # rnnjit.ParamBlock of each parameter, in the layout's order
        self.lengths = lengths    # int32 sequence lengths on the CPU, or None for all T
        self.dropout_seed = dropout_seed
        self.y_shape, self.h_shape, self.c_shape = y_shape, h_shape, c_shape  # c_shape: None but LSTM


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


def run_forward(call, x, hx, cx):
    """One forward call on call.lease's Execution: returns y, hy and cy (None but for LSTM)."""
    y = x.new_empty(call.y_shape)
    hy = x.new_empty(call.h_shape)
    cy = x.new_empty(call.c_shape) if call.c_shape is not None else None
    call.lease.execution._forward_raw(raw(call.flat), raw(x), raw(y), raw(hx), raw(cx), raw(hy), raw(cy),
                                      raw(call.lengths), call.dropout_seed)
    return y, hy, cy


class RnnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, x, hx, cx, *weights):
        y, hy, cy = run_forward(call, x, hx, cx)
        ctx.call = call
        ctx.has_hx, ctx.has_cx = hx is not None, cx is not None
        ctx.save_for_backward(x, *weights)  # their version counters catch in-place updates before backward
        ctx.set_materialize_grads(False)    # an unused hy or cy needs no zeros: rnnjit takes "none"
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
        try:
            dy = torch.zeros(call.y_shape, dtype=x.dtype, device=x.device) if dy is None else dy.contiguous()
            dhy = None if dhy is None else dhy.contiguous()
            dcy = None if dcy is None else dcy.contiguous()
            dx = torch.empty_like(x)
            dhx = x.new_empty(call.h_shape) if ctx.has_hx and needs[2] else None
            dcx = x.new_empty(call.c_shape) if ctx.has_cx and needs[3] else None
            dw = call.flat.new_empty(call.flat.shape) if any(needs[4:]) else None
            for name, g in (("y", dy), ("h_n", dhy), ("c_n", dcy)):
                if g is not None and (g.dtype != x.dtype or g.device != x.device):
                    raise TypeError(f"rnnjit.torch: the gradient of {name} is {g.dtype} on {g.device}, "
                                    f"expected {x.dtype} on {x.device}")
            order_after_torch(dy)
            call.lease.execution._backward_raw(raw(call.flat), raw(dy), raw(dhy), raw(dcy), raw(dx), raw(dhx),
                                               raw(dcx), raw(x), raw(dw))
            weight_grads = [None] * len(weights)
            if dw is not None:
                weight_grads = [dw[b.offset:b.offset + b.size].view(w.shape) if need else None
                                for b, w, need in zip(call.blocks, weights, needs[4:])]
        finally:
            call.lease.release()
        return (None, dx if needs[1] else None, dhx, dcx, *weight_grads)
