// rnnjit: observability. RNNJIT_VERBOSE=1 logs plans and kernel creation to stderr;
// RNNJIT_DUMP=DIR writes every kernel the library compiles into DIR: a CPU kernel as .bin and
// .asm, a CUDA module as .cu, .ptx (and .cubin when that is what the device gets) and NVRTC's .log.
// RNNJIT_PERF_MAP=1 names every generated CPU kernel in /tmp/perf-<pid>.map, so that `perf report`
// attributes samples in JIT code to kernels (oneDNN's DNNL_JIT_PROFILE does the same).
// RNNJIT_PROFILE=1 logs, for every call the CPU executor runs, the wall time of each step of its
// plan (each stage where its lanes run at once), as ONEDNN_VERBOSE=profile_exec does per primitive.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace rnnjit {

class CompiledKernel;

bool verbose_enabled();
void log_verbose(const std::string& line);  // "rnnjit: <line>" on stderr when enabled
void log_line(const std::string& line);     // "rnnjit: <line>" on stderr
void dump_kernel(const CompiledKernel& kernel);  // no-op unless RNNJIT_DUMP is set
bool dump_enabled();
bool profile_enabled();  // RNNJIT_PROFILE is set and not "0"
void perf_map_kernel(const CompiledKernel& kernel);  // no-op unless RNNJIT_PERF_MAP is set
// Writes DIR/<name>.<extension> for each (extension, contents); no-op unless RNNJIT_DUMP is set.
void dump_files(const std::string& name, std::initializer_list<std::pair<std::string_view, std::string_view>> files);

}  // namespace rnnjit
