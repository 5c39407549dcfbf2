// rnnjit: the plan the GPU executor walks, and the launch shape of its kernels.
//
// It is the planner's plan for Isa::cuda (codegen/planner.hpp, unchanged: the same stages,
// GEMMs, recurrences and WorkspacePlan as on the CPU), because with that ISA the planner
// already makes the GPU's choices: no generated GEMM blocking (every GEMM is one cuBLAS sgemm),
// nothing packed, one thread (the host thread that issues the work), and one gate kernel per
// recurrence covering all H units of all N rows, launched once per time step (the reset-before
// GRU: two, parts 0 and 1, either side of its second recurrent GEMM). make_gpu_plan
// checks those properties (so a planner change that breaks them fails loudly here, not as wrong
// results on a GPU), refuses what the GPU executor cannot launch, and replaces the CPU notes.
// One addition: in inference, Plan::lengths_region is a workspace region of N int32 (the
// training plan's is the reserve's), where the executor uploads a call's sequence lengths for
// the masked row kernels (variable lengths).
#pragma once

#include <cstdint>

#include "codegen/plan.hpp"

namespace rnnjit::cuda {

// A kernel launch: grid (grid_x, grid_y), block (block_x) threads.
struct Launch {
  unsigned grid_x = 0, grid_y = 0, block_x = 0;
  bool operator==(const Launch&) const = default;
};

// The launch of a generated gate kernel (codegen/cuda/cuda_source.hpp): one thread per
// (batch row, hidden unit < cols); blockIdx.y is the row.
Launch gate_launch(const KernelDesc& desc);

// Largest batch the gate kernels' grid can hold (CUDA's limit on gridDim.y).
inline constexpr std::int64_t kMaxGridY = 65535;

// Throws Error for invalid input or what the GPU executor does not support (the message names
// it and says "... is not supported on the CUDA executor yet").
Plan make_gpu_plan(const RnnConfig& config, const Shape& shape, Mode mode);

}  // namespace rnnjit::cuda
