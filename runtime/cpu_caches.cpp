#include "runtime/cpu_caches.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "rnnjit/error.hpp"

namespace rnnjit {
namespace {

// One size: digits with an optional K or M suffix; -1 when it does not parse.
std::int64_t parse_size(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value <= 0) return -1;
  const std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (suffix.empty()) return value;
  if (suffix == "K" || suffix == "k") return value << 10;
  if (suffix == "M" || suffix == "m") return value << 20;
  return -1;
}

}  // namespace

CacheSizes parse_caches(std::string_view text, std::string_view what) {
  // L1D,L2 and optionally ,TLB (the TLB's reach; else the default). L2 runs to the second
  // comma, or to the end where there is none (substr clamps the count).
  const std::size_t comma = text.find(','), second = comma == std::string_view::npos ? comma : text.find(',', comma + 1);
  CacheSizes caches{comma == std::string_view::npos ? -1 : parse_size(text.substr(0, comma)),
                    comma == std::string_view::npos ? -1 : parse_size(text.substr(comma + 1, second - comma - 1))};
  if (second != std::string_view::npos) caches.tlb_reach = parse_size(text.substr(second + 1));
  if (!caches.valid())
    throw Error(fmt::format("{}='{}': expected L1D,L2[,TLB] in bytes (K/M suffixes allowed, e.g. 48K,2M or "
                            "48K,2M,8M) with 1K <= L1D <= L2 <= 4096M and 4K <= TLB",
                            what, text));
  return caches;
}

CacheSizes detect_caches() {
  if (const char* forced = std::getenv("RNNJIT_CACHES"); forced && *forced) return parse_caches(forced, "RNNJIT_CACHES");
  // glibc reads these with CPUID on Intel and AMD alike; 0 or -1 where it cannot tell. A
  // hypervisor may report anything: values outside what x86 cores have (16-256 KiB of L1d,
  // 256 KiB-8 MiB of L2 per core) are clamped into that range rather than trusted.
  const long l1d = ::sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l1d < 1024 || l2 < l1d) return CacheSizes{};
  return {std::clamp<std::int64_t>(l1d, 16 << 10, 256 << 10), std::clamp<std::int64_t>(l2, 256 << 10, 8 << 20)};
}

}  // namespace rnnjit
