// The AMX-BF16 GEMM (Options::fpmath bf16) against a naive loop over the same bf16-rounded
// operands, through the planner's tiling and the executor's loops: tails in every dimension (M,
// N, K in {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 800}), one and several column groups, beta
// 0 and 1, 1 and 2 threads (sharing tiles, A rounded together; a recurrence's per-thread
// steps run in test_bf16_rnn). The products of bf16
// values are exact in FP32, so only the FP32 sums may differ from the loop's. Skipped where the
// CPU (or OS) gives no AMX-BF16 tiles.
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
};

// C = A W^T (+ beta C) through a one-stage plan: W [n, k] packed as bf16 tiles, A [m, lda].
std::vector<float> run(const Bf16Case& c, const std::vector<float>& a, std::int64_t lda, const std::vector<float>& w,
                       std::vector<float> out, std::int64_t ldc) {
  Plan plan;
  plan.threads = c.threads;
  GemmStep g{"test", false, true, c.m, c.n, c.k, {Buffer::x, -1, 0}, {Buffer::weights, -1, 0}, {Buffer::y, -1, 0},
             lda, c.k, ldc, c.beta, {}};
  g.blocking.packed_b = true;
  g.blocking.bf16 = true;
  g = plan_generated_gemm(g, c.n / c.groups, c.threads, plan.kernels);
  EXPECT_TRUE(g.blocking.bf16 && g.blocking.pack_a);
  std::vector<float> a_panels(static_cast<std::size_t>(a_panel_elements(g.blocking, c.m, c.k)));
  g.a_panels = {Buffer::workspace, plan.workspace.add("a_panels", Space::workspace, a_panels.size() * sizeof(float)), 0};
  std::vector<float> packed(static_cast<std::size_t>(packed_elements(g.blocking, c.groups, c.k)));
  const int region = plan.workspace.add("packed", Space::packed, packed.size() * sizeof(float));
  plan.pack_weights.push_back(
      Stage{{{PackStep{"pack", {Buffer::weights, -1, 0}, {Buffer::packed, region, 0}, c.k, c.groups, g.blocking}}}});
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
  if (!amx_bf16_usable()) GTEST_SKIP() << "this CPU (or OS) gives no AMX-BF16 tiles";
  const std::int64_t lda = c.k + 3, ldc = c.n + 1;
  const std::vector<float> a = test::uniform(c.m * lda, 1), w = test::uniform(c.n * c.k, 2);
  const std::vector<float> c0 = test::uniform(c.m * ldc, 4);
  const std::vector<float> out = run(c, a, lda, w, c0, ldc);

  test::expect_gemm_within_bound(out, c0, c.m, c.n, c.k, ldc, c.beta, [&](std::int64_t i, std::int64_t j,
                                                                          std::int64_t k) {
    return static_cast<double>(round_to_bf16(a[static_cast<std::size_t>(i * lda + k)])) *
           round_to_bf16(w[static_cast<std::size_t>(j * c.k + k)]);
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
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sweep, Bf16Gemm, testing::ValuesIn(sweep()), [](const auto& info) {
  const Bf16Case& c = info.param;
  return fmt::format("m{}_n{}_k{}_beta{}_th{}_g{}", c.m, c.n, c.k, static_cast<int>(c.beta), c.threads, c.groups);
});

// The executor rounds A as to_bf16 does, ties and special values included: W = [1], so each C
// row is its A value rounded; except a subnormal, which AMX's tdpbf16ps counts as zero.
TEST(Bf16Gemm, RoundsANearestEvenKeepingNaNAndInfinity) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "this CPU (or OS) gives no AMX-BF16 tiles";
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {1.0f + 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-16f, -inf,
                                std::numeric_limits<float>::max(), std::numeric_limits<float>::quiet_NaN(),
                                std::bit_cast<float>(0x7f800001u), -0.0f, 3.0e-39f};
  const Bf16Case c{static_cast<std::int64_t>(a.size()), 1, 1, 0.0f, 1, 1};
  const std::vector<float> out = run(c, a, 1, {1.0f}, std::vector<float>(a.size(), 7.0f), 1);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float want = std::fpclassify(a[i]) == FP_SUBNORMAL ? 0.0f : round_to_bf16(a[i]);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(out[i])) << i << ": " << out[i];
    else EXPECT_EQ(out[i], want) << i << ": A = " << a[i];
  }
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(out[4], inf);
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

TEST(Bf16Rounding, NearestEvenAndSpecialValues) {
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
