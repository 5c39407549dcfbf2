// Tests of the scalar reference's features beyond the plain stacked RNN (kernels/reference.hpp):
// reverse, LSTM projection, cell clipping, dropout between layers, batch_first and variable
// sequence lengths, alone and all at once.
//  - finite-difference gradient checks in double of backward_data + backward_weights,
//  - independent oracles: each feature against a run without it (a varlen element alone, the
//    transposed seq-major run, the time-reversed forward run, ...), exact where the arithmetic
//    is the same,
//  - tiny cases computed by hand, bad input,
//  - PyTorch (pack_padded_sequence, nn.LSTM(proj_size=...)) through tests/torch_compare.py when
//    torch is importable (RNNJIT_TEST_PYTHON names the interpreter, default python3), and the JIT
//    path through the CLI against PyTorch on random configurations (tests/torch_cli_check.py).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/dropout.hpp"
#include "kernels/reference.hpp"
#include "rnnjit/npy.hpp"
#include "rnnjit/weights.hpp"
#include "tests/worst.hpp"

namespace rnnjit {
namespace {

using reference::CallOptions;
using reference::Reserve;
using i64 = std::int64_t;
using Lengths = std::vector<std::int32_t>;

constexpr CellKind kCells[] = {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru};

std::size_t sz(i64 n) { return static_cast<std::size_t>(n); }
double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

RnnConfig make_config(CellKind cell, i64 input, i64 hidden, i64 layers, bool bidirectional) {
  RnnConfig c;
  c.cell = cell;
  c.input_size = input;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.bidirectional = bidirectional;
  return c;
}

std::string config_name(const RnnConfig& c) {
  std::string s = fmt::format("{}_I{}_H{}_L{}_D{}", to_string(c.cell), c.input_size, c.hidden_size, c.num_layers,
                              c.directions());
  if (c.reverse) s += "_rev";
  if (c.proj_size > 0) s += fmt::format("_P{}", c.proj_size);
  if (c.clip > 0) s += "_clip";
  if (c.dropout > 0) s += fmt::format("_drop{}", static_cast<int>(std::lround(c.dropout * 100)));
  if (c.batch_first) s += "_bf";
  if (c.gate_clip > 0) s += "_gclip";
  if (c.peephole) s += "_peep";
  if (c.input_forget) s += "_cifg";
  if (!c.bias) s += "_nobias";
  if (c.sum_directions) s += "_sum";
  if (c.independent_stacks) s += "_indep";
  return s;
}

void fill_uniform(std::vector<double>& v, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& e : v) e = dist(rng);
}

// Everything one call needs: weights, inputs, initial states and the loss weights
// loss = sum(ry*y) + sum(rhy*hy) + sum(rcy*cy), so that dy = ry, dhy = rhy, dcy = rcy.
struct Problem {
  RnnConfig cfg;
  Shape shape;
  Lengths lengths;  // empty: all T
  std::uint64_t seed = 0x5eed;
  std::vector<double> w, x, h0, c0, ry, rhy, rcy;

  bool lstm() const { return cfg.cell == CellKind::lstm; }
  CallOptions options() const { return {lengths.empty() ? nullptr : lengths.data(), seed}; }
  i64 length(i64 n) const { return lengths.empty() ? shape.seq_len : lengths[sz(n)]; }
};

Problem make_problem(const RnnConfig& cfg, const Shape& shape, const Lengths& lengths, std::uint64_t rng_seed) {
  Problem p{cfg, shape, lengths};
  std::mt19937_64 rng(rng_seed);
  const WeightLayout layout(cfg);
  const double scale = 1.0 / std::sqrt(double(cfg.hidden_size));  // PyTorch's init range
  p.w.resize(sz(layout.total_elements()));
  fill_uniform(p.w, rng, -scale, scale);
  if (cfg.cell == CellKind::rnn_relu) {
    // Positive biases keep most relu units active, so that the gradient checks are not vacuous.
    for (const ParamBlock& b : layout.blocks())
      if (b.kind == ParamKind::bias_ih || b.kind == ParamKind::bias_hh)
        for (i64 i = 0; i < b.size; ++i) p.w[sz(b.offset + i)] = std::abs(p.w[sz(b.offset + i)]);
  }
  p.x.resize(sz(x_elements(cfg, shape)));
  fill_uniform(p.x, rng, -1, 1);
  p.h0.resize(sz(state_elements(cfg, shape)));
  fill_uniform(p.h0, rng, -1, 1);
  p.rhy.resize(p.h0.size());
  fill_uniform(p.rhy, rng, -1, 1);
  p.ry.resize(sz(y_elements(cfg, shape)));
  fill_uniform(p.ry, rng, -1, 1);
  if (p.lstm()) {
    p.c0.resize(sz(cell_state_elements(cfg, shape)));
    fill_uniform(p.c0, rng, -1.5, 1.5);
    p.rcy.resize(p.c0.size());
    fill_uniform(p.rcy, rng, -1, 1);
  }
  return p;
}

const double* data_or_null(const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); }

struct Results {
  std::vector<double> y, hy, cy, dx, dh0, dc0, dw;
};

// Forward (training unless `inference`), then backward_data and backward_weights in double.
Results run(const Problem& p, bool backward = true, Reserve<double>* keep = nullptr, bool inference = false) {
  Results r;
  r.y.assign(p.ry.size(), -99.0);
  r.hy.assign(p.h0.size(), -99.0);
  r.cy.assign(p.c0.size(), -99.0);
  Reserve<double> local;
  Reserve<double>& rs = keep ? *keep : local;
  reference::forward<double>(p.cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), data_or_null(p.c0), r.y.data(),
                             r.hy.data(), p.lstm() ? r.cy.data() : nullptr, inference ? nullptr : &rs, p.options());
  if (!backward || inference) return r;
  r.dx.assign(p.x.size(), -99.0);
  r.dh0.assign(p.h0.size(), -99.0);
  r.dc0.assign(p.c0.size(), -99.0);
  r.dw.assign(p.w.size(), -99.0);
  reference::backward_data<double>(p.cfg, p.shape, p.w.data(), rs, p.ry.data(), p.rhy.data(), data_or_null(p.rcy),
                                   r.dx.data(), r.dh0.data(), p.lstm() ? r.dc0.data() : nullptr);
  reference::backward_weights<double>(p.cfg, p.shape, rs, r.dw.data());
  return r;
}

// Every LSTM cell value before the clamp, f*c_{t-1} + i*g, of every processed (ld, t, n, k).
std::vector<double> pre_clamp_cells(const RnnConfig& cfg, const Shape& shape, const Reserve<double>& rs) {
  const i64 N = shape.batch, H = cfg.hidden_size, D = cfg.directions();
  std::vector<double> out;
  for (i64 ld = 0; ld < cfg.num_layers * D; ++ld) {
    const bool rev = cfg.reversed(static_cast<int>(ld % D));
    for (i64 n = 0; n < N; ++n) {
      const i64 len = rs.lengths[sz(n)];
      for (i64 s = 0; s < len; ++s) {
        const i64 t = rev ? len - 1 - s : s, tp = rev ? t + 1 : t - 1;
        for (i64 k = 0; k < H; ++k) {
          const double* g = rs.gates[sz(ld)].data() + (t * N + n) * 4 * H;
          const double cp = s == 0 ? rs.c0[sz(ld)][sz(n * H + k)] : rs.c[sz(ld)][sz((tp * N + n) * H + k)];
          out.push_back(g[H + k] * cp + g[k] * g[2 * H + k]);
        }
      }
    }
  }
  return out;
}

