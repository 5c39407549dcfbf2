#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

JitGenerator::JitGenerator(std::size_t max_code_size)
    : Xbyak::CodeGenerator(max_code_size, Xbyak::DontSetProtectRWE) {}

void JitGenerator::finalize() {
  ready(PROTECT_RE);    // resolves labels (and protects, for auto-grow buffers only)
  setProtectModeRE();   // this Xbyak leaves fixed buffers writable: switch them to read+execute here
}

void JitGenerator::preamble() {
  for (const Xbyak::Reg64& r : {rbx, rbp, r12, r13, r14, r15}) push(r);
}

void JitGenerator::postamble() {
  for (const Xbyak::Reg64& r : {r15, r14, r13, r12, rbp, rbx}) pop(r);
  vzeroupper();
  ret();
}

}  // namespace rnnjit::x64
