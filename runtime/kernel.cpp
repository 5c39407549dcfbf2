#include "runtime/kernel.hpp"

#include <chrono>

#include "codegen/kernel_args.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/disassembler.hpp"
#include "codegen/x64/amx_gemm_emitter.hpp"
#include "codegen/x64/amx_int8_gemm_emitter.hpp"
#include "codegen/x64/dpbf16_gemm_emitter.hpp"
#include "codegen/x64/gate_emitter.hpp"
#include "codegen/x64/gemm_emitter.hpp"
#include "codegen/x64/vnni_gemm_emitter.hpp"
#include "kernels/gemm_reference.hpp"
#include "kernels/gate_reference.hpp"

namespace rnnjit {

CompiledKernel::CompiledKernel(const KernelDesc& desc) : desc_(desc) {
  const auto start = std::chrono::steady_clock::now();
  if (generates_x64(desc.isa_kind())) {
    if (desc.kind_of() == KernelKind::gemm) jit_ = std::make_unique<x64::GemmEmitter>(desc);
    else if (desc.kind_of() == KernelKind::amx_gemm) jit_ = std::make_unique<x64::AmxGemmEmitter>(desc);
    else if (desc.kind_of() == KernelKind::dpbf16_gemm) jit_ = std::make_unique<x64::Dpbf16GemmEmitter>(desc);
    else if (desc.kind_of() == KernelKind::vnni_gemm) jit_ = std::make_unique<x64::VnniGemmEmitter>(desc);
    else if (desc.kind_of() == KernelKind::amx_int8_gemm) jit_ = std::make_unique<x64::AmxInt8GemmEmitter>(desc);
    else jit_ = x64::emit_gate_kernel(desc);
    entry_ = jit_->entry();
  }
  compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

CompiledKernel::~CompiledKernel() = default;

void CompiledKernel::operator()(const void* args) const {
  if (entry_) return entry_(args);
  if (desc_.kind_of() == KernelKind::gemm) return gemm_reference(desc_, *static_cast<const GemmArgs*>(args));
  if (desc_.pass_kind() == Pass::forward) gate_forward_reference(desc_, *static_cast<const GateForwardArgs*>(args));
  else gate_backward_reference(desc_, *static_cast<const GateBackwardArgs*>(args));
}

std::size_t CompiledKernel::text_size() const { return jit_ ? jit_->text_size() : 0; }

std::string CompiledKernel::disassembly() const {
  if (!jit_) return name() + ":  ; scalar reference twin (kernels/gate_reference.cpp), no generated code\n";
  return x64::disassemble(jit_->code(), jit_->text_size(), name());
}

std::span<const std::uint8_t> CompiledKernel::code() const {
  return jit_ ? jit_->code() : std::span<const std::uint8_t>{};
}

}  // namespace rnnjit
