// rnnjit: the executor's int8 GEMMs (Plan::quantize int8_dynamic) on every int8 unit: packing
// W^T into int8 panels (once per weights, or in every call without packed weights), quantizing
// A's rows to uint8 with a scale per row as each GEMM reads them, and walking the tiles. The
// quantizers (runtime/int8_quantizers.hpp, AVX-512 or AVX2 as the unit's kernels are) match
// kernels/int8_reference.hpp (int8::pack_panel, int8::quantize_activation_row) bit for bit, with
// the unit's levels and zero point (codegen/int8_unit.hpp). Sizes and kernels all come from the
// plan (codegen/int8_layout.hpp, choose_int8_blocking).
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/int8_unit.hpp"
#include "codegen/kernel_args.hpp"
#include "kernels/int8_reference.hpp"
#include "rnnjit/error.hpp"
#include "runtime/executor.hpp"
#include "runtime/int8_quantizers.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

// int8::pack_panel with the unit's quantizer: each of the `width` rows of W quantized into an
// int8 row (and its scale), summed for its compensation (the unit's activation zero point x the
// sum), and its k quads copied to their places in the panel.
void pack_panel(std::int8_t* panel, std::uint8_t* row, const float* w, std::int64_t k, std::int64_t width,
                std::int64_t n_r, Int8Unit unit) {
  const int8::QuantizeRows quantize_rows = int8::quantize_rows_for(unit);
  const std::int32_t zero_point = activation_quantization(unit).zero_point;
  const std::int64_t columns = 16 * n_r, k_pad = int8_k(k), data = k_pad * columns;
  std::memset(panel, 0, static_cast<std::size_t>(int8_panel_bytes(n_r, k)));
  auto* compensation = reinterpret_cast<std::int32_t*>(panel + data);
  auto* scale = reinterpret_cast<float*>(panel + data + 4 * columns);
  for (std::int64_t c = 0; c < width; ++c) {
    quantize_rows(row, scale + c, k_pad, w + c * k, k, k, 0, 1, kWeightLevels, 0);
    std::int32_t sum = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) sum += static_cast<std::int8_t>(row[kk]);
    compensation[c] = zero_point * sum;
    for (std::int64_t kk = 0; kk < k_pad; kk += 4) std::memcpy(panel + int8_packed_offset(n_r, kk, c), row + kk, 4);
  }
}

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
    pack_panel(reinterpret_cast<std::int8_t*>(out) + q * panel_bytes, row.data(), w + col0 * p.k, p.k, width, k.n_r,
               k.int8_unit);
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
  const int8::QuantizeRows quantize_rows = int8::quantize_rows_for(k.int8_unit);
  const ActivationQuantization aq = activation_quantization(k.int8_unit);
  if (shared) {
    const auto [r0, r1] = share(a_rows, tid, threads);
    quantize_rows(a_u8, scales, k_pad, call.a, g.lda, g.k, r0, r1, aq.levels, aq.zero_point);
    if (threads > 1) team.barrier();
  } else {
    quantize_rows(a_u8, scales, k_pad, call.a, g.lda, g.k, 0, a_rows, aq.levels, aq.zero_point);
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
