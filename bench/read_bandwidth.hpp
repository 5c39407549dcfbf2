// rnnjit bench: how fast the cores read a working set of a given size, measured in the same run
// as the timings. A recurrent step must read every byte of W_hh (the thread's share of it) once;
// when that share does not stay in the core's L2 from one step to the next, this read rate
// bounds the step from below however fast the FMAs are: the weight-streaming bound that a
// batch of one runs into.
#pragma once

#include <cstdint>

namespace rnnjit::bench {

// GB/s of `threads` threads together, each reading a buffer of its own of `bytes_per_thread`
// (rounded up to 64 bytes) again and again with the vector loads of detect_isa() (zmm or ymm),
// the best of three windows in about `seconds`; 0 for an ISA other than avx512 and avx2.
double measure_read_bandwidth(int threads, std::int64_t bytes_per_thread, double seconds = 0.3);

}  // namespace rnnjit::bench
