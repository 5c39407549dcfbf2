"""convert(): swap the torch.nn RNN layers of a model for rnnjit's, in place."""

import torch

from rnnjit.torch.modules import GRU, LSTM, RNN

_TWINS = {torch.nn.LSTM: LSTM, torch.nn.GRU: GRU, torch.nn.RNN: RNN}


def _twin_of(layer):
    """The rnnjit layer equal to a torch.nn one: same arguments, parameters, device and mode."""
    cls = _TWINS[type(layer)]
    kwargs = dict(input_size=layer.input_size, hidden_size=layer.hidden_size, num_layers=layer.num_layers,
                  bias=layer.bias, batch_first=layer.batch_first, dropout=layer.dropout,
                  bidirectional=layer.bidirectional)
    if cls is LSTM and layer.proj_size > 0:
        kwargs["proj_size"] = layer.proj_size
    if cls is RNN:
        kwargs["nonlinearity"] = layer.nonlinearity
    first = next(layer.parameters())
    twin = cls(**kwargs, device=first.device, dtype=first.dtype)
    twin.load_state_dict(layer.state_dict())
    for name, p in layer.named_parameters():
        getattr(twin, name).requires_grad_(p.requires_grad)
    twin.train(layer.training)
    return twin


def convert(module):
    """Replaces every torch.nn.LSTM, GRU and RNN inside `module` by its rnnjit.torch twin, with the
    same parameter values (copied), and returns the module; where `module` itself is one of them,
    returns its twin (as torch.nn.SyncBatchNorm.convert_sync_batchnorm does). Subclasses of the
    torch.nn layers are left alone: their forward may differ."""
    if type(module) in _TWINS:
        return _twin_of(module)
    for name, child in module.named_children():
        converted = convert(child)
        if converted is not child:
            setattr(module, name, converted)
    return module
