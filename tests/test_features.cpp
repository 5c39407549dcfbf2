// The features through the public API on every backend: reverse direction, cell clipping,
// dropout between layers, batch-first tensors, variable sequence lengths, the LSTM projection,
// ONNX's gate clip, LSTM peepholes and coupled input-forget gates, networks without biases and
// bidirectional ones whose directions are summed or stacked independently, the leaky ReLU, alone
// and combined (the sigmoid RNN on a subset of them), forward and backward, against the
// double-precision reference (whose gradients are checked by finite differences in
// test_reference and test_reference_features). Sizes have vector tails (H = 19, 115, 230) and
// odd batches; the AVX-512 and AVX2 plans run on one and two threads (the cases that split are
// larger), and with a batch the planner splits by rows (two threads for one direction, four for
// two).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "tests/plan_steps.hpp"
#include "tests/rnn_case.hpp"
#include "tests/scoped_env.hpp"

namespace rnnjit {
namespace {

using test::RnnCase;
using test::Tensors;

struct Feature {
  std::string name;
  bool reverse = false, batch_first = false, lengths = false;
  bool longest_first = false;  // lengths sorted: the per-step GEMMs shrink as sequences end
  float clip = 0.0f, dropout = 0.0f;
  std::int64_t proj_size = 0;
  float gate_clip = 0.0f;
  bool peephole = false, input_forget = false;  // LSTM only
  bool no_bias = false;
  bool sum_directions = false;  // bidirectional only
  bool independent_stacks = false;  // bidirectional only
  float relu_alpha = 0.0f;  // rnn_relu only
};

struct Target {
  Isa isa;
  int threads;
  // A batch large enough that the recurrences are split by batch rows (a lane per thread)
  // rather than by hidden units.
  bool row_split = false;
};

// Whether a forward recurrence of the plan runs on a slice of the batch's rows.
bool splits_batch(const Plan& plan) {
  bool split = false;
  test::for_each_step(plan.forward, [&](const Step& step) {
    if (const auto* r = std::get_if<RecurrenceStep>(&step); r && r->batch < plan.shape.batch) split = true;
  });
  return split;
}

struct FeatureCase {
  Feature feature;
  CellKind cell;
  bool bidirectional;
  Mode mode;
  Target target;
};

std::string case_name(const FeatureCase& c) {
  return fmt::format("{}_{}_{}_{}_{}_t{}{}", c.feature.name, to_string(c.cell), c.bidirectional ? "bidir" : "unidir",
                     c.mode == Mode::training ? "train" : "infer", to_string(c.target.isa), c.target.threads,
                     c.target.row_split ? "_rows" : "");
}
void PrintTo(const FeatureCase& c, std::ostream* os) { *os << case_name(c); }

class Features : public ::testing::TestWithParam<FeatureCase> {};

TEST_P(Features, MatchReference) {
  const FeatureCase& p = GetParam();
  if (static_cast<int>(cpu_isa()) < static_cast<int>(p.target.isa))
    GTEST_SKIP() << "the CPU cannot run " << to_string(p.target.isa);
  const Feature& f = p.feature;
  // Two threads only split plans with enough work per thread: those cases are larger.
  const bool split = p.target.threads > 1;
  const bool vanilla = is_vanilla(p.cell);
  RnnConfig config{.cell = p.cell, .input_size = split ? 160 : 23, .hidden_size = split ? (vanilla ? 230 : 115) : 19,
                   .num_layers = f.dropout > 0.0f ? 3 : 2, .bidirectional = p.bidirectional};
  config.reverse = f.reverse && !p.bidirectional;
  config.batch_first = f.batch_first;
  config.clip = p.cell == CellKind::lstm ? f.clip : 0.0f;
  config.dropout = f.dropout;
  config.proj_size = p.cell == CellKind::lstm ? f.proj_size : 0;
  config.gate_clip = f.gate_clip;
  config.peephole = p.cell == CellKind::lstm && f.peephole;
  config.input_forget = p.cell == CellKind::lstm && f.input_forget;
  config.bias = !f.no_bias;
  config.sum_directions = f.sum_directions && p.bidirectional;
  config.independent_stacks = f.independent_stacks && p.bidirectional;
  config.relu_alpha = f.relu_alpha;
  RnnCase rc(config, p.target.row_split ? Shape{9, 21} : split ? Shape{24, 10} : Shape{7, 5}, 3);
  if (f.lengths) rc.vary_lengths(7, f.longest_first);
  rc.dropout_seed = 0x5eed;
  Rnn rnn(config, {.backend = Backend::jit, .isa = p.target.isa, .threads = p.target.threads});
  Execution ex = rnn.prepare(rc.shape, p.mode);
  ASSERT_EQ(ex.plan().threads, p.target.threads) << "the plan does not split the steps as the case intends";
  ASSERT_EQ(splits_batch(ex.plan()), p.target.row_split) << "the plan does not split the batch as the case intends";
  const bool train = p.mode == Mode::training;
  const Tensors got = rc.run(ex), want = rc.reference(train);
  test::expect_matches(got, want, rc, train);
}

std::vector<FeatureCase> feature_cases() {
  const std::vector<Feature> features = {
      {.name = "reverse", .reverse = true},
      {.name = "clip", .clip = 0.6f},
      {.name = "dropout", .dropout = 0.3f},
      {.name = "batch_first", .batch_first = true},
      {.name = "lengths", .lengths = true},
      {.name = "lengths_sorted", .lengths = true, .longest_first = true},
      {.name = "projection", .proj_size = 7},
      {.name = "all", .reverse = true, .batch_first = true, .lengths = true, .longest_first = true, .clip = 0.6f,
       .dropout = 0.3f, .proj_size = 11, .no_bias = true, .sum_directions = true, .independent_stacks = true},
      {.name = "gate_clip", .gate_clip = 0.4f},
      {.name = "peephole", .peephole = true},
      {.name = "input_forget", .input_forget = true},
      {.name = "no_bias", .no_bias = true},
      {.name = "sum_directions", .sum_directions = true},
      {.name = "independent_stacks", .independent_stacks = true},
      {.name = "independent_stacks_lengths", .lengths = true, .independent_stacks = true},
      {.name = "onnx", .reverse = true, .lengths = true, .gate_clip = 0.7f, .peephole = true, .input_forget = true},
      {.name = "peephole_all", .reverse = true, .batch_first = true, .lengths = true, .clip = 0.6f, .dropout = 0.3f,
       .proj_size = 11, .gate_clip = 0.8f, .peephole = true},
      {.name = "leaky_relu", .relu_alpha = 0.15f},
      {.name = "leaky_relu_all", .reverse = true, .batch_first = true, .lengths = true, .dropout = 0.3f,
       .gate_clip = 0.5f, .sum_directions = true, .relu_alpha = 0.15f},
  };
  // The sigmoid RNN shares the tanh RNN's kernels but for its activation: a few features suffice.
  auto sigmoid_runs = [](const Feature& f) {
    return f.name == "lengths" || f.name == "gate_clip" || f.name == "dropout" || f.name == "all";
  };
  // AVX2 plans run every feature on one thread; their thread splits (the executor's, as on
  // AVX-512) on the combined features only, which keeps the suite's time (each split case is
  // larger) within about 20 s more.
  auto avx2_splits = [](const Feature& f) {
    return f.name == "all" || f.name == "onnx" || f.name == "peephole_all" || f.name == "leaky_relu_all" ||
           f.name == "lengths";
  };
  const Target targets[] = {{Isa::avx512, 1}, {Isa::avx512, 2}, {Isa::avx512, 2, true}, {Isa::avx512, 4, true},
                            {Isa::avx2, 1},   {Isa::avx2, 2},   {Isa::avx2, 2, true},   {Isa::avx2, 4, true},
                            {Isa::reference, 1}};
  std::vector<FeatureCase> cases;
  for (const Feature& f : features)
    for (CellKind cell : kCellKinds) {
      const bool lstm_only = f.clip > 0.0f || f.proj_size > 0 || f.peephole || f.input_forget;
      if (lstm_only && f.name != "all" && f.name != "onnx" && cell != CellKind::lstm) continue;
      if (f.relu_alpha > 0.0f && cell != CellKind::rnn_relu) continue;  // the leaky ReLU's features
      if (cell == CellKind::rnn_sigmoid && !sigmoid_runs(f)) continue;
      for (bool bidir : {false, true}) {
        if (f.reverse && bidir && f.name == "reverse") continue;  // reverse is a unidirectional feature
        const bool bidirectional_only = f.name == "sum_directions" || f.name.starts_with("independent_stacks");
        if (bidirectional_only && !bidir) continue;
        for (Mode mode : {Mode::inference, Mode::training})
          for (const Target& b : targets)
            // Rows split on two threads for one direction, on four for two (two lanes each).
            if ((!b.row_split || b.threads == (bidir ? 4 : 2)) && (b.isa != Isa::avx2 || b.threads == 1 || avx2_splits(f)))
              cases.push_back({f, cell, bidir, mode, b});
      }
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Jit, Features, ::testing::ValuesIn(feature_cases()),
                         [](const auto& info) { return case_name(info.param); });

// Two directions normally run as two lanes, a thread each. Where a direction's W_hh is too
// large for three quarters of one core's L2 and the batch has 4 rows or fewer (or 8, with W_hh
// over a quarter of the L3), the planner runs the directions one after the other, each split
// across both threads: every cell, with the state carried across variable lengths and (LSTM) a
// projection, against the reference.
TEST(SplitDirections, MatchReferenceOnTwoThreads) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  struct Case {
    CellKind cell;
    std::int64_t hidden, proj, batch = 3;
  };
  for (const Case& c : {Case{CellKind::rnn_tanh, 700, 0}, Case{CellKind::lstm, 320, 0}, Case{CellKind::lstm, 640, 160},
                        Case{CellKind::gru, 400, 0}, Case{CellKind::gru_reset_before, 400, 0},
                        // W_hh 4.9 MB: in turn for the batch's 3 rows, and for 6 because it is over
                        // a quarter of the 4 MiB L3 planned for.
                        Case{CellKind::gru, 640, 0}, Case{CellKind::gru, 640, 0, 6}})
    for (Mode mode : {Mode::inference, Mode::training}) {
      SCOPED_TRACE(fmt::format("{} H={} P={} N={} {}", to_string(c.cell), c.hidden, c.proj, c.batch,
                               mode == Mode::training ? "train" : "infer"));
      RnnConfig config{.cell = c.cell, .input_size = 16, .hidden_size = c.hidden, .num_layers = 2, .bidirectional = true};
      config.proj_size = c.proj;
      RnnCase rc(config, Shape{5, c.batch}, 11);
      rc.vary_lengths();
      // The sizes above take turns on cores with a 2 MiB L2 (W_hh over 1.5 MiB and 3 rows, or
      // 6 and W_hh crowds the L3); plan for one on any machine.
      test::ScopedEnv caches("RNNJIT_CACHES", "48K,2M,8M,4M");
      Rnn rnn(config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = 2});
      Execution ex = rnn.prepare(rc.shape, mode);
      ASSERT_EQ(ex.plan().threads, 2);
      for (const Stage& stage : ex.plan().forward) EXPECT_EQ(stage.lanes.size(), 1u) << "directions not in turn";
      const bool train = mode == Mode::training;
      test::expect_matches(rc.run(ex), rc.reference(train), rc, train);
    }
}

// dW_hh reads the gate gradients' A panels that dW_ih packed for all of K: with caches so small
// that T*N spans five k blocks (the last one short), M and the hidden size vector tails, variable
// lengths and two threads, with and without initial states, the weight gradients still match
// the reference. (A TLB that maps 4 KiB has every k block of A^T copied into panels also where
// the cores run one 512-bit FMA a cycle.)
TEST(WeightGradients, SharedGatePanelsMatchReference) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  test::ScopedEnv caches("RNNJIT_CACHES", "4K,64K,4K");  // k_c = 64
  for (CellKind cell : {CellKind::lstm, CellKind::rnn_tanh}) {
    SCOPED_TRACE(std::string(to_string(cell)));
    const RnnConfig config{.cell = cell, .input_size = 37, .hidden_size = 45, .num_layers = 2, .bidirectional = true};
    RnnCase rc(config, Shape{21, 13}, 3);  // K = T*N = 273
    rc.vary_lengths();
    Rnn rnn(config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = 2});
    Execution ex = rnn.prepare(rc.shape, Mode::training);
    int shared = 0;
    test::for_each_step(ex.plan().backward_weights, [&](const Step& step) {
      if (const auto* g = std::get_if<GemmStep>(&step))
        shared += g->a_panels_use == GemmStep::APanels::packed_before && g->k > 4 * g->blocking.k_c;
    });
    EXPECT_EQ(shared, 4) << "every dW_hh of 2 layers x 2 directions reads dW_ih's panels of five k blocks";
    test::expect_matches(rc.run(ex), rc.reference(true), rc, true);
    // From zero states the reversed directions' dW_hh leave out their last 13 rows of K: the
    // last k block (17 rows, 4 then summed) is read from panels packed for all 17; the forward
    // ones keep all their rows. (Every sequence full length, so those 4 rows are not zeros.)
    rc.without_initial_states();
    rc.lengths.clear();
    test::expect_matches(rc.run(ex), rc.reference(true), rc, true);
  }
}

