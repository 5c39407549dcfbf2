// rnnjit: the GPU executor's walk over a plan, kept apart from the device it drives.
//
// PlanRunner turns each step of a GPU plan (codegen/cuda/gpu_plan.hpp) into calls on DeviceOps,
// with every address, size and beta resolved: GEMMs, gate kernel launches (one per time step,
// two for the reset-before GRU, with the peephole block when the cell has one), copies, column
// sums (bias and peephole gradients), dropout, and with variable lengths masked row copies at
// the steps where some row is past its end (the host lengths decide which steps). The calls of
// one lane are issued in order; the lanes of a stage run concurrently. The CUDA implementation
// of DeviceOps (cuda_ops.hpp) queues them on one stream per lane and returns at once. A forward
// recurrence without a projection and with no row past its end may instead be offered whole to
// DeviceOps::persistent_forward, which the device takes where its persistent kernel applies.
// Addresses are only offset here, never read, so the same walk runs on host memory through a
// host DeviceOps, which is how the walk is tested without a GPU (tests/test_cuda_runner.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codegen/kernel_args.hpp"
#include "codegen/plan.hpp"

namespace rnnjit::cuda {

// Addresses of the buffers a plan's operands name; workspace and reserve are byte bases.
// A GPU plan has no packed space. Variable lengths: `lengths` is the call's HOST array [N] (null:
// every row runs all T steps), from which the walk decides on the host at which steps some row
// is past its end; `device_lengths` is the same N int32 in device memory (what the masked
// row kernels read; PlanRunner::lengths_address says where the executor uploads them).
struct DeviceBindings {
  std::array<const float*, kBufferCount> buffers{};
  std::byte* workspace = nullptr;
  std::byte* reserve = nullptr;
  std::uint64_t dropout_seed = 0;
  const std::int32_t* lengths = nullptr;
  const std::int32_t* device_lengths = nullptr;

  void bind(Buffer b, const float* p) { buffers[static_cast<std::size_t>(b)] = p; }
};

// Row-major C = op(A) op(B) + beta C (alpha 1), repeated for i < batch with A, B and C moved
// by i times their strides; with c_stride == 0 every product adds into the same C (beta applies
// to the first one), as GemmStep says.
struct GemmCall {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  std::int64_t lda = 0;
  const float* b = nullptr;
  std::int64_t ldb = 0;
  float* c = nullptr;
  std::int64_t ldc = 0;
  float beta = 0.0f;
};

// dst[blk, r, c] = src[blk, r, c] (0 when src is null) + plus[blk, r, c] where plus is not null
// (CopyStep's layout; plus is laid out as src).
struct CopyCall {
  const float* src = nullptr;
  float* dst = nullptr;
  std::int64_t blocks = 1, rows = 0, cols = 0, ld_src = 0, ld_dst = 0, block_src = 0, block_dst = 0;
  const float* plus = nullptr;
};

// A ColumnSumStep resolved: sums of src's rows (times factor's, when not null) into dst.
struct ColumnSumCall {
  const float* src = nullptr;
  const float* factor = nullptr;
  float* dst = nullptr;
  std::int64_t rows = 0, cols = 0, ld_src = 0, ld_factor = 0;
  float beta = 0.0f;
};

// Rows past their sequence end (variable lengths): for k < steps, r < rows and c < cols where
// t + k >= lengths[r] (lengths: N int32 in device memory), dst[k * t_stride_dst + r * ld_dst + c]
// = src ? src[k * t_stride_src + r * ld_src + c] : 0. Rows not past their end are untouched.
struct PastEndCall {
  const std::int32_t* lengths = nullptr;
  std::int64_t t = 0;
  const float* src = nullptr;
  float* dst = nullptr;
  std::int64_t rows = 0, cols = 0, ld_src = 0, ld_dst = 0;
  std::int64_t steps = 1, t_stride_src = 0, t_stride_dst = 0;
};

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // A stage of `lanes` lanes begins: each lane waits for everything issued before it.
  virtual void begin_stage(int lanes) = 0;
  // The stage ends: whatever is issued next waits for every lane.
  virtual void end_stage(int lanes) = 0;
  virtual void gemm(int lane, const GemmCall& g) = 0;
  // The gate kernel plan.kernels[kernel] over all its rows and units.
  virtual void gate_forward(int lane, int kernel, const GateForwardArgs& args) = 0;
  virtual void gate_backward(int lane, int kernel, const GateBackwardArgs& args) = 0;
  virtual void copy(int lane, const CopyCall& c) = 0;
  // dst[j] = beta * dst[j] (0 when beta is 0) + sum over r < rows of src[r * ld_src + j], j < cols;
  // with a factor (not null), of src[r * ld_src + j] * factor[r * ld_factor + j] (ColumnSumStep).
  virtual void column_sum(int lane, const ColumnSumCall& c) = 0;
  // kernels/dropout.hpp: keep[e] = dropout_keep(seed, layer, e, p); dst[e] = keep ? src[e] * scale : 0.
  virtual void dropout_forward(int lane, const float* src, float* dst, std::uint8_t* keep, std::int64_t elements,
                               std::int64_t layer, float p, float scale, std::uint64_t seed) = 0;
  // In place: dst[e] = keep[e] ? dst[e] * scale : 0.
  virtual void dropout_backward(int lane, float* dst, const std::uint8_t* keep, std::int64_t elements, float scale) = 0;
  // dst[r, j] = a[r, j] + b[r, j] for r < rows, j < cols (row strides lda, ldb, ldd).
  virtual void add(int lane, const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* dst,
                   std::int64_t ldd, std::int64_t rows, std::int64_t cols) = 0;
  // PastEndCall: copies (or zeroes) the rows past their end; launched only when some row is.
  virtual void rows_past_end(int lane, const PastEndCall& c) = 0;
  // A whole forward recurrence whose steps would be the GEMM gh = h_prev W_hh^T and the gate
  // kernel plan.kernels[kernel], as one persistent kernel (codegen/cuda/persistent_source.hpp).
  // Returns false, having issued nothing, where the device has no such kernel for it (W_hh's
  // rows do not fit on chip, too many rows, or persistent kernels are off): the walk then
  // issues the steps one by one.
  virtual bool persistent_forward(int lane, int kernel, const PersistentForwardArgs& args) = 0;
};

