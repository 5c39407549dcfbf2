// rnnjit: the vector register budgets (AVX-512 and AVX2) the planner sizes its tiles and
// unrolls by, kept free of Xbyak so that the planner (codegen/planner/) never includes an
// emitter. The emitters (codegen/x64/) lay out their registers from the same numbers and refuse
// descriptors past them.
#pragma once

#include "rnnjit/config.hpp"
#include "codegen/kernel_desc.hpp"

namespace rnnjit {

// Whether the x64 emitters generate code for `isa` (else its plans run the scalar reference).
constexpr bool generates_x64(Isa isa) { return isa == Isa::avx512 || isa == Isa::avx2; }

// Floats in a vector register: 16 in a zmm (AVX-512), 8 in a ymm (AVX2).
constexpr int vector_lanes(Isa isa) { return isa == Isa::avx2 ? 8 : 16; }
// Vector registers the encoding reaches: zmm0-31 with EVEX, ymm0-15 with VEX (AVX2).
constexpr int vector_registers(Isa isa) { return isa == Isa::avx2 ? 16 : 32; }
// zmm registers of AVX-512 (the AVX-512-only kernels', AMX and AVX512_BF16, budget).
inline constexpr int kZmmRegisters = vector_registers(Isa::avx512);

// A GEMM tile's unit of columns is a 16-float vector (a cache line: the packed panels and the
// blocking are the same on both ISAs); on AVX2 each is two ymm registers.
constexpr int gemm_registers_per_vector(Isa isa) { return 16 / vector_lanes(isa); }
// Registers a GEMM tile holds beside its accumulators and its B vectors: two broadcast
// registers of A on AVX-512; on AVX2 one, and the tail's vmaskmovps mask.
inline constexpr int kGemmOtherRegisters = 2;

// The most rows a GEMM tile of `vectors` 16-float vectors per row can have: rows * vectors
// accumulators, the row's B vectors and the other registers above (codegen/x64/gemm_emitter.hpp).
// AVX-512: 13 rows of 2 vectors, 9 of 3; AVX2: 6 rows of 1 vector (the 6 x 16 tile), 2 of 2.
constexpr int gemm_max_rows(int vectors, Isa isa = Isa::avx512) {
  const int per_vector = gemm_registers_per_vector(isa);
  return (vector_registers(isa) - kGemmOtherRegisters - per_vector * vectors) / (per_vector * vectors);
}

// An int8 GEMM tile (codegen/x64/vnni_gemm_emitter.hpp) holds rows x vectors sums (two ymm per
// 16-column vector on AVX2), a k quad's B registers, and the others: on AVX-512 two broadcast
// registers of A; on AVX2 one, the int16 ones of vpmaddwd and the product of the avx2 unit's
// dot step (the avx_vnni unit's kernels keep the same map, so that they are the tested avx2
// kernels with one instruction changed; the epilogue's tail mask takes the product's).
constexpr int int8_other_registers(Isa isa) { return isa == Isa::avx2 ? 3 : 2; }
// The most rows an int8 tile of `vectors` 16-column vectors can have. AVX-512: 29 rows of 1
// vector, 14 of 2, 6 of 4 (the AVX512_BF16 tiles); AVX2: 5 rows of 1 vector, 2 of 2, 1 of 3.
constexpr int int8_max_rows(int vectors, Isa isa) {
  const int per_vector = gemm_registers_per_vector(isa);
  return (vector_registers(isa) - int8_other_registers(isa) - per_vector * vectors) / (per_vector * vectors);
}

// The slot registers of a gate kernel (codegen/x64/gate_emitter.hpp): zmm0..15 on AVX-512,
// ymm0..7 on AVX2; the rest are the activations' scratch and constants.
constexpr int gate_slot_registers(Isa isa) { return isa == Isa::avx2 ? 8 : 16; }

// Registers of one slot (one vector of hidden units) of each gate kernel.
constexpr int gate_registers_per_slot(CellKind cell, Pass pass) {
  if (pass == Pass::forward) return is_vanilla(cell) ? 1 : cell == CellKind::gru_reset_before ? 3 : 4;
  return is_vanilla(cell) ? 3 : cell == CellKind::gru_reset_before ? 5 : 8;
}

// Unroll the planner may ask of a gate kernel: the most slots that fit the slot registers,
// capped at 4. AVX-512: forward 4, backward LSTM/GRU 2 (GRU reset before 3, RNN 4); AVX2:
// forward LSTM/GRU 2 (RNN 4), backward LSTM/GRU 1 (RNN 2).
constexpr int max_gate_unroll(CellKind cell, Pass pass, Isa isa = Isa::avx512) {
  const int fit = gate_slot_registers(isa) / gate_registers_per_slot(cell, pass);
  return fit < 4 ? fit : 4;
}

}  // namespace rnnjit
