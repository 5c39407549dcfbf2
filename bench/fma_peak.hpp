// rnnjit bench: the machine's FMA peak, measured (not quoted) so that benchmark efficiencies
// are fractions of what the cores deliver in the same run: 24 independent chains of zmm FMAs
// on each of `threads` threads for about `seconds`.
#pragma once

namespace rnnjit::bench {

// GFLOPS of all threads together; 0 when the CPU has no AVX-512.
double measure_fma_peak(int threads, double seconds = 0.3);

}  // namespace rnnjit::bench
