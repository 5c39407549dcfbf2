"""rnnjit.torch.LSTM, GRU and RNN: torch.nn's layers with rnnjit's fused kernels inside.

Each subclasses its torch.nn twin, so construction, parameter names and initialisation,
state_dict, repr and isinstance checks are torch.nn's own; forward runs rnnjit. The parameters
are views into one canonical weight buffer (rnnjit's layout is PyTorch's state_dict order), so
a call hands rnnjit the weights without a copy; whatever replaces their storage (.to(),
load_state_dict(assign=True), a DDP broadcast) is caught before the next call and re-flattened.
"""

import functools
import operator
import warnings

import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

import rnnjit
from rnnjit.torch import _packs
from rnnjit.torch._function import Call, RnnFunction, cast, float32, order_after_torch, raw, run_forward
from rnnjit.torch._pool import ExecutionPool


def _fpmath():
    """rnnjit's fpmath for torch's float32 matmul precision: 'medium' lets torch's matmuls run
    on bf16 inputs (torch.set_float32_matmul_precision), and so rnnjit's GEMMs (where the CPU has
    a bf16 unit; elsewhere the plan stays FP32)."""
    return "bf16" if torch.get_float32_matmul_precision() == "medium" else "strict"


class FallbackWarning(UserWarning):
    """A call rnnjit cannot run (float64, float16, a device without an rnnjit backend) ran
    torch.nn's own implementation instead; warned once per module."""


