#include "bench/read_bandwidth.hpp"

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

// Sums `lines` 64-byte lines, read as Bytes-wide vector loads (zmm or ymm: what the plan's ISA
// loads), into eight independent accumulators, so that the loads, not the adds, set the pace,
// prefetching a few lines ahead as the generated GEMM does with its B. GCC's vector types (no
// intrinsics), so that each ISA's entry below compiles the one loop for its registers.
template <int Bytes>
struct VectorOf;  // (GCC drops a vector_size that depends on a template parameter)
template <>
struct VectorOf<64> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VectorOf<32> {
  typedef float type __attribute__((vector_size(32)));
};

template <int Bytes>
[[gnu::always_inline]] inline float read_lines(const float* data, std::int64_t lines) {
  using Vec = typename VectorOf<Bytes>::type;
  constexpr int kPerLine = 64 / Bytes, kLanes = Bytes / 4;
  constexpr std::int64_t kAhead = 16;  // cache lines: of 0, 16, 64 and 256, 16 read fastest here
  Vec acc[8] = {};
  const auto* v = reinterpret_cast<const Vec*>(data);
  const std::int64_t vectors = lines * kPerLine;
  std::int64_t i = 0;
  for (; i + 8 <= vectors; i += 8) {
    __builtin_prefetch(data + kLanes * i + 16 * kAhead);
    __builtin_prefetch(data + kLanes * i + 16 * (kAhead + 8 / kPerLine / 2));
    for (int j = 0; j < 8; ++j) acc[j] += v[i + j];
  }
  for (; i < vectors; ++i) acc[0] += v[i];
  for (int j = 1; j < 8; ++j) acc[0] += acc[j];
  float sum = 0.0f;
  for (int lane = 0; lane < kLanes; ++lane) sum += acc[0][lane];
  return sum;
}

__attribute__((target("avx512f"))) float read_zmm(const float* data, std::int64_t lines) {
  return read_lines<64>(data, lines);
}
__attribute__((target("avx2"))) float read_ymm(const float* data, std::int64_t lines) {
  return read_lines<32>(data, lines);
}

struct FreeAligned {
  void operator()(float* p) const { std::free(p); }
};

// One window of `seconds`: all threads read their buffers from a common start; 0 when the
// buffers cannot be allocated.
double read_window(int threads, std::int64_t lines, double seconds, Isa isa) {
  const auto read_once = isa == Isa::avx512 ? read_zmm : read_ymm;
  std::vector<std::unique_ptr<float, FreeAligned>> buffers;
  for (int t = 0; t < threads; ++t) {
    buffers.emplace_back(static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>(lines) * 64)));
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
      std::fill_n(buffer, lines * 16, 1.0f);
      volatile float sink = read_once(buffer, lines);  // warm: the steady state is measured
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      std::int64_t mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        sink = read_once(buffer, lines);
        mine += lines * 64;
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
  const Isa isa = detect_isa();
  if ((isa != Isa::avx512 && isa != Isa::avx2) || threads < 1 || bytes_per_thread < 1) return 0.0;
  // The best of three windows: other tenants of the machine only ever slow a window down.
  double best = 0.0;
  for (int w = 0; w < 3; ++w) best = std::max(best, read_window(threads, (bytes_per_thread + 63) / 64, seconds / 3, isa));
  return best;
}

}  // namespace rnnjit::bench
