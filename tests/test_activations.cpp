// Accuracy of the activation fragments (codegen/x64/activations.hpp), AVX-512 and AVX2, against
// double precision: max ulp error of sigmoid and tanh over a sweep of [-20, 20] (a stride through all
// float bit patterns, a dense linear grid, and every float around the tanh branch point), plus
// special values (+-0, +-inf, NaN, denormals, tiny and huge values, the clamps).
//
// The fragments run inside a test-only JitGenerator with the register split of GateEmitter
// (x64::gate_activation_registers()) on all its slot registers at once (12 zmm, 8 ymm), more
// than one group of each fragment, and on a single register.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak_util.h>

#include <functional>
#include <span>

#include "codegen/register_budgets.hpp"
#include "codegen/x64/activations.hpp"
#include "codegen/x64/gate_emitter.hpp"
#include "codegen/x64/jit_generator.hpp"
#include "kernels/activation.hpp"
#include "tests/onnx_functions.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::test {
namespace {

using x64::Activations;

enum class Op { sigmoid, tanh, relu };

bool cpu_runs(Isa isa) {
  Xbyak::util::Cpu cpu;  // Xbyak also checks that the OS saves the registers' state
  if (isa == Isa::avx512) return cpu.has(Xbyak::util::Cpu::tAVX512F);
  return cpu.has(Xbyak::util::Cpu::tAVX2) && cpu.has(Xbyak::util::Cpu::tFMA);
}

// The most registers a test runs a fragment on at once: 12 zmm, or AVX2's 8 slot registers.
int most_registers(Isa isa) { return std::min(12, gate_slot_registers(isa)); }

// out[i] = op(in[i]) for `blocks` blocks of regs * lanes floats.
class ActivationKernel : public x64::JitGenerator {
 public:
  struct Args {
    const float* in;
    float* out;
    std::int64_t blocks;
  };

  using Fragment = std::function<void(Activations&, std::span<const Xbyak::Xmm>)>;

  ActivationKernel(Op op, int regs, Isa isa)
      : ActivationKernel(
            [op](Activations& a, std::span<const Xbyak::Xmm> v) {
              switch (op) {
                case Op::sigmoid: a.sigmoid(v); break;
                case Op::tanh: a.tanh(v); break;
                case Op::relu: a.relu(v); break;
              }
            },
            regs, isa) {}
  // ONNX's function f through Activations::apply.
  ActivationKernel(const ActivationFunction& f, int regs, Isa isa)
      : ActivationKernel([f](Activations& a, std::span<const Xbyak::Xmm> v) { a.apply(f, v); }, regs, isa) {}

  ActivationKernel(const Fragment& fragment, int regs, Isa isa)
      : regs_(regs), isa_(x64::vector_isa(isa)), act_(*this, isa_, x64::gate_activation_registers(isa)) {
    preamble();
    act_.load_constants();
    mov(r8, ptr[abi_arg + offsetof(Args, in)]);
    mov(r9, ptr[abi_arg + offsetof(Args, out)]);
    mov(r10, ptr[abi_arg + offsetof(Args, blocks)]);
    std::vector<Xbyak::Xmm> v;
    for (int i = 0; i < regs; ++i) v.push_back(isa_.vreg(i));
    const int bytes = isa_.vector_bytes();
    Xbyak::Label loop;
    L(loop);
    for (int i = 0; i < regs; ++i) vmovups(v[i], ptr[r8 + i * bytes]);
    fragment(act_, v);
    for (int i = 0; i < regs; ++i) vmovups(ptr[r9 + i * bytes], v[i]);
    add(r8, regs * bytes);
    add(r9, regs * bytes);
    dec(r10);
    jnz(loop, T_NEAR);
    postamble();
    text_size_ = getSize();
    act_.emit_constant_table();
    finalize();
  }

  int floats_per_block() const { return regs_ * isa_.lanes; }
  std::size_t text_size() const override { return text_size_; }  // before the table