// On cores of one 512-bit FMA a cycle (Zen 4) the weight gradients read their transposed A in
// place, a line of another row of the gate gradients at every k step, where a k block of it
// spans no more than the TLB maps: k blocks of 64 rows with a tail, vector tails in M, variable
// lengths and two threads, with and without initial states.
TEST(WeightGradients, TransposedAInPlaceMatchesReference) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  test::ScopedEnv caches("RNNJIT_CACHES", "4K,64K,8M,64K,1");  // k_c = 64, one FMA a cycle
  for (CellKind cell : {CellKind::gru, CellKind::rnn_relu}) {
    SCOPED_TRACE(std::string(to_string(cell)));
    const RnnConfig config{.cell = cell, .input_size = 37, .hidden_size = 45, .num_layers = 2, .bidirectional = true};
    RnnCase rc(config, Shape{21, 13}, 4);
    rc.vary_lengths();
    Rnn rnn(config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = 2});
    Execution ex = rnn.prepare(rc.shape, Mode::training);
    int transposed = 0, in_place = 0;
    test::for_each_step(ex.plan().backward_weights, [&](const Step& step) {
      if (const auto* g = std::get_if<GemmStep>(&step); g && g->trans_a) {
        ++transposed;
        in_place += !g->blocking.pack_a;
      }
    });
    EXPECT_GE(transposed, 8) << "dW_ih and dW_hh of 2 layers x 2 directions";
    EXPECT_EQ(in_place, transposed) << "every weight gradient reads its A in place";
    test::expect_matches(rc.run(ex), rc.reference(true), rc, true);
    rc.without_initial_states();
    test::expect_matches(rc.run(ex), rc.reference(true), rc, true);
  }
}

