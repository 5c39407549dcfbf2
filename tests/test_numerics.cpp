// Non-finite and extreme values through the JIT path (planner + generated GEMMs and gate kernels,
// and the OpenBLAS + scalar-gate path that AVX2 CPUs run), forward and backward, for every cell:
//   - NaN and +-inf in inputs (x, h0, dy) and in weights propagate: no hang, no crash, NaN (and
//     inf) exactly where the double-precision reference has them, finite values close to it;
//   - very large inputs (1e30) saturate sigmoid and tanh cleanly: finite outputs, |h| <= 1;
//   - denormal inputs and weights give the reference's (denormal) results, not zeros;
//   - results are bitwise identical from run to run, NaN payloads included, and no NaN sticks in
//     an Execution's buffers from one call to the next, nor leaks from a caller's workspace
//     through the rows of finished sequences (variable lengths).
// Every run writes into output buffers pre-filled with NaN, so an element left unwritten shows.
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <ostream>

#include "tests/rnn_case.hpp"

namespace rnnjit::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct NumericsCase {
  CellKind cell;
  Isa isa;
};

void PrintTo(const NumericsCase& c, std::ostream* os) { *os << to_string(c.cell) << " on " << to_string(c.isa); }

std::string case_name(const testing::TestParamInfo<NumericsCase>& info) {
  return fmt::format("{}_{}", to_string(info.param.cell), to_string(info.param.isa));
}

bool saturating(CellKind cell) { return cell != CellKind::rnn_relu; }  // every activation is sigmoid/tanh

// ---- running ----

std::vector<float> filled(std::size_t n, float value) { return std::vector<float>(n, value); }

// Like RnnCase::run, but every output buffer starts out as NaN.
Tensors run_prefilled(const RnnCase& rc, Execution& ex) {
  Tensors t;
  t.y = filled(static_cast<std::size_t>(y_elements(rc.config, rc.shape)), kNaN);
  t.hy = filled(rc.hx.size(), kNaN);
  t.cy = filled(rc.cx.size(), kNaN);
  ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = t.y, .hy = t.hy, .cy = t.cy});
  if (ex.mode() != Mode::training) return t;
  t.dx = filled(rc.x.size(), kNaN);
  t.dhx = filled(rc.hx.size(), kNaN);
  t.dcx = filled(rc.cx.size(), kNaN);
  t.dw = filled(rc.w.size(), kNaN);
  ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = t.dx, .dhx = t.dhx, .dcx = t.dcx});
  ex.backward_weights({.x = rc.x, .dweights = t.dw});
  return t;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void expect_bitwise_equal(const Tensors& a, const Tensors& b, const std::string& what) {
  EXPECT_TRUE(bitwise_equal(a.y, b.y)) << what << ": y";
  EXPECT_TRUE(bitwise_equal(a.hy, b.hy)) << what << ": hy";
  EXPECT_TRUE(bitwise_equal(a.cy, b.cy)) << what << ": cy";
  EXPECT_TRUE(bitwise_equal(a.dx, b.dx)) << what << ": dx";
  EXPECT_TRUE(bitwise_equal(a.dhx, b.dhx)) << what << ": dhx";
  EXPECT_TRUE(bitwise_equal(a.dcx, b.dcx)) << what << ": dcx";
  EXPECT_TRUE(bitwise_equal(a.dw, b.dw)) << what << ": dweights";
}

// The JIT path three times: twice through one Execution, once through a fresh one; all three
// must be bitwise identical. Returns the first.
Tensors run_jit(const RnnCase& rc, Isa isa, Mode mode = Mode::training) {
  const Rnn rnn(rc.config, {Backend::jit, isa});
  Execution ex = rnn.prepare(rc.shape, mode);
  const Tensors first = run_prefilled(rc, ex);
  expect_bitwise_equal(run_prefilled(rc, ex), first, "second run of one Execution");
  Execution fresh = rnn.prepare(rc.shape, mode);
  expect_bitwise_equal(run_prefilled(rc, fresh), first, "run of a fresh Execution");
  return first;
}

// ---- comparing ----

enum class Kind { nan, pos_inf, neg_inf, finite };
Kind kind_of(double v) {
  if (std::isnan(v)) return Kind::nan;
  if (std::isinf(v)) return v > 0 ? Kind::pos_inf : Kind::neg_inf;
  return Kind::finite;
}

