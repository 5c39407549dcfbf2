// rnnjit: the AVX512_BF16 GEMM kernel, generated per KernelDesc (kind dpbf16_gemm), for CPUs
// with bf16 dot products but no AMX (AMD Zen 4 and Zen 5, Intel Cooper Lake):
//   C[rows, 16*vectors] (+)= A[rows, 32*k] B[32*k, 16*vectors]
// on the operands the AMX kernel reads (codegen/x64/amx_gemm_emitter.hpp): A bf16 rows
// a_row_stride elements apart, zero padded to whole tiles of 32 k; B one packed bf16 panel of
// b_k_stride column tiles per k tile, each [16 k pairs][16 columns][2] (bf16_packed_offset), of
// which the kernel reads the first `vectors`; C FP32, rows c_row_stride apart, the last vector
// cut to n_tail lanes (0: all 16). A k pair of one column tile is one zmm of B (16 columns x 2
// k), and vdpbf16ps adds each column's two products to its FP32 sum, so a k pair costs a load
// of B per vector and a broadcast of A's pair per row, as a k step of the FP32 kernel does.
//
// Each k tile also prefetches into L1 the B tiles b_lookahead k tiles on (0: none): in a
// recurrence B streams from L2 or L3.
//
// Register map: accumulators zmm0 .. zmm(rows*vectors - 1), B vectors next, two broadcast
// registers last (one vector: A's pairs are broadcast from memory inside vdpbf16ps).
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

class Dpbf16GemmEmitter final : public JitGenerator {
 public:
  explicit Dpbf16GemmEmitter(const KernelDesc& desc);

 private:
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  void k_pair(int pair);  // one pair of k of the current k tile: B's vectors, then each row's dot products
  void store_c();
  Xbyak::Zmm acc(int i, int v) const { return Xbyak::Zmm(i * vectors_ + v); }
  Xbyak::Zmm bvec(int v) const { return Xbyak::Zmm(rows_ * vectors_ + v); }
  Xbyak::Zmm bcast(int i) const { return Xbyak::Zmm(rows_ * vectors_ + vectors_ + (i & 1)); }
  bool masked(int v) const { return desc_.n_tail != 0 && v == vectors_ - 1; }

  KernelDesc desc_;
  int rows_, vectors_;
  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11;
};

}  // namespace rnnjit::x64
