#include "codegen/x64/activations.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
namespace {

using Xbyak::Xmm;

using Table = std::array<float, static_cast<int>(Constant::extended_count)>;

constexpr Table kTable = [] {
  Table t{};
  auto set = [&](Constant c, float v) { t[static_cast<int>(c)] = v; };
  set(Constant::one, 1.0f);
  set(Constant::two, 2.0f);
  set(Constant::zero, 0.0f);
  set(Constant::sign_mask, std::bit_cast<float>(0x80000000u));
  set(Constant::abs_mask, std::bit_cast<float>(0x7fffffffu));
  // exp(-104) underflows to 0 and exp(89) overflows to inf through vscalefps; clamping keeps
  // n * ln2 finite so that +-inf inputs give 0 and inf rather than NaN.
  set(Constant::exp_lo, -104.0f);
  set(Constant::exp_hi, 89.0f);
  set(Constant::log2e, 1.44269504088896341f);
  set(Constant::ln2_hi, 0.693359375f);  // 9 significant bits: n * ln2_hi is exact for |n| < 2^15
  set(Constant::ln2_lo, -2.12194440e-4f);
  set(Constant::exp_c2, 1.0f / 2);
  set(Constant::exp_c3, 1.0f / 6);
  set(Constant::exp_c4, 1.0f / 24);
  set(Constant::exp_c5, 1.0f / 120);
  set(Constant::exp_c6, 1.0f / 720);
  set(Constant::exp_c7, 1.0f / 5040);
  set(Constant::tanh_clamp, 10.0f);    // tanh(x) rounds to 1 in float from x = 9.011 on (tanh(9) does not)
  set(Constant::tanh_small, 0.55f);    // below: polynomial (no cancellation); above: exp form
  set(Constant::tanh_c1, -1.0 / 3);
  set(Constant::tanh_c2, 2.0 / 15);
  set(Constant::tanh_c3, -17.0 / 315);
  set(Constant::tanh_c4, 62.0 / 2835);
  set(Constant::tanh_c5, -1382.0 / 155925);
  set(Constant::tanh_c6, 21844.0 / 6081075);
  set(Constant::tanh_c7, -929569.0 / 638512875);
  set(Constant::tanh_c8, 6404582.0 / 10854718875.0);
  // log1p(t) = 2 atanh(s) = s (2 + 2/3 s^2 + 2/5 s^4 + ...), s = t / (2 + t) <= 1/3: the first
  // term left out, 2/17 s^17, is below 2^-27 of the sum.
  set(Constant::atanh_c1, 2.0f);
  set(Constant::atanh_c3, 2.0 / 3);
  set(Constant::atanh_c5, 2.0 / 5);
  set(Constant::atanh_c7, 2.0 / 7);
  set(Constant::atanh_c9, 2.0 / 9);
  set(Constant::atanh_c11, 2.0 / 11);
  set(Constant::atanh_c13, 2.0 / 13);
  set(Constant::atanh_c15, 2.0 / 15);
  // softsign(x) rounds to +-1 from |x| = 2^25 on; bounded, 1 / (1 + |x|) stays a normal float
  // (vrcpps flushes results below 2^-126 to 0).
  set(Constant::softsign_clamp, 0x1p30f);
  return t;
}();

// AVX2 scales by 2^n through the exponent bits, which hold 2^n as a normal float for n in
// [-126, 127] only: exp's input is clamped to [-87, 88] (n = -126 .. 127, the result at most
// 1.7e38), so exp(-x) of a sigmoid's x > 87 gives 1.6e-38 for 0 and of x < -88 a finite 1.7e38,
// whose reciprocal vrcpps flushes to 0.
constexpr Table kTableAvx2 = [] {
  Table t = kTable;
  t[static_cast<int>(Constant::exp_lo)] = -87.0f;
  t[static_cast<int>(Constant::exp_hi)] = 88.0f;
  return t;
}();

constexpr std::uint8_t kSignOfDst = 0xE4;  // vpternlogd: dst = C ? A : B with A=dst, B=src, C=mask

}  // namespace

const float* activation_constants(Isa isa) { return isa == Isa::avx2 ? kTableAvx2.data() : kTable.data(); }

Activations::Activations(Xbyak::CodeGenerator& gen, const VectorIsa& isa, ActivationRegisters regs)
    : g_(gen), isa_(isa), regs_(std::move(regs)) {}

