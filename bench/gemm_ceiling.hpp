// rnnjit bench: how close FP32 GEMMs come to the FMA peak on this machine, measured in the same
// run as the timings, so that an RNN's fraction of the peak can be read against them:
// - OpenBLAS's and oneDNN's sgemm on a large square problem (their best case: every operand
//   reused from cache thousands of times), and rnnjit's own generated GEMM on the same sizes;
// - the generated microkernel's steady state with A and B in L1 (no cache misses at all): the
//   most the GEMMs' inner loop delivers on these cores, with the 5 x 5 tile, which loads the
//   fewest operands per FMA (10 loads per 25 FMAs) that 32 zmm registers allow.
// A fused RNN adds gate math and, in its recurrence, W_hh streamed from L2 or L3 to this.
#pragma once

#include <cstdint>

namespace rnnjit::bench {

struct GemmCeiling {
  std::int64_t size = 0;  // C = A B, all size x size, row-major
  double openblas = 0.0;  // GFLOPS, the best of a few calls on `threads` OpenBLAS threads
  double onednn = 0.0;    // GFLOPS of oneDNN's dnnl_sgemm on `threads` threads; 0 without the peer
  // GFLOPS of the generated GEMM as the planner tiles it for this machine, C = A W^T with W
  // packed beforehand (as inference packs its weights once), timed as the planner times its
  // projection engines (runtime/gemm_tuner.hpp); 0 on CPUs without AVX-512.
  double rnnjit = 0.0;
  // GFLOPS of `threads` threads each running the generated 5 x 5 microkernel (80 columns) over
  // k = 128 rows of A and B that stay in its L1; 0 on CPUs without AVX-512.
  double tile_in_l1 = 0.0;
};

// Times each on its own (the cores quiet before each); about a second in all.
GemmCeiling measure_gemm_ceiling(int threads, std::int64_t size = 2048);

}  // namespace rnnjit::bench
