// rnnjit: the scalar twin of the generated GEMM microkernel (same KernelDesc, same GemmArgs).
#pragma once

#include "codegen/kernel_args.hpp"
#include "codegen/kernel_desc.hpp"

namespace rnnjit {

void gemm_reference(const KernelDesc& desc, const GemmArgs& args);

}  // namespace rnnjit
