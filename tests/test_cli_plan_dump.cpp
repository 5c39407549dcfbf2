// rnn-jit plan, dump and demo, run as the user runs them (RNNJIT_CLI_PATH): the plan as text and
// as one JSON document holding steps, kernels (name and descriptor) and regions; dump's formats
// (asm, hex, bin), its -o DIR layout (one file per kernel, named after it), its targets; the demo's
// tour on a small shape; and status 2 with a one-line message naming the flag for every usage error.
#include <gtest/gtest.h>
#include <xbyak/xbyak_util.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc.hpp"
#include "rnnjit/rnn.hpp"
#include "tests/cli_fixture.hpp"

namespace rnnjit {
namespace {

using test::CliResult;
using test::slurp;

namespace fs = std::filesystem;
using nlohmann::json;

bool cpu_has_avx512() {
  const Xbyak::util::Cpu cpu;
  using C = Xbyak::util::Cpu;
  return cpu.has(C::tAVX512F) && cpu.has(C::tAVX512DQ) && cpu.has(C::tAVX512BW) && cpu.has(C::tAVX512VL);
}

// A small network: every subcommand runs it in milliseconds. (CLI11 rejects a repeated option,
// so other cells get their own list.)
std::vector<std::string> small(const std::string& cell = "lstm") {
  return {"--cell", cell, "--input-size", "16", "--hidden-size", "24", "--seq", "5", "--batch", "3"};
}
const std::vector<std::string> kSmall = small();

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The section of `out` under the header "== name ==", up to the next header.
std::string section(const std::string& out, const std::string& name) {
  const std::string header = "== " + name + " ==\n";
  const std::size_t begin = out.find(header);
  if (begin == std::string::npos) return {};
  const std::size_t body = begin + header.size();
  const std::size_t end = out.find("\n== ", body);
  return out.substr(body, end == std::string::npos ? std::string::npos : end + 1 - body);
}

// Parses "offset: xx xx ..." lines (comment lines start with '#'), checking the offsets run on.
std::vector<std::uint8_t> parse_hex(const std::string& text) {
  std::vector<std::uint8_t> bytes;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t colon = line.find(':');
    EXPECT_NE(colon, std::string::npos) << line;
    if (colon == std::string::npos) break;
    EXPECT_EQ(std::stoul(line.substr(0, colon), nullptr, 16), bytes.size()) << line;
    std::istringstream rest(line.substr(colon + 1));
    std::string byte;
    while (rest >> byte) bytes.push_back(static_cast<std::uint8_t>(std::stoul(byte, nullptr, 16)));
  }
  return bytes;
}

class CliPlanDumpTest : public test::CliFixture {
 protected:
  // The plan's JSON for `args` (plan flags without --json), checked to be one document.
  json plan_json(const std::vector<std::string>& args) const {
    const CliResult r = cli(cat(cat({"plan"}, args), {"--json"}));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    try {
      return json::parse(r.out);  // throws on a second document or trailing text
    } catch (const json::exception& e) {
      ADD_FAILURE() << "plan --json is not one JSON document: " << e.what() << "\n" << r.out.substr(0, 500);
      return json::object();
    }
  }

