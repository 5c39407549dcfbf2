// rnnjit tests: running the rnn-jit binary (RNNJIT_CLI_PATH) in a per-test temporary directory,
// with stdout and stderr captured, and checking the CLI's error convention.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace rnnjit::test {

struct CliResult {
  int status = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::temp_directory_path() / ("rnnjit_cli_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs rnn-jit with stdout and stderr redirected to files (stdout is never a terminal);
  // `env` is prepended to the command line, e.g. "RNNJIT_ISA=reference".
  CliResult cli(const std::vector<std::string>& args, const std::string& env = "") const {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about "literal" + std::string.
    std::string cmd;
    if (!env.empty()) cmd.append("env ").append(env).append(" ");
    cmd.append(shell_quote(RNNJIT_CLI_PATH));
    for (const std::string& a : args) cmd.append(" ").append(shell_quote(a));
    cmd.append(" >").append(shell_quote(path("stdout.txt"))).append(" 2>").append(shell_quote(path("stderr.txt")));
    const int rc = std::system(cmd.c_str());
    CliResult r;
    r.status = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
    r.out = slurp(path("stdout.txt"));
    r.err = slurp(path("stderr.txt"));
    return r;
  }

  // Exit status `status` and exactly one stderr line "rnn-jit: error: ..." containing every
  // string of `mentions`; `env` as for cli().
  void expect_error(const std::vector<std::string>& args, int status, const std::vector<std::string>& mentions,
                    const std::string& env = "") const {
    std::string cmdline;
    for (const auto& a : args) cmdline += " " + a;
    SCOPED_TRACE(env + " rnn-jit" + cmdline);
    const CliResult r = cli(args, env);
    EXPECT_EQ(r.status, status) << "stderr: " << r.err;
    EXPECT_EQ(r.err.rfind("rnn-jit: error: ", 0), 0u) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.back(), '\n');
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
    for (const std::string& m : mentions) EXPECT_NE(r.err.find(m), std::string::npos) << "no '" << m << "' in: " << r.err;
  }

  std::filesystem::path dir_;
};

}  // namespace rnnjit::test
