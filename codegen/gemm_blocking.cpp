#include "codegen/gemm_blocking.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "codegen/register_budgets.hpp"

namespace rnnjit {

std::pair<std::int64_t, std::int64_t> GemmBlocking::thread_panels(int tid) const {
  if (vector_split) {
    const auto [c0, c1] = thread_columns(tid);
    const std::int64_t first = c0 / panel_columns();
    return {first, c1 > c0 ? (c1 + panel_columns() - 1) / panel_columns() : first};
  }
  const std::int64_t p = panels_per_group();
  return {p * tid / threads, p * (tid + 1) / threads};
}

std::pair<std::int64_t, std::int64_t> GemmBlocking::thread_columns(int tid) const {
  if (vector_split) {
    const std::int64_t vectors = (group + 15) / 16;
    return {std::min(group, 16 * (vectors * tid / threads)), std::min(group, 16 * (vectors * (tid + 1) / threads))};
  }
  const auto [p0, p1] = thread_panels(tid);
  return {std::min(group, p0 * panel_columns()), std::min(group, p1 * panel_columns())};
}

GemmBlocking::Part GemmBlocking::panel_part(int tid, std::int64_t p) const {
  const auto [t0, t1] = thread_columns(tid);
  const std::int64_t c0 = std::max(t0, p * panel_columns()), first = c0 - p * panel_columns();
  return {c0, std::min({t1, group, (p + 1) * panel_columns()}), first, part_end(p, first) - first};
}

std::int64_t GemmBlocking::part_end(std::int64_t p, std::int64_t first) const {
  std::int64_t end = panel_columns();
  if (vector_split)
    for (int tid = 1; tid < threads; ++tid) {
      const std::int64_t cut = thread_columns(tid).first - p * panel_columns();
      if (cut > first && cut < end) end = cut;
    }
  return end;
}

std::vector<std::int64_t> GemmBlocking::cuts() const {
  std::vector<std::int64_t> out;
  if (vector_split)
    for (int tid = 1; tid < threads; ++tid) {
      const std::int64_t c = thread_columns(tid).first;
      if (c % panel_columns() != 0 && (out.empty() || out.back() != c)) out.push_back(c);
    }
  return out;
}

int GemmBlocking::kernel(bool row_tail, std::int64_t width, std::int64_t stride, bool beta) const {
  if (stride == panel_columns()) return kernels[row_tail][width < panel_columns()][beta];
  for (const PartKernels& part : part_kernels)
    if (part.width == width && part.stride == stride) return part.kernels[row_tail][beta];
  return -1;
}

namespace {

// The k block: a k_c x 80 panel of B (the 5 x 5 tile's, the one large GEMMs get) within a
// quarter of L2, beside the m block of A (below) and the C tiles. It depends on K and the caches
// only, not on the tile: k blocks set where the sums of C round, and the tile follows the thread
// count (the cost model balances the threads' panels), so a k block that followed the tile
// would make results differ in the last bits between thread counts. Wider tiles are chosen for
// a few rows of A, where a panel of B serves one row block only and need not stay in L2.
std::int64_t k_block(std::int64_t k, const CacheSizes& caches) {
  return std::min<std::int64_t>(k, std::max<std::int64_t>(64, caches.l2 / 4 / (64 * 5)));
}

// Whether a tile's k_c x 16*n_r panel of B stays in L1 (half of it; A's rows take the rest).
bool b_panel_in_l1(std::int64_t k, std::int64_t n_r, const CacheSizes& caches) {
  return k_block(k, caches) * 64 * n_r <= caches.l1d / 2;
}

// How far ahead a recurrence's step prefetches B's rows into L1 (its B, W_hh, streams from L3
// where L2 cannot hold it, and the line the tile reads now must not wait on it): 16 k steps,
// 150-250 cycles of the 10 x 2 to 13 x 2 tiles. Measured against 4 k steps with the next panel
// also prefetched into L2 by each k step (the kernels did both before): LSTM H = 800 N = 1 and
// 4 inference 8% faster, DS2 five layers bidirectional 3-4%, DS2 one layer 1.5%, N = 64..100
// and training the same; 8 to 32 k steps measured alike. One thread's DS2 step alone (10 MB
// of W_hh from L3): 0.73-0.79 ms with both prefetches, 0.65-0.68 with this one only (the
// cores' own prefetchers follow a thread's panels, which lie in order).
// A one-shot GEMM's kernels do not prefetch B's rows: their tiles walk their panel of B in
// order, and the prefetches took load slots from the tiles' loads. Without them every one-shot
// GEMM measured ran 2-7% faster (DS2 projection 6000 x 3200 x 800 3%, dW 3200 x 800 x 6000 4%,
// 13 shapes from 256 x 1600 x 400 up, both threads, interleaved). They prefetch the next
// panel into L2 instead, one line every four k steps (next_panel_lines): one thread's 120 x
// 3200 x 1600, an m block over 40 panels, 153-165 -> 186 GFLOPS; both threads' 6000 x 3200 x
// 1600 320-326 -> 353, dW 3200 x 800 x 6000 319-323 -> 334-338; in place, DS2 LSTM inference
// 1.8% faster, five layers bidirectional 2.9% (inference) and 2.5% (training), the shape
// sweep's cases up to 11% (LSTM I=H=1024 N=4), none slower beyond the noise.
constexpr std::int64_t kStepBLookahead = 16, kOneShotNextPanelLines = 1;
// One-row tiles of equal modelled cost: up to this many vectors, the wider wins. Each k step
// then keeps more lines of B in flight, and its software prefetch (kStepBLookahead k steps on)
// reaches further ahead in bytes. N=1 inference on Zen 4, 4 vectors against 2 (best of 5
// interleaved runs of 30 calls): RNN-relu I=1 H=1536 2.81 -> 2.70 ms, GRU I=512 H=1024 6.17 ->
// 5.60, RNN-tanh I=256 H=1024 3.47 -> 3.03, LSTM I=H=512 4.02 -> 3.73; 5 and 6 vectors in
// between.
constexpr std::int64_t kGemvTieVectors = 4;
// A step whose share of B streams from L3 (more than L2 holds) has its tiles prefetch the next
// panel at a line a k step: the first two row blocks cover it (a panel is n_r <= 3 lines a k
// step). Where L2 holds the share, the lines are there already (GRU I=33 H=257 N=256
// bidirectional, 0.8 MB of W_hh a thread: 2-3% slower with the prefetches). Against none,
// interleaved: GRU I=1024 H=1000 N=128 (rows split, 8 x 3 tiles) 4-6% faster, LSTM I=H=512
// N=128 2.5-8%, DS2 five layers 1.5-4%, one layer 1-2%; a line every two k steps (the two row
// blocks of N=20 covering the panel exactly, 8 of N=128 sharing it) gained less at N=128
// (2.5%), and at N=1 (one row block) any was 4% slower.
constexpr std::int64_t kStepNextPanelLines = 4;
// Beside two FMAs a cycle, each load of a k step (a broadcast of A or a vector of B) costs the
// FMAs about 0.18 cycles: with A and B in L1, a tile's steady state runs at 83% of the FMA
// peak for 13 x 2 (15 loads per 26 FMAs), 85% for 8 x 3 and 6 x 4, 87% for 9 x 3 and 88% for
// 5 x 5 (10 per 25), and at 99% with the loads taken out. Weighed where A's rows cap the tile
// at 8 (rows 4 KiB apart: h of H = 1024, x of I = 1024, dG of LSTM H = 256..1024), against
// the tiles the model chose without it (8 x 2, 7 x 2), interleaved: LSTM I=256 H=1024 T=20
// N=256 training 1.08-1.09x (8 x 3 steps, 6 x 4 input gradient), LSTM I=H=1024 N=20 1.03-1.07x
// (5 x 4 steps, 6 x 4 projection), I=H=2048 N=20 inference 1.09x, LSTM and GRU I=H=1024 N=128
// training 1.02-1.05x, GRU N=64 and LSTM I=H=512 bidirectional N=20 training 1.01-1.03x.
constexpr double kLoadCycles = 0.18;

}  // namespace

// The L1d of current x86 cores (Zen 4: 32 KiB of 8 ways; Zen 5 and Intel since Ice Lake: 48 KiB
// of 12) has 64 sets of 64-byte lines, so a way spans 4 KiB: rows of A a_row_bytes apart fall
// into 4096 / gcd(a_row_bytes, 4096) sets, and a tile's rows, each read a line every 16 k steps,
// evict each other once more of them share a set than it has ways (8 counted here). Rows 4 KiB
// apart (h of H=1024, or of H=512 bidirectional) all share one: one thread's share of the GRU
// H=1024 N=64 step (13 x 2 tiles) ran at 66 GFLOPS with A's rows 1024 floats apart and at 98
// with 1040, on Zen 4; at 1024, 8 rows ran at 100, 9 at 97, 10 at 92, 12 at 84.
std::int64_t max_rows_in_l1_sets(std::int64_t a_row_bytes) {
  constexpr std::int64_t kWayBytes = 4096, kWays = 8;
  if (a_row_bytes <= 0) return std::numeric_limits<std::int64_t>::max();
  return kWays * (kWayBytes / std::gcd(a_row_bytes, kWayBytes));
}

namespace {

// The register-tile cost model of choose_blocking() over one GEMM's sizes: cycles of the busiest
// thread, per k step, of each candidate tile.
// Zen 5 and Intel cores sustain two zmm FMAs per cycle (Zen 4 one: it runs each as two 256-bit
// halves, so there the loads below weigh less than modelled), and an FMA has a latency of 4. The
// loads of a k step (m_r broadcasts of A, each from another row, and n_r vectors of B) run
// at about 1.5 a cycle beside the FMAs, not the 2 the ports allow: a 25 x 1 tile (26 loads
// per 25 FMAs) measured 70% of the FMA rate of a 13 x 2 one. So a k step of an m_r x n_r
// tile costs max(m_r*n_r / 2, (m_r+n_r) / 1.5, 4) cycles. The n_r vectors of B come from L2
// unless the tile's k_c x n_r panel stays in L1 (half of L1 for it), and L2 feeds
// about 32 bytes a cycle: 2 cycles per vector, so a short wide tile (2 x 8) waits on L2 at
// half its FMA rate.
// Cost = cycles of the busiest thread, padding included: a step's threads split each group at
// whole vectors (GemmBlocking::vector_split), and a group's last panel and the parts of panels
// that the threads' boundaries cut cost their fewer vectors (a 10 x 1 part runs on loads, at
// 7.3 cycles a k step against the 10 of a whole 10 x 2 panel's two vectors).
// A shared GEMM's threads claim (m block, panel) units as they go instead. Where a group has
// fewer panels than threads that matters: the split would leave a thread idle, the shared
// GEMM does not, so such a tile costs all its panels over the threads (RNN I=500 H=32 N=128:
// the projection's 32 columns were two 29 x 1 panels, a thread each, and are one 14 x 2
// panel, 1.14-1.31x faster). Tiles wider than the group are then left out: their extra
// vectors would be unused, though the fewer rows they take look as cheap to the model.
// Where a step's share of B streams from L3, L2 also takes every panel's fill while it feeds
// the tiles, and serves their vectors at about two thirds of its rate: 3 cycles a vector.
// Measured on the DS2 LSTM's step (M = 20, 5 MB of W_hh a thread, both threads running): a
// 10 x 2 tile, whose panel L2 serves twice, ran 1.1x as fast as a 5 x 5 one (four times),
// though the two tie with B in L2.
// With `weigh_loads`, each load of the k step also delays the FMAs by kLoadCycles (above).
// AVX2 runs a 16-column vector as two ymm halves: twice the FMAs and B's loads of a zmm one, at
// the same two FMAs a cycle, and its 16 registers cap the tiles (gemm_max_rows).
struct TileSearch {
  std::int64_t m, k, group;
  int threads;
  bool shared;
  const CacheSizes& caches;
  double l2_cycles;  // a vector of B from L2: 2 cycles, 3 where the step's share streams from L3
  Isa isa;

