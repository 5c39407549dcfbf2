#include "codegen/x64/disassembler.hpp"

#include <Zydis/Zydis.h>
#include <fmt/format.h>

#include <string_view>

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

namespace {

// The ISA extensions (Zydis' names) an AVX2 + FMA CPU runs: the base set, SSE to SSE4 and AVX,
// AVX2, FMA.
bool avx2_extension(std::string_view ext) {
  for (std::string_view ok : {"BASE", "LONGMODE", "SSE", "SSE2", "SSE3", "SSSE3", "SSE4", "AVX", "AVX2", "FMA"})
    if (ext == ok) return true;
  return false;
}

// Why an AVX2 CPU cannot run `insn` (empty: it can).
std::string avx2_lacks(const ZydisDisassembledInstruction& insn) {
  if (insn.info.encoding == ZYDIS_INSTRUCTION_ENCODING_EVEX || insn.info.encoding == ZYDIS_INSTRUCTION_ENCODING_MVEX)
    return "EVEX encoding";
  for (ZyanU8 i = 0; i < insn.info.operand_count; ++i) {
    const ZydisDecodedOperand& op = insn.operands[i];
    if (op.type != ZYDIS_OPERAND_TYPE_REGISTER) continue;
    const ZydisRegisterClass cls = ZydisRegisterGetClass(op.reg.value);
    if (cls == ZYDIS_REGCLASS_MASK) return "opmask register";
    if (cls == ZYDIS_REGCLASS_ZMM) return "zmm register";
    if ((cls == ZYDIS_REGCLASS_XMM || cls == ZYDIS_REGCLASS_YMM) && ZydisRegisterGetId(op.reg.value) >= 16)
      return "vector register 16-31";
  }
  const std::string_view ext = ZydisISAExtGetString(insn.info.meta.isa_ext);
  if (!avx2_extension(ext)) return fmt::format("ISA extension {}", ext);
  return {};
}

// Why an AVX-512 CPU cannot run `insn`: an extension other than AVX2's, AVX-512's (Zydis names
// every EVEX one AVX512EVEX, the k-register moves AVX512VEX) and AMX's (which rnnjit checks for
// separately, as it does AVX512_BF16).
std::string avx512_lacks(const ZydisDisassembledInstruction& insn) {
  const std::string_view ext = ZydisISAExtGetString(insn.info.meta.isa_ext);
  if (avx2_extension(ext) || ext == "AVX512EVEX" || ext == "AVX512VEX" || ext.starts_with("AMX_")) return {};
  return fmt::format("ISA extension {}", ext);
}

}  // namespace

std::vector<std::string> foreign_instructions(std::span<const std::uint8_t> code, std::size_t text_size, Isa isa) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text_size) {
    ZydisDisassembledInstruction insn;
    if (!ZYAN_SUCCESS(ZydisDisassembleIntel(ZYDIS_MACHINE_MODE_LONG_64, at, code.data() + at, text_size - at, &insn))) {
      out.push_back(fmt::format("{:06x}  (undecodable byte {:02x})", at, code[at]));
      ++at;
      continue;
    }
    const std::string why = isa == Isa::avx2 ? avx2_lacks(insn) : isa == Isa::avx512 ? avx512_lacks(insn) : "";
    if (!why.empty()) out.push_back(fmt::format("{:06x}  {}  ({})", at, insn.text, why));
    at += insn.info.length;
  }
  return out;
}

}  // namespace rnnjit::x64
