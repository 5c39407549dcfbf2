// rnnjit: the public API (rnnjit/rnn.hpp): argument checking, buffer ownership, the reserve's
// life cycle, and the two backends (the JIT executor and the scalar reference).
#include "rnnjit/rnn.hpp"

#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "codegen/plan.hpp"
#include "kernels/reference.hpp"
#include "runtime/cache.hpp"
#include "runtime/call_checks.hpp"
#include "runtime/cpu_caches.hpp"
#include "runtime/device_execution.hpp"
#include "runtime/executor.hpp"
#include "runtime/io_bindings.hpp"
#include "runtime/log.hpp"
#include "runtime/memory.hpp"
#include "runtime/packed_weights.hpp"
#include "runtime/thread_team.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace rnnjit {
namespace {

constexpr std::size_t kHugePage = 2 << 20;

// 64-byte-aligned, allocated once and grown only if a larger size is ever needed.
class AlignedBuffer {
 public:
  ~AlignedBuffer() { std::free(data_); }
  std::byte* get(std::size_t bytes, std::uint64_t& allocations) {
    if (bytes > size_) {
      std::free(data_);
      data_ = nullptr;
      size_ = 0;
      // Buffers of 2 MiB or more are aligned to and advised into transparent huge pages: the
      // GEMMs stream matrices of many MiB with large row strides (a gate row is 4H floats), and
      // with 4 KiB pages every few rows cost a TLB miss.
      const std::size_t align = bytes >= kHugePage ? kHugePage : kRegionAlignment;
      const std::size_t rounded = (bytes + align - 1) / align * align;
      data_ = static_cast<std::byte*>(std::aligned_alloc(align, rounded));
      if (!data_) throw Error(fmt::format("out of memory: could not allocate {} bytes", rounded));
#if defined(__linux__)
      if (align == kHugePage) ::madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: errors are harmless
#endif
      size_ = rounded;
      ++allocations;
    }
    return data_;
  }
 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

using State = ReserveCycle::State;

// bf16 GEMMs where they were allowed and a bf16 unit runs here (bf16_unit()); otherwise FP32
// (Options::fpmath).
std::pair<FpMath, Bf16Unit> effective_fpmath(FpMath requested, Backend backend) {
  if (requested != FpMath::bf16 || backend != Backend::jit) return {FpMath::strict, Bf16Unit::amx};
  if (const std::optional<Bf16Unit> unit = bf16_unit()) return {FpMath::bf16, *unit};
  log_verbose("fpmath bf16: this CPU (or OS) runs neither AMX-BF16 nor AVX512_BF16, so the GEMMs stay FP32");
  return {FpMath::strict, Bf16Unit::amx};
}

// int8 GEMMs where they were asked for (Options::quantize) and the jit backend runs them, with
// this CPU's int8 unit for plans of `isa` (none: the planner falls back and says why). The
// reference backend runs the scalar int8 reference (kernels/int8_reference.hpp) instead.
std::optional<Int8Unit> effective_int8_unit(Quantize requested, Backend backend, Isa isa) {
  if (requested != Quantize::int8_dynamic || backend != Backend::jit) return std::nullopt;
  return int8_unit(isa);
}

}  // namespace

class ExecutionImpl {
 public:
  // `options` resolved by Rnn (no detect/automatic/0 left).
  ExecutionImpl(const RnnConfig& config, const Shape& shape, Mode mode, const Options& options)
      : config_(config), shape_(shape), mode_(mode), backend_(options.backend), checks_(config, shape, mode) {
    // The reference backend only describes its call with the plan (nothing to measure).
    const std::optional<Int8Unit> int8 = effective_int8_unit(options.quantize, backend_, options.isa);
    // Where int8 cannot run, the GEMMs fall back to bf16 where this CPU runs it (int8 asked for
    // approximate GEMMs already), else FP32; the plan's notes say so.
    const bool int8_falls_back = options.quantize == Quantize::int8_dynamic && backend_ == Backend::jit && !int8;
    const auto [fpmath, bf16_unit] =
        effective_fpmath(int8_falls_back && rnnjit::bf16_unit() ? FpMath::bf16 : options.fpmath, backend_);
    plan_ = Cache::instance().plan({config, shape, mode, options.isa, options.threads,
                                    backend_ == Backend::jit ? options.projection_gemm : ProjectionGemm::generated,
                                    detect_caches(), fpmath, bf16_unit, options.quantize, int8});
    quantize_ = options.quantize;
    // The reference backend quantizes activations as this CPU's int8 unit would (its levels).
    if (backend_ == Backend::reference && quantize_ == Quantize::int8_dynamic)
      ref_int8_unit_ = int8_unit(options.isa).value_or(Int8Unit::avx512_vnni);
    if (backend_ == Backend::jit) {
      // Before anything is compiled or allocated: a plan the machine cannot hold fails here.
      check_fits_in_memory(workspace_size() + reserve_size() + packed_weights_size(),
                           fmt::format("the {} plan {} ({} bytes of workspace, {} of reserve, {} of packed weights)",
                                       to_string(mode), checks_.shape_text(), workspace_size(), reserve_size(),
                                       packed_weights_size()));
      std::vector<std::shared_ptr<const CompiledKernel>> kernels;
      for (const KernelDesc& d : plan_->kernels) kernels.push_back(Cache::instance().kernel(d));
      executor_ = std::make_unique<Executor>(plan_, std::move(kernels));
      packed_fingerprint_ = packed_layout_fingerprint(*plan_);
    }
  }


