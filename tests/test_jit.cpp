// The JIT path (planner + generated gate kernels and GEMMs, AVX-512 and AVX2; the scalar
// twins and OpenBLAS for isa reference) against the double-precision reference, for every
// cell, mode and direction, on shapes with tails: H around the vector widths of 16 and 8,
// primes, batch 1, I != H, up to 3 layers, forward outputs and every gradient. The tests of
// particular plans (thread splits, capped tiles, zero states) run on each generated ISA.
#include "codegen/plan.hpp"
#include "tests/plan_steps.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit::test {
namespace {

struct JitCase {
  CellKind cell;
  std::int64_t H, N, L;
  bool bidirectional;
  std::int64_t T, I;
  Isa isa;
};

std::string case_name(const testing::TestParamInfo<JitCase>& info) {
  const JitCase& c = info.param;
  return fmt::format("{}_h{}_n{}_l{}_d{}_t{}_i{}_{}", to_string(c.cell), c.H, c.N, c.L, c.bidirectional ? 2 : 1, c.T,
                     c.I, to_string(c.isa));
}

std::vector<JitCase> sweep(Isa isa) {
  std::vector<JitCase> cases;
  int i = 0;
  for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru})
    for (std::int64_t H : {1, 2, 15, 16, 17, 31, 33, 64, 100})
      for (std::int64_t N : {1, 3, 8}) {
        // Cycle layers, direction, T and I so every cell meets each combination.
        const std::int64_t L = 1 + i % 3;
        const bool bi = (i / 3) % 2 == 1;
        const std::int64_t T = 1 + (i * 5) % 7;
        const std::int64_t I = H + 1 + (i % 4) * 3;
        cases.push_back({cell, H, N, L, bi, T, I, isa});
        ++i;
      }
  return cases;
}

// Whether this CPU runs `isa`'s code (AVX-512 CPUs run AVX2's).
bool cpu_runs(Isa isa) { return static_cast<int>(cpu_isa()) >= static_cast<int>(isa); }

constexpr Isa kGeneratedIsas[] = {Isa::avx512, Isa::avx2};

class JitVsReference : public testing::TestWithParam<JitCase> {};

void check(const JitCase& c, Mode mode) {
  if (!cpu_runs(c.isa)) GTEST_SKIP() << "this CPU cannot run " << to_string(c.isa) << " code";
  RnnCase rc({c.cell, c.I, c.H, c.L, c.bidirectional}, {c.T, c.N});
  const bool training = mode == Mode::training;
  Rnn rnn(rc.config, {Backend::jit, c.isa});
  Execution ex = rnn.prepare(rc.shape, mode);
  const Tensors got = rc.run(ex);
  const Tensors want = rc.reference(training);
  const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
  expect_close(got.y, want.y, tol, "y");
  expect_close(got.hy, want.hy, tol, "hy");
  expect_close(got.cy, want.cy, tol, "cy");
  if (!training) return;
  expect_close(got.dx, want.dx, gtol, "dx");
  expect_close(got.dhx, want.dhx, gtol, "dhx");
  expect_close(got.dcx, want.dcx, gtol, "dcx");
  expect_close(got.dw, want.dw, gtol, "dweights");
}

TEST_P(JitVsReference, Inference) { check(GetParam(), Mode::inference); }
TEST_P(JitVsReference, Training) { check(GetParam(), Mode::training); }

INSTANTIATE_TEST_SUITE_P(Avx512, JitVsReference, testing::ValuesIn(sweep(Isa::avx512)), case_name);
INSTANTIATE_TEST_SUITE_P(Avx2, JitVsReference, testing::ValuesIn(sweep(Isa::avx2)), case_name);

