// rnnjit: ONNX's RNN, GRU and LSTM operators over the C++ API: the attributes as a one-layer
// network (onnx_node), ONNX's weights in rnnjit's layout (import_weights), and a node's forward
// with its tensors converted from and to ONNX's layouts (forward).
#include "runtime/onnx_adapter.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace rnnjit::onnx {
namespace {

using c_api::buffer;
using c_api::bytes;
using c_api::check_size;
using c_api::invalid;
using c_api::unsupported;

// ---- the attributes ----

// attrs.op: the operator's name and its cell before the other attributes refine it.
OnnxNode node_of_op(const rnnjit_onnx_attributes_t& a) {
  OnnxNode node;
  switch (a.op) {
    case RNNJIT_ONNX_RNN: node.op_name = "RNN"; node.config.cell = CellKind::rnn_tanh; break;
    case RNNJIT_ONNX_GRU: node.op_name = "GRU"; node.config.cell = CellKind::gru; break;
    case RNNJIT_ONNX_LSTM: node.op_name = "LSTM"; node.config.cell = CellKind::lstm; break;
    default:
      invalid(fmt::format("attrs.op is {}, not one of RNNJIT_ONNX_RNN, _GRU, _LSTM", a.op));
  }
  return node;
}

// ONNX's default activations of an operator (attrs.op, checked), those of one direction.
std::span<const std::string_view> default_activations(const rnnjit_onnx_attributes_t& a) {
  static constexpr std::string_view rnn[] = {"Tanh"}, gru[] = {"Sigmoid", "Tanh"}, lstm[] = {"Sigmoid", "Tanh", "Tanh"};
  if (a.op == RNNJIT_ONNX_RNN) return rnn;
  if (a.op == RNNJIT_ONNX_GRU) return gru;
  return lstm;
}

// hidden_size and direction (and the input size the caller gives), one layer.
void set_sizes(const rnnjit_onnx_attributes_t& a, std::int64_t input_size, OnnxNode& node) {
  const char* op = node.op_name;
  if (a.hidden_size <= 0) invalid(fmt::format("ONNX {}: hidden_size must be positive, got {}", op, a.hidden_size));
  node.config.hidden_size = a.hidden_size;
  node.config.input_size = input_size;
  node.config.num_layers = 1;
  const std::string_view direction = a.direction ? a.direction : "forward";
  if (direction == "forward") {
    node.config.bidirectional = false;
  } else if (direction == "bidirectional") {
    node.config.bidirectional = true;
  } else if (direction == "reverse") {
    node.config.reverse = true;
  } else {
    invalid(fmt::format("ONNX {}: direction must be \"forward\", \"reverse\" or \"bidirectional\", got \"{}\"", op,
                        direction));
  }
}

// layout, linear_before_reset, input_forget, has_peepholes and clip.
void set_flags(const rnnjit_onnx_attributes_t& a, OnnxNode& node) {
  const char* op = node.op_name;
  if (a.layout != 0 && a.layout != 1) invalid(fmt::format("ONNX {}: layout must be 0 or 1, got {}", op, a.layout));
  node.layout = static_cast<int>(a.layout);

  if (a.linear_before_reset != 0 && a.linear_before_reset != 1)
    invalid(fmt::format("ONNX {}: linear_before_reset must be 0 or 1, got {}", op, a.linear_before_reset));
  if (a.op != RNNJIT_ONNX_GRU && a.linear_before_reset != 0)
    invalid(fmt::format("ONNX {}: linear_before_reset is an attribute of GRU only", op));
  // linear_before_reset=1 is PyTorch's and cuDNN's GRU; 0 (ONNX's default) applies r before W_hn.
  if (a.op == RNNJIT_ONNX_GRU && a.linear_before_reset == 0) node.config.cell = CellKind::gru_reset_before;

  if (a.input_forget != 0 && a.input_forget != 1)
    invalid(fmt::format("ONNX {}: input_forget must be 0 or 1, got {}", op, a.input_forget));
  if (a.op != RNNJIT_ONNX_LSTM && a.input_forget != 0)
    invalid(fmt::format("ONNX {}: input_forget is an attribute of LSTM only", op));
  node.config.input_forget = a.input_forget == 1;

  if (a.op != RNNJIT_ONNX_LSTM && a.has_peepholes)
    invalid(fmt::format("ONNX {}: has_peepholes: P is an input of LSTM only", op));
  node.config.peephole = a.has_peepholes != 0;

  if (a.has_clip) {
    if (!(a.clip > 0.0f) || std::isinf(a.clip))
      invalid(fmt::format("ONNX {}: clip must be a finite value > 0, got {}", op, a.clip));
    node.config.gate_clip = a.clip;
  }
}

// The activation lists' pointers and sizes (per_direction names a direction, D directions).
void check_activation_lists(const rnnjit_onnx_attributes_t& a, const char* op, std::size_t per_direction,
                                   int D) {
  if (a.activation_alpha_count > 0 && !a.activation_alpha)
    invalid(fmt::format("ONNX {}: activation_alpha is NULL but its size is {}", op, a.activation_alpha_count));
  if (a.activation_beta_count > 0 && !a.activation_beta)
    invalid(fmt::format("ONNX {}: activation_beta is NULL but its size is {}", op, a.activation_beta_count));
  if (a.activations_count > 0 && !a.activations)
    invalid(fmt::format("ONNX {}: activations is NULL but its size is {}", op, a.activations_count));
  if (a.activations_count != 0 && a.activations_count != per_direction &&
      a.activations_count != per_direction * static_cast<std::size_t>(D))
    invalid(fmt::format("ONNX {}: activations has {} entries, expected {} per direction ({} directions)", op,
                        a.activations_count, per_direction, D));
  for (std::size_t i = 0; i < a.activations_count; ++i)
    if (!a.activations[i]) invalid(fmt::format("ONNX {}: activations[{}] is NULL", op, i));
}

// ONNX Runtime's defaults of the parameters an activation reads when activation_alpha or
// activation_beta runs out (onnxruntime's rnn_helpers.cc): LeakyRelu 0.01, HardSigmoid 0.2 and
// 0.5, Elu 1; every other one 0 (ThresholdedRelu too, where ONNX's ThresholdedRelu operator
// says 1: the override route must compute what ONNX Runtime's own kernel computes).
float default_alpha(Activation kind) {
  return kind == Activation::leaky_relu ? 0.01f : kind == Activation::hard_sigmoid ? 0.2f : kind == Activation::elu ? 1.0f : 0.0f;
}
float default_beta(Activation kind) { return kind == Activation::hard_sigmoid ? 0.5f : 0.0f; }

// The activations of every direction, as ONNX Runtime reads them: a list of one direction's
// functions serves both directions of a bidirectional node, and activation_alpha and
// activation_beta are consumed in the list's order by the functions that read them (those
// left without one take the default).
std::vector<ActivationFunction> parse_activations(const rnnjit_onnx_attributes_t& a, const char* op,
                                                  std::span<const std::string_view> defaults, int D) {
  const std::size_t per_direction = defaults.size();
  std::vector<ActivationFunction> out;
  for (std::size_t i = 0; i < per_direction * static_cast<std::size_t>(D); ++i) {
    const std::string_view name = a.activations_count == 0 ? defaults[i % per_direction]
                                                            : std::string_view(a.activations[i % a.activations_count]);
    try {
      out.push_back({parse_activation(name)});
    } catch (const Error& e) {
      invalid(fmt::format("ONNX {}: activations[{}]: {}", op, i % std::max<std::size_t>(a.activations_count, 1), e.what()));
    }
  }
  std::size_t alphas = 0, betas = 0;
  for (ActivationFunction& f : out) {
    if (activation_alphas(f.kind)) f.alpha = alphas < a.activation_alpha_count ? a.activation_alpha[alphas++] : default_alpha(f.kind);
    if (activation_betas(f.kind)) f.beta = betas < a.activation_beta_count ? a.activation_beta[betas++] : default_beta(f.kind);
    if (!std::isfinite(f.alpha) || !std::isfinite(f.beta))
      unsupported(fmt::format("ONNX {}: activation {} is not supported (alpha and beta must be finite)", op, describe(f)));
  }
  if (alphas < a.activation_alpha_count || betas < a.activation_beta_count)
    unsupported(fmt::format("ONNX {}: activation_alpha of {} and activation_beta of {} entries are not supported: the "
                            "activations read only {} and {} of them",
                            op, a.activation_alpha_count, a.activation_beta_count, alphas, betas));
  return out;
}

// The activations into the network: an RNN whose directions all use one of Tanh, Relu, Sigmoid
// or LeakyRelu (alpha >= 0) is that cell (rnn_tanh, rnn_relu, rnn_sigmoid, rnn_relu with
// relu_alpha: generated gate kernels); any other function goes to config.activations, where
// it differs from the cell's own.
void set_activations(const rnnjit_onnx_attributes_t& a, OnnxNode& node, std::span<const std::string_view> defaults) {
  RnnConfig& c = node.config;
  const std::vector<ActivationFunction> fs = parse_activations(a, node.op_name, defaults, c.directions());
  const std::size_t per_direction = defaults.size();
  if (a.op == RNNJIT_ONNX_RNN && std::all_of(fs.begin(), fs.end(), [&](const ActivationFunction& f) { return f == fs[0]; })) {
    const ActivationFunction f = fs[0];
    if (f.kind == Activation::relu) c.cell = CellKind::rnn_relu;
    if (f.kind == Activation::sigmoid) c.cell = CellKind::rnn_sigmoid;
    if (f.kind == Activation::leaky_relu && f.alpha >= 0.0f) c.cell = CellKind::rnn_relu, c.relu_alpha = f.alpha;
  }
  for (int d = 0; d < c.directions(); ++d)
    for (std::size_t r = 0; r < per_direction; ++r) {
      const ActivationFunction& f = fs[static_cast<std::size_t>(d) * per_direction + r];
      const auto role = static_cast<ActivationRole>(r);
      if (!(f == cell_activation(c.cell, role, c.relu_alpha))) c.activations[static_cast<std::size_t>(d)][r] = f;
    }
}

// ---- the weights ----

// onnx_gate[g]: the ONNX gate that rnnjit's (PyTorch's) gate g is.
// LSTM: rnnjit i,f,g,o <- ONNX i,o,f,c. GRU: rnnjit r,z,n <- ONNX z,r,h. RNN: one gate.
std::span<const int> onnx_gate_of(CellKind cell) {
  static constexpr int lstm[] = {0, 2, 3, 1};
  static constexpr int gru[] = {1, 0, 2};
  static constexpr int rnn[] = {0};
  switch (cell) {
    case CellKind::lstm: return lstm;
    case CellKind::gru:
    case CellKind::gru_reset_before: return gru;
    default: return rnn;
  }
}

// ONNX's P [D, 3*H] has rows i, o, f; weight_peephole [3, H] rows i, f, o.
constexpr int kOnnxPeepholeRow[3] = {0, 2, 1};  // canonical row r <- ONNX row kOnnxPeepholeRow[r]

// The first element of P that is nonzero, as "P[d][k] = v" (ONNX's indexing), or "" if none.
std::string first_nonzero(std::span<const float> P, std::int64_t per_direction) {
  for (std::size_t k = 0; k < P.size(); ++k)
    if (P[k] != 0.0f)
      return fmt::format("P[{}][{}] = {}", static_cast<std::int64_t>(k) / per_direction,
                         static_cast<std::int64_t>(k) % per_direction, P[k]);
  return "";
}

// The sizes of W, R, B and P, and P against attrs.has_peepholes.
void check_weights(const OnnxNode& node, const OnnxWeights& w, const std::string& what) {
  const RnnConfig& c = node.config;
  const std::int64_t D = c.directions(), G = c.gates(), H = c.hidden_size, I = c.input_size;
  check_size(w.W.size(), D * G * H * I, "W", what);
  check_size(w.R.size(), D * G * H * H, "R", what);
  if (!w.B.empty()) check_size(w.B.size(), D * 2 * G * H, "B", what);
  if (!w.P.empty()) {
    if (c.cell != CellKind::lstm) invalid(fmt::format("ONNX {}: P is an input of LSTM only", node.op_name));
    check_size(w.P.size(), D * 3 * H, "P", what);
    if (!c.peephole) {
      const std::string nonzero = first_nonzero(w.P, 3 * H);
      if (!nonzero.empty())
        invalid(fmt::format("ONNX LSTM: P is nonzero ({}) but attrs.has_peepholes is not set (the network "
                            "would have no peepholes)", nonzero));
    }
  } else if (c.peephole) {
    invalid("ONNX LSTM: attrs.has_peepholes is set but P is not given (NULL, 0): the peepholes are imported "
            "with the weights");
  }
}

// Direction d's blocks of the canonical weights from ONNX's.
void import_direction(const OnnxNode& node, const OnnxWeights& w, const WeightLayout& layout, int d,
                      std::span<float> out) {
  const RnnConfig& c = node.config;
  const std::int64_t G = c.gates(), H = c.hidden_size, I = c.input_size;
  const std::span<const int> onnx_gate = onnx_gate_of(c.cell);
  // Rows of gate g (H rows of `cols` each) come from ONNX gate onnx_gate[g].
  auto permute = [&](const float* src, ParamKind kind, std::int64_t cols) {
    float* dst = out.data() + layout.block(0, d, kind).offset;
    for (std::int64_t g = 0; g < G; ++g)
      std::memcpy(dst + g * H * cols, src + onnx_gate[static_cast<std::size_t>(g)] * H * cols,
                  static_cast<std::size_t>(H * cols) * sizeof(float));
  };
  permute(w.W.data() + d * G * H * I, ParamKind::weight_ih, I);
  permute(w.R.data() + d * G * H * H, ParamKind::weight_hh, H);
  if (w.B.empty()) {
    for (ParamKind kind : {ParamKind::bias_ih, ParamKind::bias_hh}) {
      const ParamBlock& block = layout.block(0, d, kind);
      std::fill_n(out.data() + block.offset, block.size, 0.0f);
    }
  } else {
    permute(w.B.data() + d * 2 * G * H, ParamKind::bias_ih, 1);          // Wb
    permute(w.B.data() + d * 2 * G * H + G * H, ParamKind::bias_hh, 1);  // Rb
  }
  if (c.peephole) {
    float* dst = out.data() + layout.block(0, d, ParamKind::weight_peephole).offset;
    for (int row = 0; row < 3; ++row)
      std::memcpy(dst + row * H, w.P.data() + (d * 3 + kOnnxPeepholeRow[row]) * H,
                  static_cast<std::size_t>(H) * sizeof(float));
  }
}

// ---- a node's forward ----

// [A, B, C] -> [B, A, C] (C contiguous elements per row).
void swap_outer(const float* src, float* dst, std::int64_t A, std::int64_t B, std::int64_t C) {
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t b = 0; b < B; ++b)
      std::memcpy(dst + (b * A + a) * C, src + (a * B + b) * C, static_cast<std::size_t>(C) * sizeof(float));
}

