// rnn-jit demo: the LSTM of DeepSpeech2 (T=300, N=20, I=H=800, one layer) with random weights
// (uniform in +-1/sqrt(H), fixed seed), run once through a backend, with its FLOP count and time.
// Every size is a flag, so the same demo runs other shapes; --mode train adds both backward passes.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rnnjit/rnn.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

struct DemoFlags {
  ConfigFlags config{.cell = "lstm", .input_size = 800, .hidden_size = 800, .layers = 1, .bidirectional = false};
  ShapeFlags shape{.seq = 300, .batch = 20, .mode = "infer"};
  BackendFlags backend{.backend = "reference"};
  std::uint64_t seed = 1;
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void fill_uniform(std::vector<float>& v, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (float& e : v) e = dist(rng);
}

void report(const char* what, double ms, double flops) {
  fmt::print("  {:<17} {:10.2f} ms  {:8.2f} GFLOP  {:8.2f} GFLOPS\n", what, ms, flops * 1e-9,
             ms > 0 ? flops / (ms * 1e6) : 0.0);
}

// A small fingerprint of a result, to compare backends by eye.
void checksum(const char* what, const std::vector<float>& v) {
  double sum = 0, max_abs = 0;
  for (float e : v) {
    sum += e;
    max_abs = std::fmax(max_abs, std::fabs(static_cast<double>(e)));
  }
  fmt::print("  {:<17} sum {:+.6e}  max|.| {:.6e}\n", what, sum, max_abs);
}

int demo(const DemoFlags& f) {
  const RnnConfig config = build_config(f.config);
  const Shape shape = build_shape(f.shape);
  const Mode mode = build_mode(f.shape);
  const Options options = build_options(f.backend);
  validate_flags(config, shape);

  const Rnn rnn(config, options);
  const std::int64_t N = shape.batch, H = config.hidden_size;
  const std::int64_t L = config.num_layers, D = config.directions();
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  std::mt19937_64 rng(f.seed);
  std::vector<float> weights(static_cast<std::size_t>(rnn.weights_size()));
  std::vector<float> x(static_cast<std::size_t>(x_elements(config, shape)));
  fill_uniform(weights, bound, rng);
  fill_uniform(x, 1.0f, rng);

  fmt::print("rnn-jit demo: {}, {}, {}\n", describe(config), describe(shape), to_string(mode));
  fmt::print("  weights           {} parameters, uniform in +-{:.6f} (1/sqrt(H)), seed {}\n", rnn.weights_size(),
             bound, f.seed);

  auto start = Clock::now();
  Execution ex = rnn.prepare(shape, mode);
  const double prepare_ms = ms_since(start);
  fmt::print("  backend           {} (requested {})\n", to_string(ex.backend()), f.backend.backend);
  fmt::print("  {:<17} {:10.2f} ms\n", "prepare", prepare_ms);

  const std::size_t states = static_cast<std::size_t>(L * D * N * H);
  const bool lstm = config.cell == CellKind::lstm;
  std::vector<float> y(static_cast<std::size_t>(y_elements(config, shape))), hy(states), cy(lstm ? states : 0);
  const double fwd_flops = forward_flops(config, shape);

  start = Clock::now();
  ForwardIo fio;
  fio.x = x;
  fio.y = y;
  fio.hy = hy;
  fio.cy = cy;
  ex.forward(weights, fio);
  report("forward", ms_since(start), fwd_flops);

  if (mode == Mode::training) {
    // Backward data (dx and dh GEMMs) and backward weights (dW_ih and dW_hh) each cost as
    // many FLOPs as the forward GEMMs.
    std::vector<float> dy(y.size()), dx(x.size());
    fill_uniform(dy, 1.0f, rng);
    start = Clock::now();
    BackwardDataIo bio;
    bio.dy = dy;
    bio.dx = dx;
    ex.backward_data(weights, bio);
    report("backward data", ms_since(start), fwd_flops);
    std::vector<float> dw(weights.size());
    start = Clock::now();
    BackwardWeightsIo wio;
    wio.x = x;
    wio.dweights = dw;
    ex.backward_weights(wio);
    report("backward weights", ms_since(start), fwd_flops);
    checksum("y", y);
    checksum("dx", dx);
    checksum("dweights", dw);
  } else {
    checksum("y", y);
  }
  return kExitOk;
}

CommandAction setup_demo(CLI::App& sub) {
  auto f = std::make_shared<DemoFlags>();
  add_config_flags(sub, f->config, /*required=*/false);
  add_shape_flags(sub, f->shape, /*required=*/false);
  add_backend_flags(sub, f->backend);
  sub.add_option("--seed", f->seed, "seed of the random weights and inputs")->capture_default_str();
  return [f] { return demo(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(demo, "time the DeepSpeech2 LSTM (T=300 N=20 I=H=800) on random weights", setup_demo);

}  // namespace rnnjit::cli
