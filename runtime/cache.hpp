// rnnjit: the process-wide cache of compiled kernels (by KernelDesc) and plans (by config,
// shape, mode and ISA). Bounded LRU (capacity from RNNJIT_CACHE_CAPACITY, default 256 each),
// thread-safe: threads asking for the same new entry build it once. Entries are shared_ptrs,
// so an Execution keeps what it uses alive even after eviction; the cache frees the rest.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "codegen/plan.hpp"
#include "runtime/kernel.hpp"

namespace rnnjit {

struct PlanKey {
  RnnConfig config;
  Shape shape;
  Mode mode;
  Isa isa;
  int threads;
  ProjectionGemm projection_gemm = ProjectionGemm::generated;
  CacheSizes caches;
  FpMath fpmath = FpMath::strict;
  Bf16Unit bf16_unit = Bf16Unit::amx;  // with fpmath bf16
  Quantize quantize = Quantize::none;
  std::optional<Int8Unit> int8_unit;  // with quantize int8_dynamic: the CPU's (none: it has none)
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const;
};

template <typename Key, typename Value, typename Hash>
class LruCache {
 public:
  // Returns the cached value, or builds it with make() (under the lock) and inserts it.
  std::shared_ptr<const Value> get(const Key& key, const std::function<std::shared_ptr<const Value>()>& make,
                                   bool& hit) {
    auto found = index_.find(key);
    if (found != index_.end()) {
      order_.splice(order_.begin(), order_, found->second);
      hit = true;
      return found->second->second;
    }
    hit = false;
    std::shared_ptr<const Value> value = make();
    order_.emplace_front(key, value);
    index_[key] = order_.begin();
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return value;
  }
  void clear() { index_.clear(); order_.clear(); }
  std::size_t size() const { return order_.size(); }
  void set_capacity(std::size_t c) { capacity_ = c < 1 ? 1 : c; }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_ = 256;
  std::list<std::pair<Key, std::shared_ptr<const Value>>> order_;
  std::unordered_map<Key, typename decltype(order_)::iterator, Hash> index_;
};

class Cache {
 public:
  static Cache& instance();

  std::shared_ptr<const CompiledKernel> kernel(const KernelDesc& desc);
  std::shared_ptr<const Plan> plan(const PlanKey& key);
  CacheStats stats() const;
  void clear();

 private:
  Cache();
  mutable std::mutex kernel_mutex_, plan_mutex_;
  LruCache<KernelDesc, CompiledKernel, KernelDescHash> kernels_;
  LruCache<PlanKey, Plan, PlanKeyHash> plans_;
  CacheStats counters_;
};

}  // namespace rnnjit
