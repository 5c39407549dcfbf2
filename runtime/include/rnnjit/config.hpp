// rnnjit: the network description (cell, sizes, layers, direction) and the problem shape.
//
// Tensors are sequence-major, as in cuDNN, MXNet and PyTorch's default:
//   x [T, N, I], y [T, N, D*H] (forward direction first), h0/c0/hy/cy [L*D, N, H].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rnnjit/error.hpp"

namespace rnnjit {

enum class CellKind : std::uint8_t { rnn_relu = 0, rnn_tanh = 1, lstm = 2, gru = 3 };

// "rnn_relu", "rnn_tanh", "lstm", "gru".
std::string_view to_string(CellKind cell);
// Throws Error("unknown cell 'x' (expected rnn_relu, rnn_tanh, lstm or gru)").
CellKind parse_cell(std::string_view name);

// Number of gates G: 1 for vanilla RNN, 4 for LSTM (i,f,g,o), 3 for GRU (r,z,n).
int gate_count(CellKind cell);

struct RnnConfig {
  CellKind cell = CellKind::lstm;
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 1;
  bool bidirectional = false;

  int directions() const { return bidirectional ? 2 : 1; }
  int gates() const { return gate_count(cell); }
  // Input width of layer l: input_size for l == 0, D*H above it.
  std::int64_t layer_input_size(std::int64_t layer) const {
    return layer == 0 ? input_size : directions() * hidden_size;
  }
  bool operator==(const RnnConfig&) const = default;
};

// Sequence length T and batch N of one call.
struct Shape {
  std::int64_t seq_len = 0;
  std::int64_t batch = 0;
  bool operator==(const Shape&) const = default;
};

// Each throws Error naming the field and its value: non-positive sizes, sizes whose element
// counts (weights, activations, workspace) would overflow or exceed what BLAS can index.
void validate(const RnnConfig& config);
void validate(const RnnConfig& config, const Shape& shape);

// "lstm I=800 H=800 L=1 D=1"
std::string describe(const RnnConfig& config);

// Element counts of the call's tensors.
std::int64_t x_elements(const RnnConfig& config, const Shape& shape);      // T*N*I
std::int64_t y_elements(const RnnConfig& config, const Shape& shape);      // T*N*D*H
std::int64_t state_elements(const RnnConfig& config, const Shape& shape);  // L*D*N*H

}  // namespace rnnjit
