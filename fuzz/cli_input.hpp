// How fuzz_cli turns bytes into a command line, shared by fuzz/fuzz_cli.cpp (libFuzzer) and
// tests/test_fuzz_regressions.cpp (which replays fuzz/corpus/fuzz_cli/ through the real rnn-jit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rnnjit::fuzz {

inline constexpr std::size_t kMaxCliArgs = 24;
inline constexpr std::size_t kMaxCliArgLength = 256;

// The arguments after argv[0]: the bytes split at '\0' and '\n', at most kMaxCliArgs of at most
// kMaxCliArgLength bytes each (longer ones are cut).
inline std::vector<std::string> split_cli_input(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < kMaxCliArgs; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      args.push_back(std::move(current));
      current.clear();
    } else if (current.size() < kMaxCliArgLength) {
      current += c;
    }
  }
  if (!current.empty() && args.size() < kMaxCliArgs) args.push_back(std::move(current));
  return args;
}

}  // namespace rnnjit::fuzz
