// rnnjit: the network description (cell, sizes, layers, direction) and the problem shape.
//
// Tensors are sequence-major, as in cuDNN, MXNet and PyTorch's default:
//   x [T, N, I], y [T, N, D*S] (forward direction first), h0/hy [L*D, N, S], c0/cy [L*D, N, H],
// where S is the width of h: the projection size P for an LSTM with projection, else H. With
// sum_directions, y is [T, N, S] (the two directions' sum).
// With batch_first, x, y and their gradients are [N, T, *] instead (states keep their layout).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "rnnjit/error.hpp"

namespace rnnjit {

// rnn_relu, rnn_tanh and rnn_sigmoid are the vanilla RNN h = act(W_ih x + b_ih + W_hh h + b_hh)
// with act ReLU (leaky with RnnConfig::relu_alpha), tanh or the logistic sigmoid (oneDNN's
// eltwise_logistic, ONNX's Sigmoid activation).
// gru is the linear-before-reset GRU of PyTorch, cuDNN and MXNet:
//   n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
// gru_reset_before is ONNX's default GRU (linear_before_reset = 0, oneDNN's "vanilla GRU"):
//   n = tanh(W_in x + b_in + W_hn (r * h) + b_hn); same parameters, names and shapes.
enum class CellKind : std::uint8_t {
  rnn_relu = 0, rnn_tanh = 1, lstm = 2, gru = 3, gru_reset_before = 4, rnn_sigmoid = 5
};
// Every cell kind, in the order of their values.
inline constexpr std::array<CellKind, 6> kCellKinds = {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm,
                                                       CellKind::gru,      CellKind::gru_reset_before,
                                                       CellKind::rnn_sigmoid};

// "rnn_relu", "rnn_tanh", "lstm", "gru", "gru_reset_before", "rnn_sigmoid".
std::string_view to_string(CellKind cell);
// Throws Error("unknown cell 'x' (expected rnn_relu, rnn_tanh, rnn_sigmoid, lstm, gru or gru_reset_before)").
CellKind parse_cell(std::string_view name);

// ONNX's activation functions of the recurrent operators (ONNX's names and alpha/beta):
//   relu max(0, x); tanh; sigmoid; affine alpha*x + beta; leaky_relu x >= 0 ? x : alpha*x;
//   thresholded_relu x > alpha ? x : 0; scaled_tanh alpha*tanh(beta*x);
//   hard_sigmoid min(max(alpha*x + beta, 0), 1); elu x >= 0 ? x : alpha*(exp(x) - 1);
//   softsign x/(1 + |x|); softplus log(1 + exp(x)).
// standard: the cell's own function for that role (cell_activation).
enum class Activation : std::uint8_t {
  standard = 0, relu, tanh, sigmoid, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu,
  softsign, softplus
};
inline constexpr int kActivationKinds = 12;  // standard included

// "standard", ONNX's name otherwise ("Relu", "LeakyRelu", ...).
std::string_view to_string(Activation kind);
// ONNX's name of an activation, case-insensitively; throws Error naming the known ones.
Activation parse_activation(std::string_view name);
// How many of alpha and beta the function reads (ONNX's), e.g. 1, 0 for leaky_relu.
int activation_alphas(Activation kind);
int activation_betas(Activation kind);

// One activation with its parameters; alpha and beta are 0 where the function takes none.
struct ActivationFunction {
  Activation kind = Activation::standard;
  float alpha = 0.0f;
  float beta = 0.0f;
  bool operator==(const ActivationFunction&) const = default;
};

// The roles of ONNX's activation list: f (LSTM i, f, o; GRU r, z; the vanilla RNN's one
// function), g (LSTM's cell input g, GRU's n) and h (LSTM's h = o * h(c)).
enum class ActivationRole : std::uint8_t { f = 0, g = 1, h = 2 };
inline constexpr int kActivationRoles = 3;

// Whether the cell is one of the vanilla RNNs (one gate, h = act(pre-activation)).
constexpr bool is_vanilla(CellKind cell) {
  return cell == CellKind::rnn_relu || cell == CellKind::rnn_tanh || cell == CellKind::rnn_sigmoid;
}

// Whether the cell is one of the two GRU forms (gates r,z,n, the same parameter layout).
inline bool is_gru(CellKind cell) { return cell == CellKind::gru || cell == CellKind::gru_reset_before; }

// Number of gates G: 1 for the vanilla RNNs, 4 for LSTM (i,f,g,o), 3 for both GRUs (r,z,n).
int gate_count(CellKind cell);

// Activation roles the cell has: 1 (vanilla RNNs: f), 2 (GRU: f, g), 3 (LSTM: f, g, h).
int activation_role_count(CellKind cell);

struct RnnConfig {
  CellKind cell = CellKind::lstm;
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 1;
  bool bidirectional = false;
  // Unidirectional only: read the sequence from its last step to its first (ONNX's "reverse");
  // outputs stay in time order and parameters keep the forward names (no "_reverse" suffix).
  bool reverse = false;
  // LSTM only: h = W_hr (o * tanh(c)) with W_hr [P, H], 0 < P < H (PyTorch's proj_size,
  // cuDNN's projSize). 0: no projection.
  std::int64_t proj_size = 0;
  // LSTM only: c is clamped to [-clip, clip] at every step (cuDNN's cell clip). 0: no clipping.
  float clip = 0.0f;
  // Training only: each output of every layer but the top one is zeroed with this probability
  // and the rest scaled by 1/(1-p) before the next layer reads it (PyTorch's dropout). 0: none.
  float dropout = 0.0f;
  // x, y, dx and dy are [N, T, *] instead of [T, N, *].
  bool batch_first = false;
  // Every gate's pre-activation (biases and peepholes included) is clamped to
  // [-gate_clip, gate_clip] before its activation, in every cell (ONNX's clip). 0: none.
  float gate_clip = 0.0f;
  // LSTM only: i and f also see P_i * c_{t-1} and P_f * c_{t-1}, o sees P_o * c_t, with the
  // weight_peephole block [3, H] (rows i, f, o) per layer and direction (ONNX's P, oneDNN's
  // peephole LSTM).
  bool peephole = false;
  // LSTM only: f = 1 - i (coupled input and forget gates, ONNX's input_forget); the forget
  // gate's weights and biases stay in the layout, unused (their gradients are 0).
  bool input_forget = false;
  // false: no bias parameters (PyTorch's bias=False, cuDNN's CUDNN_RNN_NO_BIAS): the weight
  // layout has no bias_ih/bias_hh blocks and the gates add no bias.
  bool bias = true;
  // Bidirectional only: every layer's output, y and the input of the layer above, is the sum of
  // its two directions' h, [T, N, S], instead of their concatenation [T, N, 2S] (oneDNN's
  // bidirectional_sum, Keras's merge_mode="sum"). Layers above the first then read S columns.
  bool sum_directions = false;
  // Bidirectional only: each direction is a stack of its own. Layer l's forward direction reads
  // only the forward h of layer l-1, its reverse direction only the reverse h (S columns each),
  // and only the top layer's directions are merged into y (concatenated, or summed with
  // sum_directions): a oneDNN RNN primitive of L > 1 bidirectional layers. Without it, every
  // layer reads the whole (merged) output of the one below, as PyTorch and cuDNN stack.
  bool independent_stacks = false;
  // rnn_relu only: the slope below zero, h = pre > 0 ? pre : relu_alpha * pre (leaky ReLU:
  // oneDNN's eltwise_relu alpha, ONNX's LeakyRelu activation, PyTorch's negative_slope);
  // finite, >= 0. 0: plain ReLU.
  float relu_alpha = 0.0f;
  // ONNX's activations, per direction (forward first) and role (ActivationRole); standard (the
  // zero value) is the cell's own function, so a config that names none is the plain cell.
  // Inference only: a training plan refuses any that differs from the cell's own. Roles the cell
  // does not have and the second direction of a unidirectional network stay standard.
  std::array<std::array<ActivationFunction, kActivationRoles>, 2> activations{};

