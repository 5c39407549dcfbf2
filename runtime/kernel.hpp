// rnnjit: a compiled kernel (gate or GEMM): generated AVX-512 code, or the scalar twin for ISAs
// without an emitter. Either way it is called with a pointer to its argument struct.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "codegen/kernel_desc.hpp"

namespace rnnjit {

namespace x64 { class JitGenerator; }

class CompiledKernel {
 public:
  explicit CompiledKernel(const KernelDesc& desc);  // generates (or binds the twin); may throw
  ~CompiledKernel();
  CompiledKernel(const CompiledKernel&) = delete;
  CompiledKernel& operator=(const CompiledKernel&) = delete;

  const KernelDesc& desc() const { return desc_; }
  // GemmArgs for GEMMs; GateForwardArgs / GateBackwardArgs for gate kernels of each pass.
  void operator()(const void* args) const;
  // The machine code (empty for the scalar twin).
  std::span<const std::uint8_t> code() const;
  std::size_t text_size() const;  // bytes of instructions at the start of code()
  std::string name() const { return kernel_name(desc_); }
  // Zydis disassembly with the kernel's name as header; for the scalar twin, a line saying so.
  std::string disassembly() const;
  double compile_ms() const { return compile_ms_; }

 private:
  KernelDesc desc_;
  std::unique_ptr<x64::JitGenerator> jit_;
  void (*entry_)(const void*) = nullptr;
  double compile_ms_ = 0.0;
};

}  // namespace rnnjit
