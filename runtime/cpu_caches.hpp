// rnnjit: the data caches of this machine, for the planner's blocking.
#pragma once

#include <string_view>

#include "codegen/cache_sizes.hpp"

namespace rnnjit {

// RNNJIT_CACHES if set ("L1D,L2[,TLB[,L3]]" in bytes, K or M suffixes allowed: "48K,2M"; Error
// when it does not parse), else what the C library reads off the CPU (sysconf; the L3 from
// sysfs; clamped to the sizes x86 cores have), else CacheSizes{}.
CacheSizes detect_caches();

// "48K,2M" -> {49152, 2097152} (the TLB reach and L3 the defaults); throws Error naming `what`
// when the text does not parse.
CacheSizes parse_caches(std::string_view text, std::string_view what);

}  // namespace rnnjit