// The scalar gate kernels (what the reference ISA runs) on a thinner sweep.
std::vector<JitCase> scalar_sweep() {
  std::vector<JitCase> cases;
  for (const JitCase& c : sweep(Isa::reference))
    if (c.N == 3) cases.push_back(c);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(ScalarGates, JitVsReference, testing::ValuesIn(scalar_sweep()), case_name);

// Each test below on each generated ISA the CPU runs.
class JitOn : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!cpu_runs(GetParam())) GTEST_SKIP() << "this CPU cannot run " << to_string(GetParam()) << " code";
  }
};
INSTANTIATE_TEST_SUITE_P(Isas, JitOn, testing::ValuesIn(kGeneratedIsas),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The benchmark's shape: H=800, N=20 (blocking and remainders differ from the small ones).
TEST_P(JitOn, Ds2LstmForwardAndBackward) {
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::rnn_tanh}) {
    RnnCase rc({cell, 800, 800, 1, false}, {3, 20});
    Rnn rnn(rc.config, {Backend::jit, GetParam()});
    Execution ex = rnn.prepare(rc.shape, Mode::training);
    const Tensors got = rc.run(ex);
    const Tensors want = rc.reference(true);
    expect_close(got.y, want.y, rc.tolerance(false), "y");
    expect_close(got.dx, want.dx, rc.tolerance(true), "dx");
    expect_close(got.dw, want.dw, rc.tolerance(true), "dweights");
  }
}

// A step's threads split each group at whole vectors (GemmBlocking::vector_split): where a
// boundary falls inside a panel, the panel is packed as its parts, each thread computes its
// own with a narrower kernel, and its gate kernel starts mid-panel. Forward
// and backward against the reference on 2, 3 and 6 threads, variable lengths on one (parts of
// finished rows are zeroed, not computed); each plan must cut a panel of every step's GEMMs
// (the recurrent products, with a GRU's reset before also reset_before->gemm's).
TEST_P(JitOn, VectorSplitCutPanelsMatchTheReference) {
  struct Case {
    RnnConfig config;
    Shape shape;
    int threads;
    bool lengths;
  };
  for (const Case& c :
       {Case{{CellKind::lstm, 40, 240, 1, false}, {12, 6}, 2, false},  // 15 vectors in 48-column panels
        Case{{CellKind::lstm, 40, 230, 1, false}, {12, 6}, 2, true},   // ... and a group tail
        Case{{CellKind::gru, 40, 272, 1, false}, {12, 4}, 2, false},  // 17 vectors in 80-column panels
        Case{{CellKind::gru_reset_before, 40, 240, 1, false}, {12, 6}, 2, false},
        Case{{CellKind::rnn_tanh, 40, 560, 1, false}, {12, 4}, 3, false},  // two cut panels
        Case{{CellKind::lstm, 40, 160, 1, false}, {80, 4}, 6, false}}) {   // panels of three parts
    for (Mode mode : {Mode::inference, Mode::training}) {
      const bool train = mode == Mode::training;
      SCOPED_TRACE(fmt::format("{} H={} N={} threads={} {}", to_string(c.config.cell), c.config.hidden_size,
                               c.shape.batch, c.threads, train ? "training" : "inference"));
      RnnCase rc(c.config, c.shape, 11);
      if (c.lengths) rc.vary_lengths();
      Rnn rnn(rc.config, {.backend = Backend::jit, .isa = GetParam(), .threads = c.threads});
      Execution ex = rnn.prepare(rc.shape, mode);
      int steps = 0, cut = 0;
      for_each_step(ex.plan(), [&](const Step& step) {
        const auto* r = std::get_if<RecurrenceStep>(&step);
        if (!r) return;
        for (const GemmStep* g : {&r->gemm, r->reset_before ? &r->reset_before->gemm : nullptr}) {
          if (!g) continue;
          ++steps;
          cut += !g->blocking.part_kernels.empty();
          EXPECT_EQ(g->blocking.threads, c.threads) << g->what;
        }
      });
      EXPECT_GT(steps, 0);
      // AVX2's step tiles are one vector wide (its 16 registers hold 6 x 1 tiles), so a split at
      // whole vectors cuts no panel there: its cases check the split by units alone.
      if (GetParam() == Isa::avx512) {
        EXPECT_EQ(cut, steps) << "GEMMs of a step whose threads cut a panel";
      }
      expect_matches(rc.run(ex), rc.reference(train), rc, train);
    }
  }
}

