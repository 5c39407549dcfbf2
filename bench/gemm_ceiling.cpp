#include "bench/gemm_ceiling.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "bench/onednn_peer.hpp"
#include "bench/quiet_cores.hpp"
#include "codegen/kernel_args.hpp"
#include "codegen/register_budgets.hpp"
#include "rnnjit/rnn.hpp"
#include "runtime/blas_threads.hpp"
#include "runtime/cpu_caches.hpp"
#include "runtime/gemm_tuner.hpp"
#include "runtime/kernel.hpp"

namespace rnnjit::bench {
namespace {

// The best GFLOPS of `calls` timed calls after one untimed call, each on quiet cores (OpenBLAS's
// workers poll and OpenMP's spin after a call; neither may share the next call's cores).
double best_gflops(const std::function<void()>& call, double flops, int calls = 4) {
  wait_for_quiet_cores();
  call();
  double best = 0.0;
  for (int i = 0; i < calls; ++i) {
    wait_for_quiet_cores();
    const auto start = std::chrono::steady_clock::now();
    call();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, flops / seconds * 1e-9);
  }
  return best;
}

// The generated microkernel's steady state: each thread calls a 5 x 5 tile (AVX2: 6 x 1, the
// tile its 16 registers take) over the same k = 128 rows of A [5, 128] and B [128, 80] (43 KiB
// together, 64-byte aligned: they stay in a 48 KiB L1) for about `seconds`, adding into its C.
// The call's C loads and stores are 50 vector moves per 3200 FMAs.
double tile_window_gflops(int threads, double seconds, Isa isa) {
  constexpr int kRows = 5, kVectors = 5, kK = 128, kColumns = 16 * kVectors;
  const int rows = isa == Isa::avx2 ? gemm_max_rows(1, isa) : kRows, vectors = isa == Isa::avx2 ? 1 : kVectors;
  KernelDesc d;
  d.kind = static_cast<std::uint8_t>(KernelKind::gemm);
  d.isa = static_cast<std::uint8_t>(isa);
  d.rows = static_cast<std::uint32_t>(rows);
  d.vectors = static_cast<std::uint8_t>(vectors);
  d.beta = 1;
  d.unroll = 4;  // as the planner's GEMM kernels
  d.a_row_stride = kK;
  d.a_k_stride = 1;
  d.b_k_stride = kColumns;
  d.c_row_stride = kColumns;
  const CompiledKernel tile(d);
  std::atomic<bool> stop{false};
  std::atomic<long> calls{0};
  std::vector<std::thread> workers;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      struct Free {
        void operator()(float* p) const { std::free(p); }
      };
      constexpr int kRoom = 6;  // rows of A and C: room for either tile
      static_assert(gemm_max_rows(1, Isa::avx2) <= kRoom && kRows <= kRoom);
      const std::size_t floats = kRoom * kK + kK * kColumns + kRoom * kColumns;  // a whole number of lines
      static_assert((kRoom * kK + kK * kColumns + kRoom * kColumns) % 16 == 0, "aligned_alloc takes whole lines");
      const std::unique_ptr<float, Free> buffer(static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float))));
      if (!buffer) return;
      std::fill_n(buffer.get(), floats, 1e-3f);
      float* const a = buffer.get();
      float* const b = a + kRoom * kK;
      float* const c = b + kK * kColumns;
      const GemmArgs args{a, b, c, kK, nullptr, 0};  // (AVX2's 6 x 1 tile: the first columns of B and C)
      long mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) tile(&args);
        mine += 256;
      }
      calls.fetch_add(mine);
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(calls.load()) * 2.0 * rows * 16 * vectors * kK / elapsed * 1e-9;
}

// The best of three windows: the steady state, not a neighbour's burst on the host.
double tile_in_l1_gflops(int threads, Isa isa) {
  double best = 0.0;
  for (int window = 0; window < 3; ++window) best = std::max(best, tile_window_gflops(threads, 0.1, isa));
  return best;
}

}  // namespace

GemmCeiling measure_gemm_ceiling(int threads, std::int64_t size) {
  const auto elements = static_cast<std::size_t>(size * size);
  std::vector<float> a(elements, 0.5f), b(elements, 0.25f), c(elements);
  const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  const auto n = static_cast<int>(size);
  GemmCeiling r{.size = size};
  {
    const BlasThreads scope(threads);  // OpenBLAS on the bench's threads, as oneDNN below
    r.openblas = best_gflops(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                      c.data(), n);
        },
        flops);
  }
  if (onednn_available())
    r.onednn = best_gflops([&] { onednn_sgemm(threads, size, a.data(), b.data(), c.data()); }, flops);
  wait_for_quiet_cores();
  if (const Isa isa = detect_isa(); isa == Isa::avx512 || isa == Isa::avx2) {
    const GemmStep g{.what = "GEMM ceiling", .trans_b = true, .m = size, .n = size, .k = size,
                     .a = {.buffer = Buffer::x}, .b = {.buffer = Buffer::weights}, .c = {.buffer = Buffer::y},
                     .lda = size, .ldb = size, .ldc = size};
    const GemmTimes t = time_projection(g, size, threads, detect_caches(), isa);
    r.rnnjit = 2.0 * static_cast<double>(t.rows) * static_cast<double>(size) * static_cast<double>(size) /
               (t.generated_ms * 1e6);
    r.tile_in_l1 = tile_in_l1_gflops(threads, isa);
  }
  return r;
}

}  // namespace rnnjit::bench
