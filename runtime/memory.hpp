// rnnjit: how much memory this process may still use, so that a plan too large for the machine
// fails with a clear error when it is prepared rather than with the kernel's OOM killer when
// its pages are first touched (Linux overcommits: a huge malloc succeeds).
#pragma once

#include <cstddef>
#include <string>

namespace rnnjit {

struct MemoryLimit {
  std::size_t bytes = 0;  // 0: unknown (no check)
  std::string source;     // where the figure comes from, for messages
};

// RNNJIT_MEMORY_LIMIT (bytes, or with a K/M/G suffix: powers of 1024) when set; otherwise the
// smaller of MemAvailable (/proc/meminfo) and the cgroup's remaining allowance (v2 memory.max
// minus memory.current). Throws Error for a malformed RNNJIT_MEMORY_LIMIT.
MemoryLimit available_memory();

// Throws Error naming `what`, the bytes it needs and the limit with its source when `bytes`
// exceeds the available memory.
void check_fits_in_memory(std::size_t bytes, const std::string& what);

}  // namespace rnnjit
