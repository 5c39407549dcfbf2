// rnnjit: the executor's AMX-BF16 GEMMs (Plan::fpmath bf16): packing W^T into bf16 tiles,
// rounding A to bf16 rows, and walking the tiles. Sizes and kernels all come from the plan
// (codegen/gemm_blocking.hpp: choose_bf16_blocking, bf16_packed_offset).
#include <algorithm>
#include <cstring>

#include "codegen/kernel_args.hpp"
#include "kernels/bf16.hpp"
#include "runtime/executor.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

std::pair<std::int64_t, std::int64_t> rows_of(std::int64_t count, int tid, int threads) {
  return {count * tid / threads, count * (tid + 1) / threads};
}

// dst[r][0:k_pad] = bf16(src[r][0:k]) then zeros, for r in [r0, r1).
void round_rows(std::uint16_t* dst, std::int64_t k_pad, const float* src, std::int64_t lda, std::int64_t k,
                std::int64_t r0, std::int64_t r1) {
  for (std::int64_t r = r0; r < r1; ++r) {
    std::uint16_t* out = dst + r * k_pad;
    const float* in = src + r * lda;
    for (std::int64_t kk = 0; kk < k; ++kk) out[kk] = to_bf16(in[kk]);
    std::fill(out + k, out + k_pad, std::uint16_t{0});
  }
}

}  // namespace

namespace {
// The AMX kernel whose tile configuration this thread's tiles hold (none after a release).
thread_local const CompiledKernel* configured_kernel = nullptr;
}  // namespace

void release_amx_tiles() {
  asm volatile(".byte 0xc4, 0xe2, 0x78, 0x49, 0xc0" ::: "memory");  // tilerelease (binutils may predate AMX)
  configured_kernel = nullptr;
}

void Executor::pack_bf16(const PackStep& p, const float* w, float* out, int tid, int threads) const {
  const GemmBlocking& k = p.blocking;
  const std::int64_t ppg = k.panels_per_group(), pc = k.panel_columns(), k_pad = bf16_k(p.k);
  const auto [q0, q1] = rows_of(p.groups * ppg, tid, threads);
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t grp = q / ppg, col0 = (q % ppg) * pc, width = std::min(pc, k.group - col0);
    auto* panel = reinterpret_cast<std::uint16_t*>(out) + q * k_pad * pc;
    std::memset(panel, 0, static_cast<std::size_t>(k_pad * pc) * sizeof(std::uint16_t));
    for (std::int64_t c = 0; c < width; ++c) {
      const float* row = w + (grp * k.group + col0 + c) * p.k;  // W's row: B's column c
      for (std::int64_t kk = 0; kk < p.k; ++kk) panel[bf16_packed_offset(k.n_r, kk, c)] = to_bf16(row[kk]);
    }
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
    const auto [r0, r1] = rows_of(a_rows, tid, threads);
    round_rows(a_bf16, k_pad, call.a, g.lda, g.k, r0, r1);
    if (threads > 1) team.barrier();
  } else {
    a_bf16 += static_cast<std::int64_t>(tid) * g.m * k_pad;
    round_rows(a_bf16, k_pad, call.a, g.lda, g.k, 0, a_rows);
  }
  // Row block rb times panel p of group grp, all of K at once.
  const bool use_beta = call.beta != 0.0f;
  auto tile = [&](std::int64_t rb, std::int64_t grp, std::int64_t p) {
    const std::int64_t r0 = rb * k.m_r, r1 = std::min(g.m, r0 + k.m_r);
    const std::int64_t col0 = grp * k.group + p * pc, width = std::min(pc, k.group - p * pc);
    if (call.finished.all(r0, r1)) {
      if (g.finished_rows_zero && !use_beta)
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
    args.configured = &kernel == configured_kernel;
    configured_kernel = &kernel;
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
  const auto [p0, p1] = k.thread_panels(tid);
  for (std::int64_t grp = 0; grp < groups; ++grp)
    for (std::int64_t p = p0; p < p1; ++p)
      for (std::int64_t rb = 0; rb < row_blocks; ++rb) tile(rb, grp, p);
}

}  // namespace rnnjit
