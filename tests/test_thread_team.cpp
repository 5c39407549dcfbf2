// The worker team's shared loops: every iteration of every loop is claimed exactly once, by
// whichever thread asks first, however the threads interleave and whatever the loop lengths.
// And the workers' CPUs: any the caller may use but the one it runs on. And runs as regions of
// an OpenMP pool (use_openmp, as rnnjit.torch does with torch's).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <vector>

#include "rnnjit/error.hpp"
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

// A worker woken on the caller's CPU shares it until the scheduler's next balancing (ms on a
// VM): run() keeps the workers off the CPU the caller runs on, and on every other CPU the
// caller may use. A caller confined to one CPU leaves them where they were.
TEST(ThreadTeam, WorkersRunOffTheCallersCpu) {
  cpu_set_t callers;
  ASSERT_EQ(sched_getaffinity(0, sizeof callers, &callers), 0);
  if (CPU_COUNT(&callers) < 2) GTEST_SKIP() << "the test process may use only one CPU";
  ThreadTeam& team = ThreadTeam::instance();
  for (int threads : {2, 3}) {
    std::vector<cpu_set_t> masks(static_cast<std::size_t>(threads));
    team.run(threads, [&](int tid) {
      if (tid > 0) sched_getaffinity(0, sizeof(cpu_set_t), &masks[static_cast<std::size_t>(tid)]);
    });
    for (int tid = 1; tid < threads; ++tid) {
      const cpu_set_t& m = masks[static_cast<std::size_t>(tid)];
      EXPECT_EQ(CPU_COUNT(&m), CPU_COUNT(&callers) - 1) << "worker " << tid;
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &m)) {
          EXPECT_TRUE(CPU_ISSET(cpu, &callers)) << "worker " << tid << " on CPU " << cpu;
        }
      }
    }
  }
  // Confined to one CPU, the caller leaves the workers a CPU to run on.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  team.run(2, [&](int tid) {
    if (tid == 1) sched_getaffinity(0, sizeof mask, &mask);
  });
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof callers, &callers), 0);
  EXPECT_GE(CPU_COUNT(&mask), 1);
}

// The system's libgomp, loaded as torch loads its own; null where it is missing.
void* load_libgomp() { return dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL); }

TEST(ThreadTeam, RunsAsRegionsOfAnOpenMpPool) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "libgomp is not instrumented for ThreadSanitizer";
#endif
  void* gomp = load_libgomp();
  if (!gomp) GTEST_SKIP() << "libgomp.so.1 is not installed";
  auto omp_in_parallel = reinterpret_cast<int (*)()>(dlsym(gomp, "omp_in_parallel"));
  ASSERT_NE(omp_in_parallel, nullptr);
  ThreadTeam& team = ThreadTeam::instance();
  EXPECT_THROW(team.use_openmp("libnot-loaded-here.so"), Error);
  team.use_openmp("libgomp.so.1");
  EXPECT_EQ(team.openmp_library(), "libgomp.so.1");
  for (int threads : {2, 3}) {
    std::vector<int> ran(static_cast<std::size_t>(threads), 0), in_region(ran);
    std::atomic<int> before{0}, seen_after_barrier{0};
    std::atomic<std::int64_t> claimed{0};
    team.run(threads, [&](int tid) {
      ++ran[static_cast<std::size_t>(tid)];
      in_region[static_cast<std::size_t>(tid)] = omp_in_parallel();
      before.fetch_add(1);
      team.barrier();
      seen_after_barrier.fetch_add(before.load() == threads ? 1 : 0);
      SharedLoop loop = team.shared_loop(1000, threads);
      for (std::int64_t i = loop.next(); i >= 0; i = loop.next()) claimed.fetch_add(i + 1);
    });
    EXPECT_EQ(ran, std::vector<int>(static_cast<std::size_t>(threads), 1));
    EXPECT_EQ(in_region, std::vector<int>(static_cast<std::size_t>(threads), 1)) << "OpenMP threads ran it";
    EXPECT_EQ(seen_after_barrier.load(), threads) << "the barrier met all threads";
    EXPECT_EQ(claimed.load(), 1000 * 1001 / 2);
  }
  // An exception on a thread comes back to the caller.
  EXPECT_THROW(team.run(2, [](int tid) {
    if (tid == 1) throw Error("thrown on thread 1");
  }), Error);
  // Called from inside another region (nested regions get one thread): the own workers run it.
  auto parallel = reinterpret_cast<void (*)(void (*)(void*), void*, unsigned, unsigned)>(dlsym(gomp, "GOMP_parallel"));
  auto thread_num = reinterpret_cast<int (*)()>(dlsym(gomp, "omp_get_thread_num"));
  struct Outer {
    ThreadTeam* team;
    int (*thread_num)();
    std::atomic<int> ran{0};
  } outer{&team, thread_num};
  parallel(
      [](void* data) {
        auto& o = *static_cast<Outer*>(data);
        if (o.thread_num() == 0) o.team->run(2, [&](int) { o.ran.fetch_add(1); });
      },
      &outer, 2, 0);
  EXPECT_EQ(outer.ran.load(), 2);
  team.use_openmp("");
  EXPECT_EQ(team.openmp_library(), "");
}

}  // namespace
}  // namespace rnnjit
