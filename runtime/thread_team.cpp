#include "runtime/thread_team.hpp"

#include <dlfcn.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {
namespace {

// Shared loops this thread has opened in its current run(): the next one's generation - 1.
thread_local std::uint64_t loops_opened = 0;

void spin_pause(int& spins) {
  if (++spins < 4096) _mm_pause();
  else std::this_thread::yield();
}

// How long a worker keeps polling for the next run() before it sleeps on the condition
// variable. A call runs a run() per stage and a training iteration several calls in a row;
// waking a sleeping worker costs tens of microseconds (on a VM the host must reschedule the
// halted vCPU), paid at every stage. OpenMP runtimes spin for milliseconds; this much covers
// the gaps between the stages of a call and between calls made back to back (measured: LSTM
// H=50 N=64 training 5-8% faster) at little cost to a process that stops calling.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);

}  // namespace

ThreadTeam& ThreadTeam::instance() {
  static ThreadTeam team;
  return team;
}

int ThreadTeam::default_threads() {
  if (const char* env = std::getenv("RNNJIT_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || n < 1 || n > kMaxThreads)
      throw Error(fmt::format("RNNJIT_NUM_THREADS must be an integer in [1, {}], got '{}'", kMaxThreads, env));
    return static_cast<int>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : std::min(static_cast<int>(hw), kMaxThreads);
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadTeam::ensure_workers(int n) {
  while (static_cast<int>(workers_.size()) < n - 1) {
    const int tid = static_cast<int>(workers_.size()) + 1;
    workers_.emplace_back([this, tid] { worker(tid); });
    workers_kept_off_ = -1;  // the new worker may run anywhere yet
  }
}

void ThreadTeam::worker(int tid) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (int i = 1; job_generation_.load(std::memory_order_acquire) == seen; ++i) {
      _mm_pause();
      if (i % 64 == 0 && (stopping_.load(std::memory_order_relaxed) || std::chrono::steady_clock::now() > spin_until))
        break;
    }
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || job_generation_ != seen; });
      if (stopping_) return;
      seen = job_generation_;
      if (tid < job_threads_) job = job_;
    }
    if (!job) continue;
    loops_opened = 0;
    try {
      (*job)(tid);
    } catch (...) {
      errors_[static_cast<std::size_t>(tid)] = std::current_exception();
    }
    remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// Linux wakes a sleeping thread on the waker's CPU when it can (wake-affine): on this
// project's VM 98% of wake-ups from a condition variable landed there, though the other vCPU
// was idle, and the worker then shared the caller's CPU until the load balancer moved one of
// them, at the next scheduler tick: a small call (LSTM I=H=256 L=3 T=10 N=2 inference, 0.5
// ms) took 4.5 ms in runs of such calls. So the workers may run on any CPU the caller may
// use except the one it runs on now; set again only when the caller has moved. A caller
// confined to one CPU leaves the workers' CPUs as they were.
void ThreadTeam::keep_workers_off_callers_cpu() {
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu == workers_kept_off_ || cpu >= CPU_SETSIZE) return;
  workers_kept_off_ = cpu;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  CPU_CLR(cpu, &allowed);
  if (CPU_COUNT(&allowed) == 0) return;
  for (std::thread& w : workers_) pthread_setaffinity_np(w.native_handle(), sizeof allowed, &allowed);
}

void ThreadTeam::start_job(int n) {
  errors_.assign(static_cast<std::size_t>(n), nullptr);
  remaining_.store(n - 1, std::memory_order_release);
  barrier_count_.store(0);
  claims_.store(0);
  loops_opened = 0;
}

void ThreadTeam::run(int n, const std::function<void(int)>& fn) {
  if (n <= 1) return fn(0);
  std::lock_guard run_lock(run_mutex_);
  if (!run_on_openmp(n, fn)) run_on_own_workers(n, fn);
  for (const std::exception_ptr& e : errors_)
    if (e) std::rethrow_exception(e);
}