  // The distinct kernel names of a plan.
  static std::vector<std::string> kernel_names(const json& plan) {
    std::vector<std::string> names;
    for (const json& k : plan.value("kernels", json::array())) {
      const std::string n = k.value("name", "");
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    return names;
  }

  static std::set<std::string> files_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }

};

// ---- plan ----

TEST_F(CliPlanDumpTest, PlanJsonHoldsStepsKernelsAndRegions) {
  for (const std::string mode : {"infer", "train"}) {
    SCOPED_TRACE(mode);
    const json p = plan_json(cat(kSmall, {"--mode", mode, "--isa", "avx512"}));
    ASSERT_TRUE(p.is_object());
    EXPECT_EQ(p.value("isa", ""), "avx512");
    EXPECT_EQ(p.value("mode", ""), mode == "train" ? "training" : "inference");
    ASSERT_TRUE(p.contains("steps"));
    ASSERT_TRUE(p["steps"].contains("forward"));
    EXPECT_FALSE(p["steps"]["forward"].empty());
    for (const json& s : p["steps"]["forward"]) EXPECT_TRUE(s.contains("kind")) << s.dump();
    EXPECT_EQ(p["steps"]["backward_data"].empty(), mode == "infer");
    EXPECT_EQ(p["steps"]["backward_weights"].empty(), mode == "infer");

    ASSERT_TRUE(p.contains("kernels"));
    ASSERT_TRUE(p["kernels"].is_array());
    ASSERT_FALSE(p["kernels"].empty());
    bool lstm_forward = false;
    for (const json& k : p["kernels"]) {
      ASSERT_TRUE(k.contains("name") && k["name"].is_string()) << k.dump();
      ASSERT_TRUE(k.contains("descriptor") && k["descriptor"].is_object()) << k.dump();
      EXPECT_EQ(k["descriptor"].value("isa", ""), "avx512") << k.dump();
      EXPECT_TRUE(k["descriptor"].contains("generator_version")) << k.dump();
      lstm_forward = lstm_forward || k["name"].get<std::string>().starts_with("lstm_fwd");
    }
    EXPECT_TRUE(lstm_forward) << p["kernels"].dump();

    ASSERT_TRUE(p.contains("regions"));
    ASSERT_FALSE(p["regions"].empty());
    for (const json& r : p["regions"]) {
      EXPECT_TRUE(r.contains("name") && r["name"].is_string()) << r.dump();
      EXPECT_TRUE(r.contains("offset") && r["offset"].is_number_unsigned()) << r.dump();
      EXPECT_TRUE(r.contains("size") && r["size"].is_number_unsigned()) << r.dump();
      EXPECT_EQ(r["offset"].get<std::uint64_t>() % 64, 0u) << r.dump();
    }
    EXPECT_TRUE(p.contains("workspace_bytes")) << p.dump();
    EXPECT_TRUE(p.contains("reserve_bytes")) << p.dump();
    EXPECT_EQ(p["reserve_bytes"].get<std::uint64_t>() == 0, mode == "infer");
  }
}

TEST_F(CliPlanDumpTest, PlanTextListsKernelsRegionsAndSteps) {
  const std::vector<std::string> flags =
      cat(small("gru"), {"--layers", "2", "--bidirectional", "--mode", "train", "--isa", "avx512"});
  const json p = plan_json(flags);
  const CliResult r = cli(cat({"plan"}, flags));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("gru"), std::string::npos) << r.out;
  for (const std::string& name : kernel_names(p)) EXPECT_NE(r.out.find(name), std::string::npos) << name;
  for (const json& region : p["regions"]) {
    EXPECT_NE(r.out.find(region["name"].get<std::string>()), std::string::npos) << region.dump();
  }
  EXPECT_NE(r.out.find("forward"), std::string::npos);
  EXPECT_NE(r.out.find("backward data"), std::string::npos);
  EXPECT_NE(r.out.find("backward weights"), std::string::npos);
  EXPECT_NE(r.out.find(std::to_string(p["workspace_bytes"].get<std::uint64_t>())), std::string::npos);
  EXPECT_NE(r.out.find(std::to_string(p["reserve_bytes"].get<std::uint64_t>())), std::string::npos);
}

