// The GRU with the reset before the recurrent product (CellKind::gru_reset_before, ONNX's
// default linear_before_reset = 0): n = tanh(W_in x + b_in + W_hn (r * h) + b_hn).
//  - the reference: one step by hand, and finite-difference gradient checks in double of
//    backward_data + backward_weights (layers, both directions, reverse, lengths, batch-first),
//  - the AVX-512 gate kernels of a step (two forward, two backward) against their scalar twins
//    (tails, partial launches, the gate clip),
//  - the JIT backend (AVX-512 on 1 and 2 threads, and the reference ISA), inference and training,
//    against the reference, with vector tails,
//  - its CUDA plan (the CUDA side: test_cuda_source, test_cuda_plan, test_cuda_runner,
//    test_cuda_executor).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_args.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/kernel_desc.hpp"
#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "kernels/reference.hpp"
#include "runtime/kernel.hpp"
#include "tests/onnx_functions.hpp"
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

// --- the gate kernels of a step against their scalar twins ------------------------------------

KernelDesc kernel_desc(Isa isa, Pass pass, bool training, int part, std::uint32_t H, std::uint32_t cols,
                       std::uint32_t rows, std::uint32_t ld_h, std::uint32_t unroll, bool gate_clip,
                       std::uint32_t dy_row_stride = 0) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(isa);
  d.cell = static_cast<std::uint8_t>(CellKind::gru_reset_before);
  d.pass = static_cast<std::uint8_t>(pass);
  d.training = training;
  d.part = static_cast<std::uint8_t>(part);
  d.hidden = H;
  d.cols = cols;
  d.rows = rows;
  d.ld_h = ld_h;
  d.unroll = isa == Isa::reference ? 1 : unroll;
  d.gate_clip_bits = gate_clip ? std::bit_cast<std::uint32_t>(0.8f) : 0u;
  d.dy_row_stride = dy_row_stride;
  return d;
}

// Forward parts (inference and training) and backward parts, with a gate clip and without: every
// array a kernel touches starts from the same values on both sides and must end equal (backward
// gates are random in (0, 1), n in (-1, 1): with the clip some lie outside the bounds' activations).
// Backward with h's rows 2H apart also reads dy with rows H apart (summed directions).
class GruResetBeforeKernels : public ::testing::TestWithParam<Isa> {};

