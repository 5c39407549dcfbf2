// rnnjit: scalar twins of the generated gate kernels. Same KernelDesc, same argument structs,
// same memory contract; used where no emitter exists for the ISA, and as the oracle in the
// kernel tests.
#pragma once

#include "codegen/kernel_args.hpp"
#include "codegen/kernel_desc.hpp"

namespace rnnjit {

void gate_forward_reference(const KernelDesc& desc, const GateForwardArgs& args);
void gate_backward_reference(const KernelDesc& desc, const GateBackwardArgs& args);

}  // namespace rnnjit