// A clip (a float, as the config holds it) with which 10-90% of the cell values are clipped and
// none before the clamp lies within 1e-4 of the bound, so that central differences never straddle it.
float choose_clip(Problem p) {
  p.cfg.clip = 0;
  Reserve<double> rs;
  run(p, false, &rs);
  std::vector<double> mags;
  for (double v : pre_clamp_cells(p.cfg, p.shape, rs)) mags.push_back(std::abs(v));
  std::sort(mags.begin(), mags.end());
  for (double q : {0.6, 0.5, 0.7, 0.4, 0.8, 0.55, 0.65, 0.45, 0.75, 0.35, 0.85}) {
    const std::size_t at = std::min(mags.size() - 2, static_cast<std::size_t>(q * double(mags.size())));
    p.cfg.clip = static_cast<float>((mags[at] + mags[at + 1]) / 2);
    run(p, false, &rs);
    const std::vector<double> pre = pre_clamp_cells(p.cfg, p.shape, rs);
    const double bound = p.cfg.clip;
    double margin = std::numeric_limits<double>::infinity();
    std::size_t clipped = 0;
    for (double v : pre) {
      margin = std::min(margin, std::abs(std::abs(v) - bound));
      clipped += std::abs(v) > bound;
    }
    const double fraction = double(clipped) / double(pre.size());
    if (margin > 1e-4 && fraction >= 0.1 && fraction <= 0.9) return p.cfg.clip;
  }
  ADD_FAILURE() << "no clip value keeps every cell away from the bound";
  return 1.0f;
}

// Indices of a vector of `size` elements to check: all up to `limit`, else an evenly spaced
// subset with the first and the last.
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

// ---------------------------------------------------------------------------------------------
// Finite-difference gradient checks (double).

struct FdCase {
  RnnConfig cfg;
  Shape shape;
  Lengths lengths;
  bool auto_clip = false;  // cfg.clip is chosen by choose_clip()
};

std::string fd_name(const FdCase& c) {
  std::string s = fmt::format("{}{}_T{}_N{}", config_name(c.cfg), c.auto_clip ? "_clip" : "", c.shape.seq_len,
                              c.shape.batch);
  if (!c.lengths.empty()) {
    s += "_len";
    for (std::int32_t l : c.lengths) s += fmt::format("{}", l);
  }
  return s;
}

void PrintTo(const FdCase& c, std::ostream* os) { *os << fd_name(c); }

class FeatureGradCheck : public ::testing::TestWithParam<FdCase> {};

TEST_P(FeatureGradCheck, MatchesCentralDifferences) {
  const FdCase fc = GetParam();
  Problem p = make_problem(fc.cfg, fc.shape, fc.lengths, std::hash<std::string>{}(fd_name(fc)));
  if (fc.auto_clip) p.cfg.clip = choose_clip(p);
  const RnnConfig& cfg = p.cfg;
  const WeightLayout layout(cfg);
  const bool relu = cfg.cell == CellKind::rnn_relu, clip = cfg.clip > 0, gate_clip = cfg.gate_clip > 0;
  // A gate held by the gate clip stores exactly the activation of a bound (or the bound itself,
  // relu's): which gates are held is a kink set like the relu's.
  const double gb = cfg.gate_clip;
  const double held[] = {reference::sigmoid(gb), reference::sigmoid(-gb), reference::tanh_(gb), reference::tanh_(-gb), gb};

  Reserve<double> rs;
  const Results an = run(p, true, &rs);

  // Where the loss is not differentiable (a relu at 0, a cell value at the clip bound), a
  // central difference that straddles the kink is meaningless: detect it exactly by comparing
  // which units are active / clipped at w +- eps with the base point, and skip those elements.
  auto kinks = [&](const Reserve<double>& r) {
    std::vector<char> m;
    if (relu)
      for (const auto& hs : r.h)
        for (double v : hs) m.push_back(v > 0);
    if (clip)
      for (const auto& cs : r.c)
        for (double v : cs) m.push_back(std::abs(v) >= double(cfg.clip));
    if (gate_clip)
      for (const auto& gs : r.gates)
        for (double v : gs) m.push_back(std::find(std::begin(held), std::end(held), v) != std::end(held));
    return m;
  };
  const std::vector<char> base = kinks(rs);
  if (clip || gate_clip) {
    const auto clipped = std::count(base.begin(), base.end(), 1);
    EXPECT_GT(clipped, 0) << "no cell or gate is clipped: the clip check would be vacuous";
  }

  Reserve<double> probe;
  std::vector<double> y(p.ry.size()), hy(p.h0.size()), cy(p.c0.size());
  auto loss = [&](bool& kink) {
    // Training forward: dropout applies, with the same seed, so the loss is a deterministic function.
    reference::forward<double>(cfg, p.shape, p.w.data(), p.x.data(), p.h0.data(), data_or_null(p.c0), y.data(),
                               hy.data(), p.lstm() ? cy.data() : nullptr, &probe, p.options());
    if (kinks(probe) != base) kink = true;
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * p.ry[i];
    for (std::size_t i = 0; i < hy.size(); ++i) s += hy[i] * p.rhy[i];
    for (std::size_t i = 0; i < cy.size(); ++i) s += cy[i] * p.rcy[i];
    return s;
  };

  const double eps = 1e-6, rtol = 1e-6, atol = 1e-8;
  int checked = 0, skipped = 0, nonzero = 0;
  auto check = [&](std::vector<double>& v, i64 i, double analytic, const std::string& what) {
    const double saved = v[sz(i)];
    bool kink = false;
    v[sz(i)] = saved + eps;
    const double lp = loss(kink);
    v[sz(i)] = saved - eps;
    const double lm = loss(kink);
    v[sz(i)] = saved;
    if (kink) {
      ++skipped;
      return;
    }
    ++checked;
    if (analytic != 0) ++nonzero;
    const double fd = (lp - lm) / (2 * eps);
    EXPECT_NEAR(analytic, fd, atol + rtol * std::max(std::abs(fd), std::abs(analytic))) << what << "[" << i << "]";
  };

  const i64 limit = 48;
  for (i64 i : sample(static_cast<i64>(p.x.size()), limit)) check(p.x, i, an.dx[sz(i)], "dx");
  for (i64 i : sample(static_cast<i64>(p.h0.size()), limit)) check(p.h0, i, an.dh0[sz(i)], "dh0");
  for (i64 i : sample(static_cast<i64>(p.c0.size()), limit)) check(p.c0, i, an.dc0[sz(i)], "dc0");
  for (const ParamBlock& b : layout.blocks())
    for (i64 i : sample(b.size, limit)) check(p.w, b.offset + i, an.dw[sz(b.offset + i)], b.name);

  if (fc.auto_clip) {
    EXPECT_EQ(skipped, 0) << "a cell value moved across the clip bound";
  }
  EXPECT_LE(skipped, checked / 50) << "too many kinks straddled";
  EXPECT_GE(nonzero, checked / 4) << "mostly zero gradients: the check would be vacuous";
  RecordProperty("checked", checked);
  RecordProperty("skipped", skipped);
}

