// Inputs and the oracle of tests/install_consumer.sh (the installed-package test).
//
//   install_consumer_case gen DIR          writes DIR/fwd, DIR/bi and DIR/peep: W.npy, R.npy, X.npy
//                                          (and B.npy in bi and peep, P.npy in peep) of ONNX LSTM
//                                          nodes, forward and bidirectional (peep: with peepholes)
//   install_consumer_case check CASE OUT   compares the Y_h lines that examples/onnx_lstm.c printed
//                                          to OUT with an LSTM written from the ONNX equations
//
// The oracle is deliberately independent of rnnjit's code: plain double loops over ONNX's own
// layouts and gate order (i, o, f, c), no permutation into rnnjit's layout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rnnjit/npy.hpp"

namespace {

namespace npy = rnnjit::npy;

struct Case {
  std::int64_t T, N, I, H, D;
  bool bias;
  bool peepholes = false;
};

void generate(const std::filesystem::path& dir, const Case& c, unsigned seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.6f, 0.6f);
  auto random = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& e : v) e = u(rng);
    return v;
  };
  const std::int64_t G = 4;
  npy::write_f32((dir / "W.npy").string(), {c.D, G * c.H, c.I}, random(c.D * G * c.H * c.I));
  npy::write_f32((dir / "R.npy").string(), {c.D, G * c.H, c.H}, random(c.D * G * c.H * c.H));
  if (c.bias) npy::write_f32((dir / "B.npy").string(), {c.D, 2 * G * c.H}, random(c.D * 2 * G * c.H));
  npy::write_f32((dir / "X.npy").string(), {c.T, c.N, c.I}, random(c.T * c.N * c.I));
  if (c.peepholes) npy::write_f32((dir / "P.npy").string(), {c.D, 3 * c.H}, random(c.D * 3 * c.H));
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ONNX LSTM, default attributes, layout 0, peepholes P [D, 3*H] (rows i, o, f) if given: Y_h [D, N, H].
std::vector<double> onnx_lstm_y_h(const std::filesystem::path& dir) {
  const npy::Array w = npy::read((dir / "W.npy").string());
  const std::int64_t D = w.shape.at(0), H = w.shape.at(1) / 4, I = w.shape.at(2);
  const std::vector<float> W = npy::as_f32(w, "W.npy");
  const std::vector<float> R = npy::read_f32((dir / "R.npy").string(), {D, 4 * H, H});
  const npy::Array x = npy::read((dir / "X.npy").string());
  const std::int64_t T = x.shape.at(0), N = x.shape.at(1);
  const std::vector<float> X = npy::as_f32(x, "X.npy");
  std::vector<float> B(static_cast<std::size_t>(D * 8 * H), 0.0f);
  if (std::filesystem::exists(dir / "B.npy")) B = npy::read_f32((dir / "B.npy").string(), {D, 8 * H});
  std::vector<float> P(static_cast<std::size_t>(D * 3 * H), 0.0f);
  if (std::filesystem::exists(dir / "P.npy")) P = npy::read_f32((dir / "P.npy").string(), {D, 3 * H});
  std::vector<double> y_h(static_cast<std::size_t>(D * N * H));
  for (std::int64_t d = 0; d < D; ++d) {
    for (std::int64_t n = 0; n < N; ++n) {
      std::vector<double> h(static_cast<std::size_t>(H), 0.0), c(static_cast<std::size_t>(H), 0.0);
      for (std::int64_t step = 0; step < T; ++step) {
        const std::int64_t t = d == 0 ? step : T - 1 - step;  // the second direction is "reverse"
        std::vector<double> gate(static_cast<std::size_t>(4 * H));  // i, o, f, c
        for (std::int64_t r = 0; r < 4 * H; ++r) {
          double s = B[static_cast<std::size_t>(d * 8 * H + r)] + B[static_cast<std::size_t>(d * 8 * H + 4 * H + r)];
          for (std::int64_t k = 0; k < I; ++k)
            s += double(X[static_cast<std::size_t>((t * N + n) * I + k)]) * W[static_cast<std::size_t>((d * 4 * H + r) * I + k)];
          for (std::int64_t k = 0; k < H; ++k)
            s += h[static_cast<std::size_t>(k)] * R[static_cast<std::size_t>((d * 4 * H + r) * H + k)];
          gate[static_cast<std::size_t>(r)] = s;
        }
        for (std::int64_t k = 0; k < H; ++k) {
          const auto at = [&](int g) { return gate[static_cast<std::size_t>(g * H + k)]; };
          const auto peep = [&](int g) { return double(P[static_cast<std::size_t>(d * 3 * H + g * H + k)]); };
          const double c_prev = c[static_cast<std::size_t>(k)];
          const double i = sigmoid(at(0) + peep(0) * c_prev), f = sigmoid(at(2) + peep(2) * c_prev);
          const double g = std::tanh(at(3));
          const double c_t = f * c_prev + i * g;
          const double o = sigmoid(at(1) + peep(1) * c_t);
          c[static_cast<std::size_t>(k)] = c_t;
          h[static_cast<std::size_t>(k)] = o * std::tanh(c_t);
        }
      }
      for (std::int64_t k = 0; k < H; ++k) y_h[static_cast<std::size_t>((d * N + n) * H + k)] = h[static_cast<std::size_t>(k)];
    }
  }
  return y_h;
}

int check(const std::filesystem::path& dir, const std::filesystem::path& output) {
  const std::vector<double> expected = onnx_lstm_y_h(dir);
  std::ifstream in(output);
  std::string line;
  std::vector<double> actual;
  while (std::getline(in, line)) {
    if (line.rfind("Y_h[", 0) != 0) continue;
    std::istringstream values(line.substr(line.find('=') + 1));
    for (double v; values >> v;) actual.push_back(v);
  }
  if (actual.size() != expected.size()) {
    std::fprintf(stderr, "%s: %zu Y_h values, expected %zu\n", output.c_str(), actual.size(), expected.size());
    return 1;
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double e = std::abs(actual[i] - expected[i]);
    if (std::isnan(e) || e > worst) worst = e;  // NaN stays: nothing compares above it (std::max would drop it)
  }
  std::printf("%s: %zu Y_h values, max |error| %.3g against the ONNX-equation LSTM\n", output.c_str(), actual.size(),
              worst);
  return worst <= 5e-5 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "gen" && argc == 3) {
      generate(std::filesystem::path(argv[2]) / "fwd", {.T = 7, .N = 3, .I = 5, .H = 6, .D = 1, .bias = false}, 1);
      generate(std::filesystem::path(argv[2]) / "bi", {.T = 5, .N = 2, .I = 3, .H = 17, .D = 2, .bias = true}, 2);
      generate(std::filesystem::path(argv[2]) / "peep",
               {.T = 6, .N = 2, .I = 4, .H = 19, .D = 2, .bias = true, .peepholes = true}, 3);
      return 0;
    }
    if (mode == "check" && argc == 4) return check(argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "install_consumer_case: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: install_consumer_case gen DIR | check CASE_DIR OUTPUT\n");
  return 2;
}
