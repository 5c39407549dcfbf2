// rnnjit bench: waits until the other threads of this process stop using the CPU, so that each
// timed iteration starts on idle cores. Runtimes keep their workers busy after a call returns:
// libgomp's OpenMP threads (oneDNN's) spin for about 300,000 iterations after a parallel
// region, OpenBLAS's poll for about 2^28 cycles after a call and after the library loads. On
// a 2-core machine an iteration started meanwhile shares its cores with them, so whichever
// contender follows a spinning one is charged for the other's idle loop.
#pragma once

#include <chrono>

namespace rnnjit::bench {

// Returns once no other thread of the process ran for more than 0.1 ms in a 2 ms window, or
// after `limit`. Linux only (per-thread CPU clocks); elsewhere it returns at once.
void wait_for_quiet_cores(std::chrono::milliseconds limit = std::chrono::milliseconds(500));

}  // namespace rnnjit::bench
