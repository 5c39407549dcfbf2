// rnnjit: the CUDA Execution: argument checks, device buffers (workspace and reserve from the
// plan's WorkspacePlan, allocated with cuMemAlloc once and reused), the reserve's life cycle,
// and the plan walk on the device. Every call returns once its results are in device memory.
#include <fmt/format.h>

#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/plan_extents.hpp"
#include "rnnjit/error.hpp"
#include "runtime/cuda/cuda_ops.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/plan_runner.hpp"
#include "runtime/device_execution.hpp"

namespace rnnjit {
namespace {

void check_span(std::size_t size, std::int64_t expected, const char* name, bool optional, const std::string& shape) {
  if (size == 0 && (optional || expected == 0)) return;
  if (static_cast<std::int64_t>(size) != expected)
    throw Error(fmt::format("{} has {} elements, expected {} {}", name, size, expected, shape));
}

template <typename T>
void check_scratch(std::span<T> s, std::size_t needed, const char* name) {
  if (s.empty()) return;
  if (s.size() < needed) throw Error(fmt::format("{} has {} bytes, needs {}", name, s.size(), needed));
  if (reinterpret_cast<std::uintptr_t>(s.data()) % alignof(float) != 0)
    throw Error(fmt::format("{} is not aligned to {} bytes", name, alignof(float)));
}

const float* or_null(std::span<const float> s) { return s.empty() ? nullptr : s.data(); }
const float* or_null(std::span<float> s) { return s.empty() ? nullptr : s.data(); }

class CudaExecution final : public DeviceExecution {
 public:
  CudaExecution(const RnnConfig& config, const Shape& shape, Mode mode)
      : config_(config), shape_(shape), mode_(mode), weights_(WeightLayout(config).total_elements()),
        shape_text_(fmt::format("for {} T={} N={}", describe(config), shape.seq_len, shape.batch)),
        plan_(std::make_shared<const Plan>(cuda::make_gpu_plan(config, shape, mode))), runner_(plan_) {
    check_extents(*plan_);
    ops_ = std::make_unique<cuda::CudaOps>(*plan_, runner_.max_lanes());
  }

  const RnnConfig& config() const override { return config_; }
  Shape shape() const override { return shape_; }
  Mode mode() const override { return mode_; }
  const Plan& plan() const override { return *plan_; }
  std::size_t workspace_size() const override { return plan_->workspace.workspace_bytes; }
  std::size_t reserve_size() const override { return training() ? plan_->workspace.reserve_bytes : 0; }
  std::uint64_t allocations() const override { return allocations_; }
  // Nothing is packed on the GPU: cuBLAS reads the canonical weights where they are.
  std::size_t packed_weights_size() const override { return 0; }
  void pack_weights(std::span<const float> w, std::span<std::byte> packed) const override {
    check_weights(w);
    if (!packed.empty()) throw Error(fmt::format("packed weights buffer has {} bytes, expected 0", packed.size()));
  }

  void forward(std::span<const float> w, const ForwardIo& io, std::span<std::byte> reserve,
               std::span<std::byte> workspace) override {
    check_weights(w);
    const std::int64_t states = state_elements(config_, shape_);
    check_span(io.x.size(), x_elements(config_, shape_), "x", false, shape_text_);
    check_span(io.y.size(), y_elements(config_, shape_), "y", false, shape_text_);
    check_span(io.hx.size(), states, "hx", true, shape_text_);
    check_span(io.hy.size(), states, "hy", true, shape_text_);
    check_cell_state(io.cx.size(), "cx");
    check_cell_state(io.cy.size(), "cy");
    if (!io.seq_lengths.empty())
      throw Error("variable sequence lengths (ForwardIo::seq_lengths) are not supported on the CUDA executor yet");
    if (!io.packed_weights.empty())
      throw Error("packed_weights: the CUDA executor packs no weights (packed_weights_size() is 0): pass none");
    if (!training() && !reserve.empty()) throw Error("a reserve was given to an Execution prepared for inference");
    cuda::DeviceBindings b = bind_scratch(reserve, workspace);
    b.bind(Buffer::weights, w.data());
    b.bind(Buffer::x, io.x.data());
    b.bind(Buffer::y, io.y.data());
    b.bind(Buffer::hx, or_null(io.hx));
    b.bind(Buffer::cx, or_null(io.cx));
    b.bind(Buffer::hy, or_null(io.hy));
    b.bind(Buffer::cy, or_null(io.cy));
    b.dropout_seed = io.dropout_seed;
    reserve_state_ = ReserveState::empty;  // a failure below leaves no usable reserve
    run(plan_->forward, b);
    if (training()) {
      reserve_state_ = ReserveState::forwarded;
      reserve_owner_ = b.reserve;
    }
  }

