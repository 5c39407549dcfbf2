// rnnjit: the executor's bf16 GEMMs (Plan::fpmath bf16), on AMX-BF16 tiles or AVX512_BF16 dot
// products (Plan::bf16_unit; both read the same operands): packing B (W^T, or W or another
// plain matrix) into bf16 tiles, rounding A to bf16 rows, and walking the tiles. Sizes and kernels all come from the plan
// (codegen/gemm_blocking.hpp: choose_bf16_blocking, bf16_packed_offset).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "codegen/kernel_args.hpp"
#include "runtime/executor.hpp"
#include "runtime/executor_util.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

// FP32 operands rounded to bf16 as the GEMMs read them: A into rows of bf16_k(K) (dst[r][0:k_pad]
// = bf16(op(A)[r][0:k]) then zeros, for r in [r0, r1)) and a plain B into panels, 16 lanes at a
// time (a recurrence rounds all of h on every thread at every step). GCC 12 takes the undefined
// pass-through operand inside its shift and narrowing intrinsics for a read of uninitialised
// memory (GCC bug 105593); every value here is written before it is read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 16 floats rounded to bf16 as to_bf16 (kernels/bf16.hpp) rounds them (to nearest even; NaN stays a quiet NaN).
__attribute__((target("avx512f,avx512bw"))) __m256i bf16_lanes(__m512 x) {
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  const __m512i u = _mm512_castps_si512(x);
  const __m512i high = _mm512_srli_epi32(u, 16);
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(high, one))), 16);
  rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_or_si512(high, quiet));
  return _mm512_cvtepi32_epi16(rounded);
}

__mmask16 first_lanes(std::int64_t n) {
  n = std::clamp<std::int64_t>(n, 0, 16);
  return static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
}

// A read as is: row r of op(A) is A's row r, lda apart.
__attribute__((target("avx512f,avx512bw"))) void round_rows(std::uint16_t* dst, std::int64_t k_pad, const float* src,
                                                            std::int64_t lda, std::int64_t k, std::int64_t r0,
                                                            std::int64_t r1) {
  for (std::int64_t r = r0; r < r1; ++r) {
    std::uint16_t* out = dst + r * k_pad;
    const float* in = src + r * lda;
    for (std::int64_t kk = 0; kk < k_pad; kk += 16) {  // zeros past k
      const __m512 x = _mm512_maskz_loadu_ps(first_lanes(k - kk), in + kk);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kk), bf16_lanes(x));
    }
  }
}

// A transposed (a weight gradient's dgates^T): row r of op(A) is A's column r, so 16 x 16
// blocks go through registers (executor_util::transpose_16x16). 128 of A's rows at a time, all
// of this thread's columns of them, so that their pages stay in the TLB while the strips of 16
// columns go by (a strip at a time down all of K would walk a new page at every row of A).
__attribute__((target("avx512f,avx512bw"))) void round_columns(std::uint16_t* dst, std::int64_t k_pad,
                                                               const float* src, std::int64_t lda, std::int64_t k,
                                                               std::int64_t r0, std::int64_t r1) {
  constexpr std::int64_t kRowsOfA = 128;
  for (std::int64_t kb = 0; kb < k_pad; kb += kRowsOfA)
    for (std::int64_t i0 = r0; i0 < r1; i0 += 16) {
      const __mmask16 columns = first_lanes(r1 - i0);
      for (std::int64_t kk0 = kb; kk0 < std::min(k_pad, kb + kRowsOfA); kk0 += 16) {
        __m512 block[16];
        for (std::int64_t j = 0; j < 16; ++j)
          block[j] = kk0 + j < k ? _mm512_maskz_loadu_ps(columns, src + (kk0 + j) * lda + i0) : _mm512_setzero_ps();
        executor_util::transpose_16x16(block);
        for (std::int64_t i = 0; i < std::min<std::int64_t>(16, r1 - i0); ++i)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (i0 + i) * k_pad + kk0), bf16_lanes(block[i]));
      }
    }
}