  // Runs over any number of values (pads the last block).
  std::vector<float> operator()(const std::vector<float>& in) const {
    const std::size_t per = static_cast<std::size_t>(floats_per_block());
    const std::size_t blocks = std::max<std::size_t>(1, (in.size() + per - 1) / per);
    std::vector<float> src(blocks * per, 0.0f), dst(blocks * per);
    std::copy(in.begin(), in.end(), src.begin());
    const Args args{src.data(), dst.data(), static_cast<std::int64_t>(blocks)};
    entry()(&args);
    dst.resize(in.size());
    return dst;
  }

 private:
  int regs_;
  std::size_t text_size_ = 0;
  x64::VectorIsa isa_;
  Activations act_;
};

double reference(Op op, float xf) {
  const double x = xf;
  switch (op) {
    case Op::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::tanh: return std::tanh(x);
    case Op::relu: return x > 0 ? x : 0.0;
  }
  return 0.0;
}

// The spacing of floats at the magnitude of y (the float binade y falls in; 2^-149 below FLT_MIN).
double float_ulp(double y) {
  y = std::fabs(y);
  if (y < FLT_MIN) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(y, &e);  // y = m 2^e, m in [0.5, 1): the float exponent is e - 1
  return std::ldexp(1.0, e - 1 - 23);
}

// Error of `got` against the exact value `want`, in ulps of the float result.
double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity();
  if (std::isnan(got)) return std::numeric_limits<double>::infinity();
  if (std::isinf(want) || std::isinf(got))
    return static_cast<double>(got) == want ? 0.0 : std::numeric_limits<double>::infinity();
  // At a power of two the float spacing differs on its two sides: take the finer one (1 - 2^-24
  // against an exact 1 is one ulp, not half of one).
  return std::fabs(static_cast<double>(got) - want) / std::min(float_ulp(want), float_ulp(got));
}

struct Worst {
  double ulp = -1.0;
  float at = 0.0f;
  float got = 0.0f;
  std::size_t points = 0;
  void add(float x, float g, double e) {
    ++points;
    if (!std::isnan(ulp) && !(e <= ulp)) {  // also takes a NaN error, which then stays
      ulp = e;
      at = x;
      got = g;
    }
  }
};

// The sweep of [-20, 20]: every 97th float bit pattern from 0 to 20 with both signs (so every
// binade, denormals included, gets the same density), a dense linear grid, and every float
// within [0.5, 0.6] with both signs (the tanh fragment switches from polynomial to exp at 0.55).
// (ONNX's functions, seventeen of them, take a sparser sweep: `stride` and `grid` below.)
template <typename F>
void for_each_sweep_chunk(F&& f, std::uint32_t stride = 97, int grid = 4'000'000) {
  constexpr std::size_t kChunk = 1 << 20;
  std::vector<float> xs;
  xs.reserve(kChunk);
  auto push = [&](float x) {
    xs.push_back(x);
    if (xs.size() == kChunk) {
      f(xs);
      xs.clear();
    }
  };
  const std::uint32_t hi = std::bit_cast<std::uint32_t>(20.0f);
  for (std::uint32_t b = 0; b <= hi; b += stride) {
    push(std::bit_cast<float>(b));
    push(-std::bit_cast<float>(b));
  }
  push(20.0f);
  push(-20.0f);
  for (int i = 0; i <= grid; ++i) push(static_cast<float>(-20.0 + 40.0 * i / grid));
  for (std::uint32_t b = std::bit_cast<std::uint32_t>(0.5f); b <= std::bit_cast<std::uint32_t>(0.6f); ++b) {
    push(std::bit_cast<float>(b));
    push(-std::bit_cast<float>(b));
  }
  if (!xs.empty()) f(xs);
}

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  const float den_min = std::numeric_limits<float>::denorm_min();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, den_min, -den_min, 7 * den_min, -7 * den_min,
                          std::bit_cast<float>(0x007fffffu), -std::bit_cast<float>(0x007fffffu), FLT_MIN, -FLT_MIN,
                          1e-30f, -1e-30f, 1e-10f, -1e-10f, 0.55f, -0.55f, std::nextafter(0.55f, 0.0f),
                          -std::nextafter(0.55f, 0.0f), 1.0f, -1.0f, 9.0f, -9.0f, 9.1f, -9.1f, 10.0f, -10.0f,
                          15.0f, -15.0f, 87.0f, -87.0f, 88.0f, -88.0f, 88.7f, -88.7f, 88.72f, -88.72f, 89.0f,
                          -89.0f, 100.0f, -100.0f, 103.0f, -103.0f, 104.0f, -104.0f, 105.0f, -105.0f, 1e6f,
                          -1e6f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX};
  return v;
}