TEST_P(GruResetBeforeKernels, EmittersMatchScalarTwins) {
  const Isa isa = GetParam();
  if (static_cast<int>(cpu_isa()) < static_cast<int>(isa)) GTEST_SKIP() << "the CPU cannot run " << to_string(isa);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3, 3), unit(0, 1);
  struct Variant {
    Pass pass;
    bool training;
  };
  for (const Variant v : {Variant{Pass::forward, false}, Variant{Pass::forward, true}, Variant{Pass::backward, false}})
    for (bool gate_clip : {false, true})
      for (std::uint32_t H : {1u, 7u, 16u, 17u, 33u, 64u, 115u})
        for (std::uint32_t rows : {1u, 3u})
          for (std::uint32_t ld_h : {H, 2 * H})
            for (std::uint32_t cols : {H, (H + 1) / 2})
              for (std::uint32_t unroll = 1; unroll <= 4; ++unroll)
                for (int part : {0, 1})
                  for (bool summed_dy : {false, true}) {
                    if (static_cast<int>(unroll) > max_gate_unroll(CellKind::gru_reset_before, v.pass, isa)) continue;
                    if (summed_dy && (v.pass != Pass::backward || ld_h != 2 * H)) continue;
                    const std::uint32_t ld_dy = summed_dy ? H : ld_h;
                    auto fill = [&](std::size_t n, auto& dist) {
                      std::vector<float> x(n);
                      for (float& e : x) e = dist(rng);
                      return x;
                    };
                    const std::size_t GH = 3 * H;
                    // Inputs (read only) and arrays the kernel writes (compared afterwards).
                    const auto gx = fill(rows * GH, u), gh = fill(rows * GH, u), b_ih = fill(GH, u), b_hh = fill(GH, u),
                               h_prev = fill(rows * ld_h, u), z_in = fill(rows * H, unit), dy = fill(rows * ld_dy, u),
                               d_reset_h = fill(rows * H, u);
                    std::vector<float> gates0 = fill(rows * GH, unit);
                    for (std::size_t i = 0; i < rows * GH; ++i)
                      if (i % GH >= 2 * H) gates0[i] = 2 * gates0[i] - 1;  // n in (-1, 1)
                    const std::vector<std::vector<float>> init = {fill(rows * ld_h, u), fill(rows * H, u), gates0,
                                                                  fill(rows * H, u)};
                    auto run = [&](Isa kernel_isa, std::vector<std::vector<float>>& out) {
                      const CompiledKernel k(kernel_desc(kernel_isa, v.pass, v.training, part, H, cols, rows, ld_h, unroll,
                                                         gate_clip, summed_dy ? ld_dy : 0));
                      if (v.pass == Pass::forward) {
                        GateForwardArgs a{};
                        a.gx = gx.data(), a.gh = gh.data(), a.bias_ih = b_ih.data(), a.bias_hh = b_hh.data();
                        a.h_prev = h_prev.data(), a.h_out = out[0].data(), a.gates = out[2].data();
                        if (part == 0) a.c_out = out[1].data();
                        else a.c_prev = z_in.data();
                        k(&a);
                      } else {
                        GateBackwardArgs a{};
                        a.dy = dy.data(), a.h_prev = h_prev.data(), a.gates = out[2].data(), a.dh_carry = out[3].data();
                        a.d_reset_h = d_reset_h.data();
                        k(&a);
                      }
                    };
                    auto jit = init, ref = init;
                    run(isa, jit);
                    run(Isa::reference, ref);
                    const std::string what =
                        fmt::format("{} train {} part {} clip {} H {} rows {} ld_h {} ld_dy {} cols {} unroll {}",
                                    v.pass == Pass::forward ? "fwd" : "bwd", v.training, part, gate_clip, H, rows, ld_h,
                                    ld_dy, cols, unroll);
                    const char* names[] = {"h_out", "z", "gates", "dh_carry"};
                    for (std::size_t a = 0; a < init.size(); ++a)
                      for (std::size_t i = 0; i < init[a].size(); ++i)
                        ASSERT_NEAR(jit[a][i], ref[a][i], 8e-6f * (1 + std::abs(ref[a][i])))
                            << what << " " << names[a] << "[" << i << "]";
                  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GruResetBeforeKernels, ::testing::Values(Isa::avx512, Isa::avx2),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ONNX's activations (forward inference): role f on r, z in part 0, role g on n in part 1, each
// function of ONNX's list in turn (the other role the cell's own, or another of the list), with
// and without the gate clip, on pre-activations that include +-inf, NaN and large magnitudes.
// NaN must meet NaN, an infinity the same infinity; the rest within 8e-6 relative (1 + |twin|).
TEST_P(GruResetBeforeKernels, OnnxActivationsMatchScalarTwins) {
  const Isa isa = GetParam();
  if (static_cast<int>(cpu_isa()) < static_cast<int>(isa)) GTEST_SKIP() << "the CPU cannot run " << to_string(isa);
  const std::vector<ActivationFunction> functions = test::onnx_functions();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float extremes[] = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), 90.0f, -90.0f, 30.0f, -30.0f, 1000.0f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3, 3), unit(0, 1);
  const std::size_t count = std::size(functions);
  for (std::size_t k = 0; k < count; ++k)
    for (int role = 0; role < 3; ++role)  // 2: both roles from the list
      for (bool gate_clip : {false, true})
        for (std::uint32_t H : {7u, 19u})
          for (std::uint32_t unroll : {1u, 3u})
            for (int part : {0, 1}) {
              if (static_cast<int>(unroll) > max_gate_unroll(CellKind::gru_reset_before, Pass::forward, isa)) continue;
              const std::uint32_t rows = 3, ld_h = 2 * H, cols = H - 2;
              const ActivationFunction f = role == 1 ? ActivationFunction{Activation::sigmoid} : functions[k];
              const ActivationFunction g = role == 0 ? ActivationFunction{Activation::tanh}
                                                     : functions[(k + (role == 2 ? 5 : 0)) % count];
              auto fill = [&](std::size_t n, auto& dist) {
                std::vector<float> x(n);
                for (float& e : x) e = dist(rng);
                return x;
              };
              const std::size_t GH = 3 * H;
              auto gx = fill(rows * GH, u);
              for (std::size_t i = 0; i < gx.size(); ++i)
                if (i % 5 == 1) gx[i] = extremes[(i / 5) % std::size(extremes)];
              const auto gh = fill(rows * GH, u), b_ih = fill(GH, u), b_hh = fill(GH, u), h_prev = fill(rows * ld_h, u),
                         z_in = fill(rows * H, unit);
              const std::vector<std::vector<float>> init = {fill(rows * ld_h, u), fill(rows * H, u)};
              auto run = [&](Isa kernel_isa, std::vector<std::vector<float>>& out) {
                KernelDesc d = kernel_desc(kernel_isa, Pass::forward, false, part, H, cols, rows, ld_h, unroll, gate_clip);
                d.activation[0] = static_cast<std::uint8_t>(f.kind);
                d.activation_alpha_bits[0] = std::bit_cast<std::uint32_t>(f.alpha);
                d.activation_beta_bits[0] = std::bit_cast<std::uint32_t>(f.beta);
                d.activation[1] = static_cast<std::uint8_t>(g.kind);
                d.activation_alpha_bits[1] = std::bit_cast<std::uint32_t>(g.alpha);
                d.activation_beta_bits[1] = std::bit_cast<std::uint32_t>(g.beta);
                ASSERT_TRUE(d.custom_activations() || (f.kind == Activation::sigmoid && g.kind == Activation::tanh));
                const CompiledKernel kernel(d);
                if (kernel_isa != Isa::reference) {
                  ASSERT_FALSE(kernel.code().empty());
                }
                GateForwardArgs a{};
                a.gx = gx.data(), a.gh = gh.data(), a.bias_ih = b_ih.data(), a.bias_hh = b_hh.data();
                a.h_prev = h_prev.data(), a.h_out = out[0].data();
                if (part == 0) a.c_out = out[1].data();
                else a.c_prev = z_in.data();
                kernel(&a);
              };
              auto jit = init, ref = init;
              run(isa, jit);
              run(Isa::reference, ref);
              const std::string what = fmt::format("f {} g {} part {} clip {} H {} unroll {}", describe(f), describe(g),
                                                   part, gate_clip, H, unroll);
              const char* names[] = {"h_out", "z"};
              for (std::size_t a = 0; a < init.size(); ++a)
                for (std::size_t i = 0; i < init[a].size(); ++i) {
                  const float got = jit[a][i], want = ref[a][i];
                  if ((std::isnan(got) && std::isnan(want)) || (std::isinf(want) && got == want)) continue;
                  ASSERT_NEAR(got, want, 8e-6f * (1 + std::abs(want))) << what << " " << names[a] << "[" << i << "]";
                }
            }
}

