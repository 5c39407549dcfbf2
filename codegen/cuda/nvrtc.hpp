// rnnjit: run-time compilation of generated CUDA source with NVRTC. Works without a GPU: the
// target architecture is explicit (default sm_90, the H100/H200 generation). Available when
// CMake found the CUDA toolkit; otherwise every call throws Error("... built without NVRTC").
#pragma once

#include <string>
#include <vector>

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

// What a device gets: SASS (a cubin) for sm_XY when NVRTC can emit it, else PTX for the newest
// virtual architecture compute_XY NVRTC knows that is not newer than the device (the driver
// JIT-compiles PTX when it loads it). `arch` is major*10 + minor, e.g. 90.
struct Target {
  int arch = 0;
  bool cubin = false;
  std::string name() const;  // "sm_90" (cubin) or "compute_90" (PTX)
  bool operator==(const Target&) const = default;
};

// The real architectures NVRTC can emit SASS for (nvrtcGetSupportedArchs), ascending.
std::vector<int> supported_archs();
// The target for compute capability `arch` given what NVRTC supports (pure: tested alone).
// Throws Error when every supported architecture is newer than the device.
Target choose_target(int arch, const std::vector<int>& supported);
Target choose_target(int arch);  // with supported_archs()
// "sm_90" -> {90, cubin} via choose_target (so an sm_XY NVRTC cannot emit falls back to PTX);
// "compute_90" -> {90, PTX}. Throws Error for anything else.
Target parse_target(const std::string& arch);

// A loadable image: a cubin or PTX text (what cuModuleLoadData takes; PTX without its NUL).
struct Image {
  Target target;
  std::string bytes;
  std::string log;  // NVRTC's log (warnings), possibly empty
};

// Compiles for `target`; on failure throws Error with NVRTC's log and the dumped source's path.
Image compile_image(const std::string& source, const std::string& name, const Target& target);

}  // namespace rnnjit::cuda
