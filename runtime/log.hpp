// rnnjit: observability. RNNJIT_VERBOSE=1 logs plans and kernel creation to stderr;
// RNNJIT_DUMP=DIR writes every kernel the library compiles into DIR: a CPU kernel as .bin and
// .asm, a CUDA module as .cu, .ptx (and .cubin when that is what the device gets) and NVRTC's .log.
// RNNJIT_PERF_MAP=1 names every generated CPU kernel in /tmp/perf-<pid>.map, so that `perf report`
// attributes samples in JIT code to kernels (oneDNN's DNNL_JIT_PROFILE does the same).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace rnnjit {

class CompiledKernel;

bool verbose_enabled();
void log_verbose(const std::string& line);  // "rnnjit: <line>" on stderr when enabled
void dump_kernel(const CompiledKernel& kernel);  // no-op unless RNNJIT_DUMP is set
bool dump_enabled();
void perf_map_kernel(const CompiledKernel& kernel);  // no-op unless RNNJIT_PERF_MAP is set
// Writes DIR/<name>.<extension> for each (extension, contents); no-op unless RNNJIT_DUMP is set.
void dump_files(const std::string& name, std::initializer_list<std::pair<std::string_view, std::string_view>> files);

}  // namespace rnnjit
