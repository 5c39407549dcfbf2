// rnnjit: the thin base of every x64 emitter. Code is written into read+write pages and switched
// to read+execute once (finalize); a page is never writable and executable at the same time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <xbyak/xbyak.h>

namespace rnnjit::x64 {

class JitGenerator : public Xbyak::CodeGenerator {
 public:
  using Entry = void (*)(const void* args);

  explicit JitGenerator(std::size_t max_code_size = 64 * 1024);

  // Protects the pages read+execute; generation must be complete.
  void finalize();
  Entry entry() const { return reinterpret_cast<Entry>(const_cast<std::uint8_t*>(getCode())); }
  std::span<const std::uint8_t> code() const { return {getCode(), getSize()}; }
  // Bytes of instructions at the start of code(); data (constants) may follow.
  virtual std::size_t text_size() const { return getSize(); }

 protected:
  // System V: one pointer argument in rdi. Saves the callee-saved registers the emitters use.
  void preamble();
  void postamble();
  const Xbyak::Reg64 abi_arg = rdi;
};

}  // namespace rnnjit::x64
