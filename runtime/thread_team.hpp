// rnnjit: the process's worker threads. run(n, fn) calls fn(0) on the caller and fn(1..n-1) on
// persistent workers, and returns when all are done; barrier() inside fn meets all n. One run
// at a time: concurrent callers take turns (the cores are shared anyway). Barriers spin briefly
// (a recurrence meets at one after every time step), then yield so that an oversubscribed
// machine still makes progress; idle workers poll for the next run() for a moment, then sleep.
// The workers run off the CPU the caller of run() is on (Linux would wake them on it).
//
// In a process that already runs an OpenMP runtime's thread pool (PyTorch's intra-op pool is
// one), use_openmp() makes run() start its n threads as a parallel region of that pool
// instead (GOMP_parallel, the entry point `#pragma omp parallel` compiles to, which libgomp
// and Intel's libiomp5 both export): the two pools would otherwise take turns on the same
// cores, the one's workers spinning while the other's wait (docs/python.md).
//
// Shared loops hand out a loop's iterations to whichever thread asks first, so a thread whose
// core runs slower (a busy SMT sibling, another tenant on a cloud host: on this project's VM
// the two vCPUs often differ by 10-50% for milliseconds at a time) takes fewer of them instead
// of making the others wait at the next barrier.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

namespace rnnjit {

class ThreadTeam;

// One thread's view of a loop whose iterations [0, count) the threads of a run() share
// dynamically: next() returns the next unclaimed iteration, or -1 once all are claimed. Every
// thread of the run must open the same shared loops in the same order (ThreadTeam::shared_loop),
// each then calling next() until -1; consumers of the loop's results meet at a barrier first.
// With threads == 1 (or outside a run) it is a plain loop on the calling thread.
class SharedLoop {
 public:
  std::int64_t next();

 private:
  friend class ThreadTeam;
  SharedLoop(ThreadTeam* team, std::uint64_t generation, std::int64_t count)
      : team_(team), generation_(generation), count_(count) {}
  ThreadTeam* team_;  // null: a plain loop
  std::uint64_t generation_;
  std::int64_t count_, local_ = 0;
};

class ThreadTeam {
 public:
  static ThreadTeam& instance();
  // RNNJIT_NUM_THREADS if set, else the hardware's thread count.
  static int default_threads();

  void run(int n, const std::function<void(int tid)>& fn);
  // Runs later run()s on the OpenMP runtime loaded from `library` (already loaded in the
  // process: dlopen with RTLD_NOLOAD), or on the team's own workers again with an empty
  // string. Throws Error where the library is not loaded or lacks the OpenMP entry points.
  void use_openmp(const std::string& library);
  std::string openmp_library() const;
  void barrier();  // only inside run()
  // The calling thread's next shared loop of `count` iterations (see SharedLoop), shared by the
  // run's `threads` threads; threads == 1 gives a plain loop.
  SharedLoop shared_loop(std::int64_t count, int threads);

  ~ThreadTeam();

 private:
  ThreadTeam() = default;
  void ensure_workers(int n);
  void keep_workers_off_callers_cpu();
  void worker(int tid);
  void run_on_own_workers(int n, const std::function<void(int)>& fn);
  bool run_on_openmp(int n, const std::function<void(int)>& fn);
  void start_job(int n);

  // The OpenMP runtime's entry points while use_openmp() is in force (else null).
  struct OpenMp {
    void (*parallel)(void (*fn)(void*), void* data, unsigned threads, unsigned flags) = nullptr;
    int (*num_threads)() = nullptr;
    int (*thread_num)() = nullptr;
    std::string library;
  };
  std::atomic<const OpenMp*> openmp_{nullptr};
  std::vector<std::unique_ptr<OpenMp>> openmp_kept_;  // never freed: a run may still read one

  std::mutex run_mutex_;  // one run at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  int workers_kept_off_ = -1;  // the CPU the workers' affinity leaves out (-1: none yet)
  const std::function<void(int)>* job_ = nullptr;
  int job_threads_ = 0;
  // Written under mutex_; atomic so that a worker can poll them before it takes the mutex.
  std::atomic<std::uint64_t> job_generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> remaining_{0};
  std::vector<std::exception_ptr> errors_;
  // Sense-reversing barrier.
  std::atomic<int> barrier_count_{0};
  std::atomic<std::uint64_t> barrier_generation_{0};
  // The shared loops of the current run: the latest loop's generation (high 32 bits; the n-th
  // loop a thread opens in a run is generation n) and its next unclaimed iteration (low 32).
  friend class SharedLoop;
  std::atomic<std::uint64_t> claims_{0};
};

}  // namespace rnnjit
