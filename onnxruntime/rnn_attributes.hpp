// rnnjit's ONNX Runtime library: an LSTM, GRU or RNN node's attributes, read from ONNX Runtime's
// OrtKernelInfo and held as rnnjit's C API takes them (rnnjit_onnx_attributes_t), and as
// ONNX Runtime's own kernel takes them back (builtin_kernel.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onnxruntime/ort_call.hpp"
#include "rnnjit.h"

namespace rnnjit::ort {

struct RnnAttributes {
  rnnjit_onnx_op_t op = RNNJIT_ONNX_LSTM;
  std::optional<std::int64_t> hidden_size, layout, linear_before_reset, input_forget;
  std::optional<float> clip;
  std::optional<std::string> direction;
  std::optional<std::vector<std::string>> activations;
  std::optional<std::vector<float>> activation_alpha, activation_beta;
  // Set where the node has `activations` but this ONNX Runtime cannot read string lists (C API < 25).
  bool activations_unreadable = false;

  int directions() const { return direction && *direction == "bidirectional" ? 2 : 1; }
  int gates() const { return op == RNNJIT_ONNX_LSTM ? 4 : op == RNNJIT_ONNX_GRU ? 3 : 1; }
  bool batch_first() const { return layout.value_or(0) == 1; }
};

RnnAttributes read_attributes(const OrtKernelInfo* info, rnnjit_onnx_op_t op);

// The C API's view of the attributes; valid while `a` lives and is unchanged.
struct CAttributes {
  rnnjit_onnx_attributes_t attrs{};
  std::vector<const char*> activation_names;
};
void fill_c_attributes(const RnnAttributes& a, bool has_peepholes, CAttributes& out);

}  // namespace rnnjit::ort
