// rnnjit: the C API (runtime/include/rnnjit.h) over the C++ API, and ONNX's RNN, GRU and LSTM
// operators on top of it.
//
// Every entry point runs its body through guarded(): no exception crosses the C boundary.
// Mapping: CApiError carries its own status (argument checks and UNSUPPORTED features of this
// file); rnnjit::Error is INVALID_ARGUMENT except two messages of the C++ library that are not
// the caller's mistake (an RNNJIT_ISA the CPU lacks: UNSUPPORTED; a failed aligned allocation:
// OUT_OF_MEMORY); std::bad_alloc is OUT_OF_MEMORY; anything else is INTERNAL.
#include "rnnjit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "rnnjit/rnn.hpp"

struct rnnjit_rnn {
  rnnjit::Rnn rnn;
};

struct rnnjit_execution {
  rnnjit::Execution ex;
  // Scratch of the ONNX layout conversions, grown once and reused (one thread at a time).
  std::vector<float> x, hx, cx, y, hy, cy;
  std::vector<std::int32_t> lengths;  // sequence_lens with its zeros made 1 (their rows are zeroed after)
};

namespace {

using rnnjit::CellKind;
using rnnjit::Error;
using rnnjit::RnnConfig;

class CApiError : public std::exception {
 public:
  CApiError(rnnjit_status_t status, std::string message) : status_(status), message_(std::move(message)) {}
  rnnjit_status_t status() const { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  rnnjit_status_t status_;
  std::string message_;
};

[[noreturn]] void invalid(std::string message) { throw CApiError(RNNJIT_STATUS_INVALID_ARGUMENT, std::move(message)); }
[[noreturn]] void unsupported(std::string message) { throw CApiError(RNNJIT_STATUS_UNSUPPORTED, std::move(message)); }

// The last error of this thread: a fixed buffer, so that recording an error never allocates.
constexpr std::size_t kMessageCapacity = 1024;
thread_local char t_last_error[kMessageCapacity] = "";

void set_last_error(const char* message) noexcept {
  std::size_t n = std::strlen(message);
  if (n >= kMessageCapacity) n = kMessageCapacity - 1;
  std::memcpy(t_last_error, message, n);
  t_last_error[n] = '\0';
}

rnnjit_status_t fail(rnnjit_status_t status, const char* message) noexcept {
  set_last_error(message);
  return status;
}

bool contains(const char* text, const char* part) { return std::strstr(text, part) != nullptr; }

template <typename F>
rnnjit_status_t guarded(F&& body) noexcept {
  t_last_error[0] = '\0';
  try {
    body();
    return RNNJIT_STATUS_OK;
  } catch (const CApiError& e) {
    return fail(e.status(), e.what());
  } catch (const Error& e) {
    // Messages of runtime/names.cpp (detect_isa) and runtime/rnn.cpp (AlignedBuffer).
    if (contains(e.what(), "but this CPU only runs")) return fail(RNNJIT_STATUS_UNSUPPORTED, e.what());
    // codegen/planner.cpp: a valid cell and mode the JIT backend does not implement.
    if (contains(e.what(), "is not supported on the JIT backend")) return fail(RNNJIT_STATUS_UNSUPPORTED, e.what());
    if (std::strncmp(e.what(), "out of memory", 13) == 0) return fail(RNNJIT_STATUS_OUT_OF_MEMORY, e.what());
    return fail(RNNJIT_STATUS_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(RNNJIT_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    char message[kMessageCapacity];
    std::snprintf(message, sizeof message, "internal error: %s", e.what());
    return fail(RNNJIT_STATUS_INTERNAL, message);
  } catch (...) {
    return fail(RNNJIT_STATUS_INTERNAL, "internal error: unknown exception");
  }
}

template <typename T>
T& deref(T* p, const char* name) {
  if (!p) invalid(fmt::format("{} is NULL", name));
  return *p;
}

// A caller's (pointer, size) pair: NULL with size 0 (or any pointer with size 0) is "not given".
template <typename T>
std::span<T> buffer(T* p, std::size_t size, const char* name) {
  if (size == 0) return {};
  if (!p) invalid(fmt::format("{} is NULL but its size is {}", name, size));
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
    invalid(fmt::format("{} is not aligned to {} bytes", name, alignof(T)));
  return {p, size};
}

std::span<std::byte> bytes(void* p, std::size_t size, const char* name) {
  if (size == 0) return {};
  if (!p) invalid(fmt::format("{} is NULL but its size is {}", name, size));
  return {static_cast<std::byte*>(p), size};
}

std::span<const std::byte> bytes(const void* p, std::size_t size, const char* name) {
  if (size == 0) return {};
  if (!p) invalid(fmt::format("{} is NULL but its size is {}", name, size));
  return {static_cast<const std::byte*>(p), size};
}

void check_size(std::size_t size, std::int64_t expected, const char* name, const std::string& what) {
  if (static_cast<std::int64_t>(size) != expected)
    invalid(fmt::format("{} has {} elements, expected {} {}", name, size, expected, what));
}

RnnConfig to_cpp(const rnnjit_config_t& c) {
  RnnConfig config;
  switch (c.cell) {
    case RNNJIT_CELL_RNN_RELU: config.cell = CellKind::rnn_relu; break;
    case RNNJIT_CELL_RNN_TANH: config.cell = CellKind::rnn_tanh; break;
    case RNNJIT_CELL_LSTM: config.cell = CellKind::lstm; break;
    case RNNJIT_CELL_GRU: config.cell = CellKind::gru; break;
    case RNNJIT_CELL_GRU_RESET_BEFORE: config.cell = CellKind::gru_reset_before; break;
    case RNNJIT_CELL_RNN_SIGMOID: config.cell = CellKind::rnn_sigmoid; break;
    default:
      invalid(fmt::format("config.cell is {}, not one of RNNJIT_CELL_RNN_RELU, _RNN_TANH, _LSTM, _GRU, "
                          "_GRU_RESET_BEFORE, _RNN_SIGMOID", c.cell));
  }
  switch (c.direction) {
    case RNNJIT_DIRECTION_FORWARD: config.bidirectional = false; break;
    case RNNJIT_DIRECTION_BIDIRECTIONAL: config.bidirectional = true; break;
    case RNNJIT_DIRECTION_REVERSE: config.reverse = true; break;
    case RNNJIT_DIRECTION_BIDIRECTIONAL_SUM: config.bidirectional = config.sum_directions = true; break;
    default:
      invalid(fmt::format("config.direction is {}, not one of RNNJIT_DIRECTION_FORWARD, _BIDIRECTIONAL, _REVERSE, "
                          "_BIDIRECTIONAL_SUM",
                          c.direction));
  }
  config.input_size = c.input_size;
  config.hidden_size = c.hidden_size;
  config.num_layers = c.num_layers;
  config.proj_size = c.proj_size;
  config.clip = c.cell_clip;
  config.dropout = c.dropout;
  config.batch_first = c.batch_first != 0;
  config.gate_clip = c.gate_clip;
  config.peephole = c.peephole != 0;
  config.input_forget = c.input_forget != 0;
  config.bias = c.no_bias == 0;
  config.independent_stacks = c.independent_stacks != 0;
  config.relu_alpha = c.relu_alpha;
  rnnjit::validate(config);  // names the field
  return config;
}

rnnjit_config_t to_c(const RnnConfig& config) {
  rnnjit_config_t c{};
  switch (config.cell) {
    case CellKind::rnn_relu: c.cell = RNNJIT_CELL_RNN_RELU; break;
    case CellKind::rnn_tanh: c.cell = RNNJIT_CELL_RNN_TANH; break;
    case CellKind::lstm: c.cell = RNNJIT_CELL_LSTM; break;
    case CellKind::gru: c.cell = RNNJIT_CELL_GRU; break;
    case CellKind::gru_reset_before: c.cell = RNNJIT_CELL_GRU_RESET_BEFORE; break;
    case CellKind::rnn_sigmoid: c.cell = RNNJIT_CELL_RNN_SIGMOID; break;
  }
  c.input_size = config.input_size;
  c.hidden_size = config.hidden_size;
  c.num_layers = config.num_layers;
  c.direction = config.sum_directions ? RNNJIT_DIRECTION_BIDIRECTIONAL_SUM
                : config.bidirectional ? RNNJIT_DIRECTION_BIDIRECTIONAL
                : config.reverse       ? RNNJIT_DIRECTION_REVERSE
                                       : RNNJIT_DIRECTION_FORWARD;
  c.threads = 0;
  c.proj_size = config.proj_size;
  c.cell_clip = config.clip;
  c.dropout = config.dropout;
  c.batch_first = config.batch_first ? 1 : 0;
  c.gate_clip = config.gate_clip;
  c.peephole = config.peephole ? 1 : 0;
  c.input_forget = config.input_forget ? 1 : 0;
  c.no_bias = config.bias ? 0 : 1;
  c.independent_stacks = config.independent_stacks ? 1 : 0;
  c.relu_alpha = config.relu_alpha;
  c.fpmath = RNNJIT_FPMATH_STRICT;
  return c;
}

// ---- ONNX ----

struct OnnxNode {
  RnnConfig config;  // one layer
  int layout = 0;
  const char* op_name = "";
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Checks the attributes (INVALID_ARGUMENT for values ONNX does not allow, UNSUPPORTED for
// valid ones rnnjit does not implement) and returns the equivalent one-layer network.
OnnxNode onnx_node(const rnnjit_onnx_attributes_t* attrs_ptr, std::int64_t input_size) {
  const rnnjit_onnx_attributes_t& a = deref(attrs_ptr, "attrs");
  OnnxNode node;
  std::vector<std::string_view> defaults;
  switch (a.op) {
    case RNNJIT_ONNX_RNN: node.op_name = "RNN"; node.config.cell = CellKind::rnn_tanh; defaults = {"Tanh"}; break;
    case RNNJIT_ONNX_GRU: node.op_name = "GRU"; node.config.cell = CellKind::gru; defaults = {"Sigmoid", "Tanh"}; break;
    case RNNJIT_ONNX_LSTM:
      node.op_name = "LSTM";
      node.config.cell = CellKind::lstm;
      defaults = {"Sigmoid", "Tanh", "Tanh"};
      break;
    default:
      invalid(fmt::format("attrs.op is {}, not one of RNNJIT_ONNX_RNN, _GRU, _LSTM", a.op));
  }
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
  const int D = node.config.directions();

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

  if (a.activation_alpha_count > 0 && !a.activation_alpha)
    invalid(fmt::format("ONNX {}: activation_alpha is NULL but its size is {}", op, a.activation_alpha_count));
  if (a.activation_beta_count > 0 && !a.activation_beta)
    invalid(fmt::format("ONNX {}: activation_beta is NULL but its size is {}", op, a.activation_beta_count));
  if (a.activations_count > 0 && !a.activations)
    invalid(fmt::format("ONNX {}: activations is NULL but its size is {}", op, a.activations_count));
  const std::size_t per_direction = defaults.size();
  if (a.activations_count != 0 && a.activations_count != per_direction &&
      a.activations_count != per_direction * static_cast<std::size_t>(D))
    invalid(fmt::format("ONNX {}: activations has {} entries, expected {} per direction ({} directions)", op,
                        a.activations_count, per_direction, D));
  std::string given;
  for (std::size_t i = 0; i < a.activations_count; ++i) {
    if (!a.activations[i]) invalid(fmt::format("ONNX {}: activations[{}] is NULL", op, i));
    given += fmt::format("{}{}", i ? ", " : "", a.activations[i]);
  }
  // An RNN's activation, the same for every direction, picks its cell (LeakyRelu: with alpha).
  auto all_are = [&](const char* name) {
    bool all = a.activations_count > 0;
    for (std::size_t i = 0; i < a.activations_count; ++i) all = all && iequals(a.activations[i], name);
    return all;
  };
  bool all_default = true;
  for (std::size_t i = 0; i < a.activations_count; ++i)
    all_default = all_default && iequals(a.activations[i], defaults[i % per_direction]);
  const bool leaky = a.op == RNNJIT_ONNX_RNN && all_are("LeakyRelu");
  if (a.op == RNNJIT_ONNX_RNN && all_are("Relu")) {
    node.config.cell = CellKind::rnn_relu;
  } else if (a.op == RNNJIT_ONNX_RNN && all_are("Sigmoid")) {
    node.config.cell = CellKind::rnn_sigmoid;
  } else if (leaky) {
    node.config.cell = CellKind::rnn_relu;
    node.config.relu_alpha = 0.01f;  // ONNX's LeakyRelu default
  } else if (!all_default) {
    std::string expected;
    for (std::size_t i = 0; i < per_direction; ++i) expected += fmt::format("{}{}", i ? ", " : "", defaults[i]);
    unsupported(fmt::format("ONNX {}: activations [{}] are not supported (only the defaults [{}]{})", op, given,
                            expected,
                            a.op == RNNJIT_ONNX_RNN ? " and one of Relu, Sigmoid, LeakyRelu for every direction" : ""));
  }
  if (a.activation_alpha_count > 0 && !leaky)
    unsupported(fmt::format("ONNX {}: activation_alpha is not supported (of the supported activations only LeakyRelu "
                            "takes one)", op));
  if (a.activation_alpha_count > 0) {  // LeakyRelu's: one per activation, the same for every direction
    if (a.activation_alpha_count != a.activations_count)
      invalid(fmt::format("ONNX {}: activation_alpha has {} entries, expected {} (one per LeakyRelu)", op,
                          a.activation_alpha_count, a.activations_count));
    for (std::size_t i = 0; i < a.activation_alpha_count; ++i) {
      const float alpha = a.activation_alpha[i];
      if (!(alpha >= 0.0f) || std::isinf(alpha))
        unsupported(fmt::format("ONNX {}: LeakyRelu alpha {} is not supported (only finite values >= 0)", op, alpha));
      if (alpha != a.activation_alpha[0])
        unsupported(fmt::format("ONNX {}: activation_alpha differs between the directions ({} and {})", op,
                                a.activation_alpha[0], alpha));
    }
    node.config.relu_alpha = a.activation_alpha[0];
  }
  if (a.activation_beta_count > 0)
    unsupported(fmt::format("ONNX {}: activation_beta is not supported (no supported activation takes one)", op));

  rnnjit::validate(node.config);  // input_size, sizes
  return node;
}

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

// [A, B, C] -> [B, A, C] (C contiguous elements per row).
void swap_outer(const float* src, float* dst, std::int64_t A, std::int64_t B, std::int64_t C) {
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t b = 0; b < B; ++b)
      std::memcpy(dst + (b * A + a) * C, src + (a * B + b) * C, static_cast<std::size_t>(C) * sizeof(float));
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

template <typename T>
T* grow(std::vector<T>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

void onnx_forward(rnnjit_execution& e, const OnnxNode& node, std::span<const float> weights,
                  const rnnjit_onnx_io_t& io) {
  const RnnConfig& config = e.ex.config();
  const char* op = node.op_name;
  if (!(config == node.config))
    invalid(fmt::format("ONNX {}: the execution is for {}, the attributes describe {}", op, rnnjit::describe(config),
                        rnnjit::describe(node.config)));
  const std::int64_t T = e.ex.shape().seq_len, N = e.ex.shape().batch, I = config.input_size,
                     H = config.hidden_size, D = config.directions();
  const bool lstm = config.cell == CellKind::lstm, batch_first = node.layout == 1;
  const std::string shape_text = fmt::format("for ONNX {} T={} N={} I={} H={} D={} layout={}", op, T, N, I, H, D,
                                             node.layout);
  const std::int64_t states = D * N * H;

  auto X = buffer(io.X, io.X_size, "X");
  check_size(X.size(), T * N * I, "X", shape_text);
  auto seq = buffer(io.sequence_lens, io.sequence_lens_size, "sequence_lens");
  auto h0 = buffer(io.initial_h, io.initial_h_size, "initial_h");
  auto c0 = buffer(io.initial_c, io.initial_c_size, "initial_c");
  auto P = buffer(io.P, io.P_size, "P");
  auto Y = buffer(io.Y, io.Y_size, "Y");
  auto Yh = buffer(io.Y_h, io.Y_h_size, "Y_h");
  auto Yc = buffer(io.Y_c, io.Y_c_size, "Y_c");
  auto packed = bytes(io.packed_weights, io.packed_weights_bytes, "packed_weights");
  if (!h0.empty()) check_size(h0.size(), states, "initial_h", shape_text);
  if (!Y.empty()) check_size(Y.size(), T * D * N * H, "Y", shape_text);
  if (!Yh.empty()) check_size(Yh.size(), states, "Y_h", shape_text);
  if (!lstm) {
    if (!c0.empty()) invalid(fmt::format("ONNX {}: initial_c is an input of LSTM only", op));
    if (!Yc.empty()) invalid(fmt::format("ONNX {}: Y_c is an output of LSTM only", op));
    if (!P.empty()) invalid(fmt::format("ONNX {}: P is an input of LSTM only", op));
  } else {
    if (!c0.empty()) check_size(c0.size(), states, "initial_c", shape_text);
    if (!Yc.empty()) check_size(Yc.size(), states, "Y_c", shape_text);
    if (!P.empty()) {
      // P is part of the weights; a P given here must agree with them. (A weight buffer of the
      // wrong size is left to Execution::forward, which names it.)
      check_size(P.size(), D * 3 * H, "P", shape_text);
      if (!config.peephole) {
        const std::string nonzero = first_nonzero(P, 3 * H);
        if (!nonzero.empty())
          invalid(fmt::format("ONNX LSTM: P is nonzero ({}) but the network has no peepholes: set attrs.has_peepholes "
                              "and pass P to rnnjit_onnx_import_weights (rnnjit_onnx_forward does not read P)",
                              nonzero));
      } else if (const rnnjit::WeightLayout layout(config);
                 static_cast<std::int64_t>(weights.size()) == layout.total_elements()) {
        for (std::int64_t d = 0; d < D; ++d) {
          const float* imported =
              weights.data() + layout.block(0, static_cast<int>(d), rnnjit::ParamKind::weight_peephole).offset;
          for (int r = 0; r < 3; ++r)
            for (std::int64_t h = 0; h < H; ++h) {
              const std::int64_t k = kOnnxPeepholeRow[r] * H + h;
              const float given = P[static_cast<std::size_t>(d * 3 * H + k)], held = imported[r * H + h];
              if (!(given == held))
                invalid(fmt::format("ONNX LSTM: P[{}][{}] = {} differs from the peepholes in the weights ({}): P goes "
                                    "to rnnjit_onnx_import_weights (rnnjit_onnx_forward does not read P)",
                                    d, k, given, held));
            }
        }
      }
    }
  }
  // An element of length 0 has all-zero Y, Y_h and Y_c (onnxruntime's behaviour): it runs one
  // step like any other and its outputs are zeroed afterwards.
  std::vector<std::int64_t> empty_rows;
  if (!seq.empty()) {
    check_size(seq.size(), N, "sequence_lens", shape_text);
    for (std::size_t n = 0; n < seq.size(); ++n) {
      if (seq[n] < 0 || seq[n] > T)
        invalid(fmt::format("ONNX {}: sequence_lens[{}] = {} is outside [0, T = {}]", op, n, seq[n], T));
      if (seq[n] == 0) empty_rows.push_back(static_cast<std::int64_t>(n));
    }
    if (!empty_rows.empty()) {
      e.lengths.assign(seq.begin(), seq.end());
      for (std::int64_t n : empty_rows) e.lengths[static_cast<std::size_t>(n)] = 1;
      seq = {e.lengths.data(), e.lengths.size()};
    }
  }

  // Inputs in rnnjit's layout: x [T, N, I], hx/cx [D, N, H].
  std::span<const float> x = X, hx = h0, cx = c0;
  if (batch_first) {
    swap_outer(X.data(), grow(e.x, T * N * I), N, T, I);
    x = {e.x.data(), static_cast<std::size_t>(T * N * I)};
    if (!h0.empty()) {
      swap_outer(h0.data(), grow(e.hx, states), N, D, H);
      hx = {e.hx.data(), static_cast<std::size_t>(states)};
    }
    if (!c0.empty()) {
      swap_outer(c0.data(), grow(e.cx, states), N, D, H);
      cx = {e.cx.data(), static_cast<std::size_t>(states)};
    }
  }
  // Outputs: y [T, N, D*H] goes straight into Y when the layouts agree (layout 0, D = 1);
  // hy/cy [D, N, H] straight into Y_h/Y_c for layout 0.
  const bool y_direct = !Y.empty() && !batch_first && D == 1;
  std::span<float> y = y_direct ? Y : std::span<float>(grow(e.y, T * N * D * H), static_cast<std::size_t>(T * N * D * H));
  std::span<float> hy = Yh, cy = Yc;
  if (batch_first && !Yh.empty()) hy = {grow(e.hy, states), static_cast<std::size_t>(states)};
  if (batch_first && !Yc.empty()) cy = {grow(e.cy, states), static_cast<std::size_t>(states)};

  e.ex.forward(weights,
               {.x = x, .hx = hx, .cx = cx, .y = y, .hy = hy, .cy = cy, .packed_weights = packed, .seq_lengths = seq});

  if (!Y.empty() && !y_direct) {
    if (batch_first) swap_outer(y.data(), Y.data(), T, N, D * H);                              // [N, T, D, H]
    else for (std::int64_t t = 0; t < T; ++t) swap_outer(y.data() + t * N * D * H, Y.data() + t * D * N * H, N, D, H);  // [T, D, N, H]
  }
  if (batch_first && !Yh.empty()) swap_outer(hy.data(), Yh.data(), D, N, H);
  if (batch_first && !Yc.empty()) swap_outer(cy.data(), Yc.data(), D, N, H);

  // Rows of length 0, in ONNX's layouts: Y [T, D, N, H] or [N, T, D, H]; Y_h, Y_c [D, N, H] or [N, D, H].
  auto zero = [H](std::span<float> a, std::int64_t row) {
    std::fill_n(a.begin() + row * H, H, 0.0f);
  };
  for (std::int64_t n : empty_rows)
    for (std::int64_t d = 0; d < D; ++d) {
      for (std::int64_t t = 0; t < T && !Y.empty(); ++t) zero(Y, batch_first ? (n * T + t) * D + d : (t * D + d) * N + n);
      if (!Yh.empty()) zero(Yh, batch_first ? n * D + d : d * N + n);
      if (!Yc.empty()) zero(Yc, batch_first ? n * D + d : d * N + n);
    }
}

}  // namespace

extern "C" {

const char* rnnjit_last_error(void) { return t_last_error; }

const char* rnnjit_status_string(int32_t status) {
  switch (status) {
    case RNNJIT_STATUS_OK: return "OK";
    case RNNJIT_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case RNNJIT_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case RNNJIT_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case RNNJIT_STATUS_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN";
}

#define RNNJIT_STR2(x) #x
#define RNNJIT_STR(x) RNNJIT_STR2(x)
const char* rnnjit_version(void) {
  return RNNJIT_STR(RNNJIT_VERSION_MAJOR) "." RNNJIT_STR(RNNJIT_VERSION_MINOR) "." RNNJIT_STR(RNNJIT_VERSION_PATCH);
}

rnnjit_status_t rnnjit_rnn_create(const rnnjit_config_t* config, rnnjit_rnn_t** rnn) {
  if (rnn) *rnn = nullptr;
  return guarded([&] {
    rnnjit_rnn_t*& out = deref(rnn, "rnn (the output handle)");
    const rnnjit_config_t& c = deref(config, "config");
    const RnnConfig cpp = to_cpp(c);
    if (c.threads < 0) invalid(fmt::format("config.threads must be 0 (default) or positive, got {}", c.threads));
    if (c.fpmath != RNNJIT_FPMATH_STRICT && c.fpmath != RNNJIT_FPMATH_BF16)
      invalid(fmt::format("config.fpmath {} is not an rnnjit_fpmath_t (0 strict, 1 bf16)", c.fpmath));
    out = new rnnjit_rnn{rnnjit::Rnn(
        cpp, rnnjit::Options{.threads = c.threads,
                             .fpmath = c.fpmath == RNNJIT_FPMATH_BF16 ? rnnjit::FpMath::bf16 : rnnjit::FpMath::strict})};
  });
}

void rnnjit_rnn_destroy(rnnjit_rnn_t* rnn) { delete rnn; }

rnnjit_status_t rnnjit_rnn_weights_size(const rnnjit_rnn_t* rnn, size_t* elements) {
  return guarded([&] {
    std::size_t& out = deref(elements, "elements");
    out = static_cast<std::size_t>(deref(rnn, "rnn").rnn.weights_size());
  });
}

rnnjit_status_t rnnjit_rnn_weight_block(const rnnjit_rnn_t* rnn, const char* name, size_t* offset, size_t* elements) {
  return guarded([&] {
    const rnnjit::Rnn& r = deref(rnn, "rnn").rnn;
    const char& n = deref(name, "name");
    std::size_t& off = deref(offset, "offset");
    std::size_t& count = deref(elements, "elements");
    const rnnjit::ParamBlock& b = r.weight_layout().find(&n);
    off = static_cast<std::size_t>(b.offset);
    count = static_cast<std::size_t>(b.size);
  });
}

rnnjit_status_t rnnjit_execution_create(const rnnjit_rnn_t* rnn, int64_t seq_len, int64_t batch, int32_t mode,
                                        rnnjit_execution_t** execution) {
  if (execution) *execution = nullptr;
  return guarded([&] {
    rnnjit_execution_t*& out = deref(execution, "execution (the output handle)");
    const rnnjit::Rnn& r = deref(rnn, "rnn").rnn;
    rnnjit::Mode m;
    switch (mode) {
      case RNNJIT_MODE_INFERENCE: m = rnnjit::Mode::inference; break;
      case RNNJIT_MODE_TRAINING: m = rnnjit::Mode::training; break;
      default: invalid(fmt::format("mode is {}, not RNNJIT_MODE_INFERENCE or RNNJIT_MODE_TRAINING", mode));
    }
    out = new rnnjit_execution{r.prepare({.seq_len = seq_len, .batch = batch}, m), {}, {}, {}, {}, {}, {}};
  });
}

void rnnjit_execution_destroy(rnnjit_execution_t* execution) { delete execution; }

rnnjit_status_t rnnjit_execution_tensor_sizes(const rnnjit_execution_t* execution, rnnjit_tensor_sizes_t* sizes) {
  return guarded([&] {
    const rnnjit::Execution& ex = deref(execution, "execution").ex;
    rnnjit_tensor_sizes_t& s = deref(sizes, "sizes");
    s.x = static_cast<std::size_t>(rnnjit::x_elements(ex.config(), ex.shape()));
    s.y = static_cast<std::size_t>(rnnjit::y_elements(ex.config(), ex.shape()));
    s.state = static_cast<std::size_t>(rnnjit::state_elements(ex.config(), ex.shape()));
    s.cell_state = static_cast<std::size_t>(rnnjit::cell_state_elements(ex.config(), ex.shape()));
    s.weights = static_cast<std::size_t>(rnnjit::WeightLayout(ex.config()).total_elements());
  });
}

rnnjit_status_t rnnjit_execution_workspace_size(const rnnjit_execution_t* execution, size_t* bytes_out) {
  return guarded([&] { deref(bytes_out, "bytes") = deref(execution, "execution").ex.workspace_size(); });
}

rnnjit_status_t rnnjit_execution_reserve_size(const rnnjit_execution_t* execution, size_t* bytes_out) {
  return guarded([&] { deref(bytes_out, "bytes") = deref(execution, "execution").ex.reserve_size(); });
}

rnnjit_status_t rnnjit_execution_packed_weights_size(const rnnjit_execution_t* execution, size_t* bytes_out) {
  return guarded([&] { deref(bytes_out, "bytes") = deref(execution, "execution").ex.packed_weights_size(); });
}

rnnjit_status_t rnnjit_pack_weights(const rnnjit_execution_t* execution, const float* weights, size_t weights_size,
                                    void* packed, size_t packed_bytes) {
  return guarded([&] {
    const rnnjit::Execution& ex = deref(execution, "execution").ex;
    ex.pack_weights(buffer(weights, weights_size, "weights"), bytes(packed, packed_bytes, "packed"));
  });
}

rnnjit_status_t rnnjit_forward(rnnjit_execution_t* execution, const float* weights, size_t weights_size,
                               const rnnjit_forward_io_t* io) {
  return guarded([&] {
    rnnjit::Execution& ex = deref(execution, "execution").ex;
    const rnnjit_forward_io_t& b = deref(io, "io");
    ex.forward(buffer(weights, weights_size, "weights"),
               {.x = buffer(b.x, b.x_size, "x"),
                .hx = buffer(b.hx, b.hx_size, "hx"),
                .cx = buffer(b.cx, b.cx_size, "cx"),
                .y = buffer(b.y, b.y_size, "y"),
                .hy = buffer(b.hy, b.hy_size, "hy"),
                .cy = buffer(b.cy, b.cy_size, "cy"),
                .packed_weights = bytes(b.packed_weights, b.packed_weights_bytes, "packed_weights"),
                .seq_lengths = buffer(b.seq_lengths, b.seq_lengths_size, "seq_lengths"),
                .dropout_seed = b.dropout_seed},
               bytes(b.reserve, b.reserve_bytes, "reserve"), bytes(b.workspace, b.workspace_bytes, "workspace"));
  });
}

rnnjit_status_t rnnjit_backward_data(rnnjit_execution_t* execution, const float* weights, size_t weights_size,
                                     const rnnjit_backward_data_io_t* io) {
  return guarded([&] {
    rnnjit::Execution& ex = deref(execution, "execution").ex;
    const rnnjit_backward_data_io_t& b = deref(io, "io");
    ex.backward_data(buffer(weights, weights_size, "weights"),
                     {.dy = buffer(b.dy, b.dy_size, "dy"),
                      .dhy = buffer(b.dhy, b.dhy_size, "dhy"),
                      .dcy = buffer(b.dcy, b.dcy_size, "dcy"),
                      .dx = buffer(b.dx, b.dx_size, "dx"),
                      .dhx = buffer(b.dhx, b.dhx_size, "dhx"),
                      .dcx = buffer(b.dcx, b.dcx_size, "dcx")},
                     bytes(b.reserve, b.reserve_bytes, "reserve"), bytes(b.workspace, b.workspace_bytes, "workspace"));
  });
}

rnnjit_status_t rnnjit_backward_weights(rnnjit_execution_t* execution, const rnnjit_backward_weights_io_t* io) {
  return guarded([&] {
    rnnjit::Execution& ex = deref(execution, "execution").ex;
    const rnnjit_backward_weights_io_t& b = deref(io, "io");
    ex.backward_weights({.x = buffer(b.x, b.x_size, "x"),
                         .dweights = buffer(b.dweights, b.dweights_size, "dweights"),
                         .accumulate = b.accumulate != 0},
                        bytes(b.reserve, b.reserve_bytes, "reserve"), bytes(b.workspace, b.workspace_bytes, "workspace"));
  });
}

rnnjit_status_t rnnjit_onnx_config(const rnnjit_onnx_attributes_t* attrs, int64_t input_size, rnnjit_config_t* config) {
  return guarded([&] {
    rnnjit_config_t& out = deref(config, "config");
    out = to_c(onnx_node(attrs, input_size).config);
  });
}

rnnjit_status_t rnnjit_onnx_import_weights(const rnnjit_onnx_attributes_t* attrs, int64_t input_size,
                                           const float* W, size_t W_size, const float* R, size_t R_size,
                                           const float* B, size_t B_size, const float* P, size_t P_size,
                                           float* weights, size_t weights_size) {
  return guarded([&] {
    const OnnxNode node = onnx_node(attrs, input_size);
    const RnnConfig& c = node.config;
    const rnnjit::WeightLayout layout(c);
    const std::int64_t D = c.directions(), G = c.gates(), H = c.hidden_size, I = c.input_size;
    const std::string what = fmt::format("for ONNX {} I={} H={} D={}", node.op_name, I, H, D);
    auto w = buffer(W, W_size, "W");
    auto r = buffer(R, R_size, "R");
    auto b = buffer(B, B_size, "B");
    auto p = buffer(P, P_size, "P");
    auto out = buffer(weights, weights_size, "weights");
    check_size(w.size(), D * G * H * I, "W", what);
    check_size(r.size(), D * G * H * H, "R", what);
    if (!b.empty()) check_size(b.size(), D * 2 * G * H, "B", what);
    if (!p.empty()) {
      if (c.cell != CellKind::lstm) invalid(fmt::format("ONNX {}: P is an input of LSTM only", node.op_name));
      check_size(p.size(), D * 3 * H, "P", what);
      if (!c.peephole) {
        const std::string nonzero = first_nonzero(p, 3 * H);
        if (!nonzero.empty())
          invalid(fmt::format("ONNX LSTM: P is nonzero ({}) but attrs.has_peepholes is not set (the network "
                              "would have no peepholes)", nonzero));
      }
    } else if (c.peephole) {
      invalid("ONNX LSTM: attrs.has_peepholes is set but P is not given (NULL, 0): the peepholes are imported "
              "with the weights");
    }
    check_size(out.size(), layout.total_elements(), "weights", what);
    const std::span<const int> onnx_gate = onnx_gate_of(c.cell);
    using rnnjit::ParamKind;
    for (int d = 0; d < D; ++d) {
      // Rows of gate g (H rows of `cols` each) come from ONNX gate onnx_gate[g].
      auto permute = [&](const float* src, ParamKind kind, std::int64_t cols) {
        float* dst = out.data() + layout.block(0, d, kind).offset;
        for (std::int64_t g = 0; g < G; ++g)
          std::memcpy(dst + g * H * cols, src + onnx_gate[static_cast<std::size_t>(g)] * H * cols,
                      static_cast<std::size_t>(H * cols) * sizeof(float));
      };
      permute(w.data() + d * G * H * I, ParamKind::weight_ih, I);
      permute(r.data() + d * G * H * H, ParamKind::weight_hh, H);
      if (b.empty()) {
        for (ParamKind kind : {ParamKind::bias_ih, ParamKind::bias_hh}) {
          const rnnjit::ParamBlock& block = layout.block(0, d, kind);
          std::fill_n(out.data() + block.offset, block.size, 0.0f);
        }
      } else {
        permute(b.data() + d * 2 * G * H, ParamKind::bias_ih, 1);          // Wb
        permute(b.data() + d * 2 * G * H + G * H, ParamKind::bias_hh, 1);  // Rb
      }
      if (c.peephole) {
        float* dst = out.data() + layout.block(0, d, ParamKind::weight_peephole).offset;
        for (int row = 0; row < 3; ++row)
          std::memcpy(dst + row * H, p.data() + (d * 3 + kOnnxPeepholeRow[row]) * H,
                      static_cast<std::size_t>(H) * sizeof(float));
      }
    }
  });
}

rnnjit_status_t rnnjit_onnx_forward(rnnjit_execution_t* execution, const rnnjit_onnx_attributes_t* attrs,
                                    const float* weights, size_t weights_size, const rnnjit_onnx_io_t* io) {
  return guarded([&] {
    rnnjit_execution& e = deref(execution, "execution");
    const rnnjit_onnx_io_t& b = deref(io, "io");
    const OnnxNode node = onnx_node(attrs, e.ex.config().input_size);
    onnx_forward(e, node, buffer(weights, weights_size, "weights"), b);
  });
}

}  // extern "C"
