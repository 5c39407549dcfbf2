// rnnjit: the AMX-INT8 GEMM kernel, generated per KernelDesc (kind amx_int8_gemm), for
// Quantize::int8_dynamic on CPUs with AMX (Intel Sapphire Rapids and later):
//   C[rows, 16*vectors] (+)= float(A[rows, 64*k] B[64*k, 16*vectors] - compensation) * scale_w * scale_a
// on the operands of the AVX512-VNNI kernel (vnni_gemm_emitter.hpp, codegen/int8_layout.hpp):
// A uint8 rows a_row_stride bytes apart, zero padded to whole tiles of 64 k; B one packed int8
// panel of b_k_stride column tiles per k tile, each [16 k quads][16 columns][4], which is an AMX
// B tile as it lies, followed by the panel's compensations and scales. The tile shapes are the
// descriptor's (a row tail is a shorter A and C tile, a column tail a narrower B and C tile), as
// in the AMX-BF16 kernel (amx_gemm_emitter.hpp), whose structure this follows with TDPBUSD
// (uint8 x int8, int32 sums without saturation) for TDPBF16PS. The int32 C tiles are stored to
// a scratch block on the stack and dequantized from there with AVX-512 as the VNNI kernel does
// (the same float operations in the same order, so both match the scalar twin bit for bit);
// nothing outside C[rows, 16*(vectors-1) + (n_tail or 16)] is read or written.
//
// Each k step also prefetches into L1 the B tiles b_lookahead k steps on and A's rows
// a_lookahead k steps on (0: none).
//
// Tile map: C tiles 0-3 (row tile i, column tile v at 2i + v), A tiles 4-5, B tiles 6-7. The
// kernel loads its configuration on entry unless Int8GemmArgs::configured says the tiles hold
// it, and leaves the tiles in use: the executor releases them after each stage.
//
// Not run where this was written (an AMD Zen 4 without AMX): test_int8_gemm checks it against
// the scalar twin on CPUs with AMX-INT8 and skips elsewhere.
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

class AmxInt8GemmEmitter final : public JitGenerator {
 public:
  explicit AmxInt8GemmEmitter(const KernelDesc& desc);
  std::size_t text_size() const override { return text_size_; }

 private:
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  void store_c();  // C tiles to the scratch block, then dequantized into C
  Xbyak::Tmm c_tile(int i, int v) const { return Xbyak::Tmm(2 * i + v); }
  int tile_rows(int i) const;
  int tile_columns(int v) const;
  void emit_tile_config();

  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11, a_stride_ = rax, b_stride_ = rcx, scratch_stride_ = rdx,
                     scale_ = rsi;
  KernelDesc desc_;
  int row_tiles_, column_tiles_;
  std::size_t text_size_ = 0;
  Xbyak::Label config_;
};

}  // namespace rnnjit::x64
