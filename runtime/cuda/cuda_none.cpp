// rnnjit: the CUDA path's entry points in builds without the CUDA toolkit: each says so.
#include "rnnjit/error.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "runtime/cuda/cudnn_peer.hpp"
#include "runtime/device_execution.hpp"

namespace rnnjit {
namespace {
constexpr const char* kNoCuda = "no CUDA device: rnnjit was built without the CUDA toolkit";
}  // namespace

std::unique_ptr<DeviceExecution> make_cuda_execution(const RnnConfig&, const Shape&, Mode) { throw Error(kNoCuda); }

namespace cuda {

bool built_with_cuda() { return false; }
std::string device_unavailable_reason() { return kNoCuda; }
DeviceInfo device_info() { throw Error(kNoCuda); }
std::vector<std::string> driver_symbols() { return {}; }
std::string cublas_status(bool* ok) {
  if (ok) *ok = false;
  return "cuBLAS not available: rnnjit was built without the CUDA toolkit";
}
DeviceArray::DeviceArray(std::size_t) { throw Error(kNoCuda); }
DeviceArray::~DeviceArray() = default;
void DeviceArray::upload(const void*, std::size_t) { throw Error(kNoCuda); }
void DeviceArray::download(void*, std::size_t) const { throw Error(kNoCuda); }
void DeviceArray::fill_zero() { throw Error(kNoCuda); }

}  // namespace cuda
}  // namespace rnnjit
