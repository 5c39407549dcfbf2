#include "runtime/executor.hpp"

#include <cblas.h>
#include <immintrin.h>

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <string>

#include "codegen/kernel_args.hpp"
#include "kernels/dropout.hpp"
#include "runtime/blas_threads.hpp"
#include "runtime/log.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

std::string step_what(const Step& step) {
  return std::visit([](const auto& s) { return s.what; }, step);
}

// RNNJIT_PROFILE: one line per step (or stage of lanes at once) with its wall time.
void log_profile(const char* call, std::size_t stage, std::chrono::steady_clock::time_point start,
                 const std::string& what) {
  const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  log_line(fmt::format("profile {} stage {}: {:.3f} ms {}", call, stage, ms.count(), what));
}

// Whether a stage has a GEMM on OpenBLAS (every GEMM of non-AVX-512 plans; input projections
// with Options::projection_gemm).
bool runs_openblas(const Stage& stage) {
  for (const std::vector<Step>& lane : stage.lanes)
    for (const Step& step : lane)
      if (const auto* g = std::get_if<GemmStep>(&step); g && !g->blocking.generated()) return true;
  return false;
}

void copy_floats(float* dst, const float* src, std::int64_t count) {
  std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(float));
}

// The opmask of the first n of 16 lanes (all 16 for n >= 16).
__mmask16 first_lanes(std::int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1); }

// Copies rows [kk0, kk1) of a k block of A^T (kn rows of A, lda apart, from its first row)
// into the row-block panels [row block][kk][m_r] of that block: 32 rows at a time and within
// them panel by panel, so the 32 rows stay in L1 while every panel takes its m_r floats of
// each and each panel's writes stay sequential. 32, not 64: the DS2 LSTM's dG rows lie 12800
// bytes apart, so 64 of them fill 8 of L1's 64 sets 8 deep beside the panels' writes. One
// thread's pack of a 6000 x 3200 dG (m_r = 5, k blocks of 1638) took 29 ms at 64 rows and 15
// at 32 (a memcpy of it 11), of 6000 x 2400 16 -> 12 ms, of 6000 x 4096 30 -> 29, of narrower
// ones (768, 256 columns) the same within 5%; 16 rows were slower on the wide ones. A panel
// row is m_r <= 29 floats (GemmEmitter::max_rows(1)), too short for a memcpy call: two masked
// moves, their masks computed once a panel. Only generated GEMMs pack A, and only where the CPU
// has AVX-512.
__attribute__((target("avx512f"))) void pack_a_panels(float* panels, const float* a, std::int64_t lda,
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

// sum[0:width] += each of `rows` rows of src (ld apart), times the same row of factor where
// factor is not null. The sums live in L1 and the loop is bound by its loads and stores of
// them: add_rows_avx512 compiles it for AVX-512 (16 floats at once against the baseline's 4),
// which column sums take where the plan's ISA is AVX-512, as the GEMM packs do. (Not
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

// dst[0:pc] = src[0:width] then zeros (pc a multiple of 16, width <= pc), in masked 16-float
// moves: a B panel's rows are 16-240 floats, too short for a memcpy call and a fill each.
__attribute__((target("avx512f"))) void copy_panel_row(float* dst, const float* src, std::int64_t width,
                                                        std::int64_t pc) {
  for (std::int64_t j = 0; j < pc; j += 16)
    _mm512_storeu_ps(dst + j, _mm512_maskz_loadu_ps(first_lanes(std::max<std::int64_t>(width - j, 0)), src + j));
}

// In-register transpose of 16 rows of 16 floats: r[i][j] <- r[j][i]. Four shuffle stages
// (pairs of floats, of pairs, of 128-bit lanes, of 256-bit halves). GCC 12 takes the
// undefined pass-through operand inside its shuffle intrinsics for a read of uninitialised
// memory (GCC bug 105593); every r and t here is written before it is read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) void transpose_16x16(__m512 r[16]) {
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

// Variable lengths: whether batch row n is past its sequence at time t.
bool past_end(const std::int32_t* lengths, std::int64_t n, std::int64_t t) { return lengths && t >= lengths[n]; }

// The same for row r of a time-major layout of `sequences` rows a step: (t, n) = (r / N, r % N).
bool row_past_end(const std::int32_t* lengths, std::int64_t sequences, std::int64_t r) {
  return past_end(lengths, r % sequences, r / sequences);
}

// Whether every element of the block starting at p is zero.
bool all_zeros(const float* p, const RowBlock& block) {
  for (std::int64_t r = 0; r < block.rows; ++r)
    for (std::int64_t j = 0; j < block.cols; ++j)
      if (p[r * block.ld + j] != 0.0f) return false;
  return true;
}

// Variable lengths: the rows [0, live) of a batch of n hold every row still in its sequence at
// time t (live is 1 + the last such row). A recurrence's per-step GEMMs compute those rows only:
// with lengths sorted longest first (PyTorch's packed sequences, cuDNN's packed layout) they
// shrink as sequences end. Whatever the kernels then make of a finished row's stale GEMM rows
// is replaced by its carried state (forward) or carried gradients and zero gate gradients
// (backward) before anything reads it.
std::int64_t live_rows(const std::int32_t* lengths, std::int64_t n, std::int64_t t) {
  while (lengths && n > 0 && t >= lengths[n - 1]) --n;
  return n;
}


}  // namespace

