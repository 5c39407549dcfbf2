// Tests of the oneDNN bench peer (bench/onednn_peer.hpp): small networks of every cell run through
// oneDNN and through the double-precision scalar reference. Matching y, hy, cy (inference and
// training forward), dx, dhx, dcx and the weight gradients converted back to the canonical layout
// proves the weight mapping: gate permutation (lbr_gru's u,r,o = PyTorch's z,r,n), transposition
// into ldigo, bias folding (b_ih + b_hh; lbr_gru's separate b_in, b_hn), one primitive per layer
// with bidirectional_concat or (sum_directions) bidirectional_sum. Every bias gradient maps back
// (a summed bias's gradient is each summand's), so the whole canonical gradient is compared.
// Without oneDNN at build time, only the stub's behaviour is checked and the rest is skipped.
#include "bench/onednn_peer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

using bench::OnednnRnn;
using bench::onednn_available;
using test::expect_close;
using test::RnnCase;
using test::Tensors;
using test::worst_difference;

struct PeerCase {
  CellKind cell;
  std::int64_t input, hidden, layers;
  bool bidirectional;
  std::int64_t seq_len, batch;
  bool peephole = false;
  bool sum = false;  // sum_directions: oneDNN's bidirectional_sum
  float relu_alpha = 0.0f;  // rnn_relu: eltwise_relu's alpha (the leaky slope)
  std::int64_t proj_size = 0;  // LSTM: oneDNN's projection LSTM
  bool reverse = false;        // unidirectional: oneDNN's unidirectional_right2left
  bool batch_first = false;    // x, y [N, T, *]: oneDNN's ntc
  bool no_bias = false;        // oneDNN's bias all zeros

  PeerCase with(bool PeerCase::*flag) const {
    PeerCase c = *this;
    c.*flag = true;
    return c;
  }
};

std::ostream& operator<<(std::ostream& os, const PeerCase& c) {
  return os << to_string(c.cell) << " I=" << c.input << " H=" << c.hidden << " L=" << c.layers
            << " D=" << (c.bidirectional ? 2 : 1) << " T=" << c.seq_len << " N=" << c.batch
            << (c.peephole ? " peephole" : "") << (c.sum ? " sum" : "")
            << (c.relu_alpha > 0.0f ? " leaky" : "") << (c.proj_size > 0 ? " P=" + std::to_string(c.proj_size) : "")
            << (c.reverse ? " reverse" : "") << (c.batch_first ? " batch_first" : "") << (c.no_bias ? " no_bias" : "");
}

std::string case_name(const testing::TestParamInfo<PeerCase>& info) {
  const PeerCase& c = info.param;
  return std::string(to_string(c.cell)) + "_I" + std::to_string(c.input) + "_H" + std::to_string(c.hidden) + "_L" +
         std::to_string(c.layers) + (c.bidirectional ? "_bi" : "_uni") + "_T" + std::to_string(c.seq_len) + "_N" +
         std::to_string(c.batch) + (c.peephole ? "_peephole" : "") + (c.sum ? "_sum" : "") +
         (c.relu_alpha > 0.0f ? "_leaky" : "") + (c.proj_size > 0 ? "_P" + std::to_string(c.proj_size) : "") +
         (c.reverse ? "_reverse" : "") + (c.batch_first ? "_batch_first" : "") + (c.no_bias ? "_no_bias" : "");
}

RnnConfig config_of(const PeerCase& c) {
  RnnConfig cfg;
  cfg.cell = c.cell;
  cfg.input_size = c.input;
  cfg.hidden_size = c.hidden;
  cfg.num_layers = c.layers;
  cfg.bidirectional = c.bidirectional;
  cfg.peephole = c.peephole;
  cfg.sum_directions = c.sum;
  cfg.relu_alpha = c.relu_alpha;
  cfg.proj_size = c.proj_size;
  cfg.reverse = c.reverse;
  cfg.batch_first = c.batch_first;
  cfg.bias = !c.no_bias;
  return cfg;
}

// The Io structs field by field (rnnjit's structs may grow fields that the peer ignores).
ForwardIo fwd_io(std::span<const float> x, std::span<const float> hx, std::span<const float> cx, std::span<float> y,
                 std::span<float> hy, std::span<float> cy) {
  ForwardIo io{};
  io.x = x;
  io.hx = hx;
  io.cx = cx;
  io.y = y;
  io.hy = hy;
  io.cy = cy;
  return io;
}

