// rnnjit's ONNX Runtime library: a node that rnnjit does not run (a default-domain LSTM, GRU or
// RNN, or a com.microsoft:DynamicQuantizeLSTM), handed to ONNX Runtime's own CPU kernel through
// the custom-op API's CreateOp/InvokeOp. That API makes the kernel from ONNX Runtime's built-in
// kernel registry (its standalone op invoker), not from the custom ops registered here, so the
// node reaches the built-in kernel (for DynamicQuantizeLSTM its contrib kernel) and not this
// library again.
#include <cstdio>
#include <cstring>

#include "onnxruntime/kernel.hpp"

namespace rnnjit::ort {
namespace {

// The opset whose kernel is asked for: 14, the first with `layout`, served by every ONNX
// Runtime this library runs under (its LSTM, GRU and RNN semantics are those of opsets 14-22).
// DynamicQuantizeLSTM has one version (1) in com.microsoft.
constexpr int kBuiltinOpset = 14, kQuantizedLstmVersion = 1;

// The element type of a node's input (DynamicQuantizeLSTM's W: int8 or uint8, its T2).
ONNXTensorElementDataType input_element_type(const OrtKernelInfo* info, std::size_t index) {
  const OrtApi& a = *api().api;
  OrtTypeInfo* type = nullptr;
  check(a.KernelInfo_GetInputTypeInfo(info, index, &type));
  const OrtTensorTypeAndShapeInfo* tensor = nullptr;
  ONNXTensorElementDataType element = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  OrtStatus* status = a.CastTypeInfoToTensorInfo(type, &tensor);
  if (!status && tensor) status = a.GetTensorElementType(tensor, &element);
  a.ReleaseTypeInfo(type);
  if (status) check(status);
  return element;
}

struct OpAttrs {
  std::vector<OrtOpAttr*> attrs;
  ~OpAttrs() {
    for (OrtOpAttr* a : attrs) api().api->ReleaseOpAttr(a);
  }
  void add(const char* name, const void* data, int len, OrtOpAttrType type) {
    OrtOpAttr* a = nullptr;
    check(api().api->CreateOpAttr(name, data, len, type, &a));
    attrs.push_back(a);
  }
};

class BuiltinKernel final : public Kernel {
 public:
  BuiltinKernel(const OrtKernelInfo* info, RnnNode node, bool quantized) : node_(std::move(node)) {
    const RnnAttributes& a = node_.attrs;
    if (a.activations_unreadable)
      node_.fail_here("its activations cannot be read by this ONNX Runtime (C API " + std::to_string(api().version) +
                          "; string lists need 25), so neither rnnjit nor ONNX Runtime's kernel can be given them",
                      ORT_NOT_IMPLEMENTED);
    // The standalone kernel gets no schema defaults: every attribute it reads is given, the
    // node's or ONNX's default.
    OpAttrs attrs;
    const std::int64_t hidden_size = a.hidden_size.value_or(0), layout = a.layout.value_or(0);
    const std::int64_t linear_before_reset = a.linear_before_reset.value_or(0), input_forget = a.input_forget.value_or(0);
    const std::string direction = a.direction.value_or("forward");
    attrs.add("hidden_size", &hidden_size, 1, ORT_OP_ATTR_INT);
    if (!quantized) attrs.add("layout", &layout, 1, ORT_OP_ATTR_INT);  // DynamicQuantizeLSTM has none
    attrs.add("direction", direction.c_str(), static_cast<int>(direction.size()), ORT_OP_ATTR_STRING);
    if (a.op == RNNJIT_ONNX_GRU) attrs.add("linear_before_reset", &linear_before_reset, 1, ORT_OP_ATTR_INT);
    if (a.op == RNNJIT_ONNX_LSTM) attrs.add("input_forget", &input_forget, 1, ORT_OP_ATTR_INT);
    if (a.clip) attrs.add("clip", &*a.clip, 1, ORT_OP_ATTR_FLOAT);
    std::vector<std::string> activations;
    if (a.activations) {
      activations = *a.activations;
    } else {
      const std::vector<std::string> defaults = a.op == RNNJIT_ONNX_LSTM ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                                : a.op == RNNJIT_ONNX_GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                          : std::vector<std::string>{"Tanh"};
      for (int d = 0; d < a.directions(); ++d) activations.insert(activations.end(), defaults.begin(), defaults.end());
    }
    std::vector<const char*> names;
    for (const std::string& s : activations) names.push_back(s.c_str());
    attrs.add("activations", names.data(), static_cast<int>(names.size()), ORT_OP_ATTR_STRINGS);
    if (a.activation_alpha)
      attrs.add("activation_alpha", a.activation_alpha->data(), static_cast<int>(a.activation_alpha->size()),
                ORT_OP_ATTR_FLOATS);
    if (a.activation_beta)
      attrs.add("activation_beta", a.activation_beta->data(), static_cast<int>(a.activation_beta->size()),
                ORT_OP_ATTR_FLOATS);
    // The kernels' type constraints: T (float) and T1 (sequence_lens' int32); DynamicQuantizeLSTM's
    // T2 too, the type of its W, R and zero points.
    const char* constraint_names[] = {"T", "T1", "T2"};
    const ONNXTensorElementDataType constraint_types[] = {
        ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32,
        quantized ? input_element_type(info, kW) : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED};
    inputs_ = static_cast<int>(quantized ? kQuantizedInputs : input_count(a.op));
    outputs_ = static_cast<int>(output_count(a.op));
    OrtStatus* status = quantized ? api().api->CreateOp(info, "DynamicQuantizeLSTM", "com.microsoft",
                                                        kQuantizedLstmVersion, constraint_names, constraint_types, 3,
                                                        attrs.attrs.data(), static_cast<int>(attrs.attrs.size()),
                                                        inputs_, outputs_, &op_)
                                  : api().api->CreateOp(info, op_name(a.op), "", kBuiltinOpset, constraint_names,
                                                        constraint_types, 2, attrs.attrs.data(),
                                                        static_cast<int>(attrs.attrs.size()), inputs_, outputs_, &op_);
    if (status) {
      const std::string message = api().api->GetErrorMessage(status);
      api().api->ReleaseStatus(status);
      node_.fail_here("ONNX Runtime's own kernel could not be made (" + message + ")", ORT_NOT_IMPLEMENTED);
    }
  }

