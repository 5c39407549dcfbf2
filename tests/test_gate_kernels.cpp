// Every generated gate kernel, AVX-512 and AVX2, against its scalar twin
// (kernels/gate_reference.hpp): ISA x cells x {forward inference, forward training, backward}
// x H (tails around the vector widths of 16 and 8, primes, a large one) x rows x ld_h in
// {H, 2H} (bidirectional layout) x every unroll the emitters allow on the ISA, plus launches
// covering only part of the hidden units (cols < H), gx's rows padded (forward) and dy's rows
// apart from h's (backward).
//
// Every array lives in its own GuardedBuffer of exactly the extent the kernel may touch, run
// once with the guard page after the end and once with it before the start, so a single
// element read or written out of bounds faults. Inputs are write-protected. Elements a kernel
// must not write (columns between cols and ld_h, the reserve in inference, inputs-only carries)
// must keep their bits. LSTM forward is also run in place (c_out == c_prev).
//
// The features (LSTM peepholes and input_forget, the gate clip of every cell, the leaky ReLU's
// slope) run the same sweep on fewer sizes, with a plain absolute bound instead of the
// per-formula analysis below.
//
// Also: generated code is never writable and executable at once, and the emitters refuse
// descriptors they cannot encode.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak_util.h>

#include "codegen/kernel_args.hpp"
#include "codegen/kernel_desc.hpp"
#include "codegen/x64/gate_emitter.hpp"
#include "kernels/gate_reference.hpp"
#include "rnnjit/error.hpp"
#include "runtime/kernel.hpp"
#include "tests/guarded_buffer.hpp"
#include "tests/onnx_functions.hpp"

namespace rnnjit {
// How gtest shows a parameter (found by ADL); its default, a hex dump, is slow for 3500 cases.
void PrintTo(const KernelDesc& d, std::ostream* os) { *os << describe(d); }
}  // namespace rnnjit

namespace rnnjit::test {
namespace {

bool cpu_has_avx512() {
  static const bool has = [] {
    Xbyak::util::Cpu cpu;
    return cpu.has(Xbyak::util::Cpu::tAVX512F);  // Xbyak also checks that the OS saves zmm state
  }();
  return has;
}

bool cpu_runs(Isa isa) {
  if (isa == Isa::avx512) return cpu_has_avx512();
  Xbyak::util::Cpu cpu;
  return cpu.has(Xbyak::util::Cpu::tAVX2) && cpu.has(Xbyak::util::Cpu::tFMA);
}

constexpr Isa kGeneratedIsas[] = {Isa::avx512, Isa::avx2};

KernelDesc gate_desc(CellKind cell, Pass pass, bool training, std::uint32_t H, std::uint32_t N, std::uint32_t ld,
                     std::uint32_t unroll, std::uint32_t cols = 0, Isa isa = Isa::avx512) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(isa);
  d.cell = static_cast<std::uint8_t>(cell);
  d.pass = static_cast<std::uint8_t>(pass);
  d.training = training;
  d.hidden = H;
  d.rows = N;
  d.ld_h = ld;
  d.unroll = unroll;
  d.cols = cols ? cols : H;
  return d;
}

// The cells whose step is one gate kernel (the reset-before GRU's two-part kernels have their
// own tests: tests/test_gru_reset_before.cpp).
constexpr CellKind kOnePartCells[] = {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::rnn_sigmoid, CellKind::lstm,
                                      CellKind::gru};

// ---- The arrays of one launch ----------------------------------------------------------------

enum class Role {
  input,      // read only (write-protected)
  inout,      // read and written where touched
  output,     // written where touched; starts as the sentinel
  untouched,  // must not be written at all; starts as the sentinel
};

// A row-major array: `blocks` gate blocks of H columns per row of `stride` elements; the kernel
// touches columns [0, cols) of every block of every row.
struct Array {
  std::string name;
  Role role;
  std::size_t stride;
  int blocks;
  std::vector<float> init;  // contents before the launch

  std::size_t extent(const KernelDesc& d) const {
    return (d.rows - 1) * stride + static_cast<std::size_t>(blocks - 1) * d.hidden + d.cols;
  }
  bool touched(const KernelDesc& d, std::size_t i) const {
    const std::size_t in_row = stride ? i % stride : i;
    return in_row < static_cast<std::size_t>(blocks) * d.hidden && in_row % d.hidden < d.cols;
  }
};

constexpr std::uint32_t kSentinelBits = 0x7fa0beefu;  // a signalling NaN: reading it poisons results
const float kSentinel = std::bit_cast<float>(kSentinelBits);

struct Launch {
  KernelDesc desc;
  std::map<std::string, Array> arrays;  // absent arrays are not in the map (their pointer is null)

  void add(const std::string& name, Role role, std::size_t stride, int blocks,
           const std::function<float(int block)>& value = {}) {
    Array a{name, role, stride, blocks, {}};
    a.init.resize(a.extent(desc));
    for (std::size_t i = 0; i < a.init.size(); ++i) {
      const std::size_t in_row = stride ? i % stride : i;
      a.init[i] = role == Role::output || role == Role::untouched ? kSentinel
                                                                  : value(static_cast<int>(in_row / desc.hidden));
    }
    arrays.emplace(name, std::move(a));
  }
};

// ONNX's activations are also checked on extreme pre-activations: gx of one unit in 17 (a
// different one per gate) is +-inf, NaN, or a large magnitude past the clamps of exp (+-90)
// and tanh, or where softplus and elu switch regimes (+-30, +-1000).
void add_extremes(Array& gx, const KernelDesc& d) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float extremes[] = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), 90.0f, -90.0f,
                            30.0f, -30.0f, 1000.0f, -1000.0f};
  for (std::size_t i = 0; i < gx.init.size(); ++i) {
    if (!gx.touched(d, i)) continue;
    const std::size_t in_row = i % gx.stride, row = i / gx.stride;
    const std::size_t pick = (row * 7 + in_row % d.hidden + 5 * (in_row / d.hidden)) % 17;
    if (pick < std::size(extremes)) gx.init[i] = extremes[pick];
  }
}

