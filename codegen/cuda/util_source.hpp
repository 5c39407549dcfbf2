// rnnjit: CUDA source of the GPU executor's data-movement kernels: the plan's CopyStep,
// ColumnSumStep and DropoutStep, the sum dh_proj = dh_carry + dy of an LSTM projection's
// backward step, and the masked row copies of variable lengths (MaskStep, state carries). Fixed text (no descriptor), compiled by NVRTC once per architecture through the
// same caches as the gate kernels. Each kernel is a grid-stride loop, so any launch covers any
// size; the per-element helpers are __host__ __device__ so a host compiler can build them too.
#pragma once

#include <cstdint>
#include <string>

namespace rnnjit::cuda {

// The module's name (cache files, logs) and its kernels' symbols.
inline constexpr const char* kUtilModule = "rnnjit_util";
inline constexpr const char* kCopyKernel = "rnnjit_copy";
inline constexpr const char* kColumnSumKernel = "rnnjit_column_sum";
inline constexpr const char* kDropoutForwardKernel = "rnnjit_dropout_forward";
inline constexpr const char* kDropoutBackwardKernel = "rnnjit_dropout_backward";
inline constexpr const char* kAddKernel = "rnnjit_add_rows";
inline constexpr const char* kRowsPastEndKernel = "rnnjit_rows_past_end";

std::string util_kernels_source();

// Threads per block, and blocks for a grid-stride loop over `elements` (at least 1, at most
// enough to fill any current GPU several times over).
inline constexpr unsigned kUtilBlockThreads = 256;
unsigned util_blocks(std::int64_t elements);

}  // namespace rnnjit::cuda
