// rnnjit's ONNX Runtime library: a node's sizes and tensor checks (onnxruntime/rnn_node.hpp).
#include "onnxruntime/rnn_node.hpp"

namespace rnnjit::ort {
namespace {

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

const char* op_name(rnnjit_onnx_op_t op) {
  return op == RNNJIT_ONNX_LSTM ? "LSTM" : op == RNNJIT_ONNX_GRU ? "GRU" : "RNN";
}

void RnnNode::fail_here(const std::string& message, OrtErrorCode code) const {
  fail("rnnjit: " + what + ": " + message, code);
}

void RnnNode::check_dims(const TensorView& t, const char* name, const std::vector<std::int64_t>& want,
                         ONNXTensorElementDataType type) const {
  if (t.type != type)
    fail_here(std::string(name) + " has element type " + std::to_string(static_cast<int>(t.type)) + ", expected " +
              (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ? "int32" : "float"));
  if (t.dims != want) fail_here(std::string(name) + " has shape " + dims_text(t.dims) + ", expected " + dims_text(want));
}

RunShape RnnNode::shape_of(const TensorView& X) const {
  if (X.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) fail_here("X must be a float tensor");
  if (X.dims.size() != 3) fail_here("X has shape " + dims_text(X.dims) + ": rank 3 expected");
  RunShape s;
  s.batch_first = attrs.batch_first();
  s.T = X.dims[s.batch_first ? 1 : 0];
  s.N = X.dims[s.batch_first ? 0 : 1];
  s.I = X.dims[2];
  s.H = attrs.hidden_size.value_or(0);
  s.D = attrs.directions();
  if (s.T <= 0 || s.N <= 0 || s.I <= 0)
    fail_here("X has shape " + dims_text(X.dims) + ": sequence length, batch and input size must be positive");
  return s;
}

void RnnNode::check_weights(const TensorView& W, const TensorView& R, const TensorView& B, const TensorView& P) const {
  const std::int64_t D = attrs.directions(), G = attrs.gates(), H = attrs.hidden_size.value_or(0);
  if (W.dims.size() != 3) fail_here("W has shape " + dims_text(W.dims) + ": rank 3 expected");
  check_dims(W, "W", {D, G * H, W.dims[2]});
  check_dims(R, "R", {D, G * H, H});
  if (B) check_dims(B, "B", {D, 2 * G * H});
  if (P) check_dims(P, "P", {D, 3 * H});
}

void RnnNode::check_run_inputs(const RunShape& s, const TensorView& seq, const TensorView& h0,
                               const TensorView& c0) const {
  if (seq) check_dims(seq, "sequence_lens", {s.N}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
  const std::vector<std::int64_t> state = state_dims(s);
  if (h0) check_dims(h0, "initial_h", state);
  if (c0) check_dims(c0, "initial_c", state);
}

std::vector<std::int64_t> RnnNode::y_dims(const RunShape& s) const {
  if (s.batch_first) return {s.N, s.T, s.D, s.H};
  return {s.T, s.D, s.N, s.H};
}

std::vector<std::int64_t> RnnNode::state_dims(const RunShape& s) const {
  if (s.batch_first) return {s.N, s.D, s.H};
  return {s.D, s.N, s.H};
}

RunTensors bind_run(const RnnNode& node, OrtKernelContext* ctx, RunShape& shape) {
  const OrtApi& a = *api().api;
  RunTensors t;
  std::size_t inputs = 0, outputs = 0;
  check(a.KernelContext_GetInputCount(ctx, &inputs));
  check(a.KernelContext_GetOutputCount(ctx, &outputs));
  for (std::size_t i = 0; i < inputs && i < t.in.size(); ++i) {
    const OrtValue* v = nullptr;
    check(a.KernelContext_GetInput(ctx, i, &v));
    t.in[i] = view(v);
  }
  if (!t.in[kX] || !t.in[kW] || !t.in[kR]) node.fail_here("X, W and R are required inputs");
  shape = node.shape_of(t.in[kX]);
  node.check_run_inputs(shape, t.in[kSequenceLens], t.in[kInitialH], t.in[kInitialC]);
  const std::vector<std::int64_t> y = node.y_dims(shape), state = node.state_dims(shape);
  for (std::size_t o = 0; o < outputs && o < t.out.size(); ++o) {
    const std::vector<std::int64_t>& dims = o == kY ? y : state;
    check(a.KernelContext_GetOutput(ctx, o, dims.data(), dims.size(), &t.out[o]));
  }
  return t;
}

}  // namespace rnnjit::ort