  const RnnConfig& config() const { return config_; }
  Shape shape() const { return shape_; }
  Mode mode() const { return mode_; }
  Backend backend() const { return backend_; }
  const Plan& plan() const { return *plan_; }
  // A caller's workspace or reserve may have any alignment: the regions start at its first
  // 64-byte boundary (as in its own buffers), so each is asked 63 bytes larger than the plan's.
  std::size_t workspace_size() const { return with_alignment_slack(workspace_bytes()); }
  std::size_t reserve_size() const { return with_alignment_slack(reserve_bytes()); }
  std::uint64_t allocations() const { return allocations_; }
  // The caller's buffer: a header and the panels (runtime/packed_weights.hpp).
  std::size_t packed_weights_size() const { return panel_bytes() > 0 ? panel_bytes() + kPackedWeightsOverhead : 0; }

  void pack_weights(std::span<const float> w, std::span<std::byte> packed) const {
    checks_.weights(w);
    if (packed.size() != packed_weights_size())
      throw Error(fmt::format("packed weights buffer has {} bytes, expected {}", packed.size(), packed_weights_size()));
    if (packed.empty()) return;
    Bindings b;
    b.bind(Buffer::weights, w.data());
    b.packed = start_packed_weights(packed, panel_bytes(), packed_fingerprint_);
    executor_->run(plan_->pack_weights, b);
  }

  void forward(std::span<const float> w, const ForwardIo& io, std::span<std::byte> reserve,
               std::span<std::byte> workspace) {
    checks_.weights(w);
    checks_.forward(io);
    const bool training = mode_ == Mode::training;
    if (!training && !reserve.empty()) throw Error("a reserve was given to an Execution prepared for inference");
    if (backend_ == Backend::reference) {
      if (!reserve.empty()) throw Error("the reference backend keeps its reserve internally: pass no reserve");
      if (training) ref_reserve_ = std::make_unique<reference::Reserve<float>>();
      reference::forward<float>(config_, shape_, w.data(), io.x.data(), data_or_null(io.hx), data_or_null(io.cx),
                                io.y.data(), data_or_null(io.hy), data_or_null(io.cy),
                                training ? ref_reserve_.get() : nullptr,
                                {.seq_lengths = io.seq_lengths.empty() ? nullptr : io.seq_lengths.data(),
                                 .dropout_seed = io.dropout_seed,
                                 .quantize = quantize_,
                                 .int8_unit = ref_int8_unit_});
      reserve_.set(training ? State::forwarded : State::empty);
      return;
    }
    Bindings b = bind_scratch(reserve, workspace);
    bind_forward(b, w, io);
    if (!io.packed_weights.empty()) {
      if (io.packed_weights.size() != packed_weights_size())
        throw Error(fmt::format("packed_weights has {} bytes, expected {} (from pack_weights)", io.packed_weights.size(),
                                packed_weights_size()));
      // Only read by the forward steps.
      b.packed = const_cast<std::byte*>(packed_panels(io.packed_weights, panel_bytes(), packed_fingerprint_));
    } else if (panel_bytes() > 0) {
      b.packed = own_packed_.get(panel_bytes(), allocations_);
      executor_->run(plan_->pack_weights, b);
    }
    if (training) {
      // Backward reads the lengths from the reserve (all T when the call has none).
      auto* kept = reinterpret_cast<std::int32_t*>(b.reserve + reserve_region(plan_->lengths_region).offset);
      for (std::int64_t n = 0; n < shape_.batch; ++n)
        kept[n] = io.seq_lengths.empty() ? static_cast<std::int32_t>(shape_.seq_len) : io.seq_lengths[n];
      b.lengths = io.seq_lengths.empty() ? nullptr : kept;
    } else {
      b.lengths = io.seq_lengths.empty() ? nullptr : io.seq_lengths.data();
    }
    reserve_.set(State::empty);  // a failure below leaves no usable reserve
    executor_->run(plan_->forward, b);
    if (training) reserve_.set(State::forwarded, b.reserve);
  }