// AVX-512 stores each constant once and broadcasts it ({1to16}); AVX2 stores it once per lane.
Xbyak::Address Activations::entry(int index, bool vector) const {
  if (index >= static_cast<int>(Constant::count)) extended_ = true;
  const int bytes = (isa_.opmask ? 4 : isa_.vector_bytes()) * index;
  if (vector && isa_.opmask) return g_.ptr_b[g_.rip + table_ + bytes];
  return g_.ptr[g_.rip + table_ + bytes];
}
Xbyak::Address Activations::constant(Constant c) const { return entry(static_cast<int>(c), true); }
Xbyak::Address Activations::scalar(Constant c) const { return entry(static_cast<int>(c), false); }

// Parameter slots follow the constants, one per distinct value (by its bits).
int Activations::parameter_index(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  auto it = std::find(parameters_.begin(), parameters_.end(), bits);
  if (it == parameters_.end()) it = parameters_.insert(parameters_.end(), bits);
  return static_cast<int>(Constant::extended_count) + static_cast<int>(it - parameters_.begin());
}
Xbyak::Address Activations::parameter(float value) { return entry(parameter_index(value), true); }
Xbyak::Address Activations::parameter_scalar(float value) { return entry(parameter_index(value), false); }

void Activations::load_constants() {
  g_.vbroadcastss(regs_.one, scalar(Constant::one));
  if (!regs_.hold_bounds) return;
  g_.vbroadcastss(regs_.exp_lo, scalar(Constant::exp_lo));
  g_.vbroadcastss(regs_.exp_hi, scalar(Constant::exp_hi));
  g_.vbroadcastss(regs_.tanh_clamp, scalar(Constant::tanh_clamp));
}

void Activations::emit_constant_table() {
  g_.align(64);
  g_.L(table_);
  const int copies = isa_.opmask ? 1 : isa_.lanes;
  const float* table = activation_constants(isa_.isa);
  const int end = static_cast<int>(extended_ ? Constant::extended_count : Constant::count);
  for (int c = 0; c < end; ++c)
    for (int lane = 0; lane < copies; ++lane) g_.dd(std::bit_cast<std::uint32_t>(table[c]));
  if (!extended_) return;
  for (std::uint32_t bits : parameters_)
    for (int lane = 0; lane < copies; ++lane) g_.dd(bits);
}

Xmm Activations::bound(Constant c, const Xmm& held, const Xmm& scratch) {
  if (regs_.hold_bounds) return held;
  g_.vbroadcastss(scratch, scalar(c));
  return scratch;
}

void Activations::exp(std::span<const Xmm> v, std::span<const Xmm> n, std::span<const Xmm> p, bool clamp) {
  const std::size_t k = v.size();
  if (clamp) {  // n is free until the product below
    const Xmm lo = bound(Constant::exp_lo, regs_.exp_lo, n[0]);
    for (std::size_t i = 0; i < k; ++i) g_.vmaxps(v[i], lo, v[i]);
    const Xmm hi = bound(Constant::exp_hi, regs_.exp_hi, n[0]);
    for (std::size_t i = 0; i < k; ++i) g_.vminps(v[i], hi, v[i]);
  }
  for (std::size_t i = 0; i < k; ++i) g_.vmulps(n[i], v[i], constant(Constant::log2e));
  for (std::size_t i = 0; i < k; ++i) {  // round to nearest even
    if (isa_.opmask) g_.vrndscaleps(n[i], n[i], 0);
    else g_.vroundps(n[i], n[i], 0);
  }
  for (std::size_t i = 0; i < k; ++i) g_.vfnmadd231ps(v[i], n[i], constant(Constant::ln2_hi));
  for (std::size_t i = 0; i < k; ++i) g_.vfnmadd231ps(v[i], n[i], constant(Constant::ln2_lo));
  for (std::size_t i = 0; i < k; ++i) g_.vbroadcastss(p[i], scalar(Constant::exp_c7));
  for (Constant c : {Constant::exp_c6, Constant::exp_c5, Constant::exp_c4, Constant::exp_c3, Constant::exp_c2})
    for (std::size_t i = 0; i < k; ++i) g_.vfmadd213ps(p[i], v[i], constant(c));
  for (std::size_t i = 0; i < k; ++i) g_.vfmadd213ps(p[i], v[i], regs_.one);
  for (std::size_t i = 0; i < k; ++i) g_.vfmadd213ps(p[i], v[i], regs_.one);
  if (isa_.opmask) {
    for (std::size_t i = 0; i < k; ++i) g_.vscalefps(v[i], p[i], n[i]);
    return;
  }
  for (std::size_t i = 0; i < k; ++i) g_.vcvtps2dq(n[i], n[i]);  // exact: n is a whole number
  for (std::size_t i = 0; i < k; ++i) g_.vpslld(n[i], n[i], 23);
  for (std::size_t i = 0; i < k; ++i) g_.vpaddd(v[i], p[i], n[i]);  // p's exponent + n
}

