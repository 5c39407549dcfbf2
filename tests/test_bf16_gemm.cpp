// The bf16 GEMMs (Options::fpmath bf16), on AMX-BF16 tiles and on AVX512_BF16 dot products,
// against a naive loop over the same bf16-rounded operands, through the planner's tiling and the
// executor's loops: tails in every dimension (M, N, K in {1, 2, 15, 16, 17, 31, 32, 33, 63, 64,
// 65, 800}), one and several column groups, beta 0 and 1, 1 and 2 threads (sharing tiles, A
// rounded together), a recurrence's per-thread tiles, and training's operands (B a plain matrix,
// A transposed). The products of bf16 values are exact
// in FP32, so only the FP32 sums may differ from the loop's. Each unit's cases skip where the
// CPU (or OS) does not run it.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "codegen/planner.hpp"
#include "kernels/bf16.hpp"
#include "runtime/cache.hpp"
#include "runtime/executor.hpp"
#include "tests/gemm_check.hpp"
#include "tests/uniform.hpp"

namespace rnnjit {
namespace {

struct Bf16Case {
  std::int64_t m, n, k;
  float beta;
  int threads;
  std::int64_t groups;
  Bf16Unit unit = Bf16Unit::amx;
  bool recurrent = false;  // a recurrence's step: each thread its own panels and its own copy of A
  // The training GEMMs' operands: B a plain [k, n] matrix (W in backward data, x or h in a weight
  // gradient) rather than W^T, and A^T [k, m] (a weight gradient's gate gradients) rather than A.
  bool plain_b = false;
  bool trans_a = false;
};

bool runs(Bf16Unit unit) { return unit == Bf16Unit::amx ? amx_bf16_usable() : avx512_bf16_usable(); }
#define SKIP_UNLESS_RUNS(unit) \
  if (!runs(unit)) GTEST_SKIP() << "this CPU (or OS) does not run " << to_string(unit)

// C = op(A) B (+ beta C) through a one-stage plan: B (W^T of W [n, k], or plain [k, ldb]) packed
// as bf16 tiles, A [m, lda] (or A^T [k, lda]).
std::vector<float> run(const Bf16Case& c, const std::vector<float>& a, std::int64_t lda, const std::vector<float>& w,
                       std::int64_t ldb, std::vector<float> out, std::int64_t ldc) {
  Plan plan;
  plan.threads = c.threads;
  GemmStep g{.what = "test", .trans_a = c.trans_a, .trans_b = !c.plain_b, .m = c.m, .n = c.n, .k = c.k,
             .a = {Buffer::x, -1, 0}, .b = {Buffer::weights, -1, 0}, .c = {Buffer::y, -1, 0}, .lda = lda, .ldb = ldb,
             .ldc = ldc, .beta = c.beta};
  g.blocking.packed_b = true;
  g.blocking.bf16 = true;
  g.blocking.bf16_unit = c.unit;
  g = plan_generated_gemm(g, c.n / c.groups, c.threads, plan.kernels, c.recurrent);
  EXPECT_TRUE(g.blocking.bf16 && g.blocking.pack_a);
  const KernelKind kind = c.unit == Bf16Unit::amx ? KernelKind::amx_gemm : KernelKind::dpbf16_gemm;
  for (const KernelDesc& d : plan.kernels) EXPECT_EQ(d.kind_of(), kind) << kernel_name(d);
  std::vector<float> a_panels(static_cast<std::size_t>(a_panel_elements(g.blocking, c.m, c.k)));
  g.a_panels = {Buffer::workspace, plan.workspace.add("a_panels", Space::workspace, a_panels.size() * sizeof(float)), 0};
  std::vector<float> packed(static_cast<std::size_t>(packed_elements(g.blocking, c.groups, c.k)));
  const int region = plan.workspace.add("packed", Space::packed, packed.size() * sizeof(float));
  plan.pack_weights.push_back(
      Stage{{{PackStep{.what = "pack", .src = {Buffer::weights, -1, 0}, .dst = {Buffer::packed, region, 0}, .k = c.k,
                       .groups = c.groups, .blocking = g.blocking, .transpose = !c.plain_b, .ld = ldb}}}});
  g.b = {Buffer::packed, region, 0};
  plan.forward.push_back(Stage{{{g}}});
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  for (const KernelDesc& d : plan.kernels) kernels.push_back(Cache::instance().kernel(d));
  auto shared = std::make_shared<const Plan>(plan);
  Executor ex(shared, kernels);
  Bindings bind;
  bind.workspace = reinterpret_cast<std::byte*>(a_panels.data());
  bind.packed = reinterpret_cast<std::byte*>(packed.data());
  bind.bind(Buffer::x, a.data());
  bind.bind(Buffer::weights, w.data());
  bind.bind(Buffer::y, out.data());
  ex.run(shared->pack_weights, bind);
  ex.run(shared->forward, bind);
  return out;
}

void check(const Bf16Case& c) {
  SKIP_UNLESS_RUNS(c.unit);
  const std::int64_t lda = (c.trans_a ? c.m : c.k) + 3, ldb = c.plain_b ? c.n + 5 : c.k, ldc = c.n + 1;
  const std::vector<float> a = test::uniform((c.trans_a ? c.k : c.m) * lda, 1);
  const std::vector<float> w = test::uniform(c.plain_b ? c.k * ldb : c.n * c.k, 2);
  const std::vector<float> c0 = test::uniform(c.m * ldc, 4);
  const std::vector<float> out = run(c, a, lda, w, ldb, c0, ldc);

  test::expect_gemm_within_bound(out, c0, c.m, c.n, c.k, ldc, c.beta, [&](std::int64_t i, std::int64_t j,
                                                                          std::int64_t k) {
    const std::int64_t ai = c.trans_a ? k * lda + i : i * lda + k, bi = c.plain_b ? k * ldb + j : j * c.k + k;
    return static_cast<double>(round_to_bf16(a[static_cast<std::size_t>(ai)])) *
           round_to_bf16(w[static_cast<std::size_t>(bi)]);
  });
}

class Bf16Gemm : public testing::TestWithParam<Bf16Case> {};
TEST_P(Bf16Gemm, MatchesNaiveLoopOnRoundedOperands) { check(GetParam()); }

std::vector<Bf16Case> sweep() {
  const std::int64_t sizes[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 800};
  std::vector<Bf16Case> out;
  int i = 0;
  for (std::int64_t m : sizes)
    for (std::int64_t n : sizes)
      for (std::int64_t k : sizes) {
        if (m * n * k > 800 * 65 * 65) continue;  // keep the naive loop quick
        const float beta = i % 2 ? 1.0f : 0.0f;
        const int threads = 1 + (i / 2) % 2;
        ++i;
        if (i % 3) continue;  // a third of the product, still covering each size in each role
        out.push_back({m, n, k, beta, threads, 1});
      }
  out.push_back({20, 3200, 800, 0.0f, 2, 4});   // the DS2 recurrent step's shape, by gate
  out.push_back({600, 3200, 800, 0.0f, 2, 4});  // an input projection, several m blocks
  out.push_back({45, 150, 70, 1.0f, 2, 3});     // groups of 50: a column tail in every group
  out.push_back({33, 96, 40, 0.0f, 2, 6});      // groups of 16: one column tile per panel
  // A recurrence's step: 20 rows in one tile, 1 row in two-vector tiles, 40 rows in two blocks;
  // 16- or 32-column panels split between the threads, tails in K and in each gate's columns.
  out.push_back({20, 3200, 800, 1.0f, 2, 4, Bf16Unit::amx, true});
  out.push_back({1, 4 * 115, 33, 0.0f, 2, 4, Bf16Unit::amx, true});
  out.push_back({40, 3 * 50, 70, 1.0f, 1, 3, Bf16Unit::amx, true});
  out.push_back({7, 1024, 65, 0.0f, 2, 1, Bf16Unit::amx, true});
  // Training: backward data's dgates W (B plain, one-shot and per step), a weight gradient's
  // dgates^T x (A transposed too: columns of A rounded 16 at a time, in blocks of 128 rows).
  for (std::int64_t m : {1, 17, 33, 130})
    for (std::int64_t n : {1, 16, 31, 65})
      for (std::int64_t k : {2, 17, 64, 300}) {
        const int threads = 1 + static_cast<int>((m + n + k) % 2);
        out.push_back({m, n, k, (m + k) % 2 ? 1.0f : 0.0f, threads, 1, Bf16Unit::amx, false, true, true});
        if (m < 130) out.push_back({m, n, k, 0.0f, threads, 1, Bf16Unit::amx, false, true, false});
      }
  out.push_back({20, 800, 3200, 1.0f, 2, 1, Bf16Unit::amx, true, true});       // DS2's recurrent gradient
  out.push_back({70, 800, 3200, 0.0f, 2, 1, Bf16Unit::amx, false, true});      // an input gradient
  out.push_back({3200 / 8, 160, 600, 0.0f, 2, 2, Bf16Unit::amx, false, true, true});  // a dW, 2 groups
  const std::size_t per_unit = out.size();
  for (std::size_t i = 0; i < per_unit; ++i) {
    out.push_back(out[i]);
    out.back().unit = Bf16Unit::avx512_bf16;
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sweep, Bf16Gemm, testing::ValuesIn(sweep()), [](const auto& info) {
  const Bf16Case& c = info.param;
  return fmt::format("{}_m{}_n{}_k{}_beta{}_th{}_g{}{}{}{}", to_string(c.unit), c.m, c.n, c.k,
                     static_cast<int>(c.beta), c.threads, c.groups, c.recurrent ? "_step" : "",
                     c.plain_b ? "_plainB" : "", c.trans_a ? "_transA" : "");
});

// The executor rounds A as to_bf16 does, ties and special values included: W = [1], so each C
// row is its A value rounded; except a subnormal, which tdpbf16ps and vdpbf16ps count as zero.
class Bf16Rounding : public testing::TestWithParam<Bf16Unit> {};
TEST_P(Bf16Rounding, RoundsANearestEvenKeepingNaNAndInfinity) {
  SKIP_UNLESS_RUNS(GetParam());
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {1.0f + 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-16f, -inf,
                                std::numeric_limits<float>::max(), std::numeric_limits<float>::quiet_NaN(),
                                std::bit_cast<float>(0x7f800001u), -0.0f, 3.0e-39f};
  const Bf16Case c{static_cast<std::int64_t>(a.size()), 1, 1, 0.0f, 1, 1, GetParam()};
  const std::vector<float> out = run(c, a, 1, {1.0f}, 1, std::vector<float>(a.size(), 7.0f), 1);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float want = std::fpclassify(a[i]) == FP_SUBNORMAL ? 0.0f : round_to_bf16(a[i]);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(out[i])) << i << ": " << out[i];
    else EXPECT_EQ(out[i], want) << i << ": A = " << a[i];
  }
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(out[4], inf);
}
INSTANTIATE_TEST_SUITE_P(Units, Bf16Rounding, testing::Values(Bf16Unit::amx, Bf16Unit::avx512_bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// AVX512_BF16's register tiles: a one-shot GEMM's 6 rows of 4 column tiles; a recurrence's
// step in the fewest row blocks (its panels stream from L2 or L3 once per block): N = 20 as
// one block of 20 rows of one column tile, N = 40 as two of 20, a few rows in two-tile panels.
TEST(Bf16Blocking, DotProductTilesFitTheRegisters) {
  const CacheSizes caches;
  auto tile = [&](std::int64_t m, std::int64_t group, int threads, bool shared) {
    const GemmBlocking b = choose_bf16_blocking(m, 800, group, threads, caches, shared, Bf16Unit::avx512_bf16);
    EXPECT_LE(b.m_r * b.n_r + b.n_r + 2, 32) << m << " rows";
    return std::pair{b.m_r, b.n_r};
  };
  EXPECT_EQ(tile(6000, 800, 2, true), (std::pair<std::int64_t, std::int64_t>{6, 4}));
  EXPECT_EQ(tile(20, 800, 2, false), (std::pair<std::int64_t, std::int64_t>{20, 1}));
  EXPECT_EQ(tile(40, 800, 2, false), (std::pair<std::int64_t, std::int64_t>{20, 1}));
  EXPECT_EQ(tile(1, 1024, 2, false), (std::pair<std::int64_t, std::int64_t>{1, 2}));
  EXPECT_EQ(tile(1, 800, 2, false), (std::pair<std::int64_t, std::int64_t>{1, 1}));  // 32-column panels split unevenly
  EXPECT_EQ(tile(3, 40, 1, true), (std::pair<std::int64_t, std::int64_t>{3, 3}));
}

// A recurrence's step splits each group's panels between the threads: 16-column panels where
// 32-column ones would split unevenly (H = 800: 25 panels of 32, 50 of 16), 32-column ones
// otherwise. A one-shot GEMM's threads claim tiles as they go and keep the wider panels.
TEST(Bf16Blocking, RecurrenceStepSplitsTheColumnsEvenly) {
  const CacheSizes caches;
  auto widths = [](const GemmBlocking& b) {
    std::vector<std::int64_t> w;
    for (int tid = 0; tid < b.threads; ++tid) w.push_back(b.thread_columns(tid).second - b.thread_columns(tid).first);
    return w;
  };
  const GemmBlocking uneven = choose_bf16_blocking(20, 800, 800, 2, caches, false);
  EXPECT_EQ(uneven.n_r, 1);
  EXPECT_EQ(widths(uneven), (std::vector<std::int64_t>{400, 400}));
  const GemmBlocking even = choose_bf16_blocking(20, 1024, 1024, 2, caches, false);
  EXPECT_EQ(even.n_r, 2);
  EXPECT_EQ(widths(even), (std::vector<std::int64_t>{512, 512}));
  EXPECT_EQ(choose_bf16_blocking(20, 800, 800, 1, caches, false).n_r, 2);
  EXPECT_EQ(choose_bf16_blocking(6000, 800, 800, 2, caches, true).n_r, 2);
  // Three threads over H = 100: 4 panels of 32 split 32 : 32 : 36 (the last is 4 wide), 7 of
  // 16 split 32 : 32 : 36 as well: no gain, the wider panels stay.
  EXPECT_EQ(choose_bf16_blocking(20, 100, 100, 3, caches, false).n_r, 2);
}

TEST(Bf16ToBf16, NearestEvenAndSpecialValues) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);  // the odd one rounds up
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-16f), 0x3f81);  // past halfway: up
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::bit_cast<float>(0x7f800001u)))));  // a NaN never becomes inf
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the largest bf16
}

}  // namespace
}  // namespace rnnjit
