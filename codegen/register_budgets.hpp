// rnnjit: the AVX-512 register budgets the planner sizes its tiles and unrolls by, kept free of
// Xbyak so that the planner (codegen/planner/) never includes an emitter. The emitters
// (codegen/x64/) lay out their registers from the same numbers and refuse descriptors past them.
#pragma once

#include "rnnjit/config.hpp"
#include "codegen/kernel_desc.hpp"

namespace rnnjit {

// zmm registers of AVX-512.
inline constexpr int kZmmRegisters = 32;

// The most rows a GEMM tile of `vectors` zmm per row can have: rows * vectors accumulators, the
// row's B vectors and two broadcast registers (codegen/x64/gemm_emitter.hpp).
constexpr int gemm_max_rows(int vectors) { return (kZmmRegisters - 2 - vectors) / vectors; }

// zmm0..15 of a gate kernel hold its slots (codegen/x64/gate_emitter.hpp); the rest are the
// activations' scratch and constants.
inline constexpr int kGateSlotRegisters = 16;

// Unroll the planner may ask of a gate kernel: the most slots that fit the slot registers,
// capped at 4.
constexpr int max_gate_unroll(CellKind cell, Pass pass) {
  if (pass == Pass::forward) return 4;               // LSTM/GRU: 4 registers a slot (GRU reset before: 3); RNN: 1
  if (cell == CellKind::gru_reset_before) return 3;  // backward: 5 and 4 a slot
  return is_vanilla(cell) ? 4 : 2;                   // backward: RNN 3 a slot; LSTM/GRU 8
}

}  // namespace rnnjit
