// The GPU executor's plan walk without a GPU: PlanRunner (runtime/cuda/plan_runner.hpp) runs
// the GPU plans of every cell (the reset-before GRU's two GEMMs and kernels a step included),
// uni- and bidirectional, 1-2 layers, inference and training, with
// the features the CUDA executor supports (reverse, clip, dropout, batch-first, projection,
// ONNX's gate clip, LSTM peepholes and coupled input/forget gates, no biases, variable sequence lengths),
// on host memory through
// HostDeviceOps (tests/host_device_ops.hpp), and must agree with the double-precision reference
// (training: dx, dhx, dcx and every weight gradient, the peepholes' dP included). What the CUDA
// executor adds to this walk - cuBLAS, the generated kernels' launches, streams - is checked on
// a GPU by test_cuda_executor.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/plan_extents.hpp"
#include "tests/host_device_ops.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

using test::RnnCase;
using test::Tensors;

// Host scratch aligned like device memory (cuMemAlloc gives 256 bytes).
struct Scratch {
  explicit Scratch(std::size_t bytes)
      : data(static_cast<std::byte*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256))) {}
  ~Scratch() { std::free(data); }
  std::byte* data;
};

const float* or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

struct Walked {
  Tensors t;
  int gate_launches = 0, max_lanes = 0, factor_sums = 0, past_end_launches = 0, persistent_launches = 0;
  int forward_plus_copies = 0;  // copies the forward launched with a plus
};

// What CudaExecution does with its buffers, on the host: forward, then backward data and weights.
// With rc.lengths, the host lengths decide the steps and their "device" copy is uploaded where
// PlanRunner::lengths_address says (training: the reserve, which backward reads again).
// persistent: the ops take the whole forward recurrences offered them (a device with the
// persistent kernel), else they decline (one without).
Walked walk(const RnnCase& rc, Mode mode, bool persistent = false) {
  auto plan = std::make_shared<const Plan>(cuda::make_gpu_plan(rc.config, rc.shape, mode));
  check_extents(*plan);
  const cuda::PlanRunner runner(plan);
  test::HostDeviceOps ops(*plan);
  ops.persistent = persistent;
  Scratch workspace(plan->workspace.workspace_bytes), reserve(plan->workspace.reserve_bytes);
  Walked result;
  Tensors& t = result.t;
  t.y.resize(static_cast<std::size_t>(y_elements(rc.config, rc.shape)));
  t.hy.resize(rc.hx.size());
  t.cy.resize(rc.cx.size());
  cuda::DeviceBindings f;
  f.workspace = workspace.data;
  f.reserve = mode == Mode::training ? reserve.data : nullptr;
  f.dropout_seed = rc.dropout_seed;
  f.bind(Buffer::weights, rc.w.data());
  f.bind(Buffer::x, rc.x.data());
  f.bind(Buffer::hx, or_null(rc.hx));
  f.bind(Buffer::cx, or_null(rc.cx));
  f.bind(Buffer::y, t.y.data());
  f.bind(Buffer::hy, or_null(t.hy));
  f.bind(Buffer::cy, or_null(t.cy));
  if (!rc.lengths.empty()) {
    std::int32_t* device_lengths = runner.lengths_address(f);
    std::memcpy(device_lengths, rc.lengths.data(), rc.lengths.size() * sizeof(std::int32_t));
    f.lengths = rc.lengths.data();
    f.device_lengths = device_lengths;
  }
  runner.run(plan->forward, f, ops);
  result.persistent_launches = ops.persistent_launches;
  result.max_lanes = ops.max_lanes;
  result.gate_launches = ops.gate_launches;
  result.past_end_launches = ops.past_end_launches;
  result.forward_plus_copies = ops.plus_copies;
  if (mode != Mode::training) return result;
  // Backward keeps the forward's lengths (CudaExecution: a host copy, and the reserve's).
  const std::vector<std::int32_t> kept = rc.lengths;
  t.dx.resize(rc.x.size());
  t.dhx.resize(rc.hx.size());
  t.dcx.resize(rc.cx.size());
  t.dw.assign(rc.w.size(), 0.0f);
  cuda::DeviceBindings d;
  d.workspace = workspace.data;
  d.reserve = reserve.data;
  d.bind(Buffer::weights, rc.w.data());
  d.bind(Buffer::dy, rc.dy.data());
  d.bind(Buffer::dhy, or_null(rc.dhy));
  d.bind(Buffer::dcy, or_null(rc.dcy));
  d.bind(Buffer::dx, t.dx.data());
  d.bind(Buffer::dhx, or_null(t.dhx));
  d.bind(Buffer::dcx, or_null(t.dcx));
  if (!kept.empty()) {
    d.lengths = kept.data();
    d.device_lengths = runner.lengths_address(d);
  }
  runner.run(plan->backward_data, d, ops);
  cuda::DeviceBindings w;
  w.workspace = workspace.data;
  w.reserve = reserve.data;
  w.bind(Buffer::x, rc.x.data());
  w.bind(Buffer::dweights, t.dw.data());
  if (!kept.empty()) {
    w.lengths = kept.data();
    w.device_lengths = runner.lengths_address(w);
  }
  runner.run(plan->backward_weights, w, ops);
  result.gate_launches = ops.gate_launches;
  result.past_end_launches = ops.past_end_launches;
  result.factor_sums = ops.factor_sums;
  return result;
}

