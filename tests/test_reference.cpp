// Tests of the scalar reference (kernels/reference.hpp), the oracle for everything else:
//  - tiny cases whose expected values are written out as formulas here (std::exp, std::tanh),
//  - finite-difference gradient checks in double of backward_data + backward_weights,
//  - float against double, activations at extreme inputs, null-pointer conventions.
#include "kernels/reference.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "rnnjit/weights.hpp"
#include "tests/worst.hpp"

namespace rnnjit {
namespace {

using reference::Reserve;
using i64 = std::int64_t;

double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Writes `values` into the block called `name` of the canonical buffer w.
void set_block(const WeightLayout& layout, std::vector<double>& w, const std::string& name,
               const std::vector<double>& values) {
  std::span<double> v = layout.view(std::span<double>(w), name);
  ASSERT_EQ(v.size(), values.size()) << name;
  std::copy(values.begin(), values.end(), v.begin());
}

struct Outputs {
  std::vector<double> y, hy, cy;
};

Outputs run_forward(const RnnConfig& cfg, const Shape& shape, const std::vector<double>& w,
                    const std::vector<double>& x, const double* h0, const double* c0) {
  Outputs o;
  o.y.assign(static_cast<std::size_t>(y_elements(cfg, shape)), -99.0);
  o.hy.assign(static_cast<std::size_t>(state_elements(cfg, shape)), -99.0);
  o.cy.assign(static_cast<std::size_t>(state_elements(cfg, shape)), -99.0);
  reference::forward<double>(cfg, shape, w.data(), x.data(), h0, c0, o.y.data(), o.hy.data(), o.cy.data(),
                             nullptr);
  return o;
}

constexpr double kExact = 1e-14;

// ---------------------------------------------------------------------------------------------
// Activations.

template <typename T>
void check_activations() {
  using reference::sigmoid;
  using reference::tanh_;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T big = std::numeric_limits<T>::max();
  EXPECT_EQ(sigmoid<T>(T(0)), T(0.5));
  EXPECT_EQ(sigmoid<T>(T(1000)), T(1));
  EXPECT_EQ(sigmoid<T>(big), T(1));
  EXPECT_EQ(sigmoid<T>(inf), T(1));
  EXPECT_EQ(sigmoid<T>(-inf), T(0));
  EXPECT_GE(sigmoid<T>(T(-1000)), T(0));
  EXPECT_LT(sigmoid<T>(T(-1000)), T(1e-30));
  EXPECT_GE(sigmoid<T>(-big), T(0));
  EXPECT_TRUE(std::isnan(sigmoid<T>(nan)));
  EXPECT_EQ(tanh_<T>(T(1000)), T(1));
  EXPECT_EQ(tanh_<T>(-big), T(-1));
  EXPECT_EQ(tanh_<T>(inf), T(1));
  EXPECT_EQ(tanh_<T>(-inf), T(-1));
  EXPECT_TRUE(std::isnan(tanh_<T>(nan)));
  const T tol = std::numeric_limits<T>::epsilon() * 4;
  for (double v : {-20.0, -3.5, -1.0, -0.25, 0.1, 0.7, 2.0, 15.0}) {
    EXPECT_NEAR(double(sigmoid<T>(T(v))), sig(v), tol) << v;
    EXPECT_NEAR(double(tanh_<T>(T(v))), std::tanh(v), tol) << v;
    // Symmetry sigma(-x) = 1 - sigma(x).
    EXPECT_NEAR(double(sigmoid<T>(T(-v))), 1.0 - double(sigmoid<T>(T(v))), tol) << v;
  }
}

TEST(ReferenceActivations, Float) { check_activations<float>(); }
TEST(ReferenceActivations, Double) { check_activations<double>(); }

// ---------------------------------------------------------------------------------------------
// Tiny cases computed by hand.

TEST(ReferenceHand, RnnTanhTwoSteps) {
  const RnnConfig cfg{CellKind::rnn_tanh, 1, 1, 1, false};
  const Shape shape{2, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  const double a = 0.5, b = -0.7, c = 0.1, d = 0.2;
  set_block(layout, w, "weight_ih_l0", {a});
  set_block(layout, w, "weight_hh_l0", {b});
  set_block(layout, w, "bias_ih_l0", {c});
  set_block(layout, w, "bias_hh_l0", {d});
  const std::vector<double> x{0.3, -1.2};
  const double h0 = 0.4;
  const Outputs o = run_forward(cfg, shape, w, x, &h0, nullptr);
  const double h1 = std::tanh(a * x[0] + c + b * h0 + d);
  const double h2 = std::tanh(a * x[1] + c + b * h1 + d);
  EXPECT_NEAR(o.y[0], h1, kExact);
  EXPECT_NEAR(o.y[1], h2, kExact);
  EXPECT_NEAR(o.hy[0], h2, kExact);
  EXPECT_EQ(o.cy[0], -99.0) << "cy must not be written for a vanilla RNN";

  // Without h0 the initial state is zero.
  const Outputs z = run_forward(cfg, shape, w, x, nullptr, nullptr);
  const double g1 = std::tanh(a * x[0] + c + d);
  EXPECT_NEAR(z.y[0], g1, kExact);
  EXPECT_NEAR(z.y[1], std::tanh(a * x[1] + c + b * g1 + d), kExact);
}

TEST(ReferenceHand, RnnReluClipsAtZero) {
  const RnnConfig cfg{CellKind::rnn_relu, 1, 1, 1, false};
  const Shape shape{3, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  const double a = 2.0, b = 0.5, c = -0.1, d = 0.3;
  set_block(layout, w, "weight_ih_l0", {a});
  set_block(layout, w, "weight_hh_l0", {b});
  set_block(layout, w, "bias_ih_l0", {c});
  set_block(layout, w, "bias_hh_l0", {d});
  const std::vector<double> x{-1.0, 0.75, 0.1};
  const double h0 = 0.6;
  const Outputs o = run_forward(cfg, shape, w, x, &h0, nullptr);
  const double p1 = a * x[0] + c + b * h0 + d;  // negative
  ASSERT_LT(p1, 0.0);
  const double h1 = std::max(p1, 0.0);
  const double h2 = std::max(a * x[1] + c + b * h1 + d, 0.0);
  const double h3 = std::max(a * x[2] + c + b * h2 + d, 0.0);
  EXPECT_EQ(o.y[0], 0.0);
  EXPECT_NEAR(o.y[1], h2, kExact);
  EXPECT_NEAR(o.y[2], h3, kExact);
  EXPECT_NEAR(o.hy[0], h3, kExact);
}

TEST(ReferenceHand, RnnLeakyReluAndSigmoid) {
  const double a = 2.0, b = 0.5, c = -0.1, d = 0.3, alpha = 0.25;
  const std::vector<double> x{-1.0, 0.75};
  const double h0 = 0.6;
  for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_sigmoid}) {
    RnnConfig cfg{cell, 1, 1, 1, false};
    if (cell == CellKind::rnn_relu) cfg.relu_alpha = static_cast<float>(alpha);  // 0.25: exact in float
    const WeightLayout layout(cfg);
    std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
    set_block(layout, w, "weight_ih_l0", {a});
    set_block(layout, w, "weight_hh_l0", {b});
    set_block(layout, w, "bias_ih_l0", {c});
    set_block(layout, w, "bias_hh_l0", {d});
    const Outputs o = run_forward(cfg, Shape{2, 1}, w, x, &h0, nullptr);
    auto act = [&](double p) {
      return cell == CellKind::rnn_relu ? (p > 0 ? p : alpha * p) : 1.0 / (1.0 + std::exp(-p));
    };
    const double p1 = a * x[0] + c + b * h0 + d;  // negative: the leaky part
    ASSERT_LT(p1, 0.0);
    const double h1 = act(p1), h2 = act(a * x[1] + c + b * h1 + d);
    EXPECT_NEAR(o.y[0], h1, kExact) << to_string(cell);
    EXPECT_NEAR(o.y[1], h2, kExact) << to_string(cell);
    EXPECT_NEAR(o.hy[0], h2, kExact) << to_string(cell);
  }
}

// H=2, I=1, N=2: checks the row-major [G*H, in] weight layout (W_hh is not symmetric) and
// the [T, N, H] activation layout.
TEST(ReferenceHand, RnnTanhMatrixLayout) {
  const RnnConfig cfg{CellKind::rnn_tanh, 1, 2, 1, false};
  const Shape shape{1, 2};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  const double wih[2] = {0.3, -0.8};
  const double whh[2][2] = {{0.1, 0.9}, {-0.4, 0.25}};
  const double bih[2] = {0.05, -0.02}, bhh[2] = {0.2, 0.01};
  set_block(layout, w, "weight_ih_l0", {wih[0], wih[1]});
  set_block(layout, w, "weight_hh_l0", {whh[0][0], whh[0][1], whh[1][0], whh[1][1]});
  set_block(layout, w, "bias_ih_l0", {bih[0], bih[1]});
  set_block(layout, w, "bias_hh_l0", {bhh[0], bhh[1]});
  const std::vector<double> x{0.7, -0.3};                  // [T=1, N=2, I=1]
  const std::vector<double> h0{0.5, -0.6, 0.2, 0.9};       // [1, N=2, H=2]
  const Outputs o = run_forward(cfg, shape, w, x, h0.data(), nullptr);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 2; ++j) {
      const double pre = wih[j] * x[n] + bih[j] + whh[j][0] * h0[n * 2 + 0] + whh[j][1] * h0[n * 2 + 1] + bhh[j];
      EXPECT_NEAR(o.y[n * 2 + j], std::tanh(pre), kExact) << "n=" << n << " j=" << j;
      EXPECT_NEAR(o.hy[n * 2 + j], std::tanh(pre), kExact) << "n=" << n << " j=" << j;
    }
}

TEST(ReferenceHand, LstmTwoSteps) {
  const RnnConfig cfg{CellKind::lstm, 1, 1, 1, false};
  const Shape shape{2, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  // Gate rows i, f, g, o.
  const double wx[4] = {0.4, -0.3, 0.8, 0.6}, wh[4] = {-0.5, 0.7, 0.2, -0.9};
  const double bx[4] = {0.1, 0.9, -0.2, 0.05}, bh[4] = {0.02, 0.3, 0.15, -0.1};
  set_block(layout, w, "weight_ih_l0", {wx[0], wx[1], wx[2], wx[3]});
  set_block(layout, w, "weight_hh_l0", {wh[0], wh[1], wh[2], wh[3]});
  set_block(layout, w, "bias_ih_l0", {bx[0], bx[1], bx[2], bx[3]});
  set_block(layout, w, "bias_hh_l0", {bh[0], bh[1], bh[2], bh[3]});
  const std::vector<double> x{0.9, -0.4};
  const double h0 = -0.3, c0 = 0.8;
  auto pre = [&](int g, double xv, double hv) { return wx[g] * xv + bx[g] + wh[g] * hv + bh[g]; };
  auto step = [&](double xv, double& h, double& c) {
    const double i = sig(pre(0, xv, h)), f = sig(pre(1, xv, h)), g = std::tanh(pre(2, xv, h)),
                 o = sig(pre(3, xv, h));
    c = f * c + i * g;
    h = o * std::tanh(c);
  };
  double h = h0, c = c0;
  step(x[0], h, c);
  const double h1 = h;
  step(x[1], h, c);
  const Outputs o = run_forward(cfg, shape, w, x, &h0, &c0);
  EXPECT_NEAR(o.y[0], h1, kExact);
  EXPECT_NEAR(o.y[1], h, kExact);
  EXPECT_NEAR(o.hy[0], h, kExact);
  EXPECT_NEAR(o.cy[0], c, kExact);
}

// GRU, PyTorch's formulation: the reset gate multiplies (W_hn h + b_hn), b_hn inside.
TEST(ReferenceHand, GruTwoStepsLinearBeforeReset) {
  const RnnConfig cfg{CellKind::gru, 1, 1, 1, false};
  const Shape shape{2, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  // Gate rows r, z, n.
  const double wx[3] = {0.6, -0.4, 1.1}, wh[3] = {0.3, 0.8, -0.7};
  const double bx[3] = {-0.2, 0.1, 0.25}, bh[3] = {0.4, -0.3, 0.6};
  set_block(layout, w, "weight_ih_l0", {wx[0], wx[1], wx[2]});
  set_block(layout, w, "weight_hh_l0", {wh[0], wh[1], wh[2]});
  set_block(layout, w, "bias_ih_l0", {bx[0], bx[1], bx[2]});
  set_block(layout, w, "bias_hh_l0", {bh[0], bh[1], bh[2]});
  const std::vector<double> x{-0.5, 1.3};
  const double h0 = 0.45;
  auto step = [&](double xv, double hv) {
    const double r = sig(wx[0] * xv + bx[0] + wh[0] * hv + bh[0]);
    const double z = sig(wx[1] * xv + bx[1] + wh[1] * hv + bh[1]);
    const double n = std::tanh(wx[2] * xv + bx[2] + r * (wh[2] * hv + bh[2]));
    return (1 - z) * n + z * hv;
  };
  const double h1 = step(x[0], h0), h2 = step(x[1], h1);
  const Outputs o = run_forward(cfg, shape, w, x, &h0, nullptr);
  EXPECT_NEAR(o.y[0], h1, kExact);
  EXPECT_NEAR(o.y[1], h2, kExact);
  EXPECT_NEAR(o.hy[0], h2, kExact);
  EXPECT_EQ(o.cy[0], -99.0) << "cy must not be written for GRU";
}

// The reverse direction runs t = T-1..0 from its own h0, writes its outputs at their time index
// in columns [H, 2H), and its hy is its state after t = 0.
TEST(ReferenceHand, RnnTanhBidirectional) {
  const RnnConfig cfg{CellKind::rnn_tanh, 1, 1, 1, true};
  const Shape shape{2, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  const double a = 0.5, b = -0.7, c = 0.1, d = 0.2;       // forward
  const double ar = -0.9, br = 0.6, cr = 0.3, dr = -0.15;  // reverse
  set_block(layout, w, "weight_ih_l0", {a});
  set_block(layout, w, "weight_hh_l0", {b});
  set_block(layout, w, "bias_ih_l0", {c});
  set_block(layout, w, "bias_hh_l0", {d});
  set_block(layout, w, "weight_ih_l0_reverse", {ar});
  set_block(layout, w, "weight_hh_l0_reverse", {br});
  set_block(layout, w, "bias_ih_l0_reverse", {cr});
  set_block(layout, w, "bias_hh_l0_reverse", {dr});
  const std::vector<double> x{0.8, -0.6};
  const std::vector<double> h0{0.2, -0.4};  // [L*D = 2, N, H]: forward, reverse
  const double f0 = std::tanh(a * x[0] + c + b * h0[0] + d);
  const double f1 = std::tanh(a * x[1] + c + b * f0 + d);
  const double r1 = std::tanh(ar * x[1] + cr + br * h0[1] + dr);
  const double r0 = std::tanh(ar * x[0] + cr + br * r1 + dr);
  const Outputs o = run_forward(cfg, shape, w, x, h0.data(), nullptr);
  // y [T=2, N=1, 2]
  EXPECT_NEAR(o.y[0], f0, kExact);
  EXPECT_NEAR(o.y[1], r0, kExact);
  EXPECT_NEAR(o.y[2], f1, kExact);
  EXPECT_NEAR(o.y[3], r1, kExact);
  EXPECT_NEAR(o.hy[0], f1, kExact);
  EXPECT_NEAR(o.hy[1], r0, kExact);
}

// Two bidirectional layers, T=1: layer 1 takes [forward, reverse] of layer 0 (I_1 = 2H).
TEST(ReferenceHand, RnnTanhTwoLayersBidirectional) {
  const RnnConfig cfg{CellKind::rnn_tanh, 1, 1, 2, true};
  const Shape shape{1, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  set_block(layout, w, "weight_ih_l0", {0.7});
  set_block(layout, w, "weight_hh_l0", {0.2});
  set_block(layout, w, "bias_ih_l0", {0.1});
  set_block(layout, w, "bias_hh_l0", {-0.3});
  set_block(layout, w, "weight_ih_l0_reverse", {-0.5});
  set_block(layout, w, "weight_hh_l0_reverse", {0.4});
  set_block(layout, w, "bias_ih_l0_reverse", {0.05});
  set_block(layout, w, "bias_hh_l0_reverse", {0.15});
  set_block(layout, w, "weight_ih_l1", {0.9, -1.1});
  set_block(layout, w, "weight_hh_l1", {0.3});
  set_block(layout, w, "bias_ih_l1", {-0.2});
  set_block(layout, w, "bias_hh_l1", {0.25});
  set_block(layout, w, "weight_ih_l1_reverse", {-0.6, 0.35});
  set_block(layout, w, "weight_hh_l1_reverse", {-0.8});
  set_block(layout, w, "bias_ih_l1_reverse", {0.12});
  set_block(layout, w, "bias_hh_l1_reverse", {-0.07});
  const std::vector<double> x{0.6};
  const std::vector<double> h0{0.1, -0.2, 0.3, -0.4};  // (l0 fwd, l0 rev, l1 fwd, l1 rev)
  const double f = std::tanh(0.7 * x[0] + 0.1 + 0.2 * h0[0] - 0.3);
  const double r = std::tanh(-0.5 * x[0] + 0.05 + 0.4 * h0[1] + 0.15);
  const double f2 = std::tanh(0.9 * f - 1.1 * r - 0.2 + 0.3 * h0[2] + 0.25);
  const double r2 = std::tanh(-0.6 * f + 0.35 * r + 0.12 - 0.8 * h0[3] - 0.07);
  const Outputs o = run_forward(cfg, shape, w, x, h0.data(), nullptr);
  EXPECT_NEAR(o.y[0], f2, kExact);
  EXPECT_NEAR(o.y[1], r2, kExact);
  EXPECT_NEAR(o.hy[0], f, kExact);
  EXPECT_NEAR(o.hy[1], r, kExact);
  EXPECT_NEAR(o.hy[2], f2, kExact);
  EXPECT_NEAR(o.hy[3], r2, kExact);
}

// One tanh step, L = Ry*y + Rhy*hy: every gradient by the chain rule.
TEST(ReferenceHand, RnnTanhBackwardOneStep) {
  const RnnConfig cfg{CellKind::rnn_tanh, 1, 1, 1, false};
  const Shape shape{1, 1};
  const WeightLayout layout(cfg);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()));
  const double a = 0.5, b = -0.7, c = 0.1, d = 0.2, x = 0.3, h0 = 0.4, ry = 1.5, rhy = -0.25;
  set_block(layout, w, "weight_ih_l0", {a});
  set_block(layout, w, "weight_hh_l0", {b});
  set_block(layout, w, "bias_ih_l0", {c});
  set_block(layout, w, "bias_hh_l0", {d});
  Reserve<double> rs;
  double y = 0, hy = 0;
  reference::forward<double>(cfg, shape, w.data(), &x, &h0, nullptr, &y, &hy, nullptr, &rs);
  const double h = std::tanh(a * x + c + b * h0 + d);
  ASSERT_NEAR(y, h, kExact);
  double dx = 0, dh0 = 0;
  reference::backward_data<double>(cfg, shape, w.data(), rs, &ry, &rhy, nullptr, &dx, &dh0, nullptr);
  std::vector<double> dw(w.size(), std::nan(""));
  reference::backward_weights<double>(cfg, shape, rs, dw.data());
  const double dpre = (ry + rhy) * (1 - h * h);
  EXPECT_NEAR(dx, dpre * a, kExact);
  EXPECT_NEAR(dh0, dpre * b, kExact);
  EXPECT_NEAR(layout.view(std::span<double>(dw), "weight_ih_l0")[0], dpre * x, kExact);
  EXPECT_NEAR(layout.view(std::span<double>(dw), "weight_hh_l0")[0], dpre * h0, kExact);
  EXPECT_NEAR(layout.view(std::span<double>(dw), "bias_ih_l0")[0], dpre, kExact);
  EXPECT_NEAR(layout.view(std::span<double>(dw), "bias_hh_l0")[0], dpre, kExact);
}

// ---------------------------------------------------------------------------------------------
// Finite-difference gradient checks (double).

struct GradCase {
  CellKind cell;
  i64 input, hidden, layers;
  bool bidirectional;
  i64 seq_len, batch;
  bool with_states;   // h0/c0 passed to forward (else null => zeros)
  bool with_dstates;  // loss includes hy and cy (else dhy/dcy passed as null)
  float relu_alpha = 0.0f;  // rnn_relu: the leaky slope
};

std::string case_name(const GradCase& c) {
  return fmt::format("{}{}_I{}_H{}_L{}_D{}_T{}_N{}{}{}", to_string(c.cell), c.relu_alpha > 0 ? "_leaky" : "", c.input,
                     c.hidden, c.layers, c.bidirectional ? 2 : 1, c.seq_len, c.batch, c.with_states ? "" : "_noh0",
                     c.with_dstates ? "" : "_nodhy");
}

void PrintTo(const GradCase& c, std::ostream* os) { *os << case_name(c); }

void fill_uniform(std::vector<double>& v, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& e : v) e = dist(rng);
}

// Indices of a vector of `size` elements to check: all of them up to `limit`, otherwise an
// evenly spaced subset that always includes the first and the last element.
std::vector<i64> sample(i64 size, i64 limit) {
  std::vector<i64> idx;
  if (size <= limit) {
    for (i64 i = 0; i < size; ++i) idx.push_back(i);
    return idx;
  }
  for (i64 k = 0; k < limit; ++k) idx.push_back(k * (size - 1) / (limit - 1));
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  return idx;
}

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, MatchesCentralDifferences) {
  const GradCase gc = GetParam();
  RnnConfig cfg{gc.cell, gc.input, gc.hidden, gc.layers, gc.bidirectional};
  cfg.relu_alpha = gc.relu_alpha;
  const Shape shape{gc.seq_len, gc.batch};
  const WeightLayout layout(cfg);
  const bool lstm = gc.cell == CellKind::lstm, relu = gc.cell == CellKind::rnn_relu;
  std::mt19937_64 rng(std::hash<std::string>{}(case_name(gc)));

  const auto nx = static_cast<std::size_t>(x_elements(cfg, shape));
  const auto ny = static_cast<std::size_t>(y_elements(cfg, shape));
  const auto ns = static_cast<std::size_t>(state_elements(cfg, shape));
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements())), x(nx), h0(ns, 0.0), c0(ns, 0.0);
  const double scale = 1.0 / std::sqrt(double(gc.hidden));  // PyTorch's init range
  fill_uniform(w, rng, -scale, scale);
  if (relu) {
    // Positive biases keep most relu units active, so that the check is not vacuous (a dead
    // unit has zero gradient everywhere); the nonzero count is asserted below.
    for (const ParamBlock& b : layout.blocks())
      if (b.kind == ParamKind::bias_ih || b.kind == ParamKind::bias_hh)
        for (i64 i = 0; i < b.size; ++i) {
          double& v = w[static_cast<std::size_t>(b.offset + i)];
          v = std::abs(v);
        }
  }
  fill_uniform(x, rng, -1, 1);
  if (gc.with_states) {
    fill_uniform(h0, rng, -1, 1);
    fill_uniform(c0, rng, -1, 1);
  }
  std::vector<double> ry(ny), rhy(ns, 0.0), rcy(ns, 0.0);
  fill_uniform(ry, rng, -1, 1);
  if (gc.with_dstates) {
    fill_uniform(rhy, rng, -1, 1);
    if (lstm) fill_uniform(rcy, rng, -1, 1);
  }

  // Analytical gradients. States omitted => pass null to forward; the finite differences
  // below then perturb explicit zero states, which must be the same function.
  Reserve<double> rs;
  std::vector<double> y(ny), hy(ns), cy(ns);
  reference::forward<double>(cfg, shape, w.data(), x.data(), gc.with_states ? h0.data() : nullptr,
                             gc.with_states ? c0.data() : nullptr, y.data(), hy.data(), cy.data(), &rs);
  std::vector<double> dx(nx, std::nan("")), dh0(ns, std::nan("")), dc0(ns, std::nan("")),
      dw(w.size(), std::nan(""));
  reference::backward_data<double>(cfg, shape, w.data(), rs, ry.data(), gc.with_dstates ? rhy.data() : nullptr,
                                   (gc.with_dstates && lstm) ? rcy.data() : nullptr, dx.data(), dh0.data(),
                                   lstm ? dc0.data() : nullptr);
  reference::backward_weights<double>(cfg, shape, rs, dw.data());

  // ReLU: the relu kinks make the loss non-differentiable on a measure-zero set; a central
  // difference that straddles one is meaningless. Detect that exactly by comparing which
  // units are active (h > 0) at w +- eps with the base point, and skip those elements.
  auto active_mask = [&](const Reserve<double>& r) {
    std::vector<bool> m;
    for (const auto& hs : r.h)
      for (double v : hs) m.push_back(v > 0);
    return m;
  };
  const std::vector<bool> base_mask = relu ? active_mask(rs) : std::vector<bool>{};

  Reserve<double> probe;
  auto loss = [&](bool& kink) {
    reference::forward<double>(cfg, shape, w.data(), x.data(), h0.data(), c0.data(), y.data(), hy.data(),
                               cy.data(), relu ? &probe : nullptr);
    if (relu && active_mask(probe) != base_mask) kink = true;
    double s = 0;
    for (std::size_t i = 0; i < ny; ++i) s += y[i] * ry[i];
    for (std::size_t i = 0; i < ns; ++i) s += hy[i] * rhy[i];
    if (lstm)
      for (std::size_t i = 0; i < ns; ++i) s += cy[i] * rcy[i];
    return s;
  };

  const double eps = 1e-6, rtol = 1e-6, atol = 1e-8;
  int checked = 0, skipped = 0, nonzero = 0;
  double worst = 0;  // worst |fd - an| / (atol + rtol * max(|fd|, |an|)), <= 1 passes
  auto check = [&](std::vector<double>& v, i64 i, double analytic, const std::string& what) {
    const double saved = v[static_cast<std::size_t>(i)];
    bool kink = false;
    v[static_cast<std::size_t>(i)] = saved + eps;
    const double lp = loss(kink);
    v[static_cast<std::size_t>(i)] = saved - eps;
    const double lm = loss(kink);
    v[static_cast<std::size_t>(i)] = saved;
    if (kink) {
      ++skipped;
      return;
    }
    ++checked;
    if (analytic != 0) ++nonzero;
    const double fd = (lp - lm) / (2 * eps);
    const double tol = atol + rtol * std::max(std::abs(fd), std::abs(analytic));
    worst = test::worst_of(worst, std::abs(fd - analytic) / tol);
    EXPECT_NEAR(analytic, fd, tol) << what << "[" << i << "]";
  };

  for (i64 i : sample(static_cast<i64>(nx), 200)) check(x, i, dx[static_cast<std::size_t>(i)], "dx");
  for (i64 i : sample(static_cast<i64>(ns), 200)) check(h0, i, dh0[static_cast<std::size_t>(i)], "dh0");
  if (lstm)
    for (i64 i : sample(static_cast<i64>(ns), 200)) check(c0, i, dc0[static_cast<std::size_t>(i)], "dc0");
  for (const ParamBlock& b : layout.blocks())
    for (i64 i : sample(b.size, 300)) check(w, b.offset + i, dw[static_cast<std::size_t>(b.offset + i)], b.name);

  // Non-LSTM cells leave dc0 alone; LSTM writes every element.
  if (!lstm) {
    EXPECT_TRUE(std::all_of(dc0.begin(), dc0.end(), [](double v) { return std::isnan(v); }));
  }
  EXPECT_LE(skipped, checked / 50) << "too many relu kinks straddled";
  EXPECT_GE(nonzero, checked / 4) << "mostly zero gradients: the check would be vacuous";
  RecordProperty("checked", checked);
  RecordProperty("skipped", skipped);
  RecordProperty("nonzero", nonzero);
  RecordProperty("worst_ratio", fmt::format("{:.3g}", worst));
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cases;
  for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::rnn_sigmoid, CellKind::lstm, CellKind::gru}) {
    // cell, I, H, L, bidir, T, N, states, dstates
    cases.push_back({cell, 1, 1, 1, false, 1, 1, true, true});
    cases.push_back({cell, 2, 1, 2, true, 2, 3, false, true});
    cases.push_back({cell, 3, 3, 1, true, 1, 2, false, false});
    cases.push_back({cell, 5, 3, 2, true, 4, 2, true, true});
    cases.push_back({cell, 7, 17, 1, false, 5, 1, true, false});
    cases.push_back({cell, 4, 17, 2, true, 3, 2, true, true});
  }
  // The leaky ReLU (its negative units carry gradient too).
  cases.push_back({CellKind::rnn_relu, 1, 1, 1, false, 1, 1, true, true, 0.2f});
  cases.push_back({CellKind::rnn_relu, 5, 3, 2, true, 4, 2, true, true, 0.2f});
  cases.push_back({CellKind::rnn_relu, 4, 17, 2, true, 3, 2, true, false, 0.2f});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Reference, GradCheck, ::testing::ValuesIn(grad_cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return case_name(info.param); });

