// The generated GEMM, AVX-512 and AVX2, against a naive triple loop, through the planner's
// tiling and the executor's blocking loops, with tails in every dimension: M, N, K in {1, 2,
// 15, 16, 17, 63, 64, 65, 800} (a subset of the full product), transposed A, packed (from W or
// from B's rows) and plain B, beta 0 and 1, 1 or 2 threads, and C written with streaming
// stores. Also the microkernel alone against its scalar twin, every tile of each ISA.
#include <gtest/gtest.h>

#include <immintrin.h>

#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "codegen/planner.hpp"
#include "codegen/register_budgets.hpp"
#include "kernels/gemm_reference.hpp"
#include "runtime/cache.hpp"
#include "runtime/executor.hpp"
#include "tests/gemm_check.hpp"
#include "tests/uniform.hpp"

namespace rnnjit {
namespace {

// Whether this CPU runs `isa`'s code (AVX-512 CPUs run AVX2's).
bool cpu_runs(Isa isa) { return static_cast<int>(cpu_isa()) >= static_cast<int>(isa); }

constexpr Isa kGeneratedIsas[] = {Isa::avx512, Isa::avx2};

struct GemmCase {
  std::int64_t m, n, k;
  bool trans_a, packed_b;
  float beta;
  int threads;
  std::int64_t groups;
  bool plain_pack = false;  // packed_b from the row-major B (the backward GEMMs' PackStep), not from W
  CacheSizes caches{};      // what the blocking is chosen for
  // C in a workspace region with whole-vector rows, larger than the caches' L2: the planner
  // must choose non-temporal stores for it (GemmBlocking::stream_c).
  bool c_streams = false;
  // One group of n columns, not whole vectors, with C's rows long enough for them
  // (GemmStep::c_whole_vectors, as in a padded gx): the columns up to the next vector get zeros.
  bool whole_vectors = false;
  Isa isa = Isa::avx512;  // the microkernels'
};

// Runs C = op(A) B (+ beta C) as a one-step plan and compares with a double-precision loop.
void check(const GemmCase& c) {
  if (!cpu_runs(c.isa)) GTEST_SKIP() << "this CPU cannot run " << to_string(c.isa) << " code";
  const std::int64_t lda = (c.trans_a ? c.m : c.k) + 3, ldb = c.n + 5;
  const std::int64_t ldc = c.c_streams || c.whole_vectors ? (c.n + 31) / 16 * 16 : c.n + 1;
  const std::vector<float> a = test::uniform((c.trans_a ? c.k : c.m) * lda, 1), w = test::uniform(c.n * c.k, 2);
  std::vector<float> b = test::uniform(c.k * ldb, 3), out = test::uniform(c.m * ldc, 4);
  const std::vector<float> c0 = out;

  Plan plan;
  plan.isa = c.isa;  // the executor packs for it
  plan.threads = c.threads;
  // The workspace: (c_streams) C, then A's panels, from a 64-byte boundary as Execution aligns it.
  Operand c_operand{.buffer = Buffer::y};
  if (c.c_streams)
    c_operand = {.buffer = Buffer::workspace,
                 .region = plan.workspace.add("c", Space::workspace, out.size() * sizeof(float))};
  GemmStep g{.what = "test", .trans_a = c.trans_a, .m = c.m, .n = c.n, .k = c.k, .a = {.buffer = Buffer::x},
             .b = {.buffer = Buffer::weights}, .c = c_operand, .lda = lda, .ldb = ldb, .ldc = ldc, .beta = c.beta};
  g.blocking.packed_b = c.packed_b;
  g.c_whole_vectors = c.whole_vectors;
  g = plan_generated_gemm(g, c.n / c.groups, c.threads, plan.kernels, false, c.caches, c.isa);
  for (const KernelDesc& d : plan.kernels) ASSERT_EQ(d.isa_kind(), c.isa) << kernel_name(d);
  EXPECT_EQ(g.blocking.stream_c, c.c_streams) << "the planner's choice of streaming stores for C";
  if (g.blocking.pack_a) {  // transposed A is copied into row-block panels first
    const std::int64_t elements = a_panel_elements(g.blocking, c.m, c.k);
    g.a_panels = {.buffer = Buffer::workspace,
                  .region = plan.workspace.add("a_panels", Space::workspace, elements * sizeof(float))};
  }
  std::vector<float> workspace(plan.workspace.workspace_bytes / sizeof(float) + 16);
  float* workspace_start = workspace.data();
  while (reinterpret_cast<std::uintptr_t>(workspace_start) % kRegionAlignment) ++workspace_start;
  std::vector<float> packed;
  Bindings bind;
  bind.workspace = reinterpret_cast<std::byte*>(workspace_start);
  float* const c_data = c.c_streams ? workspace_start + plan.workspace.regions[0].offset / sizeof(float) : out.data();
  if (c.c_streams) std::copy(out.begin(), out.end(), c_data);
  if (c.packed_b) {
    // B = W^T from W [n, k], or B itself (row-major, ldb): pack it the way the planner's
    // PackStep does.
    packed.resize(static_cast<std::size_t>(packed_elements(g.blocking, c.groups, c.k)));
    const int region = plan.workspace.add("packed", Space::packed, packed.size() * sizeof(float));
    g.b = {.buffer = Buffer::packed, .region = region};
    plan.pack_weights.push_back(Stage{{{PackStep{.what = "pack", .src = {.buffer = Buffer::weights}, .dst = g.b,
                                                 .k = c.k, .groups = c.groups, .blocking = g.blocking,
                                                 .transpose = !c.plain_pack, .ld = ldb}}}});
    bind.packed = reinterpret_cast<std::byte*>(packed.data());
  }
  plan.forward.push_back(Stage{{{g}}});
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  for (const KernelDesc& d : plan.kernels) kernels.push_back(Cache::instance().kernel(d));
  auto shared = std::make_shared<const Plan>(plan);
  Executor ex(shared, kernels);
  bind.bind(Buffer::x, a.data());
  bind.bind(Buffer::weights, c.packed_b && !c.plain_pack ? w.data() : b.data());
  bind.bind(Buffer::y, out.data());
  ex.run(shared->pack_weights, bind);
  ex.run(shared->forward, bind);
  if (c.c_streams) std::copy(c_data, c_data + out.size(), out.begin());
  if (c.whole_vectors)  // the zeros past n, then those columns as they were for the check below
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = c.n; j < (c.n + 15) / 16 * 16; ++j) {
        ASSERT_EQ(out[static_cast<std::size_t>(i * ldc + j)], 0.0f) << "C at " << i << "," << j;
        out[static_cast<std::size_t>(i * ldc + j)] = c0[static_cast<std::size_t>(i * ldc + j)];
      }

