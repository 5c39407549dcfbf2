// rnnjit: 64-bit FNV-1a, the one hash behind the project's keys and fingerprints: kernel
// descriptors (the kernel cache), the CUDA kernel cache's file names, and the packed weights'
// layout. Not cryptographic: it tells apart what a process (or a cache directory) may mix up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rnnjit {

class Fnv1a {
 public:
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ c[i]) * 1099511628211ull;
  }
  void add(std::uint64_t v) { bytes(&v, sizeof v); }  // in the host's byte order
  // A field of a list: its length first, so that no two different lists hash the same bytes.
  void add_field(std::string_view s) {
    add(s.size());
    bytes(s.data(), s.size());
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 1469598103934665603ull;
};

}  // namespace rnnjit
