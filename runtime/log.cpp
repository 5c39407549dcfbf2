#include "runtime/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

#include "runtime/kernel.hpp"

namespace rnnjit {

bool verbose_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("RNNJIT_VERBOSE");
    return v && *v && std::string_view(v) != "0";
  }();
  return enabled;
}

void log_verbose(const std::string& line) {
  if (!verbose_enabled()) return;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "rnnjit: %s\n", line.c_str());
}

void dump_kernel(const CompiledKernel& kernel) {
  const char* dir = std::getenv("RNNJIT_DUMP");
  if (!dir || !*dir) return;
  // A dump that cannot be written must not break the program that is being observed.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path base = std::filesystem::path(dir) / kernel.name();
  std::ofstream asm_file(base.string() + ".asm");
  asm_file << kernel.disassembly();
  if (!kernel.code().empty()) {
    std::ofstream bin(base.string() + ".bin", std::ios::binary);
    bin.write(reinterpret_cast<const char*>(kernel.code().data()), static_cast<std::streamsize>(kernel.code().size()));
  }
  if (!asm_file) log_verbose(fmt::format("RNNJIT_DUMP: could not write {}.asm", base.string()));
}

}  // namespace rnnjit
