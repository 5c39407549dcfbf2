// rnnjit: the data caches of this machine and its cores' FMA rate, for the planner's blocking.
#pragma once

#include <string_view>

#include "codegen/cache_sizes.hpp"

namespace rnnjit {

// RNNJIT_CACHES if set ("L1D,L2[,TLB[,L3[,FMAS]]]" in bytes, K or M suffixes allowed: "48K,2M";
// FMAS the 512-bit FMAs a cycle, 1 or 2; Error when it does not parse), else what the C library
// reads off the CPU (sysconf; the L3 from sysfs; clamped to the sizes x86 cores have; the FMA
// rate from CPUID's vendor and family), else CacheSizes{}.
CacheSizes detect_caches();

// "48K,2M" -> {49152, 2097152} (the TLB reach, L3 and FMA rate the defaults); throws Error naming `what`
// when the text does not parse.
CacheSizes parse_caches(std::string_view text, std::string_view what);

}  // namespace rnnjit
