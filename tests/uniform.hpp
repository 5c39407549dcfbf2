// rnnjit tests: n floats drawn uniformly from [-1, 1) by a seeded generator (the same values
// on every run and platform that shares the standard library's mt19937 and distribution).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace rnnjit::test {

inline std::vector<float> uniform(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& e : v) e = u(rng);
  return v;
}

}  // namespace rnnjit::test
