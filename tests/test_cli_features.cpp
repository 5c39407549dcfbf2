// rnn-jit run with the feature flags of issue #7 (--direction, --proj-size, --clip, --dropout
// with --seed, --batch-first, --seq-lengths), end to end through .npy files against the
// double-precision reference, and the flags' usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "rnnjit/npy.hpp"
#include "rnnjit/weights.hpp"
#include "tests/cli_fixture.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

namespace fs = std::filesystem;
using i64 = std::int64_t;

class CliFeatures : public test::CliFixture {};

TEST_F(CliFeatures, RunWithEveryFeatureMatchesTheReference) {
  RnnConfig config{.cell = CellKind::lstm, .input_size = 5, .hidden_size = 6, .num_layers = 2};
  config.reverse = true;
  config.proj_size = 3;
  config.clip = 0.5f;
  config.dropout = 0.25f;
  config.batch_first = true;
  const i64 T = 4, N = 3, L = 2, S = 3, H = 6;
  test::RnnCase rc(config, {T, N}, 21);
  rc.lengths = {2, 4, 1};
  rc.dropout_seed = 99;

  const WeightLayout layout(config);
  fs::create_directories(dir_ / "params");
  for (const ParamBlock& b : layout.blocks())
    npy::write_f32(path("params/" + b.name + ".npy"), b.shape,
                   std::span<const float>(rc.w).subspan(static_cast<std::size_t>(b.offset), static_cast<std::size_t>(b.size)));
  npy::write_f32(path("x.npy"), {N, T, 5}, rc.x);
  npy::write_f32(path("h0.npy"), {L, N, S}, rc.hx);
  npy::write_f32(path("c0.npy"), {L, N, H}, rc.cx);
  npy::write_f32(path("dy.npy"), {N, T, S}, rc.dy);
  npy::write_f32(path("dhy.npy"), {L, N, S}, rc.dhy);
  npy::write_f32(path("dcy.npy"), {L, N, H}, rc.dcy);
  const std::vector<std::int64_t> lengths64(rc.lengths.begin(), rc.lengths.end());
  npy::write(path("lengths.npy"), npy::DType::i64, {N},
             std::as_bytes(std::span<const std::int64_t>(lengths64)));
  const std::vector<std::string> args = {
      "run", "--cell", "lstm", "--input-size", "5", "--hidden-size", "6", "--layers", "2", "--direction", "reverse",
      "--proj-size", "3", "--clip", "0.5", "--dropout", "0.25", "--seed", "99", "--batch-first", "--params",
      path("params"), "--x", path("x.npy"), "--h0", path("h0.npy"), "--c0", path("c0.npy"), "--seq-lengths",
      path("lengths.npy"), "--dy", path("dy.npy"), "--dhy", path("dhy.npy"), "--dcy", path("dcy.npy"), "--out",
      path("out"), "--backend", "jit"};
  const test::CliResult r = cli(args);
  ASSERT_EQ(r.status, 0) << r.err;

  const test::Tensors want = rc.reference(true);
  auto out = [&](const std::string& f, const std::vector<i64>& shape) { return npy::read_f32(path("out/" + f), shape); };
  const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
  test::expect_close(out("y.npy", {N, T, S}), want.y, tol, "y");
  test::expect_close(out("hy.npy", {L, N, S}), want.hy, tol, "hy");
  test::expect_close(out("cy.npy", {L, N, H}), want.cy, tol, "cy");
  test::expect_close(out("dx.npy", {N, T, 5}), want.dx, gtol, "dx");
  test::expect_close(out("dh0.npy", {L, N, S}), want.dhx, gtol, "dh0");
  test::expect_close(out("dc0.npy", {L, N, H}), want.dcx, gtol, "dc0");
  const ParamBlock& hr = layout.find("weight_hr_l1");
  const auto first = want.dw.begin() + hr.offset;
  test::expect_close(out("grad_weight_hr_l1.npy", hr.shape), std::vector<float>(first, first + hr.size), gtol,
                     "grad_weight_hr_l1");
}

TEST_F(CliFeatures, FlagErrors) {
  const std::vector<std::string> base = {"plan", "--cell", "lstm", "--input-size", "4", "--hidden-size", "8",
                                         "--seq", "3", "--batch", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_error(with({"--direction", "up"}), 2, {"--direction", "'up'"});
  expect_error(with({"--direction", "reverse", "--bidirectional"}), 2, {"--bidirectional", "--direction reverse"});
  expect_error(with({"--proj-size", "8"}), 2, {"--proj-size"});
  expect_error(with({"--clip", "-1"}), 2, {"--clip"});
  expect_error(with({"--dropout", "1"}), 2, {"--dropout"});
  expect_error({"plan", "--cell", "gru", "--input-size", "4", "--hidden-size", "8", "--proj-size", "2"}, 2,
               {"--proj-size", "LSTM only"});
  const test::CliResult ok = cli(with({"--direction", "reverse", "--proj-size", "3", "--clip", "2", "--batch-first",
                                        "--mode", "train", "--dropout", "0.5", "--layers", "2"}));
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("dropout l0"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("output projection"), std::string::npos) << ok.out;
}

TEST_F(CliFeatures, BadLengthFilesExitOne) {
  RnnConfig config{.cell = CellKind::gru, .input_size = 2, .hidden_size = 3};
  test::RnnCase rc(config, {4, 2});
  fs::create_directories(dir_ / "params");
  const WeightLayout layout(config);
  for (const ParamBlock& b : layout.blocks())
    npy::write_f32(path("params/" + b.name + ".npy"), b.shape,
                   std::span<const float>(rc.w).subspan(static_cast<std::size_t>(b.offset), static_cast<std::size_t>(b.size)));
  npy::write_f32(path("x.npy"), {4, 2, 2}, rc.x);
  auto run = [&](const std::string& lengths) {
    return std::vector<std::string>{"run", "--cell", "gru", "--input-size", "2", "--hidden-size", "3", "--params",
                                    path("params"), "--x", path("x.npy"), "--out", path("out"), "--seq-lengths",
                                    lengths};
  };
  npy::write_f32(path("f.npy"), {2}, std::vector<float>{1, 2});
  expect_error(run(path("f.npy")), 1, {path("f.npy"), "int32 or int64"});
  const std::vector<std::int32_t> three{1, 2, 3};
  npy::write_i32(path("n3.npy"), {3}, three);
  expect_error(run(path("n3.npy")), 1, {path("n3.npy"), "shape (3,) does not match expected (2,)"});
  const std::vector<std::int32_t> too_long{1, 5};
  npy::write_i32(path("long.npy"), {2}, too_long);
  expect_error(run(path("long.npy")), 1, {"seq_lengths[1] = 5"});
  const std::vector<std::int32_t> fine{4, 1};
  npy::write_i32(path("fine.npy"), {2}, fine);
  const test::CliResult r = cli(run(path("fine.npy")));
  EXPECT_EQ(r.status, 0) << r.err;
}

}  // namespace
}  // namespace rnnjit
