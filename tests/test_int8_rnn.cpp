// Quantize::int8_dynamic end to end, on every cell: LSTM (with a projection, peepholes, cell
// and gate clips), both GRU forms and the vanilla RNNs, both directions, several layers,
// variable lengths, batch-first, H from 64 to 1024. Each run is checked twice:
//   - against the scalar int8 reference (reference::forward with CallOptions::quantize), which
//     quantizes every product's operands exactly as the int8 GEMMs do. The GEMMs match it bit
//     for bit (test_int8_gemm); the gate kernels' activations differ from the reference's in
//     the last bits, which can move an h value across a rounding boundary of its quantization:
//     a product then changes by one activation quantization step, max|row of W| * max|h| / L_a
//     (L_a the unit's activation levels: 127, or 63 on the avx2 unit's 7 bits). The bound is 4
//     such steps a layer, beside the FP32 tolerance.
//   - against the FP32 reference (in double), within what quantizing both operands of every
//     product costs: rounding errors uniform in half a step each side, independent, so a dot
//     product of K terms errs with a standard deviation of sqrt(K / 12) * max|a| * max|w| *
//     sqrt(1 / L_a^2 + 1 / L_w^2) (L_w = 127; with L_a = 127, sqrt(2) / 127); the bound is 6 of
//     them, grown by sqrt(T * L) over the steps and layers.
// And the plan: which unit runs, the fallbacks and their notes, training refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/int8_unit.hpp"
#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "rnnjit/error.hpp"
#include "rnnjit/rnn.hpp"
#include "tests/rnn_case.hpp"
#include "tests/scoped_env.hpp"

namespace rnnjit {
namespace {

using test::RnnCase;
using test::Tensors;

struct Int8RnnCase {
  std::string name;
  RnnConfig config;
  Shape shape;
  bool lengths = false;
  bool initial_states = true;
};

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float e : v) m = std::max(m, std::abs(e));
  return m;
}

// The scalar int8 reference, in float (the quantization is float arithmetic), quantizing as
// `unit` does.
Tensors int8_reference(const RnnCase& rc, Int8Unit unit) {
  const bool lstm = rc.lstm();
  Tensors t;
  t.y.resize(static_cast<std::size_t>(y_elements(rc.config, rc.shape)));
  t.hy.resize(rc.hx.size());
  t.cy.resize(rc.cx.size());
  reference::forward<float>(rc.config, rc.shape, rc.w.data(), rc.x.data(), rc.hx.data(), lstm ? rc.cx.data() : nullptr,
                            t.y.data(), t.hy.data(), lstm ? t.cy.data() : nullptr, nullptr,
                            {.seq_lengths = rc.lengths.empty() ? nullptr : rc.lengths.data(),
                             .quantize = Quantize::int8_dynamic,
                             .int8_unit = unit});
  return t;
}

class Int8Rnn : public testing::TestWithParam<Int8RnnCase> {};