// Input projections larger than the threads' L2 write their gates with streaming stores
// (caches small enough that these do): batch-first x, variable lengths (the row blocks
// of finished sequences skipped), two directions, two layers (inputs within one k block of 64:
// over it the k blocks add to C, which then is not streamed), training.
TEST(InputProjections, StreamedGatesMatchReference) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  test::ScopedEnv caches("RNNJIT_CACHES", "4K,64K");
  for (const auto& [cell, H, bidirectional, batch_first] :
       {std::tuple{CellKind::lstm, 32, true, false}, {CellKind::gru, 48, false, true}}) {
    SCOPED_TRACE(fmt::format("{} batch_first={}", to_string(cell), batch_first));
    const RnnConfig config{.cell = cell, .input_size = 37, .hidden_size = H, .num_layers = 2,
                           .bidirectional = bidirectional, .batch_first = batch_first};
    RnnCase rc(config, Shape{21, 13}, 4);  // gates 21 * 13 * G*H floats: over 2 * 64 KiB
    rc.vary_lengths();
    Rnn rnn(config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = 2});
    Execution ex = rnn.prepare(rc.shape, Mode::training);
    int streamed = 0;
    test::for_each_step(ex.plan().forward, [&](const Step& step) {
      if (const auto* g = std::get_if<GemmStep>(&step)) streamed += g->blocking.stream_c;
    });
    EXPECT_EQ(streamed, 2 * config.directions()) << "every input projection streams its gates";
    test::expect_matches(rc.run(ex), rc.reference(true), rc, true);
  }
}

