// rnnjit: the executor's GEMMs: a one-shot GEMM step (input projections, input and weight
// gradients), a recurrence's per-step products, and the walk of a generated GEMM's tiles
// (Executor::GemmWalk) or the calls to OpenBLAS. Blocking and kernels all come from the plan.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "codegen/kernel_args.hpp"
#include "runtime/executor.hpp"
#include "runtime/executor_util.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

using executor_util::row_past_end;

// Whether every element of the block starting at p is zero.
bool all_zeros(const float* p, const RowBlock& block) {
  for (std::int64_t r = 0; r < block.rows; ++r)
    for (std::int64_t j = 0; j < block.cols; ++j)
      if (p[r * block.ld + j] != 0.0f) return false;
  return true;
}

// B with the rows of finished sequences zeroed (VariableLengths::b_masked), copied by all
// threads, a share of the rows each, which then meet: the copy of B that the GEMM reads.
const float* mask_finished_b(const GemmStep& g, const float* b, float* masked, const std::int32_t* lengths, int tid,
                             int threads) {
  const auto [k0, k1] = share(g.k, tid, threads);
  for (std::int64_t kk = k0; kk < k1; ++kk) {
    float* row = masked + kk * g.ldb;
    if (row_past_end(lengths, g.finished.sequences, kk))
      std::memset(row, 0, static_cast<std::size_t>(g.n) * sizeof(float));
    else
      executor_util::copy_floats(row, b + kk * g.ldb, g.n);
  }
  if (threads > 1) ThreadTeam::instance().barrier();
  return masked;
}

}  // namespace

bool Executor::FinishedRows::all_past_end(std::int64_t r0, std::int64_t r1) const {
  for (std::int64_t r = r0; r < r1; ++r)
    if (!row_past_end(lengths, sequences, r)) return false;
  return true;
}

void Executor::gemm_step(const GemmStep& g, const Bindings& bind, float beta, int tid, int threads) const {
  const float* b = resolve(g.b, bind);
  const bool lengths = bind.lengths != nullptr;
  if (lengths && g.finished.k_rows_skipped && g.finished.b_masked.buffer != Buffer::none)
    b = mask_finished_b(g, b, resolve(g.finished.b_masked, bind), bind.lengths, tid, threads);
  GemmCall call{resolve(g.a, bind), b, resolve(g.c, bind), beta, g.m, g.k};
  const bool panels_from_before = g.a_panels_use == GemmStep::APanels::packed_before;
  const RowBlock& h0 = g.h0.block;
  if (h0.rows > 0 && (g.h0.last || !panels_from_before) && all_zeros(resolve(h0.at, bind), h0)) {
    call.k -= h0.rows;
    if (!g.h0.last) {  // the sum starts after them
      call.a += h0.rows * g.a_k_step();
      call.b += h0.rows * (g.blocking.packed_b ? g.blocking.panel_columns() : g.ldb);
    }
  }
  if (call.k == 0) {  // every term is zero
    if (beta == 0.0f) {
      const auto [r0, r1] = share(g.m, tid, threads);
      for (std::int64_t r = r0; r < r1; ++r)
        std::memset(call.c + r * g.ldc, 0, static_cast<std::size_t>(g.c_columns_written()) * sizeof(float));
    }
    return;
  }
  call.a_panels = resolve(g.a_panels, bind);
  if (lengths && g.finished.rows_skipped) call.finished = {bind.lengths, g.finished.sequences};
  if (g.blocking.generated()) gemm(g, call, tid, threads, /*shared=*/true);
  else blas_rows(g, call, threads);
}

void Executor::blas_gemm(const GemmStep& g, const GemmCall& call) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(call.rows), static_cast<int>(g.n), static_cast<int>(call.k), 1.0f, call.a,
              static_cast<int>(g.lda), call.b, static_cast<int>(g.ldb), call.beta, call.c, static_cast<int>(g.ldc));
}

