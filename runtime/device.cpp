// rnnjit: names of Options::device.
#include <fmt/format.h>

#include "rnnjit/rnn.hpp"

namespace rnnjit {

std::string_view to_string(Device device) { return device == Device::cuda ? "cuda" : "cpu"; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  throw Error(fmt::format("unknown device '{}' (expected cpu or cuda)", name));
}

}  // namespace rnnjit
