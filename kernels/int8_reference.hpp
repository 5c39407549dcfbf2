// rnnjit: the scalar twin of Quantize::int8_dynamic: how weights and activations are quantized
// (the executor packs weights with these very functions and quantizes activations in AVX-512
// that must match them bit for bit), how a packed int8 panel is laid out
// (codegen/int8_layout.hpp), and the int8 GEMM kernel's twin (same KernelDesc, same
// Int8GemmArgs). The RNN reference (kernels/reference.hpp, CallOptions::quantize) multiplies
// through quantized_matvec, which quantizes exactly as the GEMMs do.
//
// Quantization, symmetric with L levels each side: a row's scale is max|row| / L and a value is
// q = round_to_nearest_even(v * (L / max|row|)) clamped to [-L, L] (a row of zeros: scale 0,
// every q 0). Weights have L = 127 and are stored as int8 q; activations have the unit's levels
// and zero point (codegen/int8_unit.hpp: 127 and 128, or the avx2 unit's 7 bits, 63 and 64) and
// are stored as uint8 q + zero point. The float product v * (L / max) is computed as written (no
// fused operation), so every twin agrees; a NaN or a value whose product overflows int32
// quantizes to -L, as vcvtps2dq's "integer indefinite" clamped does.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/int8_layout.hpp"
#include "codegen/int8_unit.hpp"
#include "codegen/kernel_args.hpp"
#include "codegen/kernel_desc.hpp"

namespace rnnjit::int8 {

// A row's scale (max / levels) and the factor that quantizes it (levels / max, 0 where max is 0).
struct RowScale {
  float scale = 0.0f, inv = 0.0f;
};
RowScale row_scale(float max_abs, std::int32_t levels = kWeightLevels);
float max_abs(const float* v, std::int64_t n);
// round(v * inv) clamped to [-levels, levels].
std::int32_t quantize(float v, float inv, std::int32_t levels = kWeightLevels);

// One activation row of k values into dst[0:k_pad] as uint8 q + aq.zero_point (zero_point past
// k); returns its scale.
float quantize_activation_row(const float* x, std::int64_t k, std::int64_t k_pad, std::uint8_t* dst,
                              ActivationQuantization aq);

// One panel of W^T for the int8 GEMM: the `width` rows of W from w (k floats each, ld apart)
// are the panel's first columns; n_r column tiles; layout, compensations (activation_zero_point
// x column sum) and scales as codegen/int8_layout.hpp says. `panel` holds
// int8_panel_bytes(n_r, k) bytes.
void pack_panel(std::int8_t* panel, const float* w, std::int64_t ld, std::int64_t k, std::int64_t width,
                std::int64_t n_r, std::int32_t activation_zero_point);

// The twin of the generated vnni_gemm kernel (every unit: the sums of vpmaddubsw and vpmaddwd are
// exact on the avx2 unit's 7-bit activations): the same sums (exact in int32) and the same
// dequantization, float(sum - compensation) * scale_w * scale_a, then + C where beta.
void vnni_gemm_reference(const KernelDesc& desc, const Int8GemmArgs& args);

// A weight matrix [rows, cols] quantized per row, for the RNN reference.
struct QuantizedMatrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int8_t> q;  // [rows, cols]
  std::vector<float> scale;    // [rows]
};
QuantizedMatrix quantize_matrix(const float* w, std::int64_t rows, std::int64_t cols);
// y[j] = the dequantized int8 product of row row0 + j of w with x quantized as an activation row
// with aq's levels (x's cols values), for j < rows: what the int8 GEMM computes for one row of A.
void quantized_matvec(const QuantizedMatrix& w, std::int64_t row0, std::int64_t rows, const float* x, float* y,
                      ActivationQuantization aq);

}  // namespace rnnjit::int8
