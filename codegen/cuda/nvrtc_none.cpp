// rnnjit: NVRTC stand-in for builds without the CUDA toolkit.
#include "codegen/cuda/nvrtc.hpp"

#include "rnnjit/error.hpp"

namespace rnnjit::cuda {

bool nvrtc_available() { return false; }
std::string nvrtc_version() { return "none"; }
Compiled compile(const std::string&, const std::string& name, const std::string&) {
  throw Error("cannot compile " + name + ": rnnjit was built without NVRTC (CUDA toolkit not found)");
}
std::vector<int> supported_archs() { return {}; }
Image compile_image(const std::string&, const std::string& name, const Target&) {
  throw Error("cannot compile " + name + ": rnnjit was built without NVRTC (CUDA toolkit not found)");
}

}  // namespace rnnjit::cuda
