// The GRU with the reset before the recurrent product (CellKind::gru_reset_before, ONNX's
// default linear_before_reset = 0): n = tanh(W_in x + b_in + W_hn (r * h) + b_hn).
//  - the reference: one step by hand, and finite-difference gradient checks in double of
//    backward_data + backward_weights (layers, both directions, reverse, lengths, batch-first),
//  - the two AVX-512 gate kernels of a step against their scalar twins (tails, partial launches),
//  - the JIT backend's forward (AVX-512 on 1 and 2 threads, and the reference ISA) against the
//    reference, with vector tails; its training is refused with a one-line Error.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_args.hpp"
#include "codegen/kernel_desc.hpp"
#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "kernels/reference.hpp"
#include "runtime/kernel.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

using i64 = std::int64_t;
std::size_t sz(i64 n) { return static_cast<std::size_t>(n); }
double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(GruResetBeforeConfig, NamesGatesAndLayoutAreTheGrus) {
  EXPECT_EQ(to_string(CellKind::gru_reset_before), "gru_reset_before");
  EXPECT_EQ(parse_cell("gru_reset_before"), CellKind::gru_reset_before);
  EXPECT_EQ(gate_count(CellKind::gru_reset_before), 3);
  EXPECT_TRUE(is_gru(CellKind::gru_reset_before));
  RnnConfig gru{.cell = CellKind::gru, .input_size = 5, .hidden_size = 3, .num_layers = 2, .bidirectional = true};
  RnnConfig rb = gru;
  rb.cell = CellKind::gru_reset_before;
  const WeightLayout a(gru), b(rb);
  ASSERT_EQ(a.blocks().size(), b.blocks().size());
  for (std::size_t i = 0; i < a.blocks().size(); ++i) {
    EXPECT_EQ(a.blocks()[i].name, b.blocks()[i].name);
    EXPECT_EQ(a.blocks()[i].shape, b.blocks()[i].shape);
  }
  EXPECT_EQ(describe(rb), "gru_reset_before I=5 H=3 L=2 D=2");
}

// One step, H = I = 1, by hand: the reset gate multiplies h before W_hn, not after.
TEST(GruResetBeforeReference, OneStepByHand) {
  const RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 1, .hidden_size = 1};
  // weight_ih [3,1] r,z,n; weight_hh [3,1]; bias_ih [3]; bias_hh [3].
  const std::vector<double> w = {0.5, -0.3, 0.8, 0.2, 0.7, -0.6, 0.1, 0.05, -0.2, 0.3, -0.1, 0.25};
  const double x = 0.9, h0 = -0.4;
  double y = 0, hy = 0;
  reference::forward<double>(c, {1, 1}, w.data(), &x, &h0, nullptr, &y, &hy, nullptr, nullptr);
  const double r = sig(0.5 * x + 0.1 + 0.2 * h0 + 0.3), z = sig(-0.3 * x + 0.05 + 0.7 * h0 - 0.1);
  const double n = std::tanh(0.8 * x - 0.2 + -0.6 * (r * h0) + 0.25);
  EXPECT_NEAR(y, (1 - z) * n + z * h0, 1e-15);
  EXPECT_DOUBLE_EQ(hy, y);
  // The linear-before-reset GRU differs: r * (W_hn h + b_hn).
  RnnConfig lbr = c;
  lbr.cell = CellKind::gru;
  double y_lbr = 0;
  reference::forward<double>(lbr, {1, 1}, w.data(), &x, &h0, nullptr, &y_lbr, nullptr, nullptr, nullptr);
  EXPECT_GT(std::abs(y_lbr - y), 1e-3);
}

struct FdCase {
  std::string name;
  bool bidirectional = false, reverse = false, lengths = false, batch_first = false;
};
void PrintTo(const FdCase& c, std::ostream* os) { *os << c.name; }

class GruResetBeforeGradients : public ::testing::TestWithParam<FdCase> {};