  int directions() const { return bidirectional ? 2 : 1; }
  int gates() const { return gate_count(cell); }
  // Whether direction d (0 or 1) walks the sequence from its last step.
  bool reversed(int direction) const { return direction == 1 || reverse; }
  // Width S of h (and of each direction's slice of y): P with a projection, else H.
  std::int64_t state_size() const { return proj_size > 0 ? proj_size : hidden_size; }
  // Width of a row of y: S with sum_directions, else D*S.
  std::int64_t output_size() const { return (sum_directions ? 1 : directions()) * state_size(); }
  // Width of the rows of layer l's output that the layer above reads: D*S below the top of
  // independent stacks (both directions' h, unmerged), else output_size().
  std::int64_t layer_output_size(std::int64_t layer) const {
    return independent_stacks && layer + 1 < num_layers ? directions() * state_size() : output_size();
  }
  // Input width of layer l (the columns its W_ih reads): input_size for l == 0; above it S with
  // independent stacks (its own direction's h), else output_size().
  std::int64_t layer_input_size(std::int64_t layer) const {
    return layer == 0 ? input_size : independent_stacks ? state_size() : output_size();
  }
  // Where direction d of layer l finds its input in the rows it reads (x, or the output of the
  // layer below): the row stride, and the first of its layer_input_size(l) columns (an
  // independent stack's direction reads its own direction's h).
  std::int64_t layer_input_stride(std::int64_t layer) const {
    return layer == 0 ? input_size : layer_output_size(layer - 1);
  }
  std::int64_t layer_input_column(std::int64_t layer, int direction) const {
    return layer > 0 && independent_stacks ? direction * state_size() : 0;
  }
  // Whether layer l's output rows are its directions' sum.
  bool sums_output(std::int64_t layer) const {
    return sum_directions && (!independent_stacks || layer + 1 == num_layers);
  }
  // The function of role r in direction d, standard resolved to the cell's own (rnn_relu: Relu,
  // LeakyRelu with relu_alpha).
  ActivationFunction activation(int direction, ActivationRole role) const;
  // Whether direction d (or, without an argument, any direction) uses an activation other than
  // the cell's own.
  bool custom_activations(int direction) const;
  bool custom_activations() const { return custom_activations(0) || (bidirectional && custom_activations(1)); }
  bool operator==(const RnnConfig&) const = default;
};

// The cell's own function for a role (undefined roles: standard).
ActivationFunction cell_activation(CellKind cell, ActivationRole role, float relu_alpha = 0.0f);
// "LeakyRelu(alpha=0.1)", "HardSigmoid(alpha=0.2, beta=0.5)", "Tanh".
std::string describe(const ActivationFunction& f);
// Every direction's functions, resolved: "[Sigmoid, Tanh, Elu(alpha=1); Sigmoid, Tanh, Tanh]".
std::string describe_activations(const RnnConfig& config);
// The activation checks of validate(config) (kinds, finite parameters only where the function
// reads them, nothing for a role or direction the network lacks).
void validate_activations(const RnnConfig& config);

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

// "lstm I=800 H=800 L=1 D=1", followed by the features in use, e.g. " P=400 clip=3 batch_first".
std::string describe(const RnnConfig& config);

// Element counts of the call's tensors.
std::int64_t x_elements(const RnnConfig& config, const Shape& shape);           // T*N*I
std::int64_t y_elements(const RnnConfig& config, const Shape& shape);           // T*N*output_size()
std::int64_t state_elements(const RnnConfig& config, const Shape& shape);       // h: L*D*N*S
std::int64_t cell_state_elements(const RnnConfig& config, const Shape& shape);  // c: L*D*N*H

}  // namespace rnnjit