Launch make_launch(const KernelDesc& d) {
  Launch l{d, {}};
  std::mt19937 rng(static_cast<std::uint32_t>(KernelDescHash{}(d)));
  auto uniform = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  auto range = [&](float lo, float hi) { return [&, lo, hi](int) { return uniform(lo, hi); }; };
  const std::size_t H = d.hidden, G = static_cast<std::size_t>(d.gates()), R = static_cast<std::size_t>(d.reserve_gates());
  const CellKind cell = d.cell_kind();
  const bool lstm = cell == CellKind::lstm, gru = cell == CellKind::gru, rnn = !lstm && !gru;
  if (d.pass_kind() == Pass::forward) {
    l.add("gx", Role::input, static_cast<std::size_t>(d.gx_stride()), static_cast<int>(G), range(-2, 2));
    l.add("gh", Role::input, G * H, static_cast<int>(G), range(-2, 2));
    l.add("bias_ih", Role::input, 0, static_cast<int>(G), range(-1, 1));
    l.add("bias_hh", Role::input, 0, static_cast<int>(G), range(-1, 1));
    l.add("h_prev", Role::input, d.ld_h, 1, range(-1, 1));
    if (lstm) l.add("c_prev", Role::input, H, 1, range(-2, 2));
    l.add("h_out", Role::output, d.ld_h, 1);
    if (lstm) l.add("c_out", Role::output, H, 1);
    if (d.peephole) l.add("peephole", Role::input, 0, 3, range(-1, 1));
    // The reserve: only LSTM and GRU training forwards write it.
    l.add("gates", d.training && !rnn ? Role::output : Role::untouched, R * H, static_cast<int>(R));
    if (d.custom_activations()) add_extremes(l.arrays.at("gx"), d);
  } else {
    l.add("dy", Role::input, static_cast<std::size_t>(d.dy_stride()), 1, range(-1, 1));
    if (cell == CellKind::rnn_tanh) l.add("h", Role::input, d.ld_h, 1, range(-1, 1));
    if (cell == CellKind::rnn_sigmoid) l.add("h", Role::input, d.ld_h, 1, range(0, 1));
    if (cell == CellKind::rnn_relu && d.relu_alpha_bits) l.add("h", Role::input, d.ld_h, 1, range(-1.5f, 1.5f));
    if (cell == CellKind::rnn_relu && !d.relu_alpha_bits)
      l.add("h", Role::input, d.ld_h, 1, [&](int) { return std::max(0.0f, uniform(-1, 1)); });
    if (gru) l.add("h_prev", Role::input, d.ld_h, 1, range(-1, 1));
    if (lstm) {
      l.add("c", Role::input, H, 1, range(-2, 2));
      l.add("c_prev", Role::input, H, 1, range(-2, 2));
    }
    // The forward's activations: LSTM i, f, g, o; GRU r, z, hn, n; RNN nothing (output only).
    l.add("gates", Role::inout, R * H, static_cast<int>(R), [&](int block) {
      if (lstm) return block == 2 ? uniform(-1, 1) : uniform(0, 1);
      if (gru) return block == 2 ? uniform(-3, 3) : block == 3 ? uniform(-1, 1) : uniform(0, 1);
      return uniform(-4, 4);
    });
    l.add("dh_carry", gru ? Role::inout : Role::input, H, 1, range(-1, 1));
    if (lstm) l.add("dc_carry", Role::inout, H, 1, range(-1, 1));
    if (d.peephole) l.add("peephole", Role::input, 0, 3, range(-1, 1));
  }
  return l;
}

// ---- Tolerances ------------------------------------------------------------------------------
//
// Kernel and twin compute the same formulas in float; they differ in three ways, each bounded
// per element from the element's own operands (first-order forward error analysis; u = 2^-24
// is the unit roundoff, |x| u bounds the rounding of a result x):
//  * activations: the fragments are within 4 ulp (tests/test_activations.cpp), the twin's
//    tanhf and 1 / (1 + expf(-x)) within about 2; an ulp is at most 2u relative, so the same
//    input gives activations differing by at most A = 12u |value|.
//  * the order of the four pre-activation addends: ((gx + gh) + b_ih) + b_hh against
//    ((gx + b_ih) + gh) + b_hh, 3 roundings each side at partial sums of at most
//    P = |gx| + |gh| + |b_ih| + |b_hh|: 6u P, carried through the activation by its slope.
//  * fused multiply-adds (f c_prev + i g, 1 - x^2, r hn + x, z d + n) round once where the twin
//    rounds twice or three times, and products are associated differently: a few u times the
//    magnitude of each partial product, as noted at each formula.
// Errors then propagate through the cell's math by its partial derivatives. The comparison
// allows twice the first-order bound (second-order terms are below u^2, the factor 2 is
// margin for the bounds' own rounding) plus 4u |value| (two roundings of the output itself,
// even where both sides evaluate the same expression, in case the compiler contracts the
// twin's a * b + c).
constexpr double kU = 0x1p-24;
constexpr double kAct = 12 * kU;

using Bounds = std::map<std::string, std::vector<double>>;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

bool has_features(const KernelDesc& d) {
  return d.peephole || d.input_forget || d.gate_clip_bits || d.relu_alpha_bits || d.custom_activations();
}

// Inputs are at most 2 in magnitude and every output is a short chain of products and sums of
// them, so 512u (3e-5) absolute is tens of times the rounding and far below any mistake.
constexpr double kFeatureBound = 512 * kU;

