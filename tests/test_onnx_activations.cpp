// ONNX's activation functions (RnnConfig::activations): the scalar reference against each
// function's formula written out here, the JIT plans (whose gate kernels generate them, AVX-512
// or AVX2) against the reference on shapes with tails, training refused, bad values refused,
// the plain cells' descriptors unchanged, and the C API and ONNX adapter's mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/plan.hpp"
#include "codegen/x64/gate_emitter.hpp"
#include "codegen/planner.hpp"
#include "rnn_case.hpp"
#include "tests/onnx_functions.hpp"
#include "rnnjit.h"
#include "rnnjit/weights.hpp"
#include "runtime/kernel.hpp"

namespace rnnjit::test {
namespace {

std::vector<ActivationFunction> all_functions() { return onnx_functions(); }

// ONNX's formulas (onnx/defs/rnn/defs.cc), written out independently of kernels/activation.hpp.
double formula(const ActivationFunction& f, double x) {
  const double a = f.alpha, b = f.beta;
  switch (f.kind) {
    case Activation::relu: return std::max(0.0, x);
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::affine: return a * x + b;
    case Activation::leaky_relu: return x >= 0 ? x : a * x;
    case Activation::thresholded_relu: return x > a ? x : 0.0;
    case Activation::scaled_tanh: return a * std::tanh(b * x);
    case Activation::hard_sigmoid: return std::min(std::max(a * x + b, 0.0), 1.0);
    case Activation::elu: return x >= 0 ? x : a * (std::exp(x) - 1.0);
    case Activation::softsign: return x / (1.0 + std::abs(x));
    case Activation::softplus: return std::log(1.0 + std::exp(x));
    case Activation::standard: break;
  }
  ADD_FAILURE() << "no formula for standard";
  return 0.0;
}

// A one-unit network (I = H = 1, T = 1, N = 1) whose weights are all `w` and biases 0 except
// b_ih = `bias`: each gate's pre-activation is w*x + w*h0 + bias.
struct Unit {
  RnnConfig config;
  std::vector<double> weights;
  explicit Unit(CellKind cell, double w, double bias) {
    config.cell = cell;
    config.input_size = config.hidden_size = 1;
    const WeightLayout layout(config);
    weights.assign(static_cast<std::size_t>(layout.total_elements()), w);
    const ParamBlock bh = layout.block(0, 0, ParamKind::bias_hh), bi = layout.block(0, 0, ParamKind::bias_ih);
    for (std::int64_t e = 0; e < bh.size; ++e) weights[static_cast<std::size_t>(bh.offset + e)] = 0.0;
    for (std::int64_t e = 0; e < bi.size; ++e) weights[static_cast<std::size_t>(bi.offset + e)] = bias;
  }
  // h (and c) after one step from x, h0, c0.
  std::pair<double, double> step(double x, double h0, double c0) const {
    double y = 0, hy = 0, cy = 0;
    const bool lstm = config.cell == CellKind::lstm;
    reference::forward<double>(config, {1, 1}, weights.data(), &x, &h0, lstm ? &c0 : nullptr, &y, &hy,
                               lstm ? &cy : nullptr, nullptr);
    EXPECT_EQ(y, hy);
    return {hy, cy};
  }
};

TEST(ReferenceActivations, EveryFunctionInEveryRoleMatchesItsFormula) {
  const double w = 0.9, bias = 0.1, h0 = -0.4, c0 = 0.7;
  for (const ActivationFunction& fn : all_functions())
    for (double x : {-3.0, -1.1, -0.2, 0.0, 0.25, 0.8, 2.5}) {
      const std::string at = fmt::format("{} x={}", describe(fn), x);
      const double pre = w * x + w * h0 + bias;  // every gate's pre-activation
      const double sig = 1.0 / (1.0 + std::exp(-pre)), th = std::tanh(pre), fx = formula(fn, pre);
      {  // RNN: h = f(pre)
        Unit u(CellKind::rnn_tanh, w, bias);
        u.config.activations[0][0] = fn;
        EXPECT_NEAR(u.step(x, h0, c0).first, fx, 1e-12) << "RNN " << at;
      }
      for (int role = 0; role < 3; ++role) {  // LSTM: i, f, o = f(pre); g = g(pre); h = o * h(c)
        Unit u(CellKind::lstm, w, bias);
        u.config.activations[0][static_cast<std::size_t>(role)] = fn;
        const double gate = role == 0 ? fx : sig, g = role == 1 ? fx : th;
        const double c = gate * c0 + gate * g;
        const double h = gate * (role == 2 ? formula(fn, c) : std::tanh(c));
        const auto [hy, cy] = u.step(x, h0, c0);
        EXPECT_NEAR(cy, c, 1e-12) << "LSTM role " << role << " " << at;
        EXPECT_NEAR(hy, h, 1e-12) << "LSTM role " << role << " " << at;
      }
      for (CellKind cell : {CellKind::gru, CellKind::gru_reset_before})
        for (int role = 0; role < 2; ++role) {  // GRU: r, z = f(pre); n = g(...)
          Unit u(cell, w, bias);
          u.config.activations[0][static_cast<std::size_t>(role)] = fn;
          const double r = role == 0 ? fx : sig, z = r;
          const auto g = [&](double v) { return role == 1 ? formula(fn, v) : std::tanh(v); };
          // linear before reset: n = g(w x + b_in + r (w h0)); reset before: g(w x + b_in + w (r h0))
          const double n = g(w * x + bias + r * (w * h0));
          EXPECT_NEAR(u.step(x, h0, c0).first, (1 - z) * n + z * h0, 1e-12)
              << to_string(cell) << " role " << role << " " << at;
        }
    }
}

// The JIT executor with a network using the function: its gate kernels are generated for the
// plan's ISA (named _act..., isa avx512 or avx2, never the reference twins) and every output
// matches the reference; on AVX-512 machines the AVX2 plans run too.
struct JitCase {
  CellKind cell;
  int role;
  bool bidirectional;
};

std::vector<Isa> generated_isas() {
  std::vector<Isa> isas;
  const Isa best = detect_isa();
  if (best == Isa::avx512) isas.push_back(Isa::avx512);
  if (best == Isa::avx512 || best == Isa::avx2) isas.push_back(Isa::avx2);
  return isas;
}

TEST(JitActivations, PlansGenerateTheGateKernelsAndMatchTheReference) {
  if (generated_isas().empty()) GTEST_SKIP() << "this CPU runs neither avx512 nor avx2 code";
  for (const Isa isa : generated_isas())
    for (const JitCase jc : {JitCase{CellKind::rnn_tanh, 0, false}, JitCase{CellKind::lstm, 0, true},
                             JitCase{CellKind::lstm, 1, false}, JitCase{CellKind::lstm, 2, true},
                             JitCase{CellKind::gru, 0, false}, JitCase{CellKind::gru, 1, true},
                             JitCase{CellKind::gru_reset_before, 0, true},
                             JitCase{CellKind::gru_reset_before, 1, false}})
      for (const ActivationFunction& fn : all_functions()) {
        RnnConfig config;
        config.cell = jc.cell;
        config.input_size = 7;
        config.hidden_size = 19;  // a tail of 3 lanes past one vector
        config.num_layers = 2;
        config.bidirectional = jc.bidirectional;
        config.gate_clip = jc.cell == CellKind::lstm ? 2.5f : 0.0f;
        config.peephole = jc.cell == CellKind::lstm && jc.role == 1;
        config.input_forget = jc.cell == CellKind::lstm && jc.role == 2;
        config.clip = jc.cell == CellKind::lstm && jc.role == 0 ? 1.5f : 0.0f;
        config.activations[0][static_cast<std::size_t>(jc.role)] = fn;
        if (jc.bidirectional) config.activations[1][0] = {Activation::hard_sigmoid, 0.25f, 0.5f};
        if (!config.custom_activations()) continue;  // the cell's own function (e.g. Tanh on an RNN)
        const std::string what = fmt::format("{} {} role {} {}{}", to_string(isa), to_string(jc.cell), jc.role,
                                             describe(fn), jc.bidirectional ? " bidirectional" : "");
        RnnCase rc(config, {5, 3}, 11);
        rc.vary_lengths();
        Execution ex =
            Rnn(config, {.backend = Backend::jit, .isa = isa, .threads = 2}).prepare(rc.shape, Mode::inference);
        int custom_kernels = 0;
        for (const KernelDesc& d : ex.plan().kernels) {
          if (d.kind_of() != KernelKind::gate) continue;
          EXPECT_EQ(d.isa_kind(), isa) << what << ": " << kernel_name(d);
          if (!d.custom_activations()) continue;
          ++custom_kernels;
          EXPECT_NE(kernel_name(d).find("_act"), std::string::npos) << what;
          EXPECT_FALSE(CompiledKernel(d).code().empty()) << what << ": " << kernel_name(d) << " has no generated code";
        }
        EXPECT_GT(custom_kernels, 0) << what;
        EXPECT_EQ(ex.plan_text().find("no generated gate kernel"), std::string::npos) << what;
        EXPECT_EQ(ex.plan_text().find("reference twin"), std::string::npos) << what;
        expect_matches(rc.run(ex), rc.reference(false), rc, false, what);
      }
}

// RNNJIT_ISA=avx2 forces the AVX2 kernels on a plan that asks for the detected ISA.
TEST(JitActivations, ForcedAvx2RunsGeneratedKernels) {
  const std::vector<Isa> isas = generated_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU runs no avx2 code";
  const char* before = std::getenv("RNNJIT_ISA");
  const std::string saved = before ? before : "";
  setenv("RNNJIT_ISA", "avx2", 1);
  RnnConfig config;
  config.cell = CellKind::lstm;
  config.input_size = 9;
  config.hidden_size = 21;
  config.bidirectional = true;
  config.activations[0] = {ActivationFunction{Activation::hard_sigmoid, 0.2f, 0.5f},
                           ActivationFunction{Activation::softsign}, ActivationFunction{Activation::softplus}};
  config.activations[1] = {ActivationFunction{Activation::leaky_relu, 0.1f}, ActivationFunction{Activation::elu, 0.7f},
                           ActivationFunction{Activation::scaled_tanh, 0.9f, 1.1f}};
  RnnCase rc(config, {6, 4}, 3);
  Execution ex = Rnn(config, {.backend = Backend::jit, .threads = 2}).prepare(rc.shape, Mode::inference);
  if (before) setenv("RNNJIT_ISA", saved.c_str(), 1);
  else unsetenv("RNNJIT_ISA");
  EXPECT_EQ(ex.plan().isa, Isa::avx2);
  int custom_kernels = 0;
  for (const KernelDesc& d : ex.plan().kernels)
    if (d.kind_of() == KernelKind::gate && d.custom_activations()) {
      ++custom_kernels;
      EXPECT_EQ(d.isa_kind(), Isa::avx2) << kernel_name(d);
    }
  EXPECT_EQ(custom_kernels, 2);  // one per direction
  expect_matches(rc.run(ex), rc.reference(false), rc, false, "RNNJIT_ISA=avx2");
}

TEST(JitActivations, TheCellsOwnFunctionsLeaveThePlanUnchanged) {
  for (CellKind cell : kCellKinds) {
    RnnConfig plain;
    plain.cell = cell;
    plain.input_size = 5;
    plain.hidden_size = 21;
    plain.bidirectional = true;
    RnnConfig named = plain;  // the same functions, named
    for (int d = 0; d < 2; ++d)
      for (int r = 0; r < activation_role_count(cell); ++r)
        named.activations[static_cast<std::size_t>(d)][static_cast<std::size_t>(r)] =
            cell_activation(cell, static_cast<ActivationRole>(r));
    EXPECT_FALSE(named.custom_activations()) << to_string(cell);
    const Plan a = make_plan(plain, {4, 3}, Mode::training, detect_isa(), 2);
    const Plan b = make_plan(named, {4, 3}, Mode::training, detect_isa(), 2);
    ASSERT_EQ(a.kernels.size(), b.kernels.size());
    for (std::size_t k = 0; k < a.kernels.size(); ++k) {
      EXPECT_TRUE(a.kernels[k] == b.kernels[k]) << kernel_name(a.kernels[k]);
      EXPECT_FALSE(a.kernels[k].custom_activations());
      EXPECT_EQ(kernel_name(a.kernels[k]).find("_act"), std::string::npos);
    }
  }
}

TEST(JitActivations, EmittersGenerateThemForInferenceOnly) {
  RnnConfig config;
  config.cell = CellKind::lstm;
  config.input_size = config.hidden_size = 32;
  config.activations[0][2] = {Activation::softsign};
  for (Isa isa : {Isa::avx512, Isa::avx2}) {  // generating needs no AVX-512, only running does
    KernelDesc d = gate_kernel_desc(config, {2, 3}, Mode::inference, isa, Pass::forward);
    ASSERT_FALSE(d.custom_activations());  // the config's functions are the planner's to add
    const auto plain = x64::emit_gate_kernel(d);
    d.set_activations(config, 0);
    ASSERT_TRUE(d.custom_activations());
    const auto custom = x64::emit_gate_kernel(d);
    EXPECT_NE(custom->text_size(), plain->text_size()) << to_string(isa);  // softsign's code, not tanh's
    for (const bool backward : {false, true}) {  // the training forward and the backward pass
      KernelDesc t = gate_kernel_desc(config, {2, 3}, Mode::training, isa, backward ? Pass::backward : Pass::forward);
      t.set_activations(config, 0);
      try {
        x64::emit_gate_kernel(t);
        ADD_FAILURE() << "emitted " << kernel_name(t);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("for inference only"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(JitActivations, TrainingIsRefusedWithOneClearLine) {
  RnnConfig config;
  config.cell = CellKind::gru;
  config.input_size = config.hidden_size = 8;
  config.activations[0][1] = {Activation::elu, 1.0f};
  for (Backend backend : {Backend::jit, Backend::reference}) {
    try {
      Rnn rnn(config, {.backend = backend});
      RnnCase rc(config, {3, 2});
      Execution ex = rnn.prepare(rc.shape, Mode::training);
      rc.run(ex);
      ADD_FAILURE() << "training ran on " << to_string(backend);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("for inference only"), std::string::npos) << m;
      EXPECT_NE(m.find("Elu(alpha=1)"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  // A CUDA plan generates them in its gate kernels for inference (no GPU needed to plan) and
  // refuses training alike.
  const Plan cuda = make_plan(config, {3, 2}, Mode::inference, Isa::cuda, 1);
  int custom_kernels = 0;
  for (const KernelDesc& d : cuda.kernels)
    if (d.kind_of() == KernelKind::gate) {
      EXPECT_EQ(d.isa_kind(), Isa::cuda) << kernel_name(d);
      custom_kernels += d.custom_activations();
    }
  EXPECT_GT(custom_kernels, 0);
  EXPECT_THROW(make_plan(config, {3, 2}, Mode::training, Isa::cuda, 1), Error);
}

TEST(ActivationConfig, BadValuesAreClearErrors) {
  const auto refused = [](auto change, const char* part) {
    RnnConfig c;
    c.cell = CellKind::gru;
    c.input_size = c.hidden_size = 4;
    change(c);
    try {
      validate(c);
      ADD_FAILURE() << "accepted; expected an error with: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused([](RnnConfig& c) { c.activations[0][0] = {Activation::relu, 0.5f}; }, "Relu takes no alpha");
  refused([](RnnConfig& c) { c.activations[0][0] = {Activation::elu, 1.0f, 2.0f}; }, "Elu takes no beta");
  refused([](RnnConfig& c) { c.activations[0][0] = {Activation::elu, std::nanf("")}; }, "must be finite");
  refused([](RnnConfig& c) { c.activations[0][1] = {Activation::affine, INFINITY, 0.0f}; }, "must be finite");
  refused([](RnnConfig& c) { c.activations[0][2] = {Activation::tanh}; }, "gru has activation roles f, g only");
  refused([](RnnConfig& c) { c.activations[1][0] = {Activation::tanh}; }, "only direction 0");
  refused([](RnnConfig& c) { c.activations[0][0].kind = static_cast<Activation>(12); }, "activation kind 12");
  EXPECT_THROW(parse_activation("Swish"), Error);
  EXPECT_EQ(parse_activation("leakyrelu"), Activation::leaky_relu);
  EXPECT_EQ(parse_activation("HardSigmoid"), Activation::hard_sigmoid);
}

// ---- C API ----

rnnjit_config_t c_config(int32_t cell, int32_t direction) {
  rnnjit_config_t c{};
  c.cell = cell;
  c.input_size = 4;
  c.hidden_size = 5;
  c.num_layers = 1;
  c.direction = direction;
  c.threads = 1;
  return c;
}

TEST(CApiActivations, RunsInferenceRefusesTrainingAndBadValues) {
  rnnjit_config_t c = c_config(RNNJIT_CELL_LSTM, RNNJIT_DIRECTION_BIDIRECTIONAL);
  c.activations[0][2] = {RNNJIT_ACTIVATION_SOFTSIGN, 0.0f, 0.0f};
  c.activations[1][0] = {RNNJIT_ACTIVATION_HARD_SIGMOID, 0.2f, 0.5f};
  rnnjit_rnn_t* rnn = nullptr;
  ASSERT_EQ(rnnjit_rnn_create(&c, &rnn), RNNJIT_STATUS_OK) << rnnjit_last_error();
  rnnjit_execution_t* ex = nullptr;
  EXPECT_EQ(rnnjit_execution_create(rnn, 3, 2, RNNJIT_MODE_TRAINING, &ex), RNNJIT_STATUS_UNSUPPORTED);
  EXPECT_NE(std::string(rnnjit_last_error()).find("Softsign"), std::string::npos) << rnnjit_last_error();
  ASSERT_EQ(rnnjit_execution_create(rnn, 3, 2, RNNJIT_MODE_INFERENCE, &ex), RNNJIT_STATUS_OK) << rnnjit_last_error();

  // Against the C++ reference of the same network.
  RnnConfig config;
  config.cell = CellKind::lstm;
  config.input_size = 4;
  config.hidden_size = 5;
  config.bidirectional = true;
  config.activations[0][2] = {Activation::softsign};
  config.activations[1][0] = {Activation::hard_sigmoid, 0.2f, 0.5f};
  RnnCase rc(config, {3, 2}, 5);
  const Tensors want = rc.reference(false);
  std::vector<float> y(want.y.size()), hy(want.hy.size()), cy(want.cy.size());
  rnnjit_forward_io_t io{};
  io.x = rc.x.data(), io.x_size = rc.x.size();
  io.hx = rc.hx.data(), io.hx_size = rc.hx.size();
  io.cx = rc.cx.data(), io.cx_size = rc.cx.size();
  io.y = y.data(), io.y_size = y.size();
  io.hy = hy.data(), io.hy_size = hy.size();
  io.cy = cy.data(), io.cy_size = cy.size();
  ASSERT_EQ(rnnjit_forward(ex, rc.w.data(), rc.w.size(), &io), RNNJIT_STATUS_OK) << rnnjit_last_error();
  expect_close(y, want.y, rc.tolerance(false), "C API y");
  expect_close(cy, want.cy, rc.tolerance(false), "C API cy");
  // Its gate kernels are generated: the same network and options through the C++ API hit the C
  // API's plan in the process-wide cache, whose gate kernels are the detected ISA's.
  const CacheStats before = cache_stats();
  const Execution same = Rnn(config, {.threads = 1}).prepare(rc.shape, Mode::inference);
  EXPECT_EQ(cache_stats().plan_hits, before.plan_hits + 1) << "not the C API's plan";
  int custom_kernels = 0;
  for (const KernelDesc& d : same.plan().kernels)
    if (d.kind_of() == KernelKind::gate) {
      EXPECT_EQ(d.isa_kind(), detect_isa()) << kernel_name(d);
      custom_kernels += d.custom_activations();
    }
  EXPECT_EQ(custom_kernels, 2);  // one per direction
  rnnjit_execution_destroy(ex);
  rnnjit_rnn_destroy(rnn);

  const auto invalid = [](rnnjit_config_t bad, const char* part) {
    rnnjit_rnn_t* r = nullptr;
    EXPECT_EQ(rnnjit_rnn_create(&bad, &r), RNNJIT_STATUS_INVALID_ARGUMENT) << part;
    EXPECT_NE(std::string(rnnjit_last_error()).find(part), std::string::npos) << rnnjit_last_error();
    EXPECT_EQ(r, nullptr);
  };
  rnnjit_config_t bad = c_config(RNNJIT_CELL_GRU, RNNJIT_DIRECTION_FORWARD);
  bad.activations[0][0] = {99, 0.0f, 0.0f};
  invalid(bad, "not an rnnjit_activation_kind_t");
  bad.activations[0][0] = {RNNJIT_ACTIVATION_LEAKY_RELU, NAN, 0.0f};
  invalid(bad, "must be finite");
  bad.activations[0][0] = {RNNJIT_ACTIVATION_SOFTPLUS, 1.0f, 0.0f};
  invalid(bad, "Softplus takes no alpha");
}

// The ONNX adapter: names (any case), alphas and betas consumed in the list's order (ONNX
// Runtime's defaults where they run out), one direction's list serving both.
// (The attributes point into the vectors: they must outlive them.)
rnnjit_onnx_attributes_t onnx_attrs(int32_t op, const char* direction, const std::vector<const char*>& names,
                                    const std::vector<float>& alpha, const std::vector<float>& beta) {
  rnnjit_onnx_attributes_t a{};
  a.op = op;
  a.hidden_size = 3;
  a.direction = direction;
  a.activations = names.empty() ? nullptr : names.data();
  a.activations_count = names.size();
  a.activation_alpha = alpha.empty() ? nullptr : alpha.data();
  a.activation_alpha_count = alpha.size();
  a.activation_beta = beta.empty() ? nullptr : beta.data();
  a.activation_beta_count = beta.size();
  return a;
}

TEST(OnnxActivations, AttributesMapToTheConfig) {
  rnnjit_config_t c{};
  {
    const std::vector<const char*> names = {"hardsigmoid", "Elu", "ScaledTanh"};
    const std::vector<float> alpha = {0.3f, 0.9f}, beta = {0.4f};
    const auto a = onnx_attrs(RNNJIT_ONNX_LSTM, "bidirectional", names, alpha, beta);
    ASSERT_EQ(rnnjit_onnx_config(&a, 2, &c), RNNJIT_STATUS_OK) << rnnjit_last_error();
    EXPECT_EQ(c.cell, RNNJIT_CELL_LSTM);
    // Forward: HardSigmoid(0.3, 0.4), Elu(0.9), ScaledTanh(0, 0): the lists ran out.
    EXPECT_EQ(c.activations[0][0].kind, RNNJIT_ACTIVATION_HARD_SIGMOID);
    EXPECT_EQ(c.activations[0][0].alpha, 0.3f);
    EXPECT_EQ(c.activations[0][0].beta, 0.4f);
    EXPECT_EQ(c.activations[0][1].kind, RNNJIT_ACTIVATION_ELU);
    EXPECT_EQ(c.activations[0][1].alpha, 0.9f);
    EXPECT_EQ(c.activations[0][2].kind, RNNJIT_ACTIVATION_SCALED_TANH);
    EXPECT_EQ(c.activations[0][2].alpha, 0.0f);
    // Reverse: the same names with ONNX Runtime's defaults, HardSigmoid(0.2, 0.5), Elu(1).
    EXPECT_EQ(c.activations[1][0].alpha, 0.2f);
    EXPECT_EQ(c.activations[1][0].beta, 0.5f);
    EXPECT_EQ(c.activations[1][1].alpha, 1.0f);
  }
  {  // The cell's own functions stay standard; an RNN of LeakyRelu >= 0 is the rnn_relu cell.
    const std::vector<const char*> names = {"Sigmoid", "Softplus"};
    const auto a = onnx_attrs(RNNJIT_ONNX_GRU, "forward", names, {}, {});
    ASSERT_EQ(rnnjit_onnx_config(&a, 2, &c), RNNJIT_STATUS_OK) << rnnjit_last_error();
    EXPECT_EQ(c.activations[0][0].kind, RNNJIT_ACTIVATION_STANDARD);
    EXPECT_EQ(c.activations[0][1].kind, RNNJIT_ACTIVATION_SOFTPLUS);
    const std::vector<const char*> leaky = {"LeakyRelu"}, negative = {"LeakyRelu"};
    const std::vector<float> positive_alpha = {0.2f}, negative_alpha = {-0.2f};  // outlive the attributes
    const auto b = onnx_attrs(RNNJIT_ONNX_RNN, "forward", leaky, positive_alpha, {});
    ASSERT_EQ(rnnjit_onnx_config(&b, 2, &c), RNNJIT_STATUS_OK) << rnnjit_last_error();
    EXPECT_EQ(c.cell, RNNJIT_CELL_RNN_RELU);
    EXPECT_EQ(c.relu_alpha, 0.2f);
    EXPECT_EQ(c.activations[0][0].kind, RNNJIT_ACTIVATION_STANDARD);
    const auto n = onnx_attrs(RNNJIT_ONNX_RNN, "forward", negative, negative_alpha, {});
    ASSERT_EQ(rnnjit_onnx_config(&n, 2, &c), RNNJIT_STATUS_OK) << rnnjit_last_error();
    EXPECT_EQ(c.cell, RNNJIT_CELL_RNN_TANH);
    EXPECT_EQ(c.activations[0][0].kind, RNNJIT_ACTIVATION_LEAKY_RELU);
    EXPECT_EQ(c.activations[0][0].alpha, -0.2f);
  }
  const auto refused = [&](const rnnjit_onnx_attributes_t& a, rnnjit_status_t status, const char* part) {
    EXPECT_EQ(rnnjit_onnx_config(&a, 2, &c), status) << part << ": " << rnnjit_last_error();
    EXPECT_NE(std::string(rnnjit_last_error()).find(part), std::string::npos) << rnnjit_last_error();
  };
  const std::vector<const char*> swish = {"Swish"}, elu = {"Elu"}, tanh = {"Tanh"};
  refused(onnx_attrs(RNNJIT_ONNX_RNN, "forward", swish, {}, {}), RNNJIT_STATUS_INVALID_ARGUMENT,
          "unknown activation 'Swish'");
  refused(onnx_attrs(RNNJIT_ONNX_RNN, "forward", elu, {INFINITY}, {}), RNNJIT_STATUS_UNSUPPORTED, "must be finite");
  refused(onnx_attrs(RNNJIT_ONNX_RNN, "forward", tanh, {0.5f}, {}), RNNJIT_STATUS_UNSUPPORTED,
          "activations read only 0 and 0 of them");
  refused(onnx_attrs(RNNJIT_ONNX_RNN, "forward", elu, {1.0f}, {2.0f}), RNNJIT_STATUS_UNSUPPORTED,
          "activations read only 1 and 0 of them");
}

}  // namespace
}  // namespace rnnjit::test
