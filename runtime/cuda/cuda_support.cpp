#include "runtime/cuda/cuda_support.hpp"

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "runtime/cuda/cublas.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/driver.hpp"

namespace rnnjit::cuda {

bool built_with_cuda() { return true; }

std::string device_unavailable_reason() {
  try {
    Device::instance();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::vector<std::string> driver_symbols() {
#define RNNJIT_STRINGIFY2(x) #x
#define RNNJIT_STRINGIFY(x) RNNJIT_STRINGIFY2(x)
#define RNNJIT_NAME(name) RNNJIT_STRINGIFY(name),
  return {RNNJIT_CUDA_DRIVER_FUNCTIONS(RNNJIT_NAME)};
#undef RNNJIT_NAME
}

DeviceInfo device_info() {
  const Device& d = Device::instance();
  return {d.name(), d.arch(), d.target().name(), d.memory(), driver().version, driver().path};
}

std::string cublas_status(bool* ok) {
  try {
    const std::string path = cublas().path;
    if (ok) *ok = true;
    return path;
  } catch (const std::exception& e) {
    if (ok) *ok = false;
    return e.what();
  }
}

DeviceArray::DeviceArray(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  ContextScope scope;
  CUdeviceptr p = 0;
  check(driver().cuMemAlloc(&p, bytes), fmt::format("cuMemAlloc of {} bytes", bytes));
  data_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
}

DeviceArray::~DeviceArray() {
  if (!data_) return;
  ContextScope scope;
  driver().cuMemFree(device_ptr(data_));
}

void DeviceArray::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) throw Error(fmt::format("upload of {} bytes into a device array of {}", bytes, bytes_));
  copy_to_device(data_, host, bytes);
}

void DeviceArray::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw Error(fmt::format("download of {} bytes from a device array of {}", bytes, bytes_));
  copy_to_host(host, data_, bytes);
}

void DeviceArray::fill_zero() {
  if (!data_) return;
  ContextScope scope;
  check(driver().cuMemsetD8Async(device_ptr(data_), 0, bytes_, nullptr), "cuMemsetD8Async");
  check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

}  // namespace rnnjit::cuda
