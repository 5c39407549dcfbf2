#include "runtime/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <span>

#include <unistd.h>

#include <fmt/format.h>

#include "runtime/kernel.hpp"

namespace rnnjit {

namespace {

bool flag_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

}  // namespace

bool verbose_enabled() {
  static const bool enabled = flag_set("RNNJIT_VERBOSE");
  return enabled;
}

bool profile_enabled() {
  static const bool enabled = flag_set("RNNJIT_PROFILE");
  return enabled;
}

void log_verbose(const std::string& line) {
  if (!verbose_enabled()) return;
  log_line(line);
}

void log_line(const std::string& line) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "rnnjit: %s\n", line.c_str());
}

bool dump_enabled() {
  const char* dir = std::getenv("RNNJIT_DUMP");
  return dir && *dir;
}

void dump_files(const std::string& name, std::initializer_list<std::pair<std::string_view, std::string_view>> files) {
  if (!dump_enabled()) return;
  const char* dir = std::getenv("RNNJIT_DUMP");
  // A dump that cannot be written must not break the program that is being observed.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& [extension, contents] : files) {
    const std::string path = (std::filesystem::path(dir) / name).string() + "." + std::string(extension);
    std::ofstream out(path, std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!out) log_verbose(fmt::format("RNNJIT_DUMP: could not write {}", path));
  }
}

void perf_map_kernel(const CompiledKernel& kernel) {
  static const bool enabled = flag_set("RNNJIT_PERF_MAP");
  const std::span<const std::uint8_t> code = kernel.code();
  if (!enabled || code.empty()) return;
  // perf's convention for JIT code: /tmp/perf-<pid>.map, one "start size name" line (hex) a symbol.
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  const std::string path = fmt::format("/tmp/perf-{}.map", static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return log_verbose(fmt::format("RNNJIT_PERF_MAP: could not open {}", path));
  std::fprintf(f, "%lx %zx %s\n", reinterpret_cast<unsigned long>(code.data()), code.size(), kernel.name().c_str());
  std::fclose(f);
}

void dump_kernel(const CompiledKernel& kernel) {
  if (!dump_enabled()) return;
  const std::string disassembly = kernel.disassembly();
  const std::string_view code(reinterpret_cast<const char*>(kernel.code().data()), kernel.code().size());
  if (code.empty()) dump_files(kernel.name(), {{"asm", disassembly}});
  else dump_files(kernel.name(), {{"asm", disassembly}, {"bin", code}});
}

}  // namespace rnnjit
