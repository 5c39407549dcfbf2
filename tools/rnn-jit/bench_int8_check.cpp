// rnn-jit bench: oneDNN's int8 peer checked against rnnjit's FP32 output (bench_int8_check.hpp).
#include "tools/rnn-jit/bench_int8_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "rnnjit/error.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::cli {

std::string check_int8_peer(const RnnConfig& config, const Shape& shape, std::span<const float> weights,
                            std::span<const float> x, int threads, bench::OnednnInt8Rnn& peer) {
  Execution fp32 = Rnn(config, {.threads = threads}).prepare(shape, Mode::inference);
  std::vector<float> want(static_cast<std::size_t>(y_elements(config, shape))), got(want.size());
  ForwardIo io{};
  io.x = x;
  io.y = want;
  fp32.forward(weights, io);
  io.y = got;
  peer.forward(io);
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
  if (std::isnan(worst) || std::any_of(got.begin(), got.end(), [](float v) { return std::isnan(v); }))
    worst = INFINITY;

  auto most = [](std::span<const float> v) {
    float m = 0.0f;
    for (float e : v) m = std::max(m, std::fabs(e));
    return static_cast<double>(m);
  };
  const double k = static_cast<double>(std::max(config.input_size, config.directions() * config.state_size()) +
                                       std::max(config.state_size(), config.hidden_size));
  // Data quantized in 255 steps over about twice max|a|, weights in 2 * weight_max steps.
  const double levels = peer.weight_max();
  const double product = most(weights) * std::max(1.0, most(x));
  const double bound = 6.0 * std::sqrt(k / 12.0) * product * std::sqrt(1.0 / (127.0 * 127.0) + 1.0 / (levels * levels)) *
                       std::sqrt(static_cast<double>(shape.seq_len * config.num_layers));
  if (!(worst <= bound))
    throw Error(fmt::format("oneDNN's int8 result differs from rnnjit's FP32 by {:.3g} (beyond the int8 bound {:.3g})",
                            worst, bound));
  return fmt::format("max |y - rnnjit FP32| {:.2g} (int8 bound {:.2g})", worst, bound);
}

}  // namespace rnnjit::cli
