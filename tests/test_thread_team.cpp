// The worker team's shared loops: every iteration of every loop is claimed exactly once, by
// whichever thread asks first, however the threads interleave and whatever the loop lengths.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

TEST(SharedLoop, EveryIterationIsClaimedOnce) {
  for (int threads : {2, 3, 4}) {
    // Loops of 0 to 40 iterations back to back, with and without barriers between them: a
    // thread may open loop j + 1 while another still claims in loop j.
    constexpr int kLoops = 3000;
    std::vector<int> counts(kLoops);
    std::vector<std::int64_t> offsets(kLoops + 1, 0);
    for (int j = 0; j < kLoops; ++j) {
      counts[j] = (j * 7) % 41;
      offsets[j + 1] = offsets[j] + counts[j];
    }
    std::vector<std::atomic<int>> claimed(static_cast<std::size_t>(offsets.back()));
    std::vector<std::atomic<int>> by_thread(static_cast<std::size_t>(threads));
    ThreadTeam& team = ThreadTeam::instance();
    team.run(threads, [&](int tid) {
      for (int j = 0; j < kLoops; ++j) {
        SharedLoop loop = team.shared_loop(counts[j], threads);
        for (std::int64_t i = loop.next(); i >= 0; i = loop.next()) {
          EXPECT_LT(i, counts[j]);
          claimed[static_cast<std::size_t>(offsets[j] + i)].fetch_add(1);
          by_thread[static_cast<std::size_t>(tid)].fetch_add(1);
        }
        if (j % 5 == 0) team.barrier();
      }
    });
    for (std::size_t e = 0; e < claimed.size(); ++e) ASSERT_EQ(claimed[e].load(), 1) << "iteration " << e;
    int total = 0;
    for (auto& n : by_thread) total += n.load();
    EXPECT_EQ(total, offsets.back());
  }
}

TEST(SharedLoop, OneThreadIsAPlainLoop) {
  SharedLoop loop = ThreadTeam::instance().shared_loop(3, 1);
  EXPECT_EQ(loop.next(), 0);
  EXPECT_EQ(loop.next(), 1);
  EXPECT_EQ(loop.next(), 2);
  EXPECT_EQ(loop.next(), -1);
  EXPECT_EQ(loop.next(), -1);
}

TEST(SharedLoop, RunsStartAfresh) {
  // Loop generations restart in every run; a run's first loop must not see the last run's
  // word as newer (and skip its work).
  ThreadTeam& team = ThreadTeam::instance();
  for (int run = 0; run < 50; ++run) {
    std::atomic<int> done{0};
    team.run(2, [&](int) {
      for (int j = 0; j < run % 4 + 1; ++j) {
        SharedLoop loop = team.shared_loop(10, 2);
        for (std::int64_t i = loop.next(); i >= 0; i = loop.next()) done.fetch_add(1);
      }
    });
    ASSERT_EQ(done.load(), 10 * (run % 4 + 1)) << "run " << run;
  }
}

}  // namespace
}  // namespace rnnjit