std::vector<FdCase> fd_cases() {
  std::vector<FdCase> cases;
  auto add = [&](RnnConfig c, i64 t, i64 n, Lengths lengths = {}, bool auto_clip = false) {
    cases.push_back({c, {t, n}, std::move(lengths), auto_clip});
  };
  for (CellKind cell : kCells) {
    // reverse
    RnnConfig c = make_config(cell, 3, 5, 1, false);
    c.reverse = true;
    add(c, 4, 2);
    c = make_config(cell, 2, 3, 2, false);
    c.reverse = true;
    add(c, 3, 3);
    // dropout (training): between the layers only
    c = make_config(cell, 3, 4, 2, false);
    c.dropout = 0.4f;
    add(c, 3, 2);
    c = make_config(cell, 2, 3, 3, true);
    c.dropout = 0.3f;
    add(c, 3, 2);
    // batch_first
    c = make_config(cell, 3, 4, 2, true);
    c.batch_first = true;
    add(c, 3, 2);
    c = make_config(cell, 2, 3, 1, false);
    c.batch_first = true;
    add(c, 4, 3);
    // variable lengths (any order, 1 and T included)
    add(make_config(cell, 3, 4, 2, true), 5, 4, {3, 5, 1, 4});
    add(make_config(cell, 2, 3, 1, false), 4, 3, {1, 4, 2});
    c = make_config(cell, 2, 3, 2, false);
    c.reverse = true;
    add(c, 4, 3, {2, 4, 1});
  }
  // projection (LSTM): weight_hh [4H, P]; above layer 0 weight_ih is [4H, D*P]
  RnnConfig c = make_config(CellKind::lstm, 3, 5, 1, false);
  c.proj_size = 2;
  add(c, 4, 2);
  c = make_config(CellKind::lstm, 3, 5, 2, true);
  c.proj_size = 3;
  add(c, 3, 2);
  c = make_config(CellKind::lstm, 2, 4, 2, false);
  c.proj_size = 1;
  c.reverse = true;
  add(c, 3, 2);
  // clip (LSTM), alone and with a projection
  add(make_config(CellKind::lstm, 3, 5, 1, false), 5, 2, {}, true);
  add(make_config(CellKind::lstm, 3, 5, 2, true), 4, 2, {}, true);
  c = make_config(CellKind::lstm, 2, 5, 2, true);
  c.proj_size = 2;
  add(c, 4, 2, {}, true);
  // Everything at once.
  c = make_config(CellKind::lstm, 3, 5, 2, true);
  c.proj_size = 3;
  c.dropout = 0.3f;
  c.batch_first = true;
  add(c, 4, 3, {4, 1, 3}, true);
  c = make_config(CellKind::lstm, 3, 4, 2, false);
  c.reverse = true;
  c.proj_size = 2;
  c.dropout = 0.25f;
  c.batch_first = true;
  add(c, 4, 3, {2, 4, 1}, true);
  for (CellKind cell : {CellKind::gru, CellKind::rnn_tanh, CellKind::rnn_relu}) {
    c = make_config(cell, 3, 4, 2, true);
    c.dropout = 0.3f;
    c.batch_first = true;
    add(c, 4, 3, {3, 1, 4});
  }
  // ONNX's features: LSTM peepholes and coupled input-forget gates, the gate clip of every cell.
  c = make_config(CellKind::lstm, 3, 5, 1, false);
  c.peephole = true;
  add(c, 4, 2);
  c = make_config(CellKind::lstm, 3, 4, 2, true);
  c.peephole = true;
  add(c, 4, 3, {2, 4, 1});
  c = make_config(CellKind::lstm, 2, 5, 2, false);
  c.peephole = true;
  c.reverse = true;
  c.proj_size = 2;
  add(c, 3, 2);
  add(make_config(CellKind::lstm, 2, 5, 1, true), 5, 2, {}, true);  // peephole with the cell clip, below
  cases.back().cfg.peephole = true;
  c = make_config(CellKind::lstm, 3, 5, 1, false);
  c.input_forget = true;
  add(c, 4, 2);
  c = make_config(CellKind::lstm, 3, 4, 2, true);
  c.input_forget = true;
  c.peephole = true;
  add(c, 4, 3, {3, 4, 2});
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::gru_reset_before, CellKind::rnn_tanh,
                        CellKind::rnn_relu}) {
    c = make_config(cell, 3, 5, 1, false);
    c.gate_clip = 0.3f;
    add(c, 4, 2);
    c = make_config(cell, 2, 4, 2, true);
    c.gate_clip = 0.5f;
    c.peephole = c.input_forget = cell == CellKind::lstm;
    add(c, 3, 3, {3, 1, 2});
  }
  // No bias parameters (PyTorch's bias=False): the layout has no bias blocks to check.
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::gru_reset_before, CellKind::rnn_tanh}) {
    c = make_config(cell, 3, 4, 2, true);
    c.bias = false;
    add(c, 4, 3, {4, 2, 3});
  }
  // Summed directions: both directions see the whole dy; the layer above reads S columns.
  for (CellKind cell : kCells) {
    c = make_config(cell, 3, 4, 2, true);
    c.sum_directions = true;
    add(c, 4, 3, {4, 2, 3});
  }
  // Independent stacks: each direction reads only its own h below; merged at the top only.
  for (CellKind cell : kCells) {
    c = make_config(cell, 3, 4, 3, true);
    c.independent_stacks = true;
    add(c, 4, 3, {4, 2, 3});
  }
  c = make_config(CellKind::gru_reset_before, 3, 4, 2, true);
  c.independent_stacks = c.sum_directions = true;
  add(c, 4, 3);
  c = make_config(CellKind::lstm, 3, 5, 3, true);
  c.independent_stacks = true;
  c.sum_directions = true;
  c.proj_size = 2;
  c.dropout = 0.3f;
  c.batch_first = true;
  add(c, 4, 3, {2, 4, 3}, true);
  c = make_config(CellKind::lstm, 3, 5, 3, true);
  c.sum_directions = true;
  c.proj_size = 2;
  c.dropout = 0.3f;
  c.batch_first = true;
  add(c, 4, 3, {1, 4, 3}, true);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Reference, FeatureGradCheck, ::testing::ValuesIn(fd_cases()),
                         [](const ::testing::TestParamInfo<FdCase>& info) { return fd_name(info.param); });

