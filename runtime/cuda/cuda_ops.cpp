#include "runtime/cuda/cuda_ops.hpp"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/cuda/util_source.hpp"
#include "rnnjit/error.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/log.hpp"

namespace rnnjit::cuda {
namespace {

constexpr std::size_t kCounterStride = 128 / sizeof(std::uint32_t);  // a barrier counter per 128-byte line

bool persistent_enabled() {
  const char* v = std::getenv("RNNJIT_CUDA_PERSISTENT");
  return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace

CudaOps::CudaOps(const Plan& plan, int lanes) : plan_(plan) {
  Device& device = Device::instance();
  ContextScope scope;
  for (int i = 0; i < lanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->blas = std::make_unique<BlasHandle>(lane->stream.get());
    lanes_.push_back(std::move(lane));
  }
  for (const KernelDesc& d : plan.kernels)
    gates_.push_back(device.function(kernel_name(d), gate_kernel_source(d), kernel_name(d)));
  persistent_.resize(plan.kernels.size());
  if (persistent_enabled())
    for (const PersistentKernel& k : persistent_kernels(plan, device.multiprocessors(), device.shared_per_block())) {
      Persistent p{device.function(k.name, k.source, k.name), k.shape};
      check(driver().cuFuncSetAttribute(p.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        static_cast<int>(k.shape.shared_bytes)),
            fmt::format("cuFuncSetAttribute {} ({} bytes of shared memory)", k.name, k.shape.shared_bytes));
      log_verbose(fmt::format("cuda: {}: {} blocks x {} threads, {} bytes of shared memory", k.name, k.shape.blocks,
                              k.shape.threads, k.shape.shared_bytes));
      persistent_[static_cast<std::size_t>(k.kernel)] = p;
    }
  arrived_ = DeviceBuffer(lanes * kCounterStride * sizeof(std::uint32_t));
  const std::string util = util_kernels_source();
  copy_ = device.function(kUtilModule, util, kCopyKernel);
  column_sum_ = device.function(kUtilModule, util, kColumnSumKernel);
  dropout_forward_ = device.function(kUtilModule, util, kDropoutForwardKernel);
  dropout_backward_ = device.function(kUtilModule, util, kDropoutBackwardKernel);
  add_ = device.function(kUtilModule, util, kAddKernel);
  rows_past_end_ = device.function(kUtilModule, util, kRowsPastEndKernel);
}

CudaOps::~CudaOps() {
  // Nothing may still run on the streams when they (and the handles bound to them) go.
  try {
    ContextScope scope;
    for (auto& lane : lanes_) driver().cuStreamSynchronize(lane->stream.get());
  } catch (...) {
  }
}

// Lane 0's stream carries the call; the other lanes fork from it at a stage's start and join
// it at the end, so one synchronisation of lane 0 waits for everything.
void CudaOps::begin_stage(int lanes) {
  if (lanes > static_cast<int>(lanes_.size()))
    throw Error(fmt::format("a stage has {} lanes, the CUDA executor made {} streams", lanes, lanes_.size()));
  if (lanes < 2) return;
  ContextScope scope;
  const DriverApi& d = driver();
  check(d.cuEventRecord(start_.get(), lanes_[0]->stream.get()), "cuEventRecord");
  for (int i = 1; i < lanes; ++i) check(d.cuStreamWaitEvent(lanes_[i]->stream.get(), start_.get(), 0), "cuStreamWaitEvent");
}

void CudaOps::end_stage(int lanes) {
  if (lanes < 2) return;
  ContextScope scope;
  const DriverApi& d = driver();
  for (int i = 1; i < lanes; ++i) {
    check(d.cuEventRecord(lanes_[i]->done.get(), lanes_[i]->stream.get()), "cuEventRecord");
    check(d.cuStreamWaitEvent(lanes_[0]->stream.get(), lanes_[i]->done.get(), 0), "cuStreamWaitEvent");
  }
}

void CudaOps::finish() { lanes_[0]->stream.synchronize(); }

void CudaOps::gemm(int lane, const GemmCall& g) {
  ContextScope scope;
  lanes_[static_cast<std::size_t>(lane)]->blas->gemm(g);
}

void CudaOps::launch(int lane, CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block_x, void** params) const {
  ContextScope scope;
  check(driver().cuLaunchKernel(f, grid_x, grid_y, 1, block_x, 1, 1, 0, lanes_[static_cast<std::size_t>(lane)]->stream.get(),
                                params, nullptr),
        "cuLaunchKernel");
}

void CudaOps::launch_util(int lane, CUfunction f, std::int64_t elements, void** params) const {
  launch(lane, f, util_blocks(elements), 1, kUtilBlockThreads, params);
}

// A gate kernel takes its argument struct by value: one parameter, the struct's bytes.
void CudaOps::gate_forward(int lane, int kernel, const GateForwardArgs& args) {
  const Launch l = gate_launch(plan_.kernels[static_cast<std::size_t>(kernel)]);
  GateForwardArgs copy = args;
  void* params[] = {&copy};
  launch(lane, gates_[static_cast<std::size_t>(kernel)], l.grid_x, l.grid_y, l.block_x, params);
}

void CudaOps::gate_backward(int lane, int kernel, const GateBackwardArgs& args) {
  const Launch l = gate_launch(plan_.kernels[static_cast<std::size_t>(kernel)]);
  GateBackwardArgs copy = args;
  void* params[] = {&copy};
  launch(lane, gates_[static_cast<std::size_t>(kernel)], l.grid_x, l.grid_y, l.block_x, params);
}

// Parameters are passed as pointers to host values of the kernels' parameter types
// (long long for every size: std::int64_t has its size and alignment).
void CudaOps::copy(int lane, const CopyCall& c) {
  const float* src = c.src;
  const float* plus = c.plus;
  float* dst = c.dst;
  std::int64_t blocks = c.blocks, rows = c.rows, cols = c.cols, ld_src = c.ld_src, ld_dst = c.ld_dst,
               block_src = c.block_src, block_dst = c.block_dst;
  void* params[] = {&src, &plus, &dst, &blocks, &rows, &cols, &ld_src, &ld_dst, &block_src, &block_dst};
  launch_util(lane, copy_, blocks * rows * cols, params);
}

void CudaOps::column_sum(int lane, const ColumnSumCall& c) {
  const float* src = c.src;
  const float* factor = c.factor;
  float* dst = c.dst;
  std::int64_t rows = c.rows, cols = c.cols, ld_src = c.ld_src, ld_factor = c.ld_factor;
  float beta = c.beta;
  void* params[] = {&src, &factor, &dst, &rows, &cols, &ld_src, &ld_factor, &beta};
  launch_util(lane, column_sum_, cols, params);
}

void CudaOps::dropout_forward(int lane, const float* src, float* dst, std::uint8_t* keep, std::int64_t elements,
                              std::int64_t layer, float p, float scale, std::uint64_t seed) {
  void* params[] = {&src, &dst, &keep, &elements, &layer, &p, &scale, &seed};
  launch_util(lane, dropout_forward_, elements, params);
}

void CudaOps::dropout_backward(int lane, float* dst, const std::uint8_t* keep, std::int64_t elements, float scale) {
  void* params[] = {&dst, &keep, &elements, &scale};
  launch_util(lane, dropout_backward_, elements, params);
}

void CudaOps::add(int lane, const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* dst,
                  std::int64_t ldd, std::int64_t rows, std::int64_t cols) {
  void* params[] = {&a, &b, &dst, &rows, &cols, &lda, &ldb, &ldd};
  launch_util(lane, add_, rows * cols, params);
}

void CudaOps::rows_past_end(int lane, const PastEndCall& c) {
  const std::int32_t* lengths = c.lengths;
  const float* src = c.src;
  float* dst = c.dst;
  std::int64_t t = c.t, steps = c.steps, rows = c.rows, cols = c.cols, ld_src = c.ld_src, ld_dst = c.ld_dst,
               t_stride_src = c.t_stride_src, t_stride_dst = c.t_stride_dst;
  void* params[] = {&lengths, &t, &src, &dst, &steps, &rows, &cols, &ld_src, &ld_dst, &t_stride_src, &t_stride_dst};
  launch_util(lane, rows_past_end_, steps * rows * cols, params);
}

// The lane's barrier counter is zeroed on its stream first (a graph replays the memset too).
bool CudaOps::persistent_forward(int lane, int kernel, const PersistentForwardArgs& args) {
  const auto& p = persistent_[static_cast<std::size_t>(kernel)];
  if (!p) return false;
  ContextScope scope;
  CUstream stream = lanes_[static_cast<std::size_t>(lane)]->stream.get();
  PersistentForwardArgs a = args;
  a.arrived = reinterpret_cast<std::uint32_t*>(arrived_.data()) + static_cast<std::size_t>(lane) * kCounterStride;
  check(driver().cuMemsetD32Async(device_ptr(a.arrived), 0, 1, stream), "cuMemsetD32Async");
  void* params[] = {&a};
  check(driver().cuLaunchKernel(p->function, p->shape.blocks, 1, 1, p->shape.threads, 1, 1,
                                static_cast<unsigned>(p->shape.shared_bytes), stream, params, nullptr),
        "cuLaunchKernel (persistent)");
  return true;
}

}  // namespace rnnjit::cuda