// The forward's copy steps with a plus (summed directions).
int plus_copy_steps(const Plan& plan) {
  int count = 0;
  for (const Stage& stage : plan.forward)
    for (const std::vector<Step>& lane : stage.lanes)
      for (const Step& s : lane)
        if (const auto* c = std::get_if<CopyStep>(&s)) count += c->plus.buffer != Buffer::none;
  return count;
}

struct WalkCase {
  std::string feature;
  CellKind cell;
  bool bidirectional;
  std::int64_t layers;
  Mode mode;
};

std::string case_name(const WalkCase& c) {
  return fmt::format("{}_{}_{}_l{}_{}", c.feature, to_string(c.cell), c.bidirectional ? "bidir" : "unidir", c.layers,
                     c.mode == Mode::training ? "train" : "infer");
}
void PrintTo(const WalkCase& c, std::ostream* os) { *os << case_name(c); }

// "lstm_onnx": ONNX's LSTM options together (gate clip, peepholes, input_forget, cell clip);
// "all": every feature the cell has.
RnnConfig config_of(const WalkCase& c) {
  RnnConfig config{.cell = c.cell, .input_size = 23, .hidden_size = 19, .num_layers = c.layers,
                   .bidirectional = c.bidirectional};
  const bool lstm = c.cell == CellKind::lstm;
  auto has = [&](std::initializer_list<const char*> features) {
    for (const char* f : features)
      if (c.feature == f) return true;
    return c.feature == "all";
  };
  config.reverse = has({"reverse"}) && !c.bidirectional;
  config.clip = lstm && has({"clip", "lstm_onnx"}) ? 0.6f : 0.0f;
  config.dropout = has({"dropout"}) ? 0.3f : 0.0f;
  config.batch_first = has({"batch_first"});
  config.proj_size = lstm && has({"projection"}) ? 7 : 0;
  // 0.7 clamps a good share of the pre-activations (their spread is about 0.6 here).
  config.gate_clip = has({"gate_clip", "lstm_onnx"}) ? 0.7f : 0.0f;
  config.peephole = lstm && has({"peephole", "lstm_onnx"});
  config.input_forget = lstm && has({"input_forget", "lstm_onnx"});
  config.bias = !has({"no_bias"});
  config.sum_directions = has({"sum_directions"}) && c.bidirectional;
  config.independent_stacks = has({"independent_stacks"}) && c.bidirectional;
  config.relu_alpha = c.cell == CellKind::rnn_relu && has({"leaky"}) ? 0.1f : 0.0f;
  return config;
}

