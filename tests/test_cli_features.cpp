// rnn-jit run with the feature flags of issue #7 (--direction, --proj-size, --clip, --dropout
// with --seed, --batch-first, --seq-lengths) and ONNX's (--gate-clip, --peephole,
// --input-forget), end to end through .npy files against the double-precision reference, and the
// flags' usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rnnjit/npy.hpp"
#include "rnnjit/rnn.hpp"
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

class CliOnnxFeatures : public test::CliFixture {
 protected:
  // Every parameter of rc as params/<name>.npy (weight_peephole_l{k}[_reverse] included).
  void write_params(const test::RnnCase& rc) {
    fs::create_directories(dir_ / "params");
    const WeightLayout layout(rc.config);
    for (const ParamBlock& b : layout.blocks())
      npy::write_f32(path("params/" + b.name + ".npy"), b.shape,
                     std::span<const float>(rc.w).subspan(static_cast<std::size_t>(b.offset),
                                                         static_cast<std::size_t>(b.size)));
  }

  // `rnn-jit run` (forward and backward, JIT backend) with `flags` on rc's data, against the
  // double-precision reference: every output file, and the gradient of every parameter.
  void run_and_compare(const test::RnnCase& rc, const std::vector<std::string>& flags) {
    const RnnConfig& c = rc.config;
    const i64 T = rc.shape.seq_len, N = rc.shape.batch, LD = c.num_layers * c.directions(), H = c.hidden_size;
    const i64 S = c.state_size(), I = c.input_size, Y = c.output_size();
    write_params(rc);
    npy::write_f32(path("x.npy"), {T, N, I}, rc.x);
    npy::write_f32(path("h0.npy"), {LD, N, S}, rc.hx);
    npy::write_f32(path("dy.npy"), {T, N, Y}, rc.dy);
    std::vector<std::string> args = {"run", "--input-size", std::to_string(I), "--hidden-size", std::to_string(H),
                                     "--layers", std::to_string(c.num_layers), "--params", path("params"), "--x",
                                     path("x.npy"), "--h0", path("h0.npy"), "--dy", path("dy.npy"), "--out",
                                     path("out"), "--backend", "jit"};
    if (rc.lstm()) {
      npy::write_f32(path("c0.npy"), {LD, N, H}, rc.cx);
      args.insert(args.end(), {"--c0", path("c0.npy")});
    }
    if (!rc.lengths.empty()) {
      npy::write_i32(path("lengths.npy"), {N}, rc.lengths);
      args.insert(args.end(), {"--seq-lengths", path("lengths.npy")});
    }
    args.insert(args.end(), flags.begin(), flags.end());
    const test::CliResult r = cli(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(describe(c)), std::string::npos) << r.out;  // e.g. "... gate_clip=0.5 peephole"

    test::RnnCase zero_dhy = rc;  // run gets no --dhy/--dcy: zeros
    std::fill(zero_dhy.dhy.begin(), zero_dhy.dhy.end(), 0.0f);
    std::fill(zero_dhy.dcy.begin(), zero_dhy.dcy.end(), 0.0f);
    const test::Tensors want = zero_dhy.reference(true);
    auto out = [&](const std::string& f, const std::vector<i64>& shape) {
      return npy::read_f32(path("out/" + f), shape);
    };
    const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
    test::expect_close(out("y.npy", {T, N, Y}), want.y, tol, "y");
    test::expect_close(out("hy.npy", {LD, N, S}), want.hy, tol, "hy");
    if (rc.lstm()) test::expect_close(out("cy.npy", {LD, N, H}), want.cy, tol, "cy");
    test::expect_close(out("dx.npy", {T, N, I}), want.dx, gtol, "dx");
    test::expect_close(out("dh0.npy", {LD, N, S}), want.dhx, gtol, "dh0");
    if (rc.lstm()) test::expect_close(out("dc0.npy", {LD, N, H}), want.dcx, gtol, "dc0");
    const WeightLayout layout(c);
    for (const ParamBlock& b : layout.blocks()) {
      const auto first = want.dw.begin() + b.offset;
      test::expect_close(out("grad_" + b.name + ".npy", b.shape), std::vector<float>(first, first + b.size), gtol,
                         "grad_" + b.name);
    }
  }
};