Bounds error_bounds(const Launch& l) {
  const KernelDesc& d = l.desc;
  const std::size_t H = d.hidden;
  Bounds b;
  for (const auto& [name, a] : l.arrays)
    if (a.role == Role::output || a.role == Role::inout) b[name].assign(a.init.size(), has_features(d) ? kFeatureBound : 0.0);
  if (has_features(d)) return b;
  // Element (row n, gate block g, column j) of an array, and its bound.
  auto in = [&](const char* name, std::size_t n, std::size_t g, std::size_t j) -> double {
    const Array& a = l.arrays.at(name);
    return a.init[n * a.stride + g * H + j];
  };
  auto bound = [&](const char* name, std::size_t n, std::size_t g, std::size_t j) -> double& {
    return b.at(name)[n * l.arrays.at(name).stride + g * H + j];
  };
  const bool training_reserve = d.training && (d.cell_kind() == CellKind::lstm || d.cell_kind() == CellKind::gru);
  for (std::size_t n = 0; n < d.rows; ++n)
    for (std::size_t j = 0; j < d.cols; ++j) {
      if (d.pass_kind() == Pass::forward) {
        auto pre = [&](std::size_t g) { return in("gx", n, g, j) + in("gh", n, g, j) + in("bias_ih", 0, g, j) + in("bias_hh", 0, g, j); };
        auto dpre = [&](std::size_t g) {
          return 6 * kU * (std::fabs(in("gx", n, g, j)) + std::fabs(in("gh", n, g, j)) + std::fabs(in("bias_ih", 0, g, j)) +
                           std::fabs(in("bias_hh", 0, g, j)));
        };
        auto sig = [&](std::size_t g, double& v) { v = sigmoid(pre(g)); return v * (1 - v) * dpre(g) + kAct * v; };
        auto th = [&](std::size_t g, double& v) { v = std::tanh(pre(g)); return (1 - v * v) * dpre(g) + kAct * std::fabs(v); };
        switch (d.cell_kind()) {
          case CellKind::gru_reset_before:  // its two-part kernels: tests/test_gru_reset_before.cpp
            ADD_FAILURE() << "this sweep has no gru_reset_before kernels";
            break;
          case CellKind::rnn_relu: bound("h_out", n, 0, j) = dpre(0); break;
          case CellKind::rnn_tanh: { double h; bound("h_out", n, 0, j) = th(0, h); break; }
          case CellKind::rnn_sigmoid: { double h; bound("h_out", n, 0, j) = sig(0, h); break; }
          case CellKind::lstm: {
            double i, f, g, o;
            const double di = sig(0, i), df = sig(1, f), dg = th(2, g), dO = sig(3, o);
            const double cp = in("c_prev", n, 0, j), c = f * cp + i * g;
            // c = f c_prev + i g: kernel rounds f c_prev and the fma, the twin both products and the sum.
            const double dc = std::fabs(cp) * df + std::fabs(g) * di + i * dg + 3 * kU * (std::fabs(f * cp) + std::fabs(i * g));
            const double t = std::tanh(c), dt = (1 - t * t) * dc + kAct * std::fabs(t);
            bound("c_out", n, 0, j) = dc;
            bound("h_out", n, 0, j) = std::fabs(t) * dO + o * dt;
            if (training_reserve) {
              bound("gates", n, 0, j) = di;
              bound("gates", n, 1, j) = df;
              bound("gates", n, 2, j) = dg;
              bound("gates", n, 3, j) = dO;
            }
            break;
          }
          case CellKind::gru: {
            double r, z;
            const double dr = sig(0, r), dz = sig(1, z);
            const double hn = in("gh", n, 2, j) + in("bias_hh", 0, 2, j);  // same two operands, same order: exact match
            const double x = in("gx", n, 2, j) + in("bias_ih", 0, 2, j);   // likewise
            // pre_n = x + r hn: one fma in the kernel, a product and a sum in the twin.
            const double dpn = std::fabs(hn) * dr + 3 * kU * (std::fabs(x) + std::fabs(r * hn));
            const double nn = std::tanh(x + r * hn), dn = (1 - nn * nn) * dpn + kAct * std::fabs(nn);
            // h = n + z (h_prev - n): dh/dn = 1 - z, dh/dz = h_prev - n; one sub and an fma against
            // a sub, a product and a sum.
            const double dd = in("h_prev", n, 0, j) - nn;
            bound("h_out", n, 0, j) = (1 - z) * dn + std::fabs(dd) * dz + 4 * kU * std::fabs(z * dd);
            if (training_reserve) {
              bound("gates", n, 0, j) = dr;
              bound("gates", n, 1, j) = dz;
              bound("gates", n, 2, j) = 0;
              bound("gates", n, 3, j) = dn;
            }
            break;
          }
        }
      } else {
        const double dh = in("dy", n, 0, j) + in("dh_carry", n, 0, j);
        switch (d.cell_kind()) {
          case CellKind::gru_reset_before:  // its two-part kernels: tests/test_gru_reset_before.cpp
            ADD_FAILURE() << "this sweep has no gru_reset_before kernels";
            break;
          case CellKind::rnn_relu: bound("gates", n, 0, j) = 0; break;  // dh or 0 on both sides
          case CellKind::rnn_sigmoid: {
            // (dh h)(1 - h): the same three roundings in the same order on both sides.
            const double h = in("h", n, 0, j);
            bound("gates", n, 0, j) = 3 * kU * std::fabs(dh * h * (1 - h));
            break;
          }
          case CellKind::rnn_tanh: {
            // dh (1 - h^2): 1 - h^2 fused in the kernel; the twin rounds h^2 (u h^2) and the difference.
            const double h = in("h", n, 0, j);
            bound("gates", n, 0, j) = std::fabs(dh) * (kU * h * h + 2 * kU * (1 - h * h));
            break;
          }
          case CellKind::lstm: {
            const double i = in("gates", n, 0, j), f = in("gates", n, 1, j), g = in("gates", n, 2, j), o = in("gates", n, 3, j);
            const double cp = in("c_prev", n, 0, j), tc = std::tanh(in("c", n, 0, j)), dtc = kAct * std::fabs(tc);
            // s = 1 - tanh(c)^2: fused in the kernel, two roundings in the twin.
            const double s = 1 - tc * tc, ds = 2 * std::fabs(tc) * dtc + kU * tc * tc + 2 * kU * s;
            // dc = dc_carry + (dh o) s: an fma against a product and a sum.
            const double dc = in("dc_carry", n, 0, j) + dh * o * s;
            const double ddc = std::fabs(dh * o) * ds + 2 * kU * (std::fabs(dh * o * s) + std::fabs(dc));
            // Products of four factors associated differently (and i (1 - i) fused): 8u.
            bound("gates", n, 0, j) = std::fabs(g * i * (1 - i)) * ddc + 8 * kU * std::fabs(dc * g * i * (1 - i));
            bound("gates", n, 1, j) = std::fabs(cp * f * (1 - f)) * ddc + 8 * kU * std::fabs(dc * cp * f * (1 - f));
            bound("gates", n, 2, j) = std::fabs(i * (1 - g * g)) * ddc + std::fabs(dc * i) * (kU * g * g + 2 * kU * (1 - g * g)) +
                                      6 * kU * std::fabs(dc * i * (1 - g * g));
            bound("gates", n, 3, j) = std::fabs(dh * o * (1 - o)) * dtc + 8 * kU * std::fabs(dh * tc * o * (1 - o));
            bound("dc_carry", n, 0, j) = f * ddc + 2 * kU * std::fabs(dc * f);
            break;
          }
          case CellKind::gru: {
            const double r = in("gates", n, 0, j), z = in("gates", n, 1, j), hn = in("gates", n, 2, j), nn = in("gates", n, 3, j);
            // dn = dh (1 - z)(1 - n^2): the kernel forms dh - dh z and fuses 1 - n^2; the twin rounds
            // 1 - z, dh (1 - z), n^2, 1 - n^2 and the product.
            const double s = 1 - nn * nn, dn = dh * (1 - z) * s;
            const double ddn = s * 3 * kU * std::fabs(dh) * (std::fabs(z) + std::fabs(1 - z)) +
                               std::fabs(dh * (1 - z)) * (kU * nn * nn + 2 * kU * s) + 2 * kU * std::fabs(dn);
            bound("gates", n, 0, j) = std::fabs(hn * r * (1 - r)) * ddn + 8 * kU * std::fabs(dn * hn * r * (1 - r));
            bound("gates", n, 1, j) = 8 * kU * std::fabs(dh * (in("h_prev", n, 0, j) - nn) * z * (1 - z));
            bound("gates", n, 2, j) = r * ddn + 2 * kU * std::fabs(dn * r);
            bound("gates", n, 3, j) = ddn;
            bound("dh_carry", n, 0, j) = 0;  // dh z on both sides
            break;
          }
        }
      }
    }
  return b;
}

