#include "rnnjit/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace rnnjit {
namespace {

// BLAS indexes with 32-bit ints, so every GEMM dimension and leading dimension must fit one.
constexpr std::int64_t kMaxDim = std::numeric_limits<std::int32_t>::max();
// No tensor or weight buffer may hold more elements than this: 2^34 floats (64 GiB) per buffer
// keeps every byte count far from overflow on 64-bit size_t and ptrdiff_t.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 34;

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements)
    throw Error(fmt::format("{} is too large: {} x {} elements overflows the limit of {}", what, a, b,
                            kMaxElements));
  return r;
}

void check_positive(std::int64_t value, const char* field) {
  if (value <= 0) throw Error(fmt::format("{} must be positive, got {}", field, value));
  if (value > kMaxDim) throw Error(fmt::format("{} must be at most {}, got {}", field, kMaxDim, value));
}

}  // namespace

std::string_view to_string(CellKind cell) {
  switch (cell) {
    case CellKind::rnn_relu: return "rnn_relu";
    case CellKind::rnn_tanh: return "rnn_tanh";
    case CellKind::lstm: return "lstm";
    case CellKind::gru: return "gru";
    case CellKind::gru_reset_before: return "gru_reset_before";
    case CellKind::rnn_sigmoid: return "rnn_sigmoid";
  }
  return "unknown";
}

CellKind parse_cell(std::string_view name) {
  for (CellKind c : kCellKinds)
    if (name == to_string(c)) return c;
  throw Error(
      fmt::format("unknown cell '{}' (expected rnn_relu, rnn_tanh, rnn_sigmoid, lstm, gru or gru_reset_before)", name));
}

int gate_count(CellKind cell) {
  switch (cell) {
    case CellKind::rnn_relu:
    case CellKind::rnn_tanh:
    case CellKind::rnn_sigmoid: return 1;
    case CellKind::lstm: return 4;
    case CellKind::gru:
    case CellKind::gru_reset_before: return 3;
  }
  throw Error(fmt::format("unknown cell kind {}", static_cast<int>(cell)));
}

void validate(const RnnConfig& c) {
  if (static_cast<std::size_t>(c.cell) >= kCellKinds.size())
    throw Error(fmt::format("cell kind {} is not one of rnn_relu, rnn_tanh, lstm, gru, gru_reset_before, rnn_sigmoid",
                            static_cast<int>(c.cell)));
  check_positive(c.input_size, "input_size");
  check_positive(c.hidden_size, "hidden_size");
  check_positive(c.num_layers, "num_layers");
  if (c.num_layers > 1024) throw Error(fmt::format("num_layers must be at most 1024, got {}", c.num_layers));
  const bool lstm = c.cell == CellKind::lstm;
  if (c.proj_size < 0 || (c.proj_size > 0 && c.proj_size >= c.hidden_size))
    throw Error(fmt::format("proj_size must be 0 (none) or in [1, hidden_size-1] = [1, {}], got {}",
                            c.hidden_size - 1, c.proj_size));
  if (c.proj_size > 0 && !lstm)
    throw Error(fmt::format("proj_size applies to LSTM only, not to {}", to_string(c.cell)));
  if (!(c.clip >= 0.0f) || std::isinf(c.clip))
    throw Error(fmt::format("clip must be a finite value >= 0 (0: none), got {}", c.clip));
  if (c.clip > 0.0f && !lstm) throw Error(fmt::format("clip applies to LSTM only, not to {}", to_string(c.cell)));
  if (!(c.gate_clip >= 0.0f) || std::isinf(c.gate_clip))
    throw Error(fmt::format("gate_clip must be a finite value >= 0 (0: none), got {}", c.gate_clip));
  if (!(c.relu_alpha >= 0.0f) || std::isinf(c.relu_alpha))
    throw Error(fmt::format("relu_alpha must be a finite value >= 0 (0: plain ReLU), got {}", c.relu_alpha));
  if (c.relu_alpha > 0.0f && c.cell != CellKind::rnn_relu)
    throw Error(fmt::format("relu_alpha applies to rnn_relu only, not to {}", to_string(c.cell)));
  validate_activations(c);
  if (c.peephole && !lstm) throw Error(fmt::format("peephole applies to LSTM only, not to {}", to_string(c.cell)));
  if (c.input_forget && !lstm)
    throw Error(fmt::format("input_forget applies to LSTM only, not to {}", to_string(c.cell)));
  if (!(c.dropout >= 0.0f && c.dropout < 1.0f))
    throw Error(fmt::format("dropout must be in [0, 1), got {}", c.dropout));
  if (c.reverse && c.bidirectional)
    throw Error("reverse applies to unidirectional networks (a bidirectional one already reads both ways)");
  if (c.sum_directions && !c.bidirectional)
    throw Error("sum_directions applies to bidirectional networks (it sums their two directions)");
  if (c.independent_stacks && !c.bidirectional)
    throw Error("independent_stacks applies to bidirectional networks (a stack of layers per direction)");
  const std::int64_t gh = checked_mul(c.gates(), c.hidden_size, "gates*hidden_size");
  if (gh > kMaxDim) throw Error(fmt::format("gates*hidden_size = {} exceeds {}", gh, kMaxDim));
  const std::int64_t widest_input = std::max(c.input_size, c.directions() * c.state_size());
  // Largest parameter count: all blocks of all layers (W_hr adds P*H < H*H per direction, the
  // peepholes 3*H).
  const std::int64_t peepholes = c.peephole ? 3 * c.hidden_size : 0;
  const std::int64_t per_dir = checked_mul(gh, widest_input + c.state_size() + 2, "weights of one layer") +
                               checked_mul(c.proj_size, c.hidden_size, "weight_hr") + peepholes;
  checked_mul(per_dir, c.num_layers * c.directions(), "weight buffer");
}

