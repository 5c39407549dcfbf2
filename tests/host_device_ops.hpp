// rnnjit tests: DeviceOps on host memory, so that the GPU executor's plan walk
// (runtime/cuda/plan_runner.hpp) runs without a GPU. Each operation does what its CUDA
// counterpart does, written plainly: the GEMMs go through the column-major form the cuBLAS
// calls are given (runtime/cuda/column_major.hpp) into a plain loop over every term; the gate
// kernels are their scalar twins (kernels/gate_reference.hpp, which the generated CUDA source
// is checked against in test_cuda_source); the data-movement kernels are loops. With
// `persistent` on it takes the whole forward recurrences the walk offers (persistent_forward)
// and runs them as PersistentForwardArgs defines them, step by step through the same GEMM loop
// and twin; off, it declines them as a device without the kernel does. It also counts calls, so
// tests can check the walk's shape (launches per step, lanes per stage).
#pragma once

#include <cstring>
#include <vector>

#include "codegen/plan.hpp"
#include "kernels/dropout.hpp"
#include "kernels/gate_reference.hpp"
#include "runtime/cuda/column_major.hpp"
#include "runtime/cuda/plan_runner.hpp"

namespace rnnjit::test {

class HostDeviceOps final : public cuda::DeviceOps {
 public:
  explicit HostDeviceOps(const Plan& plan) : plan_(plan) {}

  bool persistent = false;
  int gemms = 0, gate_launches = 0, copies = 0, plus_copies = 0, stages = 0, max_lanes = 0, column_sums = 0,
      factor_sums = 0, past_end_launches = 0, persistent_launches = 0;

  void begin_stage(int lanes) override {
    ++stages;
    max_lanes = std::max(max_lanes, lanes);
  }
  void end_stage(int) override {}

  void gemm(int, const cuda::GemmCall& g) override {
    ++gemms;
    multiply(g);
  }
  void gate_forward(int, int kernel, const GateForwardArgs& args) override {
    ++gate_launches;
    gate_forward_reference(plan_.kernels[static_cast<std::size_t>(kernel)], args);
  }
  void gate_backward(int, int kernel, const GateBackwardArgs& args) override {
    ++gate_launches;
    gate_backward_reference(plan_.kernels[static_cast<std::size_t>(kernel)], args);
  }
  void copy(int, const cuda::CopyCall& c) override {
    ++copies;
    plus_copies += c.plus != nullptr;
    for (std::int64_t b = 0; b < c.blocks; ++b)
      for (std::int64_t r = 0; r < c.rows; ++r)
        for (std::int64_t j = 0; j < c.cols; ++j) {
          const std::int64_t from = b * c.block_src + r * c.ld_src + j;
          const float v = c.src ? c.src[from] : 0.0f;
          c.dst[b * c.block_dst + r * c.ld_dst + j] = c.plus ? v + c.plus[from] : v;
        }
  }
  void column_sum(int, const cuda::ColumnSumCall& c) override {
    ++column_sums;
    factor_sums += c.factor != nullptr;
    for (std::int64_t j = 0; j < c.cols; ++j) {
      float sum = c.beta == 0.0f ? 0.0f : c.beta * c.dst[j];
      for (std::int64_t r = 0; r < c.rows; ++r)
        sum += c.factor ? c.src[r * c.ld_src + j] * c.factor[r * c.ld_factor + j] : c.src[r * c.ld_src + j];
      c.dst[j] = sum;
    }
  }
  void dropout_forward(int, const float* src, float* dst, std::uint8_t* keep, std::int64_t elements,
                       std::int64_t layer, float p, float scale, std::uint64_t seed) override {
    for (std::int64_t e = 0; e < elements; ++e) {
      keep[e] = dropout_keep(seed, layer, e, p);
      dst[e] = keep[e] ? src[e] * scale : 0.0f;
    }
  }
  void dropout_backward(int, float* dst, const std::uint8_t* keep, std::int64_t elements, float scale) override {
    for (std::int64_t e = 0; e < elements; ++e) dst[e] = keep[e] ? dst[e] * scale : 0.0f;
  }
  void add(int, const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* dst, std::int64_t ldd,
           std::int64_t rows, std::int64_t cols) override {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < cols; ++j) dst[r * ldd + j] = a[r * lda + j] + b[r * ldb + j];
  }
  void rows_past_end(int, const cuda::PastEndCall& c) override {
    ++past_end_launches;
    for (std::int64_t k = 0; k < c.steps; ++k)
      for (std::int64_t r = 0; r < c.rows; ++r)
        if (c.t + k >= c.lengths[r])
          for (std::int64_t j = 0; j < c.cols; ++j)
            c.dst[k * c.t_stride_dst + r * c.ld_dst + j] = c.src ? c.src[k * c.t_stride_src + r * c.ld_src + j] : 0.0f;
  }
  // persistent_forward's recurrences, when `persistent` is on (else declined): each step's
  // gh = h_{t-1} W_hh^T through multiply, then the gate kernel's twin.
  bool persistent_forward(int, int kernel, const PersistentForwardArgs& p) override {
    if (!persistent) return false;
    ++persistent_launches;
    const KernelDesc& d = plan_.kernels[static_cast<std::size_t>(kernel)];
    const std::int64_t N = d.rows, H = d.hidden, GH = d.gates() * H;
    std::vector<float> gh(static_cast<std::size_t>(N * GH));
    for (std::int64_t s = 0; s < p.steps; ++s) {
      const std::int64_t t = p.reverse ? p.steps - 1 - s : s, prev = p.reverse ? t + 1 : t - 1;
      const float* h_prev = s == 0 ? p.h_init : p.h + prev * p.h_t;
      multiply({false, true, N, GH, H, h_prev, d.ld_h, p.w_hh, p.ld_w, gh.data(), GH, 0.0f});
      const GateForwardArgs a{p.gx + t * p.gx_t, gh.data(), p.bias_ih, p.bias_hh, h_prev,
                              p.c_init ? (s == 0 ? p.c_init : p.c + prev * p.c_t) : nullptr, p.h + t * p.h_t,
                              p.c ? p.c + t * p.c_t : nullptr, p.gates ? p.gates + t * p.gates_t : nullptr, p.peephole};
      gate_forward_reference(d, a);
    }
    return true;
  }

 private:
  // Through the same column-major form that the cuBLAS calls use (runtime/cuda/column_major.hpp),
  // into a loop that adds every term, as cuBLAS does: 0 * NaN makes NaN here too (OpenBLAS's
  // sgemm drops such terms for some of these shapes, which would hide a walk that reads x's NaN
  // padding).
  void multiply(const cuda::GemmCall& g) const {
    const cuda::ColumnMajorGemm c = cuda::column_major(g);
    auto first = [&](int i, int p) { return c.trans_first ? c.first[p + i * c.ld_first] : c.first[i + p * c.ld_first]; };
    auto second = [&](int p, int j) { return c.trans_second ? c.second[j + p * c.ld_second] : c.second[p + j * c.ld_second]; };
    for (int j = 0; j < c.n; ++j)
      for (int i = 0; i < c.m; ++i) {
        double sum = 0.0;
        for (int p = 0; p < c.k; ++p) sum += static_cast<double>(first(i, p)) * second(p, j);
        float& out = c.c[i + j * c.ldc];
        out = static_cast<float>(c.beta == 0.0f ? sum : c.beta * out + sum);  // beta 0: C is not read
      }
  }
  const Plan& plan_;
};

}  // namespace rnnjit::test