// ---------------------------------------------------------------------------------------------
// Independent oracles.

class PerCell : public ::testing::TestWithParam<CellKind> {};

// Element n of a variable-length batch is exactly element n run alone with T = L_n; y past its
// length is exactly 0 and so is dx; the weight gradient is the sum of the elements' ones.
void check_varlen_against_solo(const RnnConfig& cfg, std::uint64_t seed) {
  SCOPED_TRACE(config_name(cfg));
  const Lengths lengths{3, 5, 1, 4};
  const i64 T = 5, N = 4, I = cfg.input_size, S = cfg.state_size(), H = cfg.hidden_size;
  const i64 LD = cfg.num_layers * cfg.directions(), DS = cfg.output_size();
  const Problem p = make_problem(cfg, {T, N}, lengths, seed);
  const Results all = run(p);
  std::vector<double> dw_sum(p.w.size(), 0.0);
  for (i64 n = 0; n < N; ++n) {
    const i64 len = lengths[sz(n)];
    Problem q = p;
    q.shape = {len, 1};
    q.lengths.clear();
    q.x.assign(sz(len * I), 0);
    q.ry.assign(sz(len * DS), 0);
    q.h0.assign(sz(LD * S), 0);
    q.rhy = q.h0;
    q.c0.assign(p.lstm() ? sz(LD * H) : 0, 0);
    q.rcy = q.c0;
    for (i64 t = 0; t < len; ++t) {
      for (i64 k = 0; k < I; ++k) q.x[sz(t * I + k)] = p.x[sz((t * N + n) * I + k)];
      for (i64 k = 0; k < DS; ++k) q.ry[sz(t * DS + k)] = p.ry[sz((t * N + n) * DS + k)];
    }
    for (i64 ld = 0; ld < LD; ++ld) {
      for (i64 k = 0; k < S; ++k) {
        q.h0[sz(ld * S + k)] = p.h0[sz((ld * N + n) * S + k)];
        q.rhy[sz(ld * S + k)] = p.rhy[sz((ld * N + n) * S + k)];
      }
      for (i64 k = 0; k < H && p.lstm(); ++k) {
        q.c0[sz(ld * H + k)] = p.c0[sz((ld * N + n) * H + k)];
        q.rcy[sz(ld * H + k)] = p.rcy[sz((ld * N + n) * H + k)];
      }
    }
    const Results one = run(q);
    for (i64 t = 0; t < T; ++t) {
      for (i64 k = 0; k < DS; ++k) {
        const double v = all.y[sz((t * N + n) * DS + k)];
        if (t < len) {
          EXPECT_EQ(v, one.y[sz(t * DS + k)]) << "y n=" << n << " t=" << t << " k=" << k;
        } else {
          EXPECT_EQ(v, 0.0) << "y past the length, n=" << n << " t=" << t << " k=" << k;
        }
      }
      for (i64 k = 0; k < I; ++k) {
        const double v = all.dx[sz((t * N + n) * I + k)];
        if (t < len) {
          EXPECT_EQ(v, one.dx[sz(t * I + k)]) << "dx n=" << n << " t=" << t << " k=" << k;
        } else {
          EXPECT_EQ(v, 0.0) << "dx past the length, n=" << n << " t=" << t << " k=" << k;
        }
      }
    }
    for (i64 ld = 0; ld < LD; ++ld) {
      for (i64 k = 0; k < S; ++k) {
        EXPECT_EQ(all.hy[sz((ld * N + n) * S + k)], one.hy[sz(ld * S + k)]) << "hy n=" << n;
        EXPECT_EQ(all.dh0[sz((ld * N + n) * S + k)], one.dh0[sz(ld * S + k)]) << "dh0 n=" << n;
      }
      for (i64 k = 0; k < H && p.lstm(); ++k) {
        EXPECT_EQ(all.cy[sz((ld * N + n) * H + k)], one.cy[sz(ld * H + k)]) << "cy n=" << n;
        EXPECT_EQ(all.dc0[sz((ld * N + n) * H + k)], one.dc0[sz(ld * H + k)]) << "dc0 n=" << n;
      }
    }
    for (std::size_t i = 0; i < dw_sum.size(); ++i) dw_sum[i] += one.dw[i];
  }
  test::expect_near_all(all.dw, dw_sum, 1e-12, "dw");
}

TEST_P(PerCell, VarlenElementEqualsItsOwnRun) {
  for (bool bidir : {false, true}) check_varlen_against_solo(make_config(GetParam(), 3, 4, 2, bidir), 21);
  RnnConfig c = make_config(GetParam(), 3, 4, 2, false);
  c.reverse = true;
  check_varlen_against_solo(c, 22);
  c = make_config(GetParam(), 3, 4, 2, true);
  c.sum_directions = true;
  check_varlen_against_solo(c, 24);
  c.independent_stacks = true;
  check_varlen_against_solo(c, 25);
  if (GetParam() == CellKind::lstm) {
    c = make_config(CellKind::lstm, 3, 5, 2, true);
    c.proj_size = 2;
    c.clip = 0.4f;
    check_varlen_against_solo(c, 23);
  }
}

// x, y, dx, dy in [N, T, *] give exactly the transposed results of the seq-major run, with
// every other feature on.
TEST_P(PerCell, BatchFirstEqualsTransposed) {
  RnnConfig c = make_config(GetParam(), 3, 4, 2, true);
  c.dropout = 0.3f;
  if (GetParam() == CellKind::lstm) c.proj_size = 3, c.clip = 0.5f;
  const i64 T = 4, N = 3, I = c.input_size, W = c.directions() * c.state_size();
  const Problem seq = make_problem(c, {T, N}, {2, 4, 1}, 31);
  Problem bf = seq;
  bf.cfg.batch_first = true;
  auto transpose = [&](const std::vector<double>& a, i64 width) {  // [T, N, w] -> [N, T, w]
    std::vector<double> out(a.size());
    for (i64 t = 0; t < T; ++t)
      for (i64 n = 0; n < N; ++n)
        for (i64 k = 0; k < width; ++k) out[sz((n * T + t) * width + k)] = a[sz((t * N + n) * width + k)];
    return out;
  };
  bf.x = transpose(seq.x, I);
  bf.ry = transpose(seq.ry, W);
  const Results a = run(seq), b = run(bf);
  EXPECT_EQ(transpose(a.y, W), b.y);
  EXPECT_EQ(transpose(a.dx, I), b.dx);
  EXPECT_EQ(a.hy, b.hy);
  EXPECT_EQ(a.cy, b.cy);
  EXPECT_EQ(a.dh0, b.dh0);
  EXPECT_EQ(a.dc0, b.dc0);
  EXPECT_EQ(a.dw, b.dw);
}

