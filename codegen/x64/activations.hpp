// rnnjit: activation fragments for AVX-512 emitters. Each works in place on a range of zmm
// registers, interleaving independent chains, with scratch registers from a declared pool.
//
//   exp:     x = n ln2 + r (Cody-Waite, |r| <= ln2/2), degree-7 polynomial, vscalefps by 2^n
//   sigmoid: 1 / (1 + exp(-x))                       (+-inf and NaN safe)
//   tanh:    |x| < 0.55: x + x^3 P(x^2) (Taylor to x^17); else sign(x) (1 - 2 / (exp(2|x|) + 1))
//   1 / d:   vrcp14ps and one Newton step (not vdivps, which would hold the divider 10 cycles)
//   relu:    max(0, x)
// NaN in gives NaN out: every min/max keeps the value operand second (AVX-512 returns the
// second source when either is NaN).
#pragma once

#include <span>
#include <vector>

#include <xbyak/xbyak.h>

namespace rnnjit::x64 {

// Indices into the constant table that every gate kernel appends after its code.
enum class Constant : int {
  one, two, zero, sign_mask, abs_mask, exp_lo, exp_hi, log2e, ln2_hi, ln2_lo,
  exp_c2, exp_c3, exp_c4, exp_c5, exp_c6, exp_c7, tanh_clamp, tanh_small,
  tanh_c1, tanh_c2, tanh_c3, tanh_c4, tanh_c5, tanh_c6, tanh_c7, tanh_c8, count
};

struct ActivationRegisters {
  // Held for the whole kernel once load_constants() has run.
  Xbyak::Zmm one, exp_lo, exp_hi, tanh_clamp;
  std::vector<Xbyak::Zmm> scratch;      // free for the fragments to clobber
  std::vector<Xbyak::Opmask> masks;     // free for the fragments to clobber
};

class Activations {
 public:
  Activations(Xbyak::CodeGenerator& gen, ActivationRegisters regs);

  void load_constants();             // at kernel entry
  void emit_constant_table();        // after the code: binds the table label
  Xbyak::Address constant(Constant c) const;  // broadcast {1to16} operand

  void sigmoid(std::span<const Xbyak::Zmm> v);
  void tanh(std::span<const Xbyak::Zmm> v);
  void relu(std::span<const Xbyak::Zmm> v);

  const Xbyak::Zmm& one() const { return regs_.one; }  // 1.0 in every lane, for the cell math

 private:
  // v <- exp(v), scratch n[i], p[i] per register; clamp bounds the input first.
  void exp(std::span<const Xbyak::Zmm> v, std::span<const Xbyak::Zmm> n, std::span<const Xbyak::Zmm> p, bool clamp);
  // v <- 1 / v, scratch y0[i] per register; `may_be_inf`: some v may be +inf (1/inf = 0).
  void reciprocal(std::span<const Xbyak::Zmm> v, std::span<const Xbyak::Zmm> y0, bool may_be_inf);
  Xbyak::Address scalar(Constant c) const;

  Xbyak::CodeGenerator& g_;
  ActivationRegisters regs_;
  Xbyak::Label table_;
};

// The table's float values (also used by the tests to check the approximations' constants).
const float* activation_constants();

}  // namespace rnnjit::x64
