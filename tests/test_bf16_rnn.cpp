// Options::fpmath bf16 end to end, on each bf16 unit (AMX-BF16 and AVX512_BF16, chosen with
// RNNJIT_BF16_UNIT): inference of every cell, with tails (H = 19, 50, 115), one and two layers,
// both directions, a projection, variable lengths, batch-first tensors and no biases, on one
// and two threads (a recurrence split by hidden units, in 32- or 16-column panels, and one split
// by batch rows), against the double-precision reference. bf16 keeps 8 bits of each GEMM input,
// so the tolerance is bf16's (test_bf16_gemm checks the GEMM itself to FP32's); each case also
// checks that its plan ran on its unit and that its results do differ from the strict plan's (a
// plan that silently stayed FP32 fails). Training too: every GEMM bf16, every gradient against
// the reference. Other ISAs stay FP32: checked here too.
// A unit's cases skip where the CPU (or OS) does not run it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

using test::RnnCase;
using test::Tensors;
using test::worst_difference;

struct Bf16Case {
  std::string name;
  RnnConfig config;
  Shape shape;
  int threads = 1;
  bool lengths = false;
  Bf16Unit unit = Bf16Unit::amx;
};

bool runs_on(const Plan& plan, Bf16Unit unit) {
  if (plan.fpmath != FpMath::bf16 || plan.bf16_unit != unit) return false;
  const KernelKind kind = unit == Bf16Unit::amx ? KernelKind::amx_gemm : KernelKind::dpbf16_gemm;
  for (const KernelDesc& d : plan.kernels)
    if (d.kind_of() == kind) return true;
  return false;
}

// Whether every generated GEMM of these stages (one-shot, and a recurrence's per step) is bf16.
bool every_gemm_bf16(const std::vector<Stage>& stages) {
  auto bf16 = [](const GemmStep& g) { return !g.blocking.generated() || g.blocking.bf16; };
  for (const Stage& stage : stages)
    for (const auto& lane : stage.lanes)
      for (const Step& step : lane) {
        if (const auto* g = std::get_if<GemmStep>(&step); g && !bf16(*g)) return false;
        if (const auto* r = std::get_if<RecurrenceStep>(&step); r && !bf16(r->gemm)) return false;
      }
  return true;
}

// RNNJIT_BF16_UNIT for one scope (bf16_unit() reads it at every prepare).
class ForcedUnit {
 public:
  explicit ForcedUnit(Bf16Unit unit) { setenv("RNNJIT_BF16_UNIT", std::string(to_string(unit)).c_str(), 1); }
  ~ForcedUnit() { unsetenv("RNNJIT_BF16_UNIT"); }
  ForcedUnit(const ForcedUnit&) = delete;
  ForcedUnit& operator=(const ForcedUnit&) = delete;
};

class Bf16Rnn : public testing::TestWithParam<Bf16Case> {};