// [T, N, w] rows <-> [N, T, w] rows.
std::vector<float> swap_outer(const std::vector<float>& v, std::int64_t outer, std::int64_t inner, std::int64_t w) {
  std::vector<float> out(v.size());
  for (std::int64_t i = 0; i < outer; ++i)
    for (std::int64_t j = 0; j < inner; ++j)
      for (std::int64_t e = 0; e < w; ++e)
        out[static_cast<std::size_t>((j * outer + i) * w + e)] = v[static_cast<std::size_t>((i * inner + j) * w + e)];
  return out;
}

// A batch-first call runs the GEMMs of the sequence-major call: forward projects x where it
// lies (its rows in [N, T] order; layer 0's gate kernels read that gx T*GX rows apart), and what
// needs x's rows in time order (dW_ih) reads a sequence-major copy, as dx is written through one.
// One input projection and one dW_ih over all T*N rows (not a product per batch element, which
// small T made 2-3x slower), and the same results bit for bit. Short and long sequences,
// variable lengths, two layers both ways.
TEST(BatchFirst, RunsTheSequenceMajorGemms) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  for (const auto& [cell, T, N] : {std::tuple{CellKind::lstm, 2, 40}, {CellKind::gru, 5, 17}, {CellKind::rnn_tanh, 33, 3}}) {
    SCOPED_TRACE(fmt::format("{} T={} N={}", to_string(cell), T, N));
    RnnConfig config{.cell = cell, .input_size = 37, .hidden_size = 24, .num_layers = 2, .bidirectional = true};
    RnnCase seq(config, {T, N}, 5);
    seq.vary_lengths();
    config.batch_first = true;
    RnnCase batch_first(config, {T, N}, 5);  // the same weights and states
    batch_first.lengths = seq.lengths;
    const std::int64_t I = config.input_size, W = config.output_size();
    batch_first.x = swap_outer(seq.x, T, N, I);
    batch_first.dy = swap_outer(seq.dy, T, N, W);
    const Options options{.backend = Backend::jit, .isa = Isa::avx512, .threads = 2};
    Execution seq_ex = Rnn(seq.config, options).prepare(seq.shape, Mode::training);
    Execution bf_ex = Rnn(config, options).prepare(seq.shape, Mode::training);
    const Plan& plan = bf_ex.plan();
    std::int64_t gx_row[2] = {0, 0};  // of each layer's gate kernel
    test::for_each_step(plan.forward, [&](const Step& step) {
      if (const auto* c = std::get_if<CopyStep>(&step)) {
        EXPECT_NE(c->src.buffer, Buffer::x) << c->what << ": forward copies x";
      }
      if (const auto* r = std::get_if<RecurrenceStep>(&step))
        gx_row[r->layer] = plan.kernels[static_cast<std::size_t>(r->gate.kernel)].gx_stride();
    });
    EXPECT_EQ(gx_row[0], T * gx_row[1]) << "layer 0's gate kernel reads batch-major gx";
    test::for_each_step(bf_ex.plan().backward_weights, [&](const Step& step) {
      const auto* g = std::get_if<GemmStep>(&step);
      if (g && g->what.starts_with("dW_ih l0")) {
        EXPECT_EQ(g->k, T * N) << g->what << " sums all (t, n) rows at once";
      }
    });
    const Tensors want = seq.run(seq_ex), got = batch_first.run(bf_ex);
    EXPECT_EQ(got.y, swap_outer(want.y, T, N, W));
    EXPECT_EQ(got.dx, swap_outer(want.dx, T, N, I));
    EXPECT_EQ(got.dw, want.dw);
    EXPECT_EQ(got.hy, want.hy);
    EXPECT_EQ(got.cy, want.cy);
    EXPECT_EQ(got.dhx, want.dhx);
  }
}