void Activations::sigmoid(std::span<const Xmm> regs) {
  const std::size_t group = regs_.scratch.size() / 2;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    const auto n = std::span<const Xmm>(regs_.scratch).subspan(0, v.size());
    const auto p = std::span<const Xmm>(regs_.scratch).subspan(group, v.size());
    for (const Xmm& r : v) g_.vxorps(r, r, constant(Constant::sign_mask));
    exp(v, n, p, true);
    for (const Xmm& r : v) g_.vaddps(r, r, regs_.one);
    reciprocal(v, p, true);  // 1 + exp(-x) is inf for x < -88.7
  }
}

// v <- 1 / v: vrcp14ps (relative error < 2^-14) and one Newton step, y = y0 + y0 (1 - v y0),
// which squares the error (to below an ulp before rounding). A zmm vdivps holds the divider
// for 10 cycles, and an LSTM kernel has 20 per 16 units of a row: it waited on the divider
// most of its time; these are three cheap instructions. AVX2's vrcpps (< 1.5 2^-12) takes the
// series' next term too: 1 / v = y0 / (1 - e) = y0 (1 + e + e^2 + ...), e = 1 - v y0; with e
// alone 1/1 came out 1 - 2^-24 (and sigmoid(+inf) not 1), e^3 < 2^-33 is below rounding.
// 1/NaN stays NaN. With `may_be_inf`, 1/inf = 0 needs one more: 1 - inf * 0 is NaN, and
// vminps(e, 1) returns its second operand for a NaN e, so y = 0 + 0 * 1 (a NaN v still gives
// y0 = NaN, so NaN).
void Activations::reciprocal(std::span<const Xmm> v, std::span<const Xmm> y0, bool may_be_inf) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (isa_.opmask) g_.vrcp14ps(y0[i], v[i]);
    else g_.vrcpps(y0[i], v[i]);
  }
  for (std::size_t i = 0; i < v.size(); ++i) g_.vfnmadd213ps(v[i], y0[i], regs_.one);  // e = 1 - v y0
  if (may_be_inf)
    for (std::size_t i = 0; i < v.size(); ++i) g_.vminps(v[i], v[i], regs_.one);
  if (!isa_.opmask)
    for (std::size_t i = 0; i < v.size(); ++i) g_.vfmadd213ps(v[i], v[i], v[i]);  // e + e^2
  for (std::size_t i = 0; i < v.size(); ++i) g_.vfmadd213ps(v[i], y0[i], y0[i]);  // y0 + y0 e
}