  void backward_data(std::span<const float> w, const BackwardDataIo& io, std::span<std::byte> reserve,
                     std::span<std::byte> workspace) {
    checks_.require_training("backward_data");
    checks_.weights(w);
    checks_.backward_data(io);
    if (backend_ == Backend::reference) {
      if (!reserve.empty()) throw Error("the reference backend keeps its reserve internally: pass no reserve");
      reserve_.require_forwarded(nullptr);
      reference::backward_data<float>(config_, shape_, w.data(), *ref_reserve_, io.dy.data(), data_or_null(io.dhy),
                                      data_or_null(io.dcy), io.dx.data(), data_or_null(io.dhx), data_or_null(io.dcx));
      reserve_.set(State::backpropagated);
      return;
    }
    Bindings b = bind_scratch(reserve, workspace);
    reserve_.require_forwarded(b.reserve);
    bind_backward_data(b, w, io);
    b.lengths = kept_lengths(b);
    reserve_.set(State::empty);  // backward_data consumes the gates: a failure leaves nothing usable
    executor_->run(plan_->backward_data, b);
    reserve_.set(State::backpropagated);
  }

  void backward_weights(const BackwardWeightsIo& io, std::span<const std::byte> reserve, std::span<std::byte> workspace) {
    checks_.require_training("backward_weights");
    checks_.backward_weights(io);
    if (backend_ == Backend::reference) {
      if (!reserve.empty()) throw Error("the reference backend keeps its reserve internally: pass no reserve");
      reserve_.require_backpropagated(nullptr);
      if (!io.accumulate) {
        reference::backward_weights<float>(config_, shape_, *ref_reserve_, io.dweights.data());
      } else {
        std::vector<float> dw(io.dweights.size());
        reference::backward_weights<float>(config_, shape_, *ref_reserve_, dw.data());
        for (std::size_t i = 0; i < dw.size(); ++i) io.dweights[i] += dw[i];
      }
      return;
    }
    // The reserve is only read here; the executor's operand type is shared with writers.
    std::span<std::byte> mutable_reserve(const_cast<std::byte*>(reserve.data()), reserve.size());
    Bindings b = bind_scratch(mutable_reserve, workspace);
    reserve_.require_backpropagated(b.reserve);
    bind_backward_weights(b, io);
    b.lengths = kept_lengths(b);
    executor_->run(plan_->backward_weights, b, io.accumulate);
  }

 private:
  std::size_t panel_bytes() const { return backend_ == Backend::jit ? plan_->workspace.packed_bytes : 0; }
  std::size_t workspace_bytes() const { return backend_ == Backend::jit ? plan_->workspace.workspace_bytes : 0; }
  std::size_t reserve_bytes() const {
    return backend_ == Backend::jit && mode_ == Mode::training ? plan_->workspace.reserve_bytes : 0;
  }
  static std::size_t with_alignment_slack(std::size_t bytes) { return bytes > 0 ? bytes + kRegionAlignment - 1 : 0; }
  static std::byte* aligned_start(std::span<std::byte> s) {
    const auto at = reinterpret_cast<std::uintptr_t>(s.data());
    return s.data() + (align_to_region(at) - at);
  }
  const Region& reserve_region(int index) const { return plan_->workspace.regions[static_cast<std::size_t>(index)]; }
  // The lengths forward training kept in the reserve; null when they were all T (no carrying).
  const std::int32_t* kept_lengths(const Bindings& b) const {
    const auto* kept = reinterpret_cast<const std::int32_t*>(b.reserve + reserve_region(plan_->lengths_region).offset);
    for (std::int64_t n = 0; n < shape_.batch; ++n)
      if (kept[n] != shape_.seq_len) return kept;
    return nullptr;
  }
  Bindings bind_scratch(std::span<std::byte> reserve, std::span<std::byte> workspace) {
    CallChecks::scratch(workspace, workspace_size(), "workspace");
    CallChecks::scratch(reserve, reserve_size(), "reserve");
    Bindings b;
    b.workspace = workspace.empty() ? own_workspace_.get(workspace_bytes(), allocations_) : aligned_start(workspace);
    if (mode_ == Mode::training)
      b.reserve = reserve.empty() ? own_reserve_.get(reserve_bytes(), allocations_) : aligned_start(reserve);
    return b;
  }