// ---------------------------------------------------------------------------------------------
// Float against double, and conventions.

struct Problem {
  RnnConfig cfg;
  Shape shape;
  std::vector<double> w, x, h0, c0, dy, dhy, dcy;
};

Problem make_problem(CellKind cell, i64 input, i64 hidden, i64 layers, bool bidir, i64 t, i64 n, unsigned seed) {
  Problem p{{cell, input, hidden, layers, bidir}, {t, n}, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937_64 rng(seed);
  const WeightLayout layout(p.cfg);
  const double scale = 1.0 / std::sqrt(double(hidden));
  p.w.resize(static_cast<std::size_t>(layout.total_elements()));
  fill_uniform(p.w, rng, -scale, scale);
  p.x.resize(static_cast<std::size_t>(x_elements(p.cfg, p.shape)));
  fill_uniform(p.x, rng, -1, 1);
  const auto ns = static_cast<std::size_t>(state_elements(p.cfg, p.shape));
  for (auto* v : {&p.h0, &p.c0, &p.dhy, &p.dcy}) {
    v->resize(ns);
    fill_uniform(*v, rng, -1, 1);
  }
  p.dy.resize(static_cast<std::size_t>(y_elements(p.cfg, p.shape)));
  fill_uniform(p.dy, rng, -1, 1);
  return p;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

struct AllResults {
  std::vector<double> y, hy, cy, dx, dh0, dc0, dw;
};

template <typename T>
AllResults run_all(const Problem& p) {
  const WeightLayout layout(p.cfg);
  const auto w = cast<T>(p.w), x = cast<T>(p.x), h0 = cast<T>(p.h0), c0 = cast<T>(p.c0), dy = cast<T>(p.dy),
             dhy = cast<T>(p.dhy), dcy = cast<T>(p.dcy);
  std::vector<T> y(p.dy.size()), hy(p.h0.size()), cy(p.h0.size()), dx(p.x.size()), dh0(p.h0.size()),
      dc0(p.h0.size()), dw(p.w.size());
  Reserve<T> rs;
  reference::forward<T>(p.cfg, p.shape, w.data(), x.data(), h0.data(), c0.data(), y.data(), hy.data(), cy.data(),
                        &rs);
  reference::backward_data<T>(p.cfg, p.shape, w.data(), rs, dy.data(), dhy.data(), dcy.data(), dx.data(),
                              dh0.data(), dc0.data());
  reference::backward_weights<T>(p.cfg, p.shape, rs, dw.data());
  auto d = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  return {d(y), d(hy), d(cy), d(dx), d(dh0), d(dc0), d(dw)};
}

class FloatVsDouble : public ::testing::TestWithParam<CellKind> {};

TEST_P(FloatVsDouble, Agree) {
  const Problem p = make_problem(GetParam(), 5, 17, 2, true, 6, 3, 1234);
  const AllResults f = run_all<float>(p);
  const AllResults d = run_all<double>(p);
  // Dot products accumulate in double in both; what differs is float storage and float cell
  // math: a few ulps per step, carried through T=6 steps and 2 layers (and summed over T*N
  // for the weight gradients).
  test::expect_near_all(f.y, d.y, 2e-5, "y");
  test::expect_near_all(f.hy, d.hy, 2e-5, "hy");
  if (GetParam() == CellKind::lstm) test::expect_near_all(f.cy, d.cy, 2e-5, "cy");
  test::expect_near_all(f.dx, d.dx, 1e-4, "dx");
  test::expect_near_all(f.dh0, d.dh0, 1e-4, "dh0");
  if (GetParam() == CellKind::lstm) test::expect_near_all(f.dc0, d.dc0, 1e-4, "dc0");
  test::expect_near_all(f.dw, d.dw, 1e-4, "dw");
}

INSTANTIATE_TEST_SUITE_P(Reference, FloatVsDouble,
                         ::testing::Values(CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::rnn_sigmoid,
                                           CellKind::lstm, CellKind::gru),
                         [](const ::testing::TestParamInfo<CellKind>& info) {
                           return std::string(to_string(info.param));
                         });

class Conventions : public ::testing::TestWithParam<CellKind> {};

// Forward inference and forward training compute the same thing; y/hy/cy may be null.
TEST_P(Conventions, ReserveDoesNotChangeForward) {
  const Problem p = make_problem(GetParam(), 3, 4, 2, true, 3, 2, 7);
  std::vector<double> y1(p.dy.size()), y2(p.dy.size()), hy1(p.h0.size()), hy2(p.h0.size()), cy1(p.h0.size()),
      cy2(p.h0.size());
  Reserve<double> rs;
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), p.c0.data(), y1.data(),
                             hy1.data(), cy1.data(), nullptr);
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), p.c0.data(), y2.data(),
                             hy2.data(), cy2.data(), &rs);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(hy1, hy2);
  EXPECT_EQ(cy1, cy2);
  std::vector<double> y3(p.dy.size());
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), p.c0.data(), y3.data(),
                             nullptr, nullptr, nullptr);
  EXPECT_EQ(y1, y3);
}