  // Cycles of a k step of an m_r x n_r tile that computes `vectors` of its n_r.
  double per_k(std::int64_t m_r, std::int64_t n_r, std::int64_t vectors, bool weigh_loads) const {
    const std::int64_t registers = vectors * gemm_registers_per_vector(isa);
    const double fma = static_cast<double>(m_r * registers) / 2.0 +
                       (weigh_loads ? kLoadCycles * static_cast<double>(m_r + registers) : 0.0),
                 loads = static_cast<double>(m_r + registers) / 1.5;
    return std::max({fma, loads, 4.0, b_panel_in_l1(k, n_r, caches) ? 0.0 : l2_cycles * static_cast<double>(vectors)});
  }

  // The cost of thread tid's panels under b, each by the vectors of it the thread computes.
  double thread_cost(const GemmBlocking& b, int tid, std::int64_t row_blocks, std::int64_t m_r,
                     bool weigh_loads) const {
    double c = 0.0;
    const auto [p0, p1] = b.thread_panels(tid);
    for (std::int64_t p = p0; p < p1; ++p) {
      const GemmBlocking::Part part = b.panel_part(tid, p);
      c += static_cast<double>(row_blocks) * per_k(m_r, b.n_r, (part.c1 - part.c0 + 15) / 16, weigh_loads);
    }
    return c;
  }

