// rnnjit tests: one RNN problem with random data, run through the double-precision reference
// and through the public API, with tolerances derived from the accumulation depth.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/reference.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::test {

struct Tensors {
  std::vector<float> y, hy, cy, dx, dhx, dcx, dw;
};

struct RnnCase {
  RnnConfig config;
  Shape shape;
  std::vector<float> w, x, hx, cx, dy, dhy, dcy;
  std::vector<std::int32_t> lengths;  // variable sequence lengths, or empty
  std::uint64_t dropout_seed = 0;
  bool passes_initial_states = true;  // false: run() leaves hx and cx out (zeros, see below)

  RnnCase(const RnnConfig& c, const Shape& s, unsigned seed = 1) : config(c), shape(s) {
    std::mt19937 rng(seed);
    const float k = 1.0f / std::sqrt(static_cast<float>(c.hidden_size));
    auto fill = [&](std::vector<float>& v, std::int64_t n, float scale) {
      std::uniform_real_distribution<float> u(-scale, scale);
      v.resize(static_cast<std::size_t>(n));
      for (float& e : v) e = u(rng);
    };
    fill(w, WeightLayout(c).total_elements(), k);
    fill(x, x_elements(c, s), 1.0f);
    fill(hx, state_elements(c, s), 1.0f);
    if (c.cell == CellKind::lstm) fill(cx, cell_state_elements(c, s), 1.0f);
    fill(dy, y_elements(c, s), 1.0f);
    fill(dhy, state_elements(c, s), 1.0f);
    if (c.cell == CellKind::lstm) fill(dcy, cell_state_elements(c, s), 1.0f);
  }

  // Initial states of zeros that run() leaves out of the call, as a caller with no state to
  // start from does (PyTorch's hx=None); the oracle gets the zeros.
  void without_initial_states() {
    std::fill(hx.begin(), hx.end(), 0.0f);
    std::fill(cx.begin(), cx.end(), 0.0f);
    passes_initial_states = false;
  }