void Executor::blas_rows(const GemmStep& g, const GemmCall& call, int threads) const {
  if (threads == 1) {
    blas_gemm(g, call);
    return;
  }
  const std::int64_t rows = blas_chunk_rows(call.rows, threads);
  const std::int64_t chunks = (call.rows + rows - 1) / rows;
  SharedLoop loop = ThreadTeam::instance().shared_loop(chunks, threads);
  for (std::int64_t u = loop.next(); u >= 0; u = loop.next()) {
    const std::int64_t r0 = u * rows;
    GemmCall chunk = call;
    chunk.rows = std::min(rows, call.rows - r0);
    chunk.a = call.a + r0 * g.a_row_step();
    chunk.c = call.c + r0 * g.ldc;
    blas_gemm(g, chunk);
  }
}

// Thread `tid`'s walk of a generated GEMM (Executor::gemm): the call's sizes in blocks, where
// A's panels, B's chunks and C's tiles lie, and the order in which this thread takes them.
struct Executor::GemmWalk {
  GemmWalk(const Executor& ex, const GemmStep& g, const GemmCall& call, int tid, int threads);
  void run(bool shared) const;

  // Packed A: one k block at a time in one place, or all of K (kept for or from another GEMM).
  float* a_block(std::int64_t kb) const {
    return g.a_panels_use == GemmStep::APanels::per_k_block ? call.a_panels : call.a_panels + a_panel_offset(k, g.m, kb);
  }
  // The k rows of block kb in each row block of A's panels: those the GEMM that packed them had,
  // which may be more than this call sums (GemmStep::h0).
  std::int64_t panel_k(std::int64_t kb) const {
    return std::min(k.k_c, (g.a_panels_use == GemmStep::APanels::packed_before ? g.k : call.k) - kb * k.k_c);
  }
  // Where k block kb of `part` of panel p of group grp of B starts.
  const float* b_chunk(std::int64_t kb, std::int64_t grp, std::int64_t p, const GemmBlocking::Part& part) const {
    if (!k.packed_b) return call.b + grp * k.group + part.c0 + kb * k.k_c * b_k;
    return call.b + k.packed_part_offset(grp * ppg + p, g.k, part.first) + kb * k.k_c * part.stride;
  }
  // A whole panel (a one-shot GEMM's unit).
  GemmBlocking::Part whole(std::int64_t p) const { return {p * pc, std::min(k.group, p * pc + pc), 0, pc}; }
  void tiles(std::int64_t kb, std::int64_t grp, std::int64_t p, const GemmBlocking::Part& part, std::int64_t rb0,
             const float* next_panel = nullptr) const;
  void shared_units(std::int64_t kb) const;
  void own_panels(std::int64_t kb) const;

  const Executor& ex;
  const GemmStep& g;
  const GemmCall& call;
  const GemmBlocking& k;
  const int tid, threads;
  std::int64_t groups = 0, ppg = 0, pc = 0, a_row = 0, a_k = 0, b_k = 0;
  std::int64_t k_blocks = 0, row_blocks = 0, rows_per_block = 0, m_blocks = 0, units = 0;
  std::int64_t p0 = 0, p1 = 0;  // split: this thread's panels of each group
};

Executor::GemmWalk::GemmWalk(const Executor& ex, const GemmStep& g, const GemmCall& call, int tid, int threads)
    : ex(ex), g(g), call(call), k(g.blocking), tid(tid), threads(threads) {
  groups = g.n / k.group, ppg = k.panels_per_group(), pc = k.panel_columns();
  a_row = g.a_row_step(), a_k = g.a_k_step();
  b_k = k.packed_b ? pc : g.ldb;
  k_blocks = (call.k + k.k_c - 1) / k.k_c, row_blocks = k.row_blocks(call.rows);
  rows_per_block = k.m_c > 0 ? k.m_c / k.m_r : row_blocks;
  m_blocks = (row_blocks + rows_per_block - 1) / rows_per_block, units = m_blocks * groups * ppg;
  std::tie(p0, p1) = k.thread_panels(tid);
}