template <typename T>
T* grow(std::vector<T>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// One forward call of a node: its sizes and the caller's tensors in ONNX's layouts (empty: not
// given).
struct OnnxCall {
  const char* op = "";
  std::int64_t T = 0, N = 0, I = 0, H = 0, D = 0;
  std::int64_t states = 0;  // D * N * H
  bool lstm = false, batch_first = false;
  int layout = 0;
  std::span<const float> X, h0, c0, P;
  std::span<const std::int32_t> seq;
  std::span<float> Y, Yh, Yc;
  std::span<const std::byte> packed;
};

// The call's sizes as text, for messages: made only when a check fails (every run checks).
std::string shape_text(const OnnxCall& c) {
  return fmt::format("for ONNX {} T={} N={} I={} H={} D={} layout={}", c.op, c.T, c.N, c.I, c.H, c.D, c.layout);
}

void check_call_size(const OnnxCall& c, std::size_t size, std::int64_t expected, const char* name) {
  if (static_cast<std::int64_t>(size) != expected) check_size(size, expected, name, shape_text(c));
}

// The call's tensors in rnnjit's layouts: x [T, N, I], y [T, N, D*H], hx/cx/hy/cy [D, N, H].
struct RnnjitTensors {
  std::span<const float> x, hx, cx;
  std::span<float> y, hy, cy;
  bool y_direct = false;  // y is Y
};

// The execution against the node, then the caller's tensors: X's size first, then each in turn.
OnnxCall bind_call(const rnnjit_execution& e, const OnnxNode& node, const rnnjit_onnx_io_t& io) {
  const RnnConfig& config = e.ex.config();
  OnnxCall c;
  c.op = node.op_name;
  if (!(config == node.config))
    invalid(fmt::format("ONNX {}: the execution is for {}, the attributes describe {}", c.op, describe(config),
                        describe(node.config)));
  c.T = e.ex.shape().seq_len, c.N = e.ex.shape().batch, c.I = config.input_size, c.H = config.hidden_size,
  c.D = config.directions();
  c.lstm = config.cell == CellKind::lstm, c.batch_first = node.layout == 1;
  c.layout = node.layout;
  c.states = c.D * c.N * c.H;
  c.X = buffer(io.X, io.X_size, "X");
  check_call_size(c, c.X.size(), c.T * c.N * c.I, "X");
  c.seq = buffer(io.sequence_lens, io.sequence_lens_size, "sequence_lens");
  c.h0 = buffer(io.initial_h, io.initial_h_size, "initial_h");
  c.c0 = buffer(io.initial_c, io.initial_c_size, "initial_c");
  c.P = buffer(io.P, io.P_size, "P");
  c.Y = buffer(io.Y, io.Y_size, "Y");
  c.Yh = buffer(io.Y_h, io.Y_h_size, "Y_h");
  c.Yc = buffer(io.Y_c, io.Y_c_size, "Y_c");
  c.packed = bytes(io.packed_weights, io.packed_weights_bytes, "packed_weights");
  return c;
}

// P is part of the weights; a P given here must agree with them. (A weight buffer of the wrong
// size is left to Execution::forward, which names it.)
void check_peepholes(const OnnxCall& c, const RnnConfig& config, std::span<const float> weights) {
  const std::int64_t D = c.D, H = c.H;
  check_call_size(c, c.P.size(), D * 3 * H, "P");
  if (!config.peephole) {
    const std::string nonzero = first_nonzero(c.P, 3 * H);
    if (!nonzero.empty())
      invalid(fmt::format("ONNX LSTM: P is nonzero ({}) but the network has no peepholes: set attrs.has_peepholes "
                          "and pass P to rnnjit_onnx_import_weights (rnnjit_onnx_forward does not read P)",
                          nonzero));
    return;
  }
  const WeightLayout layout(config);
  if (static_cast<std::int64_t>(weights.size()) != layout.total_elements()) return;
  for (std::int64_t d = 0; d < D; ++d) {
    const float* imported = weights.data() + layout.block(0, static_cast<int>(d), ParamKind::weight_peephole).offset;
    for (int r = 0; r < 3; ++r)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t k = kOnnxPeepholeRow[r] * H + h;
        const float given = c.P[static_cast<std::size_t>(d * 3 * H + k)], held = imported[r * H + h];
        if (!(given == held))
          invalid(fmt::format("ONNX LSTM: P[{}][{}] = {} differs from the peepholes in the weights ({}): P goes "
                              "to rnnjit_onnx_import_weights (rnnjit_onnx_forward does not read P)",
                              d, k, given, held));
      }
  }
}

