// rnnjit: the AMX-BF16 GEMM kernel, generated per KernelDesc (kind amx_gemm):
//   C[rows, 16*vectors] (+)= A[rows, 32*k] B[32*k, 16*vectors]
// A is bf16, rows a_row_stride elements apart (zero padded to whole tiles of k); B one packed
// bf16 panel, its k tiles in order, each b_k_stride (the panel's n_r) tiles of [16 k pairs][16
// columns][2] (bf16_packed_offset), of which the kernel reads the first `vectors`; C FP32, rows c_row_stride apart. The tile shapes are the descriptor's,
// so tails need no masking: a row tail is a shorter A and C tile, a column tail a narrower B
// and C tile; nothing outside C[rows, 16*(vectors-1) + (n_tail or 16)] is read or written.
//
// Each k step also prefetches into L1 the B tiles b_lookahead k steps on and A's rows
// a_lookahead k steps on (0: none).
//
// Tile map: C tiles 0-3 (row tile i, column tile v at 2i + v), A tiles 4-5, B tiles 6-7; each
// k step loads every A and B tile once and multiplies each pair (tdpbf16ps sums in FP32).
// The kernel loads its tile configuration on entry (unless GemmArgs::configured says the tiles
// hold it already) and leaves the tiles in use on return (a release per call halved a one-shot
// GEMM's rate): the executor releases them after each stage.
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

class AmxGemmEmitter final : public JitGenerator {
 public:
  explicit AmxGemmEmitter(const KernelDesc& desc);
  std::size_t text_size() const override { return text_size_; }

 private:
  // Rows of row tile i and FP32 columns of column tile v.
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  Xbyak::Tmm c_tile(int i, int v) const;       // C's tile of row tile i, column tile v
  Xbyak::Address c_at(int i, int v) const;     // where that tile lies in C
  int tile_rows(int i) const;
  int tile_columns(int v) const;
  void emit_tile_config();

  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11, a_stride_ = rax, b_stride_ = rcx, c_stride_ = rdx;
  KernelDesc desc_;
  int row_tiles_, column_tiles_;
  std::size_t text_size_ = 0;
  Xbyak::Label config_;
};

}  // namespace rnnjit::x64