// hy of the last layer is y at the last step (forward) and at t = 0 (reverse).
TEST_P(Conventions, HyMatchesY) {
  const Problem p = make_problem(GetParam(), 3, 4, 2, true, 5, 2, 8);
  const i64 T = p.shape.seq_len, N = p.shape.batch, H = p.cfg.hidden_size;
  std::vector<double> y(p.dy.size()), hy(p.h0.size());
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), p.c0.data(), y.data(),
                             hy.data(), nullptr, nullptr);
  for (i64 n = 0; n < N; ++n)
    for (i64 k = 0; k < H; ++k) {
      EXPECT_EQ(hy[static_cast<std::size_t>((2 * N + n) * H + k)],
                y[static_cast<std::size_t>(((T - 1) * N + n) * 2 * H + k)]);
      EXPECT_EQ(hy[static_cast<std::size_t>((3 * N + n) * H + k)],
                y[static_cast<std::size_t>((0 * N + n) * 2 * H + H + k)]);
    }
}

// Null dhy/dcy mean zeros; null dx/dh0/dc0 are not written; dw is overwritten.
TEST_P(Conventions, BackwardNullArguments) {
  const Problem p = make_problem(GetParam(), 3, 4, 2, true, 3, 2, 9);
  Reserve<double> rs;
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), p.c0.data(), nullptr,
                             nullptr, nullptr, &rs);
  const std::vector<double> zeros(p.h0.size(), 0.0);
  std::vector<double> dx1(p.x.size()), dh1(p.h0.size()), dc1(p.h0.size()), dw1(p.w.size(), std::nan(""));
  reference::backward_data<double>(p.cfg, p.shape, p.w.data(), rs, p.dy.data(), zeros.data(), zeros.data(),
                                   dx1.data(), dh1.data(), dc1.data());
  reference::backward_weights<double>(p.cfg, p.shape, rs, dw1.data());
  std::vector<double> dx2(p.x.size()), dh2(p.h0.size()), dc2(p.h0.size()), dw2(p.w.size(), 1e300);
  reference::backward_data<double>(p.cfg, p.shape, p.w.data(), rs, p.dy.data(), nullptr, nullptr, dx2.data(),
                                   dh2.data(), dc2.data());
  reference::backward_weights<double>(p.cfg, p.shape, rs, dw2.data());
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dh1, dh2);
  EXPECT_EQ(dc1, dc2);
  EXPECT_EQ(dw1, dw2);
  EXPECT_TRUE(std::all_of(dw1.begin(), dw1.end(), [](double v) { return std::isfinite(v); }));
  // Only dx requested: the same dx, and the reserve's gate gradients give the same dw.
  std::vector<double> dx3(p.x.size()), dw3(p.w.size());
  reference::backward_data<double>(p.cfg, p.shape, p.w.data(), rs, p.dy.data(), nullptr, nullptr, dx3.data(),
                                   nullptr, nullptr);
  reference::backward_weights<double>(p.cfg, p.shape, rs, dw3.data());
  EXPECT_EQ(dx1, dx3);
  EXPECT_EQ(dw1, dw3);
}

