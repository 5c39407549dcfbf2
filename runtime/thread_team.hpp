// rnnjit: the process's worker threads. run(n, fn) calls fn(0) on the caller and fn(1..n-1) on
// persistent workers, and returns when all are done; barrier() inside fn meets all n. One run
// at a time: concurrent callers take turns (the cores are shared anyway). Barriers spin briefly
// (a recurrence meets at one after every time step), then yield so that an oversubscribed
// machine still makes progress.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rnnjit {

class ThreadTeam {
 public:
  static ThreadTeam& instance();
  // RNNJIT_NUM_THREADS if set, else the hardware's thread count.
  static int default_threads();

  void run(int n, const std::function<void(int tid)>& fn);
  void barrier();  // only inside run()

  ~ThreadTeam();

 private:
  ThreadTeam() = default;
  void ensure_workers(int n);
  void worker(int tid);

  std::mutex run_mutex_;  // one run at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  int job_threads_ = 0;
  std::uint64_t job_generation_ = 0;
  bool stopping_ = false;
  std::atomic<int> remaining_{0};
  std::vector<std::exception_ptr> errors_;
  // Sense-reversing barrier.
  std::atomic<int> barrier_count_{0};
  std::atomic<std::uint64_t> barrier_generation_{0};
};

}  // namespace rnnjit