TEST_F(CliPlanDumpTest, PlanDefaultsAreDeepSpeech2AndTheDetectedIsa) {
  const json p = plan_json({});  // plans only: nothing is compiled or run
  ASSERT_TRUE(p.contains("config")) << p.dump();
  EXPECT_EQ(p["config"].value("cell", ""), "lstm");
  EXPECT_EQ(p["config"].value("input_size", 0), 800);
  EXPECT_EQ(p["config"].value("hidden_size", 0), 800);
  EXPECT_EQ(p["config"].value("num_layers", 0), 1);
  EXPECT_EQ(p["config"].value("bidirectional", true), false);
  EXPECT_EQ(p["shape"].value("seq_len", 0), 300);
  EXPECT_EQ(p["shape"].value("batch", 0), 20);
  EXPECT_EQ(p.value("mode", ""), "inference");
  EXPECT_EQ(p.value("isa", ""), std::string(to_string(detect_isa())));

  // RNNJIT_ISA is honoured; --isa wins over it.
  CliResult r = cli({"plan", "--json", "--seq", "2", "--batch", "1"}, "RNNJIT_ISA=reference");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).value("isa", ""), "reference");
  r = cli({"plan", "--json", "--seq", "2", "--batch", "1", "--isa", "avx2"}, "RNNJIT_ISA=reference");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).value("isa", ""), "avx2");

  // The caches the plan is blocked for: the CPU's, or RNNJIT_CACHES; a bad value is one line.
  r = cli({"plan", "--json", "--seq", "2", "--batch", "1"}, "RNNJIT_CACHES=32K,1M,8M,16M,1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["caches"].value("l1d_bytes", 0), 32 * 1024);
  EXPECT_EQ(json::parse(r.out)["caches"].value("l2_bytes", 0), 1024 * 1024);
  EXPECT_EQ(json::parse(r.out)["caches"].value("l3_bytes", 0), 16 << 20);
  EXPECT_EQ(json::parse(r.out)["caches"].value("tlb_reach_bytes", 0), 8 << 20);
  EXPECT_EQ(json::parse(r.out)["caches"].value("zmm_fmas_per_cycle", 0), 1);
  r = cli({"plan", "--seq", "2", "--batch", "1"}, "RNNJIT_CACHES=32K,1M");
  EXPECT_NE(r.out.find("caches=L1d 32 KiB, L2 1024 KiB, L3 32768 KiB, TLB reach 8192 KiB, 2 zmm FMAs a cycle"),
            std::string::npos)
      << r.out;
  expect_error({"plan", "--seq", "2", "--batch", "1"}, 1, {"RNNJIT_CACHES='1M'"}, "RNNJIT_CACHES=1M");

  r = cli({"plan", "--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* s : {"--cell", "--input-size", "--hidden-size", "--layers", "--bidirectional", "--seq", "--batch",
                        "--mode", "--isa", "--json", "800", "300", "20"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " not in: " << r.out;
}

// The plan printed is the one that runs: made for the runtime's thread count (RNNJIT_NUM_THREADS,
// else every hardware thread) unless --threads says otherwise, and split across those threads.
TEST_F(CliPlanDumpTest, PlanIsMadeForTheThreadsThatRunIt) {
  const std::vector<std::string> ds2 = {"plan", "--json", "--isa", "avx512"};
  for (const auto& [env, flag, want] : {std::tuple<std::string, std::string, int>{"RNNJIT_NUM_THREADS=2", "", 2},
                                        {"RNNJIT_NUM_THREADS=1", "", 1},
                                        {"RNNJIT_NUM_THREADS=1", "2", 2},
                                        {"RNNJIT_NUM_THREADS=2", "1", 1}}) {
    SCOPED_TRACE(env + " --threads " + flag);
    const CliResult r = cli(flag.empty() ? ds2 : cat(ds2, {"--threads", flag}), env);
    ASSERT_EQ(r.status, 0) << r.err;
    const json p = json::parse(r.out);
    EXPECT_EQ(p.value("threads", 0), want);
    // Each thread runs a gate kernel on its share of the 800 hidden units (a whole number of
    // the recurrent GEMM's panels: not always half).
    std::map<std::string, int> cols;
    for (const json& k : p.at("kernels")) cols[k.at("name").get<std::string>()] = k.at("descriptor").value("cols", 0);
    const auto& forward = p.at("steps").at("forward");
    const auto loop = std::find_if(forward.begin(), forward.end(), [](const json& s) { return s.at("kind") == "recurrence"; });
    ASSERT_NE(loop, forward.end()) << p.dump();
    const auto& shares = loop->at("thread_kernels");
    ASSERT_EQ(static_cast<int>(shares.size()), want) << p.dump();
    int units = 0;
    for (const json& name : shares) {
      EXPECT_GT(cols[name.get<std::string>()], want == 2 ? 300 : 799) << name;
      units += cols[name.get<std::string>()];
    }
    EXPECT_EQ(units, 800) << p.dump();
  }
}

// --projection-gemm: the input projection on OpenBLAS (W_ih read in place, nothing packed for
// it), the recurrent GEMM still generated; the plan's notes say why.
TEST_F(CliPlanDumpTest, PlanShowsWhoComputesTheInputProjection) {
  const CliResult r = cli(cat({"plan", "--isa", "avx512", "--projection-gemm", "openblas"}, kSmall));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("note: input projection l0 d0: OpenBLAS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(openblas)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("packed.w_ih"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("packed.w_hh"), std::string::npos) << r.out;
}

// --fpmath bf16: where a bf16 unit runs, the inference GEMMs on the weights are its kernels and
// the plan says fpmath=bf16 and which unit; elsewhere the plan stays FP32 and says why. Training
// stays FP32.
TEST_F(CliPlanDumpTest, PlanWithFpmathBf16) {
  const CliResult r = cli(cat({"plan", "--isa", "avx512", "--fpmath", "bf16"}, kSmall));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::optional<Bf16Unit> unit = bf16_unit();
  if (unit == Bf16Unit::amx) {
    EXPECT_NE(r.out.find("fpmath=bf16 bf16_unit=amx"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bf16gemm_amx_"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("amx-bf16 m_r="), std::string::npos) << r.out;
  } else if (unit == Bf16Unit::avx512_bf16) {
    EXPECT_NE(r.out.find("fpmath=bf16 bf16_unit=avx512_bf16"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bf16gemm_dp_"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("avx512-bf16 m_r="), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("runs neither AMX-BF16 nor AVX512_BF16, so the plan is FP32"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("bf16gemm_"), std::string::npos) << r.out;
  }
  // Training: every GEMM bf16, forward and backward (and said so).
  const CliResult train = cli(cat(cat({"plan", "--isa", "avx512", "--fpmath", "bf16"}, kSmall), {"--mode", "train"}));
  ASSERT_EQ(train.status, 0) << train.err;
  EXPECT_EQ(train.out.find("bf16gemm_") != std::string::npos, unit.has_value()) << train.out;
  if (unit) {
    EXPECT_NE(train.out.find("and the weight gradients read bf16 copies"), std::string::npos) << train.out;
  }
}

// The bf16 kernels are generated (never run) by dump on any CPU: AMX's tile loads, tdpbf16ps and
// stores; AVX512_BF16's B loads, A's pairs broadcast and vdpbf16ps. An unknown unit is a usage
// error naming the flag.
TEST_F(CliPlanDumpTest, DumpShowsTheBf16Kernels) {
  const CliResult r = cli(cat({"dump", "--target", "avx512", "--fpmath", "bf16"}, kSmall));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* mnemonic : {"bf16gemm_amx_", "ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored"})
    EXPECT_NE(r.out.find(mnemonic), std::string::npos) << mnemonic << " not in\n" << r.out;
  const CliResult dp = cli(cat({"dump", "--target", "avx512", "--fpmath", "bf16", "--bf16-unit", "avx512_bf16"}, kSmall));
  ASSERT_EQ(dp.status, 0) << dp.err;
  for (const char* mnemonic : {"bf16gemm_dp_", "vpbroadcastd", "vdpbf16ps", "{1to16}"})
    EXPECT_NE(dp.out.find(mnemonic), std::string::npos) << mnemonic << " not in\n" << dp.out;
  EXPECT_EQ(dp.out.find("tdpbf16ps"), std::string::npos);
  const CliResult bad = cli(cat({"dump", "--target", "avx512", "--fpmath", "bf16", "--bf16-unit", "tiles"}, kSmall));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--bf16-unit: unknown bf16 unit 'tiles'"), std::string::npos) << bad.err;
}

// ---- dump ----

TEST_F(CliPlanDumpTest, DumpAsmOfTheLstmForwardKernelHasZmmFma) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 (F, DQ, BW, VL)";
  const std::vector<std::string> flags = kSmall;
  const std::vector<std::string> names = kernel_names(plan_json(cat(flags, {"--isa", "avx512"})));
  ASSERT_FALSE(names.empty());
  const CliResult r = cli(cat(cat({"dump"}, flags), {"--target", "avx512", "--format", "asm"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  std::size_t headers = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) headers += line.starts_with("== ") && line.ends_with(" ==");
  EXPECT_EQ(headers, names.size()) << "one '== name ==' header per kernel expected";
  bool found = false;
  for (const std::string& name : names) {
    const std::string asm_text = section(r.out, name);
    EXPECT_FALSE(asm_text.empty()) << "no section for " << name;
    EXPECT_NE(asm_text.find(name), std::string::npos) << "the disassembly names its kernel: " << name;
    if (!name.starts_with("lstm_fwd_avx512")) continue;
    found = true;
    EXPECT_NE(asm_text.find("vfmadd"), std::string::npos) << asm_text.substr(0, 2000);
    EXPECT_NE(asm_text.find("zmm"), std::string::npos) << asm_text.substr(0, 2000);
    EXPECT_NE(asm_text.find("000000"), std::string::npos) << "no offsets: " << asm_text.substr(0, 2000);
  }
  EXPECT_TRUE(found) << "no lstm_fwd_avx512 kernel among the plan's kernels";
}

TEST_F(CliPlanDumpTest, DumpToDirectoryWritesOneFilePerKernel) {
  const std::vector<std::string> flags = cat(kSmall, {"--mode", "train"});
  const std::vector<std::string> names = kernel_names(plan_json(cat(flags, {"--isa", "avx512"})));
  ASSERT_GE(names.size(), 2u);
  for (const std::string format : {"asm", "hex", "bin"}) {
    SCOPED_TRACE(format);
    const fs::path out = dir_ / ("out_" + format);
    const CliResult r = cli(cat(cat({"dump"}, flags), {"--target", "avx512", "--format", format, "-o", out.string()}));
    ASSERT_EQ(r.status, 0) << r.err;
    std::set<std::string> expected;
    for (const std::string& n : names) expected.insert(n + "." + format);
    EXPECT_EQ(files_in(out), expected);
    for (const std::string& n : names) EXPECT_GT(fs::file_size(out / (n + "." + format)), 0u) << n;
  }
  // hex and bin hold the same bytes; asm starts with the kernel's name.
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    const std::string bin = slurp(dir_ / "out_bin" / (n + ".bin"));
    const std::vector<std::uint8_t> hex = parse_hex(slurp(dir_ / "out_hex" / (n + ".hex")));
    EXPECT_EQ(std::string(hex.begin(), hex.end()), bin);
    EXPECT_EQ(slurp(dir_ / "out_asm" / (n + ".asm")).rfind(n, 0), 0u);
  }

  // Without -o: stdout, one header per kernel; hex there holds the same bytes as the files.
  const CliResult r = cli(cat(cat({"dump"}, flags), {"--target", "avx512", "--format", "hex"}));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& n : names) {
    const std::vector<std::uint8_t> hex = parse_hex(section(r.out, n));
    EXPECT_EQ(std::string(hex.begin(), hex.end()), slurp(dir_ / "out_bin" / (n + ".bin"))) << n;
  }
}

TEST_F(CliPlanDumpTest, DumpBinToStdoutIsOneKernelsRawBytes) {
  const std::vector<std::string> names = kernel_names(plan_json(cat(kSmall, {"--isa", "avx512"})));
  ASSERT_FALSE(names.empty());
  const std::string& name = names.front();
  CliResult r = cli(cat(cat({"dump"}, kSmall), {"--target", "avx512", "--format", "bin", "--kernel", name}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const CliResult hex = cli(cat(cat({"dump"}, kSmall), {"--target", "avx512", "--format", "hex", "--kernel", name}));
  ASSERT_EQ(hex.status, 0) << hex.err;
  const std::vector<std::uint8_t> bytes = parse_hex(section(hex.out, name));
  EXPECT_FALSE(bytes.empty());
  EXPECT_EQ(r.out, std::string(bytes.begin(), bytes.end()));
  if (names.size() > 1) expect_error(cat(cat({"dump"}, kSmall), {"--target", "avx512", "--format", "bin"}), 2,
                                     {"--format bin", "--kernel", name});
}

// AVX2 kernels are generated: their disassembly is ymm code, VEX only (no zmm, no k registers).
TEST_F(CliPlanDumpTest, DumpAvx2ShowsYmmCode) {
  const CliResult r = cli(cat(cat({"dump"}, kSmall), {"--target", "avx2"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("== lstm_fwd_avx2_"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("ymm"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_EQ(r.out.find("zmm"), std::string::npos);
  EXPECT_EQ(r.out.find("{k"), std::string::npos);
  EXPECT_EQ(r.out.find("scalar"), std::string::npos);
}

TEST_F(CliPlanDumpTest, DumpReferenceSaysItsKernelsAreScalarTwins) {
  const std::vector<std::string> flags = cat(cat({"dump"}, kSmall), {"--target", "reference"});
  CliResult r = cli(flags);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("scalar"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("== "), std::string::npos) << r.out;

  const json p = plan_json(cat(kSmall, {"--isa", "reference"}));
  const std::vector<std::string> names = kernel_names(p);
  ASSERT_FALSE(names.empty());
  // Kernels without code: hex files hold a line saying so; bin writes no empty file.
  r = cli(cat(flags, {"--format", "hex", "-o", path("hex")}));
  ASSERT_EQ(r.status, 0) << r.err;
  r = cli(cat(flags, {"--format", "bin", "-o", path("bin")}));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& n : names) {
    const std::string hex = slurp(dir_ / "hex" / (n + ".hex"));
    const fs::path bin = dir_ / "bin" / (n + ".bin");
    ASSERT_NE(n.find("_reference_"), std::string::npos) << n;
    EXPECT_NE(hex.find("no generated code"), std::string::npos) << n << ": " << hex;
    EXPECT_FALSE(fs::exists(bin) && fs::file_size(bin) == 0) << bin;
    EXPECT_NE(r.out.find(n), std::string::npos) << "no line about " << n << " in: " << r.out;
  }
}

TEST_F(CliPlanDumpTest, DumpCudaWritesSourceAndPtx) {
  expect_error(cat(cat({"dump"}, kSmall), {"--target", "cuda"}), 2, {"--format", "cu or ptx"});
  expect_error(cat(cat({"dump"}, kSmall), {"--target", "cuda", "--format", "ptx", "--arch", "90"}), 2, {"--arch"});
  const CliResult cu = cli(cat(cat({"dump"}, kSmall), {"--target", "cuda", "--format", "cu"}));
  ASSERT_EQ(cu.status, 0) << cu.err;
  EXPECT_NE(cu.out.find("extern \"C\" __global__"), std::string::npos) << cu.out.substr(0, 400);
  EXPECT_NE(cu.out.find("== "), std::string::npos);
  // The forward's persistent kernel too, for the GPU --sms and --shared-per-block describe (none
  // where W_hh's rows do not fit).
  EXPECT_NE(cu.out.find("_persistent_b"), std::string::npos) << cu.out.substr(0, 400);
  const CliResult tiny =
      cli(cat(cat({"dump"}, kSmall), {"--target", "cuda", "--format", "cu", "--sms", "2", "--shared-per-block", "512"}));
  ASSERT_EQ(tiny.status, 0) << tiny.err;
  EXPECT_EQ(tiny.out.find("_persistent_b"), std::string::npos);
  expect_error(cat(cat({"dump"}, kSmall), {"--target", "cuda", "--format", "cu", "--sms", "0"}), 2, {"--sms"});
  if (!rnnjit::cuda::nvrtc_available()) {
    expect_error(cat(cat({"dump"}, kSmall), {"--target", "cuda", "--format", "ptx"}), 1, {"NVRTC"});
    return;
  }
  const CliResult ptx = cli(cat(cat({"dump"}, kSmall), {"--target", "cuda", "--format", "ptx", "--arch", "sm_80"}));
  ASSERT_EQ(ptx.status, 0) << ptx.err;
  EXPECT_NE(ptx.out.find(".entry"), std::string::npos);
  EXPECT_NE(ptx.out.find(".target sm_80"), std::string::npos);
}

// ---- usage errors: status 2, one line naming the flag ----

TEST_F(CliPlanDumpTest, UsageErrorsExitTwo) {
  for (const std::string cmd : {"plan", "dump", "demo"}) {
    SCOPED_TRACE(cmd);
    expect_error({cmd, "--frob"}, 2, {"--frob"});
    expect_error({cmd, "--hidden-size", "0"}, 2, {"--hidden-size"});
    expect_error({cmd, "--input-size", "-3"}, 2, {"--input-size"});
    expect_error({cmd, "--seq", "0"}, 2, {"--seq"});
    expect_error({cmd, "--batch", "x"}, 2, {"--batch"});
    expect_error({cmd, "--mode", "foo"}, 2, {"--mode", "'foo'"});
    expect_error({cmd, "--cell", "lstn"}, 2, {"--cell", "'lstn'"});
    expect_error({cmd, "--layers", "0"}, 2, {"--layers"});
    expect_error({cmd, "--threads", "300"}, 2, {"--threads", "300"});
    expect_error({cmd, "--threads", "-1"}, 2, {"--threads"});
  }
  expect_error({"plan", "--isa", "foo"}, 2, {"--isa", "'foo'"});
  expect_error({"plan", "--projection-gemm", "fast"}, 2, {"--projection-gemm", "'fast'"});
  for (const char* cmd : {"plan", "dump", "bench", "demo"})
    expect_error({cmd, "--fpmath", "fp16"}, 2, {"--fpmath", "'fp16'", "strict or bf16"});
  expect_error({"demo", "--projection-gemm", "fast"}, 2, {"--projection-gemm", "'fast'"});
  expect_error({"demo", "--isa", "foo"}, 2, {"--isa", "'foo'"});
  expect_error({"plan", "--json", "extra"}, 2, {"'extra'"});

  const std::vector<std::string> dump = cat({"dump"}, kSmall);
  expect_error(cat(dump, {"--target", "foo"}), 2, {"--target", "'foo'"});
  expect_error(cat(dump, {"--format", "foo"}), 2, {"--format", "'foo'"});
  expect_error(cat(dump, {"--format", "cu", "--target", "avx512"}), 2, {"--format cu", "--target cuda"});
  expect_error(cat(dump, {"--format", "ptx", "--target", "avx2"}), 2, {"--format ptx", "--target cuda"});
  const std::vector<std::string> names = kernel_names(plan_json(cat(kSmall, {"--isa", "avx512"})));
  ASSERT_FALSE(names.empty());
  std::vector<std::string> mentions = {"--kernel", "'nosuch'"};
  mentions.insert(mentions.end(), names.begin(), names.end());  // the available names
  expect_error(cat(dump, {"--target", "avx512", "--kernel", "nosuch"}), 2, mentions);
}

// ---- demo ----

TEST_F(CliPlanDumpTest, DemoToursASmallShape) {
  // The DS2 default takes ~15 s: a smaller shape here, with a check shorter than the sequence.
  const CliResult r = cli({"demo", "--input-size", "32", "--hidden-size", "48", "--seq", "12", "--batch", "4",
                           "--check-seq", "5", "--repeats", "1"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* s : {"1. the plan", "2. generated code", "3. check", "first 5 of 12 time steps", "max-abs-error",
                        "PASS", "4. timing", "GFLOPS", "reference (estimate)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "no '" << s << "' in:\n" << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  if (detect_isa() != Isa::reference) {
    EXPECT_NE(r.out.find("baseline"), std::string::npos) << r.out;
  }
  if (detect_isa() == Isa::avx512) {
    EXPECT_NE(r.out.find("zmm"), std::string::npos) << r.out;
  }

  const CliResult help = cli({"demo", "--help"});
  EXPECT_EQ(help.status, 0) << help.err;
  for (const char* s : {"--check-seq", "--backend", "--isa", "800", "300", "20"})
    EXPECT_NE(help.out.find(s), std::string::npos) << s << " not in: " << help.out;
}

}  // namespace
}  // namespace rnnjit
