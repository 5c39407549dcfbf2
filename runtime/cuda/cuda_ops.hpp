// rnnjit: DeviceOps on a CUDA device: every call of the plan walk is queued on its lane's
// stream (cuBLAS sgemm, cuLaunchKernel of a generated gate kernel or of a data-movement kernel
// from codegen/cuda/util_source.hpp) and returns at once; stages order the lanes with events.
// finish() waits for everything. Constructing one compiles (through the caches) and loads
// every kernel the plan needs, and the persistent recurrent kernels the device can hold
// (RNNJIT_CUDA_PERSISTENT=0: none; every recurrence then runs step by step).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "codegen/cuda/persistent_source.hpp"
#include "runtime/cuda/cublas.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/plan_runner.hpp"

namespace rnnjit::cuda {

class CudaOps final : public DeviceOps {
 public:
  CudaOps(const Plan& plan, int lanes);
  ~CudaOps() override;

  void begin_stage(int lanes) override;
  void end_stage(int lanes) override;
  void gemm(int lane, const GemmCall& g) override;
  void gate_forward(int lane, int kernel, const GateForwardArgs& args) override;
  void gate_backward(int lane, int kernel, const GateBackwardArgs& args) override;
  void copy(int lane, const CopyCall& c) override;
  void column_sum(int lane, const ColumnSumCall& c) override;
  void dropout_forward(int lane, const float* src, float* dst, std::uint8_t* keep, std::int64_t elements,
                       std::int64_t layer, float p, float scale, std::uint64_t seed) override;
  void dropout_backward(int lane, float* dst, const std::uint8_t* keep, std::int64_t elements, float scale) override;
  void add(int lane, const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* dst, std::int64_t ldd,
           std::int64_t rows, std::int64_t cols) override;
  void rows_past_end(int lane, const PastEndCall& c) override;
  bool persistent_forward(int lane, int kernel, const PersistentForwardArgs& args) override;

  // Waits until every queued call has run; throws Error if one of them failed.
  void finish();
  // The stream every call starts from and ends on (lane 0's); the other lanes fork from it.
  CUstream stream() const { return lanes_[0]->stream.get(); }

 private:
  struct Lane {
    Stream stream;
    std::unique_ptr<BlasHandle> blas;
    Event done;
  };
  void launch(int lane, CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block_x, void** params) const;
  void launch_util(int lane, CUfunction f, std::int64_t elements, void** params) const;

  const Plan& plan_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  Event start_;
  std::vector<CUfunction> gates_;  // by plan kernel index
  // The persistent kernel of each forward gate kernel that has one on this device.
  struct Persistent {
    CUfunction function = nullptr;
    PersistentShape shape;
  };
  std::vector<std::optional<Persistent>> persistent_;  // by plan kernel index
  DeviceBuffer arrived_;  // each lane's grid barrier counter, 128 bytes apart
  CUfunction copy_ = nullptr, column_sum_ = nullptr, dropout_forward_ = nullptr, dropout_backward_ = nullptr,
             add_ = nullptr, rows_past_end_ = nullptr;
};

}  // namespace rnnjit::cuda