// NaN, +inf and -inf exactly where `want` has them; elsewhere |got - want| <= rel * (unit + |want|)
// + abs, where unit is 1 (as expect_close: O(1) values) or, with `scaled`, the largest finite
// |want| of the tensor (for tensors of tiny values, whose errors 1 would hide).
void expect_matches(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs,
                    bool scaled, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double unit = scaled ? 0.0 : 1.0;
  if (scaled)
    for (float w : want)
      if (std::isfinite(w)) unit = std::max(unit, std::abs(static_cast<double>(w)));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Kind kg = kind_of(got[i]), kw = kind_of(want[i]);
    const double w = want[i], err = std::abs(static_cast<double>(got[i]) - w);
    const bool ok = kg == kw && (kg != Kind::finite || err <= rel * (unit + std::abs(w)) + abs);
    if (!ok && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << ", the reference has " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": elements that differ from the reference";
}

void expect_matches_reference(const RnnCase& rc, const Tensors& got, bool training, double abs = 0.0,
                              bool scaled = false) {
  const Tensors want = rc.reference(training);
  const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
  expect_matches(got.y, want.y, tol, abs, scaled, "y");
  expect_matches(got.hy, want.hy, tol, abs, scaled, "hy");
  expect_matches(got.cy, want.cy, tol, abs, scaled, "cy");
  if (!training) return;
  expect_matches(got.dx, want.dx, gtol, abs, scaled, "dx");
  expect_matches(got.dhx, want.dhx, gtol, abs, scaled, "dhx");
  expect_matches(got.dcx, want.dcx, gtol, abs, scaled, "dcx");
  expect_matches(got.dw, want.dw, gtol, abs, scaled, "dweights");
}

std::size_t count_nan(const std::vector<float>& v) {
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](float f) { return std::isnan(f); }));
}
bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

// Index of x[t, n, i] and of y[t, n, j].
std::size_t x_at(const RnnCase& rc, std::int64_t t, std::int64_t n, std::int64_t i) {
  return static_cast<std::size_t>((t * rc.shape.batch + n) * rc.config.input_size + i);
}

class Numerics : public testing::TestWithParam<NumericsCase> {
 protected:
  void SetUp() override {
    if (GetParam().isa == Isa::avx512 && detect_isa() != Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  }
  CellKind cell() const { return GetParam().cell; }
  Isa isa() const { return GetParam().isa; }
  // Two bidirectional layers, H = 20 (a full vector and a masked tail), I = 7.
  RnnCase deep(unsigned seed = 5) const { return RnnCase({cell(), 7, 20, 2, true}, {4, 3}, seed); }
  // One forward layer: simple enough to state where NaN must appear.
  RnnCase shallow(unsigned seed = 6) const { return RnnCase({cell(), 7, 20, 1, false}, {4, 3}, seed); }
};

// ---- NaN and inf in inputs ----

TEST_P(Numerics, NanInInputPropagatesForwardAndBackward) {
  {
    SCOPED_TRACE("two bidirectional layers");
    RnnCase rc = deep();
    rc.x[x_at(rc, 1, 1, 2)] = kNaN;
    expect_matches_reference(rc, run_jit(rc, isa()), true);
    expect_matches_reference(rc, run_jit(rc, isa(), Mode::inference), false);
  }
  SCOPED_TRACE("one forward layer");
  RnnCase rc = shallow();
  const std::int64_t t0 = 1, n0 = 1, i0 = 2, T = rc.shape.seq_len, N = rc.shape.batch, H = rc.config.hidden_size;
  rc.x[x_at(rc, t0, n0, i0)] = kNaN;
  const Tensors got = run_jit(rc, isa());
  expect_matches_reference(rc, got, true);
  // The math: batch row n0 is NaN from time t0 on; the other rows never see the NaN.
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = 0; j < H; ++j)
        EXPECT_EQ(std::isnan(got.y[static_cast<std::size_t>((t * N + n) * H + j)]), n == n0 && t >= t0)
            << "y[" << t << ", " << n << ", " << j << "]";
  EXPECT_EQ(count_nan(got.hy), static_cast<std::size_t>(H));
  // Every weight gradient of input feature i0 meets 0 * NaN or NaN * x.
  const WeightLayout layout(rc.config);
  const ParamBlock& w_ih = layout.find("weight_ih_l0");
  for (std::int64_t r = 0; r < w_ih.shape[0]; ++r)
    EXPECT_TRUE(std::isnan(got.dw[static_cast<std::size_t>(w_ih.offset + r * rc.config.input_size + i0)])) << r;
  if (saturating(cell())) {  // (relu's gradient is 0 where its output is NaN: no NaN reaches dx)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t i = 0; i < rc.config.input_size; ++i)
          EXPECT_EQ(std::isnan(got.dx[x_at(rc, t, n, i)]), n == n0) << "dx[" << t << ", " << n << ", " << i << "]";
  }
}

