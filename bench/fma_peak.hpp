// rnnjit bench: the machine's FMA peak, measured (not quoted) so that benchmark efficiencies
// are fractions of what the cores deliver in the same run: independent chains of the FMA the
// kernels use (vfmadd231ps on zmm for AVX-512, 24 chains; on ymm for AVX2, 14: all the
// registers but the two operands) on each of `threads` threads for about `seconds`.
#pragma once

#include "rnnjit/rnn.hpp"

namespace rnnjit::bench {

// GFLOPS of all threads together with `isa`'s vectors (avx512 or avx2; the default is
// detect_isa(), so RNNJIT_ISA=avx2 measures the AVX2 peak); 0 for any other ISA.
double measure_fma_peak(int threads, double seconds = 0.3, Isa isa = detect_isa());

}  // namespace rnnjit::bench