// Where T*GX floats are more than a gate kernel's 32-bit row step, layer 0 reads x's sequence-
// major copy instead, as every layer reads its input (a plan only: gx alone is 5 GB here).
TEST(BatchFirst, LongSequencesCopyX) {
  const RnnConfig config{.cell = CellKind::lstm, .input_size = 64, .hidden_size = 1024, .batch_first = true};
  const Plan plan = make_plan(config, {150000, 2}, Mode::inference, Isa::avx512, 2);
  int x_copies = 0;
  test::for_each_step(plan.forward, [&](const Step& step) {
    const auto* c = std::get_if<CopyStep>(&step);
    x_copies += c && c->src.buffer == Buffer::x;
  });
  EXPECT_EQ(x_copies, 1);
  for (const KernelDesc& k : plan.kernels) {
    if (k.kind_of() != KernelKind::gate) continue;
    EXPECT_EQ(k.gx_stride(), 4 * 1024) << kernel_name(k);
  }
}

// Padded positions of y and dx are exactly zero, and what a caller leaves in dy there is ignored.
TEST(VariableLengths, PaddingIsZeroAndIgnored) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  RnnConfig config{.cell = CellKind::lstm, .input_size = 9, .hidden_size = 21, .num_layers = 2, .bidirectional = true};
  RnnCase rc(config, {6, 4}, 5);
  rc.lengths = {3, 6, 1, 4};
  Rnn rnn(config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = 2});
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  const Tensors a = rc.run(ex);
  const std::int64_t N = 4, W = 2 * 21;
  for (std::int64_t t = 0; t < 6; ++t)
    for (std::int64_t n = 0; n < N; ++n)
      if (t >= rc.lengths[static_cast<std::size_t>(n)]) {
        for (std::int64_t j = 0; j < W; ++j) ASSERT_EQ(a.y[static_cast<std::size_t>((t * N + n) * W + j)], 0.0f);
        for (std::int64_t j = 0; j < 9; ++j) ASSERT_EQ(a.dx[static_cast<std::size_t>((t * N + n) * 9 + j)], 0.0f);
        for (std::int64_t j = 0; j < W; ++j) rc.dy[static_cast<std::size_t>((t * N + n) * W + j)] = 1e3f;
      }
  const Tensors b = rc.run(ex);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dw, b.dw);
  EXPECT_EQ(a.dhx, b.dhx);
}