TEST_P(Numerics, InfInInputPropagatesForwardAndBackward) {
  for (const bool two_layers : {false, true}) {
    SCOPED_TRACE(two_layers ? "two bidirectional layers" : "one forward layer");
    RnnCase rc = two_layers ? deep() : shallow();
    const std::size_t plus = x_at(rc, 1, 0, 3), minus = x_at(rc, 2, 2, 5);
    rc.x[plus] = kInf;
    rc.x[minus] = -kInf;
    const Tensors got = run_jit(rc, isa());
    expect_matches_reference(rc, got, true);
    if (!saturating(cell())) continue;
    // Every gate saturates: sigmoid(+-inf) is 1 or 0 and tanh(+-inf) is +-1, so the forward pass
    // stays finite and |h| <= 1, and the gates' derivatives there are exactly 0.
    EXPECT_TRUE(all_finite(got.y) && all_finite(got.hy) && all_finite(got.cy));
    for (float v : got.y) EXPECT_LE(std::abs(v), 1.0f);
    EXPECT_TRUE(all_finite(got.dx) && all_finite(got.dhx) && all_finite(got.dcx));
    // dW_ih of the infinite features is sum(dgates * x), with the term 0 * inf: NaN, in every row
    // of layer 0's input weights of the directions that read x; all other gradients are finite.
    const WeightLayout layout(rc.config);
    std::size_t expected_nan = 0;
    for (int d = 0; d < rc.config.directions(); ++d) {
      const ParamBlock& b = layout.block(0, d, ParamKind::weight_ih);
      for (std::int64_t r = 0; r < b.shape[0]; ++r)
        for (const std::int64_t i : {3, 5})
          EXPECT_TRUE(std::isnan(got.dw[static_cast<std::size_t>(b.offset + r * rc.config.input_size + i)]))
              << b.name << "[" << r << ", " << i << "]";
      expected_nan += static_cast<std::size_t>(2 * b.shape[0]);
    }
    EXPECT_EQ(count_nan(got.dw), expected_nan);
  }
}

TEST_P(Numerics, NanAndInfInStatesAndOutputGradients) {
  RnnCase rc = deep();
  rc.hx[rc.hx.size() / 2] = kNaN;                  // one element of one layer/direction's h0
  if (!rc.cx.empty()) rc.cx[3] = kInf;             // LSTM: an infinite initial cell state
  rc.dy[7] = kInf;                                 // an infinite output gradient
  rc.dhy[rc.dhy.size() - 1] = -kInf;
  if (!rc.dcy.empty()) rc.dcy[0] = kNaN;
  expect_matches_reference(rc, run_jit(rc, isa()), true);
}

// ---- NaN and inf in weights ----

TEST_P(Numerics, NanAndInfInWeightsPropagate) {
  struct Poison {
    const char* block;
    std::int64_t index;
    float value;
  };
  const Poison poisons[] = {{"weight_hh_l0", 0, kNaN},          {"weight_ih_l1_reverse", 5, kNaN},
                            {"bias_ih_l0", 3, kInf},            {"bias_hh_l1", 1, -kInf},
                            {"weight_ih_l0_reverse", 2, -kInf}, {"weight_hh_l1_reverse", 4, kInf}};
  for (const Poison& p : poisons) {
    SCOPED_TRACE(fmt::format("{}[{}] = {}", p.block, p.index, p.value));
    RnnCase rc = deep();
    const WeightLayout layout(rc.config);
    layout.view(std::span<float>(rc.w), p.block)[static_cast<std::size_t>(p.index)] = p.value;
    const Tensors got = run_jit(rc, isa());
    expect_matches_reference(rc, got, true);
    if (std::string(p.block) == "bias_ih_l0" && saturating(cell())) {
      // An infinite input bias only saturates its gate: everything stays finite.
      EXPECT_TRUE(all_finite(got.y) && all_finite(got.hy) && all_finite(got.cy) && all_finite(got.dx) &&
                  all_finite(got.dhx) && all_finite(got.dcx) && all_finite(got.dw));
    }
  }
}