  test::expect_gemm_within_bound(out, c0, c.m, c.n, c.k, ldc, c.beta, [&](std::int64_t i, std::int64_t j,
                                                                          std::int64_t k) {
    const double av = c.trans_a ? a[static_cast<std::size_t>(k * lda + i)] : a[static_cast<std::size_t>(i * lda + k)];
    const double bv = c.packed_b && !c.plain_pack ? w[static_cast<std::size_t>(j * c.k + k)]
                                                  : b[static_cast<std::size_t>(k * ldb + j)];
    return av * bv;
  });
}

class GeneratedGemm : public testing::TestWithParam<GemmCase> {};
TEST_P(GeneratedGemm, MatchesNaiveLoop) { check(GetParam()); }

std::vector<GemmCase> sweep() {
  const std::int64_t sizes[] = {1, 2, 15, 16, 17, 63, 64, 65, 800};
  std::vector<GemmCase> out;
  // A transposed A is read in place on cores of one 512-bit FMA a cycle (Zen 4) and copied into
  // panels on others: half the transposed cases plan for each.
  CacheSizes zen4{32 * 1024, 1024 * 1024};
  zen4.zmm_fmas_per_cycle = 1;
  int i = 0;
  for (std::int64_t m : sizes)
    for (std::int64_t n : sizes)
      for (std::int64_t k : sizes) {
        if (m * n * k > 800 * 65 * 65) continue;  // keep the naive loop quick
        // Rotate the variants through the product so every one meets every size.
        const bool trans_a = i % 2, packed = (i / 2) % 2;
        const float beta = (i / 4) % 2 ? 1.0f : 0.0f;
        const int threads = 1 + (i / 8) % 2;
        ++i;
        if (i % 3) continue;  // a third of the product, still covering each size in each role
        const CacheSizes caches = trans_a && (i / 16) % 2 ? zen4 : CacheSizes{};
        out.push_back({m, n, k, trans_a, packed, beta, threads, 1, false, caches});
      }
  out.push_back({20, 3200, 800, false, true, 0.0f, 2, 4});  // the DS2 recurrent step, by gate
  out.push_back({300, 800, 3200, false, false, 1.0f, 2, 1});  // backward data, k blocked
  out.push_back({7, 96, 9000, true, false, 0.0f, 1, 3});      // a k larger than one block, A packed
  out.push_back({7, 96, 9000, true, false, 1.0f, 2, 3});      // ... the threads claiming tiles per k block
  out.push_back({7, 96, 9000, true, false, 1.0f, 2, 3, false, zen4});  // ... A read in place
  out.push_back({1500, 70, 300, false, true, 1.0f, 2, 1});    // several m blocks, the last one short
  // B packed from its row-major layout (the backward GEMMs), tails in every dimension.
  for (const auto& [m, n, k, threads, groups] : {std::tuple{1, 17, 65, 1, 1}, {20, 800, 15, 2, 1}, {63, 150, 17, 2, 3},
                                                 {2, 1600, 800, 2, 4}, {65, 33, 1, 1, 1}})
    out.push_back({m, n, k, false, true, 0.0f, threads, groups, true});
  // Caches small enough that every dimension is blocked (k blocks of 64 rows with a tail, m
  // blocks, B rows prefetched into L1): the loops a large GEMM takes on a machine of this size.
  const CacheSizes tiny{4 * 1024, 64 * 1024};
  out.push_back({100, 200, 800, false, true, 1.0f, 2, 2, false, tiny});
  out.push_back({130, 63, 300, true, true, 0.0f, 2, 1, false, tiny});
  out.push_back({40, 150, 513, false, true, 0.0f, 2, 3, true, tiny});
  out.push_back({17, 65, 129, false, false, 1.0f, 1, 1, false, tiny});
  // C larger than L2, in a workspace region: written with streaming stores, row tails, a
  // narrower last panel per group, packed and plain B, transposed A within one k block.
  out.push_back({403, 96, 40, false, true, 0.0f, 2, 2, false, tiny, true});
  out.push_back({190, 160, 33, false, false, 0.0f, 1, 1, false, tiny, true});
  out.push_back({301, 112, 50, true, true, 0.0f, 2, 1, false, tiny, true});
  // Whole vectors past n (a padded gx), streamed and not, row tails, one or two threads.
  out.push_back({403, 150, 40, false, true, 0.0f, 2, 1, false, tiny, true, true});
  out.push_back({37, 771, 33, false, true, 0.0f, 1, 1, false, {}, false, true});
  out.push_back({65, 17, 15, false, true, 0.0f, 2, 1, false, {}, false, true});
  // ... but not where it is added to, nor over several k blocks (each adds to the last).
  out.push_back({403, 96, 40, false, true, 1.0f, 2, 2, false, tiny});
  out.push_back({403, 96, 100, false, true, 0.0f, 2, 2, false, tiny});
  // The same on AVX2.
  const std::size_t avx512_cases = out.size();
  for (std::size_t i = 0; i < avx512_cases; ++i) {
    out.push_back(out[i]);
    out.back().isa = Isa::avx2;
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sweep, GeneratedGemm, testing::ValuesIn(sweep()), [](const auto& info) {
  const GemmCase& c = info.param;
  return fmt::format("{}_m{}_n{}_k{}_{}{}_beta{}_th{}_g{}{}{}{}", to_string(c.isa), c.m, c.n, c.k, c.trans_a ? "at" : "a",
                     c.plain_pack ? "_packed_plain" : c.packed_b ? "_packed" : "", static_cast<int>(c.beta),
                     c.threads, c.groups,
                     c.caches == CacheSizes{}
                         ? ""
                         : fmt::format("_l2_{}k_fma{}", c.caches.l2 / 1024, c.caches.zmm_fmas_per_cycle),
                     c.c_streams ? "_c_streams" : "", c.whole_vectors ? "_whole_vectors" : "");
});

// The microkernel alone against its scalar twin, for every tile the register file allows, with
// and without the L1 prefetch of B rows ahead and the L2 prefetch of the next panel; the tails
// include those that leave AVX2's second half of the last vector out (1, 7, 8) or cut it (9, 15).
class GemmMicrokernelOf : public testing::TestWithParam<Isa> {};

TEST_P(GemmMicrokernelOf, MatchesScalarTwinOnEveryTile) {
  const Isa isa = GetParam();
  if (!cpu_runs(isa)) GTEST_SKIP() << "this CPU cannot run " << to_string(isa) << " code";
  for (int vectors = 1; gemm_max_rows(vectors, isa) >= 1; ++vectors)
    for (int rows = 1; rows <= gemm_max_rows(vectors, isa); ++rows)
      for (int tail : {0, 1, 7, 8, 9, 15})
        for (int beta : {0, 1}) {
          KernelDesc d;
          d.b_lookahead = beta ? 16 : 0;  // prefetches past B's end must not fault or change C
          d.next_b_lines = static_cast<std::uint8_t>(beta ? 0 : 2);  // nor those of a next panel past it
          d.kind = static_cast<std::uint8_t>(KernelKind::gemm);
          d.isa = static_cast<std::uint8_t>(isa);
          d.rows = static_cast<std::uint32_t>(rows);
          d.vectors = static_cast<std::uint8_t>(vectors);
          d.n_tail = static_cast<std::uint8_t>(tail);
          d.beta = static_cast<std::uint8_t>(beta);
          d.unroll = 4;
          d.a_row_stride = 11;
          d.a_k_stride = 1;
          d.b_k_stride = static_cast<std::uint32_t>(16 * vectors + 3);
          d.c_row_stride = static_cast<std::uint32_t>(16 * vectors + 1);
          const std::int64_t k = 7;
          const auto a = test::uniform(rows * 11, 5), b = test::uniform(k * d.b_k_stride, 6);
          auto c1 = test::uniform(rows * d.c_row_stride, 7), c2 = c1;
          CompiledKernel jit(d);
          GemmArgs args1{a.data(), b.data(), c1.data(), k, b.data() + b.size()};
          GemmArgs args2{a.data(), b.data(), c2.data(), k};
          jit(&args1);
          gemm_reference(d, args2);
          for (std::size_t i = 0; i < c1.size(); ++i)
            ASSERT_NEAR(c1[i], c2[i], 1e-5) << kernel_name(d) << " element " << i;
        }
}

// Streaming stores (stream_c: beta 0, whole vectors, 64-byte aligned rows of C) against the
// scalar twin, for every tile.
TEST_P(GemmMicrokernelOf, StreamingStoresMatchScalarTwin) {
  const Isa isa = GetParam();
  if (!cpu_runs(isa)) GTEST_SKIP() << "this CPU cannot run " << to_string(isa) << " code";
  for (int vectors = 1; gemm_max_rows(vectors, isa) >= 1; ++vectors)
    for (int rows = 1; rows <= gemm_max_rows(vectors, isa); ++rows) {
      KernelDesc d;
      d.kind = static_cast<std::uint8_t>(KernelKind::gemm);
      d.isa = static_cast<std::uint8_t>(isa);
      d.rows = static_cast<std::uint32_t>(rows);
      d.vectors = static_cast<std::uint8_t>(vectors);
      d.stream_c = 1;
      d.unroll = 4;
      d.a_row_stride = 11;
      d.a_k_stride = 1;
      d.b_k_stride = static_cast<std::uint32_t>(16 * vectors);
      d.c_row_stride = static_cast<std::uint32_t>(16 * vectors + 16);
      const std::int64_t k = 9;
      const auto a = test::uniform(rows * 11, 5), b = test::uniform(k * d.b_k_stride, 6);
      std::vector<float> c1(rows * d.c_row_stride + 16, 0.5f), c2 = c1;
      float* aligned = c1.data();
      while (reinterpret_cast<std::uintptr_t>(aligned) % 64) ++aligned;
      const std::ptrdiff_t at = aligned - c1.data();
      CompiledKernel jit(d);
      GemmArgs args1{a.data(), b.data(), aligned, k}, args2{a.data(), b.data(), c2.data() + at, k};
      jit(&args1);
      _mm_sfence();
      gemm_reference(d, args2);
      for (std::size_t i = 0; i < c1.size(); ++i)
        ASSERT_NEAR(c1[i], c2[i], 1e-5) << kernel_name(d) << " element " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, GemmMicrokernelOf, testing::ValuesIn(kGeneratedIsas),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// A rows x vectors GEMM descriptor, unrolled 4 times: the refusal tests' base.
KernelDesc tile_desc(std::uint32_t rows, std::uint8_t vectors, Isa isa = Isa::avx512) {
  KernelDesc d;
  d.kind = static_cast<std::uint8_t>(KernelKind::gemm);
  d.isa = static_cast<std::uint8_t>(isa);
  d.rows = rows;
  d.vectors = vectors;
  d.unroll = 4;
  return d;
}

// Compiling `d` throws an Error whose message names `what`.
void expect_refused(const KernelDesc& d, std::string_view what) {
  try {
    CompiledKernel k(d);
    FAIL() << "expected an Error for " << kernel_name(d);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GemmMicrokernel, RefusesStreamingStoresItCannotMake) {
  for (const auto& [beta, n_tail, c_row_stride] : {std::tuple{1, 0, 32}, {0, 3, 32}, {0, 0, 40}}) {
    KernelDesc d = tile_desc(2, 2);
    d.stream_c = 1;
    d.beta = static_cast<std::uint8_t>(beta);
    d.n_tail = static_cast<std::uint8_t>(n_tail);
    d.c_row_stride = static_cast<std::uint32_t>(c_row_stride);
    expect_refused(d, "streaming stores");
  }
}

TEST(GemmMicrokernel, RefusesTilesThatDoNotFitTheRegisters) {
  expect_refused(tile_desc(6, 5), "registers");  // 30 accumulators + 5 B vectors + 2 broadcasts > 32
  // AVX2: 2 ymm a vector; 14 accumulators + 2 B + a broadcast + the tail mask > 16
  expect_refused(tile_desc(7, 1, Isa::avx2), "registers");
  expect_refused(tile_desc(3, 2, Isa::avx2), "registers");
  expect_refused(tile_desc(1, 4, Isa::avx2), "registers");
  for (std::uint8_t vectors = 1; vectors <= 3; ++vectors)
    EXPECT_NO_THROW(CompiledKernel(tile_desc(static_cast<std::uint32_t>(gemm_max_rows(vectors, Isa::avx2)), vectors,
                                             Isa::avx2)));
}

// a_lookahead is the AMX kernel's: an FP32 descriptor that sets it is refused, not ignored.
TEST(GemmMicrokernel, RefusesTheAmxKernelsALookahead) {
  KernelDesc d = tile_desc(2, 2);
  d.a_lookahead = 2;
  expect_refused(d, "a_lookahead");
}

TEST(GemmMicrokernel, RefusesMoreThanEightNextPanelLines) {
  KernelDesc d = tile_desc(2, 2);
  d.next_b_lines = 9;
  expect_refused(d, "next_b_lines");
}

// The cost model keeps tiles FMA-bound: where B's panel cannot stay in L1 its vectors come from
// L2 at about two cycles each, so a tile needs at least 4 rows per vector of B (a 2 x 8 tile
// would wait on L2 half the time). Where a tile of that many rows fits the registers, the model
// must choose one, and prefetch B's rows into L1 ahead of the FMAs.
TEST(GemmBlocking, TilesStayFmaBoundWhenBStreamsFromL2) {
  for (const auto& [m, k, group] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{128, 512, 512},
                                    {32, 256, 256}, {6400, 512, 512}, {20, 800, 800}, {64, 128, 128}})
    for (int threads : {1, 2}) {
      const GemmBlocking b = choose_blocking(m, k, group, threads, true);
      const bool b_in_l1 = b.k_c * 64 * b.n_r <= 24 * 1024;
      EXPECT_TRUE(b_in_l1 || b.m_r >= 4 || m < 4)
          << fmt::format("M={} K={} group={}: {}x{} tile", m, k, group, b.m_r, b.n_r);
      // And B rows that come from L2 are prefetched into L1 ahead of the FMAs.
      EXPECT_EQ(b.b_lookahead > 0, !b_in_l1) << fmt::format("M={} K={} group={}", m, k, group);
    }
}

// Loads run at about 1.5 a cycle beside the FMAs: a tile with more loads than that per k step
// (25 x 1: 26 loads, 25 FMAs) is load-bound, and measured 70% of the rate of 13 x 2 on the
// recurrent step of an RNN with N=50, H=500. Where a tile with more FMAs than loads fits, the
// model must choose one.
TEST(GemmBlocking, TilesStayFmaBoundOnLoads) {
  for (const auto& [m, k, group] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{50, 500, 500},
                                    {20, 800, 800}, {128, 512, 512}, {2000, 200, 500}, {2400, 60, 300}})
    for (int threads : {1, 2}) {
      const GemmBlocking b = choose_blocking(m, k, group, threads, true);
      EXPECT_GE(static_cast<double>(b.m_r * b.n_r) / 2.0, static_cast<double>(b.m_r + b.n_r) / 1.5)
          << fmt::format("M={} K={} group={}: {}x{} tile", m, k, group, b.m_r, b.n_r);
    }
}

// The blocking follows the caches it is given: a k_c x 80 panel of B within a quarter of L2 (k
// blocks of at least 64 rows), A's m block within 3/8 of it, and B rows prefetched into L1
// exactly where the tile's panel does not fit half of L1. A larger L2 never gets shorter k
// blocks, and the k block does not depend on the thread count (it sets where C's sums round).
TEST(GemmBlocking, FollowsTheCaches) {
  const CacheSizes machines[] = {{32 * 1024, 512 * 1024}, {48 * 1024, 1024 * 1024}, {48 * 1024, 2048 * 1024},
                                 {64 * 1024, 4096 * 1024}};
  for (const auto& [m, k, group] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{20, 800, 800},
                                    {6000, 4096, 1024}, {64, 8192, 512}, {3000, 300, 96}, {1, 5000, 800}}) {
    std::int64_t previous_k_c = 0;
    for (const CacheSizes& caches : machines) {
      const std::int64_t k_c = choose_blocking(m, k, group, 1, true, caches).k_c;
      for (int threads : {1, 2, 3, 8}) {
        const GemmBlocking b = choose_blocking(m, k, group, threads, true, caches);
        const std::string what = fmt::format("M={} K={} group={} threads={} L1d={} L2={}: {}x{} tile k_c={} m_c={}",
                                             m, k, group, threads, caches.l1d, caches.l2, b.m_r, b.n_r, b.k_c, b.m_c);
        EXPECT_EQ(b.k_c, k_c) << what;
        EXPECT_TRUE(b.k_c == k || (b.k_c >= 64 && (b.k_c * 64 * 5 <= caches.l2 / 4 || b.k_c == 64))) << what;
        EXPECT_TRUE(b.m_c == b.m_r || b.m_c * b.k_c * 4 <= caches.l2 * 3 / 8) << what;
        EXPECT_EQ(b.m_c % b.m_r, 0) << what;
        EXPECT_EQ(b.b_lookahead > 0, b.k_c * 64 * b.n_r > caches.l1d / 2) << what;
      }
      EXPECT_GE(k_c, previous_k_c) << "M=" << m << " K=" << k << " L2=" << caches.l2;
      previous_k_c = k_c;
    }
  }
}

// A one-shot GEMM's threads share its tiles: a group narrower than a panel per thread is one
// panel of as many vectors as it has (H=32: 14 x 2), where a step's threads each compute their
// own vectors of the group. Only the split (a step's) kernels prefetch B's rows: a one-shot
// GEMM's run faster without.
// On packed B each prefetches the panel its thread multiplies next into L2 instead: a one-shot
// GEMM's tile a line every unrolled k iteration (its unit's tiles share the panel), a step's
// four where its share of B streams from L3 and a panel serves two row blocks or more; none
// where L2 holds the share, for a single row block or with B in place.
TEST(GemmBlocking, SharedNarrowGroupsAreOnePanel) {
  for (const auto& [group, vectors] : {std::pair<std::int64_t, std::int64_t>{32, 2}, {20, 2}, {48, 3}}) {
    const GemmBlocking shared = choose_blocking(6400, 500, group, 2, true, {}, true);
    EXPECT_EQ(shared.n_r, vectors) << "group " << group;
    EXPECT_GE(shared.m_r * shared.n_r, 24) << "group " << group;
    const GemmBlocking split = choose_blocking(6400, 500, group, 2, true);
    for (int tid = 0; tid < 2; ++tid)
      EXPECT_GT(split.thread_columns(tid).second, split.thread_columns(tid).first) << "group " << group;
  }
  for (const std::int64_t group : {800, 512, 1024, 256})
    for (int threads : {2, 3}) {
      const GemmBlocking shared = choose_blocking(6000, 800, group, threads, true, {}, true);
      const GemmBlocking split = choose_blocking(6000, 800, group, threads, true);
      EXPECT_EQ(shared.b_lookahead, 0) << "group " << group;
      EXPECT_GT(split.b_lookahead, 0) << "group " << group;
      EXPECT_EQ(shared.next_panel_lines, 1) << "group " << group;
      EXPECT_EQ(split.next_panel_lines, 0) << "group " << group << ", B's share in L2";
      const std::int64_t streamed = 3 * CacheSizes{}.l2;
      EXPECT_EQ(choose_blocking(6000, 800, group, threads, true, {}, false, streamed).next_panel_lines, 4)
          << "group " << group;
      EXPECT_EQ(choose_blocking(6000, 800, group, threads, false, {}, true).next_panel_lines, 0)
          << "group " << group << ", B in place";
      const GemmBlocking one_row_block = choose_blocking(1, 800, group, threads, true, {}, false, streamed);
      EXPECT_GT(one_row_block.b_lookahead, 0) << "group " << group;
      EXPECT_EQ(one_row_block.next_panel_lines, 0) << "group " << group;
    }
}

// A step of one row (N=1) costs the same per vector of B from two vectors on: the wider tile
// wins those ties, up to four vectors (more lines of W_hh in flight a k step). Strictly cheaper
// tiles still win: H=800 splits evenly in 80-column panels (5 vectors), not in 64-column ones.
TEST(GemmBlocking, OneRowTilesTakeTheWiderOfEqualCosts) {
  const std::int64_t streamed = 3 * CacheSizes{}.l2;
  for (const std::int64_t group : {1024, 1536, 512}) {
    const GemmBlocking b = choose_blocking(1, group, group, 2, true, {}, false, streamed);
    EXPECT_EQ(b.m_r, 1) << "group " << group;
    EXPECT_EQ(b.n_r, 4) << "group " << group;
  }
  EXPECT_EQ(choose_blocking(1, 800, 800, 2, true, {}, false, streamed).n_r, 5);
  EXPECT_NE(choose_blocking(2, 1024, 1024, 2, true, {}, false, streamed).m_r, 1) << "two rows: no GEMV";
}

// A recurrence's step whose share of W_hh per thread is larger than L2 streams it from L3 at
// every step, and L2, taking those fills, serves each panel's vectors more slowly: the model
// then prefers tiles of more rows, whose panels L2 serves to fewer row blocks (DS2 LSTM: 10 x 2,
// two row blocks of N = 20, against 5 x 5 and four with the weights in L2).
TEST(GemmBlocking, StepsStreamingFromL3TakeTallerTiles) {
  const CacheSizes caches{48 * 1024, 2 * 1024 * 1024};
  for (const auto& [m, group, groups] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{20, 800, 4},
                                         {16, 800, 4}, {8, 800, 4}, {20, 800, 3}}) {
    const std::int64_t share = 800 * group * groups * 4 / 2;
    const GemmBlocking in_l2 = choose_blocking(m, 800, group, 2, true, caches, false, caches.l2);
    const GemmBlocking from_l3 = choose_blocking(m, 800, group, 2, true, caches, false, share);
    EXPECT_LT(from_l3.row_blocks(m), in_l2.row_blocks(m))
        << fmt::format("M={} group={}: {}x{} from L3, {}x{} from L2", m, group, from_l3.m_r, from_l3.n_r, in_l2.m_r,
                       in_l2.n_r);
  }
}

// A tile reads its rows of A in place a line every 16 k steps; rows 4 KiB apart all fall into
// one set of L1 (64 sets of 64 bytes), so no tile takes more of them than a set has ways (8),
// while rows whose stride spreads them over the sets, or a packed A, leave the choice as it was.
// GRU H=1024 N=64: the step's 13 x 2 tiles on h (1024 floats a row) ran at 2/3 of 8 x 2's rate.
TEST(GemmBlocking, TilesReadNoMoreRowsThanAnL1SetHolds) {
  EXPECT_EQ(max_rows_in_l1_sets(4096), 8);
  EXPECT_EQ(max_rows_in_l1_sets(3 * 4096), 8);
  EXPECT_EQ(max_rows_in_l1_sets(2048), 16);
  EXPECT_EQ(max_rows_in_l1_sets(3200), 8 * 32);  // 50 lines a row: 32 sets
  EXPECT_GT(max_rows_in_l1_sets(0), 1 << 20);    // packed A
  const CacheSizes caches{32 * 1024, 1024 * 1024};
  const std::int64_t share = 3 * 1024 * 1024 * 4 / 2;  // W_hh of GRU H=1024, a thread's half
  for (const auto& [m, k, group] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{64, 1024, 1024},
                                    {20, 1024, 1024}, {128, 512, 512}, {30, 800, 800}}) {
    SCOPED_TRACE(fmt::format("M={} K={} group={}", m, k, group));
    const GemmBlocking packed = choose_blocking(m, k, group, 2, true, caches, false, share);
    const GemmBlocking aliased = choose_blocking(m, k, group, 2, true, caches, false, share, 4096);
    const GemmBlocking spread = choose_blocking(m, k, group, 2, true, caches, false, share, 4 * 1000);
    EXPECT_LE(aliased.m_r, 8);
    if (packed.m_r <= 8) {
      EXPECT_EQ(aliased.m_r * 100 + aliased.n_r, packed.m_r * 100 + packed.n_r);
    }
    EXPECT_EQ(spread.m_r * 100 + spread.n_r, packed.m_r * 100 + packed.n_r);
  }
  EXPECT_GT(choose_blocking(64, 1024, 1024, 2, true, caches, false, share).m_r, 8) << "the case the cap is for";
}

