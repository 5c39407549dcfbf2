// rnnjit's ONNX Runtime library: the API handle and tensor views (onnxruntime/ort_call.hpp).
#include "onnxruntime/ort_call.hpp"

#include <algorithm>

namespace rnnjit::ort {
namespace {
Api g_api;
}  // namespace

const Api& api() { return g_api; }

void set_api(const OrtApiBase* base) {
  if (!base) fail("RegisterCustomOps: api_base is NULL");
  // The oldest version this library needs is 16 (KernelInfoGetConstantInput_tensor, CreateOp);
  // the newest it can use is its header's.
  for (int v = ORT_API_VERSION; v >= 16; --v) {
    if (const OrtApi* a = base->GetApi(static_cast<std::uint32_t>(v))) {
      g_api = {a, v};
      return;
    }
  }
  throw std::runtime_error(std::string("rnnjit: ONNX Runtime ") + base->GetVersionString() +
                           " is too old (its C API must be version 16 or later)");
}

TensorView view(const OrtValue* value) {
  TensorView t;
  if (!value) return t;
  const OrtApi& a = *api().api;
  t.value = value;
  OrtTensorTypeAndShapeInfo* info = nullptr;
  check(a.GetTensorTypeAndShape(value, &info));
  std::size_t rank = 0;
  OrtStatus* status = a.GetTensorElementType(info, &t.type);
  if (!status) status = a.GetDimensionsCount(info, &rank);
  if (!status) {
    t.dims.resize(rank);
    status = a.GetDimensions(info, t.dims.data(), rank);
  }
  a.ReleaseTensorTypeAndShapeInfo(info);
  check(status);
  t.elements = 1;
  for (std::int64_t d : t.dims) t.elements *= std::max<std::int64_t>(d, 0);
  void* data = nullptr;
  // GetTensorData (const) is API 23; the mutable getter reads the same pointer.
  check(a.GetTensorMutableData(const_cast<OrtValue*>(value), &data));
  t.data = data;
  return t;
}

}  // namespace rnnjit::ort
