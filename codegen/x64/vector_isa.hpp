// rnnjit: what the x64 emitters need to know of their vector ISA, so that one emitter design
// serves AVX-512 and AVX2 (+FMA): the register width, how many registers the encoding reaches,
// and where tails and compare results live.
//   AVX-512: zmm0-31 (EVEX); tails and compares in opmask registers (k1-k7), merged or zeroed
//            by the masked instruction itself.
//   AVX2:    ymm0-15, VEX only (no k registers, no embedded broadcast, no ymm16-31); tails by
//            vmaskmovps with a mask vector, compares into vector registers, blends by vblendvps.
#pragma once

#include <xbyak/xbyak.h>

#include "codegen/register_budgets.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::x64 {

struct VectorIsa {
  Isa isa = Isa::avx512;
  int lanes = 16;      // floats per register
  int registers = 32;  // registers the encoding reaches
  bool opmask = true;  // AVX-512's k registers

  // Vector register i of this ISA's width (an Xmm that encodes as zmm or ymm).
  Xbyak::Xmm vreg(int i) const {
    if (opmask) return Xbyak::Zmm(i);
    return Xbyak::Ymm(i);
  }
  int vector_bytes() const { return 4 * lanes; }
};

// The traits of `isa` (avx512 or avx2); throws Error for any other.
VectorIsa vector_isa(Isa isa);

}  // namespace rnnjit::x64