  ~BuiltinKernel() override {
    if (op_) api().api->ReleaseOp(op_);
  }

  void compute(OrtKernelContext* ctx) override {
    RunShape s;
    RunTensors t = bind_run(node_, ctx, s);  // checks the tensors and allocates the outputs
    std::vector<const OrtValue*> in(static_cast<std::size_t>(inputs_), nullptr);
    std::vector<OrtValue*> out(static_cast<std::size_t>(outputs_), nullptr);
    for (std::size_t i = 0; i < in.size() && i < t.in.size(); ++i) in[i] = t.in[i].value;
    for (std::size_t i = t.in.size(); i < in.size(); ++i)  // DynamicQuantizeLSTM's scales and zero points
      check(api().api->KernelContext_GetInput(ctx, i, &in[i]));
    for (std::size_t o = 0; o < out.size(); ++o) out[o] = t.out[o];
    check(api().api->InvokeOp(ctx, op_, in.data(), inputs_, out.data(), outputs_));
    counters().builtin_runs.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  RnnNode node_;
  OrtOp* op_ = nullptr;
  int inputs_ = 0, outputs_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> make_builtin_kernel(const OrtKernelInfo* info, RnnNode node, bool quantized) {
  auto k = std::make_unique<BuiltinKernel>(info, std::move(node), quantized);
  counters().builtin_kernels.fetch_add(1, std::memory_order_relaxed);
  return k;
}

}  // namespace rnnjit::ort