// A reverse unidirectional layer is exactly the reverse half of a bidirectional one with the
// same weights there (forward, and backward with the gradient on the reverse half only).
TEST_P(PerCell, ReverseEqualsReverseHalfOfBidirectional) {
  for (i64 proj : {0, 2}) {
    if (proj > 0 && GetParam() != CellKind::lstm) continue;
    RnnConfig uc = make_config(GetParam(), 3, 5, 1, false);
    uc.reverse = true;
    uc.proj_size = proj;
    RnnConfig bc = uc;
    bc.reverse = false;
    bc.bidirectional = true;
    SCOPED_TRACE(config_name(uc));
    const i64 T = 4, N = 2, S = uc.state_size(), H = uc.hidden_size;
    const Problem u = make_problem(uc, {T, N}, {}, 41);
    Problem b = make_problem(bc, {T, N}, {}, 42);
    const WeightLayout ul(uc), bl(bc);
    for (const ParamBlock& blk : ul.blocks()) {  // u's "weight_ih_l0" -> b's "weight_ih_l0_reverse"
      const ParamBlock& to = bl.find(blk.name + "_reverse");
      std::copy_n(u.w.begin() + blk.offset, blk.size, b.w.begin() + to.offset);
    }
    b.x = u.x;
    for (i64 e = 0; e < N * S; ++e) b.h0[sz(N * S + e)] = u.h0[sz(e)], b.rhy[sz(N * S + e)] = u.rhy[sz(e)];
    for (i64 e = 0; e < N * S; ++e) b.rhy[sz(e)] = 0;
    for (i64 e = 0; e < N * H && u.lstm(); ++e) {
      b.c0[sz(N * H + e)] = u.c0[sz(e)], b.rcy[sz(N * H + e)] = u.rcy[sz(e)];
      b.rcy[sz(e)] = 0;
    }
    for (i64 row = 0; row < T * N; ++row)
      for (i64 k = 0; k < S; ++k) {
        b.ry[sz(row * 2 * S + k)] = 0;
        b.ry[sz(row * 2 * S + S + k)] = u.ry[sz(row * S + k)];
      }
    const Results ur = run(u), br = run(b);
    for (i64 row = 0; row < T * N; ++row)
      for (i64 k = 0; k < S; ++k) EXPECT_EQ(ur.y[sz(row * S + k)], br.y[sz(row * 2 * S + S + k)]) << row;
    for (i64 e = 0; e < N * S; ++e) {
      EXPECT_EQ(ur.hy[sz(e)], br.hy[sz(N * S + e)]);
      EXPECT_EQ(ur.dh0[sz(e)], br.dh0[sz(N * S + e)]);
    }
    for (i64 e = 0; e < N * H && u.lstm(); ++e) {
      EXPECT_EQ(ur.cy[sz(e)], br.cy[sz(N * H + e)]);
      EXPECT_EQ(ur.dc0[sz(e)], br.dc0[sz(N * H + e)]);
    }
    EXPECT_EQ(ur.dx, br.dx);  // the forward half gets a zero gradient and adds exact zeros
    for (const ParamBlock& blk : ul.blocks()) {
      const ParamBlock& to = bl.find(blk.name + "_reverse");
      for (i64 i = 0; i < blk.size; ++i)
        EXPECT_EQ(ur.dw[sz(blk.offset + i)], br.dw[sz(to.offset + i)]) << blk.name << "[" << i << "]";
    }
  }
}

// A reverse network on x is the forward network on x reversed in time (each element within its
// own length), reversed back: 2 layers, variable lengths, every output and gradient.
TEST_P(PerCell, ReverseEqualsForwardOnReversedInput) {
  RnnConfig fc = make_config(GetParam(), 3, 4, 2, false);
  if (GetParam() == CellKind::lstm) fc.proj_size = 2;
  RnnConfig rc = fc;
  rc.reverse = true;
  const i64 T = 5, N = 3, I = fc.input_size, S = fc.state_size();
  const Lengths lengths{5, 2, 4};
  const Problem r = make_problem(rc, {T, N}, lengths, 51);
  Problem f = r;
  f.cfg = fc;
  auto flip = [&](const std::vector<double>& a, i64 width) {  // t -> L_n-1-t within each length
    std::vector<double> out(a.size(), 0.0);
    for (i64 n = 0; n < N; ++n)
      for (i64 t = 0; t < lengths[sz(n)]; ++t)
        for (i64 k = 0; k < width; ++k)
          out[sz((t * N + n) * width + k)] = a[sz(((lengths[sz(n)] - 1 - t) * N + n) * width + k)];
    return out;
  };
  f.x = flip(r.x, I);
  f.ry = flip(r.ry, S);
  const Results rr = run(r), fr = run(f);
  EXPECT_EQ(rr.y, flip(fr.y, S));
  EXPECT_EQ(rr.hy, fr.hy);
  EXPECT_EQ(rr.cy, fr.cy);
  EXPECT_EQ(rr.dx, flip(fr.dx, I));
  EXPECT_EQ(rr.dh0, fr.dh0);
  EXPECT_EQ(rr.dc0, fr.dc0);
  test::expect_near_all(rr.dw, fr.dw, 1e-13, "dw");  // the same terms summed in another order
}

// Dropout is for training only: inference with a dropout config is inference without it.
TEST_P(PerCell, DropoutInferenceIgnoresIt) {
  RnnConfig c = make_config(GetParam(), 3, 4, 3, true);
  c.dropout = 0.5f;
  Problem p = make_problem(c, {4, 2}, {4, 1}, 61);
  const Results with = run(p, false, nullptr, true);
  p.cfg.dropout = 0;
  const Results without = run(p, false, nullptr, true);
  const Results trained = run(p, false);  // training without dropout: the same forward
  EXPECT_EQ(with.y, without.y);
  EXPECT_EQ(with.hy, without.hy);
  EXPECT_EQ(with.cy, without.cy);
  EXPECT_EQ(with.y, trained.y);
}

// The mask is a function of the seed: the same seed gives the same results, another one differs;
// with one layer there is nothing to drop.
TEST_P(PerCell, DropoutSeed) {
  RnnConfig c = make_config(GetParam(), 3, 4, 2, false);
  c.dropout = 0.4f;
  Problem p = make_problem(c, {4, 3}, {}, 71);
  const Results a = run(p), b = run(p);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dw, b.dw);
  p.seed += 1;
  const Results other = run(p);
  EXPECT_NE(a.y, other.y);
  EXPECT_NE(a.dw, other.dw);
  EXPECT_EQ(a.hy[0], other.hy[0]) << "layer 0's states do not depend on the mask";

  RnnConfig one = make_config(GetParam(), 3, 4, 1, true);
  one.dropout = 0.6f;
  Problem q = make_problem(one, {4, 3}, {3, 4, 1}, 72);
  const Results dropped = run(q);
  q.cfg.dropout = 0;
  const Results plain = run(q);
  EXPECT_EQ(dropped.y, plain.y);
  EXPECT_EQ(dropped.hy, plain.hy);
  EXPECT_EQ(dropped.cy, plain.cy);
  EXPECT_EQ(dropped.dx, plain.dx);
  EXPECT_EQ(dropped.dh0, plain.dh0);
  EXPECT_EQ(dropped.dw, plain.dw);
}

