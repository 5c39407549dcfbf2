#include "runtime/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "rnnjit/error.hpp"

namespace rnnjit {
namespace {

// "MemAvailable:   12345 kB" from /proc/meminfo, in bytes (0 if absent).
std::size_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::size_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

// A cgroup v2 file holding a byte count, or "max" (none); 0 when unreadable or unlimited.
std::size_t cgroup_value(const char* file) {
  std::ifstream in(std::string("/sys/fs/cgroup/") + file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  return end && *end == '\0' ? static_cast<std::size_t>(v) : 0;
}

// 1.50 GiB, 12.0 MiB, 900 KiB: the unit that keeps the number readable.
std::string human(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return fmt::format("{:.0f} KiB", b / 1024);
}

}  // namespace

MemoryLimit available_memory() {
  if (const char* env = std::getenv("RNNJIT_MEMORY_LIMIT"); env && *env) {
    const std::string text = env;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    const std::string suffix = end ? end : "";
    const int shift = suffix.empty() ? 0 : suffix == "K" ? 10 : suffix == "M" ? 20 : suffix == "G" ? 30 : -1;
    if (end == text.c_str() || text[0] == '-' || shift < 0 || value == 0 ||
        value > (std::numeric_limits<std::size_t>::max() >> shift))
      throw Error(fmt::format("RNNJIT_MEMORY_LIMIT must be a positive byte count with an optional K, M or G suffix, "
                              "got '{}'", text));
    return {static_cast<std::size_t>(value) << shift, "RNNJIT_MEMORY_LIMIT"};
  }
  MemoryLimit limit{mem_available(), "MemAvailable in /proc/meminfo"};
  const std::size_t max = cgroup_value("memory.max"), current = cgroup_value("memory.current");
  if (max > 0) {
    const std::size_t left = max > current ? max - current : 0;
    if (limit.bytes == 0 || left < limit.bytes) limit = {left, "the cgroup's memory.max"};
  }
  return limit;
}

void check_fits_in_memory(std::size_t bytes, const std::string& what) {
  const MemoryLimit limit = available_memory();
  if (limit.bytes > 0 && bytes > limit.bytes)
    throw Error(fmt::format("{} needs {} bytes ({}), more than the {} available ({}); nothing was allocated", what,
                            bytes, human(bytes), human(limit.bytes), limit.source));
}

}  // namespace rnnjit
