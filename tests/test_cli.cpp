// The rnn-jit command line: exit statuses and one-line error messages naming the flag or file,
// and `rnn-jit run` end to end against the scalar reference called directly.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/reference.hpp"
#include "rnnjit/config.hpp"
#include "rnnjit/npy.hpp"
#include "rnnjit/rnn.hpp"
#include "tests/cli_fixture.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit {
namespace {

using test::CliResult;
using test::slurp;

namespace fs = std::filesystem;
using i64 = std::int64_t;
using Shape3 = std::vector<i64>;

using CliTest = test::CliFixture;

// ---- exit statuses and messages ----

TEST_F(CliTest, HelpExitsZero) {
  CliResult r = cli({"--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("demo"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  r = cli({"run", "--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--hidden-size"), std::string::npos) << r.out;
  r = cli({"demo", "-h"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--backend"), std::string::npos) << r.out;
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  const std::vector<std::string> good = {"run", "--cell", "gru", "--input-size", "5", "--hidden-size", "3",
                                         "--params", path("p"), "--x", path("x.npy"), "--out", path("o")};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = good;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto without = [&](const std::string& flag) {
    std::vector<std::string> a;
    for (std::size_t i = 0; i < good.size(); ++i) {
      if (good[i] == flag) {
        ++i;
        continue;
      }
      a.push_back(good[i]);
    }
    return a;
  };
  // good with flag's value replaced (CLI11 rejects repeated flags, so never append a second one).
  auto set = [&](const std::string& flag, const std::string& value) {
    std::vector<std::string> a = good;
    *(std::find(a.begin(), a.end(), flag) + 1) = value;
    return a;
  };
  expect_error({}, 2, {"subcommand"});
  expect_error({"frobnicate"}, 2, {"unknown subcommand 'frobnicate'"});
  expect_error({"--frob"}, 2, {"--frob"});
  expect_error(with({"--frob"}), 2, {"--frob"});
  expect_error(with({"--frob", "1"}), 2, {"--frob"});
  expect_error(set("--hidden-size", "0"), 2, {"--hidden-size", "0"});
  expect_error(set("--input-size", "-4"), 2, {"--input-size"});
  expect_error(with({"--layers", "0"}), 2, {"--layers"});
  expect_error(set("--hidden-size", "abc"), 2, {"--hidden-size"});
  expect_error(set("--cell", "foo"), 2, {"--cell", "'foo'"});
  expect_error(with({"--backend", "gpu"}), 2, {"--backend", "'gpu'"});
  expect_error(with({"--fpmath", "fp16"}), 2, {"--fpmath", "'fp16'", "strict or bf16"});
  expect_error(with({"--dhy", path("dhy.npy")}), 2, {"--dhy", "--dy"});
  expect_error(with({"--c0", path("c0.npy")}), 2, {"--c0", "lstm"});
  {
    std::vector<std::string> a = without("--hidden-size");
    a.push_back("--hidden-size");
    expect_error(a, 2, {"--hidden-size"});
  }
  for (const std::string flag : {"--cell", "--input-size", "--hidden-size", "--params", "--x", "--out"})
    expect_error(without(flag), 2, {flag});
  expect_error({"demo", "--hidden-size", "0"}, 2, {"--hidden-size"});
  expect_error({"demo", "--seq", "0"}, 2, {"--seq"});
  expect_error({"demo", "--batch", "-1"}, 2, {"--batch"});
  expect_error({"demo", "--mode", "fast"}, 2, {"--mode", "'fast'"});
  expect_error({"demo", "--cell", "lstn"}, 2, {"--cell", "'lstn'"});
  expect_error({"demo", "--layers", "100000"}, 2, {"--layers"});
}

// ---- run: files ----

struct Model {
  RnnConfig config;
  Shape shape;
  std::vector<float> w, x, h0, c0, dy, dhy, dcy;
};

Model random_model(const RnnConfig& config, const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](i64 n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& e : v) e = dist(rng);
    return v;
  };
  const i64 states = state_elements(config, shape);
  Model m{config, shape, {}, {}, {}, {}, {}, {}, {}};
  m.w = random(WeightLayout(config).total_elements());
  m.x = random(x_elements(config, shape));
  m.h0 = random(states);
  m.c0 = random(states);
  m.dy = random(y_elements(config, shape));
  m.dhy = random(states);
  m.dcy = random(states);
  return m;
}

void write_params(const WeightLayout& layout, const std::vector<float>& w, const fs::path& dir) {
  fs::create_directories(dir);
  for (const ParamBlock& b : layout.blocks())
    npy::write_f32((dir / (b.name + ".npy")).string(), b.shape,
                   std::span<const float>(w).subspan(static_cast<std::size_t>(b.offset), static_cast<std::size_t>(b.size)));
}

// Writes a small GRU's params and x into dir_, returns the run arguments.
class RunFilesTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    m_ = random_model(RnnConfig{CellKind::gru, 5, 3, 2, true}, Shape{4, 2}, 11);
    write_params(WeightLayout(m_.config), m_.w, dir_ / "params");
    npy::write_f32(path("x.npy"), {4, 2, 5}, m_.x);
  }
  std::vector<std::string> args() const {
    return {"run",      "--cell",       "gru",       "--input-size", "5",  "--hidden-size", "3",
            "--layers", "2",            "--bidirectional", "--params", path("params"), "--x",
            path("x.npy"), "--out",     path("out"), "--backend", "reference"};
  }
  Model m_;
};

TEST_F(RunFilesTest, MissingParameterFileExitsOne) {
  const std::string missing = (dir_ / "params" / "bias_hh_l1_reverse.npy").string();
  fs::remove(missing);
  expect_error(args(), 1, {missing, "missing parameter", "a network without biases takes --no-bias"});
}

// --no-bias reads no bias files, and bias files beside it are an error (the network and the
// parameters disagree), not silently ignored.
TEST_F(RunFilesTest, NoBiasReadsNoBiasFilesAndRefusesThem) {
  std::vector<std::string> a = args();
  a.push_back("--no-bias");
  const std::string bias = (dir_ / "params" / "bias_ih_l0.npy").string();
  expect_error(a, 1, {bias, "a bias parameter, but --no-bias says the network has none"});
  const WeightLayout layout(m_.config);
  for (const ParamBlock& b : layout.blocks())
    if (b.kind == ParamKind::bias_ih || b.kind == ParamKind::bias_hh) fs::remove(dir_ / "params" / (b.name + ".npy"));
  const CliResult r = cli(a);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("out") + "/y.npy"));
}