class GpuWalk : public ::testing::TestWithParam<WalkCase> {};

TEST_P(GpuWalk, MatchesTheReference) {
  const WalkCase& c = GetParam();
  RnnCase rc(config_of(c), {7, 5}, 3);
  rc.dropout_seed = 0x5eed;
  const bool train = c.mode == Mode::training;
  const Walked walked = walk(rc, c.mode);
  const Tensors& got = walked.t;
  const Tensors want = rc.reference(train);
  // One gate kernel launch per step, layer and direction, in each pass (the reset-before GRU:
  // two, its parts 0 and 1); one lane per direction.
  const std::int64_t steps = rc.shape.seq_len * c.layers * rc.config.directions() *
                             (c.cell == CellKind::gru_reset_before ? 2 : 1);
  EXPECT_EQ(walked.gate_launches, train ? 2 * steps : steps);
  EXPECT_EQ(walked.max_lanes, rc.config.directions());
  EXPECT_EQ(walked.past_end_launches, 0);  // no lengths: nothing launched for them
  // The peephole gradients are column sums with a factor (gate gradient times c), nothing else is.
  EXPECT_EQ(walked.factor_sums > 0, train && rc.config.peephole);
  EXPECT_EQ(walked.persistent_launches, 0);
  // Summed directions: each layer's y = h_fwd + h_bwd is one copy launch with a plus, not a copy
  // and an accumulating pass.
  const int plus_steps = plus_copy_steps(cuda::make_gpu_plan(rc.config, rc.shape, c.mode));
  EXPECT_EQ(plus_steps > 0, rc.config.sum_directions);
  EXPECT_EQ(walked.forward_plus_copies, plus_steps);
  test::expect_matches(got, want, rc, train);
  // On a device with the persistent kernel: every forward recurrence without a projection, but
  // the reset-before GRU's two-part steps, goes to it whole; backward is unchanged.
  const Walked whole = walk(rc, c.mode, true);
  const bool offered = rc.config.proj_size == 0 && c.cell != CellKind::gru_reset_before;
  EXPECT_EQ(whole.persistent_launches, offered ? c.layers * rc.config.directions() : 0);
  EXPECT_EQ(whole.gate_launches, offered ? (train ? steps : 0) : walked.gate_launches);
  test::expect_matches(whole.t, want, rc, train);
}

std::vector<WalkCase> walk_cases() {
  std::vector<WalkCase> cases;
  for (const char* feature : {"plain", "reverse", "clip", "dropout", "batch_first", "projection", "gate_clip",
                              "peephole", "input_forget", "lstm_onnx", "no_bias", "sum_directions",
                              "independent_stacks", "leaky", "all"})
    for (CellKind cell : kCellKinds)
      for (bool bidir : {false, true})
        for (std::int64_t layers : {1, 2})
          for (Mode mode : {Mode::inference, Mode::training}) {
            const std::string f = feature;
            const bool lstm_only = f == "clip" || f == "projection" || f == "peephole" || f == "input_forget" ||
                                   f == "lstm_onnx";
            if (lstm_only && cell != CellKind::lstm) continue;
            if (f == "reverse" && bidir) continue;  // a unidirectional feature
            if ((f == "sum_directions" || f == "independent_stacks") && !bidir) continue;  // bidirectional ones
            if (f == "leaky" && cell != CellKind::rnn_relu) continue;
            if (f == "dropout" && (layers == 1 || mode == Mode::inference)) continue;  // between layers, training only
            cases.push_back({f, cell, bidir, f == "dropout" ? 3 : layers, mode});
          }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cuda, GpuWalk, ::testing::ValuesIn(walk_cases()),
                         [](const auto& info) { return case_name(info.param); });