std::vector<float> nan_values() {
  return {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
          std::bit_cast<float>(0x7fc12345u), std::bit_cast<float>(0xffc00001u),
          std::bit_cast<float>(0x7f800001u) /* signalling */, std::bit_cast<float>(0xffbfffffu)};
}

// Subnormal results: sigmoid(x) for x < -87.3 lies below FLT_MIN. Between about -88.7 and -103.9
// exp(-x) overflows float, so the fragment returns 0 instead of a subnormal of at most 3e-39;
// there only an absolute error below FLT_MIN is required. Every normal result must be within
// kMaxUlp.
constexpr double kMaxUlp = 4.0;

bool underflow_accepted(float got, double want) {
  return std::fabs(want) < FLT_MIN && !std::isnan(got) && std::fabs(static_cast<double>(got) - want) < FLT_MIN;
}

double contract_error(float got, double want) { return underflow_accepted(got, want) ? 0.0 : ulp_error(got, want); }

class ActivationTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!cpu_runs(GetParam())) GTEST_SKIP() << "this CPU (or OS) cannot run " << to_string(GetParam()) << " code";
  }
  ActivationKernel kernel(Op op, int regs = 0) const {
    return ActivationKernel(op, regs ? regs : most_registers(GetParam()), GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(Isas, ActivationTest, testing::Values(Isa::avx512, Isa::avx2),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST_P(ActivationTest, SweepWithinFourUlp) {
  const ActivationKernel sigmoid = kernel(Op::sigmoid), tanh = kernel(Op::tanh), relu = kernel(Op::relu);
  Worst ws, wt;
  std::size_t relu_bad = 0;
  float relu_bad_at = 0.0f;
  for_each_sweep_chunk([&](const std::vector<float>& xs) {
    const std::vector<float> s = sigmoid(xs), t = tanh(xs), r = relu(xs);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      ws.add(xs[i], s[i], ulp_error(s[i], reference(Op::sigmoid, xs[i])));
      wt.add(xs[i], t[i], ulp_error(t[i], reference(Op::tanh, xs[i])));
      if (r[i] != (xs[i] > 0 ? xs[i] : 0.0f)) {
        ++relu_bad;
        relu_bad_at = xs[i];
      }
    }
  });
  const std::string report =
      fmt::format("sweep of [-20, 20], {} points: sigmoid max {:.3f} ulp at x={:a} ({}), tanh max {:.3f} ulp at "
                  "x={:a} ({})",
                  ws.points, ws.ulp, ws.at, ws.at, wt.ulp, wt.at, wt.at);
  std::printf("%s\n", report.c_str());
  RecordProperty("sigmoid_max_ulp", fmt::format("{:.3f}", ws.ulp));
  RecordProperty("tanh_max_ulp", fmt::format("{:.3f}", wt.ulp));
  EXPECT_LE(ws.ulp, kMaxUlp) << "sigmoid(" << ws.at << ") = " << ws.got << ", want " << reference(Op::sigmoid, ws.at);
  EXPECT_LE(wt.ulp, kMaxUlp) << "tanh(" << wt.at << ") = " << wt.got << ", want " << reference(Op::tanh, wt.at);
  EXPECT_EQ(relu_bad, 0u) << "relu wrong, e.g. at x=" << relu_bad_at;
}

// Beyond the sweep: every 61st bit pattern of |x| in (20, 200] for both functions.
TEST_P(ActivationTest, WideRangeWithinFourUlpOrUnderflow) {
  const ActivationKernel sigmoid = kernel(Op::sigmoid), tanh = kernel(Op::tanh);
  std::vector<float> xs;
  for (std::uint32_t b = std::bit_cast<std::uint32_t>(20.0f); b <= std::bit_cast<std::uint32_t>(200.0f); b += 61) {
    xs.push_back(std::bit_cast<float>(b));
    xs.push_back(-std::bit_cast<float>(b));
  }
  const std::vector<float> s = sigmoid(xs), t = tanh(xs);
  Worst ws, wt;
  std::size_t flushed = 0;
  double flushed_abs = 0.0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double want = reference(Op::sigmoid, xs[i]);
    if (underflow_accepted(s[i], want) && ulp_error(s[i], want) > kMaxUlp) {
      ++flushed;
      flushed_abs = std::max(flushed_abs, std::fabs(static_cast<double>(s[i]) - want));
    }
    ws.add(xs[i], s[i], contract_error(s[i], want));
    wt.add(xs[i], t[i], ulp_error(t[i], reference(Op::tanh, xs[i])));
  }
  std::printf("|x| in [20, 200], %zu points: sigmoid max %.3f ulp at x=%a (%zu subnormal results flushed toward 0, "
              "max abs error %.3g), tanh max %.3f ulp at x=%a\n",
              ws.points, ws.ulp, ws.at, flushed, flushed_abs, wt.ulp, wt.at);
  EXPECT_LE(ws.ulp, kMaxUlp) << "sigmoid(" << ws.at << ") = " << ws.got << ", want " << reference(Op::sigmoid, ws.at);
  EXPECT_LE(wt.ulp, kMaxUlp) << "tanh(" << wt.at << ") = " << wt.got << ", want " << reference(Op::tanh, wt.at);
}

TEST_P(ActivationTest, SpecialValues) {
  for (int regs : {1, most_registers(GetParam())}) {
    SCOPED_TRACE(fmt::format("{} registers", regs));
    const ActivationKernel sigmoid = kernel(Op::sigmoid, regs), tanh = kernel(Op::tanh, regs),
                           relu = kernel(Op::relu, regs);
    const std::vector<float> xs = special_values();
    const std::vector<float> s = sigmoid(xs), t = tanh(xs), r = relu(xs);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const float x = xs[i];
      EXPECT_LE(contract_error(s[i], reference(Op::sigmoid, x)), kMaxUlp)
          << fmt::format("sigmoid({:a} = {}) = {} ({:a}), want {}", x, x, s[i], s[i], reference(Op::sigmoid, x));
      EXPECT_LE(ulp_error(t[i], reference(Op::tanh, x)), kMaxUlp)
          << fmt::format("tanh({:a} = {}) = {} ({:a}), want {}", x, x, t[i], t[i], reference(Op::tanh, x));
      EXPECT_EQ(r[i], x > 0 ? x : 0.0f) << fmt::format("relu({})", x);
      // tanh is odd down to the sign of zero and of denormals.
      if (x == 0.0f || std::fabs(x) < FLT_MIN) {
        EXPECT_EQ(std::signbit(t[i]), std::signbit(x)) << "tanh(" << x << ")";
      }
    }
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> ends = {inf, -inf};
    const std::vector<float> se = sigmoid(ends), te = tanh(ends), re = relu(ends);
    EXPECT_EQ(se[0], 1.0f);
    EXPECT_EQ(se[1], 0.0f);
    EXPECT_EQ(te[0], 1.0f);
    EXPECT_EQ(te[1], -1.0f);
    EXPECT_EQ(re[0], inf);
    EXPECT_EQ(re[1], 0.0f);
    const std::vector<float> nans = nan_values();
    const std::vector<float> sn = sigmoid(nans), tn = tanh(nans), rn = relu(nans);
    for (std::size_t i = 0; i < nans.size(); ++i) {
      EXPECT_TRUE(std::isnan(sn[i])) << fmt::format("sigmoid(NaN {:#x}) = {}", std::bit_cast<std::uint32_t>(nans[i]), sn[i]);
      EXPECT_TRUE(std::isnan(tn[i])) << fmt::format("tanh(NaN {:#x}) = {}", std::bit_cast<std::uint32_t>(nans[i]), tn[i]);
      EXPECT_TRUE(std::isnan(rn[i])) << fmt::format("relu(NaN {:#x}) = {}", std::bit_cast<std::uint32_t>(nans[i]), rn[i]);
    }
  }
}