TEST_F(RunFilesTest, MissingParamsDirectoryExitsOne) {
  fs::remove_all(dir_ / "params");
  expect_error(args(), 1, {"weight_ih_l0.npy"});
}

TEST_F(RunFilesTest, WrongParameterShapeExitsOne) {
  const std::string p = (dir_ / "params" / "weight_hh_l1.npy").string();
  npy::write_f32(p, {9, 4}, std::vector<float>(36));
  expect_error(args(), 1, {p, "shape (9, 4) does not match expected (9, 3)"});
}

TEST_F(RunFilesTest, BadInputFilesExitOne) {
  npy::write_f32(path("x.npy"), {4, 2, 6}, std::vector<float>(48));
  expect_error(args(), 1, {path("x.npy"), "(4, 2, 6)"});
  std::ofstream(path("x.npy"), std::ios::binary) << "garbage";
  expect_error(args(), 1, {path("x.npy"), "bad magic"});
  fs::remove(path("x.npy"));
  expect_error(args(), 1, {path("x.npy"), "cannot open"});
  npy::write_f32(path("x.npy"), {4, 2, 5}, m_.x);
  npy::write_f32(path("h0.npy"), {4, 2, 2}, std::vector<float>(16));
  std::vector<std::string> a = args();
  a.insert(a.end(), {"--h0", path("h0.npy")});
  expect_error(a, 1, {path("h0.npy"), "shape (4, 2, 2) does not match expected (4, 2, 3)"});
}