double tolerance(double bound, double want) { return 2 * bound + 4 * kU * std::fabs(want); }

// ONNX's activations (KernelDesc::activation): inputs reach large magnitudes (below), so the
// feature bound scales with the result, 1 + |want|: products of activations such as Affine's
// grow with them. NaN must meet NaN and an infinity the same infinity (checked apart).
double tolerance(const KernelDesc& d, double bound, double want) {
  return d.custom_activations() ? tolerance(bound * (1 + std::fabs(want)), want) : tolerance(bound, want);
}

// Largest error seen per cell and pass: in units of u, and as a fraction of its tolerance
// (printed at the end of the run).
struct Worst {
  double u = 0.0, ratio = 0.0;
  void add(const Worst& o) { u = std::max(u, o.u); ratio = std::max(ratio, o.ratio); }
};

std::map<std::string, Worst>& worst_errors() {
  static std::map<std::string, Worst> m;
  return m;
}

std::string family(const KernelDesc& d) {
  return fmt::format("{}_{}_{}{}", to_string(d.cell_kind()),
                     d.pass_kind() == Pass::backward ? "bwd" : (d.training ? "fwd_train" : "fwd"), to_string(d.isa_kind()),
                     d.custom_activations() ? "_onnx_act" : "");
}

class PrintWorstErrors : public testing::Environment {
 public:
  void TearDown() override {
    if (worst_errors().empty()) return;
    std::printf("largest |kernel - twin| per family: in units of u = 2^-24, and as a fraction of its tolerance\n");
    for (const auto& [name, w] : worst_errors()) std::printf("  %-20s %8.2f u  %6.3f\n", name.c_str(), w.u, w.ratio);
  }
};
[[maybe_unused]] testing::Environment* const kPrintWorst = testing::AddGlobalTestEnvironment(new PrintWorstErrors);

// Pointers of one launch, from a name -> data map (absent: null).
template <typename Get>
void run(const CompiledKernel* kernel, const KernelDesc& d, Get&& ptr) {
  if (d.pass_kind() == Pass::forward) {
    GateForwardArgs a{ptr("gx"),    ptr("gh"),    ptr("bias_ih"), ptr("bias_hh"), ptr("h_prev"),
                      ptr("c_prev"), ptr("h_out"), ptr("c_out"),   ptr("gates"),   ptr("peephole")};
    if (kernel) (*kernel)(&a);
    else gate_forward_reference(d, a);
  } else {
    GateBackwardArgs a{ptr("dy"),    ptr("h"),        ptr("h_prev"),   ptr("c"),       ptr("c_prev"),
                       ptr("gates"), ptr("dh_carry"), ptr("dc_carry"), ptr("peephole")};
    if (kernel) (*kernel)(&a);
    else gate_backward_reference(d, a);
  }
}