  // The cost of n_r-vector tiles of m_r rows (row_blocks of them cover M); `pooled`: costed over
  // all threads (a shared GEMM whose group has fewer panels than threads).
  double tile_cost(std::int64_t n_r, std::int64_t m_r, std::int64_t row_blocks, bool weigh_loads, bool& pooled) const {
    GemmBlocking candidate;
    candidate.n_r = n_r;
    candidate.group = group;
    candidate.threads = threads;
    candidate.vector_split = !shared;
    pooled = shared && candidate.panels_per_group() < threads;
    if (pooled) {
      GemmBlocking all = candidate;  // every panel, shared out evenly
      all.threads = 1;
      return thread_cost(all, 0, row_blocks, m_r, weigh_loads) / threads;
    }
    double cost = 0.0;
    for (int tid = 0; tid < threads; ++tid) cost = std::max(cost, thread_cost(candidate, tid, row_blocks, m_r, weigh_loads));
    return cost;
  }

  // The cheapest tile of at most `row_cap` rows (its m_r and n_r).
  GemmBlocking cheapest_tile(std::int64_t row_cap, bool weigh_loads) const {
    GemmBlocking best;
    double best_cost = std::numeric_limits<double>::max();
    const std::int64_t group_vectors = (group + 15) / 16;
    for (std::int64_t n_r = 1; n_r <= 15; ++n_r) {
      const std::int64_t max_rows = std::min<std::int64_t>(gemm_max_rows(static_cast<int>(n_r), isa), row_cap);
      if (max_rows < 1) break;
      if (shared && n_r > group_vectors && best.m_r > 0) break;
      const std::int64_t row_blocks = (m + max_rows - 1) / max_rows;
      const std::int64_t m_r = (m + row_blocks - 1) / row_blocks;
      bool pooled = false;
      const double cost = tile_cost(n_r, m_r, row_blocks, weigh_loads, pooled);
      // A tile costed over all threads that runs at the same rate as a split one differs from it
      // only by how its rows pad M: it must be 1% cheaper to be taken. One row (N=1: a
      // recurrence's step is a GEMV streaming W_hh) costs the same per vector from 2 vectors
      // on; there the wider tile wins ties, up to kGemvTieVectors.
      const bool wider_on_ties = m == 1 && n_r <= kGemvTieVectors;
      if (cost < best_cost - (pooled ? 0.01 * best_cost : 1e-9) || (wider_on_ties && cost <= best_cost + 1e-9)) {
        best_cost = cost;
        best.m_r = m_r;
        best.n_r = n_r;
      }
    }
    return best;
  }
};

}  // namespace

GemmBlocking choose_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads, bool packed_b,
                             const CacheSizes& caches, bool shared, std::int64_t b_share_bytes,
                             std::int64_t a_row_bytes, Isa isa) {
  const TileSearch search{m, k, group, threads, shared, caches, b_share_bytes > caches.l2 ? 3.0 : 2.0, isa};
  // Tiles whose rows of A would overfill a set of L1 are left out, but only where the cheapest
  // tile is one: elsewhere the model's near ties (13 x 2 against 6 x 4) stay as they were.
  // Under the cap every candidate is short, and what sets them apart is their loads, which the
  // search then weighs (kLoadCycles): without them 8 x 2 (10 loads per 16 FMAs) ties 8 x 3 (11
  // per 24) and 6 x 4 (10 per 24), and the narrowest won.
  const std::int64_t row_cap = max_rows_in_l1_sets(a_row_bytes);
  GemmBlocking best = search.cheapest_tile(std::numeric_limits<std::int64_t>::max(), false);
  if (best.m_r > row_cap) best = search.cheapest_tile(row_cap, true);
  best.group = group;
  best.threads = threads;
  best.vector_split = !shared;
  best.packed_b = packed_b;
  best.k_c = k_block(k, caches);
  best.b_lookahead = shared || b_panel_in_l1(k, best.n_r, caches) ? 0 : kStepBLookahead;
  if (packed_b && shared) best.next_panel_lines = kOneShotNextPanelLines;
  else if (packed_b && b_share_bytes > caches.l2 && m > best.m_r) best.next_panel_lines = kStepNextPanelLines;
  // And an m block of A in 3/8 of L2 beside it, so a large M does not stream A from memory
  // once per panel of B.
  const std::int64_t a_rows = std::max<std::int64_t>(1, (caches.l2 * 3 / 8) / (4 * best.k_c) / best.m_r) * best.m_r;
  best.m_c = std::min(a_rows, (m + best.m_r - 1) / best.m_r * best.m_r);
  return best;
}

