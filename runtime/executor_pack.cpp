// rnnjit: the executor's packing: W (or W^T) into the generated GEMMs' B panels (PackStep),
// and a k block of A^T into A's row-block panels (executor_util::pack_a_panels), both for the
// generated GEMMs, in AVX-512 moves for AVX-512 plans and in plain loops compiled for AVX2 for
// AVX2 plans (whose CPUs fault on any AVX-512 instruction); the bf16 tiles are
// runtime/executor_bf16.cpp's.
#include <immintrin.h>

#include <algorithm>
#include <cassert>

#include "runtime/executor.hpp"
#include "runtime/executor_util.hpp"

namespace rnnjit {
namespace {

// The opmask of the first n of 16 lanes (all 16 for n >= 16).
__mmask16 first_lanes(std::int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1); }

// dst[0:pc] = src[0:width] then zeros (pc a multiple of 16, width <= pc), in masked 16-float
// moves: a B panel's rows are 16-240 floats, too short for a memcpy call and a fill each.
__attribute__((target("avx512f"))) void copy_panel_row(float* dst, const float* src, std::int64_t width,
                                                        std::int64_t pc) {
  for (std::int64_t j = 0; j < pc; j += 16)
    _mm512_storeu_ps(dst + j, _mm512_maskz_loadu_ps(first_lanes(std::max<std::int64_t>(width - j, 0)), src + j));
}

// The same copies in plain loops, compiled for AVX2 (+FMA) for the plans of AVX2 CPUs.
__attribute__((target("avx2,fma"))) void copy_panel_row_avx2(float* dst, const float* src, std::int64_t width,
                                                             std::int64_t pc) {
  std::copy_n(src, width, dst);
  std::fill(dst + width, dst + pc, 0.0f);
}

// dst[kk][c] = rows[c][kk] as below, 8 columns at a time: each k row of W is read in order
// while 8 of them share the lines they touch.
__attribute__((target("avx2,fma"))) void pack_transposed_panel_avx2(float* dst, const float* rows, std::int64_t k,
                                                                    std::int64_t width, std::int64_t pc) {
  for (std::int64_t c0 = 0; c0 < pc; c0 += 8)
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t c = c0; c < c0 + 8; ++c) dst[kk * pc + c] = c < width ? rows[c * k + kk] : 0.0f;
}

using executor_util::transpose_16x16;

