#include "runtime/call_checks.hpp"

#include <fmt/format.h>

namespace rnnjit {
namespace {

void check_span(std::size_t size, std::int64_t expected, const char* name, bool optional, const std::string& shape) {
  if (size == 0 && (optional || expected == 0)) return;
  if (static_cast<std::int64_t>(size) != expected)
    throw Error(fmt::format("{} has {} elements, expected {} {}", name, size, expected, shape));
}

}  // namespace

CallChecks::CallChecks(const RnnConfig& config, const Shape& shape, Mode mode)
    : config_(config), shape_(shape), mode_(mode), weights_(WeightLayout(config).total_elements()),
      shape_text_(fmt::format("for {} T={} N={}", describe(config), shape.seq_len, shape.batch)) {}

void CallChecks::weights(std::span<const float> w) const {
  if (static_cast<std::int64_t>(w.size()) != weights_)  // the text only for the message: every call checks
    check_span(w.size(), weights_, "weights", false, fmt::format("for {}", describe(config_)));
}

void CallChecks::cell_state(std::size_t size, const char* name) const {
  if (config_.cell == CellKind::lstm)
    check_span(size, cell_state_elements(config_, shape_), name, true, shape_text_);
  else if (size != 0)
    throw Error(fmt::format("{} is only used by LSTM, not by {}", name, to_string(config_.cell)));
}

void CallChecks::forward(const ForwardIo& io) const {
  const std::int64_t states = state_elements(config_, shape_);
  check_span(io.x.size(), x_elements(config_, shape_), "x", false, shape_text_);
  check_span(io.y.size(), y_elements(config_, shape_), "y", false, shape_text_);
  check_span(io.hx.size(), states, "hx", true, shape_text_);
  check_span(io.hy.size(), states, "hy", true, shape_text_);
  cell_state(io.cx.size(), "cx");
  cell_state(io.cy.size(), "cy");
  check_span(io.seq_lengths.size(), shape_.batch, "seq_lengths", true, shape_text_);
  for (std::size_t n = 0; n < io.seq_lengths.size(); ++n)
    if (io.seq_lengths[n] < 1 || io.seq_lengths[n] > shape_.seq_len)
      throw Error(fmt::format("seq_lengths[{}] = {} is outside [1, T = {}]", n, io.seq_lengths[n], shape_.seq_len));
}

void CallChecks::backward_data(const BackwardDataIo& io) const {
  const std::int64_t states = state_elements(config_, shape_);
  check_span(io.dy.size(), y_elements(config_, shape_), "dy", false, shape_text_);
  check_span(io.dx.size(), x_elements(config_, shape_), "dx", false, shape_text_);
  check_span(io.dhy.size(), states, "dhy", true, shape_text_);
  check_span(io.dhx.size(), states, "dhx", true, shape_text_);
  cell_state(io.dcy.size(), "dcy");
  cell_state(io.dcx.size(), "dcx");
}

void CallChecks::backward_weights(const BackwardWeightsIo& io) const {
  check_span(io.x.size(), x_elements(config_, shape_), "x", false, shape_text_);
  check_span(io.dweights.size(), weights_, "dweights", false, shape_text_);
}

void CallChecks::require_training(const char* call) const {
  if (mode_ != Mode::training)
    throw Error(fmt::format("{} needs an Execution prepared for training, this one is for inference", call));
}

void CallChecks::scratch(std::span<const std::byte> s, std::size_t needed, const char* name) {
  if (s.empty()) return;
  if (s.size() < needed) throw Error(fmt::format("{} has {} bytes, needs {}", name, s.size(), needed));
}

void ReserveCycle::require_forwarded(const std::byte* reserve) const {
  if (state_ == State::forwarded && (!reserve || reserve == owner_)) return;
  throw Error(reserve ? "backward_data needs a forward training call with this reserve first (backward_data "
                        "consumes the reserve's gates)"
                      : "backward_data needs a forward training call first");
}

void ReserveCycle::require_backpropagated(const std::byte* reserve) const {
  if (state_ == State::backpropagated && (!reserve || reserve == owner_)) return;
  throw Error(reserve ? "backward_weights needs backward_data with this reserve first"
                      : "backward_weights needs backward_data first");
}

}  // namespace rnnjit
