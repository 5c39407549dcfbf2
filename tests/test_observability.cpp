// Environment switches: RNNJIT_VERBOSE logs plans and kernel creation, RNNJIT_DUMP writes every
// compiled kernel (.bin and .asm), RNNJIT_ISA forces an instruction set (and rejects one the
// CPU lacks or an unknown name), RNNJIT_CACHE_CAPACITY must be a positive integer,
// RNNJIT_PERF_MAP names the generated kernels for perf, RNNJIT_PROFILE times every step a call
// runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rnnjit/rnn.hpp"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status;
  std::string err;
};

// Runs a small `rnn-jit plan`/`bench` with extra environment assignments, capturing stderr.
CliRun run_cli(const std::string& env, const std::string& args) {
  const fs::path err = fs::temp_directory_path() / ("rnnjit_obs_" + std::to_string(::getpid()) + ".err");
  const std::string cmd = env + " '" + std::string(RNNJIT_CLI_PATH) + "' " + args + " >/dev/null 2>'" + err.string() + "'";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  fs::remove(err);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, s.str()};
}

const std::string kSmall = "bench --cell gru --input-size 5 --hidden-size 17 --seq 3 --batch 2 --reps 1 --warmup 0";

TEST(Observability, VerboseLogsPlansAndKernelsWithCacheOutcome) {
  const CliRun r = run_cli("RNNJIT_VERBOSE=1", kSmall);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("rnnjit: plan gru"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(cache miss)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" ms"), std::string::npos) << r.err;
}

TEST(Observability, ProfileTimesEveryStepOfEveryCall) {
  const std::string train = kSmall + " --mode train";
  const CliRun r = run_cli("RNNJIT_PROFILE=1", train);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* line : {"rnnjit: profile forward stage 0: ", "rnnjit: profile backward_data stage ",
                           "rnnjit: profile backward_weights stage "})
    EXPECT_NE(r.err.find(line), std::string::npos) << line << " in:\n" << r.err;
  // Each line names its step after its time.
  for (const char* what : {" ms input projection l0 d0", " ms forward recurrence l0 d0", " ms input gradient l0 d0",
                           " ms dW_ih l0 d0"})
    EXPECT_NE(r.err.find(what), std::string::npos) << what << " in:\n" << r.err;
  EXPECT_EQ(run_cli("", train).err.find("rnnjit: profile"), std::string::npos);
}

TEST(Observability, DumpWritesEveryCompiledKernel) {
  if (rnnjit::detect_isa() != rnnjit::Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  const fs::path dir = fs::temp_directory_path() / ("rnnjit_dump_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const CliRun r = run_cli("RNNJIT_DUMP='" + dir.string() + "'", kSmall);
  ASSERT_EQ(r.status, 0) << r.err;
  int asm_files = 0, bin_files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    asm_files += e.path().extension() == ".asm";
    bin_files += e.path().extension() == ".bin";
    if (e.path().extension() == ".asm" && e.path().filename().string().rfind("gru_fwd", 0) == 0) {
      std::ifstream in(e.path());
      std::stringstream s;
      s << in.rdbuf();
      EXPECT_NE(s.str().find("zmm"), std::string::npos);
    }
  }
  EXPECT_GT(asm_files, 0);
  EXPECT_EQ(asm_files, bin_files);
  fs::remove_all(dir);
}

// perf's JIT symbol map: /tmp/perf-<pid>.map, "start size name" in hex, one line a kernel.
TEST(Observability, PerfMapNamesEveryGeneratedKernel) {
  if (rnnjit::detect_isa() != rnnjit::Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  const fs::path pid_file = fs::temp_directory_path() / ("rnnjit_perfmap_" + std::to_string(::getpid()) + ".pid");
  // The shell writes its pid and becomes the CLI (exec keeps the pid).
  const CliRun r = run_cli("export RNNJIT_PERF_MAP=1; echo $$ >'" + pid_file.string() + "'; exec", kSmall);
  ASSERT_EQ(r.status, 0) << r.err;
  long pid = 0;
  std::ifstream(pid_file) >> pid;
  fs::remove(pid_file);
  const fs::path map = "/tmp/perf-" + std::to_string(pid) + ".map";
  std::ifstream in(map);
  ASSERT_TRUE(in) << map << " was not written";
  int kernels = 0, gate_kernels = 0;
  std::string start, size, name;
  while (in >> start >> size >> name) {
    ++kernels;
    EXPECT_GT(std::stoull(start, nullptr, 16), 0u) << name;
    EXPECT_GT(std::stoull(size, nullptr, 16), 0u) << name;
    gate_kernels += name.rfind("gru_fwd_avx512", 0) == 0;
  }
  fs::remove(map);
  EXPECT_GT(kernels, 1);
  EXPECT_GE(gate_kernels, 1);
}

TEST(Observability, IsaCanBeForcedAndIsValidated) {
  ::setenv("RNNJIT_ISA", "reference", 1);
  EXPECT_EQ(rnnjit::detect_isa(), rnnjit::Isa::reference);
  ::setenv("RNNJIT_ISA", "avx9000", 1);
  try {
    rnnjit::detect_isa();
    ADD_FAILURE() << "an unknown RNNJIT_ISA must be an error";
  } catch (const rnnjit::Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx9000"), std::string::npos);
  }
  ::unsetenv("RNNJIT_ISA");
  const CliRun r = run_cli("RNNJIT_ISA=avx9000", kSmall);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("avx9000"), std::string::npos) << r.err;
}

TEST(Observability, CacheCapacityMustBePositive) {
  const CliRun r = run_cli("RNNJIT_CACHE_CAPACITY=0", kSmall);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("RNNJIT_CACHE_CAPACITY"), std::string::npos) << r.err;
  const CliRun ok = run_cli("RNNJIT_CACHE_CAPACITY=1", kSmall);
  EXPECT_EQ(ok.status, 0) << ok.err;
}

}  // namespace