TEST_F(CliOnnxFeatures, RunWithPeepholesMatchesTheReference) {
  test::RnnCase rc({.cell = CellKind::lstm, .input_size = 5, .hidden_size = 19, .num_layers = 2,
                    .bidirectional = true, .peephole = true},
                   {4, 3}, 31);
  run_and_compare(rc, {"--cell", "lstm", "--bidirectional", "--peephole"});
}

TEST_F(CliOnnxFeatures, RunWithInputForgetMatchesTheReference) {
  test::RnnCase rc({.cell = CellKind::lstm, .input_size = 4, .hidden_size = 5, .reverse = true, .input_forget = true},
                   {5, 2}, 32);
  run_and_compare(rc, {"--cell", "lstm", "--direction", "reverse", "--input-forget"});
}

TEST_F(CliOnnxFeatures, RunWithGateClipMatchesTheReference) {
  for (const char* cell : {"gru", "rnn_relu", "lstm"}) {
    SCOPED_TRACE(cell);
    test::RnnCase rc({.cell = parse_cell(cell), .input_size = 6, .hidden_size = 17, .gate_clip = 0.3f}, {4, 3}, 33);
    run_and_compare(rc, {"--cell", cell, "--gate-clip", "0.3"});
  }
}

TEST_F(CliOnnxFeatures, RunWithAllThreeAndLengthsMatchesTheReference) {
  test::RnnCase rc({.cell = CellKind::lstm, .input_size = 3, .hidden_size = 7, .bidirectional = true,
                    .gate_clip = 0.5f, .peephole = true, .input_forget = true},
                   {5, 4}, 34);
  rc.vary_lengths();
  run_and_compare(rc, {"--cell", "lstm", "--direction", "bidirectional", "--gate-clip", "0.5", "--peephole",
                       "--input-forget"});
}

// oneDNN's other vanilla RNNs: the logistic sigmoid and the leaky ReLU (eltwise_relu's alpha).
TEST_F(CliOnnxFeatures, RunWithSigmoidAndLeakyReluMatchesTheReference) {
  test::RnnCase sigmoid({.cell = CellKind::rnn_sigmoid, .input_size = 6, .hidden_size = 17, .bidirectional = true},
                        {4, 3}, 37);
  run_and_compare(sigmoid, {"--cell", "rnn_sigmoid", "--bidirectional"});
  test::RnnCase leaky({.cell = CellKind::rnn_relu, .input_size = 6, .hidden_size = 17, .num_layers = 2,
                       .gate_clip = 0.8f, .relu_alpha = 0.125f},
                      {4, 3}, 38);
  run_and_compare(leaky, {"--cell", "rnn_relu", "--gate-clip", "0.8", "--relu-alpha", "0.125"});
}

// oneDNN's bidirectional_sum: y.npy and dy.npy are [T, N, H]; layer 1's weight_ih is [3H, H].
TEST_F(CliOnnxFeatures, RunWithSummedDirectionsMatchesTheReference) {
  test::RnnCase rc({.cell = CellKind::gru, .input_size = 4, .hidden_size = 6, .num_layers = 2, .bidirectional = true,
                    .sum_directions = true},
                   {5, 3}, 35);
  rc.vary_lengths();
  run_and_compare(rc, {"--cell", "gru", "--direction", "bidirectional_sum"});
}

// oneDNN's stacking of several bidirectional layers: layer 1's weight_ih is [4H, H].
TEST_F(CliOnnxFeatures, RunWithIndependentStacksMatchesTheReference) {
  test::RnnCase rc({.cell = CellKind::lstm, .input_size = 4, .hidden_size = 6, .num_layers = 3, .bidirectional = true,
                    .independent_stacks = true},
                   {4, 3}, 36);
  run_and_compare(rc, {"--cell", "lstm", "--bidirectional", "--independent-stacks"});
}

