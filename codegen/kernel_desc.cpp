#include "codegen/kernel_desc.hpp"

#include <fmt/format.h>

namespace rnnjit {

std::size_t KernelDescHash::operator()(const KernelDesc& d) const {
  const auto* p = reinterpret_cast<const unsigned char*>(&d);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < sizeof(d); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return static_cast<std::size_t>(h);
}

std::string kernel_name(const KernelDesc& d) {
  return fmt::format("{}_{}{}_{}_h{}_n{}_ld{}_u{}", to_string(d.cell_kind()),
                     d.pass_kind() == Pass::forward ? "fwd" : "bwd", d.training ? "_train" : "",
                     to_string(d.isa_kind()), d.hidden, d.rows, d.ld_h, d.unroll);
}

std::string describe(const KernelDesc& d) {
  return fmt::format("cell={} pass={} training={} isa={} H={} N={} ld_h={} unroll={} gen={}",
                     to_string(d.cell_kind()), d.pass_kind() == Pass::forward ? "fwd" : "bwd", d.training,
                     to_string(d.isa_kind()), d.hidden, d.rows, d.ld_h, d.unroll, d.generator_version);
}

}  // namespace rnnjit