// Rows of A 4 KiB apart (x of I = 1024, h of H = 1024, dG of an LSTM with H = 256) cap a tile
// at 8 rows, and the capped search then weighs the tiles' loads (GemmBlocking): every GEMM of
// these plans that reads such rows in place takes a tile of at most 0.5 loads per FMA (5 x 4,
// 6 x 4, 4 x 6, 8 x 3), where the model took 7 x 2, 6 x 2 and 8 x 2 before. Inference and
// training against the reference, row and column tails included.
TEST(JitCappedTiles, MatchTheReference) {
  if (!cpu_runs(Isa::avx512)) GTEST_SKIP() << "this CPU has no AVX-512";
  struct Case {
    RnnConfig config;
    Shape shape;
  };
  for (const Case& c : {Case{{CellKind::lstm, 1024, 1024, 1, false}, {2, 20}},  // the steps' h and dG
                        Case{{CellKind::lstm, 1024, 256, 1, false}, {16, 37}}}) {  // x, and dG
    for (Mode mode : {Mode::inference, Mode::training}) {
      const bool train = mode == Mode::training;
      SCOPED_TRACE(fmt::format("I={} H={} N={} {}", c.config.input_size, c.config.hidden_size, c.shape.batch,
                               train ? "training" : "inference"));
      RnnCase rc(c.config, c.shape, 13);
      Rnn rnn(rc.config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = 2});
      Execution ex = rnn.prepare(rc.shape, mode);
      int capped = 0;
      auto check = [&](const GemmStep& g) {
        if (g.trans_a || g.lda % 1024 != 0) return;
        ++capped;
        const GemmBlocking& b = g.blocking;
        EXPECT_LE(b.m_r, 8) << g.what;
        EXPECT_LE(b.m_r + b.n_r, b.m_r * b.n_r / 2) << fmt::format("{}: {} x {}", g.what, b.m_r, b.n_r);
      };
      for_each_step(ex.plan(), [&](const Step& step) {
        if (const auto* g = std::get_if<GemmStep>(&step)) check(*g);
        if (const auto* r = std::get_if<RecurrenceStep>(&step)) check(r->gemm);
      });
      EXPECT_GT(capped, 0);
      expect_matches(rc.run(ex), rc.reference(train), rc, train);
    }
  }
}

// Plans of every kind of step split, for the tests of what a call leaves out below: steps on
// one thread, split by hidden units, by batch rows and as a direction's lane, with and without
// variable lengths (plan_threads: the threads the plan must run on, to be sure of the split).
struct SplitCase {
  RnnConfig config;
  Shape shape;
  int plan_threads;
  bool lengths;
};

std::vector<SplitCase> split_cases() {
  const RnnConfig projected{
      .cell = CellKind::lstm, .input_size = 24, .hidden_size = 48, .bidirectional = true, .proj_size = 20};
  return {
      {{CellKind::lstm, 64, 256, 1, false}, {6, 6}, 2, false},             // split by units
      {{CellKind::gru_reset_before, 64, 256, 1, false}, {8, 6}, 2, true},  // split by units
      {{CellKind::gru, 33, 100, 1, false}, {12, 24}, 2, true},             // split by rows
      {{CellKind::lstm, 256, 256, 1, false}, {1, 24}, 2, false},           // T=1, split by rows
      {{CellKind::lstm, 64, 128, 1, true}, {4, 16}, 2, true},              // a lane a direction
      {{CellKind::rnn_tanh, 17, 40, 2, true}, {1, 3}, 1, false},
      {{CellKind::gru_reset_before, 9, 33, 2, false}, {5, 4}, 1, true},
      {projected, {5, 3}, 1, true},
  };
}

std::string describe(const SplitCase& c, Mode mode) {
  const RnnConfig& k = c.config;
  return fmt::format("{} I={} H={} L={} D={} P={} T={} N={} {}", to_string(k.cell), k.input_size, k.hidden_size,
                     k.num_layers, k.directions(), k.proj_size, c.shape.seq_len, c.shape.batch,
                     mode == Mode::training ? "training" : "inference");
}

Execution prepare_split(const SplitCase& c, Mode mode, Isa isa) {
  Rnn rnn(c.config, {.backend = Backend::jit, .isa = isa, .threads = 2});
  Execution ex = rnn.prepare(c.shape, mode);
  EXPECT_EQ(ex.plan().threads, c.plan_threads);
  return ex;
}

