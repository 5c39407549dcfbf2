#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (committed; rerun after
changing how a target reads its input). No numpy needed: .npy files are built byte by byte the way
numpy.save writes them, and fuzz_config's seeds are encoded the way LLVM's FuzzedDataProvider
consumes them (integers from the end of the input, most significant byte first)."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_npy ----

def npy(header, data=b"", major=1, pad=True):
    header = header.encode("latin-1") if isinstance(header, str) else header
    if pad:
        pre = 10 if major == 1 else 12
        total = (pre + len(header) + 1 + 63) // 64 * 64
        header = header + b" " * (total - pre - len(header) - 1) + b"\n"
    length = struct.pack("<H", len(header)) if major == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + length + header + data


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def dict_header(descr, shape, order="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, order, shape)


write("fuzz_npy", "f32_2x3.npy", npy(dict_header("<f4", "(2, 3)"), f32(1, 2, 3, 4, 5, 6)))
write("fuzz_npy", "i32_scalar.npy", npy(dict_header("<i4", "()"), struct.pack("<i", -7)))
write("fuzz_npy", "i64_vector.npy", npy(dict_header("<i8", "(3,)"), struct.pack("<3q", 1, -1, 2**62)))
write("fuzz_npy", "f32_empty.npy", npy(dict_header("<f4", "(0, 3)")))
write("fuzz_npy", "v2_f32.npy", npy(dict_header("<f4", "(2,)"), f32(0.5, -0.5), major=2))
write("fuzz_npy", "v3_double_quotes_longs.npy",
      npy('{"descr": "<f4", "fortran_order": False, "shape": (1L, 2L)}', f32(1, 2), major=3))
write("fuzz_npy", "bad_truncated_data.npy", npy(dict_header("<f4", "(2, 3)"), f32(1, 2, 3, 4, 5)))
write("fuzz_npy", "bad_magic.npy", b"\x93NUMPZ\x01\x00\x10\x00{}")
write("fuzz_npy", "bad_fortran.npy", npy(dict_header("<f4", "(2, 2)", "True"), f32(1, 2, 3, 4)))
write("fuzz_npy", "bad_dtype_f8.npy", npy(dict_header("<f8", "(1,)"), b"\0" * 8))
write("fuzz_npy", "bad_negative_dim.npy", npy(dict_header("<f4", "(-1, 3)"), f32(1)))
write("fuzz_npy", "bad_header_length.npy", b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{}")
write("fuzz_npy", "bad_trailing_garbage.npy", npy(dict_header("<f4", "(2,)"), f32(1, 2) + b"xyz"))
write("fuzz_npy", "bad_overflowing_shape.npy", npy(dict_header("<f4", "(4294967296, 4294967296)"), f32(1)))

# ---- fuzz_config ----


class Provider:
    """Inverse of FuzzedDataProvider for the calls fuzz_config.cpp makes, in the same order."""

    def __init__(self):
        self.consumed = []  # bytes in the order the provider reads them

    def integral_in_range(self, lo, hi, value, width_bytes):
        rng = hi - lo
        offset, nbytes = 0, 0
        while offset < width_bytes * 8 and (rng >> offset) > 0:
            nbytes += 1
            offset += 8
        raw = (value - lo) % (1 << (8 * nbytes)) if nbytes else 0
        self.consumed += list(raw.to_bytes(nbytes, "big"))

    def boolean(self, b):
        self.consumed.append(1 if b else 0)

    def data(self):
        return bytes(reversed(self.consumed))


EDGES = [0, 1, 2, -1, -2, 15, 16, 17, 63, 64, 65, 1023, 1024, 1025, 2047, 2048, 2**31 - 1, 2**31, 2**32,
         2**34 - 1, 2**34, 2**34 + 1, 2**40, 2**62, 2**63 - 1, -2**63, -2**31, 3037000499, 3037000500, 131072,
         46341, 65536]
ISAS = ["reference", "avx2", "avx512", "detect", "cuda"]


def config_seed(name, regime, cell, I, H, L, bi, T, N, training, isa, threads):
    p = Provider()
    p.integral_in_range(0, 3, regime, 4)
    if regime <= 1:
        p.integral_in_range(0, 3, cell, 4)
    else:
        p.integral_in_range(0, 255, cell, 1)

    def size(v, small_max):
        if regime == 2:
            if v in EDGES:
                p.integral_in_range(0, len(EDGES), EDGES.index(v), 8)
            else:
                p.integral_in_range(0, len(EDGES), len(EDGES), 8)
                p.integral_in_range(1, small_max, v, 8)
        elif regime == 3:
            p.integral_in_range(-2**63, 2**63 - 1, v, 8)
        else:
            p.integral_in_range(1, small_max, v, 8)

    size(I, 48)
    size(H, 48)
    size(L, 4)
    p.boolean(bi)
    size(T, 12)
    size(N, 12)
    p.boolean(training)
    p.integral_in_range(0, 4, ISAS.index(isa), 4)
    p.integral_in_range(-2, 260, threads, 4)
    write("fuzz_config", name, p.data())


config_seed("small_lstm_bidir_train_avx512", 0, 2, 5, 7, 2, True, 4, 3, True, "avx512", 2)
config_seed("small_gru_infer_reference", 1, 3, 16, 17, 1, False, 12, 1, False, "reference", 1)
config_seed("small_relu_train_avx2", 0, 0, 1, 1, 3, True, 1, 12, True, "avx2", 8)
config_seed("bad_isa_detect_threads_0", 0, 1, 3, 3, 1, False, 2, 2, False, "detect", 0)
config_seed("edge_hidden_int32_max", 2, 2, 16, 2**31 - 1, 1, False, 4, 4, True, "avx512", 1)
config_seed("edge_negative_input", 2, 3, -1, 16, 1, True, 1, 1, False, "avx512", 1)
config_seed("edge_reserve_overflow", 2, 2, 4, 1024, 1024, False, 65536, 1, True, "avx512", 2)
config_seed("raw_int64_min", 3, 1, -2**63, -2**63, -2**63, False, -2**63, -2**63, False, "avx512", 1)
config_seed("raw_int64_max", 3, 0, 2**63 - 1, 2**63 - 1, 2**63 - 1, True, 2**63 - 1, 2**63 - 1, True, "avx512",
            256)
config_seed("small_lstm_train_cuda", 0, 2, 33, 17, 2, True, 3, 5, True, "cuda", 1)
config_seed("bad_cell_200", 2, 200, 16, 16, 1, False, 2, 2, False, "avx512", 1)

# ---- fuzz_cli: arguments separated by newlines ----


def cli(name, *args):
    write("fuzz_cli", name, "\n".join(args).encode())


cli("plan_gru_train_json", "plan", "--cell", "gru", "--input-size", "5", "--hidden-size", "3", "--layers", "2",
    "--bidirectional", "--seq", "4", "--batch", "2", "--mode", "train", "--json")
cli("plan_defaults_isa_avx2", "plan", "--isa", "avx2")
cli("dump_lstm_hex", "dump", "--cell", "lstm", "--input-size", "8", "--hidden-size", "16", "--seq", "2", "--batch",
    "2", "--format", "hex")
cli("dump_kernel_bin", "dump", "--cell", "rnn_tanh", "--input-size", "4", "--hidden-size", "4", "--seq", "1",
    "--batch", "1", "--format", "bin", "--kernel", "nosuch")
cli("dump_cuda_ptx", "dump", "--target", "cuda", "--format", "ptx", "--input-size", "4", "--hidden-size", "4",
    "--seq", "1", "--batch", "1")
cli("run_parse_only", "run", "--cell", "gru", "--input-size", "5", "--hidden-size", "3", "--params", "p", "--x",
    "x.npy", "--out", "o", "--backend", "jit")
cli("bench_bad_reps_compare", "bench", "--reps", "0", "--compare", "baseline,foo", "--input-size", "4")
cli("demo_huge_layers", "demo", "--layers", "100000")
cli("plan_bad_isa", "plan", "--isa", "foo")
cli("unknown_flag_first", "--frob", "plan")
cli("plan_overflowing_size", "plan", "--hidden-size", "99999999999999999999")
cli("plan_negative_layers", "plan", "--layers", "-1", "--bidirectional=false", "--mode", "inference")
cli("dump_cuda_cu", "dump", "--target", "cuda", "--format", "cu", "--cell", "gru", "--input-size", "4",
    "--hidden-size", "20", "--seq", "2", "--batch", "3", "--mode", "train")
cli("dump_cuda_bad_arch", "dump", "--target", "cuda", "--format", "ptx", "--arch", "compute_90", "--input-size", "4",
    "--hidden-size", "4", "--seq", "1", "--batch", "1")
cli("help", "run", "--help")
