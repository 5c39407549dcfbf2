// The int8 GEMM's tiling (GemmBlocking::int8). vpdpbusd has the register needs of vdpbf16ps (a
// sum per row and vector, a B vector per column tile, broadcasts of A), so the AVX512_BF16
// tiles serve as they are, and TDPBUSD's tiles are TDPBF16PS's; what differs is K's padding
// (tiles of 64) and A's bytes a row.
#include <algorithm>

#include "codegen/gemm_blocking.hpp"

namespace rnnjit {

GemmBlocking choose_int8_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads,
                                  const CacheSizes& caches, bool shared, Int8Unit unit) {
  // AMX: the AMX-BF16 kernel's tiles (two 16-row A tiles, two 16-column B tiles, four C tiles).
  GemmBlocking b = choose_bf16_blocking(m, k, group, threads, caches, shared,
                                        unit == Int8Unit::amx ? Bf16Unit::amx : Bf16Unit::avx512_bf16);
  b.bf16 = false;
  b.int8 = true;
  b.int8_unit = unit;
  b.k_c = int8_k(k);
  // An m block of A's uint8 rows in 3/8 of L2, so each panel of B (in L2 beside it) serves all
  // of its row blocks before the next panel streams in.
  const std::int64_t a_rows = std::max<std::int64_t>(1, (caches.l2 * 3 / 8) / b.k_c / b.m_r) * b.m_r;
  b.m_c = std::min(a_rows, (m + b.m_r - 1) / b.m_r * b.m_r);
  return b;
}

}  // namespace rnnjit