namespace {

// A recurrence's step splits each group's panels between the threads, which then meet at a
// barrier: where 32-column panels split unevenly and 16-column ones split more evenly, the
// narrower panels win (the step streams W_hh from L3, and reloading A for every B tile costs
// little). DS2 LSTM (H = 800: 25 panels, 416 : 384 columns a thread against 400 : 400),
// inference with I = 16 on AMX: 1.02-1.3x faster over eight interleaved pairs.
std::int64_t evenly_split_n_r(const GemmBlocking& b, std::int64_t narrower) {
  auto busiest = [&](std::int64_t n_r) {
    GemmBlocking split = b;
    split.n_r = n_r;
    std::int64_t most = 0;
    for (int tid = 0; tid < b.threads; ++tid) {
      const auto [c0, c1] = split.thread_columns(tid);
      most = std::max(most, c1 - c0);
    }
    return most;
  };
  return busiest(narrower) < busiest(b.n_r) ? narrower : b.n_r;
}

// AMX: two 16-row A tiles and two 16-column B tiles feed four C tiles: each tile loaded serves
// two products (the 8 tile registers allow no more). Narrower where M or the group is small.
void choose_amx_tile(GemmBlocking& b, std::int64_t m, bool shared) {
  b.m_r = std::min<std::int64_t>(m, 32);
  b.n_r = b.group > 16 ? 2 : 1;
  if (!shared && b.threads > 1 && b.n_r == 2) b.n_r = evenly_split_n_r(b, 1);
  // Each k step prefetches B's tiles four k steps on into L1: 7-17% faster on the DS2 LSTM's
  // inference and projection, and up to 1.3x at N = 1, where the step only streams W_hh.
  b.b_lookahead = 4;
  // A one-shot GEMM's tiles read A's rows from L2 (its m block), each tile row a line of
  // another row: prefetching them two k steps on into L1 ran the kernel 1.25x faster with A in
  // L2 (best of 15, one thread) and cut its share of the DS2 LSTM's time by 5-10%. A
  // recurrence's step reads the same few rows of h for every panel from L1.
  b.a_lookahead = shared ? 2 : 0;
}

// AVX512_BF16: m_r x n_r sums in zmm registers (with n_r B vectors and two broadcasts). A
// one-shot GEMM takes 4 column tiles of 6 rows (a load per 2.4 dot products, as the FP32
// kernel's tiles). A recurrence's step streams its panels of W_hh from L2 or L3 once per row
// block, so it takes the fewest row blocks: one 16-column tile of up to 29 rows (N = 20 in
// one block), else two tiles of up to 14 rows where M fits either way.
void choose_dpbf16_tile(GemmBlocking& b, std::int64_t m, bool shared) {
  auto most_rows = [](std::int64_t n_r) { return (kZmmRegisters - 2 - n_r) / n_r; };
  const std::int64_t tiles = (b.group + 15) / 16;
  if (shared) b.n_r = std::min<std::int64_t>(tiles, 4);
  else b.n_r = tiles > 1 && m <= most_rows(2) ? 2 : 1;
  if (!shared && b.threads > 1 && b.n_r == 2) b.n_r = evenly_split_n_r(b, 1);
  // Rows evened out over the blocks M needs: M = 20 in one block of 20, M = 40 in two of 20.
  const std::int64_t blocks = (m + most_rows(b.n_r) - 1) / most_rows(b.n_r);
  b.m_r = (m + blocks - 1) / blocks;
  b.b_lookahead = shared ? 0 : 2;
}

}  // namespace