// A network with peepholes reads (and its gradients write) weight_peephole_l{k}[_reverse].npy.
TEST_F(CliOnnxFeatures, RunWithPeepholesNeedsThePeepholeParameters) {
  const RnnConfig plain{.cell = CellKind::lstm, .input_size = 2, .hidden_size = 3};
  test::RnnCase rc(plain, {2, 1});
  write_params(rc);  // no weight_peephole_l0.npy
  npy::write_f32(path("x.npy"), {2, 1, 2}, rc.x);
  expect_error({"run", "--cell", "lstm", "--input-size", "2", "--hidden-size", "3", "--peephole", "--params",
                path("params"), "--x", path("x.npy"), "--out", path("out")},
               1,
               {"weight_peephole_l0.npy", "missing parameter file for 'weight_peephole_l0'", "expects shape (3, 3)"});
}

// --activations: ONNX's list (roles f, g, h of the cell, direction 0's then 1's) as generated
// gate kernels in the plan (named ..._act<kind>...), and one-line usage errors.
TEST_F(CliFeatures, OnnxActivationsPlanGeneratedKernels) {
  const std::vector<std::string> gru = {"plan", "--cell", "gru", "--input-size", "4", "--hidden-size", "19",
                                        "--seq", "3", "--batch", "2", "--bidirectional", "--isa", "avx512"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = gru;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const test::CliResult r = cli(with({"--activations", "HardSigmoid:0.2:0.5,Softsign,elu:0.7,LeakyRelu:0.1"}));
  ASSERT_EQ(r.status, 0) << r.err;
  // Direction 0: HardSigmoid (8) with alpha 0.2 and beta 0.5, Softsign (10); direction 1: Elu (9), LeakyRelu (5).
  EXPECT_NE(r.out.find("gru_fwd_avx512_h19_c19_n2_ld38_u2_gx64_act8a3e4ccccdb3f000000_10"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("_act9a3f333333_5a3dcccccd"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no generated gate kernel"), std::string::npos) << r.out;
  expect_error(with({"--activations", "Softsign,Softsign"}), 2, {"--activations", "expected 4 functions, got 2"});
  expect_error(with({"--activations", "Swish,Tanh,Tanh,Tanh"}), 2, {"--activations", "Swish"});
  expect_error(with({"--activations", "Elu:x,Tanh,Tanh,Tanh"}), 2, {"--activations", "'Elu:x'"});
  expect_error(with({"--activations", "Softsign,Tanh,Tanh,Tanh", "--mode", "train"}), 1,
               {"for inference only"});
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
  const test::CliResult summed =
      cli(with({"--direction", "bidirectional_sum", "--bidirectional", "--mode", "train", "--isa", "avx512"}));
  EXPECT_EQ(summed.status, 0) << summed.err;
  EXPECT_NE(summed.out.find("sum_directions"), std::string::npos) << summed.out;
  EXPECT_NE(summed.out.find("sum of directions l0"), std::string::npos) << summed.out;
  // Both directions' backward kernels read the gradient of the sum in place: rows H = 8 apart
  // where h's are 2H. The plan names AVX-512 so the kernel's name holds on any CPU.
  EXPECT_NE(summed.out.find("lstm_bwd_avx512_h8_c8_n2_ld16_u1_dy8 "), std::string::npos) << summed.out;
  expect_error(with({"--independent-stacks"}), 2, {"--independent-stacks applies to bidirectional networks"});
  expect_error(with({"--proj-size", "8"}), 2, {"--proj-size"});
  expect_error(with({"--clip", "-1"}), 2, {"--clip"});
  expect_error(with({"--dropout", "1"}), 2, {"--dropout"});
  expect_error({"plan", "--cell", "gru", "--input-size", "4", "--hidden-size", "8", "--proj-size", "2"}, 2,
               {"--proj-size", "LSTM only"});
  expect_error(with({"--gate-clip", "-1"}), 2, {"--gate-clip must be a finite value >= 0 (0: none), got -1"});
  expect_error(with({"--gate-clip", "abc"}), 2, {"--gate-clip"});
  expect_error(with({"--relu-alpha", "0.1"}), 2, {"--relu-alpha applies to rnn_relu only, not to lstm"});
  expect_error({"plan", "--cell", "rnn_relu", "--input-size", "4", "--hidden-size", "8", "--relu-alpha", "-1"}, 2,
               {"--relu-alpha must be a finite value >= 0 (0: plain ReLU), got -1"});
  expect_error({"plan", "--cell", "gru", "--input-size", "4", "--hidden-size", "8", "--peephole"}, 2,
               {"--peephole applies to LSTM only, not to gru"});
  expect_error({"plan", "--cell", "rnn_tanh", "--input-size", "4", "--hidden-size", "8", "--input-forget"}, 2,
               {"--input-forget applies to LSTM only, not to rnn_tanh"});
  expect_error({"run", "--cell", "gru_reset_before", "--input-size", "4", "--hidden-size", "8", "--peephole",
                "--params", path("p"), "--x", path("x.npy"), "--out", path("out")},
               2, {"--peephole applies to LSTM only"});
  const test::CliResult ok = cli(with({"--direction", "reverse", "--proj-size", "3", "--clip", "2", "--batch-first",
                                        "--mode", "train", "--dropout", "0.5", "--layers", "2"}));
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("dropout l0"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("output projection"), std::string::npos) << ok.out;
  // The ONNX features in every subcommand that takes the configuration flags.
  const std::vector<std::string> onnx = {"--gate-clip", "0.5", "--peephole", "--input-forget"};
  for (std::vector<std::string> sub : {std::vector<std::string>{"plan"}, {"dump", "--kernel", "all"},
                                       {"bench", "--reps", "1", "--warmup", "0"}, {"demo", "--check-seq", "2"}}) {
    std::vector<std::string> a = sub;
    for (std::size_t k = 1; k < base.size(); ++k) a.push_back(base[k]);
    const test::CliResult without = cli(a);
    a.insert(a.end(), onnx.begin(), onnx.end());
    const test::CliResult r = cli(a);
    EXPECT_EQ(r.status, 0) << sub[0] << ": " << r.err;
    if (sub[0] == "dump") {  // prints no configuration: other kernels
      EXPECT_NE(r.out, without.out) << "dump: the flags changed no kernel";
    } else {
      EXPECT_NE(r.out.find("gate_clip=0.5 peephole input_forget"), std::string::npos) << sub[0] << ": " << r.out;
    }
  }
}

// bench --compare onednn: the oneDNN peer models peepholes (oneDNN's peephole LSTM) and summed
// directions (bidirectional_sum), and refuses gate clip and input_forget as a usage error, like
// the other features it does not model.
TEST_F(CliFeatures, BenchComparesPeepholesWithOneDnn) {
  const std::vector<std::string> base = {"bench", "--cell", "lstm", "--input-size", "8", "--hidden-size", "19",
                                         "--seq", "4", "--batch", "3", "--compare", "onednn", "--reps", "1",
                                         "--warmup", "0", "--bidirectional"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  if (cli(base).status != 0) GTEST_SKIP() << "rnn-jit was built without oneDNN";
  const test::CliResult r = cli(with({"--peephole", "--mode", "train"}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("onednn"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peephole"), std::string::npos) << r.out;
  expect_error(with({"--peephole", "--gate-clip", "0.5"}), 2,
               {"--compare onednn: the oneDNN peer runs plain configurations only", "--gate-clip",
                "--peephole, --proj-size and --relu-alpha are supported"});
  expect_error(with({"--input-forget"}), 2, {"--compare onednn: the oneDNN peer runs plain configurations only"});
  // oneDNN's bidirectional_sum runs the same network as --direction bidirectional_sum.
  const test::CliResult sum = cli(with({"--direction", "bidirectional_sum", "--layers", "2", "--mode", "train"}));
  EXPECT_EQ(sum.status, 0) << sum.err;
  EXPECT_NE(sum.out.find("sum_directions"), std::string::npos) << sum.out;
  EXPECT_NE(sum.out.find("onednn"), std::string::npos) << sum.out;
  expect_error(with({"--dropout", "0.5", "--layers", "2", "--mode", "train"}), 2,
               {"--compare onednn: the oneDNN peer runs plain configurations only", "--dropout"});
  // oneDNN's projection LSTM, and its vanilla RNN with the leaky ReLU and with the sigmoid.
  const test::CliResult projected = cli(with({"--proj-size", "7", "--mode", "train"}));
  EXPECT_EQ(projected.status, 0) << projected.err;
  EXPECT_NE(projected.out.find("P=7"), std::string::npos) << projected.out;
  EXPECT_NE(projected.out.find("onednn"), std::string::npos) << projected.out;
  // batch-first tensors and no biases, and (one direction) the reverse direction.
  const test::CliResult batch_first = cli(with({"--batch-first", "--no-bias", "--mode", "train"}));
  EXPECT_EQ(batch_first.status, 0) << batch_first.err;
  EXPECT_NE(batch_first.out.find("batch_first no_bias"), std::string::npos) << batch_first.out;
  std::vector<std::string> reverse = base;
  reverse.pop_back();  // --bidirectional
  reverse.insert(reverse.end(), {"--direction", "reverse", "--mode", "train"});
  const test::CliResult reversed = cli(reverse);
  EXPECT_EQ(reversed.status, 0) << reversed.err;
  EXPECT_NE(reversed.out.find("reverse"), std::string::npos) << reversed.out;
  EXPECT_NE(reversed.out.find("onednn"), std::string::npos) << reversed.out;
  for (const std::vector<std::string>& cell : {std::vector<std::string>{"rnn_relu", "--relu-alpha", "0.1"},
                                               std::vector<std::string>{"rnn_sigmoid"}}) {
    std::vector<std::string> a = base;
    a[2] = cell[0];  // base is "bench --cell lstm ..."
    a.insert(a.end(), cell.begin() + 1, cell.end());
    const test::CliResult v = cli(a);
    EXPECT_EQ(v.status, 0) << v.err;
    EXPECT_NE(v.out.find("onednn"), std::string::npos) << v.out;
  }
}

// bench --compare onednn names the oneDNN that ran (dnnl_version() at run time: Debian's 2.6.3,
// or the 3.x of a build with RNNJIT_ONEDNN_ROOT), in the text and in the JSON; with --fpmath
// bf16 it times oneDNN's bf16 primitives too (onednn_bf16), inference and training, or says why not.
TEST_F(CliFeatures, BenchNamesTheOneDnnVersionAndAddsItsBf16Peer) {
  const std::vector<std::string> base = {"bench", "--cell", "gru", "--input-size", "8", "--hidden-size", "16", "--seq",
                                         "3", "--batch", "2", "--reps", "1", "--warmup", "0", "--compare", "onednn"};
  const test::CliResult text = cli(base);
  if (text.status != 0) GTEST_SKIP() << "rnn-jit was built without oneDNN";
  EXPECT_NE(text.out.find("  onednn: oneDNN "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(cpu runtime: "), std::string::npos) << text.out;
  std::vector<std::string> json = base;
  json.push_back("--json");
  const nlohmann::json j = nlohmann::json::parse(cli(json).out);
  const std::string version = j.value("onednn_version", "");
  EXPECT_EQ(version.rfind("oneDNN ", 0), 0u) << j.dump();
  EXPECT_EQ(j["peers"]["onednn"].value("library", ""), version) << j.dump();
  EXPECT_NE(text.out.find("  onednn: " + version), std::string::npos) << text.out;

  std::vector<std::string> bf16 = json;
  bf16.insert(bf16.end(), {"--fpmath", "bf16"});
  for (const char* mode : {"infer", "train"}) {
    SCOPED_TRACE(mode);
    std::vector<std::string> args = bf16;
    args.insert(args.end(), {"--mode", mode});
    const test::CliResult b = cli(args);
    ASSERT_EQ(b.status, 0) << b.err;
    const nlohmann::json jb = nlohmann::json::parse(b.out);
    const std::string library =
        version + (std::string(mode) == "train" ? ", bf16 data and weights, FP32 gradients" : ", bf16 data and weights");
    if (jb["peers"].contains("onednn_bf16"))
      EXPECT_EQ(jb["peers"]["onednn_bf16"].value("library", ""), library) << b.out;
    else
      EXPECT_NE(b.err.find("oneDNN's bf16 peer (onednn_bf16) left out: "), std::string::npos) << b.err;
    EXPECT_TRUE(jb["peers"].contains("onednn")) << b.out;
  }
}

// bench --quantize int8 --compare onednn times oneDNN's int8 RNN too (onednn_int8: u8 data, s8
// weights, scales from the data), checked against rnnjit's FP32 output before it is timed (its
// line gives the error and the bound); where oneDNN runs no int8 of the cell (2.6.3: lbr_gru,
// rnnjit's gru) the peer rows say so in one line (the JSON under "left_out"), and the run goes on.
// Named on its own it is a peer like the others: inference only, no projection.
TEST_F(CliFeatures, BenchAddsOneDnnInt8PeerWithQuantizeInt8) {
  const std::vector<std::string> base = {"bench", "--input-size", "8", "--hidden-size", "16", "--seq", "3", "--batch",
                                         "2", "--reps", "1", "--warmup", "0", "--threads", "1", "--compare", "onednn",
                                         "--quantize", "int8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  if (cli({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--warmup", "0", "--compare", "onednn"}).status != 0)
    GTEST_SKIP() << "rnn-jit was built without oneDNN";
  const test::CliResult lstm = cli(with({"--cell", "lstm", "--json"}));
  ASSERT_EQ(lstm.status, 0) << lstm.err;
  const nlohmann::json j = nlohmann::json::parse(lstm.out);
  ASSERT_TRUE(j["peers"].contains("onednn")) << lstm.out;
  if (j["peers"].contains("onednn_int8")) {
    const nlohmann::json& p = j["peers"]["onednn_int8"];
    EXPECT_NE(p.value("library", "").find(", int8 (u8 data, s8 weights"), std::string::npos) << lstm.out;
    EXPECT_NE(p.value("run", "").find("max |y - rnnjit FP32| "), std::string::npos) << lstm.out;
    EXPECT_GT(p.value("median_ms", 0.0), 0.0) << lstm.out;
  } else {  // a CPU where oneDNN runs no int8 LSTM
    EXPECT_NE(j["left_out"].value("onednn_int8", "").find(" runs no int8 LSTM"), std::string::npos) << lstm.out;
    EXPECT_NE(lstm.err.find("oneDNN's int8 peer (onednn_int8) left out: "), std::string::npos) << lstm.err;
  }
  const test::CliResult gru = cli(with({"--cell", "gru"}));
  ASSERT_EQ(gru.status, 0) << gru.err;
  const std::size_t row = gru.out.find("  onednn_int8 ");
  ASSERT_NE(row, std::string::npos) << gru.out;
  const std::string line = gru.out.substr(row, gru.out.find('\n', row) - row);
  EXPECT_TRUE(line.find(" median ") != std::string::npos || line.find(" left out: ") != std::string::npos) << line;
  // Without --quantize int8 the int8 peer is not added; named, it refuses what it does not run.
  const test::CliResult plain = cli({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--warmup", "0", "--compare",
                                     "onednn"});
  EXPECT_EQ(plain.out.find("onednn_int8"), std::string::npos) << plain.out;
  expect_error({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--mode", "train", "--compare", "onednn_int8"}, 2,
               {"--compare onednn_int8: oneDNN's int8 RNN runs inference only"});
  expect_error({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--proj-size", "4", "--compare", "onednn_int8"}, 2,
               {"--compare onednn_int8: the int8 peer runs no --proj-size"});
}

// bench --peak also measures the weight-streaming bound of the recurrence: every step reads its
// layer's recurrent weights (and backward data reads them again; the first forward step, from
// h0 = 0, and the last backward one, without dhx, only W_hr), at the rate the threads read their
// shares of them in the same run; and the FP32 GEMM ceiling: OpenBLAS's sgemm, oneDNN's where
// the peer is built, rnnjit's generated GEMM and its tile with the operands in L1.
TEST_F(CliFeatures, BenchPeakReportsTheWeightStreamingBoundAndTheGemmCeiling) {
  if (detect_isa() != Isa::avx512) GTEST_SKIP() << "the measurements need AVX-512";
  const bool with_onednn =
      cli({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--warmup", "0", "--compare", "onednn"}).status == 0;
  for (const char* mode : {"infer", "train"}) {
    SCOPED_TRACE(mode);
    const test::CliResult r = cli({"bench", "--cell", "lstm", "--input-size", "8", "--hidden-size", "19", "--proj-size",
                                   "5", "--layers", "2", "--bidirectional", "--seq", "4", "--batch", "1", "--mode", mode,
                                   "--reps", "1", "--warmup", "0", "--peak", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const double gbps = j.value("weights_read_gbps", 0.0);
    ASSERT_GT(gbps, 0.0) << r.out;
    // W_hh [4*19, 5] and W_hr [5, 19] a step; 4 steps less one W_hh, twice in training; 2
    // layers, 2 directions.
    const int passes = std::string(mode) == "train" ? 2 : 1;
    const double bytes = 4.0 * passes * ((4 * 19 * 5 + 5 * 19) * 4 - 4 * 19 * 5) * 2 * 2;
    EXPECT_NEAR(j.value("weights_bound_ms", 0.0), bytes / (gbps * 1e6), 1e-9 * bytes / gbps);
    EXPECT_NEAR(j.value("weights_bound_fraction", 0.0), j.value("weights_bound_ms", 0.0) / j.value("median_ms", 1.0),
                1e-12);
    ASSERT_TRUE(j.contains("gemm_ceiling")) << r.out;
    const nlohmann::json& ceiling = j["gemm_ceiling"];
    EXPECT_EQ(ceiling.value("size", 0), 2048);
    for (const char* rate : {"openblas_gflops", "rnnjit_gflops", "tile_in_l1_gflops"})
      EXPECT_GT(ceiling.value(rate, 0.0), 0.0) << rate;
    EXPECT_EQ(ceiling.value("onednn_gflops", 0.0) > 0.0, with_onednn);
  }
  const test::CliResult text = cli({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--warmup", "0", "--peak"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("weight-streaming bound: 10.24 MB of recurrent weights a step"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("FP32 GEMM ceiling now (2048 x 2048 x 2048"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("5 x 5 tile with A and B in L1"), std::string::npos) << text.out;
}

// bench --fpmath bf16 says what the plan that ran made of it: AMX tiles or AVX512_BF16 dot
// products, or FP32 and why. With bf16 the weight-streaming bound counts bf16 weights (half the
// bytes).
TEST_F(CliFeatures, BenchSaysWhatFpmathBf16CameTo) {
  const std::vector<std::string> small{"bench", "--input-size", "8", "--hidden-size", "32", "--seq", "2", "--batch",
                                       "3", "--reps", "1", "--warmup", "0", "--fpmath", "bf16"};
  auto line = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = small;
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = cli(args);
    EXPECT_EQ(r.status, 0) << r.err;
    const std::size_t at = r.out.find("fpmath bf16: ");
    return at == std::string::npos ? r.out : r.out.substr(at, r.out.find('\n', at) - at);
  };
  EXPECT_EQ(line({"--backend", "reference"}), "fpmath bf16: the reference backend computes in FP32");
  const std::optional<Bf16Unit> unit = bf16_unit();
  if (!unit) {
    EXPECT_EQ(line({}), "fpmath bf16: this CPU (or OS) runs neither AMX-BF16 nor AVX512_BF16, so FP32");
    return;
  }
  const std::string on = *unit == Bf16Unit::amx ? "AMX tiles" : "AVX512_BF16 dot products";
  EXPECT_EQ(line({}), "fpmath bf16: the GEMMs on the weights take bf16 inputs on " + on);
  EXPECT_EQ(line({"--mode", "train"}),
            "fpmath bf16: every GEMM, forward and backward, takes bf16 inputs on " + on +
                "; weights and gradients stay FP32");
  // The weight-streaming bound: W_hh [4*800, 800] in bf16 a step (10.24 MB in FP32).
  const test::CliResult peak =
      cli({"bench", "--seq", "2", "--batch", "1", "--reps", "1", "--warmup", "0", "--peak", "--fpmath", "bf16"});
  ASSERT_EQ(peak.status, 0) << peak.err;
  EXPECT_NE(peak.out.find("5.12 MB of recurrent weights a step"), std::string::npos) << peak.out;
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