BackwardDataIo bwd_io(std::span<const float> dy, std::span<const float> dhy, std::span<const float> dcy,
                      std::span<float> dx, std::span<float> dhx, std::span<float> dcx) {
  BackwardDataIo io{};
  io.dy = dy;
  io.dhy = dhy;
  io.dcy = dcy;
  io.dx = dx;
  io.dhx = dhx;
  io.dcx = dcx;
  return io;
}

// oneDNN's vectorized exp/tanh are approximations (a few ulp), on top of float rounding.
double peer_tolerance(const RnnCase& rc, bool gradient) { return std::max(rc.tolerance(gradient), 1e-5); }

// Runs the case through the peer: forward (inference or training), then backward and the
// canonical weight gradients when training.
Tensors run_peer(OnednnRnn& peer, const RnnCase& rc) {
  Tensors t;
  t.y.assign(rc.dy.size(), std::numeric_limits<float>::quiet_NaN());
  t.hy.assign(rc.hx.size(), std::numeric_limits<float>::quiet_NaN());
  t.cy.assign(rc.cx.size(), std::numeric_limits<float>::quiet_NaN());
  peer.forward(fwd_io(rc.x, rc.hx, rc.cx, t.y, t.hy, t.cy));
  if (peer.mode() != Mode::training) return t;
  t.dx.assign(rc.x.size(), std::numeric_limits<float>::quiet_NaN());
  t.dhx.assign(rc.hx.size(), std::numeric_limits<float>::quiet_NaN());
  t.dcx.assign(rc.cx.size(), std::numeric_limits<float>::quiet_NaN());
  t.dw.assign(rc.w.size(), std::numeric_limits<float>::quiet_NaN());
  peer.backward(bwd_io(rc.dy, rc.dhy, rc.dcy, t.dx, t.dhx, t.dcx));
  peer.weight_gradients(t.dw);
  return t;
}

void expect_forward(const Tensors& got, const Tensors& want, const RnnCase& rc) {
  const double tol = peer_tolerance(rc, false);
  expect_close(got.y, want.y, tol, "y");
  expect_close(got.hy, want.hy, tol, "hy");
  if (rc.lstm()) expect_close(got.cy, want.cy, tol, "cy");
}

void expect_backward(const Tensors& got, const Tensors& want, const RnnCase& rc) {
  const double tol = peer_tolerance(rc, true);
  expect_close(got.dx, want.dx, tol, "dx");
  expect_close(got.dhx, want.dhx, tol, "dhx");
  if (rc.lstm()) expect_close(got.dcx, want.dcx, tol, "dcx");
  // Per named block, so that a failure says which parameter is off.
  const WeightLayout layout(rc.config);
  for (const ParamBlock& b : layout.blocks()) {
    const auto from = static_cast<std::ptrdiff_t>(b.offset), to = static_cast<std::ptrdiff_t>(b.offset + b.size);
    expect_close(std::vector<float>(got.dw.begin() + from, got.dw.begin() + to),
                 std::vector<float>(want.dw.begin() + from, want.dw.begin() + to), tol, "d" + b.name);
  }
}

class OnednnPeer : public testing::TestWithParam<PeerCase> {
 protected:
  void SetUp() override {
    if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  }
};

TEST_P(OnednnPeer, InferenceMatchesReference) {
  const PeerCase& c = GetParam();
  const RnnCase rc(config_of(c), {c.seq_len, c.batch}, 11);
  OnednnRnn peer(rc.config, rc.shape, Mode::inference, rc.w);
  SCOPED_TRACE(peer.run_info().summary());
  expect_forward(run_peer(peer, rc), rc.reference(false), rc);
}