bool Executor::FinishedRows::all_past_end(std::int64_t r0, std::int64_t r1) const {
  for (std::int64_t r = r0; r < r1; ++r)
    if (!row_past_end(lengths, sequences, r)) return false;
  return true;
}

Executor::Executor(std::shared_ptr<const Plan> plan, std::vector<std::shared_ptr<const CompiledKernel>> kernels)
    : plan_(std::move(plan)), kernels_(std::move(kernels)) {
  for (const KernelDesc& d : plan_->kernels) uses_amx_ = uses_amx_ || d.kind_of() == KernelKind::amx_gemm;
}

float* Executor::resolve(const Operand& o, const Bindings& b) const {
  if (o.buffer == Buffer::none) return nullptr;
  if (o.region >= 0) {
    const Region& r = plan_->workspace.regions[static_cast<std::size_t>(o.region)];
    std::byte* base = r.space == Space::reserve ? b.reserve : r.space == Space::packed ? b.packed : b.workspace;
    return reinterpret_cast<float*>(base + r.offset) + o.offset;
  }
  const float* p = b.buffers[static_cast<std::size_t>(o.buffer)];
  return p ? const_cast<float*>(p) + o.offset : nullptr;
}

std::byte* Executor::region_bytes(int region, const Bindings& b) const {
  const Region& r = plan_->workspace.regions[static_cast<std::size_t>(region)];
  return (r.space == Space::reserve ? b.reserve : r.space == Space::packed ? b.packed : b.workspace) + r.offset;
}

const char* Executor::call_name(const std::vector<Stage>& stages) const {
  if (&stages == &plan_->forward) return "forward";
  if (&stages == &plan_->backward_data) return "backward_data";
  if (&stages == &plan_->backward_weights) return "backward_weights";
  if (&stages == &plan_->pack_weights) return "pack_weights";
  return "stages";
}

void Executor::run(const std::vector<Stage>& stages, const Bindings& b, bool accumulate) const {
  ThreadTeam& team = ThreadTeam::instance();
  // AMX kernels leave their tiles in use; each thread hands the 8 KiB tile state back when its
  // part of a stage is done, so that it is not saved at every context switch in between (and
  // forgets which kernel configured them: the next stage may run after a kernel is freed).
  const bool amx = uses_amx_;
  const char* profile = profile_enabled() ? call_name(stages) : nullptr;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const int lanes = static_cast<int>(stage.lanes.size());
    // OpenBLAS on one thread while the lanes of a stage run at once (a core each), and in plans
    // split across threads, whose threads share each OpenBLAS GEMM by rows (Executor::blas_rows).
    // OpenBLAS's own workers would also poll for about 0.1 s after every call, on the cores the
    // next steps need.
    const BlasThreads blas(lanes > 1 || (plan_->threads > 1 && runs_openblas(stage)) ? 1 : 0);
    if (lanes == 1) {
      const StepProfile steps{profile, s};
      team.run(plan_->threads, [&](int tid) {
        run_lane(stage.lanes[0], b, accumulate, tid, plan_->threads, tid == 0 && profile ? &steps : nullptr);
        if (amx) release_amx_tiles();
      });
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    const int threads = std::min(lanes, plan_->threads);
    team.run(threads, [&](int tid) {
      for (int lane = tid; lane < lanes; lane += threads) run_lane(stage.lanes[static_cast<std::size_t>(lane)], b, accumulate, 0, 1);
      if (amx) release_amx_tiles();
    });
    if (profile) {
      std::string what;
      for (const std::vector<Step>& lane : stage.lanes)
        for (const Step& step : lane) what += (what.empty() ? "" : " | ") + step_what(step);
      log_profile(profile, s, start, fmt::format("{} lanes at once: {}", lanes, what));
    }
  }
}

