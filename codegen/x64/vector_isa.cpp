#include "codegen/x64/vector_isa.hpp"

#include <fmt/format.h>

#include "rnnjit/error.hpp"

namespace rnnjit::x64 {

VectorIsa vector_isa(Isa isa) {
  if (!generates_x64(isa)) throw Error(fmt::format("the x64 emitters cannot emit isa {}", to_string(isa)));
  return {isa, vector_lanes(isa), vector_registers(isa), isa == Isa::avx512};
}

}  // namespace rnnjit::x64