// loss = sum(ry * y) + sum(rhy * hy): backward with dy = ry, dhy = rhy against central
// differences of the loss for every weight, input and initial state.
TEST_P(GruResetBeforeGradients, MatchFiniteDifferences) {
  const FdCase& p = GetParam();
  RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 3, .hidden_size = 4, .num_layers = 2,
              .bidirectional = p.bidirectional};
  c.reverse = p.reverse;
  c.batch_first = p.batch_first;
  const Shape s{4, 3};
  const std::vector<std::int32_t> lens = {2, 4, 1};
  const reference::CallOptions opt{p.lengths ? lens.data() : nullptr, 0};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  auto random = [&](i64 n, double scale) {
    std::vector<double> v(sz(n));
    for (double& e : v) e = scale * u(rng);
    return v;
  };
  std::vector<double> w = random(WeightLayout(c).total_elements(), 0.8), x = random(x_elements(c, s), 1),
                      h0 = random(state_elements(c, s), 1);
  const std::vector<double> ry = random(y_elements(c, s), 1), rhy = random(state_elements(c, s), 1);
  auto loss = [&] {
    std::vector<double> y(ry.size()), hy(rhy.size());
    reference::forward<double>(c, s, w.data(), x.data(), h0.data(), nullptr, y.data(), hy.data(), nullptr, nullptr, opt);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += ry[i] * y[i];
    for (std::size_t i = 0; i < hy.size(); ++i) l += rhy[i] * hy[i];
    return l;
  };
  reference::Reserve<double> reserve;
  std::vector<double> y(ry.size()), hy(rhy.size());
  reference::forward<double>(c, s, w.data(), x.data(), h0.data(), nullptr, y.data(), hy.data(), nullptr, &reserve, opt);
  std::vector<double> dx(x.size()), dh0(h0.size()), dw(w.size());
  reference::backward_data<double>(c, s, w.data(), reserve, ry.data(), rhy.data(), nullptr, dx.data(), dh0.data(),
                                   nullptr);
  reference::backward_weights<double>(c, s, reserve, dw.data());
  auto check = [&](std::vector<double>& v, const std::vector<double>& grad, const char* what) {
    const double eps = 1e-6;
    int bad = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i];
      v[i] = keep + eps;
      const double up = loss();
      v[i] = keep - eps;
      const double down = loss();
      v[i] = keep;
      const double fd = (up - down) / (2 * eps);
      if (std::abs(fd - grad[i]) > 1e-7 * (1 + std::abs(fd)) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: backward " << grad[i] << ", finite difference " << fd;
    }
  };
  check(w, dw, "dw");
  check(x, dx, "dx");
  check(h0, dh0, "dh0");
}

INSTANTIATE_TEST_SUITE_P(Cases, GruResetBeforeGradients,
                         ::testing::Values(FdCase{"plain"}, FdCase{"bidirectional", true},
                                           FdCase{"reverse", false, true}, FdCase{"lengths_bidirectional", true, false, true},
                                           FdCase{"batch_first_lengths", false, false, true, true}),
                         [](const auto& info) { return info.param.name; });

// --- the two gate kernels of a step against their scalar twins --------------------------------

KernelDesc kernel_desc(Isa isa, int part, std::uint32_t H, std::uint32_t cols, std::uint32_t rows, std::uint32_t ld_h,
                       std::uint32_t unroll) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(isa);
  d.cell = static_cast<std::uint8_t>(CellKind::gru_reset_before);
  d.pass = static_cast<std::uint8_t>(Pass::forward);
  d.part = static_cast<std::uint8_t>(part);
  d.hidden = H;
  d.cols = cols;
  d.rows = rows;
  d.ld_h = ld_h;
  d.unroll = isa == Isa::avx512 ? unroll : 1;
  return d;
}

TEST(GruResetBeforeKernels, EmittersMatchScalarTwins) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3, 3);
  for (std::uint32_t H : {1u, 7u, 16u, 17u, 33u, 64u, 115u})
    for (std::uint32_t rows : {1u, 3u})
      for (std::uint32_t ld_h : {H, 2 * H})
        for (std::uint32_t cols : {H, (H + 1) / 2})
          for (std::uint32_t unroll = 1; unroll <= 4; ++unroll)
            for (int part : {0, 1}) {
              auto fill = [&](std::size_t n) {
                std::vector<float> v(n);
                for (float& e : v) e = u(rng);
                return v;
              };
              const std::size_t GH = 3 * H;
              const auto gx = fill(rows * GH), gh = fill(rows * GH), b_ih = fill(GH), b_hh = fill(GH),
                         h_prev = fill(rows * ld_h), z_in = fill(rows * H);
              const auto init_out = fill(rows * ld_h), init_z = fill(rows * H);
              auto run = [&](Isa isa, std::vector<float>& out, std::vector<float>& z_out) {
                const CompiledKernel k(kernel_desc(isa, part, H, cols, rows, ld_h, unroll));
                GateForwardArgs a{};
                a.gx = gx.data(), a.gh = gh.data(), a.bias_ih = b_ih.data(), a.bias_hh = b_hh.data();
                a.h_prev = h_prev.data(), a.h_out = out.data();
                if (part == 0) a.c_out = z_out.data();
                else a.c_prev = z_in.data();
                k(&a);
              };
              std::vector<float> out_jit = init_out, z_jit = init_z, out_ref = init_out, z_ref = init_z;
              run(Isa::avx512, out_jit, z_jit);
              run(Isa::reference, out_ref, z_ref);
              const std::string what = fmt::format("part {} H {} rows {} ld_h {} cols {} unroll {}", part, H, rows,
                                                   ld_h, cols, unroll);
              for (std::size_t i = 0; i < out_ref.size(); ++i)
                ASSERT_NEAR(out_jit[i], out_ref[i], 4e-6f * (1 + std::abs(out_ref[i]))) << what << " h[" << i << "]";
              for (std::size_t i = 0; i < z_ref.size(); ++i)
                ASSERT_NEAR(z_jit[i], z_ref[i], 4e-6f) << what << " z[" << i << "]";
            }
}

