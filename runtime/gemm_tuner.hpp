// rnnjit: the engine of the input projections (Options::projection_gemm) as the planner's
// GemmChooser: always the generated GEMM, always OpenBLAS, or whichever of the two measures
// faster on the shape (cuDNN's "find" as opposed to its heuristics, for one GEMM).
#pragma once

#include <cstdint>

#include "codegen/planner.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {

// Milliseconds of the two engines on `rows` rows of an input projection.
struct GemmTimes {
  double generated_ms = 0, openblas_ms = 0;
  std::int64_t rows = 0;
};

// Times C[rows, n] = A[rows, k] W^T (W: [n, k]) as a plan would run it on `threads`: the
// generated GEMM with the tiling the planner gives `g` (W packed beforehand, as inference
// callers do once) and OpenBLAS's sgemm, interleaved, best of three after a warm-up each.
// rows = g.m, or fewer where that is still about a GFLOP and four chunks per thread of the
// row chunks the threads share an OpenBLAS GEMM by (blas_chunk_rows): the time per row is what
// matters. The generated GEMM is blocked for `caches` and made for `isa` (avx512 or avx2), as
// the plan's is.
GemmTimes time_projection(const GemmStep& g, std::int64_t group, int threads, const CacheSizes& caches = {},
                          Isa isa = Isa::avx512);

// OpenBLAS only where it is clearly faster: within 10% the deterministic generated GEMM stays.
bool openblas_wins(const GemmTimes& t);

// The chooser for `which` in plans made for `caches` and `isa`; empty for
// ProjectionGemm::generated. measured: time_projection once per (rows, n, k, group, threads,
// caches, isa) in the process, the result remembered.
GemmChooser projection_chooser(ProjectionGemm which, const CacheSizes& caches = {}, Isa isa = Isa::avx512);

}  // namespace rnnjit
