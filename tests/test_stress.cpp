// Concurrency under load: 8 threads at once create Rnn and Execution objects for random small
// problems (every cell, I and H in 1..40, 1..3 layers, one or two directions, T in 1..6, N in
// 1..5, inference and training), run forward and backward concurrently, and check every result
// against the double-precision reference. Half of the problems come from a shared pool, so threads
// hit the same cached plans and kernels at the same time; the cache is bounded to 4 entries
// (RNNJIT_CACHE_CAPACITY, set before the cache's first use), so entries are evicted while other
// threads use them. Executions are kept alive across iterations and run again after eviction,
// bitwise equal to their first run. A second test mixes in problems large enough for a plan to
// split its steps across the shared worker team. Built under TSan by tools/test.sh
// --sanitize=thread (ctest -R stress).
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "codegen/plan.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit::test {
namespace {

// The cache reads RNNJIT_CACHE_CAPACITY once, when it is first used: before main() is early enough.
constexpr int kCacheCapacity = 4;
[[maybe_unused]] const bool kCapacitySet = [] {
  ::setenv("RNNJIT_CACHE_CAPACITY", std::to_string(kCacheCapacity).c_str(), 1);
  return true;
}();

struct Problem {
  RnnConfig config;
  Shape shape;
  Mode mode;
  unsigned seed;
  Isa isa = Isa::detect;
};

Problem random_problem(std::mt19937& rng) {
  auto in = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  static constexpr CellKind kCells[] = {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru};
  Problem p;
  p.config = {kCells[in(0, 3)], in(1, 40), in(1, 40), in(1, 3), in(0, 1) == 1};
  p.shape = {in(1, 6), in(1, 5)};
  p.mode = in(0, 1) == 1 ? Mode::training : Mode::inference;
  p.seed = static_cast<unsigned>(rng());
  // One in six runs the OpenBLAS GEMMs and scalar gate kernels (what an AVX2 CPU runs).
  p.isa = in(0, 5) == 0 && detect_isa() != Isa::reference ? Isa::avx2 : Isa::detect;
  return p;
}

// Runs `rc` through `ex` and checks every output against the reference.
Tensors run_and_check(const RnnCase& rc, Execution& ex, const std::string& what) {
  const bool training = ex.mode() == Mode::training;
  const Tensors got = rc.run(ex);
  const Tensors want = rc.reference(training);
  const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
  expect_close(got.y, want.y, tol, what + " y");
  expect_close(got.hy, want.hy, tol, what + " hy");
  expect_close(got.cy, want.cy, tol, what + " cy");
  if (training) {
    expect_close(got.dx, want.dx, gtol, what + " dx");
    expect_close(got.dhx, want.dhx, gtol, what + " dhx");
    expect_close(got.dcx, want.dcx, gtol, what + " dcx");
    expect_close(got.dw, want.dw, gtol, what + " dweights");
  }
  return got;
}

std::string describe(const Problem& p) {
  return fmt::format("{} T={} N={} {} isa {}", rnnjit::describe(p.config), p.shape.seq_len, p.shape.batch,
                     to_string(p.mode), to_string(p.isa));
}

// An Execution kept alive with its problem and first result.
struct Kept {
  std::unique_ptr<RnnCase> rc;
  std::unique_ptr<Execution> ex;
  Tensors first;
  std::string what;
};

void expect_same(const Tensors& a, const Tensors& b, const std::string& what) {
  EXPECT_EQ(a.y, b.y) << what;
  EXPECT_EQ(a.hy, b.hy) << what;
  EXPECT_EQ(a.cy, b.cy) << what;
  EXPECT_EQ(a.dx, b.dx) << what;
  EXPECT_EQ(a.dhx, b.dhx) << what;
  EXPECT_EQ(a.dcx, b.dcx) << what;
  EXPECT_EQ(a.dw, b.dw) << what;
}

TEST(Stress, CacheCapacityIsForcedSmall) {
  EXPECT_EQ(cache_stats().capacity, static_cast<std::size_t>(kCacheCapacity));
}

TEST(Stress, ConcurrentRandomProblemsMatchTheReference) {
  constexpr int kThreads = 8, kIterations = 150, kPool = 12;
  std::mt19937 pool_rng(20240611);
  std::vector<Problem> pool;
  for (int i = 0; i < kPool; ++i) pool.push_back(random_problem(pool_rng));

  const CacheStats before = cache_stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      std::mt19937 rng(1000 + static_cast<unsigned>(t));
      std::deque<Kept> kept;
      for (int it = 0; it < kIterations; ++it) {
        const bool shared = rng() % 2 == 0;
        const Problem p = shared ? pool[rng() % pool.size()] : random_problem(rng);
        const std::string what = fmt::format("thread {} iteration {}: {}", t, it, describe(p));
        SCOPED_TRACE(what);
        try {
          auto rc = std::make_unique<RnnCase>(p.config, p.shape, p.seed);
          const Rnn rnn(p.config, {Backend::jit, p.isa});
          auto ex = std::make_unique<Execution>(rnn.prepare(p.shape, p.mode));
          Tensors first = run_and_check(*rc, *ex, what);
          kept.push_back({std::move(rc), std::move(ex), std::move(first), what});
          if (kept.size() > 2) kept.pop_front();
          // Every third iteration, run an older Execution again: its plan and kernels have most
          // likely been evicted from the cache meanwhile.
          if (it % 3 == 2) {
            Kept& old = kept.front();
            expect_same(old.rc->run(*old.ex), old.first, "rerun of " + old.what);
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": " << e.what();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const CacheStats after = cache_stats();
  EXPECT_LE(after.kernels, static_cast<std::size_t>(kCacheCapacity));
  EXPECT_LE(after.plans, static_cast<std::size_t>(kCacheCapacity));
  // Eviction happened (more plans were made than the cache holds), and so did sharing.
  EXPECT_GT(after.plan_misses - before.plan_misses, static_cast<std::uint64_t>(kCacheCapacity));
  EXPECT_GT(after.kernel_misses - before.kernel_misses, static_cast<std::uint64_t>(kCacheCapacity));
  EXPECT_GT(after.plan_hits - before.plan_hits, 0u);
}

// Problems with enough work per step for the planner to split it over 2 threads share the
// process's worker team (one run at a time) with the small ones running inline.
TEST(Stress, SplitPlansShareTheWorkerTeam) {
  const Problem big[] = {
      {{CellKind::gru, 64, 128, 1, false}, {20, 16}, Mode::training, 7},
      {{CellKind::lstm, 48, 96, 1, true}, {16, 16}, Mode::training, 8},
      {{CellKind::rnn_tanh, 128, 256, 1, false}, {16, 16}, Mode::inference, 9},
  };
  for (const Problem& p : big) {
    const Execution ex = Rnn(p.config, {Backend::jit, Isa::detect, 2}).prepare(p.shape, p.mode);
    if (ex.plan().isa == Isa::avx512) {
      EXPECT_EQ(ex.plan().threads, 2) << describe(p) << ": not split, the test loses its point";
    }
  }
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&big, t] {
      std::mt19937 rng(77 + static_cast<unsigned>(t));
      for (int it = 0; it < 3; ++it) {
        const Problem p = it == 1 ? big[static_cast<std::size_t>(t) % 3] : random_problem(rng);
        const std::string what = fmt::format("thread {} iteration {}: {}", t, it, describe(p));
        SCOPED_TRACE(what);
        try {
          const RnnCase rc(p.config, p.shape, p.seed);
          Execution ex = Rnn(p.config, {Backend::jit, p.isa, 2}).prepare(p.shape, p.mode);
          run_and_check(rc, ex, what);
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": " << e.what();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

}  // namespace
}  // namespace rnnjit::test
