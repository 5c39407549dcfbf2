// rnnjit: activation fragments for the x64 emitters, AVX-512 (zmm) or AVX2 (ymm, VEX) as their
// VectorIsa says. Each works in place on a range of vector registers, interleaving independent
// chains, with scratch registers from a declared pool.
//
//   exp:     x = n ln2 + r (Cody-Waite, |r| <= ln2/2), degree-7 polynomial, times 2^n (AVX-512
//            vscalefps; AVX2 adds n to the exponent bits, so its input is clamped to [-87, 88],
//            where 2^n and the result stay normal floats)
//   sigmoid: 1 / (1 + exp(-x))                       (+-inf and NaN safe)
//   tanh:    |x| < 0.55: x + x^3 P(x^2) (Taylor to x^17); else sign(x) (1 - 2 / (exp(2|x|) + 1))
//   1 / d:   vrcp14ps (AVX2: vrcpps) and one Newton step (not vdivps, which would hold the
//            divider 10 cycles)
//   relu:    max(0, x)
// NaN in gives NaN out: every min/max keeps the value operand second (x86 returns the second
// source when either is NaN).
#pragma once

#include <span>
#include <vector>

#include <xbyak/xbyak.h>

#include "codegen/x64/vector_isa.hpp"

namespace rnnjit::x64 {

// Indices into the constant table that every gate kernel appends after its code.
enum class Constant : int {
  one, two, zero, sign_mask, abs_mask, exp_lo, exp_hi, log2e, ln2_hi, ln2_lo,
  exp_c2, exp_c3, exp_c4, exp_c5, exp_c6, exp_c7, tanh_clamp, tanh_small,
  tanh_c1, tanh_c2, tanh_c3, tanh_c4, tanh_c5, tanh_c6, tanh_c7, tanh_c8, count
};

struct ActivationRegisters {
  // Held for the whole kernel once load_constants() has run. `one` always; the bounds only
  // where `hold_bounds` (AVX-512), else the fragments broadcast them into scratch as needed.
  Xbyak::Xmm one, exp_lo, exp_hi, tanh_clamp;
  bool hold_bounds = true;
  std::vector<Xbyak::Xmm> scratch;      // free for the fragments to clobber
  std::vector<Xbyak::Opmask> masks;     // free for the fragments to clobber (AVX-512 only)
};

class Activations {
 public:
  Activations(Xbyak::CodeGenerator& gen, const VectorIsa& isa, ActivationRegisters regs);

  void load_constants();             // at kernel entry
  void emit_constant_table();        // after the code: binds the table label
  // A whole-vector operand of the constant: {1to16} broadcast (AVX-512), or the table's
  // constant stored once per lane (AVX2, which has no embedded broadcast).
  Xbyak::Address constant(Constant c) const;
  Xbyak::Address scalar(Constant c) const;  // its first float, for vbroadcastss

  void sigmoid(std::span<const Xbyak::Xmm> v);
  void tanh(std::span<const Xbyak::Xmm> v);
  void relu(std::span<const Xbyak::Xmm> v);

  const Xbyak::Xmm& one() const { return regs_.one; }  // 1.0 in every lane, for the cell math

 private:
  // v <- exp(v), scratch n[i], p[i] per register; clamp bounds the input first.
  void exp(std::span<const Xbyak::Xmm> v, std::span<const Xbyak::Xmm> n, std::span<const Xbyak::Xmm> p, bool clamp);
  // v <- 1 / v, scratch y0[i] per register; `may_be_inf`: some v may be +inf (1/inf = 0).
  void reciprocal(std::span<const Xbyak::Xmm> v, std::span<const Xbyak::Xmm> y0, bool may_be_inf);
  // The held register of a bound, or the bound broadcast into `scratch`.
  Xbyak::Xmm bound(Constant c, const Xbyak::Xmm& held, const Xbyak::Xmm& scratch);

  Xbyak::CodeGenerator& g_;
  VectorIsa isa_;
  ActivationRegisters regs_;
  Xbyak::Label table_;
};

// The table's float values for `isa` (also used by the tests to check the approximations'
// constants); AVX2's exp clamps differ (above).
const float* activation_constants(Isa isa = Isa::avx512);

}  // namespace rnnjit::x64
