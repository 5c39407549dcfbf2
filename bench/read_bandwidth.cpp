#include "bench/read_bandwidth.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "rnnjit/rnn.hpp"

namespace rnnjit::bench {
namespace {

// Sums `vectors` zmm loads into eight independent accumulators, so that the loads, not the
// adds, set the pace, prefetching a few lines ahead as the generated GEMM does with its B.
__attribute__((target("avx512f"))) float read_once(const float* data, std::int64_t vectors) {
  constexpr std::int64_t kAhead = 16;  // cache lines: of 0, 16, 64 and 256, 16 read fastest here
  __m512 acc[8];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  std::int64_t v = 0;
  for (; v + 8 <= vectors; v += 8) {
    _mm_prefetch(reinterpret_cast<const char*>(data + 16 * (v + kAhead)), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(data + 16 * (v + kAhead + 4)), _MM_HINT_T0);
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_add_ps(acc[i], _mm512_load_ps(data + 16 * (v + i)));
  }
  for (; v < vectors; ++v) acc[0] = _mm512_add_ps(acc[0], _mm512_load_ps(data + 16 * v));
  for (int i = 1; i < 8; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  return sum;
}

struct FreeAligned {
  void operator()(float* p) const { std::free(p); }
};

// One window of `seconds`: all threads read their buffers from a common start; 0 when the
// buffers cannot be allocated.
double read_window(int threads, std::int64_t vectors, double seconds) {
  std::vector<std::unique_ptr<float, FreeAligned>> buffers;
  for (int t = 0; t < threads; ++t) {
    buffers.emplace_back(static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>(vectors) * 64)));
    if (!buffers.back()) return 0.0;
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::atomic<std::int64_t> bytes_read{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, buffer = buffers[static_cast<std::size_t>(t)].get()] {
      // Each thread's buffer is first touched by that thread, as a plan's packed weights are
      // read by the thread that owns those columns.
      std::fill_n(buffer, vectors * 16, 1.0f);
      volatile float sink = read_once(buffer, vectors);  // warm: the steady state is measured
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      std::int64_t mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        sink = read_once(buffer, vectors);
        mine += vectors * 64;
      }
      bytes_read.fetch_add(mine);
      (void)sink;
    });
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(bytes_read.load()) / elapsed / 1e9;
}

}  // namespace

double measure_read_bandwidth(int threads, std::int64_t bytes_per_thread, double seconds) {
  if (detect_isa() != Isa::avx512 || threads < 1 || bytes_per_thread < 1) return 0.0;
  // The best of three windows: other tenants of the machine only ever slow a window down.
  double best = 0.0;
  for (int w = 0; w < 3; ++w) best = std::max(best, read_window(threads, (bytes_per_thread + 63) / 64, seconds / 3));
  return best;
}

}  // namespace rnnjit::bench
