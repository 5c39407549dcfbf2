#include "runtime/cuda/device.hpp"

#include <utility>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/kernel_cache.hpp"
#include "runtime/log.hpp"

namespace rnnjit::cuda {

Device& Device::instance() {
  // Never destroyed: the primary context stays retained until the process exits (releasing it
  // from a static destructor could run after the driver has torn itself down).
  static Device* device = new Device();
  return *device;
}

Device::Device() {
  const DriverApi& d = driver();
  check(d.cuDeviceGet(&device_, 0), "no CUDA device: cuDeviceGet(0)");
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName");
  name_ = name;
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_), "cuDeviceGetAttribute");
  arch_ = major * 10 + minor;
  int shared = 0;
  check(d.cuDeviceGetAttribute(&multiprocessors_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_),
        "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_),
        "cuDeviceGetAttribute");
  shared_per_block_ = static_cast<std::size_t>(shared);
  check(d.cuDeviceTotalMem(&memory_, device_), "cuDeviceTotalMem");
  check(d.cuDevicePrimaryCtxRetain(&context_, device_), fmt::format("no CUDA device: cuDevicePrimaryCtxRetain on {}", name_));
  target_ = choose_target(arch_);
  log_verbose(fmt::format("cuda: device 0 {} (sm_{}, {} SMs, {} bytes of shared memory a block), driver {}, kernels "
                          "built as {}",
                          name_, arch_, multiprocessors_, shared_per_block_, d.version, target_.name()));
}

CUfunction Device::function(const std::string& module, const std::string& source, const std::string& symbol) {
  std::lock_guard lock(mutex_);
  CUmodule m = load(module, source, symbol);
  CUfunction f = nullptr;
  check(driver().cuModuleGetFunction(&f, m, symbol.c_str()), fmt::format("cuModuleGetFunction {} in {}", symbol, module));
  return f;
}

CUmodule Device::load(const std::string& module, const std::string& source, const std::string& symbol) {
  CachedImage cached = cached_image(source, module, symbol, target_);
  const std::string file = cached.key.file_name();
  if (auto found = modules_.find(file); found != modules_.end()) return found->second;
  ContextScope scope;
  // A PTX image is JIT-compiled by the driver here; its log says why when that fails.
  for (int attempt = 0;; ++attempt) {
    char log[8192] = {};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof(log) - 1))};
    CUmodule m = nullptr;
    const CUresult r = driver().cuModuleLoadDataEx(&m, cached.image->bytes.c_str(), 2, options, values);
    if (r == CUDA_SUCCESS) {
      modules_.emplace(file, m);
      return m;
    }
    // An image read from disk may be damaged or stale: drop it and compile afresh, once.
    if (attempt == 0 && cached.source == ImageSource::disk) {
      log_verbose(fmt::format("cuda: cached {} did not load ({}): recompiling", file, describe(r)));
      forget_image(cached.key);
      cached = cached_image(source, module, symbol, target_);
      continue;
    }
    throw Error(fmt::format("cuModuleLoadData {} ({} for {}): {}{}{}", module, cached.image->target.cubin ? "cubin" : "PTX",
                            name_, describe(r), *log ? "; log: " : "", log));
  }
}

ContextScope::ContextScope() { check(driver().cuCtxPushCurrent(Device::instance().context()), "cuCtxPushCurrent"); }

ContextScope::~ContextScope() {
  CUcontext popped = nullptr;
  driver().cuCtxPopCurrent(&popped);
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  std::uint64_t ignored = 0;
  reserve(bytes, ignored);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

std::byte* DeviceBuffer::reserve(std::size_t bytes, std::uint64_t& allocations) {
  if (bytes <= size_ && ptr_) return data();
  release();
  if (bytes == 0) return nullptr;
  ContextScope scope;
  check(driver().cuMemAlloc(&ptr_, bytes), fmt::format("cuMemAlloc of {} bytes", bytes));
  size_ = bytes;
  ++allocations;
  return data();
}

void DeviceBuffer::release() {
  if (!ptr_) return;
  ContextScope scope;
  driver().cuMemFree(ptr_);  // a failure here (a context already torn down) is not recoverable
  ptr_ = 0;
  size_ = 0;
}

Stream::Stream() {
  ContextScope scope;
  check(driver().cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
}

Stream::~Stream() {
  ContextScope scope;
  driver().cuStreamDestroy(stream_);
}

void Stream::synchronize() const {
  ContextScope scope;
  check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

Event::Event() {
  ContextScope scope;
  check(driver().cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
}

Event::~Event() {
  ContextScope scope;
  driver().cuEventDestroy(event_);
}

void copy_to_device(void* device, const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  ContextScope scope;
  check(driver().cuMemcpyHtoD(device_ptr(device), host, bytes), fmt::format("cuMemcpyHtoD of {} bytes", bytes));
}

void copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes == 0) return;
  ContextScope scope;
  check(driver().cuMemcpyDtoH(host, device_ptr(device), bytes), fmt::format("cuMemcpyDtoH of {} bytes", bytes));
}

}  // namespace rnnjit::cuda
