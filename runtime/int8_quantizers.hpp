// rnnjit: the executor's int8 quantizers (runtime/executor_int8.cpp), in AVX-512 and in AVX2 +
// FMA: rows [r0, r1) of A (lda apart, k floats each) into rows of k_pad bytes at dst, as uint8
// q + zero_point (zero_point past k), and their scales at scales[r], with `levels` levels each
// side. Both do int8::quantize's arithmetic (kernels/int8_reference.hpp) a vector at a time
// (vcvtps2dq rounds to nearest even, as nearbyint does) and match it bit for bit. Activations:
// the unit's ActivationQuantization (codegen/int8_unit.hpp); weights: kWeightLevels with zero
// point 0 (zeros past k, as B's padding must be).
#pragma once

#include <cstdint>

#include "rnnjit/rnn.hpp"

namespace rnnjit::int8 {

using QuantizeRows = void (*)(std::uint8_t* dst, float* scales, std::int64_t k_pad, const float* src, std::int64_t lda,
                              std::int64_t k, std::int64_t r0, std::int64_t r1, std::int32_t levels,
                              std::int32_t zero_point);

void quantize_rows_avx512(std::uint8_t* dst, float* scales, std::int64_t k_pad, const float* src, std::int64_t lda,
                          std::int64_t k, std::int64_t r0, std::int64_t r1, std::int32_t levels,
                          std::int32_t zero_point);
void quantize_rows_avx2(std::uint8_t* dst, float* scales, std::int64_t k_pad, const float* src, std::int64_t lda,
                        std::int64_t k, std::int64_t r0, std::int64_t r1, std::int32_t levels, std::int32_t zero_point);

// The quantizer of `unit`'s plans: the vector ISA of its kernels, which the CPU has.
QuantizeRows quantize_rows_for(Int8Unit unit);

}  // namespace rnnjit::int8
