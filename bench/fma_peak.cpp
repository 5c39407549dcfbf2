#include "bench/fma_peak.hpp"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "rnnjit/rnn.hpp"

namespace rnnjit::bench {
namespace {

constexpr int kChains = 24;       // enough independent FMAs to cover latency x throughput
constexpr long kInnerRounds = 1 << 16;

__attribute__((target("avx512f"))) float fma_rounds(long rounds) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.99999f), b = _mm512_set1_ps(1e-6f);
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float l : lanes) total += l;
  return total;
}

}  // namespace

double measure_fma_peak(int threads, double seconds) {
  if (detect_isa() != Isa::avx512) return 0.0;
  std::atomic<long> rounds_done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      volatile float sink = 0.0f;
      while (!stop.load(std::memory_order_relaxed)) {
        sink = fma_rounds(kInnerRounds);
        rounds_done.fetch_add(kInnerRounds, std::memory_order_relaxed);
      }
      (void)sink;
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(rounds_done.load()) * kChains * 16 * 2 / elapsed / 1e9;
}

}  // namespace rnnjit::bench
