// rnnjit: the executor's int8 GEMMs (Plan::quantize int8_dynamic) on AVX512-VNNI: packing W^T
// into int8 panels (once per weights, or in every call without packed weights), quantizing A's
// rows to uint8 with a scale per row as each GEMM reads them, and walking the tiles. Both
// quantizers are AVX-512 and match kernels/int8_reference.hpp (int8::pack_panel,
// int8::quantize_activation_row) bit for bit. Sizes and kernels all come from the plan (codegen/int8_layout.hpp,
// choose_int8_blocking).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/kernel_args.hpp"
#include "kernels/int8_reference.hpp"
#include "rnnjit/error.hpp"
#include "runtime/executor.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

// GCC 12 takes the undefined pass-through operand inside its masked-load and narrowing
// intrinsics for a read of uninitialised memory (GCC bug 105593), as in executor_bf16.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

__mmask16 first_lanes(std::int64_t n) {
  n = std::clamp<std::int64_t>(n, 0, 16);
  return static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
}

// Rows [r0, r1) of A (lda apart, k floats each) into rows of k_pad bytes at dst, q + zero_point
// (zero_point past k), and their scales at scales[r]: int8::quantize's arithmetic 16 lanes at a
// time (vcvtps2dq rounds to nearest even, as nearbyint does). Activations: uint8 with zero point
// 128; weights: int8 (zero point 0: zeros past k, as B's padding must be).
__attribute__((target("avx512f,avx512bw"))) void quantize_rows(std::uint8_t* dst, float* scales, std::int64_t k_pad,
                                                               const float* src, std::int64_t lda, std::int64_t k,
                                                               std::int64_t r0, std::int64_t r1,
                                                               std::int32_t zero_point_value = kActivationZeroPoint) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512i zero_point = _mm512_set1_epi32(zero_point_value);
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* in = src + r * lda;
    __m512 most = _mm512_setzero_ps();
    for (std::int64_t kk = 0; kk < k; kk += 16)
      most = _mm512_max_ps(most, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(k - kk), in + kk)));
    const int8::RowScale s = int8::row_scale(_mm512_reduce_max_ps(most));
    scales[r] = s.scale;
    const __m512 inv = _mm512_set1_ps(s.inv);
    std::uint8_t* out = dst + r * k_pad;
    for (std::int64_t kk = 0; kk < k_pad; kk += 16) {  // zeros past k: q = 128
      const __m512 x = _mm512_maskz_loadu_ps(first_lanes(k - kk), in + kk);
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, inv));
      q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), zero_point);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kk), _mm512_cvtepi32_epi8(q));
    }
  }
}

// int8::pack_panel in AVX-512: each of the `width` rows of W quantized into an int8 row (and
// its scale), summed for its compensation, and its k quads copied to their places in the panel.
void pack_panel(std::int8_t* panel, std::uint8_t* row, const float* w, std::int64_t k, std::int64_t width,
                std::int64_t n_r) {
  const std::int64_t columns = 16 * n_r, k_pad = int8_k(k), data = k_pad * columns;
  std::memset(panel, 0, static_cast<std::size_t>(int8_panel_bytes(n_r, k)));
  auto* compensation = reinterpret_cast<std::int32_t*>(panel + data);
  auto* scale = reinterpret_cast<float*>(panel + data + 4 * columns);
  for (std::int64_t c = 0; c < width; ++c) {
    quantize_rows(row, scale + c, k_pad, w + c * k, k, k, 0, 1, 0);
    std::int32_t sum = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) sum += static_cast<std::int8_t>(row[kk]);
    compensation[c] = kActivationZeroPoint * sum;
    for (std::int64_t kk = 0; kk < k_pad; kk += 4) std::memcpy(panel + int8_packed_offset(n_r, kk, c), row + kk, 4);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void Executor::pack_int8(const PackStep& p, const float* w, float* out, int tid, int threads) const {
  if (!p.transpose) throw Error(fmt::format("{}: int8 panels are packed only from weights (W^T)", p.what));
  const GemmBlocking& k = p.blocking;
  const std::int64_t ppg = k.panels_per_group(), pc = k.panel_columns();
  const std::int64_t panel_bytes = int8_panel_bytes(k.n_r, p.k);
  std::vector<std::uint8_t> row(static_cast<std::size_t>(int8_k(p.k)));
  const auto [q0, q1] = share(p.groups * ppg, tid, threads);
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t grp = q / ppg, col0 = grp * k.group + (q % ppg) * pc;
    const std::int64_t width = std::min(pc, k.group - (q % ppg) * pc);
    pack_panel(reinterpret_cast<std::int8_t*>(out) + q * panel_bytes, row.data(), w + col0 * p.k, p.k, width, k.n_r);
  }
}