INSTANTIATE_TEST_SUITE_P(Reference, PerCell, ::testing::ValuesIn(kCells),
                         [](const ::testing::TestParamInfo<CellKind>& info) {
                           return std::string(to_string(info.param));
                         });

// Layer 1 reads layer 0's output (the output of a one-layer net with the same weights) with
// each element either zeroed or scaled by dropout_scale(p), at the element index of the
// sequence-major [T, N, D*S] layout; about a fraction p is zeroed.
TEST(ReferenceDropout, MaskAndFraction) {
  for (float p : {0.2f, 0.5f}) {
    RnnConfig c = make_config(CellKind::lstm, 4, 24, 2, true);
    c.proj_size = 16;
    c.dropout = p;
    c.batch_first = true;
    const i64 T = 20, N = 8, W = 2 * 16;
    Problem pr = make_problem(c, {T, N}, {}, 81);
    Reserve<double> rs;
    run(pr, false, &rs);
    // Layer 0 alone.
    RnnConfig c0 = c;
    c0.num_layers = 1;
    Problem p0 = pr;
    p0.cfg = c0;
    const WeightLayout full(c), first(c0);
    p0.w.assign(sz(first.total_elements()), 0);
    for (const ParamBlock& b : first.blocks())
      std::copy_n(pr.w.begin() + full.find(b.name).offset, b.size, p0.w.begin() + b.offset);
    p0.h0.resize(sz(2 * N * 16));
    p0.rhy.resize(p0.h0.size());
    p0.c0.resize(sz(2 * N * 24));
    p0.rcy.resize(p0.c0.size());
    const Results out0 = run(p0, false, nullptr, true);  // [N, T, W] (batch_first)
    const double scale = static_cast<double>(dropout_scale(p));
    ASSERT_EQ(rs.inputs[1].size(), sz(T * N * W));
    i64 dropped = 0;
    for (i64 t = 0; t < T; ++t)
      for (i64 n = 0; n < N; ++n)
        for (i64 j = 0; j < W; ++j) {
          const i64 e = (t * N + n) * W + j;
          const bool keep = dropout_keep(pr.seed, 0, e, p);
          const double v = out0.y[sz((n * T + t) * W + j)];
          ASSERT_EQ(rs.inputs[1][sz(e)], keep ? v * scale : 0.0) << "e=" << e;
          dropped += !keep;
        }
    const double fraction = double(dropped) / double(T * N * W);
    EXPECT_NEAR(fraction, p, 0.03) << "dropped " << dropped << " of " << T * N * W;
  }
}

// A clip larger than any |c| changes nothing, bit for bit.
TEST(ReferenceClip, LargeClipIsNoClip) {
  for (bool bidir : {false, true}) {
    RnnConfig c = make_config(CellKind::lstm, 3, 5, 2, bidir);
    c.proj_size = bidir ? 2 : 0;
    Problem p = make_problem(c, {5, 3}, {5, 2, 4}, 91);
    Reserve<double> rs;
    const Results plain = run(p, true, &rs);
    double most = 0;
    for (const auto& cs : rs.c)
      for (double v : cs) most = std::max(most, std::abs(v));
    ASSERT_GT(most, 0.5);
    p.cfg.clip = static_cast<float>(2 * most + 1);
    const Results clipped = run(p);
    EXPECT_EQ(plain.y, clipped.y);
    EXPECT_EQ(plain.hy, clipped.hy);
    EXPECT_EQ(plain.cy, clipped.cy);
    EXPECT_EQ(plain.dx, clipped.dx);
    EXPECT_EQ(plain.dh0, clipped.dh0);
    EXPECT_EQ(plain.dc0, clipped.dc0);
    EXPECT_EQ(plain.dw, clipped.dw);
  }
}

// The float instantiation with every feature on agrees with the double one (dot products
// accumulate in double in both; float storage and cell math add a few ulps per step).
TEST(ReferenceFloat, AllFeaturesAgreeWithDouble) {
  for (CellKind cell : kCells) {
    RnnConfig c = make_config(cell, 5, 9, 2, true);
    c.dropout = 0.3f;
    c.batch_first = true;
    if (cell == CellKind::lstm) c.proj_size = 4, c.clip = 0.6f;
    SCOPED_TRACE(config_name(c));
    const Problem p = make_problem(c, {6, 3}, {4, 6, 1}, 121);
    const Results d = run(p);
    auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    auto back = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    const auto w = f(p.w), x = f(p.x), h0 = f(p.h0), c0 = f(p.c0), ry = f(p.ry), rhy = f(p.rhy), rcy = f(p.rcy);
    std::vector<float> y(ry.size()), hy(h0.size()), cy(c0.size()), dx(x.size()), dh0(h0.size()), dc0(c0.size()),
        dw(w.size());
    Reserve<float> rs;
    const bool lstm = p.lstm();
    reference::forward<float>(c, p.shape, w.data(), x.data(), h0.data(), lstm ? c0.data() : nullptr, y.data(),
                              hy.data(), lstm ? cy.data() : nullptr, &rs, p.options());
    reference::backward_data<float>(c, p.shape, w.data(), rs, ry.data(), rhy.data(), lstm ? rcy.data() : nullptr,
                                    dx.data(), dh0.data(), lstm ? dc0.data() : nullptr);
    reference::backward_weights<float>(c, p.shape, rs, dw.data());
    test::expect_near_all(back(y), d.y, 2e-5, "y");
    test::expect_near_all(back(hy), d.hy, 2e-5, "hy");
    test::expect_near_all(back(cy), d.cy, 2e-5, "cy");
    test::expect_near_all(back(dx), d.dx, 1e-4, "dx");
    test::expect_near_all(back(dh0), d.dh0, 1e-4, "dh0");
    test::expect_near_all(back(dc0), d.dc0, 1e-4, "dc0");
    test::expect_near_all(back(dw), d.dw, 1e-4, "dw");
  }
}

// ---------------------------------------------------------------------------------------------
// Tiny cases computed by hand.

void set_block(const WeightLayout& layout, std::vector<double>& w, const std::string& name,
               const std::vector<double>& values) {
  std::span<double> v = layout.view(std::span<double>(w), name);
  ASSERT_EQ(v.size(), values.size()) << name;
  std::copy(values.begin(), values.end(), v.begin());
}