// AVX2 has no k registers to hold |x| < 0.55 through the chains: it compares at the blend,
// from x again, into a register the chains no longer need.
void Activations::tanh(std::span<const Xmm> regs) {
  const std::size_t group =
      isa_.opmask ? std::min(regs_.scratch.size() / 3, regs_.masks.size()) : regs_.scratch.size() / 3;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    const std::size_t k = v.size();
    const auto a = std::span<const Xmm>(regs_.scratch).subspan(0, k);
    const auto b = std::span<const Xmm>(regs_.scratch).subspan(group, k);
    const auto c = std::span<const Xmm>(regs_.scratch).subspan(2 * group, k);
    for (std::size_t i = 0; i < k; ++i) g_.vandps(a[i], v[i], constant(Constant::abs_mask));
    if (isa_.opmask)
      for (std::size_t i = 0; i < k; ++i) g_.vcmpps(regs_.masks[i], a[i], constant(Constant::tanh_small), 0x11 /*LT_OQ*/);
    for (std::size_t i = 0; i < k; ++i) g_.vminps(b[i], bound(Constant::tanh_clamp, regs_.tanh_clamp, b[i]), a[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vaddps(b[i], b[i], b[i]);
    exp(b, a, c, false);  // 2|x| is in [0, 20] or NaN: no clamp needed
    for (std::size_t i = 0; i < k; ++i) g_.vaddps(b[i], b[i], regs_.one);
    reciprocal(b, a, false);  // exp(2|x|) + 1 <= exp(2 * clamp) + 1 is finite
    for (std::size_t i = 0; i < k; ++i) g_.vfnmadd132ps(b[i], regs_.one, constant(Constant::two));  // |tanh(x)| = 1 - 2 b
    // Small |x|: x + x^3 P(x^2).
    for (std::size_t i = 0; i < k; ++i) g_.vmulps(a[i], v[i], v[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vbroadcastss(c[i], scalar(Constant::tanh_c8));
    for (Constant cc : {Constant::tanh_c7, Constant::tanh_c6, Constant::tanh_c5, Constant::tanh_c4, Constant::tanh_c3,
                        Constant::tanh_c2, Constant::tanh_c1})
      for (std::size_t i = 0; i < k; ++i) g_.vfmadd213ps(c[i], a[i], constant(cc));
    for (std::size_t i = 0; i < k; ++i) g_.vmulps(c[i], c[i], a[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vfmadd213ps(c[i], v[i], v[i]);
    // Blend into b, then take x's sign: odd down to tanh(-0) = -0 (x + x^3 P(x^2) gives +0).
    if (isa_.opmask) {
      for (std::size_t i = 0; i < k; ++i) g_.vblendmps(b[i] | regs_.masks[i], b[i], c[i]);
      for (std::size_t i = 0; i < k; ++i) g_.vpternlogd(v[i], b[i], constant(Constant::sign_mask), kSignOfDst);
      continue;
    }
    for (std::size_t i = 0; i < k; ++i) g_.vandps(a[i], v[i], constant(Constant::abs_mask));
    for (std::size_t i = 0; i < k; ++i) g_.vcmpps(a[i], a[i], constant(Constant::tanh_small), 0x11 /*LT_OQ*/);
    for (std::size_t i = 0; i < k; ++i) g_.vblendvps(b[i], b[i], c[i], a[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vandps(b[i], b[i], constant(Constant::abs_mask));
    for (std::size_t i = 0; i < k; ++i) g_.vandps(a[i], v[i], constant(Constant::sign_mask));
    for (std::size_t i = 0; i < k; ++i) g_.vorps(v[i], a[i], b[i]);
  }
}

void Activations::relu(std::span<const Xmm> regs) {
  const Xmm& zero = regs_.scratch.front();
  g_.vxorps(zero, zero, zero);
  for (const Xmm& r : regs) g_.vmaxps(r, zero, r);
}

// ---- ONNX's activations ------------------------------------------------------------------------

void Activations::apply(const ActivationFunction& f, std::span<const Xmm> v) {
  switch (f.kind) {
    case Activation::relu: return relu(v);
    case Activation::tanh: return tanh(v);
    case Activation::sigmoid: return sigmoid(v);
    case Activation::affine: return affine(v, f.alpha, f.beta);
    case Activation::leaky_relu: return leaky_relu(v, f.alpha);
    case Activation::thresholded_relu: return thresholded_relu(v, f.alpha);
    case Activation::scaled_tanh: return scaled_tanh(v, f.alpha, f.beta);
    case Activation::hard_sigmoid: return hard_sigmoid(v, f.alpha, f.beta);
    case Activation::elu: return elu(v, f.alpha);
    case Activation::softsign: return softsign(v);
    case Activation::softplus: return softplus(v);
    case Activation::standard: break;
  }
  throw Error(fmt::format("activation fragment: no code for activation kind {} (standard must be resolved to "
                          "the cell's own first)",
                          static_cast<int>(f.kind)));
}

void Activations::compare(const Lanes& m, const Xmm& a, const Xbyak::Operand& b, int predicate) {
  if (isa_.opmask) g_.vcmpps(m.k, a, b, static_cast<std::uint8_t>(predicate));
  else g_.vcmpps(m.v, a, b, static_cast<std::uint8_t>(predicate));
}

void Activations::select(const Xmm& dst, const Lanes& m, const Xmm& src) {
  if (isa_.opmask) g_.vblendmps(dst | m.k, dst, src);
  else g_.vblendvps(dst, dst, src, m.v);
}

void Activations::affine(std::span<const Xmm> v, float alpha, float beta) {
  const Xmm& a = regs_.scratch.front();
  g_.vbroadcastss(a, parameter_scalar(alpha));
  for (const Xmm& r : v) g_.vfmadd213ps(r, a, parameter(beta));  // r = alpha r + beta
}

// A zero register, then per chain t = min(x, 0) (NaN stays NaN: x second); x = max(x, 0) + alpha t.
void Activations::leaky_relu(std::span<const Xmm> regs, float alpha) {
  const Xmm& zero = regs_.scratch.front();
  g_.vxorps(zero, zero, zero);
  const std::size_t group = regs_.scratch.size() - 1;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    const auto t = std::span<const Xmm>(regs_.scratch).subspan(1, v.size());
    for (std::size_t i = 0; i < v.size(); ++i) g_.vminps(t[i], zero, v[i]);
    for (std::size_t i = 0; i < v.size(); ++i) g_.vmaxps(v[i], zero, v[i]);
    for (std::size_t i = 0; i < v.size(); ++i) g_.vfmadd231ps(v[i], t[i], parameter(alpha));
  }
}

// x <= alpha (ordered: false for NaN) selects 0. Chain i's compare goes to mask i (AVX-512) or
// scratch register 1 + i (AVX2).
void Activations::thresholded_relu(std::span<const Xmm> regs, float alpha) {
  const Xmm& zero = regs_.scratch.front();
  g_.vxorps(zero, zero, zero);
  const std::size_t group = isa_.opmask ? regs_.masks.size() : regs_.scratch.size() - 1;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    auto lanes = [&](std::size_t i) {
      return Lanes{isa_.opmask ? regs_.masks[i] : Xbyak::Opmask(), regs_.scratch[1 + i]};
    };
    for (std::size_t i = 0; i < v.size(); ++i) compare(lanes(i), v[i], parameter(alpha), 0x12 /*LE_OQ*/);
    for (std::size_t i = 0; i < v.size(); ++i) select(v[i], lanes(i), zero);
  }
}

void Activations::scaled_tanh(std::span<const Xmm> v, float alpha, float beta) {
  for (const Xmm& r : v) g_.vmulps(r, r, parameter(beta));
  tanh(v);
  for (const Xmm& r : v) g_.vmulps(r, r, parameter(alpha));
}

// max(alpha x + beta, 0), then min(., 1): the value second both times, so NaN stays.
void Activations::hard_sigmoid(std::span<const Xmm> v, float alpha, float beta) {
  const Xmm &a = regs_.scratch[0], &zero = regs_.scratch[1];
  g_.vbroadcastss(a, parameter_scalar(alpha));
  g_.vxorps(zero, zero, zero);
  for (const Xmm& r : v) g_.vfmadd213ps(r, a, parameter(beta));
  for (const Xmm& r : v) g_.vmaxps(r, zero, r);
  for (const Xmm& r : v) g_.vminps(r, regs_.one, r);
}

// A zero register, then per chain t = min(x, 0) and exp's two scratch registers. +inf: t = 0,
// exp(0) = 1 exactly, so inf + alpha * 0; -inf: exp's clamp gives (nearly) 0, so -alpha.
void Activations::elu(std::span<const Xmm> regs, float alpha) {
  const Xmm& zero = regs_.scratch.front();
  g_.vxorps(zero, zero, zero);
  const std::size_t group = (regs_.scratch.size() - 1) / 3;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    const auto t = std::span<const Xmm>(regs_.scratch).subspan(1, v.size());
    const auto n = std::span<const Xmm>(regs_.scratch).subspan(1 + group, v.size());
    const auto p = std::span<const Xmm>(regs_.scratch).subspan(1 + 2 * group, v.size());
    for (std::size_t i = 0; i < v.size(); ++i) g_.vminps(t[i], zero, v[i]);
    exp(t, n, p, true);
    for (std::size_t i = 0; i < v.size(); ++i) g_.vsubps(t[i], t[i], regs_.one);
    for (std::size_t i = 0; i < v.size(); ++i) g_.vmaxps(v[i], zero, v[i]);
    for (std::size_t i = 0; i < v.size(); ++i) g_.vfmadd231ps(v[i], t[i], parameter(alpha));
  }
}

// Per chain a = min(|x|, 2^30), d = 1 + a (then 1 / d) and the reciprocal's scratch y.
void Activations::softsign(std::span<const Xmm> regs) {
  const std::size_t group = regs_.scratch.size() / 3;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    const std::size_t k = v.size();
    const auto a = std::span<const Xmm>(regs_.scratch).subspan(0, k);
    const auto d = std::span<const Xmm>(regs_.scratch).subspan(group, k);
    const auto y = std::span<const Xmm>(regs_.scratch).subspan(2 * group, k);
    g_.vbroadcastss(y[0], scalar(Constant::softsign_clamp));
    for (std::size_t i = 0; i < k; ++i) g_.vandps(a[i], v[i], constant(Constant::abs_mask));
    for (std::size_t i = 0; i < k; ++i) g_.vminps(a[i], y[0], a[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vaddps(d[i], a[i], regs_.one);
    reciprocal(d, y, false);  // 1 + a <= 1 + 2^30 (or NaN)
    for (std::size_t i = 0; i < k; ++i) g_.vmulps(a[i], a[i], d[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vsubps(d[i], v[i], v[i]);  // 0, or NaN for +-inf and NaN
    for (std::size_t i = 0; i < k; ++i) g_.vaddps(a[i], a[i], d[i]);
    if (isa_.opmask) {
      for (std::size_t i = 0; i < k; ++i) g_.vpternlogd(v[i], a[i], constant(Constant::sign_mask), kSignOfDst);
      continue;
    }
    for (std::size_t i = 0; i < k; ++i) g_.vandps(d[i], v[i], constant(Constant::sign_mask));
    for (std::size_t i = 0; i < k; ++i) g_.vorps(v[i], a[i], d[i]);
  }
}

// Per chain t = exp(-|x|) in (0, 1] (or NaN) and two scratch registers, n and p: exp's, then
// 1 / (2 + t) and the reciprocal's, then s^2 and the series, then n the compare's (AVX2) and p
// zero. AVX-512 compares into mask i, so at most as many chains as masks.
void Activations::softplus(std::span<const Xmm> regs) {
  const std::size_t group =
      isa_.opmask ? std::min(regs_.scratch.size() / 3, regs_.masks.size()) : regs_.scratch.size() / 3;
  for (std::size_t at = 0; at < regs.size(); at += group) {
    const auto v = regs.subspan(at, std::min(group, regs.size() - at));
    const std::size_t k = v.size();
    const auto t = std::span<const Xmm>(regs_.scratch).subspan(0, k);
    const auto n = std::span<const Xmm>(regs_.scratch).subspan(group, k);
    const auto p = std::span<const Xmm>(regs_.scratch).subspan(2 * group, k);
    for (std::size_t i = 0; i < k; ++i) g_.vorps(t[i], v[i], constant(Constant::sign_mask));  // -|x|
    exp(t, n, p, true);
    for (std::size_t i = 0; i < k; ++i) g_.vaddps(n[i], t[i], constant(Constant::two));
    reciprocal(n, p, false);  // 2 + t in [2, 3] (or NaN)
    for (std::size_t i = 0; i < k; ++i) g_.vmulps(t[i], t[i], n[i]);  // s
    for (std::size_t i = 0; i < k; ++i) g_.vmulps(n[i], t[i], t[i]);  // s^2
    for (std::size_t i = 0; i < k; ++i) g_.vbroadcastss(p[i], scalar(Constant::atanh_c15));
    for (Constant c : {Constant::atanh_c13, Constant::atanh_c11, Constant::atanh_c9, Constant::atanh_c7,
                       Constant::atanh_c5, Constant::atanh_c3, Constant::atanh_c1})
      for (std::size_t i = 0; i < k; ++i) g_.vfmadd213ps(p[i], n[i], constant(c));
    for (std::size_t i = 0; i < k; ++i) g_.vmulps(t[i], t[i], p[i]);  // log1p(exp(-|x|))
    // Below exp's clamp (x < exp_lo) the term is exp(x), which underflows: 0, as the twin's,
    // not AVX2's exp(-87) = 1.6e-38 (a cell multiplying it by an infinity must get NaN).
    const Xmm& zero = p[0];
    g_.vxorps(zero, zero, zero);
    auto lanes = [&](std::size_t i) { return Lanes{isa_.opmask ? regs_.masks[i] : Xbyak::Opmask(), n[i]}; };
    for (std::size_t i = 0; i < k; ++i) compare(lanes(i), v[i], constant(Constant::exp_lo), 0x11 /*LT_OQ*/);
    for (std::size_t i = 0; i < k; ++i) select(t[i], lanes(i), zero);
    for (std::size_t i = 0; i < k; ++i) g_.vmaxps(v[i], zero, v[i]);
    for (std::size_t i = 0; i < k; ++i) g_.vaddps(v[i], v[i], t[i]);
  }
}

}  // namespace rnnjit::x64