// NaN mixed into a register with finite lanes stays in its lane.
TEST_P(ActivationTest, NaNStaysInItsLane) {
  const ActivationKernel sigmoid = kernel(Op::sigmoid), tanh = kernel(Op::tanh), relu = kernel(Op::relu);
  std::vector<float> xs(static_cast<std::size_t>(sigmoid.floats_per_block()));
  for (std::size_t i = 0; i < xs.size(); ++i)
    xs[i] = i % 5 == 2 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(i) * 0.37f - 30.0f;
  const std::vector<float> s = sigmoid(xs), t = tanh(xs), r = relu(xs);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(std::isnan(s[i]), std::isnan(xs[i])) << i;
    EXPECT_EQ(std::isnan(t[i]), std::isnan(xs[i])) << i;
    EXPECT_EQ(std::isnan(r[i]), std::isnan(xs[i])) << i;
  }
}

// ---- ONNX's activations (Activations::apply) -----------------------------------------------
//
// Each against the scalar twin (kernels/activation.hpp) in double, over the same sweep of
// [-20, 20], beyond it, the special values and NaN. Tolerances, per function: the ulps of the
// result below, plus an absolute term where the fragment's formula cancels; a result below
// FLT_MIN may be off by less than FLT_MIN (exp's clamps, as the sigmoid's).
//   relu, leaky_relu, thresholded_relu, affine, hard_sigmoid: one rounding (an fma): 1 ulp
//   softsign: 1 + |x| rounded, a reciprocal, a product: 4 ulp
//   sigmoid, tanh: 4 ulp (above); scaled_tanh: beta x rounded, tanh, times alpha: 8 ulp
//   softplus: exp (4 ulp), s = t / (2 + t), the series and the sums: 8 ulp
//   elu: 2 ulp + |alpha| 8 2^-24 absolute: exp(x) - 1 cancels near 0, exp's ulp of 1 remains
// softplus(x) for x < -87 is exp(x), tiny: AVX2's exp clamps its input at -87 (exp = 1.6e-38),
// so there 2^-125 absolute. Where the exact value is past FLT_MAX, the float it rounds to (inf).
struct OnnxTolerance {
  double ulp;
  double absolute;
};