// Rows of one batch row, units past a block of 128 threads and a batch of 1.
TEST(GpuWalkShapes, TailsAndBatchOne) {
  for (const Shape shape : {Shape{3, 1}, Shape{4, 3}})
    for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::rnn_tanh}) {
      SCOPED_TRACE(fmt::format("{} T={} N={}", to_string(cell), shape.seq_len, shape.batch));
      RnnCase rc({.cell = cell, .input_size = 5, .hidden_size = 130, .num_layers = 2, .bidirectional = true}, shape, 9);
      const Tensors want = rc.reference(true);
      for (bool persistent : {false, true}) {
        const Tensors got = walk(rc, Mode::training, persistent).t;
        test::expect_close(got.y, want.y, rc.tolerance(false), "y");
        test::expect_close(got.dx, want.dx, rc.tolerance(true), "dx");
        test::expect_close(got.dw, want.dw, rc.tolerance(true), "dweights");
      }
    }
}

// The reset-before GRU's two kernels a step past a block of 128 threads, with one time step
// (dW_hh's r,z rows and dW_hn from h_init and r * h_init only), a batch of 1, forward, reverse
// and bidirectional, with and without the gate clip; training and inference.
TEST(GpuWalkShapes, ResetBeforeGruTailsAndOneStep) {
  for (const Shape shape : {Shape{1, 1}, Shape{1, 3}, Shape{3, 1}, Shape{4, 3}})
    for (int direction : {0, 1, 2})  // forward, reverse, bidirectional
      for (float gate_clip : {0.0f, 0.7f}) {
        SCOPED_TRACE(fmt::format("T={} N={} direction={} gate_clip={}", shape.seq_len, shape.batch, direction,
                                 gate_clip));
        RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 5, .hidden_size = 130, .num_layers = 2,
                    .bidirectional = direction == 2};
        c.reverse = direction == 1;
        c.gate_clip = gate_clip;
        RnnCase rc(c, shape, 13);
        for (Mode mode : {Mode::inference, Mode::training}) {
          const bool train = mode == Mode::training;
          const Walked walked = walk(rc, mode);
          EXPECT_EQ(walked.gate_launches, (train ? 4 : 2) * shape.seq_len * c.num_layers * c.directions());
          const Tensors& got = walked.t;
          const Tensors want = rc.reference(train);
          test::expect_close(got.y, want.y, rc.tolerance(false), "y");
          test::expect_close(got.hy, want.hy, rc.tolerance(false), "hy");
          if (!train) continue;
          test::expect_close(got.dx, want.dx, rc.tolerance(true), "dx");
          test::expect_close(got.dhx, want.dhx, rc.tolerance(true), "dhx");
          test::expect_close(got.dw, want.dw, rc.tolerance(true), "dweights");
        }
      }
}

// The LSTM features past a block of 128 threads, with one time step (the peephole gradients of
// c_init only) and a batch of 1, forward and reverse.
TEST(GpuWalkShapes, LstmFeaturesTailsAndOneStep) {
  for (const Shape shape : {Shape{1, 1}, Shape{1, 3}, Shape{3, 1}, Shape{4, 3}})
    for (bool reverse : {false, true})
      for (bool input_forget : {false, true}) {
        SCOPED_TRACE(fmt::format("T={} N={} reverse={} input_forget={}", shape.seq_len, shape.batch, reverse,
                                 input_forget));
        RnnConfig c{.cell = CellKind::lstm, .input_size = 5, .hidden_size = 130, .num_layers = 2};
        c.reverse = reverse;
        c.gate_clip = 0.7f;
        c.peephole = true;
        c.input_forget = input_forget;
        RnnCase rc(c, shape, 11);
        const Tensors got = walk(rc, Mode::training, true).t, want = rc.reference(true);
        test::expect_close(got.y, want.y, rc.tolerance(false), "y");
        test::expect_close(got.cy, want.cy, rc.tolerance(false), "cy");
        test::expect_close(got.dx, want.dx, rc.tolerance(true), "dx");
        test::expect_close(got.dcx, want.dcx, rc.tolerance(true), "dcx");
        test::expect_close(got.dw, want.dw, rc.tolerance(true), "dweights");
      }
}