void ThreadTeam::run_on_own_workers(int n, const std::function<void(int)>& fn) {
  ensure_workers(n);
  keep_workers_off_callers_cpu();
  start_job(n);
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_threads_ = n;
    ++job_generation_;
  }
  wake_.notify_all();
  try {
    fn(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  int spins = 0;
  while (remaining_.load(std::memory_order_acquire) != 0) spin_pause(spins);
  std::lock_guard lock(mutex_);
  job_ = nullptr;
  job_threads_ = 0;
}

// A parallel region of n threads of the OpenMP pool, each running fn(its thread number). A
// region given fewer threads (a call from inside another region, OMP_THREAD_LIMIT) runs
// nothing, since fn's barriers need all n: the caller then runs the job on the own workers.
bool ThreadTeam::run_on_openmp(int n, const std::function<void(int)>& fn) {
  const OpenMp* omp = openmp_.load(std::memory_order_acquire);
  if (!omp) return false;
  struct Region {
    ThreadTeam* team;
    const OpenMp* omp;
    const std::function<void(int)>* fn;
    int n;
    std::atomic<bool> short_handed{false};
  } region{this, omp, &fn, n};
  start_job(n);
  {
    std::lock_guard lock(mutex_);
    job_threads_ = n;  // barrier()'s count (the own workers are not woken: job_generation_ stays)
  }
  region.omp->parallel(
      [](void* data) {
        auto& r = *static_cast<Region*>(data);
        if (r.omp->num_threads() != r.n) {
          r.short_handed.store(true, std::memory_order_relaxed);
          return;
        }
        const int tid = r.omp->thread_num();
        loops_opened = 0;
        try {
          (*r.fn)(tid);
        } catch (...) {
          r.team->errors_[static_cast<std::size_t>(tid)] = std::current_exception();
        }
      },
      &region, static_cast<unsigned>(n), 0);
  std::lock_guard lock(mutex_);
  job_threads_ = 0;
  return !region.short_handed.load(std::memory_order_relaxed);
}

void ThreadTeam::use_openmp(const std::string& library) {
  std::lock_guard run_lock(run_mutex_);
  if (library.empty()) {
    openmp_.store(nullptr, std::memory_order_release);
    return;
  }
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!handle) throw Error(fmt::format("use_openmp: '{}' is not loaded in this process", library));
  auto omp = std::make_unique<OpenMp>();
  omp->parallel = reinterpret_cast<decltype(omp->parallel)>(dlsym(handle, "GOMP_parallel"));
  omp->num_threads = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_num_threads"));
  omp->thread_num = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_thread_num"));
  omp->library = library;
  dlclose(handle);  // RTLD_NOLOAD took a reference; the process keeps the library loaded
  if (!omp->parallel || !omp->num_threads || !omp->thread_num)
    throw Error(fmt::format("use_openmp: '{}' has no GOMP_parallel, omp_get_num_threads and omp_get_thread_num",
                            library));
  openmp_.store(omp.get(), std::memory_order_release);
  openmp_kept_.push_back(std::move(omp));
}

std::string ThreadTeam::openmp_library() const {
  const OpenMp* omp = openmp_.load(std::memory_order_acquire);
  return omp ? omp->library : std::string();
}

void ThreadTeam::barrier() {
  const int n = job_threads_;
  if (n <= 1) return;
  const std::uint64_t generation = barrier_generation_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_generation_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  int spins = 0;
  while (barrier_generation_.load(std::memory_order_acquire) == generation) spin_pause(spins);
}

SharedLoop ThreadTeam::shared_loop(std::int64_t count, int threads) {
  if (threads <= 1) return SharedLoop(nullptr, 0, count);
  if (count >= (std::int64_t{1} << 32) - 256)
    throw Error(fmt::format("a shared loop of {} iterations is too long (at most 2^32 - 256)", count));
  return SharedLoop(this, ++loops_opened, count);
}

// The first thread to reach loop g moves the word from an older generation to (g, 1) and takes
// iteration 0; the rest take (g, i) -> (g, i + 1). A thread that finds a newer generation knows
// that its loop is fully claimed (someone finished claiming it and opened the next one). CAS,
// not fetch_add: an increment landing on a newer generation would lose that loop's iteration.
std::int64_t SharedLoop::next() {
  if (!team_) return local_ < count_ ? local_++ : -1;
  if (count_ == 0) return -1;
  std::atomic<std::uint64_t>& word = team_->claims_;
  std::uint64_t seen = word.load(std::memory_order_acquire);
  for (;;) {
    const std::uint64_t generation = seen >> 32, index = seen & 0xffffffffu;
    std::uint64_t desired;
    if (generation > generation_) return -1;
    if (generation < generation_) desired = (generation_ << 32) | 1;
    else if (static_cast<std::int64_t>(index) >= count_) return -1;
    else desired = seen + 1;
    if (word.compare_exchange_weak(seen, desired, std::memory_order_acq_rel, std::memory_order_acquire))
      return generation < generation_ ? 0 : static_cast<std::int64_t>(index);
  }
}

}  // namespace rnnjit