// The twin's results on plain vectors.
std::map<std::string, std::vector<float>> reference(const Launch& l) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, a] : l.arrays) out[name] = a.init;
  run(nullptr, l.desc, [&](const std::string& name) -> float* {
    auto it = out.find(name);
    return it == out.end() ? nullptr : it->second.data();
  });
  return out;
}

// Compares one array after the kernel ran.
Worst check_array(const KernelDesc& d, const Array& a, std::span<const float> got, const std::vector<float>& want,
                  const std::vector<double>* bound, const std::string& where) {
  Worst worst;
  int failures = 0;
  for (std::size_t i = 0; i < got.size() && failures < 5; ++i) {
    const std::size_t row = a.stride ? i / a.stride : 0, in_row = a.stride ? i % a.stride : i;
    auto at = [&] {
      return fmt::format("{} {}[row {}, gate {}, col {}]", where, a.name, row, in_row / d.hidden, in_row % d.hidden);
    };
    if (a.role == Role::input || a.role == Role::untouched || !a.touched(d, i)) {
      if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(a.init[i])) {
        ADD_FAILURE() << at() << " was written (" << got[i] << ", was " << a.init[i] << ") but must not be";
        ++failures;
      }
      continue;
    }
    if ((std::isnan(got[i]) && std::isnan(want[i])) || (std::isinf(want[i]) && got[i] == want[i])) continue;
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double tol = tolerance(d, bound->at(i), want[i]);
    if (!(err <= tol)) {
      ADD_FAILURE() << at() << " = " << got[i] << ", twin " << want[i] << ", |diff| = " << err / kU
                    << " u, tolerance " << tol / kU << " u";
      ++failures;
      continue;
    }
    worst.add({err / kU, tol > 0 ? err / tol : 0.0});
  }
  return worst;
}

Worst check_all(const Launch& l, const std::map<std::string, std::vector<float>>& want, const Bounds& bounds,
                const std::function<std::span<const float>(const std::string&)>& got, const std::string& where) {
  Worst worst;
  for (const auto& [name, a] : l.arrays) {
    const auto b = bounds.find(name);
    worst.add(check_array(l.desc, a, got(name), want.at(name), b == bounds.end() ? nullptr : &b->second, where));
  }
  return worst;
}

// Runs the kernel on guarded copies of the launch's arrays and checks every array.
Worst run_guarded(const CompiledKernel& k, const Launch& l, const std::map<std::string, std::vector<float>>& want,
                  const Bounds& bounds, Guard guard) {
  std::map<std::string, GuardedBuffer> bufs;
  for (const auto& [name, a] : l.arrays) {
    GuardedBuffer b(a.init.size(), guard);
    b.assign(a.init);
    if (a.role == Role::input) b.read_only();
    bufs.emplace(name, std::move(b));
  }
  run(&k, l.desc, [&](const std::string& name) -> float* {
    auto it = bufs.find(name);
    return it == bufs.end() ? nullptr : it->second.data();
  });
  return check_all(l, want, bounds, [&](const std::string& name) { return std::as_const(bufs.at(name)).span(); },
                   guard == Guard::after ? "[guard after]" : "[guard before]");
}

// LSTM forward with c_out == c_prev: one buffer "c", read then overwritten element by element.
Worst run_in_place(const CompiledKernel& k, const Launch& l, Bounds bounds) {
  Launch in_place = l;
  Array c = l.arrays.at("c_prev");
  c.name = "c (c_prev == c_out)";
  c.role = Role::inout;
  in_place.arrays.erase("c_prev");
  in_place.arrays.erase("c_out");
  in_place.arrays.emplace("c", c);
  bounds["c"] = bounds.at("c_out");
  std::map<std::string, std::vector<float>> want;
  for (const auto& [name, a] : in_place.arrays) want[name] = a.init;
  auto ptr_of = [](auto& m) {
    return [&m](const std::string& name) -> float* {
      auto it = m.find(name == "c_prev" || name == "c_out" ? std::string("c") : name);
      return it == m.end() ? nullptr : it->second.data();
    };
  };
  run(nullptr, l.desc, ptr_of(want));
  std::map<std::string, GuardedBuffer> bufs;
  for (const auto& [name, a] : in_place.arrays) {
    GuardedBuffer b(a.init.size());
    b.assign(a.init);
    if (a.role == Role::input) b.read_only();
    bufs.emplace(name, std::move(b));
  }
  run(&k, l.desc, ptr_of(bufs));
  return check_all(in_place, want, bounds, [&](const std::string& name) { return std::as_const(bufs.at(name)).span(); },
                   "[in place]");
}

// ---- The sweep -------------------------------------------------------------------------------