// Under that cap every candidate tile is short, and the search weighs each one's loads (about
// 0.18 cycles of the FMAs' each): the tiles it takes make fewer loads per FMA than the 8 x 2 and
// 7 x 2 (0.63 and 0.64) that the model took without them, which ran 1-9% slower on these shapes.
TEST(GemmBlocking, CappedTilesWeighTheirLoads) {
  const CacheSizes caches;  // 48 KiB of L1d, 2 MiB of L2
  struct Case {
    const char* what;
    std::int64_t m, k, group;
    int threads;
    bool shared;
    std::int64_t b_share_bytes;
  };
  for (const Case& c : {Case{"LSTM H=1024 N=256: a lane's 128 rows of h", 128, 1024, 1024, 1, false, 16 << 20},
                        Case{"LSTM H=1024 N=20: the step, both threads", 20, 1024, 1024, 2, false, 8 << 20},
                        Case{"I=1024: an input projection", 2000, 1024, 1024, 2, true, 0}}) {
    const GemmBlocking b = choose_blocking(c.m, c.k, c.group, c.threads, true, caches, c.shared, c.b_share_bytes, 4096);
    const double loads_per_fma = static_cast<double>(b.m_r + b.n_r) / static_cast<double>(b.m_r * b.n_r);
    EXPECT_LE(b.m_r, 8) << c.what;
    EXPECT_LT(loads_per_fma, 0.5) << fmt::format("{}: {} x {}", c.what, b.m_r, b.n_r);
  }
}