  RnnConfig config_;
  Shape shape_;
  Mode mode_;
  Backend backend_;
  CallChecks checks_;
  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<Executor> executor_;
  AlignedBuffer own_workspace_, own_reserve_, own_packed_;
  std::uint64_t packed_fingerprint_ = 0;
  std::uint64_t allocations_ = 0;
  Quantize quantize_ = Quantize::none;  // the reference backend's (the jit's is its plan's)
  Int8Unit ref_int8_unit_ = Int8Unit::avx512_vnni;  // ditto, with quantize_ int8_dynamic
  ReserveCycle reserve_;
  std::unique_ptr<reference::Reserve<float>> ref_reserve_;
};

Execution::Execution(std::unique_ptr<ExecutionImpl> impl) : impl_(std::move(impl)) {}
Execution::Execution(std::unique_ptr<DeviceExecution> device) : device_(std::move(device)) {}
Execution::Execution(Execution&&) noexcept = default;
Execution& Execution::operator=(Execution&&) noexcept = default;
Execution::~Execution() = default;

// Each call goes to the device's Execution (Options::device) or to the CPU's.
const RnnConfig& Execution::config() const { return device_ ? device_->config() : impl_->config(); }
Shape Execution::shape() const { return device_ ? device_->shape() : impl_->shape(); }
Mode Execution::mode() const { return device_ ? device_->mode() : impl_->mode(); }
Backend Execution::backend() const { return device_ ? Backend::jit : impl_->backend(); }
const Plan& Execution::plan() const { return device_ ? device_->plan() : impl_->plan(); }
std::string Execution::plan_text() const { return to_text(plan()); }
std::string Execution::plan_json() const { return to_json(plan()); }
std::size_t Execution::workspace_size() const { return device_ ? device_->workspace_size() : impl_->workspace_size(); }
std::size_t Execution::reserve_size() const { return device_ ? device_->reserve_size() : impl_->reserve_size(); }
std::uint64_t Execution::allocations() const { return device_ ? device_->allocations() : impl_->allocations(); }
std::size_t Execution::packed_weights_size() const {
  return device_ ? device_->packed_weights_size() : impl_->packed_weights_size();
}
void Execution::pack_weights(std::span<const float> weights, std::span<std::byte> packed) const {
  if (device_) return device_->pack_weights(weights, packed);
  impl_->pack_weights(weights, packed);
}

void Execution::forward(std::span<const float> weights, const ForwardIo& io, std::span<std::byte> reserve,
                        std::span<std::byte> workspace) {
  if (device_) return device_->forward(weights, io, reserve, workspace);
  impl_->forward(weights, io, reserve, workspace);
}
void Execution::backward_data(std::span<const float> weights, const BackwardDataIo& io, std::span<std::byte> reserve,
                              std::span<std::byte> workspace) {
  if (device_) return device_->backward_data(weights, io, reserve, workspace);
  impl_->backward_data(weights, io, reserve, workspace);
}
void Execution::backward_weights(const BackwardWeightsIo& io, std::span<const std::byte> reserve,
                                 std::span<std::byte> workspace) {
  if (device_) return device_->backward_weights(io, reserve, workspace);
  impl_->backward_weights(io, reserve, workspace);
}

Rnn::Rnn(const RnnConfig& config, Options options) : layout_(config), options_(options) {
  if (options_.isa == Isa::detect) options_.isa = detect_isa();
  if (options_.backend == Backend::automatic) options_.backend = Backend::jit;
  // Generated code for an instruction set the CPU lacks would fault on its first instruction.
  if ((options_.isa == Isa::avx2 || options_.isa == Isa::avx512) && options_.device == Device::cpu &&
      static_cast<int>(options_.isa) > static_cast<int>(cpu_isa()))
    throw Error(fmt::format("isa {} but this CPU only runs {}", to_string(options_.isa), to_string(cpu_isa())));
  if (options_.threads == 0) options_.threads = ThreadTeam::default_threads();
  if (options_.threads < 1 || options_.threads > kMaxThreads)
    throw Error(fmt::format("threads must be in [1, {}], got {}", kMaxThreads, options_.threads));
}

Execution Rnn::prepare(const Shape& shape, Mode mode) const {
  validate(config(), shape);
  if (options_.device == Device::cuda) {
    if (options_.backend != Backend::jit)
      throw Error(fmt::format("backend {} runs on the CPU only: use Device::cpu", to_string(options_.backend)));
    if (options_.quantize != Quantize::none)
      throw Error(fmt::format("quantize {} runs on the CPU only: use Device::cpu", to_string(options_.quantize)));
    return Execution(make_cuda_execution(config(), shape, mode));
  }
  return Execution(std::make_unique<ExecutionImpl>(config(), shape, mode, options_));
}

}  // namespace rnnjit