// LSTMP with H = 2, P = 1, I = 1, two steps, with and without a clip: c_t = clamp(f*c + i*g),
// r = o*tanh(c) [2], h = W_hr r [1], and h (width 1) feeds the next step through W_hh [8, 1].
TEST(ReferenceHand, LstmProjectionTwoSteps) {
  for (float clip : {0.0f, 0.3f}) {
    RnnConfig cfg = make_config(CellKind::lstm, 1, 2, 1, false);
    cfg.proj_size = 1;
    cfg.clip = clip;
    const Shape shape{2, 1};
    EXPECT_EQ(state_elements(cfg, shape), 1);
    EXPECT_EQ(cell_state_elements(cfg, shape), 2);
    const WeightLayout layout(cfg);
    std::vector<double> w(sz(layout.total_elements()));
    // Gate rows i0 i1 f0 f1 g0 g1 o0 o1.
    const std::vector<double> wx{0.4, -0.3, 0.8, 0.6, -0.5, 0.7, 0.2, -0.9};
    const std::vector<double> wh{0.1, 0.9, -0.2, 0.05, 0.3, 0.15, -0.1, 0.45};
    const std::vector<double> bx{0.1, 0.9, -0.2, 0.05, 0.02, 0.3, 0.15, -0.1};
    const std::vector<double> bh{-0.3, 0.25, 0.6, -0.4, 0.35, 0.12, -0.07, 0.2};
    const std::vector<double> whr{0.7, -1.2};
    set_block(layout, w, "weight_ih_l0", wx);
    set_block(layout, w, "weight_hh_l0", wh);
    set_block(layout, w, "bias_ih_l0", bx);
    set_block(layout, w, "bias_hh_l0", bh);
    set_block(layout, w, "weight_hr_l0", whr);
    const std::vector<double> x{0.9, -0.4}, h0{-0.3}, c0{1.8, -1.1};
    double h = h0[0], c[2] = {c0[0], c0[1]};
    std::vector<double> hs;
    for (double xv : x) {
      double r[2];
      for (int k = 0; k < 2; ++k) {
        auto pre = [&](int gate) { return wx[gate * 2 + k] * xv + bx[gate * 2 + k] + wh[gate * 2 + k] * h + bh[gate * 2 + k]; };
        const double i = sig(pre(0)), f = sig(pre(1)), g = std::tanh(pre(2)), o = sig(pre(3));
        c[k] = f * c[k] + i * g;
        if (clip > 0) c[k] = std::clamp(c[k], -double(clip), double(clip));
        r[k] = o * std::tanh(c[k]);
      }
      h = whr[0] * r[0] + whr[1] * r[1];
      hs.push_back(h);
    }
    if (clip > 0) {
      EXPECT_EQ(std::abs(c[0]), double(clip)) << "the case should clip";
    }
    std::vector<double> y(2, -99), hy(2, -99), cy(3, -99);  // one sentinel past hy's and cy's ends
    reference::forward<double>(cfg, shape, w.data(), x.data(), h0.data(), c0.data(), y.data(), hy.data(), cy.data(),
                               nullptr);
    EXPECT_NEAR(y[0], hs[0], 1e-14);
    EXPECT_NEAR(y[1], hs[1], 1e-14);
    EXPECT_NEAR(hy[0], hs[1], 1e-14);
    EXPECT_EQ(hy[1], -99) << "hy is P = 1 wide";
    EXPECT_NEAR(cy[0], c[0], 1e-14);
    EXPECT_NEAR(cy[1], c[1], 1e-14);
    EXPECT_EQ(cy[2], -99) << "cy is H = 2 wide";
  }
}

