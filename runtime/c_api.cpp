// rnnjit: the C API (runtime/include/rnnjit.h) over the C++ API; ONNX's RNN, GRU and LSTM
// operators (rnnjit_onnx_*) are runtime/onnx_adapter.cpp's.
//
// Every entry point runs its body through guarded(): no exception crosses the C boundary.
// Mapping: CApiError carries its own status (argument checks and UNSUPPORTED features of the C
// API and the ONNX adapter); rnnjit::Error is INVALID_ARGUMENT except two messages of the C++
// library that are not the caller's mistake (an RNNJIT_ISA the CPU lacks: UNSUPPORTED; a failed
// aligned allocation: OUT_OF_MEMORY); std::bad_alloc is OUT_OF_MEMORY; anything else is INTERNAL.
#include "rnnjit.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include <fmt/format.h>

#include "rnnjit/rnn.hpp"
#include "runtime/c_api_internal.hpp"
#include "runtime/onnx_adapter.hpp"

namespace {

using rnnjit::CellKind;
using rnnjit::Error;
using rnnjit::RnnConfig;
using rnnjit::c_api::buffer;
using rnnjit::c_api::bytes;
using rnnjit::c_api::CApiError;
using rnnjit::c_api::deref;
using rnnjit::c_api::invalid;

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
    // codegen/planner/: a valid cell and mode the JIT backend does not implement (no such refusal
    // is left: the last, the reset-before GRU's training, went with commit 9bfcb2c).
    if (contains(e.what(), "is not supported on the JIT backend")) return fail(RNNJIT_STATUS_UNSUPPORTED, e.what());
    // kernels/reference.cpp, codegen/planner/planner.cpp: ONNX's activations in training.
    if (contains(e.what(), "are for inference only")) return fail(RNNJIT_STATUS_UNSUPPORTED, e.what());
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


// rnnjit_activation_kind_t numbers the C++ API's Activation.
static_assert(RNNJIT_ACTIVATION_STANDARD == static_cast<int>(rnnjit::Activation::standard) &&
              RNNJIT_ACTIVATION_RELU == static_cast<int>(rnnjit::Activation::relu) &&
              RNNJIT_ACTIVATION_TANH == static_cast<int>(rnnjit::Activation::tanh) &&
              RNNJIT_ACTIVATION_SIGMOID == static_cast<int>(rnnjit::Activation::sigmoid) &&
              RNNJIT_ACTIVATION_AFFINE == static_cast<int>(rnnjit::Activation::affine) &&
              RNNJIT_ACTIVATION_LEAKY_RELU == static_cast<int>(rnnjit::Activation::leaky_relu) &&
              RNNJIT_ACTIVATION_THRESHOLDED_RELU == static_cast<int>(rnnjit::Activation::thresholded_relu) &&
              RNNJIT_ACTIVATION_SCALED_TANH == static_cast<int>(rnnjit::Activation::scaled_tanh) &&
              RNNJIT_ACTIVATION_HARD_SIGMOID == static_cast<int>(rnnjit::Activation::hard_sigmoid) &&
              RNNJIT_ACTIVATION_ELU == static_cast<int>(rnnjit::Activation::elu) &&
              RNNJIT_ACTIVATION_SOFTSIGN == static_cast<int>(rnnjit::Activation::softsign) &&
              RNNJIT_ACTIVATION_SOFTPLUS == static_cast<int>(rnnjit::Activation::softplus) &&
              RNNJIT_ACTIVATION_SOFTPLUS + 1 == rnnjit::kActivationKinds);

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
  for (int d = 0; d < 2; ++d)
    for (int r = 0; r < rnnjit::kActivationRoles; ++r) {
      const rnnjit_activation_t& a = c.activations[d][r];
      if (a.kind < 0 || a.kind >= rnnjit::kActivationKinds)
        invalid(fmt::format("config.activations[{}][{}].kind is {}, not an rnnjit_activation_kind_t", d, r, a.kind));
      config.activations[d][r] = {static_cast<rnnjit::Activation>(a.kind), a.alpha, a.beta};
    }
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
  for (int d = 0; d < 2; ++d)
    for (int r = 0; r < rnnjit::kActivationRoles; ++r) {
      const rnnjit::ActivationFunction& f = config.activations[d][r];
      c.activations[d][r] = {static_cast<int32_t>(f.kind), f.alpha, f.beta};
    }
  c.fpmath = RNNJIT_FPMATH_STRICT;
  c.quantize = RNNJIT_QUANTIZE_NONE;
  return c;
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
    if (c.quantize != RNNJIT_QUANTIZE_NONE && c.quantize != RNNJIT_QUANTIZE_INT8_DYNAMIC)
      invalid(fmt::format("config.quantize {} is not an rnnjit_quantize_t (0 none, 1 int8_dynamic)", c.quantize));
    out = new rnnjit_rnn{rnnjit::Rnn(
        cpp, rnnjit::Options{.threads = c.threads,
                             .fpmath = c.fpmath == RNNJIT_FPMATH_BF16 ? rnnjit::FpMath::bf16 : rnnjit::FpMath::strict,
                             .quantize = c.quantize == RNNJIT_QUANTIZE_INT8_DYNAMIC ? rnnjit::Quantize::int8_dynamic
                                                                                   : rnnjit::Quantize::none})};
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
    out = to_c(rnnjit::onnx::onnx_node(attrs, input_size).config);
  });
}

rnnjit_status_t rnnjit_onnx_import_weights(const rnnjit_onnx_attributes_t* attrs, int64_t input_size,
                                           const float* W, size_t W_size, const float* R, size_t R_size,
                                           const float* B, size_t B_size, const float* P, size_t P_size,
                                           float* weights, size_t weights_size) {
  return guarded([&] {
    const rnnjit::onnx::OnnxNode node = rnnjit::onnx::onnx_node(attrs, input_size);
    // Braced: evaluated, and so checked, in this order.
    const rnnjit::onnx::OnnxWeights w{buffer(W, W_size, "W"), buffer(R, R_size, "R"), buffer(B, B_size, "B"),
                                      buffer(P, P_size, "P")};
    rnnjit::onnx::import_weights(node, w, buffer(weights, weights_size, "weights"));
  });
}

rnnjit_status_t rnnjit_onnx_forward(rnnjit_execution_t* execution, const rnnjit_onnx_attributes_t* attrs,
                                    const float* weights, size_t weights_size, const rnnjit_onnx_io_t* io) {
  return guarded([&] {
    rnnjit_execution& e = deref(execution, "execution");
    const rnnjit_onnx_io_t& b = deref(io, "io");
    const rnnjit::onnx::OnnxNode node = rnnjit::onnx::onnx_node(attrs, e.ex.config().input_size);
    rnnjit::onnx::forward(e, node, buffer(weights, weights_size, "weights"), b);
  });
}

}  // extern "C"