void Executor::run_lane(const std::vector<Step>& lane, const Bindings& b, bool accumulate, int tid, int threads,
                        const StepProfile* profile) const {
  ThreadTeam& team = ThreadTeam::instance();
  for (const Step& step : lane) {
    const auto start = std::chrono::steady_clock::now();
    if (const auto* g = std::get_if<GemmStep>(&step)) {
      gemm_step(*g, b, accumulate && g->beta == 0.0f ? 1.0f : g->beta, tid, threads);
    } else if (const auto* c = std::get_if<CopyStep>(&step)) {
      copy(*c, b, tid, threads);
    } else if (const auto* m = std::get_if<MaskStep>(&step)) {
      mask(*m, b, tid, threads);
    } else if (const auto* d = std::get_if<DropoutStep>(&step)) {
      dropout(*d, b, tid, threads);
    } else if (const auto* s = std::get_if<ColumnSumStep>(&step)) {
      column_sum(*s, b, accumulate && s->beta == 0.0f ? 1.0f : s->beta, tid, threads);
    } else if (const auto* rec = std::get_if<RecurrenceStep>(&step)) {
      if (rec->pass == Pass::forward) forward_recurrence(*rec, b, tid, threads);
      else backward_recurrence(*rec, b, tid, threads);
    } else if (const auto* p = std::get_if<PackStep>(&step)) {
      pack(*p, b, tid, threads);
    }
    if (threads > 1) team.barrier();
    if (profile) log_profile(profile->call, profile->stage, start, step_what(step));
  }
}

