// rnnjit tests: the worst of a run of errors, NaN being the worst of all. std::max and
// std::fmax drop a NaN (std::max(w, NaN) is w; `err > worst` is false for NaN), and a test that
// kept its worst error that way would pass a NaN result.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace rnnjit::test {

inline double worst_of(double worst, double err) {
  return std::isnan(worst) || std::isnan(err) ? std::numeric_limits<double>::quiet_NaN() : std::max(worst, err);
}

}  // namespace rnnjit::test