// Saturating inputs give saturated outputs, never NaN; NaN inputs propagate.
TEST_P(Conventions, ExtremeInputs) {
  Problem p = make_problem(GetParam(), 3, 4, 1, true, 3, 2, 10);
  for (double& v : p.w) v *= 1e30;
  std::vector<double> y(p.dy.size()), hy(p.h0.size()), cy(p.h0.size());
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), p.c0.data(), y.data(),
                             hy.data(), cy.data(), nullptr);
  EXPECT_TRUE(std::none_of(y.begin(), y.end(), [](double v) { return std::isnan(v); }));
  if (GetParam() != CellKind::rnn_relu) {  // bounded cells stay within [-1, 1]
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](double v) { return std::abs(v) <= 1.0; }));
  }
  std::vector<float> wf(p.w.begin(), p.w.end()), xf(p.x.begin(), p.x.end()), yf(y.size());
  for (float& v : wf) v = v > 0 ? 1e30f : -1e30f;
  reference::forward<float>(p.cfg, p.shape, wf.data(), xf.data(), nullptr, nullptr, yf.data(), nullptr, nullptr,
                            nullptr);
  if (GetParam() != CellKind::rnn_relu) {  // relu may legitimately reach inf - inf here
    EXPECT_TRUE(std::none_of(yf.begin(), yf.end(), [](float v) { return std::isnan(v); }));
  }

  const Problem q = make_problem(GetParam(), 3, 4, 1, false, 2, 1, 11);
  std::vector<double> xn = q.x;
  xn[0] = std::nan("");
  std::vector<double> yn(q.dy.size());
  reference::forward<double>(q.cfg, q.shape, q.w.data(), xn.data(), nullptr, nullptr, yn.data(), nullptr, nullptr,
                             nullptr);
  EXPECT_TRUE(std::all_of(yn.begin(), yn.end(), [](double v) { return std::isnan(v); }));
}

