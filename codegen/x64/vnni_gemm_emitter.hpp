// rnnjit: the AVX512-VNNI int8 GEMM kernel, generated per KernelDesc (kind vnni_gemm), for
// Quantize::int8_dynamic:
//   C[rows, 16*vectors] (+)= float(A[rows, 64*k] B[64*k, 16*vectors] - compensation) * scale_w * scale_a
// on the operands of codegen/int8_layout.hpp: A uint8 rows (zero point 128) a_row_stride bytes
// apart, zero padded to whole tiles of 64 k; B one packed int8 panel of b_k_stride column tiles
// per k tile, each [16 k quads][16 columns][4] (int8_packed_offset), of which the kernel reads
// the first `vectors`, followed by the panel's int32 compensations and FP32 scales; C FP32,
// rows c_row_stride apart, the last vector cut to n_tail lanes (0: all 16). A k quad of one
// column tile is one zmm of B (16 columns x 4 k) and vpdpbusd adds each column's four
// uint8 x int8 products to its int32 sum (without saturation: the planner keeps K where the
// sums cannot overflow), so a k quad costs a load of B per vector and a broadcast of A's quad
// per row, as a k step of the FP32 kernel does, for four times its products. The structure
// follows the AVX512_BF16 kernel (dpbf16_gemm_emitter.hpp); the epilogue dequantizes.
//
// Each k tile also prefetches into L1 the B tiles b_lookahead k tiles on (0: none): in a
// recurrence B streams from L2 or L3.
//
// Register map: accumulators zmm0 .. zmm(rows*vectors - 1), B vectors next (the epilogue's
// compensations and scales), two broadcast registers last.
#pragma once

#include "codegen/kernel_desc.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

class VnniGemmEmitter final : public JitGenerator {
 public:
  explicit VnniGemmEmitter(const KernelDesc& desc);

 private:
  void check_desc() const;  // throws Error for a descriptor this emitter cannot emit
  void load_args();
  void k_loop();
  void k_quad(int quad);  // one quad of k of the current k tile: B's vectors, then each row's dot products
  void store_c();         // dequantized: compensation, the columns' and the rows' scales, beta
  Xbyak::Zmm acc(int i, int v) const { return Xbyak::Zmm(i * vectors_ + v); }
  Xbyak::Zmm bvec(int v) const { return Xbyak::Zmm(rows_ * vectors_ + v); }
  Xbyak::Zmm bcast(int i) const { return Xbyak::Zmm(rows_ * vectors_ + vectors_ + (i & 1)); }
  bool masked(int v) const { return desc_.n_tail != 0 && v == vectors_ - 1; }

  KernelDesc desc_;
  int rows_, vectors_;
  const Xbyak::Reg64 a_ = r8, b_ = r9, c_ = r10, k_ = r11, scale_ = rdx;
};

}  // namespace rnnjit::x64