// The m block of row blocks from rb0 times k block kb of `part` of panel p of group grp; with
// `next_panel` (that k block of another panel of packed B), each tile also prefetches its share
// of it (GemmBlocking::next_panel_lines).
void Executor::GemmWalk::tiles(std::int64_t kb, std::int64_t grp, std::int64_t p, const GemmBlocking::Part& part,
                               std::int64_t rb0, const float* next_panel) const {
  const std::int64_t k0 = kb * k.k_c, rb1 = std::min(row_blocks, rb0 + rows_per_block);
  const std::int64_t c0 = part.c0, width = part.c1 - part.c0;
  const bool use_beta = kb > 0 || call.beta != 0.0f;
  GemmArgs args{};
  args.b = b_chunk(kb, grp, p, part);
  args.k = std::min(k.k_c, call.k - k0);
  for (std::int64_t rb = rb0; rb < rb1; ++rb) {
    const std::int64_t r0 = rb * k.m_r;
    const bool row_tail = g.m - r0 < k.m_r;
    const std::int64_t r1 = row_tail ? g.m : r0 + k.m_r;
    if (call.finished.all(r0, r1)) {
      if (g.finished.rows_zero && !use_beta)  // the product is zero: C's tile is, too
        for (std::int64_t r = r0; r < r1; ++r)
          std::memset(call.c + r * g.ldc + grp * k.group + c0, 0, static_cast<std::size_t>(width) * sizeof(float));
      continue;
    }
    args.a = k.pack_a ? a_block(kb) + rb * panel_k(kb) * k.m_r : call.a + r0 * a_row + k0 * a_k;
    args.c = call.c + r0 * g.ldc + grp * k.group + c0;
    const CompiledKernel& kernel =
        *ex.kernels_[static_cast<std::size_t>(k.kernel(row_tail, width, part.stride, use_beta))];
    // Without a next panel the kernel's prefetches (if it has them) touch its own B again. A
    // late tile's share may lie past the panel, even past B: an address, never dereferenced.
    const std::int64_t lines = args.k / kernel.desc().unroll * kernel.desc().next_b_lines;
    args.next_b = next_panel ? reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(next_panel) +
                                                             static_cast<std::uintptr_t>((rb - rb0) * lines * 64))
                             : args.b;
    kernel(&args);
  }
}

// Shared: the threads claim (m block, panel) units of one k block as they go, and every tile of a
// k block is done before the next adds to it (a barrier, in run), so no two threads ever add into
// one tile at once. A unit's A (an m block of one k block, 3/8 of L2) then stays in L2 from one
// panel to the next beside B's chunk; a unit that ran every k block of its m block read K / k_c
// times as much A per panel, more than L2 held (DS2 dx, K = 3200: 1.5 MB of A and two 0.5 MB
// chunks of B), and each panel fetched its m block of A again from L3. Input gradients 2-5%
// faster (DS2 LSTM two layers bidirectional, LSTM I=H=1024 N=128), the sums of each C element in
// the same order as before.
void Executor::GemmWalk::shared_units(std::int64_t kb) const {
  SharedLoop loop = ThreadTeam::instance().shared_loop(units, threads);
  for (std::int64_t u = loop.next(); u >= 0; u = loop.next()) {
    const std::int64_t rb0 = u / (groups * ppg) * rows_per_block, q = u % (groups * ppg);
    // The unit this thread most likely claims next (the loop hands them out in turn).
    const std::int64_t next = u + threads, next_q = next % (groups * ppg);
    const bool prefetch = k.next_panel_lines > 0 && next < units;
    tiles(kb, q / ppg, q % ppg, whole(q % ppg), rb0,
          prefetch ? b_chunk(kb, next_q / ppg, next_q % ppg, whole(next_q % ppg)) : nullptr);
  }
}