OnnxTolerance onnx_tolerance(const ActivationFunction& f) {
  switch (f.kind) {
    case Activation::relu: case Activation::leaky_relu: case Activation::thresholded_relu:
    case Activation::affine: case Activation::hard_sigmoid: return {1, 0};
    case Activation::softsign: return {4, 0};
    case Activation::sigmoid: case Activation::tanh: return {kMaxUlp, 0};
    case Activation::scaled_tanh: return {8, 0};
    case Activation::softplus: return {8, 0x1p-125};
    case Activation::elu: return {2, std::fabs(f.alpha) * 8 * 0x1p-24};
    case Activation::standard: break;
  }
  ADD_FAILURE() << "no tolerance for standard";
  return {0, 0};
}

// Every function of ONNX's list (tests/onnx_functions.hpp), and more parameters: negative
// ones (a negative threshold, slopes and scales) and a larger Elu alpha.
std::vector<ActivationFunction> onnx_test_functions() {
  std::vector<ActivationFunction> f = onnx_functions();
  for (const ActivationFunction& more : {ActivationFunction{Activation::affine, -1.3f, 0.4f},
                                         ActivationFunction{Activation::thresholded_relu, -0.6f},
                                         ActivationFunction{Activation::scaled_tanh, -0.7f, 2.5f},
                                         ActivationFunction{Activation::hard_sigmoid, -0.2f, 0.6f},
                                         ActivationFunction{Activation::elu, 1.9f}})
    f.push_back(more);
  return f;
}

