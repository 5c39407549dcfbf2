// int8 against ONNX Runtime's DynamicQuantizeLSTM (onnxruntime.quantization.quantize_dynamic on
// the same LSTM, per-channel and per-tensor weight scales): rnnjit's int8 error against FP32 is
// within what ONNX Runtime's int8 gives on the same weights and inputs (at most 1.25 times its
// smaller one; measured: at or below it). ONNX Runtime quantizes activations to 8 bits; the
// avx2 unit to 7 (codegen/int8_unit.hpp), which makes each product's quantization error (the
// root of the sum of both operands' squared steps, as test_int8_rnn derives it) larger by
// sqrt(1/63^2 + 1/127^2) / sqrt(2/127^2) = 1.59: its bound grows by that ratio of steps, as the
// unit's own levels give it. Runs where Python's onnx and onnxruntime import
// (RNNJIT_TEST_PYTHON names the interpreter, default python3; tools/test.sh installs them) and
// the CPU has an int8 unit; skipped otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <fmt/format.h>

#include "codegen/int8_unit.hpp"
#include "codegen/plan.hpp"
#include "rnnjit/npy.hpp"
#include "rnnjit/rnn.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

std::string python() {
  const char* p = std::getenv("RNNJIT_TEST_PYTHON");
  return p && *p ? p : "python3";
}

// Reads PyTorch-layout weights of one LSTM direction per direction (gate order i, f, g, o), builds
// the ONNX LSTM (i, o, f, c), runs it in FP32 and after quantize_dynamic (per channel and per
// tensor), and saves each Y.
constexpr const char* kScript = R"PY(
import sys, json
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization import quantize_dynamic, QuantType

d = sys.argv[1]
spec = json.load(open(d + "/spec.json"))
D, H = spec["D"], spec["H"]
def onnx_order(m):
    i, f, g, o = np.split(m, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)
W = np.stack([onnx_order(np.load(f"{d}/w_ih_{k}.npy")) for k in range(D)])
R = np.stack([onnx_order(np.load(f"{d}/w_hh_{k}.npy")) for k in range(D)])
B = np.stack([np.concatenate([onnx_order(np.load(f"{d}/b_ih_{k}.npy")), onnx_order(np.load(f"{d}/b_hh_{k}.npy"))])
              for k in range(D)])
x = np.load(d + "/x.npy")
node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], hidden_size=H,
                        direction="bidirectional" if D == 2 else "forward")
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(a, n) for n, a in (("W", W), ("R", R), ("B", B))])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
model.ir_version = min(model.ir_version, 8)
onnx.save(model, d + "/fp32.onnx")
so = ort.SessionOptions()
so.intra_op_num_threads = 2
def run(path):
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
np.save(d + "/ort_fp32.npy", run(d + "/fp32.onnx").astype(np.float32))
for name, per_channel in (("channel", True), ("tensor", False)):
    quantize_dynamic(d + "/fp32.onnx", f"{d}/int8_{name}.onnx", weight_type=QuantType.QInt8, per_channel=per_channel)
    ops = [n.op_type for n in onnx.load(f"{d}/int8_{name}.onnx").graph.node]
    assert "DynamicQuantizeLSTM" in ops, ops
    np.save(f"{d}/ort_int8_{name}.npy", run(f"{d}/int8_{name}.onnx").astype(np.float32))
)PY";

struct OrtCase {
  std::int64_t I, H, T, N;
  bool bidirectional;
};

double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, static_cast<double>(std::abs(a[i] - b[i])));
  return w;
}

class Int8VersusOrt : public testing::TestWithParam<OrtCase> {};