void Executor::gemm_step(const GemmStep& g, const Bindings& bind, float beta, int tid, int threads) const {
  const float* b = resolve(g.b, bind);
  const bool lengths = bind.lengths != nullptr;
  if (lengths && g.finished_k_rows_skipped && g.b_masked.buffer != Buffer::none) {
    // B with the rows of finished sequences zeroed, shared by rows among the threads.
    float* masked = resolve(g.b_masked, bind);
    const auto [k0, k1] = share(g.k, tid, threads);
    for (std::int64_t kk = k0; kk < k1; ++kk) {
      float* row = masked + kk * g.ldb;
      if (row_past_end(bind.lengths, g.sequences, kk))
        std::memset(row, 0, static_cast<std::size_t>(g.n) * sizeof(float));
      else
        copy_floats(row, b + kk * g.ldb, g.n);
    }
    if (threads > 1) ThreadTeam::instance().barrier();
    b = masked;
  }
  GemmCall call{resolve(g.a, bind), b, resolve(g.c, bind), beta, g.m, g.k};
  const bool panels_from_before = g.a_panels_use == GemmStep::APanels::packed_before;
  if (g.h0.rows > 0 && (g.h0_rows_last || !panels_from_before) && all_zeros(resolve(g.h0.at, bind), g.h0)) {
    call.k -= g.h0.rows;
    if (!g.h0_rows_last) {  // the sum starts after them
      call.a += g.h0.rows * g.a_k_step();
      call.b += g.h0.rows * (g.blocking.packed_b ? g.blocking.panel_columns() : g.ldb);
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
  if (lengths && g.finished_rows_skipped) call.finished = {bind.lengths, g.sequences};
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
      copy_floats(row, x ? x : y, c.cols);
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

void Executor::gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared) const {
  const float* const a = call.a;
  const float* const b = call.b;
  float* const c = call.c;
  float* const a_panels = call.a_panels;
  const float beta = call.beta;
  const GemmBlocking& k = g.blocking;
  if (k.bf16) return bf16_gemm(g, call, tid, threads, shared);
  assert(!k.stream_c || reinterpret_cast<std::uintptr_t>(c) % kRegionAlignment == 0);  // vmovntps faults otherwise
  const std::int64_t groups = g.n / k.group, ppg = k.panels_per_group(), pc = k.panel_columns();
  const std::int64_t a_row = g.a_row_step(), a_k = g.a_k_step();
  const std::int64_t b_k = k.packed_b ? pc : g.ldb;
  const std::int64_t k_blocks = (call.k + k.k_c - 1) / k.k_c, row_blocks = k.row_blocks(call.rows);
  const std::int64_t rows_per_block = k.m_c > 0 ? k.m_c / k.m_r : row_blocks;
  // Packed A: one k block at a time in one place, or all of K (kept for or from another GEMM).
  auto a_block = [&](std::int64_t kb) {
    return g.a_panels_use == GemmStep::APanels::per_k_block ? a_panels : a_panels + a_panel_offset(k, g.m, kb);
  };
  // The k rows of block kb in each row block of A's panels: those the GEMM that packed them had,
  // which may be more than this call sums (GemmStep::h0).
  auto panel_k = [&](std::int64_t kb) {
    return std::min(k.k_c, (g.a_panels_use == GemmStep::APanels::packed_before ? g.k : call.k) - kb * k.k_c);
  };
  // Where k block kb of `part` of panel p of group grp of B starts.
  auto b_chunk = [&](std::int64_t kb, std::int64_t grp, std::int64_t p, const GemmBlocking::Part& part) {
    if (!k.packed_b) return b + grp * k.group + part.c0 + kb * k.k_c * b_k;
    return b + k.packed_part_offset(grp * ppg + p, g.k, part.first) + kb * k.k_c * part.stride;
  };
  // A whole panel (a one-shot GEMM's unit).
  auto whole = [&](std::int64_t p) { return GemmBlocking::Part{p * pc, std::min(k.group, p * pc + pc), 0, pc}; };
  // The m block of row blocks from rb0 times k block kb of `part` of panel p of group grp; with
  // `next_panel` (that k block of another panel of packed B), each tile also prefetches its
  // share of it (GemmBlocking::next_panel_lines).
  auto tiles = [&](std::int64_t kb, std::int64_t grp, std::int64_t p, const GemmBlocking::Part& part,
                   std::int64_t rb0, const float* next_panel = nullptr) {
    const std::int64_t k0 = kb * k.k_c, rb1 = std::min(row_blocks, rb0 + rows_per_block);
    const std::int64_t c0 = part.c0, width = part.c1 - part.c0;
    const bool use_beta = kb > 0 || beta != 0.0f;
    GemmArgs args{};
    args.b = b_chunk(kb, grp, p, part);
    args.k = std::min(k.k_c, call.k - k0);
    for (std::int64_t rb = rb0; rb < rb1; ++rb) {
      const std::int64_t r0 = rb * k.m_r;
      const bool row_tail = g.m - r0 < k.m_r;
      const std::int64_t r1 = row_tail ? g.m : r0 + k.m_r;
      if (call.finished.all(r0, r1)) {
        if (g.finished_rows_zero && !use_beta)  // the product is zero: C's tile is, too
          for (std::int64_t r = r0; r < r1; ++r)
            std::memset(c + r * g.ldc + grp * k.group + c0, 0, static_cast<std::size_t>(width) * sizeof(float));
        continue;
      }
      args.a = k.pack_a ? a_block(kb) + rb * panel_k(kb) * k.m_r : a + r0 * a_row + k0 * a_k;
      args.c = c + r0 * g.ldc + grp * k.group + c0;
      const CompiledKernel& kernel = *kernels_[static_cast<std::size_t>(k.kernel(row_tail, width, part.stride, use_beta))];
      // Without a next panel the kernel's prefetches (if it has them) touch its own B again. A
      // late tile's share may lie past the panel, even past B: an address, never dereferenced.
      const std::int64_t lines = args.k / kernel.desc().unroll * kernel.desc().next_b_lines;
      args.next_b = next_panel ? reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(next_panel) +
                                                               static_cast<std::uintptr_t>((rb - rb0) * lines * 64))
                               : args.b;
      kernel(&args);
    }
  };
  // Shared: the threads claim (m block, panel) units of one k block as they go, and every tile
  // of a k block is done before the next adds to it (a barrier), so no two threads ever add
  // into one tile at once. A unit's A (an m block of one k block, 3/8 of L2) then stays in L2
  // from one panel to the next beside B's chunk; a unit that ran every k block of its m block
  // read K / k_c times as much A per panel, more than L2 held (DS2 dx, K = 3200: 1.5 MB of A
  // and two 0.5 MB chunks of B), and each panel fetched its m block of A again from L3. Input
  // gradients 2-5% faster (DS2 LSTM two layers bidirectional, LSTM I=H=1024 N=128), the sums
  // of each C element in the same order as before.
  const std::int64_t m_blocks = (row_blocks + rows_per_block - 1) / rows_per_block, units = m_blocks * groups * ppg;
  ThreadTeam& team = ThreadTeam::instance();
  const auto [p0, p1] = k.thread_panels(tid);  // split: this thread's panels of each group
  for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
    const std::int64_t k0 = kb * k.k_c, kn = std::min(k.k_c, call.k - k0);
    if ((shared || k.pack_a) && threads > 1 && kb > 0) team.barrier();  // the last k block's tiles are in
    if (k.pack_a && g.a_panels_use != GemmStep::APanels::packed_before) {
      // All threads copy a share of this k block's rows of A into its panels (unless the last
      // GEMM did).
      pack_a_panels(a_block(kb), a + k0 * g.lda, g.lda, g.m, k.m_r, kn, kn * tid / threads, kn * (tid + 1) / threads);
      if (threads > 1) team.barrier();
    }
    if (shared) {
      SharedLoop loop = team.shared_loop(units, threads);
      for (std::int64_t u = loop.next(); u >= 0; u = loop.next()) {
        const std::int64_t rb0 = u / (groups * ppg) * rows_per_block, q = u % (groups * ppg);
        // The unit this thread most likely claims next (the loop hands them out in turn).
        const std::int64_t next = u + threads, next_q = next % (groups * ppg);
        const bool prefetch = k.next_panel_lines > 0 && next < units;
        tiles(kb, q / ppg, q % ppg, whole(q % ppg), rb0,
              prefetch ? b_chunk(kb, next_q / ppg, next_q % ppg, whole(next_q % ppg)) : nullptr);
      }
      continue;
    }
    // Split: this thread's panels (or parts of them) of every group, the (group, panel) pairs
    // last to first where the call goes backwards, so that a recurrence's next step, going the
    // other way, starts on the panels still in L2.
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
  // Non-temporal stores are not ordered with the barrier's release store: fence them first.
  if (k.stream_c) _mm_sfence();
}

void Executor::pack(const PackStep& p, const Bindings& b, int tid, int threads) const {
  const float* w = resolve(p.src, b);
  float* out = resolve(p.dst, b);
  const GemmBlocking& k = p.blocking;
  if (k.bf16) return pack_bf16(p, w, out, tid, threads);
  const std::int64_t ppg = k.panels_per_group(), pc = k.panel_columns(), panels = p.groups * ppg;
  if (!p.transpose) {
    // dst[kk][c] = B[kk][column c]: row by row of B, each row read once and in order, its
    // pieces written to every panel (a panel at a time would read B in column strips, a new
    // page at every row).
    // Variable lengths: the rows of finished sequences are packed as zeros (width 0).
    const auto [k0, k1] = share(p.k, tid, threads);
    for (std::int64_t kk = k0; kk < k1; ++kk) {
      const bool finished = p.sequences > 0 && row_past_end(b.lengths, p.sequences, kk);
      for (std::int64_t q = 0; q < panels; ++q) {
        const std::int64_t grp = q / ppg, col0 = (q % ppg) * pc;
        for (std::int64_t first = 0, end; first < pc; first = end) {  // each part of the panel
          end = k.part_end(q % ppg, first);
          copy_panel_row(out + k.packed_part_offset(q, p.k, first) + kk * (end - first),
                         w + kk * p.ld + grp * k.group + col0 + first,
                         finished ? 0 : std::clamp<std::int64_t>(k.group - col0 - first, 0, end - first), end - first);
        }
      }
    }
    return;
  }
  // dst[kk][c] = W[column c][kk]: a panel (each part of it) reads its whole rows of W.
  const auto [q0, q1] = share(panels, tid, threads);
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t grp = q / ppg, col0 = (q % ppg) * pc;
    for (std::int64_t first = 0, end; first < pc; first = end) {
      end = k.part_end(q % ppg, first);
      pack_transposed_panel(out + k.packed_part_offset(q, p.k, first), w + (grp * k.group + col0 + first) * p.k, p.k,
                            std::clamp<std::int64_t>(k.group - col0 - first, 0, end - first), end - first);
    }
  }
}

