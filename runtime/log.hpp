// rnnjit: observability. RNNJIT_VERBOSE=1 logs plans and kernel creation to stderr;
// RNNJIT_DUMP=DIR writes every kernel the library compiles (.bin and .asm) into DIR.
#pragma once

#include <string>

namespace rnnjit {

class CompiledKernel;

bool verbose_enabled();
void log_verbose(const std::string& line);  // "rnnjit: <line>" on stderr when enabled
void dump_kernel(const CompiledKernel& kernel);  // no-op unless RNNJIT_DUMP is set

}  // namespace rnnjit
