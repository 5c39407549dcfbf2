// rnnjit: what each int8 unit (Int8Unit) asks of Quantize::int8_dynamic, in one place, for the
// packer and the quantizers (runtime/executor_int8.cpp), the scalar reference
// (kernels/int8_reference.hpp), the planner and the emitter (codegen/x64/vnni_gemm_emitter.hpp).
//
// Activations are stored as uint8 q + zero_point with q in [-levels, levels]; weights are int8
// in [-127, 127] on every unit (so ONNX Runtime's int8 weights for DynamicQuantizeLSTM run
// unchanged). vpdpbusd (AVX512-VNNI, AVX-VNNI) and TDPBUSD sum uint8 x int8 products in int32
// without saturating, so their activations take all 8 bits: levels 127, zero point 128. The
// avx2 unit has no such instruction: vpmaddubsw adds two uint8 x int8 products into an int16
// that SATURATES at 32767, and 2 x 255 x 127 = 64770 would; with activations of 7 bits (levels
// 63, zero point 64, stored 1..127) a pair sums to at most 2 x 127 x 127 = 32258, so it is exact
// (oneDNN and ONNX Runtime keep the weights to 7 bits instead; here the weights keep theirs).
// The compensation of a packed column is zero_point x the column's sum, so packed weights are
// the unit's own.
#pragma once

#include <cstdint>

#include "rnnjit/rnn.hpp"

namespace rnnjit {

struct ActivationQuantization {
  std::int32_t levels = 127;      // q = round(x * levels / max|row|), clamped to [-levels, levels]
  std::int32_t zero_point = 128;  // stored as uint8 q + zero_point (zero_point past K: zero in value)
  std::int32_t max_stored() const { return zero_point + levels; }
};

constexpr ActivationQuantization activation_quantization(Int8Unit unit) {
  return unit == Int8Unit::avx2 ? ActivationQuantization{63, 64} : ActivationQuantization{127, 128};
}

// Weights, per output channel, on every unit.
inline constexpr std::int32_t kWeightLevels = 127;

// The vector ISA of a unit's GEMM kernels: zmm (AVX-512) for AMX's epilogue and AVX512-VNNI,
// ymm (AVX2, 16 registers, VEX) for AVX-VNNI and avx2.
constexpr Isa int8_kernel_isa(Int8Unit unit) {
  return unit == Int8Unit::avx2 || unit == Int8Unit::avx_vnni ? Isa::avx2 : Isa::avx512;
}

}  // namespace rnnjit
