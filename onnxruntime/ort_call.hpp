// rnnjit's ONNX Runtime library: a thin C++ layer over ONNX Runtime's C API (onnxruntime_c_api.h):
// a failing OrtStatus becomes an exception, an exception becomes the OrtStatus that ONNX Runtime
// reports (at session creation for a kernel's constructor, at Run for a compute), never a crash.
#pragma once

#include <onnxruntime_c_api.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace rnnjit::ort {

// The API this library was given (RegisterCustomOps), and its version: the highest at most our
// header's ORT_API_VERSION that the running ONNX Runtime serves (newer functions are used only
// where api_version says they exist).
struct Api {
  const OrtApi* api = nullptr;
  int version = 0;
};
const Api& api();
void set_api(const OrtApiBase* base);  // throws where the runtime serves no version we can use

// An error to report to ONNX Runtime with its code.
class Failure : public std::runtime_error {
 public:
  Failure(OrtErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  OrtErrorCode code() const { return code_; }

 private:
  OrtErrorCode code_;
};

[[noreturn]] inline void fail(const std::string& message, OrtErrorCode code = ORT_INVALID_ARGUMENT) {
  throw Failure(code, message);
}

// Throws a failing status (releasing it).
inline void check(OrtStatus* status) {
  if (!status) return;
  const OrtApi& a = *api().api;
  const OrtErrorCode code = a.GetErrorCode(status);
  std::string message = a.GetErrorMessage(status);
  a.ReleaseStatus(status);
  throw Failure(code, message);
}

// Runs f, returning the status ONNX Runtime expects (nullptr: success).
template <typename F>
OrtStatus* guarded(F&& f) noexcept {
  const OrtApi& a = *api().api;
  try {
    f();
    return nullptr;
  } catch (const Failure& e) {
    return a.CreateStatus(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return a.CreateStatus(ORT_FAIL, "rnnjit: out of memory");
  } catch (const std::exception& e) {
    return a.CreateStatus(ORT_RUNTIME_EXCEPTION, e.what());
  } catch (...) {
    return a.CreateStatus(ORT_RUNTIME_EXCEPTION, "rnnjit: unknown exception");
  }
}

// A tensor as the kernel sees it: element type, dimensions, data.
struct TensorView {
  const OrtValue* value = nullptr;  // nullptr: an optional input not given
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<std::int64_t> dims;
  std::int64_t elements = 0;
  const void* data = nullptr;

  explicit operator bool() const { return value != nullptr; }
  const float* floats() const { return static_cast<const float*>(data); }
};

TensorView view(const OrtValue* value);

}  // namespace rnnjit::ort