// GCC bug 105593 (see transpose_16x16) for the registers here too.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// dst[kk][c] = rows[c][kk] for c < pc (zeros from `width` on), kk < k: a panel of W^T, 16 x 16
// blocks at a time through registers (rows are k floats apart in W, dst rows pc apart).
__attribute__((target("avx512f"))) void pack_transposed_panel(float* dst, const float* rows, std::int64_t k,
                                                               std::int64_t width, std::int64_t pc) {
  for (std::int64_t k0 = 0; k0 < k; k0 += 16) {
    const std::int64_t kn = std::min<std::int64_t>(16, k - k0);
    const __mmask16 k_mask = first_lanes(kn);
    for (std::int64_t c0 = 0; c0 < pc; c0 += 16) {
      __m512 r[16];
      for (std::int64_t c = 0; c < 16; ++c)
        r[c] = c0 + c < width ? _mm512_maskz_loadu_ps(k_mask, rows + (c0 + c) * k + k0) : _mm512_setzero_ps();
      transpose_16x16(r);
      for (std::int64_t kk = 0; kk < kn; ++kk) _mm512_storeu_ps(dst + (k0 + kk) * pc + c0, r[kk]);
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// dst[kk][c] = B[kk][column c]: row by row of B, each row read once and in order, its pieces
// written to every panel (a panel at a time would read B in column strips, a new page at every
// row). Variable lengths: the rows of finished sequences are packed as zeros (width 0).
void pack_rows(const PackStep& p, const float* w, float* out, const std::int32_t* lengths, int tid, int threads,
               bool avx512) {
  const GemmBlocking& k = p.blocking;
  const std::int64_t ppg = k.panels_per_group(), pc = k.panel_columns(), panels = p.groups * ppg;
  const auto [k0, k1] = share(p.k, tid, threads);
  for (std::int64_t kk = k0; kk < k1; ++kk) {
    const bool finished = p.sequences > 0 && executor_util::row_past_end(lengths, p.sequences, kk);
    for (std::int64_t q = 0; q < panels; ++q) {
      const std::int64_t grp = q / ppg, col0 = (q % ppg) * pc;
      for (std::int64_t first = 0, end; first < pc; first = end) {  // each part of the panel
        end = k.part_end(q % ppg, first);
        float* dst = out + k.packed_part_offset(q, p.k, first) + kk * (end - first);
        const float* src = w + kk * p.ld + grp * k.group + col0 + first;
        const std::int64_t width = finished ? 0 : std::clamp<std::int64_t>(k.group - col0 - first, 0, end - first);
        if (avx512) copy_panel_row(dst, src, width, end - first);
        else copy_panel_row_avx2(dst, src, width, end - first);
      }
    }
  }
}

// dst[kk][c] = W[column c][kk]: a panel (each part of it) reads its whole rows of W.
void pack_transposed(const PackStep& p, const float* w, float* out, int tid, int threads, bool avx512) {
  const GemmBlocking& k = p.blocking;
  const std::int64_t ppg = k.panels_per_group(), pc = k.panel_columns(), panels = p.groups * ppg;
  const auto [q0, q1] = share(panels, tid, threads);
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t grp = q / ppg, col0 = (q % ppg) * pc;
    for (std::int64_t first = 0, end; first < pc; first = end) {
      end = k.part_end(q % ppg, first);
      float* dst = out + k.packed_part_offset(q, p.k, first);
      const float* rows = w + (grp * k.group + col0 + first) * p.k;
      const std::int64_t width = std::clamp<std::int64_t>(k.group - col0 - first, 0, end - first);
      if (avx512) pack_transposed_panel(dst, rows, p.k, width, end - first);
      else pack_transposed_panel_avx2(dst, rows, p.k, width, end - first);
    }
  }
}

}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // out of line, GCC 12 says so outright
#endif
// Four shuffle stages (pairs of floats, of pairs, of 128-bit lanes, of 256-bit halves). GCC 12 takes the
// undefined pass-through operand inside its shuffle intrinsics for a read of uninitialised
// memory (GCC bug 105593); every r and t here is written before it is read.
__attribute__((target("avx512f"))) void executor_util::transpose_16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Copies rows [kk0, kk1) of a k block of A^T into its row-block panels: 32 rows at a time and
// within them panel by panel, so the 32 rows stay in L1 while every panel takes its m_r floats
// of each and each panel's writes stay sequential. 32, not 64: the DS2 LSTM's dG rows lie 12800
// bytes apart, so 64 of them fill 8 of L1's 64 sets 8 deep beside the panels' writes. One
// thread's pack of a 6000 x 3200 dG (m_r = 5, k blocks of 1638) took 29 ms at 64 rows and 15
// at 32 (a memcpy of it 11), of 6000 x 2400 16 -> 12 ms, of 6000 x 4096 30 -> 29, of narrower
// ones (768, 256 columns) the same within 5%; 16 rows were slower on the wide ones. A panel
// row is m_r <= 29 floats (gemm_max_rows(1) of codegen/register_budgets.hpp), too short for a
// memcpy call: two masked moves, their masks computed once a panel.
__attribute__((target("avx512f"))) void executor_util::pack_a_panels(float* panels, const float* a, std::int64_t lda,
                                                                      std::int64_t m, std::int64_t m_r, std::int64_t kn,
                                                                      std::int64_t kk0, std::int64_t kk1) {
  assert(m_r >= 1 && m_r <= 32);
  const std::int64_t row_blocks = (m + m_r - 1) / m_r;
  constexpr std::int64_t kRows = 32;
  for (std::int64_t c0 = kk0; c0 < kk1; c0 += kRows) {
    const std::int64_t c1 = std::min(kk1, c0 + kRows);
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
      const std::int64_t rows = std::min(m_r, m - rb * m_r);
      const __mmask16 low = first_lanes(rows), high = first_lanes(std::max<std::int64_t>(rows - 16, 0));
      const float* src = a + c0 * lda + rb * m_r;
      float* dst = panels + (rb * kn + c0) * m_r;
      for (std::int64_t kk = c0; kk < c1; ++kk, src += lda, dst += m_r) {
        _mm512_mask_storeu_ps(dst, low, _mm512_maskz_loadu_ps(low, src));
        if (high) _mm512_mask_storeu_ps(dst + 16, high, _mm512_maskz_loadu_ps(high, src + 16));
      }
    }
  }
}

// The A panels of an AVX2 plan, as pack_a_panels above in plain loops compiled for AVX2.
__attribute__((target("avx2,fma"))) void executor_util::pack_a_panels_avx2(float* panels, const float* a,
                                                                           std::int64_t lda, std::int64_t m,
                                                                           std::int64_t m_r, std::int64_t kn,
                                                                           std::int64_t kk0, std::int64_t kk1) {
  const std::int64_t row_blocks = (m + m_r - 1) / m_r;
  constexpr std::int64_t kRows = 32;
  for (std::int64_t c0 = kk0; c0 < kk1; c0 += kRows) {
    const std::int64_t c1 = std::min(kk1, c0 + kRows);
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
      const std::int64_t rows = std::min(m_r, m - rb * m_r);
      const float* src = a + c0 * lda + rb * m_r;
      float* dst = panels + (rb * kn + c0) * m_r;
      for (std::int64_t kk = c0; kk < c1; ++kk, src += lda, dst += m_r) std::copy_n(src, rows, dst);
    }
  }
}

void Executor::pack(const PackStep& p, const Bindings& b, int tid, int threads) const {
  const float* w = resolve(p.src, b);
  float* out = resolve(p.dst, b);
  if (p.blocking.int8) return pack_int8(p, w, out, tid, threads);
  if (p.blocking.bf16) return pack_bf16(p, w, out, b.lengths, tid, threads);
  const bool avx512 = plan_->isa == Isa::avx512;
  if (!p.transpose) pack_rows(p, w, out, b.lengths, tid, threads, avx512);
  else pack_transposed(p, w, out, tid, threads, avx512);
}

}  // namespace rnnjit
