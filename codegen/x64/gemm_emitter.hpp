// rnnjit: the AVX-512 GEMM microkernel, generated per KernelDesc (kind gemm):
//   C[rows, vectors*16] (+)= A[rows, k] B[k, vectors*16]
// A element (i, kk) at a + i*a_row_stride + kk*a_k_stride (so A may be read transposed),
// B row kk at b + kk*b_k_stride (packed panels or a plain row-major matrix), C row i at
// c + i*c_row_stride. The last vector of B and C is opmasked to n_tail lanes when n_tail != 0.
// With b_lookahead = D, each k step prefetches the B row D k steps ahead into L1, for panels
// of B that stream from L2 or L3. With next_b_lines = L, each unrolled k iteration also
// prefetches L lines into L2 from args.next_b on: a tile thereby fetches its share of the panel
// of B its thread multiplies next (GemmBlocking::next_panel_lines).
// With stream_c, C is written with non-temporal stores (vmovntps): a C far larger than the
// caches then goes to memory without first being read in for ownership.
//
// Register map: accumulators zmm0 .. zmm(rows*vectors - 1), B vectors next, two broadcast
// registers last; the emitter refuses tiles that need more than the 32 zmm registers.
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

class GemmEmitter final : public JitGenerator {
 public:
  explicit GemmEmitter(const KernelDesc& desc);
  const KernelDesc& desc() const { return desc_; }

  static constexpr int kRegisters = kZmmRegisters;

 private:
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  void store_c();
  void k_step(int kk);  // one k: load B, broadcast A per row, FMAs
  Xbyak::Zmm acc(int i, int v) const { return Xbyak::Zmm(i * vectors_ + v); }
  Xbyak::Zmm bvec(int v) const { return Xbyak::Zmm(rows_ * vectors_ + v); }
  Xbyak::Zmm bcast(int i) const { return Xbyak::Zmm(rows_ * vectors_ + vectors_ + (i & 1)); }
  bool masked(int v) const { return desc_.n_tail != 0 && v == vectors_ - 1; }

  KernelDesc desc_;
  int rows_, vectors_;
  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11, next_b_ = rdx;
};

}  // namespace rnnjit::x64
