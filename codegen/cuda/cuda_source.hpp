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

// Threads per block along the hidden units (blockIdx.y is the batch row).
inline constexpr int kBlockThreads = 128;

}  // namespace rnnjit::cuda
