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

// One NVRTC program, destroyed on every path out.
class Program {
 public:
  Program(const std::string& source, const std::string& name) : name_(name) {
    if (nvrtcResult r = nvrtcCreateProgram(&program_, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
        r != NVRTC_SUCCESS)
      throw Error(fmt::format("NVRTC could not create a program for {}: {}", name, nvrtcGetErrorString(r)));
  }
  ~Program() { nvrtcDestroyProgram(&program_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Compiles with --gpu-architecture=`arch` (sm_XY: SASS and PTX; compute_XY: PTX only) and
  // returns the log; throws Error with the log and the dumped source on failure.
  std::string compile(const std::string& source, const std::string& arch) {
    const std::string arch_option = "--gpu-architecture=" + arch;
    const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device"};
    const nvrtcResult result = nvrtcCompileProgram(program_, 3, options);
    std::size_t log_size = 0;
    nvrtcGetProgramLogSize(program_, &log_size);
    std::string log(log_size, '\0');
    if (log_size > 0) nvrtcGetProgramLog(program_, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    if (result != NVRTC_SUCCESS)
      throw Error(fmt::format("NVRTC failed to compile {} for {} ({}); source: {}; log: {}", name_, arch,
                              nvrtcGetErrorString(result), write_source(source, name_), log));
    return log;
  }

  std::string ptx() {
    std::size_t size = 0;
    check(nvrtcGetPTXSize(program_, &size), "nvrtcGetPTXSize");
    std::string ptx(size, '\0');
    check(nvrtcGetPTX(program_, ptx.data()), "nvrtcGetPTX");
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    return ptx;
  }

  std::string cubin() {
    std::size_t size = 0;
    check(nvrtcGetCUBINSize(program_, &size), "nvrtcGetCUBINSize");
    std::string cubin(size, '\0');
    check(nvrtcGetCUBIN(program_, cubin.data()), "nvrtcGetCUBIN");
    return cubin;
  }

 private:
  void check(nvrtcResult r, const char* call) const {
    if (r != NVRTC_SUCCESS) throw Error(fmt::format("{} failed for {}: {}", call, name_, nvrtcGetErrorString(r)));
  }
  nvrtcProgram program_ = nullptr;
  std::string name_;
};

}  // namespace

bool nvrtc_available() { return true; }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}

Compiled compile(const std::string& source, const std::string& name, const std::string& arch) {
  Program program(source, name);
  std::string log = program.compile(source, "compute_" + arch.substr(arch.rfind('_') + 1));
  return {program.ptx(), std::move(log)};
}

std::vector<int> supported_archs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  return archs;
}

Image compile_image(const std::string& source, const std::string& name, const Target& target) {
  Program program(source, name);
  Image image{target, {}, program.compile(source, target.name())};
  image.bytes = target.cubin ? program.cubin() : program.ptx();
  return image;
}

}  // namespace rnnjit::cuda
