// rnnjit: run-time compilation of generated CUDA source with NVRTC. Works without a GPU: the
// target architecture is explicit (default sm_90, the H100/H200 generation). Available when
// CMake found the CUDA toolkit; otherwise every call throws Error("... built without NVRTC").
#pragma once

#include <string>

namespace rnnjit::cuda {

bool nvrtc_available();
std::string nvrtc_version();  // "13.0", or "none"

struct Compiled {
  std::string ptx;  // PTX text for the architecture
  std::string log;  // NVRTC's log (warnings), possibly empty
};

// Compiles `source` (a translation unit whose kernel is named `name`) for `arch` ("sm_90").
// On failure throws Error carrying NVRTC's log and the path where the source was written.
Compiled compile(const std::string& source, const std::string& name, const std::string& arch = "sm_90");

}  // namespace rnnjit::cuda