// Rows kk and kk + 1 of B at 16 columns (x0, x1) as one row of a tile: the 16 columns' pairs of
// bf16 (bf16_packed_offset), 64 bytes.
__attribute__((target("avx512f,avx512bw"))) void store_pair(std::uint16_t* at, __m512 x0, __m512 x1) {
  const __m512i even = _mm512_cvtepu16_epi32(bf16_lanes(x0)), odd = _mm512_cvtepu16_epi32(bf16_lanes(x1));
  _mm512_storeu_si512(at, _mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
}

// A panel of a plain B (PackStep::transpose false): B's rows kk and kk + 1 (zeros past K, and
// for the rows of finished sequences) rounded 16 columns at a time and interleaved, as a tile row
// of k pairs (bf16_packed_offset): one 64-byte store per 16 columns of a row pair. Backward packs
// W and the weight gradients their x or h at every call.
__attribute__((target("avx512f,avx512bw"))) void pack_plain_panel(std::uint16_t* panel, const float* b,
                                                                  const PackStep& p, std::int64_t width,
                                                                  const std::int32_t* lengths) {
  auto zeros = [&](std::int64_t kk) {
    return kk >= p.k || (p.sequences > 0 && executor_util::row_past_end(lengths, p.sequences, kk));
  };
  for (std::int64_t kk = 0; kk < p.k; kk += 2) {
    const bool zero[2] = {zeros(kk), zeros(kk + 1)};
    for (std::int64_t c = 0; c < width; c += 16) {
      const __mmask16 lanes = first_lanes(width - c);
      const __m512 x0 = _mm512_maskz_loadu_ps(zero[0] ? 0 : lanes, b + kk * p.ld + c);
      const __m512 x1 = _mm512_maskz_loadu_ps(zero[1] ? 0 : lanes, b + (kk + 1) * p.ld + c);
      store_pair(panel + bf16_packed_offset(p.blocking.n_r, kk, c), x0, x1);
    }
  }
}

// A panel of W^T (PackStep::transpose): W's rows col0 + c, k floats long, are B's columns, so
// 16 x 16 blocks go through registers (executor_util::transpose_16x16) into rows of B, then pairs
// of them into tile rows as for a plain B. Training packs the weights at every call.
__attribute__((target("avx512f,avx512bw"))) void pack_transposed_panel(std::uint16_t* panel, const float* w,
                                                                       const PackStep& p, std::int64_t width) {
  for (std::int64_t kk0 = 0; kk0 < p.k; kk0 += 16) {
    const __mmask16 ks = first_lanes(p.k - kk0);
    for (std::int64_t c = 0; c < width; c += 16) {
      __m512 block[16];
      for (std::int64_t j = 0; j < 16; ++j)
        block[j] = c + j < width ? _mm512_maskz_loadu_ps(ks, w + (c + j) * p.k + kk0) : _mm512_setzero_ps();
      executor_util::transpose_16x16(block);  // block[j]: B's row kk0 + j, columns c..c + 15
      for (std::int64_t j = 0; j < 16 && kk0 + j < p.k; j += 2)
        store_pair(panel + bf16_packed_offset(p.blocking.n_r, kk0 + j, c), block[j], block[j + 1]);
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

// The AMX kernel whose tile configuration this thread's tiles hold (none after a release).
static thread_local const CompiledKernel* configured_kernel = nullptr;

const CompiledKernel*& amx_configured_kernel() { return configured_kernel; }

void release_amx_tiles() {
  asm volatile(".byte 0xc4, 0xe2, 0x78, 0x49, 0xc0" ::: "memory");  // tilerelease (binutils may predate AMX)
  configured_kernel = nullptr;
}

void Executor::pack_bf16(const PackStep& p, const float* w, float* out, const std::int32_t* lengths, int tid,
                         int threads) const {
  const GemmBlocking& k = p.blocking;
  const std::int64_t ppg = k.panels_per_group(), pc = k.panel_columns(), k_pad = bf16_k(p.k);
  const auto [q0, q1] = share(p.groups * ppg, tid, threads);
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t grp = q / ppg, col0 = grp * k.group + (q % ppg) * pc;
    const std::int64_t width = std::min(pc, k.group - (q % ppg) * pc);
    auto* panel = reinterpret_cast<std::uint16_t*>(out) + q * k_pad * pc;
    std::memset(panel, 0, static_cast<std::size_t>(k_pad * pc) * sizeof(std::uint16_t));
    if (p.transpose) pack_transposed_panel(panel, w + col0 * p.k, p, width);
    else pack_plain_panel(panel, w + col0, p, width, lengths);
  }
}

void Executor::bf16_gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared) const {
  const GemmBlocking& k = g.blocking;
  const std::int64_t groups = g.n / k.group, ppg = k.panels_per_group(), pc = k.panel_columns();
  const std::int64_t k_pad = bf16_k(g.k), row_blocks = k.row_blocks(call.rows);
  // Row blocks are computed whole (up to g.m), so A is rounded that far.
  const std::int64_t a_rows = std::min(g.m, row_blocks * k.m_r);
  auto* a_bf16 = reinterpret_cast<std::uint16_t*>(call.a_panels);
  ThreadTeam& team = ThreadTeam::instance();
  if (shared) {
    const auto [r0, r1] = share(a_rows, tid, threads);
    (g.trans_a ? round_columns : round_rows)(a_bf16, k_pad, call.a, g.lda, g.k, r0, r1);
    if (threads > 1) team.barrier();
  } else {
    a_bf16 += static_cast<std::int64_t>(tid) * g.m * k_pad;
    (g.trans_a ? round_columns : round_rows)(a_bf16, k_pad, call.a, g.lda, g.k, 0, a_rows);
  }
  // Row block rb times panel p of group grp, all of K at once.
  const bool use_beta = call.beta != 0.0f;
  auto tile = [&](std::int64_t rb, std::int64_t grp, std::int64_t p) {
    const std::int64_t r0 = rb * k.m_r, r1 = std::min(g.m, r0 + k.m_r);
    const std::int64_t col0 = grp * k.group + p * pc, width = std::min(pc, k.group - p * pc);
    if (call.finished.all(r0, r1)) {
      if (g.finished.rows_zero && !use_beta)
        for (std::int64_t r = r0; r < r1; ++r)
          std::memset(call.c + r * g.ldc + col0, 0, static_cast<std::size_t>(width) * sizeof(float));
      return;
    }
    GemmArgs args{};
    args.a = reinterpret_cast<const float*>(a_bf16 + r0 * k_pad);
    args.b = call.b + (grp * ppg + p) * k_pad * pc / 2;
    args.c = call.c + r0 * g.ldc + col0;
    args.k = k_pad / 32;
    const int row_tail = r1 - r0 < k.m_r, col_tail = width < pc;
    const CompiledKernel& kernel = *kernels_[static_cast<std::size_t>(k.kernels[row_tail][col_tail][use_beta])];
    if (k.bf16_unit == Bf16Unit::amx) {
      args.configured = &kernel == configured_kernel;
      configured_kernel = &kernel;
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