std::vector<KernelDesc> sweep(Isa isa) {
  std::vector<KernelDesc> descs;
  auto gate_desc = [isa](CellKind cell, Pass pass, bool training, std::uint32_t H, std::uint32_t N, std::uint32_t ld,
                         std::uint32_t unroll, std::uint32_t cols = 0) {
    return test::gate_desc(cell, pass, training, H, N, ld, unroll, cols, isa);
  };
  struct PassMode {
    Pass pass;
    bool training;
  };
  const PassMode passes[] = {{Pass::forward, false}, {Pass::forward, true}, {Pass::backward, false}};
  for (CellKind cell : kOnePartCells)
    for (const PassMode& pm : passes) {
      const int max_unroll = max_gate_unroll(cell, pm.pass, isa);
      for (std::uint32_t H : {1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 100, 800})
        for (std::uint32_t N : {1, 3, 5})
          for (std::uint32_t ld : {H, 2 * H})
            for (int u = 1; u <= max_unroll; ++u) descs.push_back(gate_desc(cell, pm.pass, pm.training, H, N, ld, u));
      // Launches over part of the hidden units (the pointers start at the first unit covered).
      for (std::uint32_t H : {33, 100, 800})
        for (std::uint32_t cols : {1, 15, 16, 17, 47, 64})
          if (cols < H)
            for (std::uint32_t ld : {H, 2 * H})
              descs.push_back(gate_desc(cell, pm.pass, pm.training, H, 3, ld, max_unroll, cols));
      // gx's rows padded past G*H (to whole vectors, as the planner pads them, or by 3 floats).
      if (pm.pass == Pass::forward)
        for (std::uint32_t H : {1, 17, 33, 100})
          for (std::uint32_t cols : {0u, 16u})
            for (const std::uint32_t pad : {0u, 3u}) {
              if (cols >= H) continue;
              KernelDesc d = gate_desc(cell, pm.pass, pm.training, H, 3, 2 * H, max_unroll, cols);
              const std::uint32_t gh = static_cast<std::uint32_t>(d.gates()) * H;
              d.gx_row_stride = pad ? gh + pad : (gh + 15) / 16 * 16;
              if (d.gx_row_stride != gh) descs.push_back(d);
            }
      // dy's rows apart from h's: summed directions read the one gradient of their sum, H wide,
      // where h is 2H wide (and an odd stride, 3 floats past H).
      if (pm.pass == Pass::backward)
        for (std::uint32_t H : {1, 15, 17, 33, 100, 800})
          for (std::uint32_t cols : {0u, 16u})
            for (const std::uint32_t dy_stride : {H, H + 3})
              for (int u : max_unroll > 1 ? std::vector<int>{1, max_unroll} : std::vector<int>{1}) {
                if (cols >= H) continue;
                KernelDesc d = gate_desc(cell, pm.pass, pm.training, H, 3, 2 * H, u, cols);
                d.dy_row_stride = dy_stride;
                descs.push_back(d);
              }
    }
  // The features, alone and together. A gate clip of 0.7 holds about half of the forward's
  // pre-activations (sums of four values in [-2, 2]) and, backward, treats the random gate
  // values outside (act(-0.7), act(0.7)) as clamped. The leaky ReLU's slopes: 0.3 (not a power
  // of two: alpha * x rounds) and 1.5 (above 1; its clamped h = -1.05 is inside the backward's
  // h in [-1.5, 1.5]).
  struct Features {
    bool peephole, input_forget, gate_clip;
    float relu_alpha = 0.0f;
  };
  const Features features[] = {{true, false, false},        {false, true, false},       {false, false, true},
                               {true, true, false},         {true, false, true},        {true, true, true},
                               {false, false, false, 0.3f}, {false, false, true, 0.3f}, {false, false, true, 1.5f}};
  for (CellKind cell : kOnePartCells)
    for (const PassMode& pm : passes)
      for (const Features& f : features) {
        if (cell != CellKind::lstm && (f.peephole || f.input_forget)) continue;
        if (cell != CellKind::rnn_relu && f.relu_alpha > 0.0f) continue;
        for (std::uint32_t H : {1, 15, 17, 33, 100})
          for (std::uint32_t ld : {H, 2 * H})
            for (int u = 1; u <= max_gate_unroll(cell, pm.pass, isa); ++u)
              for (std::uint32_t cols : {0u, 16u}) {
                if (cols >= H) continue;
                KernelDesc d = gate_desc(cell, pm.pass, pm.training, H, 3, ld, u, cols);
                d.peephole = f.peephole;
                d.input_forget = f.input_forget;
                d.gate_clip_bits = f.gate_clip ? std::bit_cast<std::uint32_t>(0.7f) : 0u;
                d.relu_alpha_bits = std::bit_cast<std::uint32_t>(f.relu_alpha);
                descs.push_back(d);
              }
      }
  return descs;
}

// ONNX's activations (forward inference only: training refuses them), every function in every
// role of every one-part cell (the reset-before GRU's: tests/test_gru_reset_before.cpp), the
// other roles the cell's own; and all roles at once. Nontrivial alpha and beta, and the LSTM's
// features in turn (peepholes, input_forget, cell clip, gate clip), the leaky ReLU's slope on
// rnn_relu (which ONNX's function then replaces).
std::vector<KernelDesc> onnx_activation_sweep(Isa isa) {
  std::vector<KernelDesc> descs;
  const auto functions = onnx_functions();
  const CellKind cells[] = {CellKind::rnn_tanh, CellKind::rnn_relu, CellKind::lstm, CellKind::gru};
  for (CellKind cell : cells) {
    const int roles = activation_role_count(cell);
    for (int role = -1; role < roles; ++role)  // -1: every role its own function of the list
      for (std::size_t k = 0; k < functions.size(); ++k) {
        ActivationFunction fn[kActivationRoles];
        for (int r = 0; r < roles; ++r) {
          fn[r] = role < 0 ? functions[(k + 4 * static_cast<std::size_t>(r)) % functions.size()]
                           : r == role ? functions[k]
                                       : cell_activation(cell, static_cast<ActivationRole>(r));
        }
        for (std::uint32_t H : {1u, 19u, 37u})
          for (std::uint32_t ld : {H, 2 * H})
            for (int u : {1, max_gate_unroll(cell, Pass::forward, isa)}) {
              KernelDesc d = gate_desc(cell, Pass::forward, false, H, 3, ld, static_cast<std::uint32_t>(u),
                                       H > 16 ? 17u : 0u, isa);
              for (int r = 0; r < roles; ++r) {
                d.activation[r] = static_cast<std::uint8_t>(fn[r].kind);
                d.activation_alpha_bits[r] = std::bit_cast<std::uint32_t>(fn[r].alpha);
                d.activation_beta_bits[r] = std::bit_cast<std::uint32_t>(fn[r].beta);
              }
              if (!d.custom_activations()) continue;
              if (cell == CellKind::rnn_relu) d.relu_alpha_bits = std::bit_cast<std::uint32_t>(0.3f);
              if (cell == CellKind::lstm) {
                const std::size_t feature = (k + H) % 5;
                d.peephole = feature == 1 || feature == 4;
                d.input_forget = feature == 2;
                d.clip_bits = feature == 3 || feature == 4 ? std::bit_cast<std::uint32_t>(1.5f) : 0u;
              }
              if ((k + ld) % 3 == 0) d.gate_clip_bits = std::bit_cast<std::uint32_t>(2.5f);
              if (u > 1 && ld == 2 * H) {  // gx's rows padded, as the planner pads them
                const std::uint32_t gh = static_cast<std::uint32_t>(d.gates()) * H;
                d.gx_row_stride = (gh + 15) / 16 * 16 == gh ? gh + 3 : (gh + 15) / 16 * 16;
              }
              descs.push_back(d);
            }
      }
  }
  return descs;
}

