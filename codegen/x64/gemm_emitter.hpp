// rnnjit: the GEMM microkernel, AVX-512 or AVX2 (+FMA) as the descriptor's isa says,
// generated per KernelDesc (kind gemm):
//   C[rows, vectors*16] (+)= A[rows, k] B[k, vectors*16]
// A vector is 16 columns (a cache line; the unit of the packed panels) on both ISAs: one zmm,
// or two ymm halves on AVX2.
// A element (i, kk) at a + i*a_row_stride + kk*a_k_stride (so A may be read transposed),
// B row kk at b + kk*b_k_stride (packed panels or a plain row-major matrix), C row i at
// c + i*c_row_stride. The last vector of B and C is cut to n_tail lanes when n_tail != 0:
// opmasked (AVX-512), or on AVX2 a half past n_tail is left out and a half it cuts is read and
// written through vmaskmovps.
// With b_lookahead = D, each k step prefetches the B row D k steps ahead into L1, for panels
// of B that stream from L2 or L3. With next_b_lines = L, each unrolled k iteration also
// prefetches L lines into L2 from args.next_b on: a tile thereby fetches its share of the panel
// of B its thread multiplies next (GemmBlocking::next_panel_lines).
// With stream_c, C is written with non-temporal stores (vmovntps): a C far larger than the
// caches then goes to memory without first being read in for ownership.
//
// Register map (R = vectors * registers per vector): accumulators 0 .. rows*R - 1, B's R
// registers next, then two broadcast registers of A (AVX-512; k1 the tail mask), or one and
// the tail mask (AVX2); the emitter refuses tiles past the ISA's registers (gemm_max_rows).
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/jit_generator.hpp"
#include "codegen/x64/vector_isa.hpp"

namespace rnnjit::x64 {

class GemmEmitter final : public JitGenerator {
 public:
  explicit GemmEmitter(const KernelDesc& desc);
  const KernelDesc& desc() const { return desc_; }
  std::size_t text_size() const override { return text_size_; }  // instructions before AVX2's tail mask


 private:
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  void store_c();
  void k_step(int kk);  // one k: load B, broadcast A per row, FMAs
  // Register r (0 .. regs_ - 1) of a row: half r % per_vector_ of vector r / per_vector_.
  Xbyak::Xmm acc(int i, int r) const { return isa_.vreg(i * regs_ + r); }
  Xbyak::Xmm bvec(int r) const { return isa_.vreg(rows_ * regs_ + r); }
  Xbyak::Xmm bcast(int i) const { return isa_.vreg(rows_ * regs_ + regs_ + (isa_.opmask ? (i & 1) : 0)); }
  Xbyak::Xmm tail_mask() const { return isa_.vreg(rows_ * regs_ + regs_ + 1); }  // AVX2
  int lanes_of(int r) const;  // lanes of register r within n_tail (0: none, isa_.lanes: all)
  bool masked(int r) const { return lanes_of(r) < isa_.lanes; }
  // C or B's register r as a masked or plain load, and C's store.
  void load(const Xbyak::Xmm& dst, const Xbyak::Address& src, int r);
  void store(const Xbyak::Address& dst, const Xbyak::Xmm& src, int r);
  Xbyak::Address c_at(int i, int r);

  KernelDesc desc_;
  VectorIsa isa_;
  int rows_, vectors_, per_vector_, regs_;
  std::size_t text_size_ = 0;
  Xbyak::Label tail_table_;
  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11, next_b_ = rdx;
};

}  // namespace rnnjit::x64