class _RnnjitLayer:
    """What LSTM, GRU and RNN share; mixed in before their torch.nn base class."""

    _rnnjit_cell = None  # rnnjit's cell name, set by each class
    # True: a call rnnjit cannot run raises TypeError or ValueError instead of running torch.nn's
    # implementation with a FallbackWarning (set on a module, or on a class for all of them).
    strict = False

    # ---- the canonical weight buffer ----

    def flatten_parameters(self):
        """Makes every parameter a view into one canonical weight buffer (a no-op when they are,
        and while torch.compile, torch.export or a tracer swaps in its own tensors)."""
        if _compiling() or _tracing():
            return
        params = self._rnnjit_params()
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

    def _rnnjit_params(self):
        """The parameters in the canonical order, as they are now: from the module's parameter
        dict, which torch.func.functional_call and torch.export swap without setattr (torch.nn's
        _flat_weights list would still hold the old ones)."""
        parameters = self._parameters
        return [parameters[name] for name in self._flat_weights_names]

    def _rnnjit_weights(self):
        """The canonical buffer and the parameters (in its order), re-flattened if need be."""
        params = self._rnnjit_params()
        flat = self.__dict__.get("_rnnjit_flat")
        if flat is None or not _views_of(flat, params):
            self.flatten_parameters()
            flat = self.__dict__["_rnnjit_flat"]
        return flat, params

    def drop_packed_weights(self):
        """Forgets the weights packed for inference calls, so that the next call packs them again.
        Every change through PyTorch (an optimizer step, load_state_dict, an in-place edit under
        no_grad, .to(), a new Parameter) is noticed without it; an edit through `.data`
        (`p.data.mul_(0.9)`, as EMA and weight-clipping code does) bypasses the version
        counters that tell, so call this after one."""
        _packs.drop(self._rnnjit_params())
        self.__dict__.pop("_rnnjit_repeat", None)

    # ---- rnnjit objects ----

    def _rnnjit_config(self, batch_first, dropout):
        return rnnjit.RnnConfig(cell=self._rnnjit_cell, input_size=self.input_size, hidden_size=self.hidden_size,
                                num_layers=self.num_layers, bidirectional=self.bidirectional,
                                proj_size=getattr(self, "proj_size", 0), bias=self.bias, batch_first=batch_first,
                                dropout=dropout)

    def _rnnjit_rnn(self, key):
        """The rnnjit.Rnn of (batch_first, dropout, device, fpmath, threads), made once per module."""
        rnns = self.__dict__.setdefault("_rnnjit_rnns", {})
        rnn = rnns.get(key)
        if rnn is None:
            batch_first, dropout, device, fpmath, threads = key
            options = rnnjit.Options(device="cuda" if device.type == "cuda" else "cpu", fpmath=fpmath, threads=threads)
            rnn = rnns[key] = rnnjit.Rnn(self._rnnjit_config(batch_first, dropout), options)
        return rnn

    def _rnnjit_pool(self):
        pool = self.__dict__.get("_rnnjit_executions")
        if pool is None:
            pool = self.__dict__["_rnnjit_executions"] = ExecutionPool()
        return pool

    # ---- what runs a call ----

    def _rnnjit_dtypes(self, x, p, states):
        """The dtypes of the call's outputs (y, h_n, c_n) where rnnjit runs it (float32, or
        bfloat16: float32 arithmetic around bf16 GEMMs where y is bf16), else None: torch.nn's
        implementation runs it, which also gives torch.nn's own error for a mixture it refuses."""
        device = x.device.type
        if device == "cpu" and _autocast_cpu():
            dtypes = _autocast_result(self._torch_base, self._rnnjit_cell, x.dtype, p.dtype,
                                      getattr(self, "proj_size", 0) > 0)
            inputs_ok = True  # autocast casts inputs and states to the dtype it runs
        else:
            dtypes = (x.dtype,) * 3
            inputs_ok = p.dtype == x.dtype and all(s is None or s.dtype == x.dtype for s in states)
        if not inputs_ok:
            return None  # torch.nn raises its message
        if p.device != x.device:
            return None
        want = dtypes[0]
        if device == "cpu" and all(d in (torch.float32, torch.bfloat16) for d in dtypes):
            return dtypes
        if device == "cuda" and want is torch.float32 and x.device.index == 0:
            return dtypes  # rnnjit's CUDA executor runs on cuda:0 (CUDA_VISIBLE_DEVICES chooses the GPU)
        why = (f"rnnjit runs float32 and bfloat16 on the CPU and float32 on CUDA, not {want} on {device}")
        if self.strict:
            raise (TypeError if device in ("cpu", "cuda") else ValueError)(
                f"rnnjit.torch.{type(self).__name__}: {why} (strict)")
        if not self.__dict__.get("_rnnjit_warned"):
            self.__dict__["_rnnjit_warned"] = True
            warnings.warn(f"rnnjit.torch.{type(self).__name__}: {why}: torch.nn's implementation runs it",
                          FallbackWarning, stacklevel=4)
        return None

    def _rnnjit_forward(self, input, hx, cx):
        """Runs the layer: returns output, h_n and c_n (None but for LSTM), as torch.nn does; or
        None where torch.nn's own forward is to run the call."""
        if _compiling():
            return self._rnnjit_traced(input, hx, cx)
        repeat = self.__dict__.get("_rnnjit_repeat")
        if repeat is not None:
            out = repeat.run(self, input, hx, cx)
            if out is not None:
                return out
        if _tracing():
            return None  # torch.jit.trace and torch.onnx.export record torch.nn's operators
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        x = input.data if packed else input
        if not isinstance(x, torch.Tensor):
            return None
        params = self._rnnjit_params()
        dtypes = self._rnnjit_dtypes(x, params[0], (hx, cx))
        if dtypes is None:
            return None
        if packed:
            x, lengths = pad_packed_sequence(input)  # [T, N, I], the batch in its original order
            batch_first, batched = False, True
        else:
            lengths = None
            batch_first = self.batch_first
            if x.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {x.dim()}D instead")
            batched = x.dim() == 3
            if not batched:
                x = x.unsqueeze(0 if batch_first else 1)
        if x.size(-1) != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.size(-1)}")
        seq_len, batch = (x.size(1), x.size(0)) if batch_first else (x.size(0), x.size(1))
        if batch == 0:
            return None  # torch.nn's empty outputs
        directions = 2 if self.bidirectional else 1
        state = getattr(self, "proj_size", 0) or self.hidden_size
        h_shape = (self.num_layers * directions, batch, state)
        c_shape = (self.num_layers * directions, batch, self.hidden_size) if self._rnnjit_cell == "lstm" else None
        hx = _checked_state(hx, h_shape, batched, "hidden[0]" if c_shape else "hx")
        cx = _checked_state(cx, c_shape, batched, "hidden[1]") if c_shape else None

        dropout = self.dropout if self.training and self.num_layers > 1 else 0.0
        grad = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params) or
                                            (hx is not None and hx.requires_grad) or
                                            (cx is not None and cx.requires_grad))
        y, hy, cy = self._rnnjit_eager(x, hx, cx, lengths, batch_first, dropout, dtypes, grad, params,
                                       (seq_len, batch), h_shape, c_shape, batched)
        if packed:
            y = PackedSequence(y[_packed_rows(input)], input.batch_sizes, input.sorted_indices,
                               input.unsorted_indices)
        elif not batched:
            y, hy = y.squeeze(0 if batch_first else 1), hy.squeeze(1)
            cy = cy.squeeze(1) if cy is not None else None
        return y, hy, cy

    def _rnnjit_traced(self, input, hx, cx):
        """The call as torch.compile or torch.export trace it: the custom operator rnnjit::rnn_forward
        (rnnjit.torch._ops), which they keep whole; None (torch.nn's forward, traced) for what the
        operator does not take: PackedSequence, unbatched input, dtypes rnnjit does not run, the
        ONNX exporter (torch.nn's operators become ONNX's)."""
        if not _CUSTOM_OPS or torch.onnx.is_in_onnx_export() or not isinstance(input, torch.Tensor) or input.dim() != 3:
            return None
        from rnnjit.torch import _ops
        x = input
        params = self._rnnjit_params()
        p = params[0]
        if x.device.type == "cpu" and _autocast_cpu():
            if x.dtype not in _DTYPE_NAMES or p.dtype not in _DTYPE_NAMES:
                return None
            names = _autocast_result_name(self._rnnjit_cell, _DTYPE_NAMES[x.dtype], _DTYPE_NAMES[p.dtype],
                                          getattr(self, "proj_size", 0) > 0)
            if not names:
                return None
            dtypes = tuple(getattr(torch, name) for name in names.split(","))
        else:
            dtypes = (x.dtype,) * 3
            if p.dtype != x.dtype or any(s is not None and s.dtype != x.dtype for s in (hx, cx)):
                return None
        dtype = dtypes[0]
        if not ((x.device.type == "cpu" and all(d in (torch.float32, torch.bfloat16) for d in dtypes)) or
                (x.device.type == "cuda" and dtype == torch.float32)) or p.device != x.device:
            return None
        batch_first = self.batch_first
        batch = x.size(0) if batch_first else x.size(1)
        if x.size(-1) != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.size(-1)}")
        directions = 2 if self.bidirectional else 1
        state = getattr(self, "proj_size", 0) or self.hidden_size
        h_shape = (self.num_layers * directions, batch, state)
        c_shape = (self.num_layers * directions, batch, self.hidden_size) if self._rnnjit_cell == "lstm" else None
        hx = _checked_state(hx, h_shape, True, "hidden[0]" if c_shape else "hx")
        cx = _checked_state(cx, c_shape, True, "hidden[1]") if c_shape else None
        dropout = self.dropout if self.training and self.num_layers > 1 else 0.0
        grad = torch.is_grad_enabled() and (x.requires_grad or any(q.requires_grad for q in params) or
                                            (hx is not None and hx.requires_grad) or
                                            (cx is not None and cx.requires_grad))
        return _ops.run(self, x.contiguous(), hx, cx, None, batch_first, dropout, dtypes, grad or dropout > 0)

    def _rnnjit_eager(self, x, hx, cx, lengths, batch_first, dropout, dtypes, grad, params, shape, h_shape, c_shape,
                      batched=True):
        """The call through the module's Executions: inference on cached packed weights, or the
        training plan inside RnnFunction."""
        flat, params = self._rnnjit_weights()
        mode = "training" if grad or dropout > 0 else "inference"
        cpu = x.device.type == "cpu"
        dtype = dtypes[0]  # bf16 outputs: bf16 GEMMs
        fpmath = "bf16" if dtype is torch.bfloat16 else _fpmath()
        key = (batch_first, dropout, x.device, fpmath, torch.get_num_threads() if cpu else 0)
        rnn = self._rnnjit_rnn(key)
        directions = 2 if self.bidirectional else 1
        out_width = directions * h_shape[2]
        seq_len, batch = shape
        y_shape = (batch, seq_len, out_width) if batch_first else (seq_len, batch, out_width)
        lengths = None if lengths is None else lengths.to(torch.int32)
        pool = self._rnnjit_pool()
        if not cpu:
            order_after_torch(x)
        if mode == "inference":
            execution_key = (key, seq_len, batch, mode)
            execution = pool.take(execution_key, rnn, shape, mode)
            try:
                packed = None
                if cpu:
                    flat32, packed = _packs.inference_weights(params, flat, execution)
                else:
                    flat32 = float32(flat)
                call = Call(None, flat32, None, lengths, 0, y_shape, h_shape, c_shape, dtypes)
                y, hy, cy = run_forward(execution, call, float32(x.detach()), float32(_detached(hx)),
                                        float32(_detached(cx)), packed)
                if cpu and lengths is None and dtypes == (torch.float32,) * 3:
                    # Calls like this one (a stream of T=1 steps) skip the checks above.
                    # The previous one's Execution goes back to the pool: calls of two shapes in turn
                    # (chunks and single steps) borrow rather than prepare.
                    previous = self.__dict__.get("_rnnjit_repeat")
                    self.__dict__["_rnnjit_repeat"] = _Repeat(self, execution_key, execution, call, packed, params,
                                                              x, hx, cx, key[4], batched)
                    execution = None  # the _Repeat's own now
                    if previous is not None:
                        previous.execution._bind(None, None)
                        pool._give_back(previous.key, previous.execution)
            finally:
                if execution is not None:
                    pool._give_back(execution_key, execution)
            y, hy, cy = cast(y, dtypes[0]), cast(hy, dtypes[1]), cast(cy, dtypes[2])
            return y, hy, cy
        lease = pool.acquire((key, seq_len, batch, mode), rnn, shape, mode)
        seed = int(torch.randint(0, 2**62, (1,)).item()) if dropout > 0 else 0
        call = Call(lease, float32(flat), rnn.weight_layout, lengths, seed, y_shape, h_shape, c_shape, dtypes)
        if grad:
            y, hy, *cy = RnnFunction.apply(call, x.contiguous(), hx, cx, *params)
            return y, hy, (cy[0] if cy else None)
        with torch.no_grad():  # dropout without gradients: the training plan, its reserve unused
            y, hy, *cy = RnnFunction.apply(call, x.contiguous(), hx, cx, *params)
        lease.release()
        return y, hy, (cy[0] if cy else None)

    def _apply(self, *args, **kwargs):
        # Moving or converting the module makes new parameter tensors: flatten them again, and
        # forget Executions and configurations made for the old device.
        self.__dict__.pop("_rnnjit_executions", None)
        self.__dict__.pop("_rnnjit_rnns", None)
        self.__dict__.pop("_rnnjit_repeat", None)
        return super()._apply(*args, **kwargs)

    def __getstate__(self):
        # copy.deepcopy and pickle: rnnjit's objects (Executions, Rnns, the canonical buffer) are
        # made again by the copy's first call.
        state = dict(super().__getstate__())  # torch.nn's drops its weak references
        for name in [n for n in state if n.startswith("_rnnjit_")]:
            del state[name]
        return state