GemmBlocking choose_bf16_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads,
                                  const CacheSizes& caches, bool shared, Bf16Unit unit) {
  GemmBlocking b;
  b.bf16 = true;
  b.bf16_unit = unit;
  b.packed_b = true;
  b.pack_a = true;
  b.group = group;
  b.threads = threads;
  if (unit == Bf16Unit::amx) choose_amx_tile(b, m, shared);
  else choose_dpbf16_tile(b, m, shared);
  // k_c is all of K: blocking k so that a panel's k block served every row block of its m
  // block from L1 measured 10-25% slower on the DS2 projection (6000 x 3200 x 800) on AMX, with
  // five times the kernel calls, each loading and storing its C tiles.
  b.k_c = bf16_k(k);
  b.a_copies = shared ? 1 : threads;
  // An m block of A's bf16 rows in 3/8 of L2, so each panel of B (in L2 beside it) serves all
  // of its row blocks before the next panel streams in.
  const std::int64_t a_rows = std::max<std::int64_t>(1, (caches.l2 * 3 / 8) / (2 * b.k_c) / b.m_r) * b.m_r;
  b.m_c = std::min(a_rows, (m + b.m_r - 1) / b.m_r * b.m_r);
  return b;
}

std::int64_t packed_elements(const GemmBlocking& b, std::int64_t groups, std::int64_t k) {
  if (b.int8) return groups * b.panels_per_group() * int8_panel_bytes(b.n_r, k) / 4;
  if (b.bf16) return groups * b.panels_per_group() * bf16_k(k) * b.panel_columns() / 2;
  return groups * b.panels_per_group() * k * b.panel_columns();
}

}  // namespace rnnjit
