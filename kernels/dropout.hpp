// rnnjit: the dropout mask between layers, shared by the reference and the executor so that
// both drop the same elements. A pure function of (seed, layer, element): deterministic for a
// seed, independent of thread count, backend and batch layout.
#pragma once

#include <cstdint>

namespace rnnjit {

// Whether element `element` of layer `layer`'s output is kept (probability 1 - p). The element
// index is the position in the output laid out sequence-major, [T, N, Y] (Y = config.output_size()):
// element = (t*N + n)*Y + j, whatever the caller's batch layout.
inline bool dropout_keep(std::uint64_t seed, std::int64_t layer, std::int64_t element, float p) {
  // splitmix64 over a counter made of the three inputs: one multiply-xorshift chain per element.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(layer + 1) +
                    0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(element);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * 0x1p-24f;  // uniform in [0, 1), 24 bits
  return u >= p;
}

// The factor applied to kept elements so that the expected value is unchanged.
inline float dropout_scale(float p) { return 1.0f / (1.0f - p); }

}  // namespace rnnjit