// ---- large values ----

TEST_P(Numerics, HugeInputsSaturateCleanly) {
  RnnCase rc = deep();
  for (float& v : rc.x) v = v < 0 ? -1e30f : 1e30f;
  const Tensors got = run_jit(rc, isa());
  expect_matches_reference(rc, got, true);
  // The math gives finite values everywhere: saturated gates (sigmoid/tanh cells), or relu's
  // outputs of about 1e30, far below FLT_MAX.
  for (const auto* v : {&got.y, &got.hy, &got.cy, &got.dx, &got.dhx, &got.dcx, &got.dw})
    EXPECT_TRUE(all_finite(*v));
  if (saturating(cell())) {
    for (float v : got.y) EXPECT_LE(std::abs(v), 1.0f);
    for (float v : got.hy) EXPECT_LE(std::abs(v), 1.0f);
  }
}

// ---- denormals ----

TEST_P(Numerics, DenormalInputsAndWeightsMatchTheReference) {
  for (const bool denormal_weights : {false, true}) {
    SCOPED_TRACE(denormal_weights ? "denormal weights" : "denormal inputs");
    RnnCase rc = shallow();
    // Zero biases and initial states: every pre-activation, state and output is then denormal
    // (sigmoid gates are 1/2), so flushing denormals to zero would change every result.
    const WeightLayout layout(rc.config);
    for (const ParamBlock& b : layout.blocks()) {
      std::span<float> v = layout.view(std::span<float>(rc.w), b.name);
      if (b.kind == ParamKind::bias_ih || b.kind == ParamKind::bias_hh) std::fill(v.begin(), v.end(), 0.0f);
      else if (denormal_weights) for (float& e : v) e *= 1e-39f;
    }
    if (!denormal_weights)
      for (float& e : rc.x) e *= 1e-39f;
    std::fill(rc.hx.begin(), rc.hx.end(), 0.0f);
    std::fill(rc.cx.begin(), rc.cx.end(), 0.0f);
    const Tensors got = run_jit(rc, isa());
    std::size_t denormals = 0;
    for (float v : got.y) denormals += std::fpclassify(v) == FP_SUBNORMAL;
    EXPECT_GT(denormals, got.y.size() / 4) << "the outputs should be denormal (relu: half of them zero)";
    // Denormal arithmetic rounds to multiples of 2^-149 (1.4e-45): allow a thousand of them,
    // three orders of magnitude below the values (flushed to zero, they would all be off), on
    // top of the usual tolerance relative to each tensor's own scale.
    expect_matches_reference(rc, got, true, 1e3 * std::numeric_limits<float>::denorm_min(), /*scaled=*/true);
  }
}

// ---- nothing sticks ----

TEST_P(Numerics, NanDoesNotStickInAnExecution) {
  RnnCase clean = deep(9);
  RnnCase poisoned = clean;
  for (std::size_t i = 0; i < poisoned.x.size(); i += 5) poisoned.x[i] = kNaN;
  for (std::size_t i = 0; i < poisoned.w.size(); i += 7) poisoned.w[i] = kNaN;
  const Rnn rnn(clean.config, {Backend::jit, isa()});
  Execution ex = rnn.prepare(clean.shape, Mode::training);
  const Tensors bad = run_prefilled(poisoned, ex);
  EXPECT_GT(count_nan(bad.y), 0u);
  // The same Execution (its workspace, reserve and packed weights now full of NaN) on clean data.
  const Tensors good = run_prefilled(clean, ex);
  expect_matches_reference(clean, good, true);
  for (const auto* v : {&good.y, &good.hy, &good.cy, &good.dx, &good.dhx, &good.dcx, &good.dw})
    EXPECT_TRUE(all_finite(*v));
  // Accumulating weight gradients into NaN gives NaN (x + NaN), not silently the new gradient.
  std::vector<float> y(good.y.size()), dx(good.dx.size()), dw = filled(good.dw.size(), kNaN);
  ex.forward(clean.w, {.x = clean.x, .hx = clean.hx, .cx = clean.cx, .y = y});
  ex.backward_data(clean.w, {.dy = clean.dy, .dx = dx});
  ex.backward_weights({.x = clean.x, .dweights = dw, .accumulate = true});
  EXPECT_EQ(count_nan(dw), dw.size());
}

