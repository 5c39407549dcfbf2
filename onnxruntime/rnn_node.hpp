// rnnjit's ONNX Runtime library: what every kernel of an LSTM, GRU or RNN node shares: the
// inputs and outputs by index, a run's sizes from X and the attributes, each tensor checked
// against them (a one-line ONNX Runtime error naming the node and the tensor), and the output
// shapes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "onnxruntime/ort_call.hpp"
#include "onnxruntime/rnn_attributes.hpp"

namespace rnnjit::ort {

// ONNX's inputs (LSTM has all 8, GRU and RNN the first 6) and outputs (LSTM 3, the others 2).
enum Input : std::size_t { kX, kW, kR, kB, kSequenceLens, kInitialH, kInitialC, kP };
enum Output : std::size_t { kY, kYh, kYc };
inline std::size_t input_count(rnnjit_onnx_op_t op) { return op == RNNJIT_ONNX_LSTM ? 8 : 6; }
inline std::size_t output_count(rnnjit_onnx_op_t op) { return op == RNNJIT_ONNX_LSTM ? 3 : 2; }
const char* op_name(rnnjit_onnx_op_t op);

// A run's sizes.
struct RunShape {
  std::int64_t T = 0, N = 0, I = 0, H = 0, D = 1;
  bool batch_first = false;
};

// The kernel's view of one node: its attributes and a name for messages ("LSTM node 'lstm_1'").
struct RnnNode {
  RnnAttributes attrs;
  std::string what;

  // Sizes from X's dimensions (rank 3, T and N positive) and hidden_size.
  RunShape shape_of(const TensorView& X) const;
  // W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H], P [D, 3*H]; I is W's own (checked against X's by the caller).
  void check_weights(const TensorView& W, const TensorView& R, const TensorView& B, const TensorView& P) const;
  // sequence_lens [N] (int32), initial_h/initial_c [D, N, H] ([N, D, H] for layout 1).
  void check_run_inputs(const RunShape& s, const TensorView& seq, const TensorView& h0, const TensorView& c0) const;
  // Y [T, D, N, H] ([N, T, D, H]), Y_h and Y_c [D, N, H] ([N, D, H]).
  std::vector<std::int64_t> y_dims(const RunShape& s) const;
  std::vector<std::int64_t> state_dims(const RunShape& s) const;
  // A failure naming the node.
  [[noreturn]] void fail_here(const std::string& message, OrtErrorCode code = ORT_INVALID_ARGUMENT) const;
  void check_dims(const TensorView& t, const char* name, const std::vector<std::int64_t>& want,
                  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) const;
};

// The node's inputs of this run (absent optional ones: empty views) and its outputs, allocated
// with their shapes (absent: nullptr).
struct RunTensors {
  std::array<TensorView, 8> in;
  std::array<OrtValue*, 3> out{};
};
RunTensors bind_run(const RnnNode& node, OrtKernelContext* ctx, RunShape& shape);

}  // namespace rnnjit::ort
