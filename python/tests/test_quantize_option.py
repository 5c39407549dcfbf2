"""The low-level binding of int8 inference (docs/quantization.md): rnnjit.Options(quantize=...),
rnnjit.Quantize, rnnjit.int8_unit(); an int8 plan on numpy arrays against the FP32 one; bad names
and training with int8 raise."""

import numpy as np
import pytest

import rnnjit


def test_names_and_enum():
    assert rnnjit.Options().quantize == rnnjit.Quantize.none
    assert rnnjit.Options(quantize="int8").quantize == rnnjit.Quantize.int8_dynamic
    assert rnnjit.Options(quantize=rnnjit.Quantize.int8_dynamic).quantize == rnnjit.Quantize.int8_dynamic
    o = rnnjit.Options()
    o.quantize = rnnjit.Quantize.int8_dynamic
    assert o.quantize == rnnjit.Quantize.int8_dynamic
    assert rnnjit.int8_unit() in (None, "avx512_vnni", "amx", "avx_vnni", "avx2")
    for unit in ("avx512_vnni", "amx", "avx_vnni"):
        assert rnnjit.int8_activation_quantization(unit) == (127, 128)  # vpdpbusd, TDPBUSD: all 8 bits
    levels, zero_point = rnnjit.int8_activation_quantization("avx2")
    # vpmaddubsw's int16 sum of two stored activations times int8 weights must not saturate.
    assert 2 * (zero_point + levels) * 127 <= 32767 and zero_point - levels >= 0
    with pytest.raises(ValueError, match="unknown int8 unit 'vnni'"):
        rnnjit.int8_activation_quantization("vnni")
    with pytest.raises(ValueError, match="unknown quantize 'int4'"):
        rnnjit.Options(quantize="int4")
    with pytest.raises(TypeError):
        rnnjit.Options(quantize=3)


def test_training_with_int8_is_refused():
    rnn = rnnjit.Rnn(rnnjit.RnnConfig(cell="gru", input_size=8, hidden_size=16), rnnjit.Options(quantize="int8"))
    with pytest.raises(ValueError, match="inference only"):
        rnn.prepare((3, 2), "training")


def test_int8_forward_against_fp32():
    config = rnnjit.RnnConfig(cell="lstm", input_size=40, hidden_size=64, num_layers=2)
    int8 = rnnjit.Rnn(config, rnnjit.Options(quantize="int8_dynamic"))
    ex = int8.prepare((7, 3), "inference")
    if "quantize=int8_dynamic" not in ex.plan_text().splitlines()[0]:
        pytest.skip("rnnjit's plans here are not int8 (no int8 unit, or RNNJIT_ISA=avx2)")
    rng = np.random.default_rng(0)
    w = (rng.uniform(-1, 1, int8.weights_size()) / 8).astype(np.float32)
    x = rng.uniform(-1, 1, (7, 3, 40)).astype(np.float32)
    y8, y32 = np.empty((7, 3, 64), np.float32), np.empty((7, 3, 64), np.float32)
    packed = np.empty(ex.packed_weights_size(), np.uint8)
    ex.pack_weights(w, packed)
    ex.forward(w, x, y8, packed_weights=packed)
    rnnjit.Rnn(config).prepare((7, 3), "inference").forward(w, x, y32)
    # tests/test_int8_rnn.cpp's bound: 6 standard deviations of a K-term dot product whose operands
    # are rounded to half a step each (max|w| / 127, max|a| / L_a with the unit's activation
    # levels L_a), grown by sqrt(T * L).
    unit = ex.plan_text().splitlines()[0].split("int8_unit=")[1].split()[0]
    levels = rnnjit.int8_activation_quantization(unit)[0]
    product = float(np.abs(w).max()) * max(1.0, float(np.abs(x).max()), float(np.abs(y32).max()))
    bound = 6 * np.sqrt((64 + 64) / 12) * product * np.sqrt(1 / levels**2 + 1 / 127**2) * np.sqrt(7 * 2)
    err = float(np.abs(y8 - y32).max())
    assert 0 < err <= bound, f"int8 vs FP32: {err:.3g}, bound {bound:.3g}"