TEST_P(Int8Rnn, MatchesTheInt8ReferenceAndFp32WithinTheQuantizationBound) {
  if (!int8_unit()) GTEST_SKIP() << "this CPU has no int8 unit (not even AVX2)";
  const Int8RnnCase& c = GetParam();
  RnnCase rc(c.config, c.shape, 3);
  if (c.lengths) rc.vary_lengths();
  if (!c.initial_states) rc.without_initial_states();
  const Rnn rnn(c.config, {.threads = 2, .quantize = Quantize::int8_dynamic});
  Execution ex = rnn.prepare(c.shape, Mode::inference);
  ASSERT_EQ(ex.plan().quantize, Quantize::int8_dynamic) << ex.plan_text();
  const KernelKind kind = *int8_unit() == Int8Unit::amx ? KernelKind::amx_int8_gemm : KernelKind::vnni_gemm;
  bool int8_kernels = false;
  for (const KernelDesc& d : ex.plan().kernels) int8_kernels = int8_kernels || d.kind_of() == kind;
  EXPECT_TRUE(int8_kernels) << ex.plan_text();
  const Tensors got = rc.run(ex);

  const RnnConfig& cfg = c.config;
  const double w_max = max_abs(rc.w);
  const double a_max = std::max({1.0f, max_abs(rc.x), max_abs(rc.hx), max_abs(got.y)});
  const double layers = static_cast<double>(cfg.num_layers);
  const Int8Unit unit = ex.plan().int8_unit;
  const double a_levels = activation_quantization(unit).levels, w_levels = kWeightLevels;
  const double step = w_max * a_max / a_levels;  // one activation quantization step of a product
  const double ref_tol = 4.0 * step * layers + rc.tolerance(false);
  const Tensors want8 = int8_reference(rc, unit);
  test::expect_close(got.y, want8.y, ref_tol, "y vs the int8 reference");
  test::expect_close(got.hy, want8.hy, ref_tol, "hy vs the int8 reference");
  if (rc.lstm()) test::expect_close(got.cy, want8.cy, ref_tol, "cy vs the int8 reference");

  const double k = static_cast<double>(std::max(cfg.input_size, cfg.directions() * cfg.state_size()) +
                                       std::max(cfg.state_size(), cfg.hidden_size));
  const double fp32_tol = 6.0 * std::sqrt(k / 12.0) * w_max * a_max *
                          std::sqrt(1.0 / (a_levels * a_levels) + 1.0 / (w_levels * w_levels)) *
                          std::sqrt(static_cast<double>(c.shape.seq_len) * layers);
  const Tensors want = rc.reference(false);
  test::expect_close(got.y, want.y, fp32_tol, "y vs FP32");
  test::expect_close(got.hy, want.hy, fp32_tol, "hy vs FP32");
  if (rc.lstm()) test::expect_close(got.cy, want.cy, fp32_tol, "cy vs FP32");
  // int8 really ran: its results are not FP32's.
  EXPECT_GT(test::worst_difference(got.y, want.y), 1e-5) << "int8 results equal FP32's";

  // The same weights packed once serve every call (and equal packing in the call).
  std::vector<std::byte> packed(ex.packed_weights_size());
  ex.pack_weights(rc.w, packed);
  Tensors again;
  again.y.resize(got.y.size());
  ex.forward(rc.w, {.x = rc.x, .hx = c.initial_states ? std::span<const float>(rc.hx) : std::span<const float>(),
                    .cx = c.initial_states ? std::span<const float>(rc.cx) : std::span<const float>(),
                    .y = again.y, .packed_weights = packed, .seq_lengths = rc.lengths});
  EXPECT_EQ(again.y, got.y) << "packed weights reused";

  // The reference backend runs the scalar int8 reference.
  const Rnn ref(c.config, {.backend = Backend::reference, .quantize = Quantize::int8_dynamic});
  Execution rex = ref.prepare(c.shape, Mode::inference);
  EXPECT_EQ(rc.run(rex).y, want8.y);
}