// --- the JIT backend's forward against the reference -------------------------------------------

struct JitCase {
  std::string name;
  Isa isa;
  int threads;
  bool bidirectional = false, reverse = false, lengths = false, batch_first = false;
};
void PrintTo(const JitCase& c, std::ostream* os) { *os << c.name; }

class GruResetBeforeJit : public ::testing::TestWithParam<JitCase> {};

TEST_P(GruResetBeforeJit, ForwardMatchesReference) {
  const JitCase& p = GetParam();
  if (p.isa == Isa::avx512 && detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  const bool split = p.threads > 1;  // two threads only split plans with enough work per thread
  RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = split ? 160 : 23, .hidden_size = split ? 115 : 19,
              .num_layers = 2, .bidirectional = p.bidirectional};
  c.reverse = p.reverse;
  c.batch_first = p.batch_first;
  test::RnnCase rc(c, split ? Shape{24, 10} : Shape{7, 5}, 5);
  if (p.lengths) rc.vary_lengths();
  Rnn rnn(c, {.backend = Backend::jit, .isa = p.isa, .threads = p.threads});
  Execution ex = rnn.prepare(rc.shape, Mode::inference);
  ASSERT_EQ(ex.plan().threads, p.threads) << "the plan does not split the steps as the case intends";
  const test::Tensors got = rc.run(ex), want = rc.reference(false);
  test::expect_close(got.y, want.y, rc.tolerance(false), "y");
  test::expect_close(got.hy, want.hy, rc.tolerance(false), "hy");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GruResetBeforeJit,
    ::testing::Values(JitCase{"avx512_t1", Isa::avx512, 1}, JitCase{"avx512_t1_bidir", Isa::avx512, 1, true},
                      JitCase{"avx512_t1_reverse_lengths", Isa::avx512, 1, false, true, true},
                      JitCase{"avx512_t1_bidir_batch_first", Isa::avx512, 1, true, false, false, true},
                      JitCase{"avx512_t2", Isa::avx512, 2}, JitCase{"avx512_t2_lengths", Isa::avx512, 2, false, false, true},
                      JitCase{"avx512_t2_reverse_batch_first", Isa::avx512, 2, false, true, false, true},
                      JitCase{"avx512_t2_bidir", Isa::avx512, 2, true},
                      JitCase{"reference_isa", Isa::reference, 1},
                      JitCase{"reference_isa_bidir_lengths_batch_first", Isa::reference, 1, true, false, true, true}),
    [](const auto& info) { return info.param.name; });

TEST(GruResetBeforeJitPlan, SplitsTheRecurrentGemmAroundTheResetGate) {
  const RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 8, .hidden_size = 20};
  const Plan plan = make_plan(c, {3, 2}, Mode::inference, Isa::avx512, 1);
  const std::string text = to_text(plan);
  EXPECT_NE(text.find("recurrent projection r,z"), std::string::npos) << text;
  EXPECT_NE(text.find("recurrent projection n (on r * h_prev)"), std::string::npos) << text;
  EXPECT_NE(text.find("gru_reset_before_fwd_rz_avx512"), std::string::npos) << text;
  EXPECT_NE(text.find("gru_reset_before_fwd_n_avx512"), std::string::npos) << text;
}

TEST(GruResetBeforeJitPlan, TrainingIsRefusedOnTheJitBackendOnly) {
  const RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 6, .hidden_size = 5, .num_layers = 2};
  for (Isa isa : {Isa::reference, Isa::avx512}) {
    try {
      (void)make_plan(c, {3, 2}, Mode::training, isa, 1);
      ADD_FAILURE() << "training was planned";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "cell gru_reset_before: training is not supported on the JIT backend (inference only; "
                             "the reference backend trains it)");
    }
  }
  EXPECT_THROW((void)make_plan(c, {3, 2}, Mode::inference, Isa::cuda, 1), Error);
  // The reference backend trains it, matching the double-precision oracle.
  test::RnnCase rc(c, {4, 3}, 2);
  Rnn rnn(c, {.backend = Backend::reference});
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  const test::Tensors got = rc.run(ex), want = rc.reference(true);
  test::expect_close(got.y, want.y, rc.tolerance(false), "y");
  test::expect_close(got.dx, want.dx, rc.tolerance(true), "dx");
  test::expect_close(got.dhx, want.dhx, rc.tolerance(true), "dhx");
  test::expect_close(got.dw, want.dw, rc.tolerance(true), "dw");
}

}  // namespace
}  // namespace rnnjit