  // Mixed lengths in [1, T], the longest being T and the shortest 1: in no particular order, or
  // sorted longest first (PyTorch's packed sequences), where the per-step GEMMs shrink.
  void vary_lengths(unsigned seed = 7, bool longest_first = false) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::int32_t> u(1, static_cast<std::int32_t>(shape.seq_len));
    lengths.resize(static_cast<std::size_t>(shape.batch));
    for (std::int32_t& l : lengths) l = u(rng);
    lengths[static_cast<std::size_t>(shape.batch / 2)] = static_cast<std::int32_t>(shape.seq_len);
    lengths[0] = 1;
    if (longest_first) std::sort(lengths.begin(), lengths.end(), std::greater<>());
  }

  // x's padding (every row past its sequence's length, which nothing may read) set to `value`.
  void fill_padding(float value) {
    const std::int64_t T = shape.seq_len, N = shape.batch, I = config.input_size;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t t = lengths[static_cast<std::size_t>(n)]; t < T; ++t) {
        const std::int64_t row = config.batch_first ? n * T + t : t * N + n;
        std::fill_n(x.begin() + row * I, I, value);
      }
  }

  bool lstm() const { return config.cell == CellKind::lstm; }

  // The oracle, in double.
  Tensors reference(bool backward) const {
    auto d = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const auto w64 = d(w), x64 = d(x), hx64 = d(hx), cx64 = d(cx);
    std::vector<double> y(static_cast<std::size_t>(y_elements(config, shape))), hy(hx.size()), cy(cx.size());
    reference::Reserve<double> reserve;
    reference::forward<double>(config, shape, w64.data(), x64.data(), hx64.data(), lstm() ? cx64.data() : nullptr,
                               y.data(), hy.data(), lstm() ? cy.data() : nullptr, backward ? &reserve : nullptr,
                               {.seq_lengths = lengths.empty() ? nullptr : lengths.data(), .dropout_seed = dropout_seed});
    Tensors t{f(y), f(hy), f(cy), {}, {}, {}, {}};
    if (!backward) return t;
    const auto dy64 = d(dy), dhy64 = d(dhy), dcy64 = d(dcy);
    std::vector<double> dx(x.size()), dhx(hx.size()), dcx(cx.size()), dw(w.size());
    reference::backward_data<double>(config, shape, w64.data(), reserve, dy64.data(), dhy64.data(),
                                     lstm() ? dcy64.data() : nullptr, dx.data(), dhx.data(),
                                     lstm() ? dcx.data() : nullptr);
    reference::backward_weights<double>(config, shape, reserve, dw.data());
    t.dx = f(dx);
    t.dhx = f(dhx);
    t.dcx = f(dcx);
    t.dw = f(dw);
    return t;
  }

  // Through the public API: forward (inference or training), then backward when training.
  Tensors run(Execution& ex) const {
    Tensors t;
    t.y.resize(static_cast<std::size_t>(y_elements(config, shape)));
    t.hy.resize(hx.size());
    t.cy.resize(cx.size());
    const std::span<const float> no_state;
    ex.forward(w, {.x = x, .hx = passes_initial_states ? hx : no_state, .cx = passes_initial_states ? cx : no_state,
                   .y = t.y, .hy = t.hy, .cy = t.cy, .seq_lengths = lengths,
                   .dropout_seed = dropout_seed});
    if (ex.mode() != Mode::training) return t;
    t.dx.resize(x.size());
    t.dhx.resize(hx.size());
    t.dcx.resize(cx.size());
    t.dw.resize(w.size());
    ex.backward_data(w, {.dy = dy, .dhy = dhy, .dcy = dcy, .dx = t.dx, .dhx = t.dhx, .dcx = t.dcx});
    ex.backward_weights({.x = x, .dweights = t.dw});
    return t;
  }

  // Float rounding grows with the number of terms each result accumulates: a dot product of
  // max(I, D*H) + H terms per step, carried through up to T steps and L layers (and back, for
  // gradients, which also sum over T*N rows for the weights). Values are O(1) by construction.
  double tolerance(bool gradient) const {
    const double eps = std::numeric_limits<float>::epsilon();
    const double width = static_cast<double>(std::max(config.input_size, config.directions() * config.state_size()) +
                                             config.hidden_size);
    double depth = width * static_cast<double>(shape.seq_len * config.num_layers);
    if (gradient) depth *= 2.0 + static_cast<double>(shape.batch);
    return 4.0 * eps * std::sqrt(depth) * std::sqrt(width) + 8.0 * eps;
  }

  // bf16 GEMM inputs keep 8 significant bits (relative error up to 2^-9); the products' errors
  // sum over a step's width, max(I, output) + H, and are carried through T steps and L layers
  // (gradients: and back, summing over the batch's rows too).
  double bf16_tolerance(bool gradient) const {
    const double width = static_cast<double>(std::max(config.input_size, config.output_size()) + config.hidden_size);
    double depth = width * static_cast<double>(shape.seq_len * config.num_layers);
    if (gradient) depth *= 2.0 + static_cast<double>(shape.batch);
    return 0x1p-9 * std::sqrt(depth);
  }
};

inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, double tol,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]) / (1.0 + std::abs(expected[i]));
    if (!(err <= worst)) { worst = err; at = i; }
    if (std::isnan(worst)) break;  // the worst there is: no later finite error may replace it
  }
  EXPECT_LE(worst, tol) << what << ": worst error at element " << at << ": " << (actual.empty() ? 0.f : actual[at])
                        << " vs " << (expected.empty() ? 0.f : expected[at]);
}

// The largest absolute difference between two results of the same size: how far a bf16 run is
// from an FP32 one (a check that bf16 really ran).
inline double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

// Every output a run produces against the oracle's (the gradients too when `train`), with the
// case's tolerances; `who` prefixes the tensors' names in failures.
inline void expect_matches(const Tensors& got, const Tensors& want, const RnnCase& rc, bool train,
                           const std::string& who = "") {
  const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
  const std::string at = who.empty() ? who : who + " ";
  expect_close(got.y, want.y, tol, at + "y");
  expect_close(got.hy, want.hy, tol, at + "hy");
  if (rc.lstm()) expect_close(got.cy, want.cy, tol, at + "cy");
  if (!train) return;
  expect_close(got.dx, want.dx, gtol, at + "dx");
  expect_close(got.dhx, want.dhx, gtol, at + "dhx");
  if (rc.lstm()) expect_close(got.dcx, want.dcx, gtol, at + "dcx");
  expect_close(got.dw, want.dw, gtol, at + "dweights");
}

}  // namespace rnnjit::test