// ---- run: end to end against the reference ----

struct E2eCase {
  const char* name;
  RnnConfig config;
  Shape shape;
  bool backward;
  const char* backend;
};

std::ostream& operator<<(std::ostream& os, const E2eCase& c) { return os << c.name; }

class RunEndToEndTest : public CliTest, public ::testing::WithParamInterface<E2eCase> {};

// |got - want| <= depth * eps * max(1, |want|), where depth bounds the number of rounded terms
// that reach one output through the recurrence: every time step, batch element (for weight
// gradients), and input and hidden feature of every layer.
void expect_close(const std::string& file, const std::vector<float>& got, const std::vector<float>& want, double depth) {
  ASSERT_EQ(got.size(), want.size()) << file;
  const double tol = depth * FLT_EPSILON;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol * std::max(1.0, std::fabs(static_cast<double>(want[i])))) && bad++ < 5)
      ADD_FAILURE() << file << "[" << i << "]: got " << got[i] << ", reference " << want[i] << " (tol " << tol << ")";
  }
}

TEST_P(RunEndToEndTest, MatchesReference) {
  const E2eCase& c = GetParam();
  if (std::string(c.backend) == "jit" && detect_isa() != Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  const Model m = random_model(c.config, c.shape, 5);
  const WeightLayout layout(c.config);
  const bool lstm = c.config.cell == CellKind::lstm;
  const i64 T = c.shape.seq_len, N = c.shape.batch, I = c.config.input_size, H = c.config.hidden_size;
  const i64 LD = c.config.num_layers * c.config.directions(), DH = c.config.directions() * H;
  const Shape3 x_shape{T, N, I}, y_shape{T, N, DH}, s_shape{LD, N, H};

  write_params(layout, m.w, dir_ / "params");
  npy::write_f32(path("x.npy"), x_shape, m.x);
  npy::write_f32(path("h0.npy"), s_shape, m.h0);
  std::vector<std::string> args = {"run",      "--cell",    std::string(to_string(c.config.cell)),
                                   "--input-size", std::to_string(I), "--hidden-size", std::to_string(H),
                                   "--layers", std::to_string(c.config.num_layers), "--params", path("params"),
                                   "--x",      path("x.npy"), "--h0", path("h0.npy"), "--out", path("out"),
                                   "--backend", c.backend};
  if (c.config.bidirectional) args.push_back("--bidirectional");
  if (lstm) {
    npy::write_f32(path("c0.npy"), s_shape, m.c0);
    args.insert(args.end(), {"--c0", path("c0.npy")});
  }
  if (c.backward) {
    npy::write_f32(path("dy.npy"), y_shape, m.dy);
    npy::write_f32(path("dhy.npy"), s_shape, m.dhy);
    args.insert(args.end(), {"--dy", path("dy.npy"), "--dhy", path("dhy.npy")});
    if (lstm) {
      npy::write_f32(path("dcy.npy"), s_shape, m.dcy);
      args.insert(args.end(), {"--dcy", path("dcy.npy")});
    }
  }
  const CliResult r = cli(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;

  // The reference, called directly.
  std::vector<float> y(m.dy.size()), hy(m.h0.size()), cy(m.h0.size());
  reference::Reserve<float> reserve;
  reference::forward<float>(c.config, c.shape, m.w.data(), m.x.data(), m.h0.data(), lstm ? m.c0.data() : nullptr,
                            y.data(), hy.data(), lstm ? cy.data() : nullptr, c.backward ? &reserve : nullptr);

  i64 widest = I;
  if (c.config.num_layers > 1) widest = std::max(widest, DH);
  const double depth = 4.0 * static_cast<double>(T * c.config.num_layers * (widest + H));
  const double wdepth = depth * static_cast<double>(N);
  auto out = [&](const std::string& f) { return (dir_ / "out" / f).string(); };
  expect_close("y.npy", npy::read_f32(out("y.npy"), y_shape), y, depth);
  expect_close("hy.npy", npy::read_f32(out("hy.npy"), s_shape), hy, depth);
  EXPECT_EQ(fs::exists(out("cy.npy")), lstm);
  if (lstm) expect_close("cy.npy", npy::read_f32(out("cy.npy"), s_shape), cy, depth);

  EXPECT_EQ(fs::exists(out("dx.npy")), c.backward);
  if (!c.backward) return;
  std::vector<float> dx(m.x.size()), dh0(m.h0.size()), dc0(m.h0.size()), dw(m.w.size());
  reference::backward_data<float>(c.config, c.shape, m.w.data(), reserve, m.dy.data(), m.dhy.data(),
                                  lstm ? m.dcy.data() : nullptr, dx.data(), dh0.data(), lstm ? dc0.data() : nullptr);
  reference::backward_weights<float>(c.config, c.shape, reserve, dw.data());
  expect_close("dx.npy", npy::read_f32(out("dx.npy"), x_shape), dx, depth);
  expect_close("dh0.npy", npy::read_f32(out("dh0.npy"), s_shape), dh0, depth);
  EXPECT_EQ(fs::exists(out("dc0.npy")), lstm);
  if (lstm) expect_close("dc0.npy", npy::read_f32(out("dc0.npy"), s_shape), dc0, depth);
  for (const ParamBlock& b : layout.blocks()) {
    const std::string f = "grad_" + b.name + ".npy";
    const auto first = dw.begin() + b.offset;
    expect_close(f, npy::read_f32(out(f), b.shape), std::vector<float>(first, first + b.size), wdepth);
  }
}

const E2eCase kE2eCases[] = {
    {"gru_L2_bidir_reference", {CellKind::gru, 5, 3, 2, true}, {4, 2}, true, "reference"},
    {"gru_L2_bidir_auto", {CellKind::gru, 5, 3, 2, true}, {4, 2}, true, "auto"},
    {"lstm_L2_reference", {CellKind::lstm, 4, 6, 2, false}, {3, 3}, true, "reference"},
    {"lstm_L1_bidir_auto", {CellKind::lstm, 7, 5, 1, true}, {5, 1}, true, "auto"},
    {"rnn_tanh_forward_reference", {CellKind::rnn_tanh, 3, 4, 1, true}, {6, 2}, false, "reference"},
    {"rnn_relu_L3_auto", {CellKind::rnn_relu, 2, 3, 3, false}, {2, 3}, true, "auto"},
    {"gru_L2_bidir_jit", {CellKind::gru, 5, 3, 2, true}, {4, 2}, true, "jit"},
    {"lstm_L2_jit", {CellKind::lstm, 4, 6, 2, false}, {3, 3}, true, "jit"},
    {"rnn_tanh_forward_jit", {CellKind::rnn_tanh, 3, 4, 1, true}, {6, 2}, false, "jit"},
};

INSTANTIATE_TEST_SUITE_P(Cli, RunEndToEndTest, ::testing::ValuesIn(kE2eCases),
                         [](const ::testing::TestParamInfo<E2eCase>& info) { return std::string(info.param.name); });

// ---- demo ----

TEST_F(CliTest, DemoRunsSmallShapes) {
  CliResult r = cli({"demo", "--input-size", "8", "--hidden-size", "6", "--seq", "3", "--batch", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("lstm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GFLOPS"), std::string::npos) << r.out;
  r = cli({"demo", "--cell", "gru", "--input-size", "4", "--hidden-size", "5", "--layers", "2", "--bidirectional",
           "--seq", "3", "--batch", "2", "--mode", "train"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("backward weights"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rnnjit
