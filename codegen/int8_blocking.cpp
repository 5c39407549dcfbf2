// The int8 GEMM's tiling (GemmBlocking::int8). vpdpbusd on zmm has the register needs of
// vdpbf16ps (a sum per row and vector, a B vector per column tile, broadcasts of A), so the
// AVX512_BF16 tiles serve as they are, and TDPBUSD's tiles are TDPBF16PS's; what differs is K's
// padding (tiles of 64) and A's bytes a row. The AVX2 units' ymm tiles fit 16 registers
// (int8_max_rows).
#include <algorithm>

#include "codegen/gemm_blocking.hpp"
#include "codegen/int8_unit.hpp"
#include "codegen/register_budgets.hpp"

namespace rnnjit {
namespace {

// AVX2 units: one 16-column vector of up to 5 rows (10 sums, 2 B registers: a B load per 5 dot
// steps); a recurrence's step of one or two rows takes two vectors (2 rows fit), halving its
// trips through the k loop.
void choose_avx2_int8_tile(GemmBlocking& b, std::int64_t m, bool shared) {
  const std::int64_t tiles = (b.group + 15) / 16;
  b.n_r = !shared && tiles > 1 && m <= int8_max_rows(2, Isa::avx2) ? 2 : 1;
  const std::int64_t most = int8_max_rows(static_cast<int>(b.n_r), Isa::avx2);
  // Rows evened out over the blocks M needs: M = 20 in four blocks of 5, M = 6 in two of 3.
  const std::int64_t blocks = (m + most - 1) / most;
  b.m_r = (m + blocks - 1) / blocks;
  b.b_lookahead = shared ? 0 : 2;
}

}  // namespace

GemmBlocking choose_int8_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads,
                                  const CacheSizes& caches, bool shared, Int8Unit unit) {
  // AMX: the AMX-BF16 kernel's tiles (two 16-row A tiles, two 16-column B tiles, four C tiles).
  GemmBlocking b = choose_bf16_blocking(m, k, group, threads, caches, shared,
                                        unit == Int8Unit::amx ? Bf16Unit::amx : Bf16Unit::avx512_bf16);
  if (int8_kernel_isa(unit) == Isa::avx2) choose_avx2_int8_tile(b, m, shared);
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
