// rnnjit: a real disassembly of generated code through Zydis (Intel syntax), with offsets,
// the kernel's name as a header, and the trailing constant table shown as data.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace rnnjit::x64 {

// `text_size` bytes of instructions followed by data (constants) up to code.size().
std::string disassemble(std::span<const std::uint8_t> code, std::size_t text_size, const std::string& name);

}  // namespace rnnjit::x64
