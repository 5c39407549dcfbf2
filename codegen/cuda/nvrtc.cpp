#include "codegen/cuda/nvrtc.hpp"

#include <nvrtc.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "rnnjit/error.hpp"

namespace rnnjit::cuda {
namespace {

// Keeps the failing source where a person can open it, named after the kernel.
std::string write_source(const std::string& source, const std::string& name) {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::temp_directory_path(ec) / (name + ".cu");
  std::ofstream(path) << source;
  return path.string();
}

}  // namespace

bool nvrtc_available() { return true; }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}

Compiled compile(const std::string& source, const std::string& name, const std::string& arch) {
  nvrtcProgram program = nullptr;
  if (nvrtcResult r = nvrtcCreateProgram(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    throw Error(fmt::format("NVRTC could not create a program for {}: {}", name, nvrtcGetErrorString(r)));
  const std::string arch_option = "--gpu-architecture=compute_" + arch.substr(arch.rfind('_') + 1);
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device"};
  const nvrtcResult result = nvrtcCompileProgram(program, 3, options);
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (result != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    throw Error(fmt::format("NVRTC failed to compile {} for {} ({}); source: {}; log: {}", name, arch,
                            nvrtcGetErrorString(result), write_source(source, name), log));
  }
  std::size_t ptx_size = 0;
  nvrtcGetPTXSize(program, &ptx_size);
  std::string ptx(ptx_size, '\0');
  nvrtcGetPTX(program, ptx.data());
  nvrtcDestroyProgram(&program);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return {std::move(ptx), std::move(log)};
}

}  // namespace rnnjit::cuda
