// rnn-jit --quantize int8 on plan, dump, bench and run: the plan says which unit runs (or why
// none), dump generates every unit's kernels on any CPU, bench times it beside the bf16 and FP32
// plans, run computes through it; bad values, a forced unit the CPU lacks and training are
// one-line errors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "rnnjit/rnn.hpp"
#include "tests/cli_fixture.hpp"

namespace rnnjit::test {
namespace {

class CliInt8 : public CliFixture {};

const std::vector<std::string> kSmall = {"--cell", "lstm", "--input-size", "20", "--hidden-size", "32",
                                         "--seq", "3", "--batch", "2"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The start of a unit's kernel names (kernel_name).
std::string kernel_prefix(Int8Unit unit) {
  switch (unit) {
    case Int8Unit::amx: return "i8gemm_amx_";
    case Int8Unit::avx_vnni: return "i8gemm_avxvnni_";
    case Int8Unit::avx2: return "i8gemm_avx2_";
    default: return "i8gemm_vnni_";
  }
}

TEST_F(CliInt8, PlanSaysWhichUnitRunsOrWhyNone) {
  const CliResult r = cli(with(with({"plan"}, kSmall), {"--quantize", "int8"}));
  ASSERT_EQ(r.status, 0) << r.err;
  if (const std::optional<Int8Unit> unit = int8_unit()) {
    EXPECT_NE(r.out.find(fmt::format("quantize=int8_dynamic int8_unit={}", to_string(*unit))), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(kernel_prefix(*unit)), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("quantize int8_dynamic:"), std::string::npos) << r.out;
  }
  const CliResult avx2 = cli(with(with({"plan"}, kSmall), {"--quantize", "int8"}), "RNNJIT_ISA=avx2");
  if (cpu_isa() != Isa::reference) {  // an AVX2 plan runs the best AVX2 unit
    ASSERT_EQ(avx2.status, 0) << avx2.err;
    const Int8Unit unit = avx_vnni_usable() ? Int8Unit::avx_vnni : Int8Unit::avx2;
    EXPECT_NE(avx2.out.find(fmt::format("quantize=int8_dynamic int8_unit={}", to_string(unit))), std::string::npos)
        << avx2.out;
    EXPECT_NE(avx2.out.find(kernel_prefix(unit)), std::string::npos) << avx2.out;
  }
  const CliResult json = cli(with(with({"plan"}, kSmall), {"--quantize", "int8", "--json"}));
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"quantize\":"), std::string::npos) << json.out;
}

TEST_F(CliInt8, DumpGeneratesTheVnniKernelsOnAnyCpu) {
  const CliResult r = cli(with(with({"dump", "--target", "avx512"}, kSmall), {"--quantize", "int8"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("i8gemm_vnni_"), std::string::npos);
  EXPECT_NE(r.out.find("vpdpbusd"), std::string::npos);
  const CliResult amx =
      cli(with(with({"dump", "--target", "avx512"}, kSmall), {"--quantize", "int8", "--int8-unit", "amx"}));
  ASSERT_EQ(amx.status, 0) << amx.err;
  EXPECT_NE(amx.out.find("i8gemm_amx_"), std::string::npos);
  EXPECT_NE(amx.out.find("tdpbusd"), std::string::npos);
  expect_error(with(with({"dump", "--target", "avx512"}, kSmall), {"--quantize", "int8", "--int8-unit", "vnni"}), 2,
               {"--int8-unit: unknown int8 unit 'vnni'"});
  // --target avx2: the avx2 unit's kernels by default, AVX-VNNI's when asked.
  const CliResult avx2 = cli(with(with({"dump", "--target", "avx2"}, kSmall), {"--quantize", "int8"}));
  ASSERT_EQ(avx2.status, 0) << avx2.err;
  EXPECT_NE(avx2.out.find("i8gemm_avx2_"), std::string::npos);
  EXPECT_NE(avx2.out.find("vpmaddubsw"), std::string::npos);
  EXPECT_EQ(avx2.out.find("zmm"), std::string::npos);
  const CliResult vnni =
      cli(with(with({"dump", "--target", "avx2"}, kSmall), {"--quantize", "int8", "--int8-unit", "avx_vnni"}));
  ASSERT_EQ(vnni.status, 0) << vnni.err;
  EXPECT_NE(vnni.out.find("i8gemm_avxvnni_"), std::string::npos);
  EXPECT_NE(vnni.out.find("vpdpbusd ymm"), std::string::npos);
}

TEST_F(CliInt8, BenchTimesItBesideBf16AndFp32) {
  const CliResult r =
      cli(with(with({"bench"}, kSmall), {"--quantize", "int8", "--compare", "bf16,strict", "--reps", "1", "--json"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"bf16\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"strict\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(int8_unit() ? "\"quantize\":\"int8_dynamic\"" : "\"quantize\":\"none\""),
            std::string::npos)
      << r.out;
}

TEST_F(CliInt8, BadValuesAndTrainingAreOneLineErrors) {
  expect_error(with(with({"plan"}, kSmall), {"--quantize", "int4"}), 2, {"--quantize: unknown quantize 'int4'"});
  expect_error(with(with({"bench"}, kSmall), {"--quantize", "fp8"}), 2, {"--quantize: unknown quantize 'fp8'"});
  expect_error(with(with({"plan"}, kSmall), {"--quantize", "int8", "--mode", "train"}), 1, {"inference only"});
  expect_error(with(with({"bench"}, kSmall), {"--quantize", "int8", "--mode", "train", "--reps", "1"}), 1,
               {"inference only"});
  expect_error(with(with({"plan"}, kSmall), {"--quantize", "int8"}), 1, {"RNNJIT_INT8_UNIT: unknown int8 unit 'bogus'"},
               "RNNJIT_INT8_UNIT=bogus");
  // A unit this CPU lacks, forced (e.g. avx512_vnni on an AVX2-only CPU).
  for (Int8Unit unit : {Int8Unit::amx, Int8Unit::avx512_vnni, Int8Unit::avx_vnni})
    if (!int8_unit_usable(unit)) {
      const std::string name(to_string(unit));
      expect_error(with(with({"plan"}, kSmall), {"--quantize", "int8"}), 1,
                   {fmt::format("RNNJIT_INT8_UNIT={} but this CPU (or OS) does not run it", name)},
                   "RNNJIT_INT8_UNIT=" + name);
      expect_error(with(with({"bench"}, kSmall), {"--quantize", "int8", "--reps", "1"}), 1,
                   {fmt::format("RNNJIT_INT8_UNIT={} but this CPU (or OS) does not run it", name)},
                   "RNNJIT_INT8_UNIT=" + name);
    }
}

}  // namespace
}  // namespace rnnjit::test
