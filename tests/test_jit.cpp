// The JIT path (planner + generated gate kernels + OpenBLAS) against the double-precision
// reference, for every cell, mode and direction, on shapes with tails: H around the vector
// width of 16, primes, batch 1, I != H, up to 3 layers, forward outputs and every gradient.
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

class JitVsReference : public testing::TestWithParam<JitCase> {};

void check(const JitCase& c, Mode mode) {
  if (c.isa == Isa::avx512 && detect_isa() != Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
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

// The scalar gate kernels (what avx2 and reference ISAs run) on a thinner sweep.
std::vector<JitCase> scalar_sweep() {
  std::vector<JitCase> cases;
  for (const JitCase& c : sweep(Isa::reference))
    if (c.N == 3) cases.push_back(c);
  for (JitCase c : {JitCase{CellKind::lstm, 17, 2, 2, true, 3, 5, Isa::avx2}, JitCase{CellKind::gru, 33, 1, 1, false, 4, 7, Isa::avx2}})
    cases.push_back(c);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(ScalarGates, JitVsReference, testing::ValuesIn(scalar_sweep()), case_name);

// The benchmark's shape: H=800, N=20 (blocking and remainders differ from the small ones).
TEST(JitLarge, Ds2LstmForwardAndBackward) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::rnn_tanh}) {
    RnnCase rc({cell, 800, 800, 1, false}, {3, 20});
    Rnn rnn(rc.config, {Backend::jit, Isa::avx512});
    Execution ex = rnn.prepare(rc.shape, Mode::training);
    const Tensors got = rc.run(ex);
    const Tensors want = rc.reference(true);
    expect_close(got.y, want.y, rc.tolerance(false), "y");
    expect_close(got.dx, want.dx, rc.tolerance(true), "dx");
    expect_close(got.dw, want.dw, rc.tolerance(true), "dweights");
  }
}

}  // namespace
}  // namespace rnnjit::test