std::vector<KernelDesc> sweep() {
  std::vector<KernelDesc> descs;
  for (Isa isa : kGeneratedIsas) {
    for (const KernelDesc& d : sweep(isa)) descs.push_back(d);
    std::set<std::string> names;  // "all roles" can repeat a one-role case: once each
    for (const KernelDesc& d : onnx_activation_sweep(isa))
      if (names.insert(kernel_name(d)).second) descs.push_back(d);
  }
  return descs;
}

class GateKernel : public testing::TestWithParam<KernelDesc> {};

TEST_P(GateKernel, MatchesScalarTwin) {
  const KernelDesc& d = GetParam();
  if (!cpu_runs(d.isa_kind())) GTEST_SKIP() << "this CPU (or OS) cannot run " << to_string(d.isa_kind()) << " code";
  const CompiledKernel kernel(d);
  ASSERT_FALSE(kernel.code().empty()) << "no generated code for an " << to_string(d.isa_kind()) << " descriptor";
  const Launch l = make_launch(d);
  const auto want = reference(l);
  const Bounds bounds = error_bounds(l);
  Worst worst = run_guarded(kernel, l, want, bounds, Guard::after);
  worst.add(run_guarded(kernel, l, want, bounds, Guard::before));
  if (d.cell_kind() == CellKind::lstm && d.pass_kind() == Pass::forward) worst.add(run_in_place(kernel, l, bounds));
  RecordProperty("max_error_u", fmt::format("{:.2f}", worst.u));
  RecordProperty("max_error_over_tolerance", fmt::format("{:.3f}", worst.ratio));
  worst_errors()[family(d)].add(worst);
}

INSTANTIATE_TEST_SUITE_P(Sweep, GateKernel, testing::ValuesIn(sweep()),
                         [](const testing::TestParamInfo<KernelDesc>& info) { return kernel_name(info.param); });

// ---- The guard pages themselves ------------------------------------------------------------

TEST(GuardedBufferDeathTest, FaultsOneElementOutside) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (std::size_t n : {1u, 5u, 1024u, 1500u}) {
    GuardedBuffer after(n, Guard::after), before(n, Guard::before);
    after.fill(1.0f);
    before.fill(2.0f);
    EXPECT_EQ(after[n - 1] + after[0], 2.0f);  // both ends accessible
    EXPECT_EQ(before[n - 1] + before[0], 4.0f);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(after.data() + n) % GuardedBuffer::page_size(), 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(before.data()) % GuardedBuffer::page_size(), 0u);
    EXPECT_DEATH(static_cast<void>(*static_cast<volatile float*>(after.data() + n)), "") << n;
    EXPECT_DEATH(static_cast<void>(*static_cast<volatile float*>(before.data() - 1)), "") << n;
    after.read_only();
    EXPECT_EQ(after[n - 1], 1.0f);
    EXPECT_DEATH(*static_cast<volatile float*>(after.data()) = 0.0f, "") << n;
    after.writable();
    after[0] = 3.0f;
    EXPECT_EQ(after[0], 3.0f);
  }
}

// ---- W^X ---------------------------------------------------------------------------------------

struct Mapping {
  std::uintptr_t begin, end;
  std::string perms, line;
};

std::vector<Mapping> mappings() {
  std::ifstream maps("/proc/self/maps");
  std::vector<Mapping> out;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream s(line);
    std::string range, perms;
    s >> range >> perms;
    const auto dash = range.find('-');
    out.push_back({std::stoull(range.substr(0, dash), nullptr, 16), std::stoull(range.substr(dash + 1), nullptr, 16),
                   perms, line});
  }
  return out;
}

TEST(GateKernelCode, NeverWritableAndExecutable) {
  // Generating needs no AVX-512, only running does: this test runs on any x86-64.
  std::vector<std::unique_ptr<CompiledKernel>> kernels;
  for (CellKind cell : kOnePartCells)
    for (Pass pass : {Pass::forward, Pass::backward})
      kernels.push_back(std::make_unique<CompiledKernel>(gate_desc(cell, pass, pass == Pass::forward, 100, 3, 200, 2)));
  const std::vector<Mapping> maps = mappings();
  ASSERT_FALSE(maps.empty()) << "cannot read /proc/self/maps";
  for (const auto& k : kernels) {
    const auto code = reinterpret_cast<std::uintptr_t>(k->code().data());
    ASSERT_NE(code, 0u);
    const auto it = std::find_if(maps.begin(), maps.end(), [&](const Mapping& m) { return m.begin <= code && code < m.end; });
    ASSERT_NE(it, maps.end()) << k->name() << ": its code is in no mapping";
    EXPECT_EQ(it->perms.substr(0, 3), "r-x") << k->name() << ": " << it->line;
    // The whole code (constant table included) lies in that one mapping.
    EXPECT_LE(code + k->code().size(), it->end) << k->name();
  }
  for (const Mapping& m : maps)
    EXPECT_FALSE(m.perms.find('w') != std::string::npos && m.perms.find('x') != std::string::npos)
        << "writable and executable: " << m.line;
}