// --- the JIT backend against the reference -----------------------------------------------------

struct JitCase {
  std::string name;
  Isa isa;
  int threads;
  bool bidirectional = false, reverse = false, lengths = false, batch_first = false;
  Mode mode = Mode::inference;
  float gate_clip = 0.0f;
};
void PrintTo(const JitCase& c, std::ostream* os) { *os << c.name; }

class GruResetBeforeJit : public ::testing::TestWithParam<JitCase> {};

TEST_P(GruResetBeforeJit, MatchesReference) {
  const JitCase& p = GetParam();
  if (static_cast<int>(cpu_isa()) < static_cast<int>(p.isa)) GTEST_SKIP() << "the CPU cannot run " << to_string(p.isa);
  const bool split = p.threads > 1;  // two threads only split plans with enough work per thread
  RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = split ? 160 : 23, .hidden_size = split ? 115 : 19,
              .num_layers = 2, .bidirectional = p.bidirectional};
  c.reverse = p.reverse;
  c.batch_first = p.batch_first;
  c.gate_clip = p.gate_clip;
  test::RnnCase rc(c, split ? Shape{24, 10} : Shape{7, 5}, 5);
  if (p.lengths) rc.vary_lengths();
  Rnn rnn(c, {.backend = Backend::jit, .isa = p.isa, .threads = p.threads});
  Execution ex = rnn.prepare(rc.shape, p.mode);
  ASSERT_EQ(ex.plan().threads, p.threads) << "the plan does not split the steps as the case intends";
  const bool train = p.mode == Mode::training;
  test::expect_matches(rc.run(ex), rc.reference(train), rc, train);
}