// ---- variable lengths ----

// The GEMMs skip the rows of finished sequences (with lengths sorted longest first, most of
// them), so those rows of the step's buffers keep whatever was there: here NaN or zeros, in the
// caller's workspace and reserve, refilled before every call, and x's padding NaN or as drawn.
// Nothing of it may reach a result, and the two fillings must give the same bits; dx's rows past
// a length must be zeros though dx starts as NaN (the input gradient stores them without
// computing them), and dW_ih must sum no padding row of x. 40 rows, most of them finished by the
// last steps, leave whole row blocks of every GEMM finished; the reverse direction starts with
// most rows finished; batch-first projects every row of x, padding included, in [N, T] order.
// The LSTM with a projection and the reset-before GRU keep kernel outputs that weight gradients
// read (o * tanh(c) for dW_hr, r * h_prev for dW_hn). T = 5, N = 3 gives dW_ih so few K rows
// that its B is not packed (masked into a copy instead).
TEST_P(Numerics, FinishedSequencesLeaveNoTraceOfTheWorkspace) {
  struct Setup {
    RnnConfig config;
    Shape shape;
    bool longest_first;
  };
  std::vector<Setup> setups;
  for (bool batch_first : {false, true}) {
    RnnConfig config{cell(), 7, 20, 2, true};
    config.batch_first = batch_first;
    for (bool longest_first : {true, false}) setups.push_back({config, {40, 40}, longest_first});
    setups.push_back({config, {5, 3}, false});
  }
  if (cell() == CellKind::lstm)
    setups.push_back({{.cell = cell(), .input_size = 7, .hidden_size = 20, .num_layers = 2, .bidirectional = true,
                       .proj_size = 13},
                      {40, 40},
                      true});
  if (cell() == CellKind::gru) setups.push_back({{CellKind::gru_reset_before, 7, 20, 2, true}, {40, 40}, true});
  for (const Setup& setup : setups) {
    SCOPED_TRACE(describe(setup.config) + (setup.longest_first ? ", sorted lengths" : ", unsorted lengths"));
    RnnCase rc(setup.config, setup.shape, 11);
    rc.vary_lengths(3, setup.longest_first);
    RnnCase poisoned = rc;
    poisoned.fill_padding(kNaN);
    const Rnn rnn(rc.config, {Backend::jit, isa()});
    Execution ex = rnn.prepare(rc.shape, Mode::training);
    std::vector<std::byte> reserve(ex.reserve_size()), workspace(ex.workspace_size());
    auto run_filled = [&](std::byte fill, const std::vector<float>& x) {
      Tensors t;
      t.y = filled(static_cast<std::size_t>(y_elements(rc.config, rc.shape)), kNaN);
      t.hy = filled(rc.hx.size(), kNaN);
      t.cy = filled(rc.cx.size(), kNaN);
      t.dx = filled(rc.x.size(), kNaN);
      t.dhx = filled(rc.hx.size(), kNaN);
      t.dcx = filled(rc.cx.size(), kNaN);
      t.dw = filled(rc.w.size(), kNaN);
      std::fill(reserve.begin(), reserve.end(), fill);
      std::fill(workspace.begin(), workspace.end(), fill);
      const ForwardIo io{
          .x = x, .hx = rc.hx, .cx = rc.cx, .y = t.y, .hy = t.hy, .cy = t.cy, .seq_lengths = rc.lengths};
      ex.forward(rc.w, io, reserve, workspace);
      std::fill(workspace.begin(), workspace.end(), fill);
      ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = t.dx, .dhx = t.dhx, .dcx = t.dcx},
                       reserve, workspace);
      std::fill(workspace.begin(), workspace.end(), fill);
      ex.backward_weights({.x = x, .dweights = t.dw}, reserve, workspace);
      return t;
    };
    const Tensors nan_filled = run_filled(std::byte{0xff}, poisoned.x), zero_filled = run_filled(std::byte{0}, rc.x);
    expect_bitwise_equal(nan_filled, zero_filled, "workspace, reserve and x's padding NaN vs zeros and x as drawn");
    expect_matches_reference(rc, zero_filled, true);
  }
}

std::vector<NumericsCase> cases() {
  std::vector<NumericsCase> out;
  for (Isa isa : {Isa::avx512, Isa::avx2})
    for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru})
      out.push_back({cell, isa});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Jit, Numerics, testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace rnnjit::test
