// rnnjit: a row-major GEMM as the column-major sgemm cuBLAS computes. A row-major matrix X
// with leading dimension ld is, read column-major with the same ld, X^T; and C = op(A) op(B)
// is C^T = op(B)^T op(A)^T. So the column-major call takes B first and A second (each
// transposed iff the row-major operand was), m and n swap, and every ld stays. Plain C++ (no
// CUDA headers): cuBLAS calls use it (cublas.cpp), and the plan-walk test runs every GEMM of
// the GPU plans through it into a column-major host sgemm (tests/host_device_ops.hpp).
#pragma once

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "runtime/cuda/plan_runner.hpp"

namespace rnnjit::cuda {

struct ColumnMajorGemm {
  bool trans_first = false, trans_second = false;  // op of the first and second operand
  int m = 0, n = 0, k = 0;                         // C is m x n column-major
  const float* first = nullptr;
  int ld_first = 0;
  const float* second = nullptr;
  int ld_second = 0;
  float* c = nullptr;
  int ldc = 0;
  float beta = 0.0f;
};

inline int gemm_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw Error(fmt::format("sgemm: {} = {} does not fit in an int", what, v));
  return static_cast<int>(v);
}

// Row-major C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T: B first, A second.
inline ColumnMajorGemm column_major(const GemmCall& g) {
  ColumnMajorGemm c;
  c.trans_first = g.trans_b;
  c.trans_second = g.trans_a;
  c.m = gemm_int(g.n, "n");
  c.n = gemm_int(g.m, "m");
  c.k = gemm_int(g.k, "k");
  c.first = g.b;
  c.ld_first = gemm_int(g.ldb, "ldb");
  c.second = g.a;
  c.ld_second = gemm_int(g.lda, "lda");
  c.c = g.c;
  c.ldc = gemm_int(g.ldc, "ldc");
  c.beta = g.beta;
  return c;
}

}  // namespace rnnjit::cuda
