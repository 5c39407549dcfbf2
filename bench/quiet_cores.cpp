#include "bench/quiet_cores.hpp"

#include <thread>

#if defined(__linux__)
#include <dirent.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#endif

namespace rnnjit::bench {
namespace {

#if defined(__linux__)
// CPU time (ns) of every thread of this process but the caller. A thread's CPU clock id is
// the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), what pthread_getcpuclockid returns
// for a pthread; computed from the tid here, as the other threads are not ours to name.
long long other_threads_cpu_ns() {
  const long self = ::syscall(SYS_gettid);
  long long total = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return 0;
  while (const dirent* e = ::readdir(tasks)) {
    const long tid = std::strtol(e->d_name, nullptr, 10);
    if (tid <= 0 || tid == self) continue;
    const auto clock = static_cast<clockid_t>((~static_cast<unsigned long>(tid) << 3) | 6);
    timespec ts{};
    if (::clock_gettime(clock, &ts) == 0) total += ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
  }
  ::closedir(tasks);
  return total;
}
#endif

}  // namespace

void wait_for_quiet_cores(std::chrono::milliseconds limit) {
#if defined(__linux__)
  const auto deadline = std::chrono::steady_clock::now() + limit;
  long long before = other_threads_cpu_ns();
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const long long now = other_threads_cpu_ns();
    if (now - before <= 100'000) return;
    before = now;
  }
#else
  (void)limit;
#endif
}

}  // namespace rnnjit::bench
