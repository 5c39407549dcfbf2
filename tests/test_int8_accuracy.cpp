// An LSTM and a GRU trained here (rnnjit's own FP32 training, Adam, a linear readout of the last
// step's h) on a synthetic sequence task keep their accuracy within 1 point under int8
// inference (Quantize::int8_dynamic): the quantization's error on the gates is far below the
// margins a trained network classifies with. The task: 12 steps of one-hot symbols (4 of them,
// with noise), the class being the first step's symbol (0, 1 or 2), which the network must carry
// through the 11 distracting steps. Runs on every int8 unit (the avx2 unit with its 7-bit
// activations too); skips where the CPU has none (not even AVX2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codegen/plan.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {
namespace {

constexpr std::int64_t kT = 12, kI = 4, kClasses = 3;

struct Data {
  std::vector<float> x;         // [T, N, I]
  std::vector<std::int32_t> y;  // [N]
};

Data make_data(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> cls(0, kClasses - 1), sym(0, kI - 1);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  Data d{std::vector<float>(static_cast<std::size_t>(kT * n * kI)), std::vector<std::int32_t>(static_cast<std::size_t>(n))};
  for (std::int64_t i = 0; i < n; ++i) {
    d.y[static_cast<std::size_t>(i)] = cls(rng);
    for (std::int64_t t = 0; t < kT; ++t) {
      const int s = t == 0 ? d.y[static_cast<std::size_t>(i)] : sym(rng);
      for (std::int64_t j = 0; j < kI; ++j) d.x[static_cast<std::size_t>((t * n + i) * kI + j)] = (j == s) + noise(rng);
    }
  }
  return d;
}

struct Adam {
  std::vector<float> m, v;
  int t = 0;
  void step(std::vector<float>& w, const std::vector<float>& g, float lr) {
    if (m.empty()) m.assign(w.size(), 0.0f), v.assign(w.size(), 0.0f);
    ++t;
    const float c1 = 1.0f - std::pow(0.9f, static_cast<float>(t)), c2 = 1.0f - std::pow(0.999f, static_cast<float>(t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] = 0.9f * m[i] + 0.1f * g[i];
      v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + 1e-8f);
    }
  }
};

struct Model {
  RnnConfig config;
  std::vector<float> w, readout;  // readout: [classes, H + 1] (the last column the bias)
};

// Logits of the last step's h of every element: [N, classes].
std::vector<float> logits(const Model& m, const std::vector<float>& y, std::int64_t n) {
  const std::int64_t H = m.config.hidden_size;
  std::vector<float> out(static_cast<std::size_t>(n * kClasses));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < kClasses; ++c) {
      float s = m.readout[static_cast<std::size_t>(c * (H + 1) + H)];
      for (std::int64_t k = 0; k < H; ++k)
        s += m.readout[static_cast<std::size_t>(c * (H + 1) + k)] * y[static_cast<std::size_t>(((kT - 1) * n + i) * H + k)];
      out[static_cast<std::size_t>(i * kClasses + c)] = s;
    }
  return out;
}

