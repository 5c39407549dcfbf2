#include "runtime/gemm_tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "runtime/cache.hpp"
#include "runtime/executor.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit {
namespace {

// Enough rows for about a GFLOP: a few milliseconds of the generated GEMM, so that each of the
// interleaved repetitions is long beside the noise of waking the threads.
constexpr double kSampleFlops = 1e9;

// A plan of one GEMM step (its B packed first when generated), with its kernels compiled.
struct OneGemm {
  std::shared_ptr<const Plan> plan;
  std::unique_ptr<Executor> executor;
};

OneGemm one_gemm(GemmStep g, std::int64_t group, int threads, bool generated, const CacheSizes& caches, Isa isa) {
  Plan plan;
  plan.isa = isa;
  plan.threads = threads;
  plan.caches = caches;
  if (generated) {
    g.blocking.packed_b = true;
    g = plan_generated_gemm(g, group, threads, plan.kernels, false, plan.caches, plan.isa);
    const int region = plan.workspace.add(
        "packed", Space::packed,
        static_cast<std::size_t>(packed_elements(g.blocking, g.n / group, g.k)) * sizeof(float));
    const Operand packed{.buffer = Buffer::packed, .region = region};
    plan.pack_weights.push_back(Stage{{{PackStep{.what = "pack W", .src = g.b, .dst = packed, .k = g.k,
                                                 .groups = g.n / group, .blocking = g.blocking}}}});
    g.b = packed;
    g.ldb = g.blocking.panel_columns();
  }
  plan.forward.push_back(Stage{{{g}}});
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  for (const KernelDesc& d : plan.kernels) kernels.push_back(Cache::instance().kernel(d));
  auto shared = std::make_shared<const Plan>(std::move(plan));
  return {shared, std::make_unique<Executor>(shared, std::move(kernels))};
}

}  // namespace

GemmTimes time_projection(const GemmStep& projection, std::int64_t group, int threads, const CacheSizes& caches,
                          Isa isa) {
  const std::int64_t n = projection.n, k = projection.k;
  const auto per_row = 2.0 * static_cast<double>(n) * static_cast<double>(k);
  // At least enough rows that OpenBLAS runs in the chunks it runs in on the whole GEMM.
  const std::int64_t chunked = 4 * threads * blas_chunk_rows(projection.m, threads);
  const std::int64_t rows =
      std::min(projection.m, std::max(static_cast<std::int64_t>(kSampleFlops / per_row), chunked));
  // A plain C = A W^T on buffers of its own (only the sizes matter to the timing).
  GemmStep g{.what = "timed input projection", .trans_b = true, .m = rows, .n = n, .k = k,
             .a = {.buffer = Buffer::x}, .b = {.buffer = Buffer::weights}, .c = {.buffer = Buffer::y}, .lda = k,
             .ldb = k, .ldc = n};
  std::vector<float> a(static_cast<std::size_t>(rows * k), 0.5f), w(static_cast<std::size_t>(n * k), 0.25f),
      c(static_cast<std::size_t>(rows * n));
  const OneGemm generated = one_gemm(g, group, threads, true, caches, isa),
                openblas = one_gemm(g, group, threads, false, caches, isa);
  // Packed panels 64-byte aligned, as an Execution's are.
  const std::size_t packed_bytes = (generated.plan->workspace.packed_bytes + 63) / 64 * 64;
  const std::unique_ptr<std::byte, decltype(&std::free)> packed(
      static_cast<std::byte*>(std::aligned_alloc(64, std::max<std::size_t>(packed_bytes, 64))), &std::free);
  if (!packed) throw Error(fmt::format("out of memory: could not allocate {} bytes", packed_bytes));
  Bindings bind;
  bind.bind(Buffer::x, a.data());
  bind.bind(Buffer::weights, w.data());
  bind.bind(Buffer::y, c.data());
  bind.packed = packed.get();
  generated.executor->run(generated.plan->pack_weights, bind);
  auto time_ms = [&](const OneGemm& e) {
    const auto start = std::chrono::steady_clock::now();
    e.executor->run(e.plan->forward, bind);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  GemmTimes t{1e300, 1e300, rows};
  time_ms(generated);  // warm-ups: first touches, OpenBLAS's threads
  time_ms(openblas);
  for (int rep = 0; rep < 3; ++rep) {
    t.generated_ms = std::min(t.generated_ms, time_ms(generated));
    t.openblas_ms = std::min(t.openblas_ms, time_ms(openblas));
  }
  return t;
}

bool openblas_wins(const GemmTimes& t) { return t.openblas_ms < 0.9 * t.generated_ms; }

GemmChooser projection_chooser(ProjectionGemm which, const CacheSizes& caches, Isa isa) {
  switch (which) {
    case ProjectionGemm::generated: return {};
    case ProjectionGemm::openblas:
      return [](const GemmStep&, std::int64_t, int) { return GemmChoice{true, "OpenBLAS (Options::projection_gemm)"}; };
    case ProjectionGemm::measured: break;
  }
  return [caches, isa](const GemmStep& g, std::int64_t group, int threads) {
    using Key =
        std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, std::int64_t, std::int64_t, Isa>;
    static std::mutex mutex;
    static std::map<Key, GemmTimes> measured;
    const Key key{g.m, g.n, g.k, group, threads, caches.l1d, caches.l2, isa};
    GemmTimes t;
    {
      std::lock_guard lock(mutex);
      auto found = measured.find(key);
      if (found == measured.end())
        found = measured.emplace(key, time_projection(g, group, threads, caches, isa)).first;
      t = found->second;
    }
    const bool blas = openblas_wins(t);
    return GemmChoice{blas, fmt::format("{} (measured on {} of {} rows: generated {:.3f} ms, OpenBLAS {:.3f} ms)",
                                        blas ? "OpenBLAS" : "generated GEMM", t.rows, g.m, t.generated_ms,
                                        t.openblas_ms)};
  };
}

}  // namespace rnnjit