// The sizes of the tensors given, and LSTM's tensors given to LSTM only.
void check_tensors(const OnnxCall& c, const RnnConfig& config, std::span<const float> weights) {
  if (!c.h0.empty()) check_call_size(c, c.h0.size(), c.states, "initial_h");
  if (!c.Y.empty()) check_call_size(c, c.Y.size(), c.T * c.D * c.N * c.H, "Y");
  if (!c.Yh.empty()) check_call_size(c, c.Yh.size(), c.states, "Y_h");
  if (!c.lstm) {
    if (!c.c0.empty()) invalid(fmt::format("ONNX {}: initial_c is an input of LSTM only", c.op));
    if (!c.Yc.empty()) invalid(fmt::format("ONNX {}: Y_c is an output of LSTM only", c.op));
    if (!c.P.empty()) invalid(fmt::format("ONNX {}: P is an input of LSTM only", c.op));
    return;
  }
  if (!c.c0.empty()) check_call_size(c, c.c0.size(), c.states, "initial_c");
  if (!c.Yc.empty()) check_call_size(c, c.Yc.size(), c.states, "Y_c");
  if (!c.P.empty()) check_peepholes(c, config, weights);
}

// sequence_lens, each in [0, T]. An element of length 0 has all-zero Y, Y_h and Y_c
// (onnxruntime's behaviour): it runs one step like any other (its length 1 in e.lengths, which
// c.seq then is) and its outputs are zeroed afterwards. Returns those elements.
std::vector<std::int64_t> bind_lengths(rnnjit_execution& e, OnnxCall& c) {
  std::vector<std::int64_t> empty_rows;
  if (c.seq.empty()) return empty_rows;
  check_call_size(c, c.seq.size(), c.N, "sequence_lens");
  for (std::size_t n = 0; n < c.seq.size(); ++n) {
    if (c.seq[n] < 0 || c.seq[n] > c.T)
      invalid(fmt::format("ONNX {}: sequence_lens[{}] = {} is outside [0, T = {}]", c.op, n, c.seq[n], c.T));
    if (c.seq[n] == 0) empty_rows.push_back(static_cast<std::int64_t>(n));
  }
  if (!empty_rows.empty()) {
    e.lengths.assign(c.seq.begin(), c.seq.end());
    for (std::int64_t n : empty_rows) e.lengths[static_cast<std::size_t>(n)] = 1;
    c.seq = {e.lengths.data(), e.lengths.size()};
  }
  return empty_rows;
}