void validate(const RnnConfig& c, const Shape& s) {
  validate(c);
  check_positive(s.seq_len, "seq_len");
  check_positive(s.batch, "batch");
  const std::int64_t rows = checked_mul(s.seq_len, s.batch, "seq_len*batch");
  if (rows > kMaxDim) throw Error(fmt::format("seq_len*batch = {} exceeds {}", rows, kMaxDim));
  const std::int64_t widest = std::max<std::int64_t>({c.input_size, c.directions() * c.hidden_size,
                                                     c.gates() * c.hidden_size * c.directions()});
  checked_mul(rows, widest, "activations of one layer (seq_len*batch*width)");
  checked_mul(checked_mul(rows, c.gates() * c.hidden_size * c.directions(), "gate buffer"),
              c.num_layers, "reserve space (seq_len*batch*gates*hidden*layers)");
}

std::string describe(const RnnConfig& c) {
  std::string s = fmt::format("{} I={} H={} L={} D={}", to_string(c.cell), c.input_size, c.hidden_size,
                              c.num_layers, c.directions());
  if (c.reverse) s += " reverse";
  if (c.proj_size > 0) s += fmt::format(" P={}", c.proj_size);
  if (c.clip > 0.0f) s += fmt::format(" clip={}", c.clip);
  if (c.dropout > 0.0f) s += fmt::format(" dropout={}", c.dropout);
  if (c.batch_first) s += " batch_first";
  if (c.gate_clip > 0.0f) s += fmt::format(" gate_clip={}", c.gate_clip);
  if (c.relu_alpha > 0.0f) s += fmt::format(" relu_alpha={}", c.relu_alpha);
  if (c.peephole) s += " peephole";
  if (c.input_forget) s += " input_forget";
  if (!c.bias) s += " no_bias";
  if (c.sum_directions) s += " sum_directions";
  if (c.independent_stacks) s += " independent_stacks";
  if (c.custom_activations()) s += " activations=" + describe_activations(c);
  return s;
}

std::int64_t x_elements(const RnnConfig& c, const Shape& s) { return s.seq_len * s.batch * c.input_size; }
std::int64_t y_elements(const RnnConfig& c, const Shape& s) {
  return s.seq_len * s.batch * c.output_size();
}
std::int64_t state_elements(const RnnConfig& c, const Shape& s) {
  return c.num_layers * c.directions() * s.batch * c.state_size();
}
std::int64_t cell_state_elements(const RnnConfig& c, const Shape& s) {
  return c.num_layers * c.directions() * s.batch * c.hidden_size;
}

}  // namespace rnnjit
