// rnnjit: FP32 -> bf16 rounding (to nearest, ties to even; NaN stays a quiet NaN), as the
// AMX-BF16 GEMMs read their operands (Options::fpmath bf16), and its way back.
#pragma once

#include <bit>
#include <cstdint>

namespace rnnjit {

inline std::uint16_t to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float from_bf16(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// f rounded to the nearest bf16, as a float.
inline float round_to_bf16(float f) { return from_bf16(to_bf16(f)); }

}  // namespace rnnjit