class _Repeat:
    """The last inference call of a module on the CPU (float32, 3-D input, no lengths), kept with
    its Execution and packed weights: a call that repeats it - the same input and state shapes,
    no gradient, the same parameters, versions and data pointers, the same matmul precision,
    thread count and train/eval mode, no autocast, tracing or compiling - goes straight to
    rnnjit. Streaming calls (T=1, N=1: a few microseconds of work) are all such calls, and the
    general path's checks cost several times the step."""

    __slots__ = ("key", "execution", "call", "packed", "params", "stamp", "batched", "x_shape", "hx_shape", "cx_shape",
                 "training", "batch_first", "precision", "threads")

    def __init__(self, module, key, execution, call, packed, params, x, hx, cx, threads, batched):
        self.key, self.execution, self.call, self.packed = key, execution, call, packed
        self.params = tuple(params)
        self.stamp = [(p._version, p.data_ptr()) for p in params]
        # The shapes as the caller gives them: unbatched input and states without their batch of 1.
        self.batched = batched
        self.x_shape = x.shape if batched else x.squeeze(0 if module.batch_first else 1).shape
        self.hx_shape = None if hx is None else hx.shape if batched else hx.squeeze(1).shape
        self.cx_shape = None if cx is None else cx.shape if batched else cx.squeeze(1).shape
        self.training, self.batch_first = module.training, module.batch_first
        self.precision, self.threads = torch.get_float32_matmul_precision(), threads  # fpmath from the precision
        # The Execution is this _Repeat's alone until it goes back to the pool (unbound there).
        execution._bind((call.flat.data_ptr(), call.flat.numel()),
                        None if packed is None else (packed.data_ptr(), packed.numel()))

    def run(self, module, x, hx, cx):
        """y, hy, cy of the call, or None where it is not a repeat (the general path runs it)."""
        if _is_tracing():  # (the caller checked _compiling())
            return None
        if (x.__class__ is not torch.Tensor or x.shape != self.x_shape or x.dtype is not torch.float32 or
                not x.is_cpu or not x.is_contiguous() or module.training is not self.training or
                module.batch_first is not self.batch_first or
                not _state_repeats(hx, self.hx_shape) or not _state_repeats(cx, self.cx_shape)):
            return None
        parameters = module._parameters
        params = [parameters[name] for name in module._flat_weights_names]
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params) or
                                        (hx is not None and hx.requires_grad) or (cx is not None and cx.requires_grad)):
            return None
        if not all(map(operator.is_, params, self.params)) or [(p._version, p.data_ptr()) for p in params] != self.stamp:
            return None
        if (_autocast_cpu() or torch.get_num_threads() != self.threads or
                torch.get_float32_matmul_precision() != self.precision):
            return None
        call = self.call
        y = torch.empty(call.y_shape)
        hy = torch.empty(call.h_shape)
        cy = None if call.c_shape is None else torch.empty(call.c_shape)
        self.execution._forward_bound(x.data_ptr(), y.data_ptr(), 0 if hx is None else hx.data_ptr(),
                                      0 if cx is None else cx.data_ptr(), hy.data_ptr(), 0 if cy is None else cy.data_ptr())
        if not self.batched:
            return y.squeeze(0 if self.batch_first else 1), hy.squeeze(1), None if cy is None else cy.squeeze(1)
        return y, hy, cy


