#!/usr/bin/env python3
"""PyTorch's nn.RNN / nn.LSTM / nn.GRU on cases written by tests/test_reference_features.cpp.

Usage: torch_compare.py CASE_DIR [CASE_DIR ...]

Each CASE_DIR holds
  config.json  {"cell": "lstm"|"gru"|"rnn_tanh"|"rnn_relu", "input_size", "hidden_size",
                "num_layers", "bidirectional", "proj_size", "batch_first", "seq_len", "batch",
                "blocks": [{"name", "offset", "size", "shape"}, ...]}   (the canonical layout)
  w.npy    [total]            the canonical flat parameter buffer (float32)
  x.npy    [T, N, I] or [N, T, I] with batch_first
  h0.npy   [L*D, N, S]        c0.npy [L*D, N, H] (LSTM only)
  ry.npy, rhy.npy, rcy.npy    weights of the loss sum(ry*y) + sum(rhy*hy) + sum(rcy*cy)
  lengths.npy [N] int32       optional: the sequences are packed (pack_padded_sequence,
                              enforce_sorted=False) and y is padded back with zeros
and receives y.npy, hy.npy, cy.npy (LSTM), dx.npy, dh0.npy, dc0.npy (LSTM), dw.npy (the
gradient of the loss in the canonical layout), all float32; the math runs in float64.

The .npy files are read and written here without numpy (float32 and int32, little-endian,
C order, format version 1.0-3.0), so that torch alone is enough.
"""
import ast
import json
import os
import struct
import sys
from array import array

import torch

_DTYPES = {"<f4": ("f", torch.float64), "<i4": ("i", torch.int64)}


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", data[8:12])
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["descr"] not in _DTYPES or header["fortran_order"]:
        raise ValueError(f"{path}: unsupported array {header}")
    code, dtype = _DTYPES[header["descr"]]
    values = array(code)
    if values.itemsize != 4:
        raise ValueError(f"{path}: array('{code}') is not 4 bytes wide here")
    values.frombytes(data[start + hlen:])
    if sys.byteorder != "little":
        values.byteswap()
    shape = tuple(header["shape"])
    count = 1
    for d in shape:
        count *= d
    if len(values) != count:
        raise ValueError(f"{path}: {len(values)} elements for shape {shape}")
    return torch.tensor(values.tolist(), dtype=dtype).reshape(shape)


def write_npy(path, tensor):
    t = tensor.detach().to(torch.float64).contiguous()
    shape = tuple(t.shape)
    if len(shape) == 1:
        shape_text = f"({shape[0]},)"
    else:
        shape_text = "(" + ", ".join(str(d) for d in shape) + ")"
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"  # data starts 64-byte aligned
    values = array("f", t.reshape(-1).tolist())
    if sys.byteorder != "little":
        values.byteswap()
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(values.tobytes())


def make_module(cfg):
    kwargs = dict(input_size=cfg["input_size"], hidden_size=cfg["hidden_size"], num_layers=cfg["num_layers"],
                  bidirectional=cfg["bidirectional"], batch_first=cfg["batch_first"], bias=True,
                  dtype=torch.float64)
    cell = cfg["cell"]
    if cell == "lstm":
        return torch.nn.LSTM(proj_size=cfg["proj_size"], **kwargs)
    if cell == "gru":
        return torch.nn.GRU(**kwargs)
    if cell in ("rnn_tanh", "rnn_relu"):
        return torch.nn.RNN(nonlinearity=cell[4:], **kwargs)
    raise ValueError(f"unknown cell {cell}")


def run_case(case_dir):
    def path(name):
        return os.path.join(case_dir, name)

    with open(path("config.json")) as f:
        cfg = json.load(f)
    lstm = cfg["cell"] == "lstm"
    T, N = cfg["seq_len"], cfg["batch"]
    mod = make_module(cfg)

    w = read_npy(path("w.npy"))
    params = dict(mod.named_parameters())
    names = [b["name"] for b in cfg["blocks"]]
    if sorted(names) != sorted(params):
        raise ValueError(f"{case_dir}: blocks {names} do not match torch's parameters {sorted(params)}")
    with torch.no_grad():
        for b in cfg["blocks"]:
            p = params[b["name"]]
            if list(p.shape) != list(b["shape"]):
                raise ValueError(f"{case_dir}: {b['name']} has shape {list(p.shape)} in torch, {b['shape']} here")
            p.copy_(w[b["offset"]:b["offset"] + b["size"]].reshape(p.shape))

    x = read_npy(path("x.npy")).requires_grad_(True)
    h0 = read_npy(path("h0.npy")).requires_grad_(True)
    c0 = read_npy(path("c0.npy")).requires_grad_(True) if lstm else None
    state = (h0, c0) if lstm else h0

    if os.path.exists(path("lengths.npy")):
        lengths = read_npy(path("lengths.npy")).to(torch.int64)
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=cfg["batch_first"],
                                                         enforce_sorted=False)
        out, final = mod(packed, state)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=cfg["batch_first"], total_length=T)
    else:
        y, final = mod(x, state)
    hy, cy = final if lstm else (final, None)

    loss = (y * read_npy(path("ry.npy"))).sum() + (hy * read_npy(path("rhy.npy"))).sum()
    if lstm:
        loss = loss + (cy * read_npy(path("rcy.npy"))).sum()
    loss.backward()

    write_npy(path("y.npy"), y)
    write_npy(path("hy.npy"), hy)
    write_npy(path("dx.npy"), x.grad)
    write_npy(path("dh0.npy"), h0.grad)
    if lstm:
        write_npy(path("cy.npy"), cy)
        write_npy(path("dc0.npy"), c0.grad)
    dw = torch.zeros(sum(b["size"] for b in cfg["blocks"]), dtype=torch.float64)
    for b in cfg["blocks"]:
        g = params[b["name"]].grad
        if g is not None:
            dw[b["offset"]:b["offset"] + b["size"]] = g.reshape(-1)
    write_npy(path("dw.npy"), dw)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    for case_dir in argv[1:]:
        run_case(case_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
