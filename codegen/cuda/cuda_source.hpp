// rnnjit: CUDA C++ source for the gate kernels, generated with fmt from the same KernelDesc as
// the AVX-512 emitters (isa = cuda) and compiled at run time by NVRTC (codegen/cuda/nvrtc.hpp).
// Same fusion as on the CPU: both biases, the activations, the cell/hidden update, the reserve
// stores (forward training) and the gate gradients (backward), one thread per (row, unit), with
// the features of the descriptor (LSTM cell clip, peepholes and coupled input/forget gates;
// ONNX's gate clip on every cell), as their scalar twins (kernels/gate_reference.hpp) do. The
// reset-before GRU has two kernels per pass (KernelDesc::part 0 and 1, either side of its second
// recurrent GEMM), named apart by kernel_name ("_rz", "_n").
// The per-element cell math is a set of __host__ __device__ functions, so a host compiler can
// build and test it too. The kernel's symbol is kernel_name(desc).
#pragma once

#include <string>

#include "codegen/kernel_desc.hpp"

namespace rnnjit::cuda {

// Throws Error unless desc is a gate kernel descriptor with isa cuda.
std::string gate_kernel_source(const KernelDesc& desc);

// The parts gate_kernel_source assembles, for the persistent recurrent kernel
// (codegen/cuda/persistent_source.hpp), which runs the same cell math:
// - the prelude: the argument structs (codegen/kernel_args.hpp's layout) and the cell math;
// - check_gate_desc: throws Error for a descriptor gate_kernel_source refuses;
// - forward_gate_math: the statements of one (row, unit) of a forward gate kernel; they read
//   `a` (a GateForwardArgs), `row`, `j`, the constants H, GX, R, LDH, CLIP and ALPHA, the gate
//   clip `gc` (gate_clip_setup's statement) and the recurrent pre-activations as gh_at(g), g <
//   gates() (gate kernels read them from a.gh);
const char* cell_math_prelude();
void check_gate_desc(const KernelDesc& desc);
std::string forward_gate_math(const KernelDesc& desc);
std::string gate_clip_setup(const KernelDesc& desc);

// Threads per block along the hidden units (blockIdx.y is the batch row).
inline constexpr int kBlockThreads = 128;

}  // namespace rnnjit::cuda