def _state_repeats(h, shape):
    if h is None:
        return shape is None
    return (h.shape == shape and h.__class__ is torch.Tensor and h.dtype is torch.float32 and h.is_cpu and
            h.is_contiguous())


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


def _checked_state(h, shape, batched, label):
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
    return h.contiguous()


# torch.library.custom_op, register_fake and register_autograd: PyTorch >= 2.4.
_CUSTOM_OPS = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")


def _tracing():
    """torch.jit.trace or torch.onnx.export (either exporter) is recording the call."""
    return torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()


def _compiling():
    """torch.compile or torch.export is tracing the call (PyTorch 2.x): the custom operators run it."""
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling()


try:
    torch.is_autocast_enabled("cpu")  # PyTorch >= 2.4
    _autocast_cpu = functools.partial(torch.is_autocast_enabled, "cpu")
except TypeError:
    _autocast_cpu = torch.is_autocast_cpu_enabled
_is_tracing = torch._C._is_tracing if hasattr(torch._C, "_is_tracing") else torch.jit.is_tracing


# (torch.nn class, cell, autocast dtype, input dtype, parameter dtype) -> the dtype of torch.nn's output.
_AUTOCAST_RESULTS = {}


def _autocast_result(base, cell, x_dtype, p_dtype, projection):
    """The dtypes of (y, h_n, c_n) torch.nn's layer returns under the CPU autocast now in force:
    what its operator is listed as differs by cell, version and even output (torch 2.15: LSTM
    and RNN bf16, GRU float32; an LSTM with projection bf16 y and h_n but float32 c_n), so it
    is asked once, of a layer of one or two units."""
    try:
        autocast_dtype = torch.get_autocast_dtype("cpu")  # PyTorch >= 2.4
    except AttributeError:
        autocast_dtype = torch.get_autocast_cpu_dtype()
    key = (base, cell, autocast_dtype, x_dtype, p_dtype, projection)
    result = _AUTOCAST_RESULTS.get(key)
    if result is None:
        kwargs = {"nonlinearity": "relu"} if cell == "rnn_relu" else {"proj_size": 1} if projection else {}
        with torch.no_grad():
            probe = base(1, 2, **kwargs).to(p_dtype)
            x = torch.zeros(1, 1, 1, dtype=x_dtype)
            try:
                y, h = probe(x)
            except RuntimeError:
                # oneDNN (torch.nn's CPU LSTM) has no bf16 LSTM on CPUs without AVX-512 and
                # raises; torch's own kernel runs it, and autocast decides the dtypes before
                # either does, so they are the same.
                with torch.backends.mkldnn.flags(enabled=False):
                    y, h = probe(x)
            h, c = h if isinstance(h, tuple) else (h, h)
            result = _AUTOCAST_RESULTS[key] = (y.dtype, h.dtype, c.dtype)
    return result