// A call without hx starts from zeros, and the executor writes the first step's recurrent
// products as zeros instead of multiplying (GRU with the reset before has two of them). Each
// Execution first runs a call with states, which leaves its buffers of products full, so that
// a product left unwritten shows.
TEST_P(JitOn, ZeroInitialStateMatchesZerosPassed) {
  for (const SplitCase& c : split_cases())
    for (Mode mode : {Mode::inference, Mode::training}) {
      SCOPED_TRACE(describe(c, mode));
      const bool train = mode == Mode::training;
      RnnCase with_states(c.config, c.shape, 3), rc(c.config, c.shape, 5);
      rc.without_initial_states();
      if (c.lengths) rc.vary_lengths();
      Execution ex = prepare_split(c, mode, GetParam());
      with_states.run(ex);
      expect_matches(rc.run(ex), rc.reference(train), rc, train);
    }
}

// dW_hh sums h_prev rows of which h0's are the first for a forward direction and the last for
// a reversed one (at T = 1, all of them): from zero states those terms are left out (the first
// where dW_hh reads its A in place or packs it, not from dW_ih's panels), all of dW_hh at T = 1,
// where it is then written as zeros. dweights starts out full of another call's numbers, so a
// block left unwritten shows; with accumulate, those numbers are added to.
TEST_P(JitOn, ZeroInitialStateWeightGradientsLeaveOutTheTermsInH0) {
  int leading = 0;  // GEMMs that can leave out their first rows
  for (const SplitCase& c : split_cases()) {
    SCOPED_TRACE(describe(c, Mode::training));
    RnnCase rc(c.config, c.shape, 5);
    rc.without_initial_states();
    if (c.lengths) rc.vary_lengths();
    Execution ex = prepare_split(c, Mode::training, GetParam());
    int with_h0 = 0, last = 0;
    for_each_step(ex.plan().backward_weights, [&](const Step& step) {
      const auto* g = std::get_if<GemmStep>(&step);
      if (!g || g->h0.block.rows == 0) return;
      ++with_h0;
      last += g->h0.last;
      leading += !g->h0.last && g->a_panels_use != GemmStep::APanels::packed_before;
    });
    const std::int64_t layers = c.config.num_layers, D = c.config.directions();
    const std::int64_t gemms_per_direction = c.config.cell == CellKind::gru_reset_before ? 2 : 1;  // dW_hh, dW_hn
    EXPECT_EQ(with_h0, layers * D * gemms_per_direction);
    EXPECT_EQ(last, layers * (c.shape.seq_len == 1 ? D : D - 1) * gemms_per_direction);
    const std::vector<float> stale = RnnCase(c.config, c.shape, 3).run(ex).dw;
    const Tensors want = rc.reference(true);
    for (bool accumulate : {false, true}) {
      std::vector<float> y(want.y.size()), dx(rc.x.size()), dhx(rc.hx.size()), dcx(rc.cx.size()), dw = stale;
      ex.forward(rc.w, {.x = rc.x, .y = y, .seq_lengths = rc.lengths});
      ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = dx, .dhx = dhx, .dcx = dcx});
      ex.backward_weights({.x = rc.x, .dweights = dw, .accumulate = accumulate});
      std::vector<float> expected = want.dw;
      if (accumulate)
        for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += stale[i];
      expect_close(dw, expected, rc.tolerance(true), accumulate ? "dweights accumulated" : "dweights");
    }
  }
  EXPECT_GT(leading, 0) << "no case leaves out leading rows";
}

// Backward data without dhx leaves out the last step's recurrent product (dh_carry's only
// reader is then absent); dx, dcx and the weight gradients stay what they are with it. The
// Execution first runs backward with dhx, and the gradients of the second call are checked
// against the oracle.
TEST_P(JitOn, WithoutDhxGradientsMatchTheReference) {
  for (const SplitCase& c : split_cases()) {
    SCOPED_TRACE(describe(c, Mode::training));
    RnnCase rc(c.config, c.shape, 9);
    if (c.lengths) rc.vary_lengths();
    Execution ex = prepare_split(c, Mode::training, GetParam());
    rc.run(ex);
    const Tensors want = rc.reference(true);
    std::vector<float> y(want.y.size()), dx(rc.x.size()), dcx(rc.cx.size()), dw(rc.w.size());
    ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = y, .seq_lengths = rc.lengths});
    ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = dx, .dcx = dcx});
    ex.backward_weights({.x = rc.x, .dweights = dw});
    const double gtol = rc.tolerance(true);
    expect_close(dx, want.dx, gtol, "dx");
    expect_close(dcx, want.dcx, gtol, "dcx");
    expect_close(dw, want.dw, gtol, "dweights");
  }
}

}  // namespace
}  // namespace rnnjit::test
