// rnnjit: the CUDA Execution: argument checks and the reserve's life cycle (runtime/call_checks.hpp,
// shared with the CPU's), device buffers (workspace and reserve from the plan's WorkspacePlan,
// allocated with cuMemAlloc once and reused), and the plan walk on the device. Every call
// returns once its results are in device memory. Every span holds device addresses except
// ForwardIo::seq_lengths, a HOST array (as cuDNN's seqLengthArray): the walk decides on the host
// at which steps some row is past its end, and the lengths are uploaded once per forward call
// (training: into the reserve's lengths_region, kept there for backward, with a host copy
// here; inference: into a workspace region) for the masked row kernels. Without lengths nothing
// is uploaded and nothing extra is launched. A pass called again with the same buffers is
// replayed as a CUDA graph (runtime/cuda/pass_graph.hpp).
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/plan_extents.hpp"
#include "rnnjit/error.hpp"
#include "runtime/call_checks.hpp"
#include "runtime/cuda/cuda_ops.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/pass_graph.hpp"
#include "runtime/cuda/plan_runner.hpp"
#include "runtime/device_execution.hpp"
#include "runtime/io_bindings.hpp"

namespace rnnjit {
namespace {

using State = ReserveCycle::State;

class CudaExecution final : public DeviceExecution {
 public:
  CudaExecution(const RnnConfig& config, const Shape& shape, Mode mode)
      : config_(config), shape_(shape), mode_(mode), checks_(config, shape, mode),
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
    checks_.weights(w);
    if (!packed.empty()) throw Error(fmt::format("packed weights buffer has {} bytes, expected 0", packed.size()));
  }

  void forward(std::span<const float> w, const ForwardIo& io, std::span<std::byte> reserve,
               std::span<std::byte> workspace) override {
    checks_.weights(w);
    checks_.forward(io);
    if (!io.packed_weights.empty())
      throw Error("packed_weights: the CUDA executor packs no weights (packed_weights_size() is 0): pass none");
    if (!training() && !reserve.empty()) throw Error("a reserve was given to an Execution prepared for inference");
    cuda::DeviceBindings b = bind_scratch(reserve, workspace);
    bind_forward(b, w, io);
    reserve_.set(State::empty);  // a failure below leaves no usable reserve
    kept_lengths_.clear();
    if (!io.seq_lengths.empty()) {
      std::int32_t* device_lengths = runner_.lengths_address(b);
      cuda::copy_to_device(device_lengths, io.seq_lengths.data(), io.seq_lengths.size_bytes());
      b.lengths = io.seq_lengths.data();
      b.device_lengths = device_lengths;
      if (training()) kept_lengths_.assign(io.seq_lengths.begin(), io.seq_lengths.end());
    }
    run(forward_graph_, plan_->forward, b);
    if (training()) reserve_.set(State::forwarded, b.reserve);
  }

  void backward_data(std::span<const float> w, const BackwardDataIo& io, std::span<std::byte> reserve,
                     std::span<std::byte> workspace) override {
    checks_.require_training("backward_data");
    checks_.weights(w);
    checks_.backward_data(io);
    cuda::DeviceBindings b = bind_scratch(reserve, workspace);
    reserve_.require_forwarded(b.reserve);
    bind_backward_data(b, w, io);
    bind_kept_lengths(b);
    reserve_.set(State::empty);  // backward_data consumes the gates: a failure leaves nothing usable
    run(backward_data_graph_, plan_->backward_data, b);
    reserve_.set(State::backpropagated);
  }

  void backward_weights(const BackwardWeightsIo& io, std::span<const std::byte> reserve,
                        std::span<std::byte> workspace) override {
    checks_.require_training("backward_weights");
    checks_.backward_weights(io);
    // Only read here; the bindings' type is shared with the calls that write it.
    std::span<std::byte> readable(const_cast<std::byte*>(reserve.data()), reserve.size());
    cuda::DeviceBindings b = bind_scratch(readable, workspace);
    reserve_.require_backpropagated(b.reserve);
    bind_backward_weights(b, io);
    bind_kept_lengths(b);
    run(backward_weights_graph_, plan_->backward_weights, b, io.accumulate);
  }

 private:
  bool training() const { return mode_ == Mode::training; }

  // The pass's calls, queued directly or as its graph (cuda/pass_graph.hpp), then waited for.
  void run(cuda::PassGraph& graph, const std::vector<Stage>& stages, const cuda::DeviceBindings& b,
           bool accumulate = false) {
    graph.run(runner_.walk_key(b, accumulate), ops_->stream(), [&] { runner_.run(stages, b, *ops_, accumulate); });
    ops_->finish();
  }

  // Backward reads the lengths the forward training call kept (the reserve's lengths_region on
  // the device, their host copy here; reserve_ ties both to that reserve). None: all T.
  void bind_kept_lengths(cuda::DeviceBindings& b) const {
    if (kept_lengths_.empty()) return;
    b.lengths = kept_lengths_.data();
    b.device_lengths = runner_.lengths_address(b);
  }

  cuda::DeviceBindings bind_scratch(std::span<std::byte> reserve, std::span<std::byte> workspace) {
    CallChecks::scratch(workspace, workspace_size(), "workspace");
    CallChecks::scratch(reserve, reserve_size(), "reserve");
    cuda::DeviceBindings b;
    b.workspace = workspace.empty() ? own_workspace_.reserve(workspace_size(), allocations_) : workspace.data();
    if (training()) b.reserve = reserve.empty() ? own_reserve_.reserve(reserve_size(), allocations_) : reserve.data();
    return b;
  }

  RnnConfig config_;
  Shape shape_;
  Mode mode_;
  CallChecks checks_;
  std::shared_ptr<const Plan> plan_;
  cuda::PlanRunner runner_;
  std::unique_ptr<cuda::CudaOps> ops_;
  // After ops_: destroyed first, while its streams still exist.
  cuda::PassGraph forward_graph_{"forward"}, backward_data_graph_{"backward data"},
      backward_weights_graph_{"backward weights"};
  cuda::DeviceBuffer own_workspace_, own_reserve_;
  std::uint64_t allocations_ = 0;
  ReserveCycle reserve_;
  std::vector<std::int32_t> kept_lengths_;  // forward training's seq_lengths (empty: none), for backward
};

}  // namespace

std::unique_ptr<DeviceExecution> make_cuda_execution(const RnnConfig& config, const Shape& shape, Mode mode) {
  cuda::Device::instance();  // "no CUDA device: ..." before anything else
  return std::make_unique<CudaExecution>(config, shape, mode);
}

}  // namespace rnnjit
