// The fuzz targets' inputs, replayed in the normal build (no clang, no libFuzzer): every file of
// the committed corpora fuzz/corpus/<target>/ goes through the same entry point and the same
// checks as in the fuzzer (fuzz/npy_input.hpp, fuzz/config_input.hpp, fuzz/cli_input.hpp). A
// crash that fuzz/run.sh finds is fixed and its reproducer added to the corpus (named after what
// it found), so that it stays fixed here; fuzz/README.md lists them.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "fuzz/cli_input.hpp"
#include "fuzz/config_input.hpp"
#include "fuzz/npy_input.hpp"

namespace rnnjit {
namespace {

namespace fs = std::filesystem;

// LLVM's FuzzedDataProvider, the part fuzz/config_input.hpp uses, with the same semantics:
// integers are read from the end of the data, most significant byte first.
class ReplayProvider {
 public:
  ReplayProvider(const std::uint8_t* data, std::size_t size) : data_(data), remaining_(size) {}

  template <typename T>
  T ConsumeIntegralInRange(T min, T max) {
    static_assert(std::is_integral_v<T> && sizeof(T) <= sizeof(std::uint64_t));
    const std::uint64_t range = static_cast<std::uint64_t>(max) - static_cast<std::uint64_t>(min);
    std::uint64_t result = 0;
    std::size_t offset = 0;
    while (offset < sizeof(T) * CHAR_BIT && (range >> offset) > 0 && remaining_ != 0) {
      --remaining_;
      result = (result << CHAR_BIT) | data_[remaining_];
      offset += CHAR_BIT;
    }
    if (range != std::numeric_limits<std::uint64_t>::max()) result = result % (range + 1);
    return static_cast<T>(static_cast<std::uint64_t>(min) + result);
  }
  template <typename T>
  T ConsumeIntegral() {
    return ConsumeIntegralInRange(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  }
  bool ConsumeBool() { return 1 & ConsumeIntegral<std::uint8_t>(); }

 private:
  const std::uint8_t* data_;
  std::size_t remaining_;
};

std::vector<std::uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<fs::path> corpus(const std::string& target) {
  const fs::path dir = fs::path(RNNJIT_SOURCE_DIR) / "fuzz" / "corpus" / target;
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(FuzzRegressions, ProviderReadsLikeLibFuzzers) {
  // Bytes are consumed from the end: 0x05 then 0x01 0x02 (most significant first).
  const std::uint8_t data[] = {0x02, 0x01, 0x05};
  ReplayProvider p(data, sizeof(data));
  EXPECT_EQ(p.ConsumeIntegralInRange<int>(0, 3), 1);               // 5 % 4
  EXPECT_EQ(p.ConsumeIntegralInRange<int>(-2, 260), -2 + 0x0102);  // two bytes for a range of 262
  EXPECT_FALSE(p.ConsumeBool());                                   // no data left: zero
  EXPECT_EQ(p.ConsumeIntegral<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
}

TEST(FuzzRegressions, NpyCorpus) {
  const std::vector<fs::path> files = corpus("fuzz_npy");
  EXPECT_GE(files.size(), 10u);
  for (const fs::path& f : files) {
    const std::vector<std::uint8_t> bytes = slurp(f);
    EXPECT_EQ(fuzz::check_npy_input(std::as_bytes(std::span(bytes))), "") << f;
  }
}

TEST(FuzzRegressions, ConfigCorpus) {
  const std::vector<fs::path> files = corpus("fuzz_config");
  EXPECT_GE(files.size(), 10u);
  for (const fs::path& f : files) {
    const std::vector<std::uint8_t> bytes = slurp(f);
    ReplayProvider provider(bytes.data(), bytes.size());
    const fuzz::ConfigInput input = fuzz::decode_config_input(provider);
    EXPECT_EQ(fuzz::check_config_input(input), "") << f << ": " << fuzz::describe_input(input);
  }
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  q += '\'';
  return q;
}

// The command lines through the real rnn-jit (main.cpp and every subcommand's action, which the
// fuzzer runs only for plan and dump): a status of 0, 1 or 2 and at most one line on stderr,
// never a signal or a hang. Run in a scratch directory: relative paths land there.
TEST(FuzzRegressions, CliCorpus) {
  const std::vector<fs::path> files = corpus("fuzz_cli");
  EXPECT_GE(files.size(), 10u);
  const fs::path dir = fs::temp_directory_path() / ("rnnjit_fuzz_regressions_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const fs::path& f : files) {
    const std::vector<std::uint8_t> bytes = slurp(f);
    std::string cmd = "cd ";
    cmd += shell_quote(dir.string());
    cmd += " && timeout 300 ";
    cmd += shell_quote(RNNJIT_CLI_PATH);
    for (const std::string& a : fuzz::split_cli_input(bytes.data(), bytes.size())) {
      cmd += ' ';
      cmd += shell_quote(a);
    }
    cmd += " >out.txt 2>err.txt";
    const int rc = std::system(cmd.c_str());
    ASSERT_NE(rc, -1);
    ASSERT_TRUE(WIFEXITED(rc)) << f << ": killed by a signal";
    const int status = WEXITSTATUS(rc);
    EXPECT_TRUE(status == 0 || status == 1 || status == 2) << f << ": status " << status << " (124: timed out)";
    std::ifstream err(dir / "err.txt");
    const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 1) << f << ": " << text;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rnnjit
