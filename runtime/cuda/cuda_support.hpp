// rnnjit: what code outside runtime/cuda/ (the CLI, tests, the benchmark) needs of the CUDA
// path, free of CUDA headers and built in every configuration: whether and why not a device
// is usable, what it is, and device memory to hand to an Execution made with Device::cuda.
// Builds without the CUDA toolkit report "no CUDA device: rnnjit was built without the CUDA
// toolkit" (runtime/cuda/cuda_none.cpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace rnnjit::cuda {

bool built_with_cuda();

// Empty when a CUDA device is usable, else the reason, "no CUDA device: ...". Never throws.
std::string device_unavailable_reason();

struct DeviceInfo {
  std::string name;            // e.g. "NVIDIA H200"
  int arch = 0;                // compute capability major*10 + minor, e.g. 90
  std::string target;          // what NVRTC builds for it: "sm_90" (cubin) or "compute_90" (PTX)
  std::size_t memory = 0;      // bytes
  int driver_version = 0;      // e.g. 13000
  std::string driver_library;  // the driver library that was loaded
};
DeviceInfo device_info();  // throws Error("no CUDA device: ...")

// The symbols looked up in the driver library (what a stand-in for it must define).
std::vector<std::string> driver_symbols();

// "libcublas.so.13" when it loads, else why not; likewise cuDNN ("not built" without cudnn.h).
std::string cublas_status(bool* ok = nullptr);
std::string cudnn_status(bool* ok = nullptr);

// Device memory (cuMemAlloc), freed on destruction; for callers of Device::cuda Executions.
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t bytes);  // throws Error("no CUDA device: ...") without one
  ~DeviceArray();
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  std::size_t bytes() const { return bytes_; }
  void* data() const { return data_; }
  template <typename T>
  std::span<T> span() const {  // the whole array as elements of T (device addresses)
    return {static_cast<T*>(data_), bytes_ / sizeof(T)};
  }
  void upload(const void* host, std::size_t bytes);           // synchronous
  void download(void* host, std::size_t bytes) const;         // synchronous
  void fill_zero();

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace rnnjit::cuda
