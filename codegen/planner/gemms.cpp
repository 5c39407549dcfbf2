// GEMM planning: the tiling of each generated GEMM and the microkernels it needs
// (plan_generated_gemm), and the planner's ways of asking for one: with its plain B packed into
// panels first, on weights packed once for every call, or on OpenBLAS.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/int8_unit.hpp"
#include "codegen/planner/planner_impl.hpp"

namespace rnnjit {
namespace {

// Plain B operands with fewer rows than this are read in place rather than packed.
constexpr std::int64_t kMinPackedK = 64;

// Whether a transposed A (a weight gradient's gate gradients) is copied, a k block at a time,
// into panels the tiles stream (GemmBlocking::pack_a) rather than read in place: on cores with
// two 512-bit FMAs a cycle the in-place loads (a new 4 KiB page every k step or two) stall the
// FMAs; at half that rate they hide behind them where a k block of A's rows stays within the
// TLB's reach. Measurements: docs/perf-notes.md, "Planner thresholds".
bool copies_transposed_a(const GemmStep& g, std::int64_t k_c, const CacheSizes& caches) {
  if (!g.trans_a) return false;
  return caches.zmm_fmas_per_cycle > 1 || k_c * g.lda * static_cast<std::int64_t>(sizeof(float)) > caches.tlb_reach;
}

// Whether a one-shot GEMM writes C with non-temporal stores. A C larger than its threads' L2 (an
// input projection's gates for all steps) is read back only once the other tiles have pushed it
// out, so ordinary stores first read every line of it in for ownership: streaming them saves
// that read (LSTM I=H=512 T=50 inference, N=16..128: 2-4% faster). They need C overwritten in one
// pass (beta 0, one k block) and every tile row 64-byte aligned: C in a workspace or reserve
// region (those are), at an offset, row stride and group width of whole vectors.
bool streams_c(const GemmStep& g, const GemmBlocking& b, const CacheSizes& caches) {
  const double min_bytes = static_cast<double>(caches.l2) * b.threads;
  const bool aligned = g.c.offset % 16 == 0 && g.ldc % 16 == 0 && (b.group % 16 == 0 || g.c_whole_vectors);
  return (g.c.buffer == Buffer::workspace || g.c.buffer == Buffer::reserve) && aligned && g.beta == 0.0f &&
         b.k_c >= g.k && 4.0 * static_cast<double>(g.m * g.n) >= min_bytes;
}

// One microkernel of g: `width` columns of panels `stride` apart, the tail rows or m_r, beta 0 or 1.
template <typename Fill>
int add_gemm_kernel(const GemmStep& g, KernelKind kind, std::vector<KernelDesc>& kernels, std::int64_t width,
                    std::int64_t stride, int row_tail, int beta, Fill fill) {
  const GemmBlocking& b = g.blocking;
  KernelDesc d;
  d.kind = static_cast<std::uint8_t>(kind);
  d.isa = static_cast<std::uint8_t>(Isa::avx512);
  d.beta = static_cast<std::uint8_t>(beta);
  d.vectors = static_cast<std::uint8_t>((width + 15) / 16);
  d.n_tail = static_cast<std::uint8_t>(g.c_whole_vectors && kind == KernelKind::gemm ? 0 : width % 16);
  d.rows = static_cast<std::uint32_t>(row_tail ? g.m % b.m_r : b.m_r);
  d.b_lookahead = static_cast<std::uint32_t>(b.b_lookahead);
  d.c_row_stride = static_cast<std::uint32_t>(g.ldc);
  fill(d);
  if (b.packed_b && stride != b.panel_columns()) d.b_k_stride = static_cast<std::uint32_t>(stride);
  return planner::append_kernel(kernels, d);
}

// The parts of panels that the threads' boundaries cut (vector_split), one entry per width and stride.
void collect_part_kernels(GemmBlocking& b) {
  b.part_kernels.clear();
  if (!b.vector_split) return;
  for (int tid = 0; tid < b.threads; ++tid) {
    const auto [p0, p1] = b.thread_panels(tid);
    for (std::int64_t p = p0; p < p1; ++p) {
      const GemmBlocking::Part part = b.panel_part(tid, p);
      const std::int64_t width = part.c1 - part.c0;
      const bool known = std::any_of(b.part_kernels.begin(), b.part_kernels.end(), [&](const auto& k) {
        return k.width == width && k.stride == part.stride;
      });
      if (part.stride != b.panel_columns() && !known) b.part_kernels.push_back({width, part.stride});
    }
  }
}

// Registers g's kernels: one per row tail (g.m % m_r rows), width (a whole panel, the narrower
// last panel of a group, a part of a panel that the threads' boundaries cut) and beta, where
// that case occurs; `fill` sets the fields particular to the engine.
template <typename Fill>
void add_gemm_kernels(GemmStep& g, std::int64_t group, KernelKind kind, std::vector<KernelDesc>& kernels, Fill fill) {
  GemmBlocking& b = g.blocking;
  const std::int64_t tail_rows = g.m % b.m_r;
  const std::int64_t last_width = group - (b.panels_per_group() - 1) * b.panel_columns();
  collect_part_kernels(b);
  for (int row_tail = 0; row_tail < 2; ++row_tail)
    for (int beta = 0; beta < 2; ++beta) {
      if (row_tail && tail_rows == 0) continue;
      for (int col_tail = 0; col_tail < 2; ++col_tail)
        if (!col_tail || last_width != b.panel_columns())
          b.kernels[row_tail][col_tail][beta] = add_gemm_kernel(
              g, kind, kernels, col_tail ? last_width : b.panel_columns(), b.panel_columns(), row_tail, beta, fill);
      for (GemmBlocking::PartKernels& part : b.part_kernels)
        part.kernels[row_tail][beta] = add_gemm_kernel(g, kind, kernels, part.width, part.stride, row_tail, beta, fill);
    }
}

// A bf16 GEMM (GemmBlocking::bf16): its blocking and a kernel per row tail, column tail and
// beta. B must be packed; op(A) is rounded into bf16 rows whether A is transposed or not.
GemmStep plan_bf16_gemm(GemmStep g, std::int64_t group, int threads, std::vector<KernelDesc>& kernels, bool shared,
                        const CacheSizes& caches) {
  if (!g.blocking.packed_b) throw Error(fmt::format("gemm '{}': bf16 runs only on a packed B", g.what));
  GemmBlocking& b = g.blocking;
  const Bf16Unit unit = b.bf16_unit;
  b = choose_bf16_blocking(g.m, g.k, group, threads, caches, shared, unit);
  const KernelKind kind = unit == Bf16Unit::amx ? KernelKind::amx_gemm : KernelKind::dpbf16_gemm;
  add_gemm_kernels(g, group, kind, kernels, [&](KernelDesc& d) {
    d.a_row_stride = static_cast<std::uint32_t>(bf16_k(g.k));
    d.b_k_stride = static_cast<std::uint32_t>(b.n_r);  // a narrow last panel keeps the layout's n_r tiles
    d.a_lookahead = static_cast<std::uint8_t>(b.a_lookahead);
  });
  return g;
}

// An int8 GEMM (GemmBlocking::int8): its blocking and a kernel per row tail, column tail and
// beta. B must be packed W^T (quantized as it is packed); op(A) is quantized into uint8 rows.
// The kernels' isa is the unit's (int8_kernel_isa), whatever the plan's.
GemmStep plan_int8_gemm(GemmStep g, std::int64_t group, int threads, std::vector<KernelDesc>& kernels, bool shared,
                        const CacheSizes& caches) {
  if (!g.blocking.packed_b || g.trans_a)
    throw Error(fmt::format("gemm '{}': int8 runs only on packed weights and an untransposed A", g.what));
  GemmBlocking& b = g.blocking;
  b = choose_int8_blocking(g.m, g.k, group, threads, caches, shared, b.int8_unit);
  const KernelKind kind = b.int8_unit == Int8Unit::amx ? KernelKind::amx_int8_gemm : KernelKind::vnni_gemm;
  add_gemm_kernels(g, group, kind, kernels, [&](KernelDesc& d) {
    d.isa = static_cast<std::uint8_t>(int8_kernel_isa(b.int8_unit));  // ymm kernels for the AVX2 units
    if (kind == KernelKind::vnni_gemm) d.int8_unit = static_cast<std::uint8_t>(b.int8_unit);
    d.a_row_stride = static_cast<std::uint32_t>(int8_k(g.k));
    d.b_k_stride = static_cast<std::uint32_t>(b.n_r);  // a narrow last panel keeps the layout's n_r tiles
    d.a_lookahead = static_cast<std::uint8_t>(b.a_lookahead);
  });
  return g;
}

}  // namespace

GemmStep plan_generated_gemm(GemmStep g, std::int64_t group, int threads, std::vector<KernelDesc>& kernels,
                             bool recurrent, const CacheSizes& caches, Isa isa) {
  if (group < 1 || g.n % group != 0)
    throw Error(fmt::format("gemm '{}': {} columns do not split into groups of {}", g.what, g.n, group));
  if (g.c_whole_vectors && (group != g.n || g.ldc < g.c_columns_written()))
    throw Error(fmt::format("gemm '{}': whole vectors of C need one group and rows of {} floats, got {} and {}",
                            g.what, g.c_columns_written(), group, g.ldc));
  GemmBlocking& b = g.blocking;
  if (b.int8) return plan_int8_gemm(std::move(g), group, threads, kernels, /*shared=*/!recurrent, caches);
  if (b.bf16) return plan_bf16_gemm(std::move(g), group, threads, kernels, /*shared=*/!recurrent, caches);
  const std::int64_t b_share_bytes = recurrent ? g.k * g.n * static_cast<std::int64_t>(sizeof(float)) / threads : 0;
  // A^T's rows (read in place or packed) are adjacent floats.
  const std::int64_t a_row_bytes = g.trans_a ? 0 : g.lda * static_cast<std::int64_t>(sizeof(float));
  b = choose_blocking(g.m, g.k, group, threads, g.blocking.packed_b, caches, /*shared=*/!recurrent, b_share_bytes,
                      a_row_bytes, isa);
  b.pack_a = copies_transposed_a(g, b.k_c, caches);
  b.stream_c = !recurrent && streams_c(g, b, caches);
  add_gemm_kernels(g, group, KernelKind::gemm, kernels, [&](KernelDesc& d) {
    d.isa = static_cast<std::uint8_t>(isa);
    d.unroll = 4;
    d.stream_c = b.stream_c && !d.beta;
    d.next_b_lines = static_cast<std::uint8_t>(b.next_panel_lines);
    d.a_row_stride = static_cast<std::uint32_t>(b.pack_a ? 1 : g.a_row_step());
    d.a_k_stride = static_cast<std::uint32_t>(b.pack_a ? b.m_r : g.a_k_step());
    d.b_k_stride = static_cast<std::uint32_t>(b.packed_b ? b.panel_columns() : g.ldb);
  });
  return g;
}

namespace planner {
namespace {

// Names a packed copy whose panels thread boundaries cut (GemmBlocking::cuts()).
std::string cuts_suffix(const std::vector<std::int64_t>& cuts) {
  return cuts.empty() ? std::string() : fmt::format(".cut{}", fmt::join(cuts, "_"));
}

}  // namespace

// Chooses the tiling of a GEMM over column groups of `group` and registers its kernels.
// `recurrent`: the GEMM runs at every time step with the same B, each thread on its panels.
// With `pack_into`, a plain B (a row-major matrix whose rows are far apart) is first copied into
// panels by a PackStep appended there, so the microkernel streams it instead of touching a page
// per k step. `own_panels`: B's panels get a region of their own (the GEMM runs interleaved with
// another packed one of the lane, as the two GEMMs of a recurrence with a projection do).
GemmStep Planner::generated(GemmStep g, std::int64_t group, int threads, bool recurrent, int lane,
                            std::vector<Step>* pack_into, bool own_panels) {
  if (!generate_gemms()) return g;
  // bf16 tiles read B only from packed panels: packed here whatever K.
  const bool pack_b = pack_into && !g.blocking.packed_b && (g.k >= kMinPackedK || g.blocking.bf16);
  if (!pack_b && !g.blocking.packed_b) g.blocking.bf16 = false;
  g.blocking.packed_b = g.blocking.packed_b || pack_b;
  g = plan_generated_gemm(std::move(g), group, threads ? threads : lane_threads(), plan_.kernels, recurrent,
                          plan_.caches, plan_.isa);
  const auto lane_index = static_cast<std::size_t>(lane);
  // (Panels that two GEMMs may share get their region from share_a_panels().)
  if (g.blocking.pack_a && g.a_panels_use == GemmStep::APanels::per_k_block)
    g.a_panels = region_operand(plan_.workspace,
                                lane_region(regions_.a_panels.at(lane_index), "a_panels", lane, a_panel_elements(g)));
  if (pack_b) {
    const std::int64_t elements = packed_elements(g.blocking, g.n / group, g.k);
    const int panels_region = own_panels ? region(fmt::format("b_panels.{}", g.what), false, elements)
                                         : lane_region(regions_.b_panels.at(lane_index), "b_panels", lane, elements);
    const Operand panels = region_operand(plan_.workspace, panels_region);
    pack_into->push_back(PackStep{.what = "pack B of " + g.what, .src = g.b, .dst = panels, .k = g.k,
                                  .groups = g.n / group, .blocking = g.blocking, .transpose = false, .ld = g.ldb,
                                  .sequences = g.finished.k_rows_skipped ? g.finished.sequences : 0});
    g.b = panels;
    g.ldb = g.blocking.panel_columns();
  }
  return g;
}

// A GEMM that fpmath bf16 runs on bf16 copies of its operands: those on the weights (W^T
// forward, W in backward data) and the weight gradients, as oneDNN's bf16 RNN training does.
// Its sums and C stay FP32, as do the master weights and their gradients.
GemmStep Planner::with_fpmath(GemmStep g) const {
  g.blocking.int8 = plan_.quantize == Quantize::int8_dynamic;  // (inference only: these are W^T)
  g.blocking.int8_unit = plan_.int8_unit;
  g.blocking.bf16 = plan_.fpmath == FpMath::bf16;
  g.blocking.bf16_unit = plan_.bf16_unit;
  return g;
}

// A forward GEMM whose B is W^T: the weights are packed once into panels, grouped by gate
// (`groups` column groups of `group`: G of H for W_ih and W_hh, one of P for W_hr). `threads`:
// the threads that share it (0: the lane's); `lane`: whose scratch (bf16 A panels) it uses,
// distinct for GEMMs that run at once. GEMMs on the same weights in the same panels (a
// direction's lanes of batch rows) share one packed copy: each thread then streams the same
// lines from L3, which holds half as many bytes of weights.
GemmStep Planner::with_packed_weights(GemmStep g, const std::string& name, bool recurrent, std::int64_t group,
                                      std::int64_t groups, int threads, int lane) {
  if (!generate_gemms()) return g;
  if (group == 0) group = s_.H, groups = s_.G;
  g = with_fpmath(std::move(g));
  g.blocking.packed_b = true;
  g = generated(g, group, threads, recurrent, lane);
  const PackedWeights key{g.b, g.k, groups, group, g.blocking.n_r, g.blocking.bf16, g.blocking.cuts(), -1};
  auto same = std::find_if(packed_weights_.begin(), packed_weights_.end(),
                           [&](const PackedWeights& p) { return p.same_panels(key); });
  if (same == packed_weights_.end()) {
    // Other panels of the same weights (lanes of batch rows whose tiles differ) get a name of their own.
    const bool named = std::any_of(packed_weights_.begin(), packed_weights_.end(),
                                   [&](const PackedWeights& p) { return p.src == key.src; });
    const int packed = plan_.workspace.add(
        "packed." + name + (named ? fmt::format(".n_r{}{}", key.n_r, cuts_suffix(key.cuts)) : ""), Space::packed,
        static_cast<std::size_t>(packed_elements(g.blocking, groups, g.k)) * sizeof(float));
    const Operand dst = region_operand(plan_.workspace, packed);
    plan_.pack_weights.push_back(Stage{{{PackStep{.what = "pack " + name, .src = g.b, .dst = dst, .k = g.k,
                                                  .groups = groups, .blocking = g.blocking}}}});
    packed_weights_.push_back(key);
    packed_weights_.back().region = packed;
    same = packed_weights_.end() - 1;
  }
  g.b = region_operand(plan_.workspace, same->region);
  g.ldb = g.blocking.panel_columns();
  return g;
}

// An input projection on the generated GEMM with W_ih packed, or on OpenBLAS (W_ih read in
// place) where the caller's chooser says so.
GemmStep Planner::input_projection(GemmStep g, const std::string& name, std::int64_t group, std::int64_t groups,
                                   int threads) {
  // (int8 GEMMs have no OpenBLAS peer to choose.)
  if (generate_gemms() && projection_gemm_ && plan_.quantize == Quantize::none) {
    GemmChoice choice = projection_gemm_(g, group, threads);
    if (!choice.why.empty()) plan_.notes.push_back(fmt::format("{}: {}", g.what, choice.why));
    if (choice.openblas) return g;
  }
  return with_packed_weights(g, name, false, group, groups, threads);
}

// dW_ih and dW_hh of the LSTM and the plain RNN both sum over the gate gradients (A^T, one GEMM
// each over all gates), and were planned to share: where the two tile A alike, the first packs
// A's panels once, for all of K, and the second reads them instead of packing A again (a pass
// over T*N*G*H floats, and as many written, saved); else each packs its own, a k block at a
// time. Either way their A panels get their region here, sized for what they hold.
void Planner::share_a_panels(GemmStep& first, GemmStep& second, int lane) {
  const GemmBlocking &a = first.blocking, &b = second.blocking;
  const bool same_a = first.a == second.a && first.m == second.m && first.k == second.k && first.lda == second.lda;
  // (bf16 rows of A are rounded by each GEMM for itself.)
  if (!same_a || !a.pack_a || !b.pack_a || a.bf16 || b.bf16 || a.m_r != b.m_r || a.k_c != b.k_c)
    first.a_panels_use = second.a_panels_use = GemmStep::APanels::per_k_block;
  for (GemmStep* g : {&first, &second})
    if (g->blocking.pack_a)
      g->a_panels = region_operand(plan_.workspace, lane_region(regions_.a_panels.at(static_cast<std::size_t>(lane)),
                                                                "a_panels", lane, a_panel_elements(*g)));
}

}  // namespace planner
}  // namespace rnnjit