void Executor::int8_gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared) const {
  const GemmBlocking& k = g.blocking;
  const std::int64_t groups = g.n / k.group, ppg = k.panels_per_group(), pc = k.panel_columns();
  const std::int64_t k_pad = int8_k(g.k), row_blocks = k.row_blocks(call.rows);
  const std::int64_t panel_bytes = int8_panel_bytes(k.n_r, g.k);
  // Row blocks are computed whole (up to g.m), so A is quantized that far.
  const std::int64_t a_rows = std::min(g.m, row_blocks * k.m_r);
  auto* a_u8 = reinterpret_cast<std::uint8_t*>(call.a_panels);
  ThreadTeam& team = ThreadTeam::instance();
  if (!shared) a_u8 += static_cast<std::int64_t>(tid) * int8_a_bytes(g.m, g.k);
  auto* scales = reinterpret_cast<float*>(a_u8 + g.m * k_pad);
  if (shared) {
    const auto [r0, r1] = share(a_rows, tid, threads);
    quantize_rows(a_u8, scales, k_pad, call.a, g.lda, g.k, r0, r1);
    if (threads > 1) team.barrier();
  } else {
    quantize_rows(a_u8, scales, k_pad, call.a, g.lda, g.k, 0, a_rows);
  }
  const auto* b = reinterpret_cast<const std::int8_t*>(call.b);
  const bool use_beta = call.beta != 0.0f;
  // Row block rb times panel p of group grp, all of K at once.
  auto tile = [&](std::int64_t rb, std::int64_t grp, std::int64_t p) {
    const std::int64_t r0 = rb * k.m_r, r1 = std::min(g.m, r0 + k.m_r);
    const std::int64_t col0 = grp * k.group + p * pc, width = std::min(pc, k.group - p * pc);
    if (call.finished.all(r0, r1)) return;  // (inference: nothing reads the rows of finished sequences)
    Int8GemmArgs args{};
    args.a = a_u8 + r0 * k_pad;
    args.b = b + (grp * ppg + p) * panel_bytes;
    args.c = call.c + r0 * g.ldc + col0;
    args.k = k_pad / kInt8TileK;
    args.a_scale = scales + r0;
    const int row_tail = r1 - r0 < k.m_r, col_tail = width < pc;
    const CompiledKernel& kernel = *kernels_[static_cast<std::size_t>(k.kernels[row_tail][col_tail][use_beta])];
    if (k.int8_unit == Int8Unit::amx) {
      args.configured = &kernel == amx_configured_kernel();
      amx_configured_kernel() = &kernel;
    }
    kernel(&args);
  };
  if (shared) {
    // Units of (m block, panel): a panel of B serves every row block of its m block in turn.
    const std::int64_t rows_per_block = std::max<std::int64_t>(1, k.m_c / k.m_r);
    const std::int64_t m_blocks = (row_blocks + rows_per_block - 1) / rows_per_block;
    SharedLoop loop = team.shared_loop(m_blocks * groups * ppg, threads);
    for (std::int64_t u = loop.next(); u >= 0; u = loop.next()) {
      const std::int64_t mb = u / (groups * ppg), q = u % (groups * ppg);
      for (std::int64_t rb = mb * rows_per_block; rb < std::min(row_blocks, (mb + 1) * rows_per_block); ++rb)
        tile(rb, q / ppg, q % ppg);
    }
    return;
  }
  // This thread's (group, panel) pairs in the step's order (GemmCall::backwards).
  const auto [p0, p1] = k.thread_panels(tid);
  for (std::int64_t i = 0; i < groups * (p1 - p0); ++i) {
    const auto [grp, p] = GemmBlocking::step_pair(i, groups, p1 - p0, p0, call.backwards);
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) tile(rb, grp, p);
  }
}

}  // namespace rnnjit
