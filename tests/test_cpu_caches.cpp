// The caches plans are blocked for: read off the CPU, or forced with RNNJIT_CACHES, whose bad
// values are refused with a message that names the variable.
#include <gtest/gtest.h>

#include <string>

#include "rnnjit/error.hpp"
#include "runtime/cpu_caches.hpp"
#include "tests/scoped_env.hpp"

namespace rnnjit {
namespace {

TEST(CpuCaches, ParsesSizesWithSuffixes) {
  EXPECT_EQ(parse_caches("48K,2M", "x"), (CacheSizes{48 * 1024, 2 * 1024 * 1024}));
  EXPECT_EQ(parse_caches("32768,1048576", "x"), (CacheSizes{32768, 1048576}));
  EXPECT_EQ(parse_caches("32k,512k", "x"), (CacheSizes{32 * 1024, 512 * 1024}));
  // A third size is the TLB's reach; without it, the default.
  EXPECT_EQ(parse_caches("48K,2M,16M", "x"), (CacheSizes{48 * 1024, 2 * 1024 * 1024, 16 * 1024 * 1024}));
  EXPECT_EQ(parse_caches("48K,2M", "x").tlb_reach, CacheSizes{}.tlb_reach);
  // A fourth is the L3; without it, the default (never below the L2).
  EXPECT_EQ(parse_caches("32K,1M,8M,96M", "x"), (CacheSizes{32 * 1024, 1024 * 1024, 8 << 20, 96 << 20}));
  EXPECT_EQ(parse_caches("48K,2M", "x").l3, CacheSizes{}.l3);
  EXPECT_EQ(parse_caches("48K,64M", "x").l3, 64 << 20);
  // A fifth is the cores' 512-bit FMAs a cycle (1 on Zen 4); without it, 2.
  EXPECT_EQ(parse_caches("32K,1M,8M,32M,1", "x").zmm_fmas_per_cycle, 1);
  EXPECT_EQ(parse_caches("32K,1M,8M,32M,2", "x").zmm_fmas_per_cycle, 2);
  EXPECT_EQ(parse_caches("32K,1M", "x").zmm_fmas_per_cycle, 2);
}

TEST(CpuCaches, RefusesWhatDoesNotParse) {
  for (const char* bad : {"", "48K", "48K,", ",2M", "48K;2M", "48KB,2M", "0,2M", "-48K,2M", "2M,48K", "512,1M",
                          "48K,8192M", "48K,2M,3M,4M,5M", "48K,2M,", "48K,2M,1K", "48K,2M,8M,1M", "48K,2M,8M,",
                          "48K,2M,8M,8192M", "x,y", "48K,2M,8M,32M,0", "48K,2M,8M,32M,3", "48K,2M,8M,32M,1K",
                          "48K,2M,8M,32M,2,1", "48K,2M,8M,32M,"}) {
    try {
      parse_caches(bad, "RNNJIT_CACHES");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RNNJIT_CACHES='" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuCaches, DetectedOrForced) {
  {
    test::ScopedEnv unset("RNNJIT_CACHES", "");
    const CacheSizes c = detect_caches();
    EXPECT_GE(c.l1d, 1024);
    EXPECT_GE(c.l2, c.l1d);
    EXPECT_GE(c.l3, c.l2);
  }
  {
    test::ScopedEnv forced("RNNJIT_CACHES", "32K,1M");
    EXPECT_EQ(detect_caches(), (CacheSizes{32 * 1024, 1024 * 1024}));
  }
  test::ScopedEnv bad("RNNJIT_CACHES", "lots");
  EXPECT_THROW(detect_caches(), Error);
}

}  // namespace
}  // namespace rnnjit
