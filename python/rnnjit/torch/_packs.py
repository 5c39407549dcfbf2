"""Packed weights kept between inference calls, never served stale.

An inference call hands rnnjit weights already packed into its GEMMs' layout (cuDNN's "weight
space"); packing is a pass over every weight (26 MB for a 2-layer LSTM of 640), many times the
work of a T=1 step. The packs of a set of parameters are kept here, keyed by the first
parameter tensor (weakly: they go with it, so a copied or moved module never shares them) and
by the packed layout (Executions of several shapes often share one), beside a stamp of what
they were packed from:

  - each parameter tensor itself (a parameter assigned anew, load_state_dict(assign=True), .to()),
  - its data pointer (`p.data = other`, storage swapped by .to() in place),
  - its version counter, which every in-place change through autograd's view of the tensor
    bumps (an optimizer step, load_state_dict's copy_, `p.mul_(0.5)` under no_grad),
  - dtype and device (a new data pointer as well, checked anyway).

Edits through `p.data` (`p.data.mul_(0.5)`) reach the storage without bumping p's version
counter: code that edits weights that way (EMA, weight clipping) calls
`module.drop_packed_weights()` (drop(params) here) after the edit.
"""

import weakref

import torch

# id(first parameter) -> (a weak reference to it, {(rnn key, layout fingerprint): Packs}); the
# entry goes when the parameter does. Not a WeakKeyDictionary: it compares colliding keys with
# ==, which tensors answer elementwise.
_PACKS = {}


class Packs:
    __slots__ = ("stamp", "flat32", "packed")

    def __init__(self, stamp, flat32, packed):
        self.stamp = stamp
        self.flat32 = flat32  # the float32 canonical buffer packed from (a copy for bf16 parameters)
        self.packed = packed  # uint8 tensor, or None where the plan packs nothing


def stamp_of(params):
    """What the packs of `params` must have been made from, as a tuple that compares cheaply:
    versions and data pointers; the tensors themselves are compared by identity beside it."""
    return tuple([p._version for p in params]), tuple([p.data_ptr() for p in params])


def inference_weights(params, flat, execution):
    """(float32 canonical weights, packed weights or None) of `params` for `execution`, packed
    now if the parameters changed since they were packed for the same layout. `flat` is the
    canonical buffer the parameters are views of (any float dtype)."""
    fingerprint = execution._packed_layout()
    if fingerprint == 0 and flat.dtype is torch.float32:
        return flat, None
    first = params[0]
    entry = _PACKS.get(id(first))
    stamp = stamp_of(params)
    if entry is not None and entry[0]() is first:
        by_layout = entry[1]
        packs = by_layout.get(fingerprint)
        if packs is not None and packs.stamp[0] == stamp and all(r() is p for r, p in zip(packs.stamp[1], params)):
            return packs.flat32, packs.packed
        for stale in [k for k, v in by_layout.items() if v.stamp[0] != stamp]:
            del by_layout[stale]  # packed from parameters as they were before: never used again
    else:
        by_layout = {}
        _PACKS[id(first)] = (weakref.ref(first, _forget(id(first))), by_layout)
    flat32 = flat if flat.dtype is torch.float32 else flat.to(torch.float32)
    packed = None
    if fingerprint != 0:
        packed = torch.empty(execution.packed_weights_size(), dtype=torch.uint8, device=flat.device)
        execution._pack_raw((flat32.data_ptr(), flat32.numel()), (packed.data_ptr(), packed.numel()))
    by_layout[fingerprint] = Packs((stamp, tuple(weakref.ref(p) for p in params)), flat32, packed)
    return flat32, packed


def _forget(key):
    def callback(ref):
        entry = _PACKS.get(key)
        if entry is not None and entry[0] is ref:
            del _PACKS[key]
    return callback


def drop(params):
    """Forgets the packs made from `params` (after edits through .data, which no version
    counter sees); the next inference call packs again."""
    if params:
        entry = _PACKS.get(id(params[0]))
        if entry is not None and entry[0]() is params[0]:
            del _PACKS[id(params[0])]
