#include "codegen/x64/disassembler.hpp"

#include <Zydis/Zydis.h>
#include <fmt/format.h>

namespace rnnjit::x64 {

std::string disassemble(std::span<const std::uint8_t> code, std::size_t text_size, const std::string& name) {
  std::string out = fmt::format("{}:  ; {} bytes of code, {} bytes of constants\n", name, text_size,
                                code.size() - text_size);
  std::size_t at = 0;
  while (at < text_size) {
    ZydisDisassembledInstruction insn;
    if (!ZYAN_SUCCESS(ZydisDisassembleIntel(ZYDIS_MACHINE_MODE_LONG_64, at, code.data() + at, text_size - at, &insn))) {
      out += fmt::format("  {:06x}  (undecodable byte {:02x})\n", at, code[at]);
      ++at;
      continue;
    }
    out += fmt::format("  {:06x}  {}\n", at, insn.text);
    at += insn.info.length;
  }
  for (std::size_t d = text_size; d < code.size(); d += 16) {
    out += fmt::format("  {:06x}  .data", d);
    for (std::size_t i = d; i < std::min(code.size(), d + 16); ++i) out += fmt::format(" {:02x}", code[i]);
    out += '\n';
  }
  return out;
}

}  // namespace rnnjit::x64
