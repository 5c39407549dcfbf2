// rnnjit: the int8 GEMM kernel of every vector unit, generated per KernelDesc (kind vnni_gemm),
// for Quantize::int8_dynamic:
//   C[rows, 16*vectors] (+)= float(A[rows, 64*k] B[64*k, 16*vectors] - compensation) * scale_w * scale_a
// on the operands of codegen/int8_layout.hpp: A uint8 rows (the unit's zero point,
// codegen/int8_unit.hpp) a_row_stride bytes apart, zero padded to whole tiles of 64 k; B one
// packed int8 panel of b_k_stride column tiles per k tile, each [16 k quads][16 columns][4]
// (int8_packed_offset), of which the kernel reads the first `vectors`, followed by the panel's
// int32 compensations and FP32 scales; C FP32, rows c_row_stride apart, the last vector cut to
// n_tail lanes (0: all 16).
//
// One design over the vector ISA (VectorIsa) and the dot step (KernelDesc::int8_unit):
//   avx512_vnni (isa avx512): a k quad of a column tile is one zmm of B (16 columns x 4 k);
//       EVEX vpdpbusd adds each column's four uint8 x int8 products to its int32 sum (without
//       saturation: the planner keeps K where the sums cannot overflow).
//   avx_vnni (isa avx2): the same on ymm registers, two per column tile (8 columns each, as
//       the FP32 AVX2 kernel's 16-column vectors are), with VEX vpdpbusd.
//   avx2 (isa avx2): the ymm kernel of avx_vnni with its dot step made of three AVX2
//       instructions: vpmaddubsw (uint8 x int8 pairs -> int16 sums, exact on the unit's 7-bit
//       activations), vpmaddwd with int16 ones (-> the quad's int32 sum), vpaddd.
// So a k quad costs a load of B per register and a broadcast of A's quad per row, as a k step of
// the FP32 kernel does, for four times its products. The epilogue dequantizes; the tails are
// opmasked (AVX-512) or, on AVX2, a half past n_tail is left out and a half it cuts is read and
// written through vmaskmovps (as the FP32 kernel, gemm_emitter.hpp).
//
// Each k tile also prefetches into L1 the B tiles b_lookahead k tiles on (0: none): in a
// recurrence B streams from L2 or L3.
//
// Register map (R = vectors x registers per vector): accumulators 0 .. rows*R - 1, B's R
// registers next (the epilogue's compensations and scales), then the others
// (int8_other_registers): two broadcast registers (AVX-512; k1 the tail mask), or one, the
// int16 ones and the dot step's product (AVX2; in the epilogue C's masked loads and the tail
// mask). The emitter refuses tiles past the ISA's registers (int8_max_rows).
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/jit_generator.hpp"
#include "codegen/x64/vector_isa.hpp"

namespace rnnjit::x64 {

class VnniGemmEmitter final : public JitGenerator {
 public:
  explicit VnniGemmEmitter(const KernelDesc& desc);
  std::size_t text_size() const override { return text_size_; }  // instructions before AVX2's tail mask

 private:
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  void k_quad(int quad);  // one quad of k of the current k tile: B's registers, then each row's dot products
  // sum += the four-k dot products of a (uint8, A's quad broadcast) and b (int8), per int32 lane.
  void dot(const Xbyak::Xmm& sum, const Xbyak::Xmm& a, const Xbyak::Xmm& b);
  void store_c();  // dequantized: compensation, the columns' and the rows' scales, beta
  // Register r (0 .. regs_ - 1) of a row: half r % per_vector_ of vector r / per_vector_.
  Xbyak::Xmm acc(int i, int r) const { return isa_.vreg(i * regs_ + r); }
  Xbyak::Xmm bvec(int r) const { return isa_.vreg(rows_ * regs_ + r); }
  Xbyak::Xmm bcast(int i) const { return isa_.vreg(rows_ * regs_ + regs_ + (isa_.opmask ? (i & 1) : 0)); }
  Xbyak::Xmm ones() const { return isa_.vreg(rows_ * regs_ + regs_ + 1); }     // AVX2
  Xbyak::Xmm product() const { return isa_.vreg(rows_ * regs_ + regs_ + 2); }  // AVX2
  int lanes_of(int r) const;  // lanes of register r within n_tail (0: none, isa_.lanes: all)
  bool masked(int r) const { return lanes_of(r) < isa_.lanes; }
  // Where register r's part of a 64-byte row of 16 columns (a k quad, compensations, scales) lies.
  int part(int r) const { return (r / per_vector_) * 64 + (r % per_vector_) * isa_.vector_bytes(); }

  KernelDesc desc_;
  VectorIsa isa_;
  Int8Unit unit_;
  int rows_, vectors_, per_vector_, regs_;
  std::size_t text_size_ = 0;
  Xbyak::Label tail_table_;
  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11, scale_ = rdx;
};

}  // namespace rnnjit::x64