  void backward_data(std::span<const float> w, const BackwardDataIo& io, std::span<std::byte> reserve,
                     std::span<std::byte> workspace) override {
    require_training("backward_data");
    check_weights(w);
    const std::int64_t states = state_elements(config_, shape_);
    check_span(io.dy.size(), y_elements(config_, shape_), "dy", false, shape_text_);
    check_span(io.dx.size(), x_elements(config_, shape_), "dx", false, shape_text_);
    check_span(io.dhy.size(), states, "dhy", true, shape_text_);
    check_span(io.dhx.size(), states, "dhx", true, shape_text_);
    check_cell_state(io.dcy.size(), "dcy");
    check_cell_state(io.dcx.size(), "dcx");
    cuda::DeviceBindings b = bind_scratch(reserve, workspace);
    require_state(ReserveState::forwarded, b.reserve,
                  "backward_data needs a forward training call with this reserve first (backward_data consumes "
                  "the reserve's gates)");
    b.bind(Buffer::weights, w.data());
    b.bind(Buffer::dy, io.dy.data());
    b.bind(Buffer::dx, io.dx.data());
    b.bind(Buffer::dhy, or_null(io.dhy));
    b.bind(Buffer::dcy, or_null(io.dcy));
    b.bind(Buffer::dhx, or_null(io.dhx));
    b.bind(Buffer::dcx, or_null(io.dcx));
    reserve_state_ = ReserveState::empty;
    run(plan_->backward_data, b);
    reserve_state_ = ReserveState::backpropagated;
  }

  void backward_weights(const BackwardWeightsIo& io, std::span<const std::byte> reserve,
                        std::span<std::byte> workspace) override {
    require_training("backward_weights");
    check_span(io.x.size(), x_elements(config_, shape_), "x", false, shape_text_);
    check_span(io.dweights.size(), weights_, "dweights", false, shape_text_);
    // Only read here; the bindings' type is shared with the calls that write it.
    std::span<std::byte> readable(const_cast<std::byte*>(reserve.data()), reserve.size());
    cuda::DeviceBindings b = bind_scratch(readable, workspace);
    require_state(ReserveState::backpropagated, b.reserve, "backward_weights needs backward_data with this reserve first");
    b.bind(Buffer::x, io.x.data());
    b.bind(Buffer::dweights, io.dweights.data());
    run(plan_->backward_weights, b, io.accumulate);
  }

 private:
  enum class ReserveState { empty, forwarded, backpropagated };

  bool training() const { return mode_ == Mode::training; }

  void run(const std::vector<Stage>& stages, const cuda::DeviceBindings& b, bool accumulate = false) {
    runner_.run(stages, b, *ops_, accumulate);
    ops_->finish();
  }

  void check_weights(std::span<const float> w) const {
    check_span(w.size(), weights_, "weights", false, fmt::format("for {}", describe(config_)));
  }
  void check_cell_state(std::size_t size, const char* name) const {
    if (config_.cell == CellKind::lstm) {
      check_span(size, cell_state_elements(config_, shape_), name, true, shape_text_);
    } else if (size != 0) {
      throw Error(fmt::format("{} is only used by LSTM, not by {}", name, to_string(config_.cell)));
    }
  }
  void require_training(const char* call) const {
    if (!training())
      throw Error(fmt::format("{} needs an Execution prepared for training, this one is for inference", call));
  }
  void require_state(ReserveState state, const std::byte* reserve, const char* message) const {
    if (reserve_state_ != state || reserve != reserve_owner_) throw Error(message);
  }

  cuda::DeviceBindings bind_scratch(std::span<std::byte> reserve, std::span<std::byte> workspace) {
    check_scratch(workspace, workspace_size(), "workspace");
    check_scratch(reserve, reserve_size(), "reserve");
    cuda::DeviceBindings b;
    b.workspace = workspace.empty() ? own_workspace_.reserve(workspace_size(), allocations_) : workspace.data();
    if (training()) b.reserve = reserve.empty() ? own_reserve_.reserve(reserve_size(), allocations_) : reserve.data();
    return b;
  }

  RnnConfig config_;
  Shape shape_;
  Mode mode_;
  std::int64_t weights_;
  std::string shape_text_;
  std::shared_ptr<const Plan> plan_;
  cuda::PlanRunner runner_;
  std::unique_ptr<cuda::CudaOps> ops_;
  cuda::DeviceBuffer own_workspace_, own_reserve_;
  std::uint64_t allocations_ = 0;
  ReserveState reserve_state_ = ReserveState::empty;
  const std::byte* reserve_owner_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceExecution> make_cuda_execution(const RnnConfig& config, const Shape& shape, Mode mode) {
  cuda::Device::instance();  // "no CUDA device: ..." before anything else
  return std::make_unique<CudaExecution>(config, shape, mode);
}

}  // namespace rnnjit
