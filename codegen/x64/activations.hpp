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
// ONNX's activations of the recurrent operators (apply(); kernels/activation.hpp is the scalar
// twin), their alpha and beta read from the table (parameter slots after the constants):
//   affine:           alpha x + beta (one fma)
//   leaky_relu:       max(x, 0) + alpha min(x, 0)
//   thresholded_relu: x where x > alpha or x is NaN, else 0 (a compare and a select)
//   scaled_tanh:      alpha tanh(beta x)
//   hard_sigmoid:     min(max(alpha x + beta, 0), 1)
//   elu:              max(x, 0) + alpha (exp(min(x, 0)) - 1): exp(0) is exactly 1, so x >= 0
//                     adds 0; near 0 the error is an ulp of 1 absolute (exp(x) - 1 cancels)
//   softsign:         sign(x) a / (1 + a), a = min(|x|, 2^30) (1/(1+a) stays a normal float),
//                     plus x - x, which makes +-inf NaN as the twin's inf / inf does
//   softplus:         max(x, 0) + log1p(exp(-|x|)), log1p(t) = 2 atanh(s) = s P(s^2) with
//                     s = t / (2 + t) in [0, 1/3] (P: atanh's series to s^15, below 2^-27
//                     relative), no exponent bit tricks, so both ISAs share it; 0 + max(x, 0)
//                     where x is below exp's clamp
// NaN in gives NaN out: every min/max keeps the value operand second (x86 returns the second
// source when either is NaN).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <xbyak/xbyak.h>

#include "codegen/x64/vector_isa.hpp"
#include "rnnjit/config.hpp"

namespace rnnjit::x64 {

// Indices into the constant table that every gate kernel appends after its code.
enum class Constant : int {
  one, two, zero, sign_mask, abs_mask, exp_lo, exp_hi, log2e, ln2_hi, ln2_lo,
  exp_c2, exp_c3, exp_c4, exp_c5, exp_c6, exp_c7, tanh_clamp, tanh_small,
  tanh_c1, tanh_c2, tanh_c3, tanh_c4, tanh_c5, tanh_c6, tanh_c7, tanh_c8,
  count,  // every kernel's table ends here; a kernel that uses ONNX's activations goes on with:
  atanh_c1 = count, atanh_c3, atanh_c5, atanh_c7, atanh_c9, atanh_c11, atanh_c13, atanh_c15, softsign_clamp,
  extended_count
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
  // After the code: binds the table label. The constants up to Constant::count, then, only
  // where ONNX's activations were emitted, the rest and their parameters (so the table of a
  // kernel without them is what it always was).
  void emit_constant_table();
  // A whole-vector operand of the constant: {1to16} broadcast (AVX-512), or the table's
  // constant stored once per lane (AVX2, which has no embedded broadcast).
  Xbyak::Address constant(Constant c) const;
  Xbyak::Address scalar(Constant c) const;  // its first float, for vbroadcastss

  void sigmoid(std::span<const Xbyak::Xmm> v);
  void tanh(std::span<const Xbyak::Xmm> v);
  void relu(std::span<const Xbyak::Xmm> v);
  // ONNX's function f (resolved: never Activation::standard) in place on v.
  void apply(const ActivationFunction& f, std::span<const Xbyak::Xmm> v);

  const Xbyak::Xmm& one() const { return regs_.one; }  // 1.0 in every lane, for the cell math

 private:
  // v <- exp(v), scratch n[i], p[i] per register; clamp bounds the input first.
  void exp(std::span<const Xbyak::Xmm> v, std::span<const Xbyak::Xmm> n, std::span<const Xbyak::Xmm> p, bool clamp);
  // v <- 1 / v, scratch y0[i] per register; `may_be_inf`: some v may be +inf (1/inf = 0).
  void reciprocal(std::span<const Xbyak::Xmm> v, std::span<const Xbyak::Xmm> y0, bool may_be_inf);
  // The held register of a bound, or the bound broadcast into `scratch`.
  Xbyak::Xmm bound(Constant c, const Xbyak::Xmm& held, const Xbyak::Xmm& scratch);

  void affine(std::span<const Xbyak::Xmm> v, float alpha, float beta);
  void leaky_relu(std::span<const Xbyak::Xmm> v, float alpha);
  void thresholded_relu(std::span<const Xbyak::Xmm> v, float alpha);
  void scaled_tanh(std::span<const Xbyak::Xmm> v, float alpha, float beta);
  void hard_sigmoid(std::span<const Xbyak::Xmm> v, float alpha, float beta);
  void elu(std::span<const Xbyak::Xmm> v, float alpha);
  void softsign(std::span<const Xbyak::Xmm> v);
  void softplus(std::span<const Xbyak::Xmm> v);

  // The only place where the ISAs' conditionals differ: compare() sets the lanes where
  // `a predicate b` holds (AVX-512: into the opmask m.k; AVX2: all-ones lanes of m.v) and
  // select() takes src into dst there (AVX-512 vblendmps under the mask, AVX2 vblendvps).
  struct Lanes {
    Xbyak::Opmask k;
    Xbyak::Xmm v;
  };
  void compare(const Lanes& m, const Xbyak::Xmm& a, const Xbyak::Operand& b, int predicate);
  void select(const Xbyak::Xmm& dst, const Lanes& m, const Xbyak::Xmm& src);  // dst = m ? src : dst

  // A table entry: index < extended_count a constant, above it a parameter slot; `vector` the
  // whole-vector operand (as constant()), else its first float (as scalar()).
  Xbyak::Address entry(int index, bool vector) const;
  // The slot of an activation parameter, added to the table on first use.
  Xbyak::Address parameter(float value);         // whole-vector operand
  Xbyak::Address parameter_scalar(float value);  // its first float, for vbroadcastss
  int parameter_index(float value);

  Xbyak::CodeGenerator& g_;
  VectorIsa isa_;
  ActivationRegisters regs_;
  Xbyak::Label table_;
  mutable bool extended_ = false;           // an entry past Constant::count was referenced
  std::vector<std::uint32_t> parameters_;  // the parameter slots' float bits, in table order
};

// The table's float values for `isa`, Constant::extended_count of them (also used by the tests
// to check the approximations' constants); AVX2's exp clamps differ (above).
const float* activation_constants(Isa isa = Isa::avx512);

}  // namespace rnnjit::x64