TEST(VariableLengths, RejectsLengthsOutsideTheSequence) {
  RnnConfig config{.cell = CellKind::gru, .input_size = 3, .hidden_size = 4};
  RnnCase rc(config, {5, 3});
  Execution ex = Rnn(config).prepare(rc.shape, Mode::inference);
  std::vector<float> y(static_cast<std::size_t>(y_elements(config, rc.shape)));
  for (const std::vector<std::int32_t>& bad : {std::vector<std::int32_t>{1, 0, 5}, {1, 6, 5}, {-1, 2, 2}}) {
    try {
      ex.forward(rc.w, {.x = rc.x, .y = y, .seq_lengths = bad});
      ADD_FAILURE() << "accepted bad lengths";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("seq_lengths["), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ex.forward(rc.w, {.x = rc.x, .y = y, .seq_lengths = std::vector<std::int32_t>{1, 2}}), Error);
}

// The mask is a function of the seed alone: the same on every thread count, different for
// another seed, and dropout does nothing in inference.
TEST(Dropout, DeterministicForASeedAndIdentityInInference) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  RnnConfig config{.cell = CellKind::gru, .input_size = 8, .hidden_size = 40, .num_layers = 3};
  config.dropout = 0.5f;
  RnnCase rc(config, {5, 3}, 9);
  rc.dropout_seed = 11;
  auto run = [&](const RnnConfig& c, Mode mode, int threads) {
    Execution ex = Rnn(c, {.backend = Backend::jit, .isa = Isa::avx512, .threads = threads}).prepare(rc.shape, mode);
    return rc.run(ex).y;
  };
  EXPECT_EQ(run(config, Mode::training, 1), run(config, Mode::training, 2));
  const std::vector<float> a = run(config, Mode::training, 1);
  rc.dropout_seed = 12;
  EXPECT_NE(a, run(config, Mode::training, 1));
  RnnConfig plain = config;
  plain.dropout = 0.0f;
  EXPECT_EQ(run(config, Mode::inference, 1), run(plain, Mode::inference, 1));
}

}  // namespace
}  // namespace rnnjit