class PlanRunner {
 public:
  explicit PlanRunner(std::shared_ptr<const Plan> plan);

  const Plan& plan() const { return *plan_; }
  // Most lanes any stage of the plan has (streams the device needs).
  int max_lanes() const;

  // Where the executor puts the call's lengths in device memory (N int32): the reserve's
  // lengths_region in training (forward keeps them there for backward), a workspace region in
  // inference (codegen/cuda/gpu_plan.hpp).
  std::int32_t* lengths_address(const DeviceBindings& b) const;

  // Everything the calls that run() makes depend on: every bound address, the dropout seed,
  // accumulate, and the host lengths' values (which decide where masked copies are launched).
  // Two runs with equal keys make the same calls with the same arguments (cuda/pass_graph.hpp
  // replays them as a graph).
  std::vector<std::uint64_t> walk_key(const DeviceBindings& b, bool accumulate) const;

  // accumulate: GEMMs and column sums that would overwrite their output add to it instead.
  void run(const std::vector<Stage>& stages, const DeviceBindings& b, DeviceOps& ops, bool accumulate = false) const;

 private:
  float* resolve(const Operand& o, const DeviceBindings& b) const;
  std::byte* region_bytes(int region, const DeviceBindings& b) const;
  // A time-indexed operand at time `time` (null when its buffer is not bound).
  float* timed(const Timed& t, std::int64_t time, const DeviceBindings& b) const;
  // The first time at which some row is past its end (T, or more: none).
  std::int64_t shortest(const DeviceBindings& b, std::int64_t steps) const;
  // A weight gradient's B with the rows of finished sequences zeroed in its b_masked copy
  // (VariableLengths::k_rows_skipped), or B itself when no row is past its end.
  const float* masked_b(const GemmStep& g, const DeviceBindings& b, DeviceOps& ops, int lane) const;
  // ops.rows_past_end over the N rows of one step t (nothing when src and dst are null).
  void past_end(const DeviceBindings& b, DeviceOps& ops, int lane, std::int64_t t, const float* src, std::int64_t ld_src,
                float* dst, std::int64_t ld_dst, std::int64_t cols) const;
  void step(const Step& s, const DeviceBindings& b, DeviceOps& ops, int lane, bool accumulate) const;
  // One product of a recurrence's per-step GEMM with this step's A.
  void step_gemm(const GemmStep& g, const float* a, const DeviceBindings& b, float* c, DeviceOps& ops, int lane) const;
  void forward_recurrence(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const;
  // The recurrence as ops.persistent_forward (false: not taken, nothing issued).
  bool persistent_forward(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const;
  void backward_recurrence(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const;
  // The GRU with the reset before: two GEMMs and two gate kernels (parts 0 and 1) per step.
  void forward_reset_before(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const;
  // What every forward gate kernel of step t reads or writes: gx, gh, the biases, h_prev, gates.
  GateForwardArgs step_args(const RecurrenceStep& r, std::int64_t t, const float* h_prev,
                            const DeviceBindings& b) const;
  void backward_reset_before(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const;

  std::shared_ptr<const Plan> plan_;
};

}  // namespace rnnjit::cuda
