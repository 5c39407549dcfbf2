// Options::projection_gemm: the input projections on OpenBLAS inside AVX-512 plans (every other
// GEMM generated), against the reference forward and backward; and the measured choice, which
// times both engines on the shape and says so in the plan.
#include <gtest/gtest.h>

#include <string>

#include "codegen/planner.hpp"
#include "runtime/executor.hpp"
#include "runtime/gemm_tuner.hpp"
#include "tests/plan_steps.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

bool has_avx512() { return detect_isa() == Isa::avx512; }

// The input projections of `plan`'s forward pass: on OpenBLAS (true) or generated (false).
std::vector<bool> projections_on_openblas(const Plan& plan) {
  std::vector<bool> out;
  test::for_each_step(plan.forward, [&](const Step& step) {
    if (const auto* g = std::get_if<GemmStep>(&step); g && g->what.starts_with("input projection"))
      out.push_back(!g->blocking.generated());
  });
  return out;
}

TEST(ProjectionGemm, NamesRoundTrip) {
  for (ProjectionGemm g : {ProjectionGemm::generated, ProjectionGemm::openblas, ProjectionGemm::measured})
    EXPECT_EQ(parse_projection_gemm(to_string(g)), g);
  EXPECT_THROW(parse_projection_gemm("fast"), Error);
}

TEST(ProjectionGemm, OpenblasPlansReadWihInPlace) {
  const RnnConfig c{CellKind::lstm, 40, 50, 2, true};
  const Plan plan = make_plan(c, {7, 5}, Mode::training, Isa::avx512, 2, projection_chooser(ProjectionGemm::openblas));
  EXPECT_EQ(projections_on_openblas(plan), std::vector<bool>(4, true));
  for (const Region& r : plan.workspace.regions) EXPECT_EQ(r.name.find("w_ih"), std::string::npos) << r.name;
  const Plan generated = make_plan(c, {7, 5}, Mode::training, Isa::avx512, 2);
  EXPECT_EQ(projections_on_openblas(generated), std::vector<bool>(4, false));
}

struct Case {
  RnnConfig config;
  Shape shape;
  int threads;
  bool lengths;
  int plan_threads = 1;  // the small cases' plans run on one thread whatever the option
};

class OpenblasProjection : public testing::TestWithParam<Case> {};

TEST_P(OpenblasProjection, MatchesReference) {
  if (!has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 (other ISAs run every GEMM on OpenBLAS anyway)";
  const Case& p = GetParam();
  for (Mode mode : {Mode::inference, Mode::training}) {
    test::RnnCase rc(p.config, p.shape, 11);
    if (p.lengths) rc.vary_lengths();
    Rnn rnn(p.config, {.backend = Backend::jit, .isa = Isa::avx512, .threads = p.threads,
                       .projection_gemm = ProjectionGemm::openblas});
    Execution ex = rnn.prepare(rc.shape, mode);
    EXPECT_EQ(ex.plan().threads, p.plan_threads);
    ASSERT_FALSE(projections_on_openblas(ex.plan()).empty());
    for (bool blas : projections_on_openblas(ex.plan())) EXPECT_TRUE(blas);
    const bool train = mode == Mode::training;
    test::expect_matches(rc.run(ex), rc.reference(train), rc, train);
  }
}

// Every cell; variable lengths, batch-first and the LSTM projection on the way.
const RnnConfig kBatchFirst{
    .cell = CellKind::rnn_tanh, .input_size = 17, .hidden_size = 40, .num_layers = 2, .batch_first = true};
const RnnConfig kProjected{
    .cell = CellKind::lstm, .input_size = 24, .hidden_size = 48, .num_layers = 2, .bidirectional = true, .proj_size = 20};

INSTANTIATE_TEST_SUITE_P(Cells, OpenblasProjection,
                         testing::Values(Case{{CellKind::lstm, 37, 50, 2, true}, {5, 4}, 2, false},
                                         Case{{CellKind::gru, 20, 33, 1, false}, {11, 3}, 1, true},
                                         Case{kBatchFirst, {8, 5}, 2, false},
                                         Case{kProjected, {6, 4}, 2, true},
                                         Case{{CellKind::gru_reset_before, 30, 64, 1, true}, {10, 7}, 2, false},
                                         // large enough that the plan runs on two threads, lanes and all
                                         Case{{CellKind::lstm, 128, 128, 2, true}, {12, 8}, 2, false, 2}));

TEST(ProjectionGemm, MeasuredTimesBothEngines) {
  if (!has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  GemmStep g{.what = "input projection", .trans_b = true, .m = 600, .n = 4 * 96, .k = 70,
             .a = {.buffer = Buffer::x}, .b = {.buffer = Buffer::weights}, .c = {.buffer = Buffer::y}, .lda = 70,
             .ldb = 70, .ldc = 4 * 96};
  const GemmTimes t = time_projection(g, 96, 2);
  EXPECT_GT(t.generated_ms, 0.0);
  EXPECT_GT(t.openblas_ms, 0.0);
  EXPECT_EQ(t.rows, 600);  // 600 x 384 x 70 is well under a GFLOP: every row is timed
  // 100000 x 1600 x 400 is 128 GFLOP: timed on a GFLOP's worth of rows, or four chunks per
  // thread of OpenBLAS's if that is more.
  const GemmStep big{.what = "input projection", .trans_b = true, .m = 100000, .n = 1600, .k = 400, .lda = 400,
                     .ldb = 400, .ldc = 1600};
  const std::int64_t gflop_rows = 781, chunked = 4 * 2 * blas_chunk_rows(100000, 2);
  EXPECT_EQ(time_projection(big, 400, 2).rows, std::max(gflop_rows, chunked));

  // The measured choice is the plan's, and its note gives both times.
  const RnnConfig c{CellKind::gru, 70, 96, 1, false};
  const Plan plan =
      make_plan(c, {60, 10}, Mode::inference, Isa::avx512, 2, projection_chooser(ProjectionGemm::measured));
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_NE(plan.notes[0].find("measured on 600 of 600 rows"), std::string::npos) << plan.notes[0];
  const bool blas = plan.notes[0].find("OpenBLAS (measured") != std::string::npos;
  EXPECT_EQ(projections_on_openblas(plan), std::vector<bool>{blas});
}

TEST(ProjectionGemm, OpenblasOnlyWhenClearlyFaster) {
  EXPECT_TRUE(openblas_wins({.generated_ms = 10.0, .openblas_ms = 8.0, .rows = 1}));
  EXPECT_FALSE(openblas_wins({.generated_ms = 10.0, .openblas_ms = 9.5, .rows = 1}));
  EXPECT_FALSE(openblas_wins({.generated_ms = 10.0, .openblas_ms = 30.0, .rows = 1}));
}

}  // namespace
}  // namespace rnnjit