// A step's threads split each group at whole vectors (GemmBlocking::vector_split), whatever
// tile the model takes: H = 800 in 32-column panels gives them 400 and 400 columns, not the 416
// and 384 of whole panels (the DS2 step: one thread streamed 4% more of W_hh, the other waited
// for it at every step), H = 200 96 and 104 (64-column panels gave 128 and 72: 0.85x oneDNN on
// LSTM N=100). No thread has more than a vector more than another, and every part of a panel
// that a boundary cuts has a kernel of its width, reading its k rows as the packed panel holds
// them (the part's columns to the next cut or the panel's end apart).
TEST(GemmBlocking, ThreadsGetBalancedShares) {
  for (const auto& [m, k, group] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{100, 200, 200},
                                    {20, 800, 800}, {128, 512, 512}, {64, 300, 300}, {32, 136, 136}, {6, 240, 240}})
    for (int threads : {2, 3, 4}) {
      const std::string what = fmt::format("M={} K={} group={} threads={}", m, k, group, threads);
      GemmStep g{.what = "step", .m = m, .n = group, .k = k, .a = {.buffer = Buffer::x},
                 .b = {.buffer = Buffer::weights}, .c = {.buffer = Buffer::y}, .lda = k, .ldb = group, .ldc = group};
      g.blocking.packed_b = true;
      std::vector<KernelDesc> kernels;
      g = plan_generated_gemm(g, group, threads, kernels, /*recurrent=*/true, CacheSizes{});
      const GemmBlocking& b = g.blocking;
      EXPECT_TRUE(b.vector_split) << what;
      std::int64_t widest = 0, narrowest = group, covered = 0;
      for (int tid = 0; tid < threads; ++tid) {
        const auto [c0, c1] = b.thread_columns(tid);
        EXPECT_EQ(c0, covered) << what << ": thread " << tid << " starts where the one before ends";
        covered = c1;
        widest = std::max(widest, c1 - c0);
        narrowest = std::min(narrowest, c1 - c0);
        const auto [p0, p1] = b.thread_panels(tid);
        for (std::int64_t p = p0; p < p1; ++p) {
          const GemmBlocking::Part part = b.panel_part(tid, p);
          const std::int64_t width = part.c1 - part.c0, stride = part.stride;
          ASSERT_GT(width, 0) << what << ": thread " << tid << " panel " << p;
          EXPECT_EQ(part.first, part.c0 - p * b.panel_columns()) << what;
          EXPECT_EQ(part.first + stride, b.part_end(p, part.first)) << what;
          EXPECT_GE(stride, width) << what;
          EXPECT_EQ(stride % 16, 0) << what;
          for (int beta = 0; beta < 2; ++beta) {
            const int kernel = b.kernel(false, width, stride, beta);
            ASSERT_GE(kernel, 0) << what << ": no kernel for " << width << " of " << stride << " columns";
            const KernelDesc& d = kernels[static_cast<std::size_t>(kernel)];
            EXPECT_EQ(d.vectors, (width + 15) / 16) << what;
            EXPECT_EQ(d.n_tail, width % 16) << what;
            EXPECT_EQ(d.b_k_stride, stride) << what << ": a part's k rows lie its stride apart in the packed panel";
          }
        }
      }
      EXPECT_EQ(covered, group) << what;
      EXPECT_LE(widest - narrowest, 16) << fmt::format("{}: {}x{} tile", what, b.m_r, b.n_r);
    }
}

}  // namespace
}  // namespace rnnjit