// Inputs in rnnjit's layout: as they are for layout 0, else copies in the execution's scratch.
void bind_inputs(rnnjit_execution& e, const OnnxCall& c, RnnjitTensors& t) {
  const std::int64_t T = c.T, N = c.N, I = c.I, D = c.D, H = c.H, states = c.states;
  t.x = c.X, t.hx = c.h0, t.cx = c.c0;
  if (!c.batch_first) return;
  swap_outer(c.X.data(), grow(e.x, T * N * I), N, T, I);
  t.x = {e.x.data(), static_cast<std::size_t>(T * N * I)};
  if (!c.h0.empty()) {
    swap_outer(c.h0.data(), grow(e.hx, states), N, D, H);
    t.hx = {e.hx.data(), static_cast<std::size_t>(states)};
  }
  if (!c.c0.empty()) {
    swap_outer(c.c0.data(), grow(e.cx, states), N, D, H);
    t.cx = {e.cx.data(), static_cast<std::size_t>(states)};
  }
}

// Outputs: y [T, N, D*H] goes straight into Y when the layouts agree (layout 0, D = 1); hy/cy
// [D, N, H] straight into Y_h/Y_c for layout 0; the others into the execution's scratch.
void bind_outputs(rnnjit_execution& e, const OnnxCall& c, RnnjitTensors& t) {
  const std::int64_t T = c.T, N = c.N, D = c.D, H = c.H, states = c.states;
  t.y_direct = !c.Y.empty() && !c.batch_first && D == 1;
  t.y = t.y_direct ? c.Y : std::span<float>(grow(e.y, T * N * D * H), static_cast<std::size_t>(T * N * D * H));
  t.hy = c.Yh, t.cy = c.Yc;
  if (c.batch_first && !c.Yh.empty()) t.hy = {grow(e.hy, states), static_cast<std::size_t>(states)};
  if (c.batch_first && !c.Yc.empty()) t.cy = {grow(e.cy, states), static_cast<std::size_t>(states)};
}

