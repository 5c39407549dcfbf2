// rnnjit: the operands of the int8 GEMMs (Quantize::int8_dynamic), laid out as vpdpbusd (and
// AMX's TDPBUSD) read them: four k of one column side by side in a 32-bit lane. The same on
// every unit (codegen/int8_unit.hpp): a ymm kernel reads a 16-column k quad as two halves.
//
// B (the weights, W^T) is packed once per panel of 16*n_r columns: K rounded up to k tiles of
// 64 (int8_k), each tile n_r column tiles of 1 KiB, [16 k quads][16 columns][4 int8]; so one
// k quad of a column tile is one zmm and one row of an AMX B tile. Zeros pad K and the columns
// past the group. After the panel's int8 data come, for each of its 16*n_r columns, the int32
// compensation (the unit's activation zero point x the sum of the column's int8 weights) and then the FP32
// scale of the column (its weights' max|w| / 127):
//   [int8_k(K) * 16*n_r int8][16*n_r int32 compensation][16*n_r float scale]
// so a kernel that has walked all of K finds them right behind the data.
//
// A (x rows, or h every step) is quantized per row into uint8 with the unit's levels L and zero
// point Z (ActivationQuantization: 127 and 128, or 63 and 64 on the avx2 unit): q = x * L /
// max|row| rounded to nearest even, clamped to [-L, L], plus Z. A copy of M rows holds the rows,
// int8_k(K) bytes each (Z past K: zero in value), then M floats: each row's scale (max|row| / L,
// 0 for a row of zeros).
// The int32 sum of a tile is sum_k (q_x + Z) w_q, and sum_k q_x w_q = sum - compensation; C =
// float(sum - compensation) * scale_w[column] * scale_x[row]. Sums never overflow where
// K * 255 * 127 < 2^31 (K <= kMaxInt8K); vpdpbusd adds without saturating.
#pragma once

#include <cstdint>

namespace rnnjit {

inline constexpr std::int64_t kInt8TileK = 64;             // k of one packed tile (16 quads)
inline constexpr std::int64_t kMaxInt8K = 65536;           // int32 sums cannot overflow below this

// K rounded up to whole k tiles of 64.
inline std::int64_t int8_k(std::int64_t k) { return (k + kInt8TileK - 1) / kInt8TileK * kInt8TileK; }

// Where B's (k, column c of a panel of n_r column tiles) lies in its panel's int8 data, in bytes.
inline std::int64_t int8_packed_offset(std::int64_t n_r, std::int64_t k, std::int64_t c) {
  return (((k / kInt8TileK) * n_r + c / 16) * 16 + (k % kInt8TileK) / 4) * 64 + (c % 16) * 4 + k % 4;
}

// Bytes of one packed panel of n_r column tiles over K: data, compensation, scales.
inline std::int64_t int8_panel_bytes(std::int64_t n_r, std::int64_t k) { return (int8_k(k) + 8) * 16 * n_r; }

// Bytes of one copy of M quantized rows of K: the rows, then their scales, rounded to 64.
inline std::int64_t int8_a_bytes(std::int64_t m, std::int64_t k) { return (m * int8_k(k) + 4 * m + 63) / 64 * 64; }

}  // namespace rnnjit
