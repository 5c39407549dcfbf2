// rnnjit: the CUDA driver API, loaded at run time from libcuda.so.1 (dlopen). rnnjit links no
// CUDA library except NVRTC, so it loads and runs on machines without a GPU or a driver; the
// first use of the GPU finds out why there is none and says so:
//   "no CUDA device: libcuda.so.1 not found (...)", "no CUDA device: cuInit failed: ...",
//   "no CUDA device: the driver reports no devices".
// RNNJIT_CUDA_DRIVER_LIBRARY names another library to load instead (tests load stand-ins that
// fail in each of these ways).
#pragma once

#include <cuda.h>

#include <string>

namespace rnnjit::cuda {

// Each entry point under its versioned name: <cuda.h> maps e.g. cuMemAlloc to cuMemAlloc_v2,
// and the same macro expansion names both the member and the symbol looked up.
#define RNNJIT_CUDA_DRIVER_FUNCTIONS(X)                                                                     \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)               \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuModuleLoadDataEx) X(cuModuleGetFunction)                      \
  X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync)        \
  X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)       \
  X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventRecord) X(cuEventDestroy) X(cuStreamBeginCapture)        \
  X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)      \
  X(cuFuncSetAttribute)

struct DriverApi {
#define RNNJIT_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  RNNJIT_CUDA_DRIVER_FUNCTIONS(RNNJIT_DECLARE_ENTRY)
#undef RNNJIT_DECLARE_ENTRY
  int version = 0;       // cuDriverGetVersion, e.g. 13000
  int device_count = 0;  // at least 1
  std::string path;      // the library that loaded
};

inline constexpr const char* kDriverLibrary = "libcuda.so.1";

// The driver, loaded and initialised (cuInit) once per process. Throws Error("no CUDA device:
// <reason>") when there is none; the outcome is remembered, so later calls throw the same.
const DriverApi& driver();

// Empty when driver() succeeds, else its error message (never throws).
std::string driver_error();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string describe(CUresult r);
// Throws Error("<what>: CUDA_ERROR_...") unless r is CUDA_SUCCESS.
void check(CUresult r, const std::string& what);

}  // namespace rnnjit::cuda