// Variable sequence lengths (ForwardIo::seq_lengths): rows past their length carry their state
// (forward: h, and c, in place in inference; backward: dh_carry, dc_carry, zero gate gradients),
// y is zero past them, hy/cy are each element's state at its own last step and the reverse
// direction starts there; training must give dx (zero past the lengths), dhx, dcx and every
// weight gradient of the double reference, though x past the lengths is NaN (dW_ih must sum
// none of it). Every cell (the reset-before GRU's two kernels a step too), uni- and
// bidirectional, reverse, projection, peepholes, batch-first, dropout, inference and training.
struct LengthsCase {
  std::string feature;
  CellKind cell;
  bool bidirectional;
  Mode mode;
};

std::string lengths_name(const LengthsCase& c) {
  return fmt::format("{}_{}_{}_{}", c.feature, to_string(c.cell), c.bidirectional ? "bidir" : "unidir",
                     c.mode == Mode::training ? "train" : "infer");
}
void PrintTo(const LengthsCase& c, std::ostream* os) { *os << lengths_name(c); }

class GpuWalkLengths : public ::testing::TestWithParam<LengthsCase> {};

TEST_P(GpuWalkLengths, MatchTheReference) {
  const LengthsCase& c = GetParam();
  const WalkCase w{c.feature, c.cell, c.bidirectional, c.feature == "dropout" ? 3 : 2, c.mode};
  RnnCase rc(config_of(w), {7, 5}, 3);
  rc.dropout_seed = 0x5eed;
  rc.vary_lengths();
  rc.lengths[1] = 4;  // mixed: 1, 4, 7 and the random ones
  const bool train = c.mode == Mode::training;
  RnnCase poisoned = rc;
  poisoned.fill_padding(std::numeric_limits<float>::quiet_NaN());
  // Rows past their end: never offered whole to the persistent kernel.
  const Walked walked = walk(poisoned, c.mode, true);
  const Tensors want = rc.reference(train);
  test::expect_matches(walked.t, want, rc, train);
  EXPECT_GT(walked.past_end_launches, 0);
  EXPECT_EQ(walked.persistent_launches, 0);
  // y past each element's length is exactly zero.
  const std::int64_t T = rc.shape.seq_len, N = rc.shape.batch, W = rc.config.output_size();
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t t = rc.lengths[static_cast<std::size_t>(n)]; t < T; ++t)
      for (std::int64_t j = 0; j < W; ++j) {
        const std::int64_t at = rc.config.batch_first ? (n * T + t) * W + j : (t * N + n) * W + j;
        ASSERT_EQ(walked.t.y[static_cast<std::size_t>(at)], 0.0f) << "y at t=" << t << " n=" << n;
      }
  if (!train) return;
  const std::int64_t I = rc.config.input_size;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t t = rc.lengths[static_cast<std::size_t>(n)]; t < T; ++t)
      for (std::int64_t j = 0; j < I; ++j) {
        const std::int64_t at = rc.config.batch_first ? (n * T + t) * I + j : (t * N + n) * I + j;
        ASSERT_EQ(walked.t.dx[static_cast<std::size_t>(at)], 0.0f) << "dx at t=" << t << " n=" << n;
      }
}

std::vector<LengthsCase> lengths_cases() {
  std::vector<LengthsCase> cases;
  for (const char* feature : {"plain", "reverse", "projection", "peephole", "batch_first", "dropout", "all"})
    for (CellKind cell : kCellKinds)
      for (bool bidir : {false, true})
        for (Mode mode : {Mode::inference, Mode::training}) {
          const std::string f = feature;
          if ((f == "projection" || f == "peephole") && cell != CellKind::lstm) continue;
          if (f == "reverse" && bidir) continue;
          if (f == "dropout" && mode == Mode::inference) continue;
          cases.push_back({f, cell, bidir, mode});
        }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cuda, GpuWalkLengths, ::testing::ValuesIn(lengths_cases()),
                         [](const auto& info) { return lengths_name(info.param); });