// A reserve from another shape or config is refused, as is backward_weights before backward_data.
TEST_P(Conventions, ReserveMismatchThrows) {
  const Problem p = make_problem(GetParam(), 3, 4, 1, false, 3, 2, 12);
  std::vector<double> dx(p.x.size()), dw(p.w.size());
  Reserve<double> empty;
  EXPECT_THROW(reference::backward_data<double>(p.cfg, p.shape, p.w.data(), empty, p.dy.data(), nullptr, nullptr,
                                                dx.data(), nullptr, nullptr),
               Error);
  Reserve<double> rs;
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), nullptr, nullptr, nullptr, nullptr, nullptr,
                             &rs);
  EXPECT_THROW(reference::backward_weights<double>(p.cfg, p.shape, rs, dw.data()), Error);
  const Shape other{p.shape.seq_len - 1, p.shape.batch};
  EXPECT_THROW(reference::backward_data<double>(p.cfg, other, p.w.data(), rs, p.dy.data(), nullptr, nullptr,
                                                dx.data(), nullptr, nullptr),
               Error);
  EXPECT_NO_THROW(reference::backward_data<double>(p.cfg, p.shape, p.w.data(), rs, p.dy.data(), nullptr, nullptr,
                                                   dx.data(), nullptr, nullptr));
  RnnConfig bigger = p.cfg;
  bigger.hidden_size += 1;
  EXPECT_THROW(reference::backward_weights<double>(bigger, p.shape, rs, dw.data()), Error);
}

TEST(ReferenceValidation, InvalidShapeThrows) {
  const RnnConfig cfg{CellKind::lstm, 2, 2, 1, false};
  std::vector<double> w(64), x(4), y(4);
  EXPECT_THROW(reference::forward<double>(cfg, {0, 1}, w.data(), x.data(), nullptr, nullptr, y.data(), nullptr,
                                          nullptr, nullptr),
               Error);
  RnnConfig bad = cfg;
  bad.hidden_size = 0;
  EXPECT_THROW(reference::forward<double>(bad, {1, 1}, w.data(), x.data(), nullptr, nullptr, y.data(), nullptr,
                                          nullptr, nullptr),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Reference, Conventions,
                         ::testing::Values(CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::rnn_sigmoid,
                                           CellKind::lstm, CellKind::gru),
                         [](const ::testing::TestParamInfo<CellKind>& info) {
                           return std::string(to_string(info.param));
                         });

}  // namespace
}  // namespace rnnjit