std::vector<JitCase> jit_cases() {
  std::vector<JitCase> cases = {
      {"avx512_t1", Isa::avx512, 1},
      {"avx512_t1_bidir", Isa::avx512, 1, true},
      {"avx512_t1_reverse_lengths", Isa::avx512, 1, false, true, true},
      {"avx512_t1_bidir_batch_first", Isa::avx512, 1, true, false, false, true},
      {"avx512_t2", Isa::avx512, 2},
      {"avx512_t2_lengths", Isa::avx512, 2, false, false, true},
      {"avx512_t2_reverse_batch_first", Isa::avx512, 2, false, true, false, true},
      {"avx512_t2_bidir", Isa::avx512, 2, true},
      {"avx512_t1_gate_clip", Isa::avx512, 1, true, false, true, false, Mode::inference, 0.5f},
      {"avx2_t1_bidir", Isa::avx2, 1, true},
      {"avx2_t1_reverse_lengths", Isa::avx2, 1, false, true, true},
      {"avx2_t2_lengths", Isa::avx2, 2, false, false, true},
      {"avx2_t2_bidir", Isa::avx2, 2, true},
      {"avx2_t1_gate_clip", Isa::avx2, 1, true, false, true, false, Mode::inference, 0.5f},
      {"reference_isa", Isa::reference, 1},
      {"reference_isa_bidir_lengths_batch_first", Isa::reference, 1, true, false, true, true},
  };
  // Training: the same cases, forward and backward.
  const std::size_t n = cases.size();
  for (std::size_t i = 0; i < n; ++i) {
    JitCase t = cases[i];
    t.name += "_train";
    t.mode = Mode::training;
    cases.push_back(t);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, GruResetBeforeJit, ::testing::ValuesIn(jit_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GruResetBeforeJitPlan, SplitsTheRecurrentGemmAroundTheResetGate) {
  const RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 8, .hidden_size = 20};
  const Plan plan = make_plan(c, {3, 2}, Mode::training, Isa::avx512, 1);
  const std::string text = to_text(plan);
  for (const char* want : {"recurrent projection r,z", "recurrent projection n (on r * h_prev)",
                           "gru_reset_before_fwd_train_rz_avx512", "gru_reset_before_fwd_train_n_avx512",
                           "reset gradient d(r * h_prev) = dn W_hn", "recurrent gradient r,z",
                           "gru_reset_before_bwd_rz_avx512", "gru_reset_before_bwd_n_avx512", "dW_hn l0 d0 (on r * h_prev)"})
    EXPECT_NE(text.find(want), std::string::npos) << want << " is not in\n" << text;
}

// The CUDA plan of the cell: the same split step with cuBLAS GEMMs and whole-H CUDA kernels (its
// walk against the reference: test_cuda_runner; the kernels' math: test_cuda_source).
TEST(GruResetBeforeJitPlan, CudaPlansItAndTheReferenceBackendTrainsIt) {
  const RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 6, .hidden_size = 5, .num_layers = 2};
  for (Mode mode : {Mode::inference, Mode::training}) {
    const Plan plan = make_plan(c, {3, 2}, mode, Isa::cuda, 1);
    const std::string text = to_text(plan);
    std::vector<const char*> wants = {"recurrent projection r,z", "recurrent projection n (on r * h_prev)",
                                      mode == Mode::training ? "gru_reset_before_fwd_train_rz_cuda_h5"
                                                             : "gru_reset_before_fwd_rz_cuda_h5",
                                      mode == Mode::training ? "gru_reset_before_fwd_train_n_cuda_h5"
                                                             : "gru_reset_before_fwd_n_cuda_h5"};
    if (mode == Mode::training)
      for (const char* w : {"reset gradient d(r * h_prev) = dn W_hn", "gru_reset_before_bwd_rz_cuda_h5",
                            "gru_reset_before_bwd_n_cuda_h5", "dW_hn l1 d0 (on r * h_prev)"})
        wants.push_back(w);
    for (const char* want : wants) EXPECT_NE(text.find(want), std::string::npos) << want << " is not in\n" << text;
    EXPECT_EQ(plan.kernels.size(), mode == Mode::training ? 4u : 2u);
  }
  // The reference backend trains it too, matching the double-precision oracle.
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