// The outputs from scratch into ONNX's layouts: Y [T, D, N, H] or [N, T, D, H]; Y_h, Y_c
// [N, D, H] for layout 1.
void write_outputs(const OnnxCall& c, const RnnjitTensors& t) {
  const std::int64_t T = c.T, N = c.N, D = c.D, H = c.H;
  if (!c.Y.empty() && !t.y_direct) {
    if (c.batch_first) {
      swap_outer(t.y.data(), c.Y.data(), T, N, D * H);  // [N, T, D, H]
    } else {
      for (std::int64_t s = 0; s < T; ++s)  // [T, D, N, H]
        swap_outer(t.y.data() + s * N * D * H, c.Y.data() + s * D * N * H, N, D, H);
    }
  }
  if (c.batch_first && !c.Yh.empty()) swap_outer(t.hy.data(), c.Yh.data(), D, N, H);
  if (c.batch_first && !c.Yc.empty()) swap_outer(t.cy.data(), c.Yc.data(), D, N, H);
}

// Rows of length 0, in ONNX's layouts: Y [T, D, N, H] or [N, T, D, H]; Y_h, Y_c [D, N, H] or [N, D, H].
void zero_empty_rows(const OnnxCall& c, const std::vector<std::int64_t>& empty_rows) {
  const std::int64_t T = c.T, N = c.N, D = c.D, H = c.H;
  const bool batch_first = c.batch_first;
  auto zero = [H](std::span<float> a, std::int64_t row) { std::fill_n(a.begin() + row * H, H, 0.0f); };
  for (std::int64_t n : empty_rows)
    for (std::int64_t d = 0; d < D; ++d) {
      for (std::int64_t t = 0; t < T && !c.Y.empty(); ++t)
        zero(c.Y, batch_first ? (n * T + t) * D + d : (t * D + d) * N + n);
      if (!c.Yh.empty()) zero(c.Yh, batch_first ? n * D + d : d * N + n);
      if (!c.Yc.empty()) zero(c.Yc, batch_first ? n * D + d : d * N + n);
    }
}

}  // namespace

