// rnnjit tests: a GEMM's C against a double-precision loop. C is m x n with row stride ldc (the
// columns past n are padding, which must keep their values from c0), and C = sum over kk < k of
// product(i, j, kk) + beta * c0. The worst error, in units of the k * eps * sum |a b| bound of an
// FP32 sum of k terms, must be at most 1.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/worst.hpp"

namespace rnnjit::test {

template <typename Product>
void expect_gemm_within_bound(const std::vector<float>& out, const std::vector<float>& c0, std::int64_t m,
                              std::int64_t n, std::int64_t k, std::int64_t ldc, float beta, Product product) {
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < ldc; ++j) {
      const double got = out[static_cast<std::size_t>(i * ldc + j)];
      if (j >= n) {  // padding columns of C are never written
        ASSERT_EQ(got, c0[static_cast<std::size_t>(i * ldc + j)]) << "wrote padding at " << i << "," << j;
        continue;
      }
      double want = beta * c0[static_cast<std::size_t>(i * ldc + j)], scale = std::abs(want);
      for (std::int64_t kk = 0; kk < k; ++kk) {
        const double p = product(i, j, kk);
        want += p;
        scale += std::abs(p);
      }
      worst = worst_of(worst, std::abs(got - want) / (scale * static_cast<double>(k + 1) * 1.2e-7 + 1e-30));
    }
  EXPECT_LE(worst, 1.0) << "error in units of the k*eps*sum|ab| bound";
}

}  // namespace rnnjit::test
