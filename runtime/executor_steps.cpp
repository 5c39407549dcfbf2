// rnnjit: the executor's element-wise steps: copies, column sums, padding masks and dropout.
#include <algorithm>
#include <cstring>

#include "kernels/dropout.hpp"
#include "runtime/executor.hpp"
#include "runtime/executor_util.hpp"

namespace rnnjit {
namespace {

// sum[0:width] += each of `rows` rows of src (ld apart), times the same row of factor where
// factor is not null. The sums live in L1 and the loop is bound by its loads and stores of
// them: add_rows_avx512 compiles it for AVX-512 (16 floats at once against the baseline's 4),
// add_rows_avx2 for AVX2 (8), which column sums take where the plan's ISA is that, as the GEMM
// packs do. (Not
// target_clones: its ifunc resolver runs before ThreadSanitizer's runtime is up, and every
// TSan test crashed at load.)
[[gnu::always_inline]] inline void add_rows_loop(float* sum, std::int64_t width, const float* src, std::int64_t ld,
                                                 std::int64_t rows, const float* factor, std::int64_t ld_factor) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = src + r * ld;
    if (factor) {
      const float* f = factor + r * ld_factor;
      for (std::int64_t j = 0; j < width; ++j) sum[j] += row[j] * f[j];
    } else {
      for (std::int64_t j = 0; j < width; ++j) sum[j] += row[j];
    }
  }
}

__attribute__((target("avx512f"))) void add_rows_avx512(float* sum, std::int64_t width, const float* src,
                                                         std::int64_t ld, std::int64_t rows, const float* factor,
                                                         std::int64_t ld_factor) {
  add_rows_loop(sum, width, src, ld, rows, factor, ld_factor);
}

__attribute__((target("avx2,fma"))) void add_rows_avx2(float* sum, std::int64_t width, const float* src,
                                                       std::int64_t ld, std::int64_t rows, const float* factor,
                                                       std::int64_t ld_factor) {
  add_rows_loop(sum, width, src, ld, rows, factor, ld_factor);
}

}  // namespace

void Executor::column_sum(const ColumnSumStep& s, const Bindings& b, float beta, int tid, int threads) const {
  const float* src = resolve(s.src, b);
  const float* factor = resolve(s.factor, b);
  float* const outputs[] = {resolve(s.dst, b), resolve(s.also_dst, b)};
  const auto [j0, j1] = share(s.cols, tid, threads);
  // The sums of up to kBlock columns stay in L1 while the rows stream past, each read as one
  // contiguous run: a thread's whole share of columns in one sweep (up to 4H = 2048, H = 512),
  // so a gate row's share is a single run the prefetchers follow from row to row.
  constexpr std::int64_t kBlock = 2048;
  for (std::int64_t jb = j0; jb < j1; jb += kBlock) {
    const std::int64_t width = std::min(kBlock, j1 - jb);
    float sum[kBlock];
    std::fill_n(sum, width, 0.0f);
    const float* f = factor ? factor + jb : nullptr;
    if (plan_->isa == Isa::avx512) add_rows_avx512(sum, width, src + jb, s.ld_src, s.rows, f, s.ld_factor);
    else if (plan_->isa == Isa::avx2) add_rows_avx2(sum, width, src + jb, s.ld_src, s.rows, f, s.ld_factor);
    else add_rows_loop(sum, width, src + jb, s.ld_src, s.rows, f, s.ld_factor);
    for (float* out : outputs)
      if (out)
        for (std::int64_t j = 0; j < width; ++j) out[jb + j] = (beta == 0.0f ? 0.0f : beta * out[jb + j]) + sum[j];
  }
}

void Executor::copy(const CopyStep& c, const Bindings& b, int tid, int threads) const {
  const float* src = resolve(c.src, b);
  const float* plus = resolve(c.plus, b);
  float* dst = resolve(c.dst, b);
  if (!dst) return;  // optional output not requested
  const auto [r0, r1] = share(c.blocks * c.rows, tid, threads);
  for (std::int64_t i = r0; i < r1; ++i) {
    const std::int64_t blk = i / c.rows, r = i % c.rows, from_offset = blk * c.block_src + r * c.ld_src;
    float* row = dst + blk * c.block_dst + r * c.ld_dst;
    const float* x = src ? src + from_offset : nullptr;
    const float* y = plus ? plus + from_offset : nullptr;
    if (x && y) {
      for (std::int64_t j = 0; j < c.cols; ++j) row[j] = x[j] + y[j];
    } else if (x || y) {
      executor_util::copy_floats(row, x ? x : y, c.cols);
    } else {
      std::memset(row, 0, static_cast<std::size_t>(c.cols) * sizeof(float));
    }
  }
}

void Executor::mask(const MaskStep& m, const Bindings& b, int tid, int threads) const {
  if (!b.lengths) return;
  float* dst = resolve(m.dst, b);
  const auto [n0, n1] = share(m.batch, tid, threads);
  for (std::int64_t n = n0; n < n1; ++n)
    for (std::int64_t t = b.lengths[n]; t < m.steps; ++t)
      std::memset(dst + t * m.t_stride + n * m.n_stride, 0, static_cast<std::size_t>(m.cols) * sizeof(float));
}

void Executor::dropout(const DropoutStep& d, const Bindings& b, int tid, int threads) const {
  auto* keep = reinterpret_cast<std::uint8_t*>(region_bytes(d.mask_region, b));
  float* dst = resolve(d.dst, b);
  const float scale = dropout_scale(d.p);
  const auto [e0, e1] = share(d.elements, tid, threads);
  if (d.pass == Pass::forward) {
    const float* src = resolve(d.src, b);
    for (std::int64_t e = e0; e < e1; ++e) {
      keep[e] = dropout_keep(b.dropout_seed, d.layer, e, d.p);
      dst[e] = keep[e] ? src[e] * scale : 0.0f;
    }
  } else {
    for (std::int64_t e = e0; e < e1; ++e) dst[e] = keep[e] ? dst[e] * scale : 0.0f;
  }
}

}  // namespace rnnjit