TEST_P(Int8VersusOrt, ErrsNoMoreThanDynamicQuantizeLstm) {
  if (!int8_unit()) GTEST_SKIP() << "this CPU has no int8 unit (not even AVX2)";
  const std::string py = python();
  if (std::system((py + " -c 'import onnx, onnxruntime, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << py << " cannot import onnx and onnxruntime: not compared against them";
  const OrtCase& c = GetParam();
  const RnnConfig config{.cell = CellKind::lstm, .input_size = c.I, .hidden_size = c.H,
                         .bidirectional = c.bidirectional};
  const Shape shape{c.T, c.N};
  const test::RnnCase rc(config, shape, 5);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      fmt::format("rnnjit_int8_ort_{}_{}", ::getpid(), testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  const WeightLayout layout(config);
  const int D = config.directions();
  for (int d = 0; d < D; ++d)
    for (auto [kind, name] : {std::pair{ParamKind::weight_ih, "w_ih"}, std::pair{ParamKind::weight_hh, "w_hh"},
                              std::pair{ParamKind::bias_ih, "b_ih"}, std::pair{ParamKind::bias_hh, "b_hh"}}) {
      const auto block = layout.block(0, d, kind);
      std::vector<std::int64_t> dims = {4 * c.H};
      if (kind == ParamKind::weight_ih) dims.push_back(c.I);
      if (kind == ParamKind::weight_hh) dims.push_back(c.H);
      npy::write_f32((dir / fmt::format("{}_{}.npy", name, d)).string(), dims,
                     std::span<const float>(rc.w).subspan(static_cast<std::size_t>(block.offset),
                                                          static_cast<std::size_t>(block.size)));
    }
  npy::write_f32((dir / "x.npy").string(), {c.T, c.N, c.I}, rc.x);
  std::ofstream(dir / "spec.json") << fmt::format(R"({{"D": {}, "H": {}}})", D, c.H);
  std::ofstream(dir / "ort.py") << kScript;
  const std::string command = fmt::format("{} {} {}", py, (dir / "ort.py").string(), dir.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::vector<std::int64_t> y_shape = {c.T, D, c.N, c.H};  // ONNX's Y
  // ONNX's Y [T, D, N, H] as rnnjit's y [T, N, D*H].
  auto as_y = [&](const std::string& file) {
    const std::vector<float> onnx = npy::read_f32((dir / file).string(), y_shape);
    std::vector<float> y(onnx.size());
    for (std::int64_t t = 0; t < c.T; ++t)
      for (std::int64_t d = 0; d < D; ++d)
        for (std::int64_t n = 0; n < c.N; ++n)
          for (std::int64_t h = 0; h < c.H; ++h)
            y[static_cast<std::size_t>(((t * c.N + n) * D + d) * c.H + h)] =
                onnx[static_cast<std::size_t>(((t * D + d) * c.N + n) * c.H + h)];
    return y;
  };
  const std::vector<float> ort_fp32 = as_y("ort_fp32.npy");
  const double ort_channel = worst(as_y("ort_int8_channel.npy"), ort_fp32);
  const double ort_tensor = worst(as_y("ort_int8_tensor.npy"), ort_fp32);

  Execution ex = Rnn(config, {.threads = 2, .quantize = Quantize::int8_dynamic}).prepare(shape, Mode::inference);
  ASSERT_EQ(ex.plan().quantize, Quantize::int8_dynamic);
  std::vector<float> y(ort_fp32.size());
  ex.forward(rc.w, {.x = rc.x, .y = y});
  const double ours = worst(y, ort_fp32);
  // The unit's product quantization error relative to 8-bit activations' (1 but on avx2).
  const double a_levels = activation_quantization(ex.plan().int8_unit).levels, w_levels = kWeightLevels;
  const double step_ratio = std::sqrt(1.0 / (a_levels * a_levels) + 1.0 / (w_levels * w_levels)) /
                            std::sqrt(2.0 / (w_levels * w_levels));
  EXPECT_LE(ours, 1.25 * step_ratio * std::min(ort_channel, ort_tensor))
      << "rnnjit int8 (" << to_string(ex.plan().int8_unit) << ") " << ours << ", ONNX Runtime per channel "
      << ort_channel << ", per tensor " << ort_tensor;
  std::printf("max |int8 - FP32|: rnnjit %.5f, ONNX Runtime per channel %.5f, per tensor %.5f\n", ours, ort_channel,
              ort_tensor);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int8VersusOrt,
                         testing::Values(OrtCase{64, 64, 20, 3, false}, OrtCase{256, 256, 50, 4, false},
                                         OrtCase{100, 160, 30, 5, true}, OrtCase{800, 800, 40, 8, false},
                                         OrtCase{64, 1024, 10, 2, false}),
                         [](const auto& info) {
                           const OrtCase& c = info.param;
                           return fmt::format("i{}_h{}_t{}_n{}{}", c.I, c.H, c.T, c.N, c.bidirectional ? "_bidir" : "");
                         });

}  // namespace
}  // namespace rnnjit