TEST_P(Bf16Rnn, InferenceMatchesTheReferenceToBf16Precision) {
  const Bf16Case& c = GetParam();
  if (!(c.unit == Bf16Unit::amx ? amx_bf16_usable() : avx512_bf16_usable()))
    GTEST_SKIP() << "this CPU (or OS) does not run " << to_string(c.unit);
  const ForcedUnit forced(c.unit);
  RnnCase rc(c.config, c.shape, 3);
  if (c.lengths) rc.vary_lengths(5, /*longest_first=*/true);
  const Tensors want = rc.reference(false);

  Rnn bf16(c.config, {.backend = Backend::jit, .threads = c.threads, .fpmath = FpMath::bf16});
  Execution ex = bf16.prepare(c.shape, Mode::inference);
  ASSERT_TRUE(runs_on(ex.plan(), c.unit)) << ex.plan_text();
  const Tensors got = rc.run(ex);
  const double tol = rc.bf16_tolerance(false);
  test::expect_close(got.y, want.y, tol, "y");
  test::expect_close(got.hy, want.hy, tol, "hy");
  if (rc.lstm()) test::expect_close(got.cy, want.cy, tol, "cy");

  Rnn strict(c.config, {.backend = Backend::jit, .threads = c.threads});
  Execution strict_ex = strict.prepare(c.shape, Mode::inference);
  EXPECT_NE(strict_ex.plan().fpmath, FpMath::bf16);
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
  const std::size_t per_unit = out.size();
  for (std::size_t i = 0; i < per_unit; ++i) {
    out.push_back(out[i]);
    out.back().unit = Bf16Unit::avx512_bf16;
    out.back().name += "_avx512_bf16";
    out[i].name += "_amx";
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16Rnn, testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

// Training with fpmath bf16: every GEMM reads bf16 copies of its operands (forward and backward
// data on the weights, and the weight gradients), with FP32 sums, FP32 master weights and FP32
// gradients; the reserve keeps what forward produced, in FP32. Outputs and every gradient against
// the double-precision reference, to bf16's precision carried through the forward pass and back
// (the gradients also sum over N).
TEST_P(Bf16Rnn, TrainingMatchesTheReferenceToBf16Precision) {
  const Bf16Case& c = GetParam();
  // ReLU's derivative jumps at 0: a pre-activation that bf16 moves across 0 changes its
  // gradient by O(1) (measured: dW off by 1.3 where the bound is 0.5), so no bf16 tolerance
  // bounds it. Its bf16 forward is checked by the inference cases, its GEMMs by test_bf16_gemm.
  if (c.config.cell == CellKind::rnn_relu) GTEST_SKIP() << "ReLU's gradient is discontinuous where bf16 moves it";
  if (!(c.unit == Bf16Unit::amx ? amx_bf16_usable() : avx512_bf16_usable()))
    GTEST_SKIP() << "this CPU (or OS) does not run " << to_string(c.unit);
  const ForcedUnit forced(c.unit);
  RnnCase rc(c.config, c.shape, 4);
  if (c.lengths) rc.vary_lengths(6, /*longest_first=*/false);
  const Tensors want = rc.reference(true);
  Execution ex = Rnn(c.config, {.backend = Backend::jit, .threads = c.threads, .fpmath = FpMath::bf16})
                     .prepare(c.shape, Mode::training);
  ASSERT_TRUE(runs_on(ex.plan(), c.unit)) << ex.plan_text();
  EXPECT_NE(ex.plan_text().find("and the weight gradients read bf16 copies"), std::string::npos);
  for (const auto* stages : {&ex.plan().forward, &ex.plan().backward_data, &ex.plan().backward_weights})
    EXPECT_TRUE(every_gemm_bf16(*stages)) << ex.plan_text();
  const Tensors got = rc.run(ex);
  const double tol = rc.bf16_tolerance(false), gtol = rc.bf16_tolerance(true);
  test::expect_close(got.y, want.y, tol, "y");
  test::expect_close(got.hy, want.hy, tol, "hy");
  test::expect_close(got.dx, want.dx, gtol, "dx");
  test::expect_close(got.dhx, want.dhx, gtol, "dhx");
  test::expect_close(got.dw, want.dw, gtol, "dw");
  if (rc.lstm()) {
    test::expect_close(got.cy, want.cy, tol, "cy");
    test::expect_close(got.dcx, want.dcx, gtol, "dcx");
  }
  Execution strict = Rnn(c.config, {.backend = Backend::jit, .threads = c.threads}).prepare(c.shape, Mode::training);
  EXPECT_GT(worst_difference(got.dw, rc.run(strict).dw), 1e-6) << "bf16 gradients equal FP32's: was bf16 used?";
}

TEST(Bf16Plan, OtherIsasStayFp32AndSaySo) {
  const RnnConfig config{.cell = CellKind::lstm, .input_size = 20, .hidden_size = 24};
  const Plan plan = make_plan(config, {4, 3}, Mode::inference, Isa::reference, 1, {}, {}, FpMath::bf16);
  EXPECT_EQ(plan.fpmath, FpMath::strict);
  EXPECT_NE(to_text(plan).find("fpmath bf16: isa reference has no bf16 GEMM"), std::string::npos) << to_text(plan);
}

TEST(Bf16Plan, ParsesItsNames) {
  EXPECT_EQ(parse_fpmath("bf16"), FpMath::bf16);
  EXPECT_EQ(parse_fpmath("strict"), FpMath::strict);
  EXPECT_THROW(parse_fpmath("fp16"), Error);
  EXPECT_EQ(parse_bf16_unit("amx"), Bf16Unit::amx);
  EXPECT_EQ(parse_bf16_unit("avx512_bf16"), Bf16Unit::avx512_bf16);
  EXPECT_THROW(parse_bf16_unit("avx2"), Error);
}

// bf16_unit(): AMX where usable, else AVX512_BF16 (on AMD's cores); RNNJIT_BF16_UNIT picks one
// the CPU runs and is an error naming itself for one it does not run or does not know.
TEST(Bf16Plan, TheUnitFollowsTheCpuAndRnnjitBf16Unit) {
  const std::optional<Bf16Unit> best = bf16_unit();
  if (amx_bf16_usable()) {
    EXPECT_EQ(best, Bf16Unit::amx);
  } else if (!avx512_bf16_usable()) {
    EXPECT_EQ(best, std::nullopt);
  }
  for (Bf16Unit unit : {Bf16Unit::amx, Bf16Unit::avx512_bf16}) {
    const ForcedUnit forced(unit);
    const bool usable = unit == Bf16Unit::amx ? amx_bf16_usable() : avx512_bf16_usable();
    if (usable) {
      EXPECT_EQ(bf16_unit(), unit);
      continue;
    }
    EXPECT_THROW(
        {
          try {
            bf16_unit();
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("RNNJIT_BF16_UNIT="), std::string::npos) << e.what();
            throw;
          }
        },
        Error);
  }
  setenv("RNNJIT_BF16_UNIT", "tiles", 1);
  EXPECT_THROW(bf16_unit(), Error);
  unsetenv("RNNJIT_BF16_UNIT");
}

}  // namespace
}  // namespace rnnjit