// The bf16 peer (the benchmark's onednn_bf16) for a case, or nothing and why where oneDNN runs
// no bf16 RNN of it on this CPU (or the peer refuses it).
std::unique_ptr<OnednnRnn> bf16_peer(const RnnCase& rc, Mode mode, std::string* why) {
  try {
    return std::make_unique<OnednnRnn>(rc.config, rc.shape, mode, rc.w, 0, /*bf16=*/true);
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

// The bf16 peer computes the same network, to bf16's precision (the tolerance of test_bf16_rnn).
TEST_P(OnednnPeer, Bf16InferenceMatchesReferenceToBf16Precision) {
  const PeerCase& c = GetParam();
  const RnnCase rc(config_of(c), {c.seq_len, c.batch}, 11);
  std::string why;
  const std::unique_ptr<OnednnRnn> peer = bf16_peer(rc, Mode::inference, &why);
  if (!peer) GTEST_SKIP() << "the bf16 peer does not run this case here: " << why;
  SCOPED_TRACE(peer->run_info().summary());
  const Tensors got = run_peer(*peer, rc), want = rc.reference(false);
  const double tol = rc.bf16_tolerance(false);
  expect_close(got.y, want.y, tol, "y");
  expect_close(got.hy, want.hy, tol, "hy");
  if (rc.lstm()) expect_close(got.cy, want.cy, tol, "cy");
}

// Training on the bf16 peer: bf16 data and weights forward, FP32 gradients (oneDNN's bf16 RNN
// training), against the reference to the tolerance of test_bf16_rnn's training (the gradients
// also sum over N). ReLU's gradient jumps where bf16 moves a pre-activation across 0: no bf16
// tolerance bounds it (test_bf16_rnn skips it too).
TEST_P(OnednnPeer, Bf16TrainingMatchesReferenceToBf16Precision) {
  const PeerCase& c = GetParam();
  if (c.cell == CellKind::rnn_relu) GTEST_SKIP() << "ReLU's gradient is discontinuous where bf16 moves it";
  const RnnCase rc(config_of(c), {c.seq_len, c.batch}, 12);
  std::string why;
  const std::unique_ptr<OnednnRnn> peer = bf16_peer(rc, Mode::training, &why);
  if (!peer) GTEST_SKIP() << "the bf16 peer does not run this case here: " << why;
  SCOPED_TRACE(peer->run_info().summary());
  const Tensors want = rc.reference(true);
  const Tensors got = run_peer(*peer, rc);
  const double tol = rc.bf16_tolerance(false), gtol = rc.bf16_tolerance(true);
  expect_close(got.y, want.y, tol, "y");
  expect_close(got.hy, want.hy, tol, "hy");
  expect_close(got.dx, want.dx, gtol, "dx");
  expect_close(got.dhx, want.dhx, gtol, "dhx");
  expect_close(got.dw, want.dw, gtol, "dw");
  if (rc.lstm()) {
    expect_close(got.cy, want.cy, tol, "cy");
    expect_close(got.dcx, want.dcx, gtol, "dcx");
  }
  // bf16 really ran: the gradients differ from the FP32 peer's.
  OnednnRnn strict(rc.config, rc.shape, Mode::training, rc.w);
  EXPECT_GT(worst_difference(got.dw, run_peer(strict, rc).dw), 1e-6) << "bf16 gradients equal FP32's";
}

TEST_P(OnednnPeer, TrainingMatchesReference) {
  const PeerCase& c = GetParam();
  const RnnCase rc(config_of(c), {c.seq_len, c.batch}, 12);
  OnednnRnn peer(rc.config, rc.shape, Mode::training, rc.w);
  SCOPED_TRACE(peer.run_info().summary());
  const Tensors want = rc.reference(true);
  const Tensors first = run_peer(peer, rc);
  expect_forward(first, want, rc);
  expect_backward(first, want, rc);
  // A second step gives the same results: oneDNN accumulates weight gradients, the peer zeroes them.
  const Tensors second = run_peer(peer, rc);
  expect_close(second.dw, first.dw, 1e-6, "dw of a second step");
  expect_close(second.dx, first.dx, 1e-6, "dx of a second step");
}

INSTANTIATE_TEST_SUITE_P(
    Cells, OnednnPeer,
    testing::Values(
        // The brief's case: every cell, two bidirectional layers (layer 1's input 2H != I).
        PeerCase{CellKind::rnn_relu, 5, 17, 2, true, 4, 3}, PeerCase{CellKind::rnn_tanh, 5, 17, 2, true, 4, 3},
        PeerCase{CellKind::lstm, 5, 17, 2, true, 4, 3}, PeerCase{CellKind::gru, 5, 17, 2, true, 4, 3},
        // One unidirectional layer.
        PeerCase{CellKind::rnn_tanh, 5, 17, 1, false, 4, 3}, PeerCase{CellKind::lstm, 5, 17, 1, false, 4, 3},
        PeerCase{CellKind::gru, 5, 17, 1, false, 4, 3},
        // Three layers whose shapes are all equal (I = D*H: one primitive for every layer), T = 1.
        PeerCase{CellKind::lstm, 6, 3, 3, true, 1, 2}, PeerCase{CellKind::gru, 6, 3, 3, true, 5, 2},
        // Three unidirectional layers, I != H.
        PeerCase{CellKind::rnn_relu, 7, 9, 3, false, 6, 1}, PeerCase{CellKind::gru, 7, 9, 3, false, 6, 4},
        // The reset-before GRU is oneDNN's vanilla GRU: an oracle for rnnjit's reference of it.
        PeerCase{CellKind::gru_reset_before, 5, 17, 2, true, 4, 3},
        PeerCase{CellKind::gru_reset_before, 7, 9, 1, false, 6, 4},
        // oneDNN's peephole LSTM (P_i, P_f on c_{t-1}, P_o on c_t): an oracle for rnnjit's reference of it.
        PeerCase{CellKind::lstm, 5, 17, 2, true, 4, 3, true}, PeerCase{CellKind::lstm, 7, 9, 1, false, 6, 4, true},
        // bidirectional_sum, a primitive per layer: y = h_fwd + h_bwd, and layer 1 reads H columns.
        PeerCase{CellKind::rnn_tanh, 5, 17, 2, true, 4, 3, false, true},
        PeerCase{CellKind::lstm, 5, 17, 3, true, 4, 3, false, true},
        PeerCase{CellKind::gru, 5, 17, 2, true, 4, 3, false, true},
        PeerCase{CellKind::gru_reset_before, 7, 9, 1, true, 6, 4, false, true},
        PeerCase{CellKind::lstm, 7, 9, 2, true, 6, 4, true, true},
        // oneDNN's eltwise_logistic vanilla RNN and its leaky eltwise_relu (alpha): oracles for
        // rnnjit's rnn_sigmoid and relu_alpha.
        PeerCase{CellKind::rnn_sigmoid, 5, 17, 2, true, 4, 3}, PeerCase{CellKind::rnn_sigmoid, 7, 9, 1, false, 6, 4},
        PeerCase{CellKind::rnn_relu, 5, 17, 2, true, 4, 3, false, false, 0.2f},
        PeerCase{CellKind::rnn_relu, 7, 9, 3, false, 6, 1, false, false, 0.2f},
        // oneDNN's projection LSTM (h = W_hr (o * tanh(c)), P wide): an oracle for rnnjit's
        // reference of PyTorch's proj_size; with peepholes and summed directions too.
        PeerCase{CellKind::lstm, 5, 17, 2, true, 4, 3, false, false, 0.0f, 7},
        PeerCase{CellKind::lstm, 7, 9, 3, false, 6, 4, false, false, 0.0f, 4},
        PeerCase{CellKind::lstm, 5, 17, 2, true, 4, 3, true, true, 0.0f, 11},
        // unidirectional_right2left (rnnjit's reverse), ntc (batch_first), zero biases (no bias).
        PeerCase{CellKind::lstm, 7, 9, 2, false, 6, 4}.with(&PeerCase::reverse),
        PeerCase{CellKind::gru, 5, 17, 1, false, 4, 3}.with(&PeerCase::reverse),
        PeerCase{CellKind::gru_reset_before, 5, 17, 2, true, 4, 3}.with(&PeerCase::batch_first),
        PeerCase{CellKind::lstm, 7, 9, 2, false, 6, 4, false, false, 0.0f, 5}.with(&PeerCase::batch_first),
        PeerCase{CellKind::rnn_tanh, 5, 17, 2, true, 4, 3}.with(&PeerCase::no_bias),
        PeerCase{CellKind::gru, 7, 9, 2, false, 6, 4}.with(&PeerCase::no_bias).with(&PeerCase::reverse)),
    case_name);

// rnnjit's generated kernels (not its reference) against oneDNN directly, on configurations
// drawn at random from everything the peer models: every cell, one to three layers, the
// directions, batch-first tensors, no biases, peepholes and projections, the leaky slope; sizes
// around the vector width and large enough for the blocked GEMMs; one and two threads;
// inference and training. The seed is fixed: a failure names its case and reproduces.
struct RandomPeerCase {
  int index;
  RnnConfig config;
  Shape shape;
  Mode mode;
  int threads;
};

void PrintTo(const RandomPeerCase& c, std::ostream* os) {
  *os << c.index << ": " << describe(c.config) << " T=" << c.shape.seq_len << " N=" << c.shape.batch << " "
      << to_string(c.mode) << " threads=" << c.threads;
}

std::vector<RandomPeerCase> random_peer_cases() {
  std::mt19937 rng(20261202);
  auto pick = [&](std::initializer_list<std::int64_t> values) {
    return *(values.begin() + std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng));
  };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  std::vector<RandomPeerCase> cases;
  for (int i = 0; i < 60; ++i) {
    RnnConfig c;
    c.cell = kCellKinds[std::uniform_int_distribution<std::size_t>(0, kCellKinds.size() - 1)(rng)];
    c.input_size = pick({1, 7, 16, 33, 100, 257});
    c.hidden_size = pick({1, 5, 16, 17, 47, 130, 300});
    c.num_layers = pick({1, 1, 2, 3});
    c.bidirectional = coin(0.5);
    c.reverse = !c.bidirectional && coin(0.4);
    c.sum_directions = c.bidirectional && coin(0.3);
    c.batch_first = coin(0.3);
    c.bias = coin(0.8);
    const bool lstm = c.cell == CellKind::lstm;
    c.peephole = lstm && coin(0.4);
    c.proj_size = lstm && c.hidden_size > 1 && coin(0.4) ? std::max<std::int64_t>(1, c.hidden_size / 3) : 0;
    c.relu_alpha = c.cell == CellKind::rnn_relu && coin(0.5) ? 0.3f : 0.0f;
    const Shape shape{pick({1, 3, 8, 12}), pick({1, 2, 5, 17, 40})};
    cases.push_back({i, c, shape, coin(0.6) ? Mode::training : Mode::inference, static_cast<int>(pick({1, 2}))});
  }
  return cases;
}

class OnednnRandom : public testing::TestWithParam<RandomPeerCase> {};

TEST_P(OnednnRandom, JitMatchesOnednn) {
  const RandomPeerCase& p = GetParam();
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  const RnnCase rc(p.config, p.shape, static_cast<unsigned>(p.index) + 100);
  OnednnRnn peer(rc.config, rc.shape, p.mode, rc.w);
  SCOPED_TRACE(peer.run_info().summary());
  Rnn rnn(p.config, {.backend = Backend::jit, .threads = p.threads});
  Execution ex = rnn.prepare(rc.shape, p.mode);
  const Tensors got = rc.run(ex), want = run_peer(peer, rc);
  expect_forward(got, want, rc);
  if (p.mode == Mode::training) expect_backward(got, want, rc);
}

INSTANTIATE_TEST_SUITE_P(Seeded, OnednnRandom, testing::ValuesIn(random_peer_cases()),
                         [](const testing::TestParamInfo<RandomPeerCase>& info) {
                           std::string s = std::to_string(info.param.index) + "_" + describe(info.param.config);
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// Optional buffers: no hx/cx means zeros, no hy/cy/dhx/dcx means not written, no dhy/dcy zeros.
TEST(OnednnPeerBuffers, OptionalStatesMatchReference) {
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  RnnConfig cfg;
  cfg.cell = CellKind::lstm;
  cfg.input_size = 5;
  cfg.hidden_size = 17;
  cfg.num_layers = 2;
  cfg.bidirectional = true;
  const Shape shape{4, 3};
  RnnCase rc(cfg, shape, 13);
  std::fill(rc.hx.begin(), rc.hx.end(), 0.0f);
  std::fill(rc.cx.begin(), rc.cx.end(), 0.0f);
  std::fill(rc.dhy.begin(), rc.dhy.end(), 0.0f);
  std::fill(rc.dcy.begin(), rc.dcy.end(), 0.0f);
  const Tensors want = rc.reference(true);

  OnednnRnn peer(cfg, shape, Mode::training, rc.w);
  std::vector<float> y(rc.dy.size()), dx(rc.x.size()), dw(rc.w.size());
  peer.forward(fwd_io(rc.x, {}, {}, y, {}, {}));
  peer.backward(bwd_io(rc.dy, {}, {}, dx, {}, {}));
  peer.weight_gradients(dw);
  expect_close(y, want.y, peer_tolerance(rc, false), "y");
  expect_close(dx, want.dx, peer_tolerance(rc, true), "dx");
  expect_close(dw, want.dw, peer_tolerance(rc, true), "dw");
}

// set_weights replaces the weights of a built peer (inference: reordered again).
TEST(OnednnPeerBuffers, SetWeights) {
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  RnnConfig cfg;
  cfg.cell = CellKind::gru;
  cfg.input_size = 5;
  cfg.hidden_size = 17;
  cfg.num_layers = 2;
  cfg.bidirectional = true;
  const Shape shape{4, 3};
  const RnnCase a(cfg, shape, 21), b(cfg, shape, 22);
  OnednnRnn peer(cfg, shape, Mode::inference, a.w);
  peer.set_weights(b.w);
  expect_forward(run_peer(peer, b), b.reference(false), b);
}

TEST(OnednnPeerBuffers, Errors) {
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  RnnConfig cfg;
  cfg.cell = CellKind::rnn_tanh;
  cfg.input_size = 5;
  cfg.hidden_size = 17;
  const Shape shape{4, 3};
  const RnnCase rc(cfg, shape, 31);
  std::vector<float> short_w(rc.w.begin(), rc.w.end() - 1);
  EXPECT_THROW(OnednnRnn(cfg, shape, Mode::inference, short_w), Error);
  RnnConfig bad = cfg;
  bad.hidden_size = 0;
  EXPECT_THROW(OnednnRnn(bad, shape, Mode::inference, rc.w), Error);
  bad = cfg;
  bad.dropout = 0.5f;  // what the peer does not model is refused, not dropped
  bad.num_layers = 2;
  EXPECT_THROW(OnednnRnn(bad, shape, Mode::training, RnnCase(bad, shape, 31).w), Error);
  bad = cfg;
  bad.gate_clip = 1.0f;
  EXPECT_THROW(OnednnRnn(bad, shape, Mode::inference, rc.w), Error);
  bad = cfg;
  bad.bidirectional = bad.independent_stacks = true;  // the peer stacks a primitive per layer
  bad.num_layers = 2;
  EXPECT_THROW(OnednnRnn(bad, shape, Mode::inference, RnnCase(bad, shape, 31).w), Error);

  OnednnRnn infer(cfg, shape, Mode::inference, rc.w);
  std::vector<float> y(rc.dy.size()), dx(rc.x.size()), dw(rc.w.size());
  std::vector<float> short_x(rc.x.begin(), rc.x.end() - 1), cx(rc.hx.size());
  EXPECT_THROW(infer.forward(fwd_io(short_x, {}, {}, y, {}, {})), Error);
  EXPECT_THROW(infer.forward(fwd_io(rc.x, {}, cx, y, {}, {})), Error);  // cx is for LSTM only
  EXPECT_THROW(infer.backward(bwd_io(rc.dy, {}, {}, dx, {}, {})), Error);
  EXPECT_THROW(infer.weight_gradients(dw), Error);

  OnednnRnn train(cfg, shape, Mode::training, rc.w);
  EXPECT_THROW(train.backward(bwd_io(rc.dy, {}, {}, dx, {}, {})), Error);  // no forward yet
  train.forward(fwd_io(rc.x, {}, {}, y, {}, {}));
  train.backward(bwd_io(rc.dy, {}, {}, dx, {}, {}));
  EXPECT_THROW(train.backward(bwd_io(rc.dy, {}, {}, dx, {}, {})), Error);  // the workspace is used up
}

// threads > 0 runs oneDNN with that many threads (same results as the default, within rounding)
// and restores the caller's OpenMP setting; run_info() describes what runs.
TEST(OnednnPeerBuffers, ThreadsAndRunInfo) {
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  RnnConfig cfg;
  cfg.cell = CellKind::lstm;
  cfg.input_size = 5;
  cfg.hidden_size = 17;
  cfg.num_layers = 2;
  cfg.bidirectional = true;
  const Shape shape{4, 3};
  const RnnCase rc(cfg, shape, 41);
  EXPECT_THROW(OnednnRnn(cfg, shape, Mode::training, rc.w, -1), Error);
  OnednnRnn peer(cfg, shape, Mode::training, rc.w, 1);
  const bench::PeerRun info = peer.run_info();
  EXPECT_EQ(info.library, bench::onednn_version()) << info.summary();
  EXPECT_FALSE(info.isa.empty());
  EXPECT_FALSE(info.forward_impl.empty());
  EXPECT_FALSE(info.backward_impl.empty());
  EXPECT_EQ(info.primitives, 4) << info.summary();  // forward + backward, for layer 0 and for layer 1
  EXPECT_GE(info.executions_per_forward, 2);
  EXPECT_GE(info.executions_per_backward, 2);
  EXPECT_TRUE(info.threads == 1 || info.threads == 0) << info.summary();  // 0: not an OpenMP build
  const Tensors want = rc.reference(true), got = run_peer(peer, rc);
  expect_forward(got, want, rc);
  expect_backward(got, want, rc);
}

// The peer runs the oneDNN that CMake found (Debian's 2.6.3, or the one RNNJIT_ONEDNN_ROOT named),
// not another libdnnl found at run time.
TEST(OnednnPeerBuffers, RunsTheVersionItWasBuiltAgainst) {
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
#ifdef RNNJIT_TEST_ONEDNN_VERSION
  EXPECT_EQ(bench::onednn_version().rfind(std::string("oneDNN ") + RNNJIT_TEST_ONEDNN_VERSION + " (cpu runtime: ", 0), 0)
      << bench::onednn_version();
#else
  FAIL() << "the peer is built but CMake passed no oneDNN version";
#endif
}

// oneDNN's int8 RNN (the benchmark's onednn_int8): u8 data with one scale and shift from x and
// h's range, s8 weights with a scale per output channel. Against the FP32 reference within what
// quantizing both operands of every product costs (the bound of test_int8_rnn: rounding errors
// uniform in half a step each side, a dot product of K terms errs with a standard deviation of
// sqrt(K / 12) * sqrt(2) * max|a| * max|w| / 127; 6 of them, grown by sqrt(T * L); the weights'
// half doubles with the 7-bit weights the peer uses where oneDNN has no VNNI); and not equal to
// FP32 (int8 ran). Cells oneDNN runs no int8 of here (2.6.3: lbr_gru, vanilla RNNs, peephole
// LSTMs) skip with oneDNN's reason, which the peer's Error gives.
struct Int8PeerCase {
  const char* name;
  PeerCase c;
};

std::vector<Int8PeerCase> int8_peer_cases() {
  return {
      {"lstm_uni", PeerCase{CellKind::lstm, 33, 47, 1, false, 7, 5}},
      {"lstm_bi_2_layers", PeerCase{CellKind::lstm, 17, 64, 2, true, 6, 3}},
      {"lstm_3_layers", PeerCase{CellKind::lstm, 40, 40, 3, false, 5, 2}},
      {"gru_reset_before_bi", PeerCase{CellKind::gru_reset_before, 20, 31, 2, true, 6, 4}},
      {"gru_lbr", PeerCase{CellKind::gru, 20, 31, 1, false, 4, 3}},
      {"rnn_tanh", PeerCase{CellKind::rnn_tanh, 20, 31, 1, false, 4, 3}},
      {"lstm_peephole_reverse", PeerCase{CellKind::lstm, 19, 29, 1, false, 6, 3, true}.with(&PeerCase::reverse)},
      {"lstm_batch_first_no_bias",
       PeerCase{CellKind::lstm, 19, 29, 2, false, 6, 3}.with(&PeerCase::batch_first).with(&PeerCase::no_bias)},
  };
}

class OnednnInt8Peer : public testing::TestWithParam<Int8PeerCase> {
 protected:
  void SetUp() override {
    if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  }
};

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float e : v) m = std::max(m, static_cast<double>(std::fabs(e)));
  return m;
}

TEST_P(OnednnInt8Peer, InferenceMatchesFp32WithinTheQuantizationBound) {
  const PeerCase& c = GetParam().c;
  RnnCase rc(config_of(c), {c.seq_len, c.batch}, 51);
  std::unique_ptr<bench::OnednnInt8Rnn> peer;
  try {
    peer = std::make_unique<bench::OnednnInt8Rnn>(rc.config, rc.shape, rc.w, rc.x);
  } catch (const Error& e) {
    const std::string why = e.what();
    // Only oneDNN's own refusal skips; anything else the peer throws is a failure.
    ASSERT_NE(why.find(" runs no int8 "), std::string::npos) << why;
    ASSERT_FALSE(c.cell == CellKind::lstm && !c.peephole) << "oneDNN 2.6 and later run int8 LSTMs: " << why;
    GTEST_SKIP() << why;
  }
  SCOPED_TRACE(peer->run_info().summary());
  // The data quantization covers x and h's [-1, 1], onto 0..255, with an exact zero.
  const double lo = std::min(-1.0f, *std::min_element(rc.x.begin(), rc.x.end()));
  const double hi = std::max(1.0f, *std::max_element(rc.x.begin(), rc.x.end()));
  EXPECT_NEAR(peer->data_scale() * lo + peer->data_shift(), 0.0, 0.5);
  EXPECT_NEAR(peer->data_scale() * hi + peer->data_shift(), 255.0, 0.5);
  EXPECT_EQ(peer->data_shift(), std::nearbyint(peer->data_shift()));

  Tensors got;
  got.y.assign(rc.dy.size(), std::numeric_limits<float>::quiet_NaN());
  got.hy.assign(rc.hx.size(), std::numeric_limits<float>::quiet_NaN());
  got.cy.assign(rc.cx.size(), std::numeric_limits<float>::quiet_NaN());
  peer->forward(fwd_io(rc.x, rc.hx, rc.cx, got.y, got.hy, got.cy));

  const RnnConfig& cfg = rc.config;
  const double layers = static_cast<double>(cfg.num_layers);
  const double product = max_abs(rc.w) * std::max({1.0, max_abs(rc.x), max_abs(rc.hx)});
  const double levels = peer->weight_max();  // 127, or 63 where oneDNN's GEMMs have no VNNI
  ASSERT_TRUE(levels == 127 || levels == 63) << levels;
  const double k = static_cast<double>(std::max(cfg.input_size, cfg.directions() * cfg.hidden_size) + cfg.hidden_size);
  const double tol = 6.0 * std::sqrt(k / 12.0) * product * std::sqrt(1.0 / (127.0 * 127.0) + 1.0 / (levels * levels)) *
                     std::sqrt(static_cast<double>(rc.shape.seq_len) * layers);
  const Tensors want = rc.reference(false);
  expect_close(got.y, want.y, tol, "y vs FP32");
  expect_close(got.hy, want.hy, tol, "hy vs FP32");
  if (rc.lstm()) expect_close(got.cy, want.cy, tol, "cy vs FP32");
  EXPECT_GT(worst_difference(got.y, want.y), 1e-5) << "int8 results equal FP32's";

  // Without hx and cx: zero states (the shift, exactly), and the same y as with zero buffers.
  std::fill(rc.hx.begin(), rc.hx.end(), 0.0f);
  std::fill(rc.cx.begin(), rc.cx.end(), 0.0f);
  std::vector<float> with_zeros(got.y.size()), without(got.y.size());
  peer->forward(fwd_io(rc.x, rc.hx, rc.cx, with_zeros, {}, {}));
  peer->forward(fwd_io(rc.x, {}, {}, without, {}, {}));
  expect_close(without, with_zeros, 0.0, "y without hx, cx");
}

INSTANTIATE_TEST_SUITE_P(Cells, OnednnInt8Peer, testing::ValuesIn(int8_peer_cases()),
                         [](const testing::TestParamInfo<Int8PeerCase>& info) { return std::string(info.param.name); });

TEST(OnednnInt8PeerErrors, RefusesWhatItDoesNotModel) {
  if (!onednn_available()) GTEST_SKIP() << "oneDNN was not found at build time: no oneDNN peer to check";
  const RnnConfig cfg = config_of(PeerCase{CellKind::lstm, 5, 17, 1, false, 4, 3});
  const Shape shape{4, 3};
  const RnnCase rc(cfg, shape, 61);
  std::vector<float> short_x(rc.x.begin(), rc.x.end() - 1), short_w(rc.w.begin(), rc.w.end() - 1);
  EXPECT_THROW(bench::OnednnInt8Rnn(cfg, shape, rc.w, short_x), Error);
  EXPECT_THROW(bench::OnednnInt8Rnn(cfg, shape, short_w, rc.x), Error);
  EXPECT_THROW(bench::OnednnInt8Rnn(cfg, shape, rc.w, rc.x, -1), Error);
  RnnConfig projected = cfg;
  projected.proj_size = 7;
  try {
    bench::OnednnInt8Rnn peer(projected, shape, RnnCase(projected, shape, 61).w, rc.x);
    FAIL() << "the int8 peer took a projection";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("projection"), std::string::npos) << e.what();
  }
  RnnConfig clipped = cfg;
  clipped.clip = 1.0f;
  EXPECT_THROW(bench::OnednnInt8Rnn(clipped, shape, rc.w, rc.x), Error);
  // Summed directions: the u8 output between layers would hold h_fwd + h_rev, outside h's range
  // (measured: errors of 0.4-1.2 against FP32 on two layers).
  RnnConfig summed = cfg;
  summed.bidirectional = summed.sum_directions = true;
  try {
    bench::OnednnInt8Rnn peer(summed, shape, RnnCase(summed, shape, 61).w, rc.x);
    FAIL() << "the int8 peer took summed directions";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("summed directions"), std::string::npos) << e.what();
  }
  try {
    bench::OnednnInt8Rnn peer(cfg, shape, rc.w, rc.x);
    std::vector<float> y(rc.dy.size()), cx(rc.cx.size() + 1);
    EXPECT_THROW(peer.forward(fwd_io(short_x, {}, {}, y, {}, {})), Error);
    EXPECT_THROW(peer.forward(fwd_io(rc.x, {}, cx, y, {}, {})), Error);
  } catch (const Error& e) {  // a CPU where oneDNN runs no int8 LSTM
    EXPECT_NE(std::string(e.what()).find(" runs no int8 "), std::string::npos) << e.what();
  }
}

// Without oneDNN: the stub says so and refuses to build a peer, with the documented message.
TEST(OnednnPeerStub, ThrowsWithoutOnednn) {
  if (onednn_available()) GTEST_SKIP() << "oneDNN is available: the stub is not built";
  RnnConfig cfg;
  cfg.cell = CellKind::lstm;
  cfg.input_size = 5;
  cfg.hidden_size = 17;
  std::vector<float> w(static_cast<std::size_t>(WeightLayout(cfg).total_elements()));
  try {
    OnednnRnn peer(cfg, {4, 3}, Mode::inference, w);
    FAIL() << "constructed an OnednnRnn without oneDNN";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "oneDNN was not found at build time");
  }
  std::vector<float> x(static_cast<std::size_t>(4 * 3 * 5));
  EXPECT_THROW(bench::OnednnInt8Rnn(cfg, {4, 3}, w, x), Error);
  EXPECT_EQ(bench::onednn_version(), "");
}

}  // namespace
}  // namespace rnnjit
