// rnnjit: the GPU rnnjit runs on and what lives in it: device 0 of the driver's list
// (CUDA_VISIBLE_DEVICES chooses which one that is), its primary context (the one the CUDA
// runtime uses too, so cuBLAS and cuDNN work in it), the modules loaded into it, and RAII
// wrappers for device memory, streams and events. Every wrapper makes the context current
// around its driver calls, so any host thread may use them.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "codegen/cuda/nvrtc.hpp"

namespace rnnjit::cuda {

class Device {
 public:
  // The process's device, set up once. Throws Error("no CUDA device: ...").
  static Device& instance();

  CUcontext context() const { return context_; }
  CUdevice handle() const { return device_; }
  const std::string& name() const { return name_; }
  int arch() const { return arch_; }           // compute capability major*10 + minor
  Target target() const { return target_; }    // what NVRTC builds for it
  std::size_t memory() const { return memory_; }  // bytes of device memory
  int multiprocessors() const { return multiprocessors_; }
  // Shared memory one block may have, opting in past the default 48 KiB (cuFuncSetAttribute).
  std::size_t shared_per_block() const { return shared_per_block_; }

  // Function `symbol` of the module compiled from `source` (named `module` in caches and
  // logs): compiled through the memory and disk caches for target(), loaded once per process.
  CUfunction function(const std::string& module, const std::string& source, const std::string& symbol);

 private:
  Device();
  CUmodule load(const std::string& module, const std::string& source, const std::string& symbol);

  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
  int arch_ = 0;
  Target target_;
  std::size_t memory_ = 0;
  int multiprocessors_ = 0;
  std::size_t shared_per_block_ = 0;
  std::mutex mutex_;
  std::map<std::string, CUmodule> modules_;  // by the cache key's file name; never unloaded
};

// Makes the device's context current on this thread for a scope.
class ContextScope {
 public:
  ContextScope();
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
};

// cuMemAlloc'd bytes, freed on destruction; 256-byte aligned (cuMemAlloc's guarantee).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  std::byte* data() const { return reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(ptr_)); }
  std::size_t size() const { return size_; }
  // Grows (reallocating, contents lost) to at least `bytes`; returns data(). Counts allocations.
  std::byte* reserve(std::size_t bytes, std::uint64_t& allocations);

 private:
  void release();
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
};

class Stream {
 public:
  Stream();  // CU_STREAM_DEFAULT: ordered after the legacy default stream's work, like cuDNN's
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

class Event {
 public:
  Event();  // without timing: only orders streams
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

// Byte copies between host and device (synchronous).
void copy_to_device(void* device, const void* host, std::size_t bytes);
void copy_to_host(void* host, const void* device, std::size_t bytes);

inline CUdeviceptr device_ptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

}  // namespace rnnjit::cuda