std::vector<Int8RnnCase> cases() {
  using C = CellKind;
  std::vector<Int8RnnCase> out;
  out.push_back({"lstm_h64", {.cell = C::lstm, .input_size = 40, .hidden_size = 64}, {7, 3}});
  out.push_back({"lstm_bidir_2layers_lengths",
                 {.cell = C::lstm, .input_size = 33, .hidden_size = 100, .num_layers = 2, .bidirectional = true},
                 {6, 5}, true});
  out.push_back({"lstmp_peephole_clip",
                 {.cell = C::lstm, .input_size = 30, .hidden_size = 96, .proj_size = 48, .clip = 0.5f,
                  .gate_clip = 3.0f, .peephole = true},
                 {5, 4}});
  out.push_back({"lstmp_bidir_lengths",
                 {.cell = C::lstm, .input_size = 20, .hidden_size = 72, .num_layers = 2, .bidirectional = true,
                  .proj_size = 40},
                 {5, 3}, true});
  out.push_back({"gru_bidir", {.cell = C::gru, .input_size = 17, .hidden_size = 80, .bidirectional = true}, {6, 4}});
  out.push_back({"gru_reset_before_2layers",
                 {.cell = C::gru_reset_before, .input_size = 25, .hidden_size = 70, .num_layers = 2}, {5, 3}, true});
  out.push_back({"rnn_tanh_reverse", {.cell = C::rnn_tanh, .input_size = 31, .hidden_size = 129, .reverse = true},
                 {6, 2}});
  out.push_back({"rnn_relu_no_states", {.cell = C::rnn_relu, .input_size = 16, .hidden_size = 64}, {5, 3}, false,
                 false});
  out.push_back({"lstm_batch_first_sum",
                 {.cell = C::lstm, .input_size = 24, .hidden_size = 64, .bidirectional = true, .batch_first = true,
                  .sum_directions = true},
                 {4, 5}, true});
  out.push_back({"lstm_h640_decoder_step", {.cell = C::lstm, .input_size = 640, .hidden_size = 640, .num_layers = 2},
                 {1, 1}});
  out.push_back({"lstm_h1024", {.cell = C::lstm, .input_size = 1024, .hidden_size = 1024}, {3, 2}});
  out.push_back({"gru_h512_n20", {.cell = C::gru, .input_size = 256, .hidden_size = 512}, {3, 20}, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cells, Int8Rnn, testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

const RnnConfig kSmall{.cell = CellKind::lstm, .input_size = 20, .hidden_size = 32};

TEST(Int8Plan, TrainingIsRefused) {
  const Rnn rnn(kSmall, {.quantize = Quantize::int8_dynamic});
  try {
    rnn.prepare({4, 3}, Mode::training);
    FAIL() << "a training plan with int8 was prepared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inference only"), std::string::npos) << e.what();
  }
  const Rnn ref(kSmall, {.backend = Backend::reference, .quantize = Quantize::int8_dynamic});
  EXPECT_THROW(ref.prepare({4, 3}, Mode::training), Error);
}

TEST(Int8Plan, OtherIsasAndCpusWithoutAUnitFallBackAndSaySo) {
  const Plan avx2 = make_plan(kSmall, {4, 3}, Mode::inference, Isa::avx2, 1, {}, {}, FpMath::strict, Bf16Unit::amx,
                              Quantize::int8_dynamic, Int8Unit::avx512_vnni);
  EXPECT_EQ(avx2.quantize, Quantize::none);
  EXPECT_NE(to_text(avx2).find("int8 unit avx512_vnni needs AVX-512 kernels, the plan's isa is avx2; the GEMMs run "
                               "FP32"),
            std::string::npos)
      << to_text(avx2);
  const Plan scalar = make_plan(kSmall, {4, 3}, Mode::inference, Isa::reference, 1, {}, {}, FpMath::strict,
                                Bf16Unit::amx, Quantize::int8_dynamic, Int8Unit::avx2);
  EXPECT_EQ(scalar.quantize, Quantize::none);
  EXPECT_NE(to_text(scalar).find("quantize int8_dynamic: isa reference has no int8 GEMM, the GEMMs run FP32"),
            std::string::npos)
      << to_text(scalar);
  const Plan no_unit = make_plan(kSmall, {4, 3}, Mode::inference, Isa::avx512, 1, {}, {}, FpMath::bf16,
                                 Bf16Unit::avx512_bf16, Quantize::int8_dynamic, std::nullopt);
  EXPECT_EQ(no_unit.quantize, Quantize::none);
  EXPECT_EQ(no_unit.fpmath, FpMath::bf16);
  EXPECT_NE(to_text(no_unit).find("no int8 unit (AMX-INT8, AVX512_VNNI, AVX-VNNI or AVX2), the GEMMs run bf16"),
            std::string::npos)
      << to_text(no_unit);
  const Plan int8 = make_plan(kSmall, {4, 3}, Mode::inference, Isa::avx512, 1, {}, {}, FpMath::strict,
                              Bf16Unit::amx, Quantize::int8_dynamic, Int8Unit::avx512_vnni);
  EXPECT_EQ(int8.quantize, Quantize::int8_dynamic);
  EXPECT_NE(to_text(int8).find("quantize=int8_dynamic int8_unit=avx512_vnni"), std::string::npos) << to_text(int8);
  EXPECT_NE(to_json(int8).find("\"quantize\":\"int8_dynamic\""), std::string::npos);
}

// The AVX2 units' ymm kernels run on plans of either isa; the avx2 unit's notes say why its
// activations have 7 bits.
TEST(Int8Plan, TheAvx2UnitsRunOnBothIsasAndTheAvx2UnitSaysWhy) {
  for (Isa isa : {Isa::avx2, Isa::avx512})
    for (Int8Unit unit : {Int8Unit::avx_vnni, Int8Unit::avx2}) {
      const Plan p = make_plan(kSmall, {4, 3}, Mode::inference, isa, 1, {}, {}, FpMath::strict, Bf16Unit::amx,
                               Quantize::int8_dynamic, unit);
      EXPECT_EQ(p.quantize, Quantize::int8_dynamic) << to_text(p);
      EXPECT_EQ(p.int8_unit, unit);
      int int8_kernels = 0;
      for (const KernelDesc& d : p.kernels)
        if (d.kind_of() == KernelKind::vnni_gemm) {
          EXPECT_EQ(d.isa_kind(), Isa::avx2) << kernel_name(d);
          EXPECT_EQ(d.int8_unit, static_cast<std::uint8_t>(unit)) << kernel_name(d);
          ++int8_kernels;
        }
      EXPECT_GT(int8_kernels, 0) << to_text(p);
      const std::string text = to_text(p);
      EXPECT_NE(text.find(fmt::format("quantize=int8_dynamic int8_unit={}", to_string(unit))), std::string::npos)
          << text;
      const ActivationQuantization aq = activation_quantization(unit);
      EXPECT_NE(text.find(fmt::format("({} levels each side, zero point {})", aq.levels, aq.zero_point)),
                std::string::npos)
          << text;
      EXPECT_EQ(text.find("activations are quantized to 7 bits") != std::string::npos, unit == Int8Unit::avx2) << text;
    }
}

// vpdpbusd sums without saturating: past K = 65536 an int32 sum of 255 * 127 products could
// overflow, so such a plan keeps FP32 GEMMs and says why.
TEST(Int8Plan, SumsThatCouldOverflowFallBack) {
  const RnnConfig wide{.cell = CellKind::rnn_tanh, .input_size = kMaxInt8K + 1, .hidden_size = 16};
  const Plan p = make_plan(wide, {2, 1}, Mode::inference, Isa::avx512, 1, {}, {}, FpMath::strict, Bf16Unit::amx,
                           Quantize::int8_dynamic, Int8Unit::avx512_vnni);
  EXPECT_EQ(p.quantize, Quantize::none);
  EXPECT_NE(to_text(p).find("a GEMM sums over 65537 k"), std::string::npos) << to_text(p);
  const RnnConfig widest_ok{.cell = CellKind::rnn_tanh, .input_size = kMaxInt8K, .hidden_size = 16};
  EXPECT_EQ(make_plan(widest_ok, {2, 1}, Mode::inference, Isa::avx512, 1, {}, {}, FpMath::strict, Bf16Unit::amx,
                      Quantize::int8_dynamic, Int8Unit::avx512_vnni)
                .quantize,
            Quantize::int8_dynamic);
}

// Through the API on the AVX2 path: int8 on the best AVX2 unit this CPU has (AVX-512 units are
// passed over for an AVX2 plan).
TEST(Int8Plan, Avx2PlansRunTheAvx2Units) {
  if (cpu_isa() == Isa::reference) GTEST_SKIP() << "no AVX2";
  const test::ScopedEnv unforced("RNNJIT_INT8_UNIT", "");  // (empty: unset)
  const Rnn rnn(kSmall, {.isa = Isa::avx2, .quantize = Quantize::int8_dynamic});
  Execution ex = rnn.prepare({4, 3}, Mode::inference);
  EXPECT_EQ(ex.plan().quantize, Quantize::int8_dynamic) << ex.plan_text();
  EXPECT_EQ(ex.plan().int8_unit, avx_vnni_usable() ? Int8Unit::avx_vnni : Int8Unit::avx2);
  EXPECT_EQ(int8_unit(Isa::avx2), ex.plan().int8_unit);
}

TEST(Int8Plan, ParsesItsNamesAndTheUnitFollowsRnnjitInt8Unit) {
  EXPECT_EQ(parse_quantize("int8"), Quantize::int8_dynamic);
  EXPECT_EQ(parse_quantize("int8_dynamic"), Quantize::int8_dynamic);
  EXPECT_EQ(parse_quantize("none"), Quantize::none);
  EXPECT_THROW(parse_quantize("int4"), Error);
  EXPECT_EQ(parse_int8_unit("avx512_vnni"), Int8Unit::avx512_vnni);
  EXPECT_EQ(parse_int8_unit("amx"), Int8Unit::amx);
  EXPECT_EQ(parse_int8_unit("avx_vnni"), Int8Unit::avx_vnni);
  EXPECT_EQ(parse_int8_unit("avx2"), Int8Unit::avx2);
  EXPECT_THROW(parse_int8_unit("amx_int8"), Error);
  // The first this CPU runs of amx, avx512_vnni, avx_vnni, avx2.
  const test::ScopedEnv unforced("RNNJIT_INT8_UNIT", "");  // (empty: unset)
  std::optional<Int8Unit> best;
  for (Int8Unit unit : {Int8Unit::amx, Int8Unit::avx512_vnni, Int8Unit::avx_vnni, Int8Unit::avx2})
    if (!best && int8_unit_usable(unit)) best = unit;
  EXPECT_EQ(int8_unit(), best);
  EXPECT_EQ(int8_unit_usable(Int8Unit::avx2), cpu_isa() != Isa::reference);
  for (Int8Unit unit : {Int8Unit::avx512_vnni, Int8Unit::amx, Int8Unit::avx_vnni, Int8Unit::avx2}) {
    const test::ScopedEnv forced("RNNJIT_INT8_UNIT", std::string(to_string(unit)));
    if (int8_unit_usable(unit)) {
      EXPECT_EQ(int8_unit(), unit);
    } else {
      // A CPU without the forced unit: a clear error naming it (e.g. avx512_vnni on Zen 3).
      try {
        int8_unit();
        ADD_FAILURE() << "RNNJIT_INT8_UNIT=" << to_string(unit) << " was accepted on a CPU without it";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("RNNJIT_INT8_UNIT={} but this CPU (or OS) does not run it",
                                                         to_string(unit))),
                  std::string::npos)
            << e.what();
      }
      EXPECT_THROW(Rnn(kSmall, {.quantize = Quantize::int8_dynamic}).prepare({4, 3}, Mode::inference), Error);
    }
  }
  const test::ScopedEnv bogus("RNNJIT_INT8_UNIT", "vnni512");
  try {
    int8_unit();
    FAIL() << "an unknown unit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vnni512"), std::string::npos) << e.what();
  }
}

TEST(Int8Plan, PackedWeightsOfAnotherFormatAreRefused) {
  if (!int8_unit()) GTEST_SKIP() << "this CPU has no int8 unit (not even AVX2)";
  RnnCase rc(kSmall, {4, 3});
  Execution fp32 = Rnn(kSmall, {.threads = 1}).prepare({4, 3}, Mode::inference);
  Execution int8 = Rnn(kSmall, {.threads = 1, .quantize = Quantize::int8_dynamic}).prepare({4, 3}, Mode::inference);
  std::vector<std::byte> packed(fp32.packed_weights_size());
  fp32.pack_weights(rc.w, packed);
  std::vector<float> y(static_cast<std::size_t>(y_elements(kSmall, {4, 3})));
  packed.resize(int8.packed_weights_size());
  EXPECT_THROW(int8.forward(rc.w, {.x = rc.x, .y = y, .packed_weights = packed}), Error);
}

TEST(Int8Plan, CudaIsRefused) {
  const Rnn rnn(kSmall, {.device = Device::cuda, .quantize = Quantize::int8_dynamic});
  try {
    rnn.prepare({4, 3}, Mode::inference);
    FAIL() << "an int8 CUDA execution was prepared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rnnjit
