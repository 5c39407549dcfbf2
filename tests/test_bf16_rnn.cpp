// Options::fpmath bf16 end to end: inference of every cell, with tails (H = 19, 50, 115), one
// and two layers, both directions, a projection, variable lengths, batch-first tensors and no
// biases, on one and two threads (a recurrence split by hidden units, in 32- or 16-column
// panels, and one split by batch rows), against the double-precision reference. bf16 keeps 8
// bits of each GEMM input, so the tolerance is bf16's (test_bf16_gemm checks the GEMM itself
// to FP32's); each case also checks that its plan ran on AMX-BF16 and that its results do
// differ from the strict plan's (a plan that silently stayed FP32 fails). Training and CPUs
// without AMX stay FP32: checked here too. Skipped where the CPU (or OS) gives no AMX-BF16 tiles.
#include <gtest/gtest.h>

#include <string>

#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

using test::RnnCase;
using test::Tensors;

struct Bf16Case {
  std::string name;
  RnnConfig config;
  Shape shape;
  int threads = 1;
  bool lengths = false;
};

bool runs_amx(const Plan& plan) {
  if (plan.fpmath != FpMath::bf16) return false;
  for (const KernelDesc& d : plan.kernels)
    if (d.kind_of() == KernelKind::amx_gemm) return true;
  return false;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

class Bf16Rnn : public testing::TestWithParam<Bf16Case> {};

TEST_P(Bf16Rnn, InferenceMatchesTheReferenceToBf16Precision) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "this CPU (or OS) gives no AMX-BF16 tiles";
  const Bf16Case& c = GetParam();
  RnnCase rc(c.config, c.shape, 3);
  if (c.lengths) rc.vary_lengths(5, /*longest_first=*/true);
  const Tensors want = rc.reference(false);

  Rnn bf16(c.config, {.backend = Backend::jit, .threads = c.threads, .fpmath = FpMath::bf16});
  Execution ex = bf16.prepare(c.shape, Mode::inference);
  ASSERT_TRUE(runs_amx(ex.plan())) << ex.plan_text();
  const Tensors got = rc.run(ex);
  // A GEMM input keeps 8 significant bits (relative error up to 2^-9); its products and their
  // errors sum over the step's width, and the errors are carried through T steps and L layers.
  const double width = static_cast<double>(std::max(c.config.input_size, c.config.output_size()) +
                                           c.config.hidden_size);
  const double tol = 0x1p-9 * std::sqrt(width * static_cast<double>(c.shape.seq_len * c.config.num_layers));
  test::expect_close(got.y, want.y, tol, "y");
  test::expect_close(got.hy, want.hy, tol, "hy");
  if (rc.lstm()) test::expect_close(got.cy, want.cy, tol, "cy");

  Rnn strict(c.config, {.backend = Backend::jit, .threads = c.threads});
  Execution strict_ex = strict.prepare(c.shape, Mode::inference);
  EXPECT_FALSE(runs_amx(strict_ex.plan()));
  EXPECT_GT(worst_difference(got.y, rc.run(strict_ex).y), 1e-5) << "bf16 results equal FP32's: was bf16 used?";
}

std::vector<Bf16Case> cases() {
  std::vector<Bf16Case> out;
  for (CellKind cell : kCellKinds) {
    const std::string name(to_string(cell));
    out.push_back({name + "_tails", {.cell = cell, .input_size = 13, .hidden_size = 19}, {6, 5}});
    out.push_back({name + "_bidir_2layers_2threads",
                   {.cell = cell, .input_size = 40, .hidden_size = 50, .num_layers = 2, .bidirectional = true},
                   {9, 21}, 2});
    out.push_back({name + "_lengths_batch_first_2threads",
                   {.cell = cell, .input_size = 33, .hidden_size = 115, .batch_first = true}, {8, 37}, 2, true});
    out.push_back({name + "_no_bias_reverse", {.cell = cell, .input_size = 70, .hidden_size = 64, .reverse = true,
                                               .bias = false}, {5, 3}});
  }
  out.push_back({"lstm_projection_2threads", {.cell = CellKind::lstm, .input_size = 30, .hidden_size = 115,
                                              .num_layers = 2, .proj_size = 47}, {7, 18}, 2});
  out.push_back({"lstm_rows_split_2threads", {.cell = CellKind::lstm, .input_size = 16, .hidden_size = 32},
                 {10, 96}, 2});
  out.push_back({"gru_wide_2threads", {.cell = CellKind::gru, .input_size = 300, .hidden_size = 400}, {4, 20}, 2});
  // H = 800 on two threads: 16-column panels of W_hh, 400 units a thread (32-column ones would
  // split 416 : 384), streamed from L3 at every step.
  out.push_back({"lstm_ds2_width_2threads", {.cell = CellKind::lstm, .input_size = 16, .hidden_size = 800}, {4, 5}, 2});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16Rnn, testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

TEST(Bf16Plan, TrainingStaysFp32AndSaysSo) {
  const RnnConfig config{.cell = CellKind::gru, .input_size = 20, .hidden_size = 24};
  Rnn rnn(config, {.backend = Backend::jit, .fpmath = FpMath::bf16});
  Execution ex = rnn.prepare({4, 3}, Mode::training);
  EXPECT_EQ(ex.plan().fpmath, FpMath::strict);
  if (amx_bf16_usable()) {
    EXPECT_NE(ex.plan_text().find("fpmath bf16 applies to inference"), std::string::npos) << ex.plan_text();
  }
}

TEST(Bf16Plan, OtherIsasStayFp32AndSaySo) {
  const RnnConfig config{.cell = CellKind::lstm, .input_size = 20, .hidden_size = 24};
  const Plan plan = make_plan(config, {4, 3}, Mode::inference, Isa::reference, 1, {}, {}, FpMath::bf16);
  EXPECT_EQ(plan.fpmath, FpMath::strict);
  EXPECT_NE(to_text(plan).find("fpmath bf16: isa reference has no AMX GEMM"), std::string::npos) << to_text(plan);
}

TEST(Bf16Plan, ParsesItsNames) {
  EXPECT_EQ(parse_fpmath("bf16"), FpMath::bf16);
  EXPECT_EQ(parse_fpmath("strict"), FpMath::strict);
  EXPECT_THROW(parse_fpmath("fp16"), Error);
}

}  // namespace
}  // namespace rnnjit
