// rnnjit: the persistent recurrent kernel: a whole forward recurrence (all T steps of one layer
// and direction) in one launch, for the GPU. Step by step, a step's GEMM gh = h_{t-1} W_hh^T
// has only N rows: for small batches it cannot fill the GPU, reads all of W_hh from L2 for
// those few rows, and costs a launch (and the gate kernel another) each step. Here each block
// keeps the W_hh rows of its hidden units (every gate of units [b*U, b*U + U)) in shared memory
// for the whole sequence (cuDNN's CUDNN_RNN_ALGO_PERSIST_STATIC keeps W_hh on chip the same
// way). Each step a block reads h_{t-1} (all units, from L2) in chunks of rows, computes its
// units' recurrent pre-activations (a warp per unit and group of rows, its lanes splitting H,
// summed by a butterfly of shuffles), runs the forward gate kernel's cell math on them
// (codegen/cuda/cuda_source.hpp: the same statements, so both paths compute the same cell),
// writes h_t (and c_t, and the reserve's gates in training), and meets the other blocks at a
// grid barrier (a counter in device memory, zero at the launch) before the next step.
//
// The barrier needs every block resident at once. The grid has at most one block per SM for
// each of the `lanes` recurrences that may run at the same time (the two directions of a
// bidirectional layer), and a block fits an SM alone, so every block finds an SM once the
// other kernels' blocks (which never wait for it) finish. That holds within one Execution (its
// calls never overlap); two Executions whose persistent kernels run at once on one GPU (calls
// from two host threads) could each hold SMs the other's blocks wait for, unless the hardware
// dispatches the earlier grid's blocks first, which CUDA does not promise. A cooperative launch
// (cuLaunchCooperativeKernel, all blocks resident or none) would make it a guarantee; it has
// not been run on a GPU here yet, in a graph capture especially, so such hosts set
// RNNJIT_CUDA_PERSISTENT=0, as do processes that MPS limits to part of the SMs
// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: the driver still reports them all).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_desc.hpp"
#include "codegen/plan.hpp"

namespace rnnjit::cuda {

struct PersistentShape {
  int blocks = 0;       // the grid
  int units = 0;        // hidden units per block (the last block may have fewer)
  int chunk_rows = 0;   // rows of h_{t-1} in shared memory at a time, a multiple of group_rows
  int group_rows = 0;   // batch rows of one warp's item
  int threads = 0;      // per block
  std::size_t shared_bytes = 0;  // dynamic shared memory per block
  bool operator==(const PersistentShape&) const = default;
};

// Threads per block of the persistent kernel.
inline constexpr int kPersistentThreads = 512;
// The kernel is chosen for at most this many rows, and where N x H x ceil(H / SMs) is at most
// kPersistentMaxStepWork (past it the step-by-step walk was faster: persistent_source.cpp).
inline constexpr int kPersistentMaxRows = 64;
inline constexpr std::int64_t kPersistentMaxStepWork = 200000;

// The shape for the forward gate kernel `desc` (isa cuda) on a device of `sms` SMs whose blocks
// may opt in to `shared_per_block` bytes of shared memory, where `lanes` recurrences may run at
// once; nullopt where the kernel does not apply (backward, the reset-before GRU's two-part
// step, a kernel that covers only some units), would be slower (the limits above) or W_hh's
// rows do not fit on the chip.
std::optional<PersistentShape> persistent_shape(const KernelDesc& desc, int sms, std::size_t shared_per_block,
                                                int lanes);

// The persistent kernels a GPU plan gets on such a device: one for each forward gate kernel
// (plan.kernels[kernel]) that persistent_shape gives a shape, with lanes = most_lanes(plan).
struct PersistentKernel {
  int kernel = -1;
  PersistentShape shape;
  std::string name;    // persistent_kernel_name
  std::string source;  // persistent_kernel_source
};
std::vector<PersistentKernel> persistent_kernels(const Plan& plan, int sms, std::size_t shared_per_block);

// kernel_name(desc) with the shape: "<gate kernel>_persistent_b<blocks>_u<units>_c<chunk_rows>".
std::string persistent_kernel_name(const KernelDesc& desc, const PersistentShape& shape);

// The kernel's source (symbol: persistent_kernel_name); it takes one PersistentForwardArgs
// (codegen/kernel_args.hpp) by value and shape.shared_bytes of dynamic shared memory. Throws
// Error for a descriptor or shape persistent_shape would not give.
std::string persistent_kernel_source(const KernelDesc& desc, const PersistentShape& shape);

}  // namespace rnnjit::cuda
