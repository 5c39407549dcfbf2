#include "runtime/cache.hpp"

#include <bit>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "codegen/plan_extents.hpp"
#include "codegen/planner.hpp"
#include "runtime/gemm_tuner.hpp"
#include "runtime/log.hpp"

namespace rnnjit {

std::size_t PlanKeyHash::operator()(const PlanKey& k) const {
  std::size_t h = 0;
  auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(k.config.cell));
  mix(static_cast<std::uint64_t>(k.config.input_size));
  mix(static_cast<std::uint64_t>(k.config.hidden_size));
  mix(static_cast<std::uint64_t>(k.config.num_layers));
  mix(k.config.bidirectional);
  mix(k.config.reverse);
  mix(static_cast<std::uint64_t>(k.config.proj_size));
  mix(std::bit_cast<std::uint32_t>(k.config.clip));
  mix(std::bit_cast<std::uint32_t>(k.config.dropout));
  mix(k.config.batch_first);
  mix(std::bit_cast<std::uint32_t>(k.config.gate_clip));
  mix(std::bit_cast<std::uint32_t>(k.config.relu_alpha));
  mix(k.config.peephole);
  mix(k.config.input_forget);
  mix(k.config.bias);
  mix(k.config.sum_directions);
  mix(k.config.independent_stacks);
  for (const auto& direction : k.config.activations)
    for (const ActivationFunction& f : direction) {
      mix(static_cast<std::uint64_t>(f.kind));
      mix(std::bit_cast<std::uint32_t>(f.alpha));
      mix(std::bit_cast<std::uint32_t>(f.beta));
    }
  mix(static_cast<std::uint64_t>(k.shape.seq_len));
  mix(static_cast<std::uint64_t>(k.shape.batch));
  mix(static_cast<std::uint64_t>(k.mode));
  mix(static_cast<std::uint64_t>(k.isa));
  mix(static_cast<std::uint64_t>(k.threads));
  mix(static_cast<std::uint64_t>(k.projection_gemm));
  mix(static_cast<std::uint64_t>(k.caches.l1d));
  mix(static_cast<std::uint64_t>(k.caches.l2));
  mix(static_cast<std::uint64_t>(k.caches.tlb_reach));
  mix(static_cast<std::uint64_t>(k.caches.l3));
  mix(static_cast<std::uint64_t>(k.caches.zmm_fmas_per_cycle));
  mix(static_cast<std::uint64_t>(k.fpmath));
  mix(static_cast<std::uint64_t>(k.bf16_unit));
  mix(static_cast<std::uint64_t>(k.quantize));
  mix(k.int8_unit ? 1 + static_cast<std::uint64_t>(*k.int8_unit) : 0);
  return h;
}

Cache& Cache::instance() {
  static Cache cache;
  return cache;
}

Cache::Cache() {
  if (const char* env = std::getenv("RNNJIT_CACHE_CAPACITY")) {
    char* end = nullptr;
    const long long c = std::strtoll(env, &end, 10);
    if (end == env || *end != '\0' || c < 1)
      throw Error(fmt::format("RNNJIT_CACHE_CAPACITY must be a positive integer, got '{}'", env));
    kernels_.set_capacity(static_cast<std::size_t>(c));
    plans_.set_capacity(static_cast<std::size_t>(c));
  }
}

std::shared_ptr<const CompiledKernel> Cache::kernel(const KernelDesc& desc) {
  std::lock_guard lock(kernel_mutex_);
  bool hit = false;
  auto k = kernels_.get(desc, [&] { return std::make_shared<const CompiledKernel>(desc); }, hit);
  (hit ? counters_.kernel_hits : counters_.kernel_misses)++;
  log_verbose(hit ? fmt::format("kernel {} (cache hit)", kernel_name(desc))
                  : fmt::format("kernel {} compiled in {:.3f} ms, {} bytes (cache miss)", kernel_name(desc),
                                k->compile_ms(), k->code().size()));
  if (!hit) {
    dump_kernel(*k);
    perf_map_kernel(*k);
  }
  return k;
}

std::shared_ptr<const Plan> Cache::plan(const PlanKey& key) {
  std::lock_guard lock(plan_mutex_);
  bool hit = false;
  const auto start = std::chrono::steady_clock::now();
  auto p = plans_.get(key, [&] {
    auto plan = std::make_shared<const Plan>(make_plan(key.config, key.shape, key.mode, key.isa, key.threads,
                                                       projection_chooser(key.projection_gemm, key.caches, key.isa),
                                                       key.caches, key.fpmath, key.bf16_unit, key.quantize,
                                                       key.int8_unit));
    check_extents(*plan);
    return plan;
  }, hit);
  (hit ? counters_.plan_hits : counters_.plan_misses)++;
  log_verbose(fmt::format("plan {} T={} N={} {} {}: {} ({:.3f} ms)", describe(key.config), key.shape.seq_len,
                          key.shape.batch, to_string(key.mode), to_string(key.isa), hit ? "cache hit" : "planned",
                          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()));
  return p;
}

CacheStats Cache::stats() const {
  std::scoped_lock lock(kernel_mutex_, plan_mutex_);
  CacheStats s = counters_;
  s.kernels = kernels_.size();
  s.plans = plans_.size();
  s.capacity = kernels_.capacity();
  return s;
}

void Cache::clear() {
  std::scoped_lock lock(kernel_mutex_, plan_mutex_);
  kernels_.clear();
  plans_.clear();
}

CacheStats cache_stats() { return Cache::instance().stats(); }
void clear_cache() { Cache::instance().clear(); }

}  // namespace rnnjit