// Launches only at the steps where some row is past its end: with every length T, none; with
// the shortest length m, a forward unidirectional one-layer LSTM in inference launches at the
// T - m last steps (c saved, c restored, h carried) and once for y.
TEST(GpuWalkLengths, LaunchesOnlyWhereSomeRowIsPastItsEnd) {
  const RnnConfig c{.cell = CellKind::lstm, .input_size = 5, .hidden_size = 6};
  RnnCase rc(c, {6, 3}, 4);
  rc.lengths = {6, 6, 6};
  EXPECT_EQ(walk(rc, Mode::inference).past_end_launches, 0);
  EXPECT_EQ(walk(rc, Mode::training).past_end_launches, 0);
  EXPECT_EQ(walk(rc, Mode::inference, true).persistent_launches, 1);  // no row past its end: whole
  rc.lengths = {6, 4, 5};
  const Walked walked = walk(rc, Mode::inference);
  EXPECT_EQ(walked.past_end_launches, 3 * 2 + 1);
  test::expect_matches(walked.t, rc.reference(false), rc, false);
  // Every length 1 and T = 1..3: the reverse direction starts at each element's own last step.
  for (std::int64_t T : {1, 2, 3}) {
    RnnConfig rev = c;
    rev.bidirectional = true;
    RnnCase one(rev, {T, 3}, 8);
    one.lengths = {1, static_cast<std::int32_t>(T), 1};
    test::expect_matches(walk(one, Mode::training).t, one.reference(true), one, true);
  }
}

// The walk key (what a replayed CUDA graph must match): equal for equal bindings, different when
// any address, the dropout seed, accumulate or a length's value changes.
TEST(GpuWalkKey, ChangesWithEverythingTheCallsDependOn) {
  const RnnConfig c{.cell = CellKind::gru, .input_size = 5, .hidden_size = 6, .bidirectional = true};
  const cuda::PlanRunner runner(std::make_shared<const Plan>(cuda::make_gpu_plan(c, {4, 3}, Mode::training)));
  std::vector<float> x(60), y(72);
  std::vector<std::byte> workspace(64), reserve(64);
  std::vector<std::int32_t> lengths{4, 2, 3}, device_lengths(3);
  cuda::DeviceBindings b;
  b.bind(Buffer::x, x.data());
  b.bind(Buffer::y, y.data());
  b.workspace = workspace.data();
  b.reserve = reserve.data();
  b.dropout_seed = 7;
  b.lengths = lengths.data();
  b.device_lengths = device_lengths.data();
  const std::vector<std::uint64_t> key = runner.walk_key(b, false);
  EXPECT_EQ(runner.walk_key(b, false), key);
  const std::vector<std::int32_t> same_lengths = lengths;  // values count, not where they are
  cuda::DeviceBindings moved = b;
  moved.lengths = same_lengths.data();
  EXPECT_EQ(runner.walk_key(moved, false), key);
  EXPECT_NE(runner.walk_key(b, true), key);
  std::vector<std::function<void(cuda::DeviceBindings&)>> changes{
      [&](cuda::DeviceBindings& d) { d.bind(Buffer::x, x.data() + 1); },
      [&](cuda::DeviceBindings& d) { d.bind(Buffer::hx, x.data()); },
      [&](cuda::DeviceBindings& d) { d.bind(Buffer::y, nullptr); },
      [&](cuda::DeviceBindings& d) { d.workspace += 8; },
      [&](cuda::DeviceBindings& d) { d.reserve = nullptr; },
      [&](cuda::DeviceBindings& d) { d.dropout_seed = 8; },
      [&](cuda::DeviceBindings& d) { d.device_lengths = nullptr; },
      [&](cuda::DeviceBindings& d) { d.lengths = nullptr; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    cuda::DeviceBindings d = b;
    changes[i](d);
    EXPECT_NE(runner.walk_key(d, false), key) << "change " << i;
  }
  lengths[1] = 3;
  EXPECT_NE(runner.walk_key(b, false), key);
}

}  // namespace
}  // namespace rnnjit
