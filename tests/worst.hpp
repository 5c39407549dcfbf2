// rnnjit tests: the worst of a run of errors, NaN being the worst of all. std::max and
// std::fmax drop a NaN (std::max(w, NaN) is w; `err > worst` is false for NaN), and a test that
// kept its worst error that way would pass a NaN result.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace rnnjit::test {

inline double worst_of(double worst, double err) {
  return std::isnan(worst) || std::isnan(err) ? std::numeric_limits<double>::quiet_NaN() : std::max(worst, err);
}

// Every a[i] within tol of b[i], relative to max(1, |b[i]|); a failure names the worst element
// (the first NaN, if any: no later finite error replaces it).
inline void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, double tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i]));
    if (!(err <= worst)) worst = err, at = i;
    if (std::isnan(worst)) break;
  }
  EXPECT_LE(worst, tol) << what << "[" << at << "]: " << a[at] << " vs " << b[at];
}

}  // namespace rnnjit::test