// ---- Refusals ----------------------------------------------------------------------------------

void expect_refused(const KernelDesc& d, const std::string& needle) {
  try {
    x64::emit_gate_kernel(d);
    ADD_FAILURE() << describe(d) << ": emitted, but must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << describe(d) << ": " << e.what();
  }
}

// A forward kernel's gx rows stream from L3 or memory (a step's slice of the T-long projection):
// every vector prefetches its line of every gate block of the row that about 8 vectors of work
// ahead reaches, so the activations do not wait on the loads. Checked in the code itself: the
// first vector's prefetch of the first block, for thread shares one vector wide to a DS2 half.
TEST(GateKernelCode, ForwardKernelsPrefetchGxRowsAhead) {
  for (CellKind cell : kOnePartCells)
    for (const auto& [H, cols] : {std::pair<std::uint32_t, std::uint32_t>{40, 40}, {800, 400}, {800, 16}, {100, 17}}) {
      const CompiledKernel k(gate_desc(cell, Pass::forward, false, H, 3, H, 1, cols));
      const std::int64_t vectors = (cols + 15) / 16, rows_ahead = (8 + vectors - 1) / vectors;
      const std::int64_t row_bytes = std::int64_t{4} * gate_count(cell) * H;
      const std::string want = fmt::format("prefetcht0 [r8+rcx*1+0x{:X}]", rows_ahead * row_bytes);
      EXPECT_NE(k.disassembly().find(want), std::string::npos) << k.name() << ": no " << want;
    }
}

TEST(GateKernelRefusals, MoreRegistersThanExist) {
  // Slot registers per unrolled vector: forward LSTM/GRU 4, RNN 1; backward LSTM/GRU 8, RNN 3;
  // 16 slot registers on AVX-512, 8 on AVX2.
  expect_refused(gate_desc(CellKind::lstm, Pass::backward, false, 64, 2, 64, 3), "registers");
  expect_refused(gate_desc(CellKind::gru, Pass::backward, false, 64, 2, 64, 3), "registers");
  expect_refused(gate_desc(CellKind::lstm, Pass::forward, true, 64, 2, 64, 5), "registers");
  expect_refused(gate_desc(CellKind::gru, Pass::forward, false, 64, 2, 64, 5), "registers");
  expect_refused(gate_desc(CellKind::rnn_tanh, Pass::backward, false, 64, 2, 64, 6), "registers");
  expect_refused(gate_desc(CellKind::rnn_relu, Pass::forward, false, 64, 2, 64, 17), "registers");
  // Through the runtime too.
  EXPECT_THROW(CompiledKernel(gate_desc(CellKind::lstm, Pass::backward, false, 64, 2, 64, 3)), Error);
  expect_refused(gate_desc(CellKind::lstm, Pass::backward, false, 64, 2, 64, 2, 0, Isa::avx2), "registers");
  expect_refused(gate_desc(CellKind::lstm, Pass::forward, false, 64, 2, 64, 3, 0, Isa::avx2), "registers");
  expect_refused(gate_desc(CellKind::rnn_tanh, Pass::backward, false, 64, 2, 64, 3, 0, Isa::avx2), "registers");
  // What max_gate_unroll promises is accepted, and one more is not.
  for (Isa isa : kGeneratedIsas)
    for (CellKind cell : kOnePartCells)
      for (Pass pass : {Pass::forward, Pass::backward}) {
        const int most = max_gate_unroll(cell, pass, isa);
        EXPECT_GE(most, 1);
        EXPECT_NO_THROW(x64::emit_gate_kernel(gate_desc(cell, pass, false, 64, 2, 64, most, 0, isa)))
            << to_string(cell) << " " << to_string(isa);
        if (most < 4)
          expect_refused(gate_desc(cell, pass, false, 64, 2, 64, most + 1, 0, isa), "registers");
      }
}

TEST(GateKernelRefusals, IsaWithoutAnEmitter) {
  for (Isa isa : {Isa::reference, Isa::cuda})
    expect_refused(gate_desc(CellKind::lstm, Pass::forward, false, 64, 2, 64, 1, 0, isa), "isa");
  // The runtime binds the scalar twin instead: no generated code.
  const CompiledKernel twin(gate_desc(CellKind::lstm, Pass::forward, false, 64, 2, 64, 1, 0, Isa::reference));
  EXPECT_TRUE(twin.code().empty());
}

TEST(GateKernelRefusals, RowStridesUnderTheHiddenSize) {
  expect_refused(gate_desc(CellKind::lstm, Pass::forward, false, 64, 2, 63, 1), "ld_h");
  KernelDesc d = gate_desc(CellKind::rnn_tanh, Pass::backward, false, 64, 2, 128, 1);
  d.dy_row_stride = 63;
  expect_refused(d, "dy's row stride");
  d.dy_row_stride = 64;
  EXPECT_NO_THROW(x64::emit_gate_kernel(d));
}

TEST(GateKernelRefusals, ReluAlphaOutsideTheLeakyRelu) {
  KernelDesc d = gate_desc(CellKind::rnn_tanh, Pass::forward, false, 64, 2, 64, 1);
  d.relu_alpha_bits = std::bit_cast<std::uint32_t>(0.5f);
  expect_refused(d, "relu_alpha");  // not a ReLU
  d.cell = static_cast<std::uint8_t>(CellKind::rnn_relu);
  for (float bad : {-0.5f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    d.relu_alpha_bits = std::bit_cast<std::uint32_t>(bad);
    expect_refused(d, "relu_alpha");
  }
}

TEST(GateKernelRefusals, ZeroUnroll) {
  expect_refused(gate_desc(CellKind::lstm, Pass::forward, false, 64, 2, 64, 0), "unroll");
}

}  // namespace
}  // namespace rnnjit::test
