// rnnjit: choosing what NVRTC builds for a device (cubin or PTX); no NVRTC calls, so it builds
// and is tested with or without the toolkit.
#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "codegen/cuda/nvrtc.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::cuda {

std::string Target::name() const { return fmt::format("{}_{}", cubin ? "sm" : "compute", arch); }

Target choose_target(int arch, const std::vector<int>& supported) {
  if (std::find(supported.begin(), supported.end(), arch) != supported.end()) return {arch, true};
  // The newest architecture not newer than the device: its PTX runs there through the driver's JIT.
  int best = 0;
  for (int a : supported)
    if (a <= arch) best = std::max(best, a);
  if (best == 0)
    throw Error(fmt::format("NVRTC {} supports no architecture at or below sm_{} (it supports {})", nvrtc_version(),
                            arch,
                            supported.empty() ? std::string("none")
                                              : fmt::format("sm_{}..sm_{}", supported.front(), supported.back())));
  return {best, false};
}

Target choose_target(int arch) { return choose_target(arch, supported_archs()); }

Target parse_target(const std::string& arch) {
  const bool real = arch.rfind("sm_", 0) == 0, virt = arch.rfind("compute_", 0) == 0;
  const std::string digits = arch.substr(real ? 3 : virt ? 8 : 0);
  char* end = nullptr;
  const long value = (real || virt) && !digits.empty() ? std::strtol(digits.c_str(), &end, 10) : 0;
  if (value < 10 || value > 1000 || !end || *end != '\0')
    throw Error(fmt::format("architecture '{}': expected sm_XY or compute_XY (e.g. sm_90)", arch));
  return real ? choose_target(static_cast<int>(value)) : Target{static_cast<int>(value), false};
}

}  // namespace rnnjit::cuda
