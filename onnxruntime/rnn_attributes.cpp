// rnnjit's ONNX Runtime library: reading a node's attributes (onnxruntime/rnn_attributes.hpp).
#include "onnxruntime/rnn_attributes.hpp"

#include <string_view>

namespace rnnjit::ort {
namespace {

// Whether the status says the attribute is absent (ONNX Runtime's OpNodeProtoHelper::GetAttr:
// "No attribute with name:'x'is defined."), releasing it; any other failure is thrown.
bool absent(OrtStatus* status) {
  if (!status) return false;
  const OrtApi& a = *api().api;
  const std::string message = a.GetErrorMessage(status);
  a.ReleaseStatus(status);
  if (message.find("No attribute with") != std::string::npos) return true;
  fail("rnnjit: reading an attribute: " + message);
}

std::optional<std::int64_t> read_int(const OrtKernelInfo* info, const char* name) {
  std::int64_t v = 0;
  if (absent(api().api->KernelInfoGetAttribute_int64(info, name, &v))) return std::nullopt;
  return v;
}

std::optional<float> read_float(const OrtKernelInfo* info, const char* name) {
  float v = 0;
  if (absent(api().api->KernelInfoGetAttribute_float(info, name, &v))) return std::nullopt;
  return v;
}

std::optional<std::string> read_string(const OrtKernelInfo* info, const char* name) {
  std::size_t size = 0;
  if (absent(api().api->KernelInfoGetAttribute_string(info, name, nullptr, &size))) return std::nullopt;
  std::string v(size, '\0');
  check(api().api->KernelInfoGetAttribute_string(info, name, v.data(), &size));
  v.resize(size > 0 ? size - 1 : 0);  // size counts the terminating NUL
  return v;
}

std::optional<std::vector<float>> read_floats(const OrtKernelInfo* info, const char* name) {
  std::size_t size = 0;
  if (absent(api().api->KernelInfoGetAttributeArray_float(info, name, nullptr, &size))) return std::nullopt;
  std::vector<float> v(size);
  if (size > 0) check(api().api->KernelInfoGetAttributeArray_float(info, name, v.data(), &size));
  return v;
}

// A list of strings: KernelInfoGetAttributeArray_string (C API 25, ONNX Runtime 1.25). Before
// it the list cannot be read; whether the node has one is told by reading it as one string,
// which fails with another message than an absent attribute's.
std::optional<std::vector<std::string>> read_strings(const OrtKernelInfo* info, const char* name, bool& unreadable) {
#if ORT_API_VERSION >= 25
  if (api().version >= 25) {
    const OrtApi& a = *api().api;
    OrtAllocator* allocator = nullptr;
    check(a.GetAllocatorWithDefaultOptions(&allocator));
    char** raw = nullptr;
    std::size_t size = 0;
    if (absent(a.KernelInfoGetAttributeArray_string(info, name, allocator, &raw, &size))) return std::nullopt;
    std::vector<std::string> v;
    for (std::size_t i = 0; i < size; ++i) {
      v.emplace_back(raw[i]);
      allocator->Free(allocator, raw[i]);
    }
    if (raw) allocator->Free(allocator, raw);
    return v;
  }
#endif
  std::size_t size = 0;
  unreadable = !absent(api().api->KernelInfoGetAttribute_string(info, name, nullptr, &size));
  return std::nullopt;
}

}  // namespace

RnnAttributes read_attributes(const OrtKernelInfo* info, rnnjit_onnx_op_t op) {
  RnnAttributes a;
  a.op = op;
  a.hidden_size = read_int(info, "hidden_size");
  a.layout = read_int(info, "layout");
  a.direction = read_string(info, "direction");
  a.clip = read_float(info, "clip");
  if (op == RNNJIT_ONNX_GRU) a.linear_before_reset = read_int(info, "linear_before_reset");
  if (op == RNNJIT_ONNX_LSTM) a.input_forget = read_int(info, "input_forget");
  a.activations = read_strings(info, "activations", a.activations_unreadable);
  a.activation_alpha = read_floats(info, "activation_alpha");
  a.activation_beta = read_floats(info, "activation_beta");
  return a;
}

void fill_c_attributes(const RnnAttributes& a, bool has_peepholes, CAttributes& out) {
  rnnjit_onnx_attributes_t& c = out.attrs;
  c = {};
  c.op = a.op;
  c.hidden_size = a.hidden_size.value_or(0);
  c.direction = a.direction ? a.direction->c_str() : nullptr;
  c.layout = a.layout.value_or(0);
  c.linear_before_reset = a.linear_before_reset.value_or(0);
  c.input_forget = a.input_forget.value_or(0);
  c.has_peepholes = has_peepholes ? 1 : 0;
  c.has_clip = a.clip.has_value() ? 1 : 0;
  c.clip = a.clip.value_or(0.0f);
  out.activation_names.clear();
  if (a.activations)
    for (const std::string& s : *a.activations) out.activation_names.push_back(s.c_str());
  c.activations = out.activation_names.empty() ? nullptr : out.activation_names.data();
  c.activations_count = out.activation_names.size();
  if (a.activation_alpha) c.activation_alpha = a.activation_alpha->data(), c.activation_alpha_count = a.activation_alpha->size();
  if (a.activation_beta) c.activation_beta = a.activation_beta->data(), c.activation_beta_count = a.activation_beta->size();
}

}  // namespace rnnjit::ort
