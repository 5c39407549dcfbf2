// rnnjit: a real disassembly of generated code through Zydis (Intel syntax), with offsets,
// the kernel's name as a header, and the trailing constant table shown as data; and the check
// that code meant for an ISA uses nothing a CPU of that ISA lacks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rnnjit/rnn.hpp"

namespace rnnjit::x64 {

// `text_size` bytes of instructions followed by data (constants) up to code.size().
std::string disassemble(std::span<const std::uint8_t> code, std::size_t text_size, const std::string& name);

// The instructions of the first `text_size` bytes of `code` that a CPU of `isa` cannot run, one
// line each ("offset  text  (why)"); empty where it runs them all. For avx2: any EVEX (or MVEX)
// encoding, opmask register, zmm register, xmm/ymm register 16-31, or instruction of an ISA
// extension beyond AVX2 and FMA (an AVX-512 CPU runs these silently; an AVX2 one faults). For
// avx512: any extension beyond AVX2's, AVX-512's and AMX's. Undecodable bytes count too.
std::vector<std::string> foreign_instructions(std::span<const std::uint8_t> code, std::size_t text_size, Isa isa);

}  // namespace rnnjit::x64
