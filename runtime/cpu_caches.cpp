#include "runtime/cpu_caches.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak_util.h>

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

// The L3 as Linux describes cpu0's caches (sysfs), in bytes; -1 where it has none or cannot
// tell. Not sysconf: glibc's reading of AMD's CPUID can be 10x off in a VM (320 MiB on a Zen 4
// guest whose sysfs and lscpu say 32 MiB).
std::int64_t sysfs_l3_bytes() {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    std::ifstream level_file(dir + "level"), size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) break;
    if (level == 3) return parse_size(size);
  }
  return -1;
}

// 512-bit FMAs a core starts a cycle: 1 on Zen 4 (AMD family 19h with AVX-512), whose FMA units
// are 256 bits wide, else 2 (Intel's AVX-512 server cores, Zen 5). Intel parts with a single
// 512-bit FMA port and Zen 5's mobile parts, which run 512-bit FMAs as two halves like Zen 4,
// count as 2 too: rnnjit has not been measured on either. Read once, as detect_isa() reads the
// ISA: every Execution prepared asks, and CPUID traps to the hypervisor in a VM.
std::int64_t zmm_fmas_per_cycle() {
  static const std::int64_t fmas = [] {
    const Xbyak::util::Cpu cpu;
    using C = Xbyak::util::Cpu;
    const bool zen4 = cpu.has(C::tAMD) && cpu.displayFamily == 0x19 && cpu.has(C::tAVX512F);
    return zen4 ? 1 : 2;
  }();
  return fmas;
}

}  // namespace

CacheSizes parse_caches(std::string_view text, std::string_view what) {
  // L1D,L2 and optionally ,TLB (the TLB's reach), ,L3 and ,FMAS (512-bit FMAs a cycle, 1 or 2);
  // the defaults where they are left out.
  // Each field runs to the next comma, or to the end where there is none (substr clamps it).
  std::vector<std::int64_t> sizes;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    sizes.push_back(parse_size(text.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  CacheSizes caches;
  const bool counted = sizes.size() >= 2 && sizes.size() <= 5;
  if (counted) {
    caches.l1d = sizes[0];
    caches.l2 = sizes[1];
    if (sizes.size() > 2) caches.tlb_reach = sizes[2];
    if (sizes.size() > 3) caches.l3 = sizes[3];
    else caches.l3 = std::max(caches.l3, caches.l2);  // the default L3 never below a forced L2
    if (sizes.size() > 4) caches.zmm_fmas_per_cycle = sizes[4];
  }
  if (!counted || !caches.valid())
    throw Error(fmt::format("{}='{}': expected L1D,L2[,TLB[,L3[,FMAS]]] in bytes (K/M suffixes allowed, e.g. 48K,2M "
                            "or 48K,2M,8M,32M,2) with 1K <= L1D <= L2 <= L3 <= 4096M, 4K <= TLB and FMAS (512-bit "
                            "FMAs a cycle) 1 or 2",
                            what, text));
  return caches;
}

CacheSizes detect_caches() {
  if (const char* forced = std::getenv("RNNJIT_CACHES"); forced && *forced) return parse_caches(forced, "RNNJIT_CACHES");
  // glibc reads these with CPUID on Intel and AMD alike; 0 or -1 where it cannot tell. A
  // hypervisor may report anything: values outside what x86 cores have (16-256 KiB of L1d,
  // 256 KiB-8 MiB of L2 per core) are clamped into that range rather than trusted. The L3
  // comes from sysfs, clamped to 4 MiB-1 GiB; where sysfs has none, the default.
  const long l1d = ::sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l1d < 1024 || l2 < l1d) return CacheSizes{};
  CacheSizes caches{std::clamp<std::int64_t>(l1d, 16 << 10, 256 << 10), std::clamp<std::int64_t>(l2, 256 << 10, 8 << 20)};
  if (const std::int64_t l3 = sysfs_l3_bytes(); l3 > 0)
    caches.l3 = std::clamp<std::int64_t>(l3, std::int64_t{4} << 20, std::int64_t{1} << 30);
  caches.l3 = std::max(caches.l3, caches.l2);
  caches.zmm_fmas_per_cycle = zmm_fmas_per_cycle();
  return caches;
}

}  // namespace rnnjit