OnnxNode onnx_node(const rnnjit_onnx_attributes_t* attrs_ptr, std::int64_t input_size) {
  const rnnjit_onnx_attributes_t& a = c_api::deref(attrs_ptr, "attrs");
  OnnxNode node = node_of_op(a);
  const std::span<const std::string_view> defaults = default_activations(a);
  set_sizes(a, input_size, node);
  set_flags(a, node);
  check_activation_lists(a, node.op_name, defaults.size(), node.config.directions());
  set_activations(a, node, defaults);
  validate(node.config);  // input_size, sizes
  return node;
}

void import_weights(const OnnxNode& node, const OnnxWeights& w, std::span<float> out) {
  const RnnConfig& c = node.config;
  const WeightLayout layout(c);
  const std::string what = fmt::format("for ONNX {} I={} H={} D={}", node.op_name, c.input_size, c.hidden_size,
                                       c.directions());
  check_weights(node, w, what);
  check_size(out.size(), layout.total_elements(), "weights", what);
  for (int d = 0; d < c.directions(); ++d) import_direction(node, w, layout, d, out);
}

void forward(rnnjit_execution& e, const OnnxNode& node, std::span<const float> weights, const rnnjit_onnx_io_t& io) {
  OnnxCall c = bind_call(e, node, io);
  check_tensors(c, e.ex.config(), weights);
  const std::vector<std::int64_t> empty_rows = bind_lengths(e, c);
  RnnjitTensors t;
  bind_inputs(e, c, t);
  bind_outputs(e, c, t);
  e.ex.forward(weights, {.x = t.x,
                         .hx = t.hx,
                         .cx = t.cx,
                         .y = t.y,
                         .hy = t.hy,
                         .cy = t.cy,
                         .packed_weights = c.packed,
                         .seq_lengths = c.seq});
  write_outputs(c, t);
  zero_empty_rows(c, empty_rows);
}

}  // namespace rnnjit::onnx