// Shapes with a projection: hy [L*D, N, P], y [T, N, D*P], cy [L*D, N, H].
TEST(ReferenceProjection, StateWidths) {
  RnnConfig c = make_config(CellKind::lstm, 3, 6, 2, true);
  c.proj_size = 4;
  const Shape s{3, 2};
  EXPECT_EQ(state_elements(c, s), 2 * 2 * 2 * 4);
  EXPECT_EQ(cell_state_elements(c, s), 2 * 2 * 2 * 6);
  EXPECT_EQ(y_elements(c, s), 3 * 2 * 2 * 4);
  const WeightLayout layout(c);
  EXPECT_EQ(layout.block(1, 0, ParamKind::weight_ih).shape, (std::vector<i64>{24, 8}));
  EXPECT_EQ(layout.block(1, 1, ParamKind::weight_hh).shape, (std::vector<i64>{24, 4}));
  EXPECT_EQ(layout.block(1, 1, ParamKind::weight_hr).shape, (std::vector<i64>{4, 6}));
  Problem p = make_problem(c, s, {}, 101);
  const Results r = run(p);
  EXPECT_EQ(r.hy.size(), sz(32));
  // hy of the last layer is y at the last step (forward) and at t = 0 (reverse).
  for (i64 n = 0; n < 2; ++n)
    for (i64 k = 0; k < 4; ++k) {
      EXPECT_EQ(r.hy[sz((2 * 2 + n) * 4 + k)], r.y[sz(((2 * 2) + n) * 8 + k)]);
      EXPECT_EQ(r.hy[sz((3 * 2 + n) * 4 + k)], r.y[sz((0 * 2 + n) * 8 + 4 + k)]);
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input.

TEST(ReferenceBadInput, SequenceLengths) {
  const RnnConfig c = make_config(CellKind::gru, 2, 3, 1, false);
  const Shape s{4, 3};
  std::vector<double> w(sz(WeightLayout(c).total_elements())), x(sz(x_elements(c, s))), y(sz(y_elements(c, s)));
  for (const auto& [lengths, index, value] :
       {std::tuple{Lengths{4, 0, 2}, 1, 0}, std::tuple{Lengths{4, 2, 5}, 2, 5}, std::tuple{Lengths{-1, 2, 3}, 0, -1}}) {
    for (bool training : {false, true}) {
      Reserve<double> rs;
      try {
        reference::forward<double>(c, s, w.data(), x.data(), nullptr, nullptr, y.data(), nullptr, nullptr,
                                   training ? &rs : nullptr, {lengths.data(), 0});
        ADD_FAILURE() << "no error for seq_lengths[" << index << "] = " << value;
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(fmt::format("seq_lengths[{}] = {}", index, value)), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      }
    }
  }
  const Lengths ok{4, 1, 3};
  EXPECT_NO_THROW(reference::forward<double>(c, s, w.data(), x.data(), nullptr, nullptr, y.data(), nullptr, nullptr,
                                             nullptr, {ok.data(), 0}));
}

TEST(ReferenceBadInput, FeatureConfigs) {
  const Shape s{2, 1};
  std::vector<double> buf(4096);
  auto throws = [&](const RnnConfig& c, const char* what) {
    EXPECT_THROW(reference::forward<double>(c, s, buf.data(), buf.data(), nullptr, nullptr, buf.data(), nullptr,
                                            nullptr, nullptr),
                 Error)
        << what;
  };
  RnnConfig c = make_config(CellKind::lstm, 2, 4, 1, false);
  c.proj_size = 4;
  throws(c, "proj_size == H");
  c.proj_size = 5;
  throws(c, "proj_size > H");
  c.proj_size = -1;
  throws(c, "proj_size < 0");
  c = make_config(CellKind::gru, 2, 4, 1, false);
  c.proj_size = 2;
  throws(c, "proj_size on GRU");
  c = make_config(CellKind::rnn_tanh, 2, 4, 1, false);
  c.proj_size = 2;
  throws(c, "proj_size on RNN");
  c = make_config(CellKind::lstm, 2, 4, 1, false);
  c.clip = -1.0f;
  throws(c, "clip < 0");
  c.clip = std::numeric_limits<float>::quiet_NaN();
  throws(c, "clip NaN");
  c = make_config(CellKind::gru, 2, 4, 1, false);
  c.clip = 1.0f;
  throws(c, "clip on GRU");
  c = make_config(CellKind::lstm, 2, 4, 2, false);
  c.dropout = 1.0f;
  throws(c, "dropout 1");
  c.dropout = -0.1f;
  throws(c, "dropout < 0");
  c = make_config(CellKind::lstm, 2, 4, 1, true);
  c.reverse = true;
  throws(c, "reverse with bidirectional");
}

// ---------------------------------------------------------------------------------------------
// PyTorch, when it is importable: pack_padded_sequence and nn.LSTM(proj_size=...).

std::string python() {
  const char* p = std::getenv("RNNJIT_TEST_PYTHON");
  return p && *p ? p : "python3";
}

TEST(ReferenceTorch, VarlenAndProjection) {
  if (std::system((python() + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "torch is not importable";
  struct TorchCase {
    RnnConfig cfg;
    Shape shape;
    Lengths lengths;
  };
  std::vector<TorchCase> cases;
  for (CellKind cell : kCells) {
    cases.push_back({make_config(cell, 3, 4, 2, true), {5, 4}, {3, 5, 1, 4}});
    RnnConfig c = make_config(cell, 2, 3, 1, false);
    c.batch_first = true;
    cases.push_back({c, {4, 3}, {2, 4, 1}});
  }
  RnnConfig c = make_config(CellKind::lstm, 3, 5, 2, true);
  c.proj_size = 3;
  cases.push_back({c, {4, 2}, {}});
  c.batch_first = true;
  cases.push_back({c, {5, 3}, {5, 2, 4}});
  c = make_config(CellKind::lstm, 4, 6, 1, false);
  c.proj_size = 2;
  cases.push_back({c, {3, 2}, {}});

  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / fmt::format("rnnjit_torch_compare_{}", ::getpid());
  fs::remove_all(root);
  std::vector<Problem> problems;
  std::string command = python() + " " + RNNJIT_SOURCE_DIR "/tests/torch_compare.py";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    Problem p = make_problem(cases[i].cfg, cases[i].shape, cases[i].lengths, 111 + i);
    for (auto* v : {&p.w, &p.x, &p.h0, &p.c0, &p.ry, &p.rhy, &p.rcy})  // what the float32 files hold
      for (double& e : *v) e = static_cast<float>(e);
    const fs::path dir = root / fmt::format("case{}", i);
    fs::create_directories(dir);
    const RnnConfig& cfg = p.cfg;
    const i64 T = p.shape.seq_len, N = p.shape.batch, LD = cfg.num_layers * cfg.directions();
    nlohmann::json j = {{"cell", std::string(to_string(cfg.cell))}, {"input_size", cfg.input_size},
                        {"hidden_size", cfg.hidden_size},             {"num_layers", cfg.num_layers},
                        {"bidirectional", cfg.bidirectional},         {"proj_size", cfg.proj_size},
                        {"batch_first", cfg.batch_first},             {"seq_len", T},
                        {"batch", N},                                 {"blocks", nlohmann::json::array()}};
    const WeightLayout layout(cfg);
    for (const ParamBlock& b : layout.blocks())
      j["blocks"].push_back({{"name", b.name}, {"offset", b.offset}, {"size", b.size}, {"shape", b.shape}});
    std::ofstream(dir / "config.json") << j.dump();
    auto put = [&](const char* name, const std::vector<double>& v, std::vector<i64> shape) {
      const std::vector<float> f(v.begin(), v.end());
      npy::write_f32((dir / name).string(), shape, f);
    };
    const std::vector<i64> xs = cfg.batch_first ? std::vector<i64>{N, T, cfg.input_size}
                                                : std::vector<i64>{T, N, cfg.input_size};
    const i64 W = cfg.directions() * cfg.state_size();
    put("w.npy", p.w, {static_cast<i64>(p.w.size())});
    put("x.npy", p.x, xs);
    put("ry.npy", p.ry, cfg.batch_first ? std::vector<i64>{N, T, W} : std::vector<i64>{T, N, W});
    put("h0.npy", p.h0, {LD, N, cfg.state_size()});
    put("rhy.npy", p.rhy, {LD, N, cfg.state_size()});
    if (p.lstm()) {
      put("c0.npy", p.c0, {LD, N, cfg.hidden_size});
      put("rcy.npy", p.rcy, {LD, N, cfg.hidden_size});
    }
    if (!p.lengths.empty()) npy::write_i32((dir / "lengths.npy").string(), {N}, p.lengths);
    command += " " + dir.string();
    problems.push_back(std::move(p));
  }
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  for (std::size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    SCOPED_TRACE(fmt::format("case{} {} T={} N={}", i, describe(p.cfg), p.shape.seq_len, p.shape.batch));
    const fs::path dir = root / fmt::format("case{}", i);
    auto get = [&](const char* name, std::size_t size) {
      const std::vector<float> f = npy::read_f32((dir / name).string(), {static_cast<i64>(size)});
      return std::vector<double>(f.begin(), f.end());
    };
    auto get_any = [&](const char* name) {
      const std::vector<float> f = npy::as_f32(npy::read((dir / name).string()), name);
      return std::vector<double>(f.begin(), f.end());
    };
    const Results r = run(p);
    // Torch ran in float64 on the same float32 inputs; its results were rounded to float32.
    const double tol = 1e-5;
    test::expect_near_all(get_any("y.npy"), r.y, tol, "y");
    test::expect_near_all(get_any("hy.npy"), r.hy, tol, "hy");
    test::expect_near_all(get_any("dx.npy"), r.dx, tol, "dx");
    test::expect_near_all(get_any("dh0.npy"), r.dh0, tol, "dh0");
    if (p.lstm()) {
      test::expect_near_all(get_any("cy.npy"), r.cy, tol, "cy");
      test::expect_near_all(get_any("dc0.npy"), r.dc0, tol, "dc0");
    }
    test::expect_near_all(get("dw.npy", p.w.size()), r.dw, tol, "dw");
  }
  fs::remove_all(root);
}

// The JIT path end to end through the CLI against PyTorch: random configurations, small ones and
// ones large enough for blocked GEMMs and split steps (tests/torch_cli_check.py says what it draws).
TEST(ReferenceTorch, CliJitMatchesTorchOnRandomConfigs) {
  if (std::system((python() + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "torch and numpy are not both importable";
  const std::string script = python() + " " RNNJIT_SOURCE_DIR "/tests/torch_cli_check.py " RNNJIT_CLI_PATH;
  EXPECT_EQ(std::system((script + " --cases 24 --seed 3").c_str()), 0);
  EXPECT_EQ(std::system((script + " --cases 6 --seed 4 --big").c_str()), 0);
}

}  // namespace
}  // namespace rnnjit
