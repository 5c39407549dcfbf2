"""torch.compile and rnnjit.torch's layers.

Dynamo refuses to trace any instance of torch.nn.LSTM, GRU or RNN (a graph break at the layer,
"Dynamo does not support RNN, GRU, or LSTM") unless torch._dynamo.config.allow_rnn is set,
which would also make it trace torch.nn's own layers through its experimental RNN support (in
torch 2.15 their compiled LSTM then fails in inductor). rnnjit.torch's layers subclass them,
but are traced to one custom operator (rnnjit.torch._ops) that needs no such support: so
Dynamo's module wrapping is given allow_rnn for rnnjit's layers only. torch.export sets
allow_rnn itself.

The patch goes on when Dynamo's module is imported (importing Dynamo costs seconds; rnnjit
does not do it for a program that never compiles). Where a later torch moves what it patches,
nothing is patched and torch.compile graph-breaks at the layers as before (the tests say so).
"""

import importlib.abc
import importlib.util
import sys

_BUILDER = "torch._dynamo.variables.builder"


def _patch(builder, layer_class):
    cls = getattr(builder, "VariableBuilder", None)
    wrap_module = getattr(cls, "wrap_module", None)
    if wrap_module is None or getattr(wrap_module, "_rnnjit", False):
        return
    from torch._dynamo import config

    def wrap_rnnjit_module(self, value):
        if isinstance(value, layer_class):
            with config.patch(allow_rnn=True):
                return wrap_module(self, value)
        return wrap_module(self, value)

    wrap_rnnjit_module._rnnjit = True
    cls.wrap_module = wrap_rnnjit_module


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds nothing itself: wraps the loader of Dynamo's builder module to patch it once run."""

    def __init__(self, layer_class):
        self.layer_class = layer_class

    def find_spec(self, name, path, target=None):
        if name != _BUILDER:
            return None
        sys.meta_path.remove(self)  # once: the other finders find the module itself
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        layer_class = self.layer_class

        class Patching(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                _patch(module, layer_class)

        spec.loader = Patching()
        return spec


def allow_rnnjit_layers(layer_class):
    """Lets Dynamo trace `layer_class`'s instances (now, or once Dynamo is imported)."""
    builder = sys.modules.get(_BUILDER)
    if builder is not None:
        _patch(builder, layer_class)
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(layer_class))
