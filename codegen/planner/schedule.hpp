// rnnjit: how a plan spreads over the threads. Three choices, each a named function of the
// call's sizes and the machine's caches, made before any step is planned; the measurements
// behind their thresholds are in docs/perf-notes.md ("Planner thresholds").
#pragma once

#include "codegen/cache_sizes.hpp"
#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::planner {

struct Schedule {
  int threads = 1;                 // Plan::threads: the threads that share each stage's work
  bool split_directions = false;   // two directions take turns on all threads, not a lane (thread) each
  int batch_slices = 1;            // each direction's recurrence as lanes of batch rows, a thread each
};

// The threads a plan runs on: all `threads` asked for, or one where the work is too small to
// pay for waking the others. OpenBLAS plans (isa reference) leave threading to OpenBLAS.
int plan_threads(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads);

// Whether the two directions of a bidirectional layer take turns on all `threads`, each split
// across them, rather than run as a lane each: where a step's few rows make it wait on W_hh
// streaming from L3 whatever the split.
bool directions_take_turns(const RnnConfig& config, const Shape& shape, int threads, const CacheSizes& caches);

// Lanes of batch rows each direction's recurrence is split into (1: split by hidden units):
// rows are independent, so each thread runs the whole time loop on its rows and meets the
// others only at the end of the stage.
int batch_slices(const RnnConfig& config, const Shape& shape, Isa isa, int threads, const CacheSizes& caches);

Schedule choose_schedule(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads,
                         const CacheSizes& caches);

// Batch rows each thread needs before a recurrence is split by rows: fewer leave the threads'
// GEMM tiles too short to keep the FMAs busy.
inline constexpr std::int64_t kMinSliceRows = 8;

}  // namespace rnnjit::planner