_BASES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN, "rnn_relu": torch.nn.RNN}
_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
                torch.float64: "float64"}


def _autocast_result_name(cell, x_dtype, p_dtype, projection):
    """_autocast_result by names ("bfloat16,bfloat16,float32"; "" for a dtype without a name
    here), for torch.compile: Dynamo runs it as it traces and keeps the answer as a constant (it
    cannot trace the probe layer's call)."""
    result = _autocast_result(_BASES[cell], cell, getattr(torch, x_dtype), getattr(torch, p_dtype), projection)
    if any(d not in _DTYPE_NAMES for d in result):
        return ""
    return ",".join(_DTYPE_NAMES[d] for d in result)


if hasattr(torch, "compiler") and hasattr(torch.compiler, "assume_constant_result"):
    _autocast_result_name = torch.compiler.assume_constant_result(_autocast_result_name)


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
    _torch_base = torch.nn.LSTM

    def forward(self, input, hx=None):
        h0, c0 = (None, None) if hx is None else hx
        out = self._rnnjit_forward(input, h0, c0)
        if out is None:
            return super().forward(input, hx)
        y, hy, cy = out
        return y, (hy, cy)


class GRU(_RnnjitLayer, torch.nn.GRU):
    """torch.nn.GRU (linear before reset, as PyTorch's) run by rnnjit."""

    _rnnjit_cell = "gru"
    _torch_base = torch.nn.GRU

    def forward(self, input, hx=None):
        out = self._rnnjit_forward(input, hx, None)
        return super().forward(input, hx) if out is None else out[:2]


class RNN(_RnnjitLayer, torch.nn.RNN):
    """torch.nn.RNN (nonlinearity "tanh" or "relu") run by rnnjit."""

    _torch_base = torch.nn.RNN

    @property
    def _rnnjit_cell(self):
        return "rnn_tanh" if self.nonlinearity == "tanh" else "rnn_relu"

    def forward(self, input, hx=None):
        out = self._rnnjit_forward(input, hx, None)
        return super().forward(input, hx) if out is None else out[:2]


if _CUSTOM_OPS:
    from rnnjit.torch._compile import allow_rnnjit_layers

    allow_rnnjit_layers(_RnnjitLayer)
