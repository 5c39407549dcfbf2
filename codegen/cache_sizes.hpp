// rnnjit: the data caches a plan is blocked for, and the one property of the cores beside them
// that its choices weigh (how fast they run 512-bit FMAs). The planner takes them as an input
// (runtime/cpu_caches.cpp reads the machine's), so a plan stays a pure function of its
// arguments and tests can plan for any machine.
#pragma once

#include <cstdint>

namespace rnnjit {

struct CacheSizes {
  // Defaults: the cores this project is tuned on (Sapphire/Emerald Rapids: 48 KiB L1d, 2 MiB
  // L2 per core). Zen 4/5 have 32/48 KiB and 1 MiB; what matters is that plans scale with them.
  std::int64_t l1d = 48 * 1024;
  std::int64_t l2 = 2 * 1024 * 1024;
  // The memory the second-level TLB maps in 4 KiB pages: 2048 entries on Intel cores since Ice
  // Lake, 3072 on Zen 4 (the smaller taken). Up to it, a transposed A may be read in place (see
  // the planner's copies_transposed_a).
  std::int64_t tlb_reach = 2048 * 4096;
  // The last-level cache the cores share (Zen 4/5: 32 MiB a CCD, which is what Linux's sysfs reports).
  // Two directions whose recurrent weights it cannot keep side by side take turns (see the
  // planner's split_directions_).
  std::int64_t l3 = 32 * 1024 * 1024;
  // 512-bit FMAs a core starts a cycle: 2 on Intel's server cores and Zen 5, 1 on Zen 4, which
  // runs each as two 256-bit halves. At half the FMA rate, loads that miss L1 hide behind the
  // FMAs that a full-rate core would wait on them with.
  std::int64_t zmm_fmas_per_cycle = 2;
  bool operator==(const CacheSizes&) const = default;
  // What the planner accepts: 1 KiB <= L1d <= L2 <= L3 <= 4 GiB (the blocking arithmetic stays
  // in range), a TLB reach of 4 KiB to 1 TiB, and 1 or 2 FMAs a cycle.
  bool valid() const {
    return l1d >= 1024 && l2 >= l1d && l3 >= l2 && l3 <= (std::int64_t{1} << 32) && tlb_reach >= 4096 &&
           tlb_reach <= (std::int64_t{1} << 40) && (zmm_fmas_per_cycle == 1 || zmm_fmas_per_cycle == 2);
  }
};

}  // namespace rnnjit