Model train(CellKind cell) {
  Model m{{.cell = cell, .input_size = kI, .hidden_size = 24}, {}, {}};
  const std::int64_t H = m.config.hidden_size, N = 64;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  m.w.resize(static_cast<std::size_t>(WeightLayout(m.config).total_elements()));
  for (float& e : m.w) e = u(rng);
  if (cell == CellKind::lstm) {  // forget gates open at the start (the usual initialisation), so the first step is remembered
    const std::int64_t at = WeightLayout(m.config).block(0, 0, ParamKind::bias_ih).offset + H;
    std::fill_n(m.w.begin() + at, H, 2.0f);
  }
  m.readout.resize(static_cast<std::size_t>(kClasses * (H + 1)));
  for (float& e : m.readout) e = u(rng);
  Execution ex = Rnn(m.config, {.threads = 1}).prepare({kT, N}, Mode::training);
  Adam rnn_opt, readout_opt;
  std::vector<float> y(static_cast<std::size_t>(kT * N * H)), dy(y.size()), dx(static_cast<std::size_t>(kT * N * kI));
  std::vector<float> dw(m.w.size()), dread(m.readout.size());
  for (int step = 0; step < 800; ++step) {
    const Data d = make_data(N, 1000 + static_cast<unsigned>(step));
    ex.forward(m.w, {.x = d.x, .y = y});
    const std::vector<float> z = logits(m, y, N);
    std::fill(dy.begin(), dy.end(), 0.0f);
    std::fill(dread.begin(), dread.end(), 0.0f);
    for (std::int64_t i = 0; i < N; ++i) {
      const float* zi = z.data() + i * kClasses;
      const float top = *std::max_element(zi, zi + kClasses);
      float p[kClasses], sum = 0.0f;
      for (std::int64_t c = 0; c < kClasses; ++c) sum += p[c] = std::exp(zi[c] - top);
      for (std::int64_t c = 0; c < kClasses; ++c) {
        const float g = (p[c] / sum - (c == d.y[static_cast<std::size_t>(i)])) / static_cast<float>(N);
        const float* h = y.data() + ((kT - 1) * N + i) * H;
        for (std::int64_t k = 0; k < H; ++k) {
          dread[static_cast<std::size_t>(c * (H + 1) + k)] += g * h[k];
          dy[static_cast<std::size_t>(((kT - 1) * N + i) * H + k)] += g * m.readout[static_cast<std::size_t>(c * (H + 1) + k)];
        }
        dread[static_cast<std::size_t>(c * (H + 1) + H)] += g;
      }
    }
    ex.backward_data(m.w, {.dy = dy, .dx = dx});
    ex.backward_weights({.x = d.x, .dweights = dw});
    rnn_opt.step(m.w, dw, 0.01f);
    readout_opt.step(m.readout, dread, 0.01f);
  }
  return m;
}

double accuracy(const Model& m, const Data& d, std::int64_t n, Quantize quantize) {
  Execution ex = Rnn(m.config, {.threads = 2, .quantize = quantize}).prepare({kT, n}, Mode::inference);
  EXPECT_EQ(ex.plan().quantize, quantize);
  std::vector<float> y(static_cast<std::size_t>(kT * n * m.config.hidden_size));
  ex.forward(m.w, {.x = d.x, .y = y});
  const std::vector<float> z = logits(m, y, n);
  std::int64_t right = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* zi = z.data() + i * kClasses;
    right += std::max_element(zi, zi + kClasses) - zi == d.y[static_cast<std::size_t>(i)];
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

class Int8Accuracy : public testing::TestWithParam<CellKind> {};

TEST_P(Int8Accuracy, TrainedNetworkKeepsItsAccuracyWithinOnePoint) {
  if (!int8_unit()) GTEST_SKIP() << "this CPU has no int8 unit (not even AVX2)";
  const Model m = train(GetParam());
  const std::int64_t n = 2000;
  const Data test = make_data(n, 7);
  const double fp32 = accuracy(m, test, n, Quantize::none), int8 = accuracy(m, test, n, Quantize::int8_dynamic);
  // Chance is 1/3; the noise leaves about 0.86 within reach (many first symbols are ambiguous, so
  // a share of the samples lies near the decision boundaries, where int8 could move them).
  EXPECT_GE(fp32, 0.75) << "the network did not learn the task: the comparison would say nothing";
  EXPECT_LE(std::abs(fp32 - int8), 0.01) << "FP32 " << fp32 << ", int8 " << int8;
  std::printf("%s: accuracy FP32 %.4f, int8 %.4f\n", std::string(to_string(GetParam())).c_str(), fp32, int8);
}

INSTANTIATE_TEST_SUITE_P(Cells, Int8Accuracy, testing::Values(CellKind::lstm, CellKind::gru),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace rnnjit
