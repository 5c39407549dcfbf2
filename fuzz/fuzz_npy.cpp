// libFuzzer target: rnnjit::npy::parse on arbitrary bytes; the checks are in fuzz/npy_input.hpp
// (shared with tests/test_fuzz_regressions.cpp, which replays the corpus in the normal build).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "fuzz/npy_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string failure =
      rnnjit::fuzz::check_npy_input(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!failure.empty()) {
    std::fprintf(stderr, "fuzz_npy: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
