// rnnjit: ONNX's RNN, GRU and LSTM operators over the C++ API (runtime/onnx_adapter.cpp), for the
// C API's rnnjit_onnx_* entry points (runtime/c_api.cpp). Internal: no interface includes it.
// Every function throws c_api::CApiError (INVALID_ARGUMENT for values ONNX does not allow,
// UNSUPPORTED for valid ones rnnjit does not implement) or rnnjit::Error.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/c_api_internal.hpp"

namespace rnnjit::onnx {

// An ONNX node as the equivalent one-layer network.
struct OnnxNode {
  RnnConfig config;  // one layer
  int layout = 0;
  const char* op_name = "";
};

// The caller's ONNX weights (empty: not given): W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] and
// LSTM's P [D, 3*H], in ONNX's gate order.
struct OnnxWeights {
  std::span<const float> W, R, B, P;
};

// Checks the attributes and returns the equivalent one-layer network.
OnnxNode onnx_node(const rnnjit_onnx_attributes_t* attrs, std::int64_t input_size);

// ONNX's weights into rnnjit's canonical layout (WeightLayout of node.config), `out`.
void import_weights(const OnnxNode& node, const OnnxWeights& w, std::span<float> out);

// Runs the node on the execution e, with canonical weights, tensors in ONNX's layouts.
void forward(rnnjit_execution& e, const OnnxNode& node, std::span<const float> weights, const rnnjit_onnx_io_t& io);

}  // namespace rnnjit::onnx