// Whether got is within f's tolerance of the twin's double value at x; the error in ulps (or
// as a fraction of the tolerance, for the report) through `excess`.
bool onnx_within(const ActivationFunction& f, float x, float got, double* excess = nullptr) {
  double want = activate<double>(f, x);
  if (std::isinf(static_cast<float>(want))) want = static_cast<float>(want);  // overflows in float
  const OnnxTolerance tol = onnx_tolerance(f);
  double over = 0.0;
  if (std::isnan(want) || std::isinf(want) || std::isnan(got) || std::isinf(got)) {
    over = ulp_error(got, want) == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  } else if (!underflow_accepted(got, want)) {
    const double allowed = tol.ulp * std::min(float_ulp(want), float_ulp(got)) + tol.absolute;
    over = std::fabs(static_cast<double>(got) - want) / allowed;
  }
  if (excess) *excess = over;
  return over <= 1.0;
}

TEST_P(ActivationTest, OnnxFunctionsSweepWithinTheirTolerance) {
  for (const ActivationFunction& f : onnx_test_functions()) {
    const ActivationKernel k(f, most_registers(GetParam()), GetParam());
    double worst = 0.0;
    float worst_at = 0.0f, worst_got = 0.0f;
    std::size_t points = 0;
    auto check = [&](const std::vector<float>& xs) {
      const std::vector<float> got = k(xs);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        double over = 0.0;
        onnx_within(f, xs[i], got[i], &over);
        ++points;
        if (!(over <= worst)) {
          worst = over;
          worst_at = xs[i];
          worst_got = got[i];
        }
      }
    };
    for_each_sweep_chunk(check, 997, 1'000'000);
    std::vector<float> wide;  // |x| in (20, 200], and large magnitudes up to FLT_MAX
    for (std::uint32_t b = std::bit_cast<std::uint32_t>(20.0f); b <= std::bit_cast<std::uint32_t>(200.0f); b += 61) {
      wide.push_back(std::bit_cast<float>(b));
      wide.push_back(-std::bit_cast<float>(b));
    }
    for (std::uint32_t b = std::bit_cast<std::uint32_t>(200.0f); b < std::bit_cast<std::uint32_t>(FLT_MAX); b += 4093) {
      wide.push_back(std::bit_cast<float>(b));
      wide.push_back(-std::bit_cast<float>(b));
    }
    check(wide);
    std::printf("%s: %zu points, max %.3f of the tolerance at x=%a (got %a, want %a)\n", describe(f).c_str(), points,
                worst, worst_at, worst_got, activate<double>(f, worst_at));
    EXPECT_LE(worst, 1.0) << describe(f) << " at x=" << worst_at << ": " << worst_got << ", want "
                          << activate<double>(f, worst_at);
  }
}

TEST_P(ActivationTest, OnnxFunctionsSpecialValuesAndNaN) {
  for (const ActivationFunction& f : onnx_test_functions())
    for (int regs : {1, most_registers(GetParam())}) {
      const ActivationKernel k(f, regs, GetParam());
      std::vector<float> xs = special_values();
      for (float n : nan_values()) xs.push_back(n);
      xs.push_back(f.alpha);  // the threshold itself, and the floats around it
      xs.push_back(std::nextafter(f.alpha, -INFINITY));
      xs.push_back(std::nextafter(f.alpha, INFINITY));
      const std::vector<float> got = k(xs);
      for (std::size_t i = 0; i < xs.size(); ++i)
        EXPECT_TRUE(onnx_within(f, xs[i], got[i]))
            << fmt::format("{} on {} registers: f({:a} = {}) = {} ({:a}), want {}", describe(f), regs, xs[i], xs[i],
                           got[i], got[i], activate<double>(f, xs[i]));
      // NaN mixed into a register with finite lanes stays in its lane.
      std::vector<float> mixed(static_cast<std::size_t>(k.floats_per_block()));
      for (std::size_t i = 0; i < mixed.size(); ++i)
        mixed[i] = i % 5 == 2 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(i) * 0.37f - 30.0f;
      const std::vector<float> out = k(mixed);
      for (std::size_t i = 0; i < mixed.size(); ++i)
        EXPECT_EQ(std::isnan(out[i]), std::isnan(mixed[i])) << describe(f) << " lane " << i;
    }
}