Executor::GateShare Executor::gate_share(const RecurrenceStep& r, int tid, int part) const {
  const bool generated = r.gemm.blocking.generated();
  const auto i = static_cast<std::size_t>(generated ? tid : 0);
  const int index = (part ? r.thread_kernels_n : r.thread_kernels)[i];
  const CompiledKernel* kernel = index >= 0 ? kernels_[static_cast<std::size_t>(index)].get() : nullptr;
  return {kernel, (part ? r.thread_units_n : r.thread_units)[i], kernel ? std::int64_t{kernel->desc().cols} : 0};
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

float* Executor::timed(const Timed& t, std::int64_t time, const Bindings& b, std::int64_t col) const {
  float* base = resolve(t.base, b);
  return base ? base + time * t.t_stride + col : nullptr;
}

// Variable lengths: a row past its length carries its state, so it copies h (and c) from the
// previous step over what the kernel computed; an LSTM state updated in place is saved first.
// GRU with the reset before: the r,z GEMM and kernels, a barrier, then n's GEMM on r * h_prev
// and the n kernels, which write h (so their units are the ones a thread carries).
void Executor::forward_recurrence(const RecurrenceStep& r, const Bindings& b, int tid, int threads) const {
  const bool generated = r.gemm.blocking.generated();
  if (!generated && tid != 0) return;  // OpenBLAS plans run a recurrence on one thread
  const auto [kernel, col0, cols] = gate_share(r, tid);
  auto at = [&](const Timed& t, std::int64_t time, std::int64_t col) { return timed(t, time, b, col); };
  const bool projected = r.projection.n > 0, reset_before = r.gemm_n.n > 0;
  const GateShare n_share = reset_before ? gate_share(r, tid, 1) : GateShare{nullptr, 0, 0};
  const auto [h0, h1] = projected      ? gemm_columns(r.projection, tid)
                        : reset_before ? std::pair{n_share.col0, n_share.col0 + n_share.cols}
                                       : std::pair{col0, col0 + cols};
  float* const z = resolve(r.z, b);
  float* const gh_n = resolve(r.gemm_n.c, b);
  const float* const w_hn = resolve(r.gemm_n.b, b);
  const std::int64_t N = r.batch, H = kernel ? kernel->desc().hidden : 0, ldh = r.ld_state;
  const std::int32_t* const lengths = b.lengths ? b.lengths + r.batch_begin : nullptr;
  const bool c_in_place = r.c.t_stride == 0;  // inference: one c buffer updated in place
  float* const save = resolve(r.carry_save, b);
  float* const gh = resolve(r.gh, b);
  float* const h_init = resolve(r.h_init, b);
  float* const c_init = resolve(r.c_init, b);
  const float* const w_hh = resolve(r.gemm.b, b);
  const float* const w_hr = resolve(r.projection.b, b);
  const float* const bias_ih = resolve(r.bias_ih, b);
  const float* const bias_hh = resolve(r.bias_hh, b);
  const float* const peephole = resolve(r.peephole, b);
  const std::int64_t T = r.steps;
  // No hx: h_init is zeros, and so are the first step's products h_prev W_hh^T (and, with the
  // reset before, (r * h_prev) W_hn^T): written as zeros, not multiplied (at T=1, half of an
  // I=H layer's FLOPs).
  const bool starts_at_zero = r.hx.buffer == Buffer::hx && resolve(r.hx, b) == nullptr;
  // Variable lengths: a finished row's kernel outputs that a weight gradient reads (r * h_prev
  // for dW_hn, o * tanh(c) for dW_hr) are zeroed: its GEMM rows were skipped, so they may be
  // anything, NaN included, and its zero gate gradient times NaN would be NaN.
  auto zero_finished = [&](std::int64_t t, float* at_col0, std::int64_t ld, std::int64_t width) {
    for (std::int64_t n = 0; n < N && lengths; ++n)
      if (past_end(lengths, n, t)) std::memset(at_col0 + n * ld, 0, static_cast<std::size_t>(width) * sizeof(float));
  };
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = r.reverse ? T - 1 - s : s, prev = r.reverse ? t + 1 : t - 1;
    const float* h_prev = s == 0 ? h_init : at(r.h, prev, 0);
    float* const h_out = at(r.h, t, 0);
    float* const reset_h = reset_before ? at(r.reset_h, t, 0) : nullptr;
    const std::int64_t live = live_rows(lengths, N, t);
    // What every gate kernel of this step reads or writes, from hidden unit c0 on.
    auto step_args = [&](std::int64_t c0) {
      GateForwardArgs a{};
      a.gx = at(r.gx, t, c0);
      a.gh = gh + c0;
      a.bias_ih = bias_ih + c0;
      a.bias_hh = bias_hh + c0;
      a.h_prev = h_prev + c0;
      a.gates = at(r.gates, t, c0);
      return a;
    };
    const bool h_prev_is_zero = s == 0 && starts_at_zero;
    if (h_prev_is_zero) zero_product(r.gemm, live, gh, tid);
    else step_gemm(r.gemm, b, s, live, h_prev, w_hh, gh, tid, threads);
    if (kernel && reset_before) {
      GateForwardArgs args = step_args(col0);
      args.h_out = reset_h + col0;  // r * h_prev
      args.c_out = z + col0;
      (*kernel)(&args);
      zero_finished(t, args.h_out, ldh, cols);
    }
    if (reset_before) {
      if (threads > 1) ThreadTeam::instance().barrier();  // every unit's r * h_prev is in
      if (h_prev_is_zero) zero_product(r.gemm_n, live, gh_n, tid);
      else step_gemm(r.gemm_n, b, s, live, reset_h, w_hn, gh_n, tid, threads);
      if (n_share.kernel) {
        GateForwardArgs args = step_args(n_share.col0);
        args.c_prev = z + n_share.col0;
        args.h_out = h_out + n_share.col0;
        (*n_share.kernel)(&args);
      }
    } else if (kernel) {
      GateForwardArgs args = step_args(col0);
      args.c_prev = c_init ? (s == 0 ? c_init : at(r.c, prev, 0)) + col0 : nullptr;
      args.h_out = projected ? at(r.cell_out, t, col0) : h_out + col0;
      args.c_out = at(r.c, t, col0);
      args.peephole = peephole ? peephole + col0 : nullptr;
      if (lengths && args.c_out && c_in_place)
        for (std::int64_t n = 0; n < N; ++n)
          if (past_end(lengths, n, t)) copy_floats(save + n * 2 * H + col0, args.c_out + n * H, cols);
      (*kernel)(&args);
      for (std::int64_t n = 0; n < N && lengths && args.c_out; ++n)
        if (past_end(lengths, n, t))
          copy_floats(args.c_out + n * H, c_in_place ? save + n * 2 * H + col0 : args.c_prev + n * H, cols);
      if (projected) zero_finished(t, args.h_out, H, cols);
    }
    if (projected) {  // h = (o * tanh(c)) W_hr^T once every thread's units are in
      if (threads > 1) ThreadTeam::instance().barrier();
      step_gemm(r.projection, b, s, live, at(r.cell_out, t, 0), w_hr, h_out, tid, threads);
    }
    for (std::int64_t n = 0; n < N && lengths; ++n)
      if (past_end(lengths, n, t)) copy_floats(h_out + n * ldh + h0, h_prev + n * ldh + h0, h1 - h0);
    if (threads > 1) ThreadTeam::instance().barrier();
  }
}