// Split: this thread's panels (or parts of them) of every group, the (group, panel) pairs last to
// first where the call goes backwards, so that a recurrence's next step, going the other way,
// starts on the panels still in L2.
void Executor::GemmWalk::own_panels(std::int64_t kb) const {
  for (std::int64_t rb0 = 0; rb0 < row_blocks; rb0 += rows_per_block)
    for (std::int64_t i = 0; i < groups * (p1 - p0); ++i) {
      const auto [grp, p] = GemmBlocking::step_pair(i, groups, p1 - p0, p0, call.backwards);
      const float* next_panel = nullptr;
      if (k.next_panel_lines > 0 && i + 1 < groups * (p1 - p0)) {
        const auto [next_grp, next_p] = GemmBlocking::step_pair(i + 1, groups, p1 - p0, p0, call.backwards);
        next_panel = b_chunk(kb, next_grp, next_p, k.panel_part(tid, next_p));
      }
      tiles(kb, grp, p, k.panel_part(tid, p), rb0, next_panel);
    }
}

void Executor::GemmWalk::run(bool shared) const {
  ThreadTeam& team = ThreadTeam::instance();
  for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
    const std::int64_t k0 = kb * k.k_c, kn = std::min(k.k_c, call.k - k0);
    if ((shared || k.pack_a) && threads > 1 && kb > 0) team.barrier();  // the last k block's tiles are in
    if (k.pack_a && g.a_panels_use != GemmStep::APanels::packed_before) {
      // All threads copy a share of this k block's rows of A into its panels (unless the last
      // GEMM did).
      const auto pack = ex.plan_->isa == Isa::avx512 ? executor_util::pack_a_panels : executor_util::pack_a_panels_avx2;
      pack(a_block(kb), call.a + k0 * g.lda, g.lda, g.m, k.m_r, kn, kn * tid / threads, kn * (tid + 1) / threads);
      if (threads > 1) team.barrier();
    }
    if (shared) shared_units(kb);
    else own_panels(kb);
  }
  // Non-temporal stores are not ordered with the barrier's release store: fence them first.
  if (k.stream_c) _mm_sfence();
}

void Executor::gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared) const {
  if (g.blocking.int8) return int8_gemm(g, call, tid, threads, shared);
  if (g.blocking.bf16) return bf16_gemm(g, call, tid, threads, shared);
  // vmovntps faults otherwise
  assert(!g.blocking.stream_c || reinterpret_cast<std::uintptr_t>(call.c) % kRegionAlignment == 0);
  GemmWalk(*this, g, call, tid, threads).run(shared);
}

std::pair<std::int64_t, std::int64_t> Executor::gemm_columns(const GemmStep& g, int tid) const {
  if (g.blocking.generated()) return g.blocking.thread_columns(tid);
  return {0, tid == 0 ? g.n : 0};  // OpenBLAS: one thread computes everything
}

void Executor::step_gemm(const GemmStep& g, const Bindings& bind, std::int64_t step, std::int64_t rows,
                         const float* a, const float* b, float* c, int tid, int threads) const {
  GemmCall call{a, b, c, g.beta, rows, g.k};
  call.a_panels = resolve(g.a_panels, bind);
  call.backwards = step % 2 == 1;
  if (g.blocking.generated()) gemm(g, call, tid, threads);
  else if (tid == 0) blas_gemm(g, call);
}

void Executor::zero_product(const GemmStep& g, std::int64_t rows, float* c, int tid) const {
  assert(g.beta == 0.0f);
  const auto [c0, c1] = gemm_columns(g, tid);
  const std::int64_t group = g.blocking.generated() ? g.blocking.group : g.n;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t grp = 0; grp < g.n / group; ++grp)
      std::memset(c + r * g.ldc + grp * group + c0, 0, static_cast<std::size_t>(c1 - c0) * sizeof(float));
}

}  // namespace rnnjit