// A kernel's parameters land in its table after the constants, one slot per distinct value;
// a kernel that uses none of ONNX's functions keeps the table it always had.
TEST(ActivationTable, ParametersOnlyWhereUsed) {
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    const ActivationKernel plain(Op::tanh, 2, isa);
    const ActivationKernel affine({Activation::affine, 0.7f, -0.2f}, 2, isa);
    const ActivationKernel twice(
        [](Activations& a, std::span<const Xbyak::Xmm> v) {
          a.apply({Activation::affine, 0.7f, -0.2f}, v);
          a.apply({Activation::hard_sigmoid, -0.2f, 0.7f}, v);
        },
        2, isa);
    const std::size_t per = isa == Isa::avx2 ? 32 : 4;
    const std::size_t base = per * static_cast<std::size_t>(x64::Constant::count);
    const std::size_t extended = per * static_cast<std::size_t>(x64::Constant::extended_count);
    auto table = [](const ActivationKernel& k) { return k.getSize() - (k.text_size() + 63) / 64 * 64; };
    EXPECT_EQ(table(plain), base) << to_string(isa);
    EXPECT_EQ(table(affine), extended + 2 * per) << to_string(isa);  // alpha, beta
    EXPECT_EQ(table(twice), extended + 2 * per) << to_string(isa);   // the same two values, reused
  }
}

// The table's constants are what the comments claim.
TEST(ActivationConstants, Table) {
  // AVX2's exp clamps keep 2^n a normal float (n = round(x log2 e) in [-126, 127]).
  const float* avx2 = x64::activation_constants(Isa::avx2);
  EXPECT_EQ(std::nearbyint(avx2[static_cast<int>(x64::Constant::exp_lo)] * 1.4426950408889634), -126.0);
  EXPECT_EQ(std::nearbyint(avx2[static_cast<int>(x64::Constant::exp_hi)] * 1.4426950408889634), 127.0);
  const float* c = x64::activation_constants();
  auto at = [&](x64::Constant k) { return c[static_cast<int>(k)]; };
  EXPECT_EQ(at(x64::Constant::one), 1.0f);
  EXPECT_EQ(at(x64::Constant::two), 2.0f);
  EXPECT_EQ(at(x64::Constant::zero), 0.0f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(at(x64::Constant::sign_mask)), 0x80000000u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(at(x64::Constant::abs_mask)), 0x7fffffffu);
  // ln2_hi + ln2_lo is ln 2 to well beyond float precision, and ln2_hi has few enough bits that
  // n * ln2_hi is exact for the |n| <= 150 the clamps allow.
  EXPECT_NEAR(static_cast<double>(at(x64::Constant::ln2_hi)) + at(x64::Constant::ln2_lo), std::log(2.0), 1e-11);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(at(x64::Constant::ln2_hi)) & 0x3fffu, 0u);
  // tanh saturates to exactly 1 in float from the clamp on.
  EXPECT_EQ(static_cast<float>(std::tanh(static_cast<double>(at(x64::Constant::tanh_clamp)))), 1.0f);
  // log1p's series: 2 / (2k + 1) for s^(2k + 1); the first term left out, 2/17 (1/3)^17, is below
  // 2^-27 of the sum's 2 s.
  const x64::Constant atanh[] = {x64::Constant::atanh_c1,  x64::Constant::atanh_c3,  x64::Constant::atanh_c5,
                                 x64::Constant::atanh_c7,  x64::Constant::atanh_c9,  x64::Constant::atanh_c11,
                                 x64::Constant::atanh_c13, x64::Constant::atanh_c15};
  for (int k = 0; k < 8; ++k) EXPECT_EQ(at(atanh[k]), static_cast<float>(2.0 / (2 * k + 1))) << k;
  EXPECT_LT(2.0 / 17 * std::pow(1.0 / 3, 17) / (2.0 / 3), 0x1p-27);
  // softsign's clamp: a / (1 + a) rounds to 1 there, and 1 / (1 + a) is a normal float.
  const double clamp = at(x64::Constant::softsign_clamp);
  EXPECT_EQ(static_cast<float>(clamp / (1 + clamp)), 1.0f);
  EXPECT_GT(1 / (1 + clamp), FLT_MIN);
}

}  // namespace
}  // namespace rnnjit::test