// Variable lengths: a row past its length passes the carried gradients through unchanged and
// gets no gate gradient (its forward step only copied the state).
void Executor::backward_recurrence(const RecurrenceStep& r, const Bindings& b, int tid, int threads) const {
  const bool generated = r.gemm.blocking.generated();
  if (!generated && tid != 0) return;  // OpenBLAS plans run a recurrence on one thread
  const auto [kernel, col0, cols] = gate_share(r, tid);
  auto at = [&](const Timed& t, std::int64_t time, std::int64_t col) { return timed(t, time, b, col); };
  const bool projected = r.projection_grad.n > 0, reset_before = r.gemm_n.n > 0;
  const GateShare n_share = reset_before ? gate_share(r, tid, 1) : GateShare{nullptr, 0, 0};
  // The columns of dh_carry this thread writes (recurrent GEMM) and so carries or combines.
  const auto [h0, h1] = projected || reset_before ? gemm_columns(r.gemm, tid) : std::pair{col0, col0 + cols};
  const KernelDesc& desc = plan_->kernels[static_cast<std::size_t>(r.kernel)];
  const std::int64_t N = r.batch, H = desc.hidden, S = r.state, R = desc.reserve_gates() * H;
  const std::int32_t* const lengths = b.lengths ? b.lengths + r.batch_begin : nullptr;
  float* const save = resolve(r.carry_save, b);
  float* const h_init = resolve(r.h_init, b);
  float* const c_init = resolve(r.c_init, b);
  float* const dh_carry = resolve(r.dh_carry, b);
  float* const dc_carry = resolve(r.dc_carry, b);
  float* const dcell = resolve(r.dcell, b);
  float* const zeros = resolve(r.zeros, b);
  const float* const w_hh = resolve(r.gemm.b, b);
  const float* const w_hr = resolve(r.projection_grad.b, b);
  const float* const peephole = resolve(r.peephole, b);
  float* const d_reset_h = resolve(r.d_reset_h, b);
  const float* const w_hn = resolve(r.gemm_n.b, b);
  const std::int64_t T = r.steps;
  // The last step's product dh_carry += dgates W_hh is dh_prev of the first forward step: dhx,
  // nothing else. Without dhx in the call it is not computed.
  const bool wants_dhx = r.dhx.buffer != Buffer::dhx || resolve(r.dhx, b) != nullptr;
  GateBackwardArgs args{};
  // Variable lengths: no gate gradient for a row past its length (after the step's last kernel).
  auto zero_past_end = [&](std::int64_t t, float* gates_at_col0, std::int64_t width) {
    for (std::int64_t n = 0; n < N && lengths; ++n)
      if (past_end(lengths, n, t))
        for (std::int64_t g = 0; g < desc.reserve_gates(); ++g)
          std::memset(gates_at_col0 + n * R + g * H, 0, static_cast<std::size_t>(width) * sizeof(float));
  };
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = r.reverse ? s : T - 1 - s, prev = r.reverse ? t + 1 : t - 1;
    const bool first = r.reverse ? t == T - 1 : t == 0;  // the first step of the forward pass
    float* gates = at(r.gates, t, 0);
    const std::int64_t live = live_rows(lengths, N, t);
    for (std::int64_t n = 0; n < N && lengths; ++n)
      if (past_end(lengths, n, t)) copy_floats(save + n * 2 * H + h0, dh_carry + n * S + h0, h1 - h0);
    if (projected) {
      // dh_proj = dh_carry + dy (zero past a row's length), then dcell = dh_proj W_hr.
      float* const dhp = at(r.dh_proj, t, 0);
      const float* const dy = at(r.dy, t, 0);
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t j = h0; j < h1; ++j)
          dhp[n * S + j] = past_end(lengths, n, t) ? 0.0f : dh_carry[n * S + j] + dy[n * r.ld_dy + j];
      if (threads > 1) ThreadTeam::instance().barrier();
      step_gemm(r.projection_grad, b, s, live, dhp, w_hr, dcell, tid, threads);
    }
    if (kernel) {
      args.dy = projected ? dcell + col0 : at(r.dy, t, col0);
      args.h = at(r.h, t, col0);
      args.h_prev = (first ? h_init : at(r.h, prev, 0)) + col0;
      args.c = at(r.c, t, col0);
      args.c_prev = c_init ? (first ? c_init : at(r.c, prev, 0)) + col0 : nullptr;
      args.gates = gates + col0;
      args.dh_carry = (projected ? zeros : dh_carry) + col0;
      args.dc_carry = dc_carry ? dc_carry + col0 : nullptr;
      args.peephole = peephole ? peephole + col0 : nullptr;
      for (std::int64_t n = 0; n < N && lengths && args.dc_carry; ++n)
        if (past_end(lengths, n, t)) copy_floats(save + n * 2 * H + H + col0, args.dc_carry + n * H, cols);
      (*kernel)(&args);
      for (std::int64_t n = 0; n < N && lengths && args.dc_carry; ++n)
        if (past_end(lengths, n, t)) copy_floats(args.dc_carry + n * H, save + n * 2 * H + H + col0, cols);
      if (!reset_before) zero_past_end(t, args.gates, cols);
    }
    if (reset_before) {
      // d(r * h_prev) = dn W_hn once every dn is in, then dr and its share of dh_{t-1} (both
      // parts split like gemm_n, so each thread reads the d(r * h_prev) columns it computed).
      if (threads > 1) ThreadTeam::instance().barrier();
      step_gemm(r.gemm_n, b, s, live, gates + 2 * H, w_hn, d_reset_h, tid, threads);
      if (n_share.kernel) {
        const std::int64_t c0 = n_share.col0;
        args = {};
        args.d_reset_h = d_reset_h + c0;
        args.h_prev = (first ? h_init : at(r.h, prev, 0)) + c0;
        args.gates = gates + c0;
        args.dh_carry = dh_carry + c0;
        (*n_share.kernel)(&args);
        zero_past_end(t, gates + c0, n_share.cols);
      }
    }
    if (threads > 1) ThreadTeam::instance().barrier();  // every thread's gate gradients are in
    if (s + 1 < T || wants_dhx) step_gemm(r.gemm, b, s, live, gates, w_hh, dh_carry, tid, threads);
    for (std::int64_t n = 0; n < N && lengths; ++n)
      if (past_end(lengths, n, t)) copy_floats(dh_carry + n * S + h0, save + n * 2 * H + h0, h1 - h0);
  }
}

}  // namespace rnnjit
