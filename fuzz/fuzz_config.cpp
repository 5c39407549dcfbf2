// libFuzzer target: bytes -> RnnConfig + Shape + Mode + ISA + threads, through validate(),
// WeightLayout, make_plan() and check_extents(). The decoding and every check are in
// fuzz/config_input.hpp (shared with tests/test_fuzz_regressions.cpp, which replays the corpus).
// RNNJIT_FUZZ_PRINT=1 prints each decoded input (to read a reproducer).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/config_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider provider(data, size);
  const rnnjit::fuzz::ConfigInput input = rnnjit::fuzz::decode_config_input(provider);
  static const bool print = std::getenv("RNNJIT_FUZZ_PRINT") != nullptr;
  if (print) std::fprintf(stderr, "fuzz_config: %s\n", rnnjit::fuzz::describe_input(input).c_str());
  const std::string failure = rnnjit::fuzz::check_config_input(input);
  if (!failure.empty()) {
    std::fprintf(stderr, "fuzz_config: %s\n  input: %s\n", failure.c_str(), rnnjit::fuzz::describe_input(input).c_str());
    std::abort();
  }
  return 0;
}
