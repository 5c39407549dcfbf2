// The CUDA executor on a GPU (each test skips with the reason when there is none): every cell
// (the reset-before GRU too, which cuDNN lacks), uni- and bidirectional, 1-2 layers, inference
// and training, with tails (H past a block of 128 threads, batch 1), larger sizes (H=300, N=20)
// and the supported features (reverse, clip, dropout, batch-first, projection, ONNX's gate
// clip, LSTM peepholes and coupled input/forget gates, no biases, summed directions,
// independent stacks, leaky ReLU), against the double-precision reference (tests/rnn_case.hpp),
// and against cuDNN where it loads and has the features (runtime/cuda/cudnn_peer.hpp);
// variable sequence lengths (host seq_lengths: every cell, alone and with every feature; cuDNN
// not compared); caller-provided device workspace and reserve, steady-state allocations,
// determinism, CUDA graph replay, the disk cache, and what is refused (the cuDNN peer's
// refusals also without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/cuda/persistent_source.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/cudnn_peer.hpp"
#include "runtime/cuda/kernel_cache.hpp"
#include "tests/cli_fixture.hpp"
#include "tests/scoped_env.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

using test::RnnCase;
using test::Tensors;
using test::ScopedEnv;

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda::device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
};

std::size_t bytes_of(const std::vector<float>& v) { return v.size() * sizeof(float); }

// A case's tensors in device memory; results come back as host Tensors.
struct OnDevice {
  explicit OnDevice(const RnnCase& rc)
      : w(up(rc.w)), x(up(rc.x)), hx(up(rc.hx)), cx(up(rc.cx)), dy(up(rc.dy)), dhy(up(rc.dhy)), dcy(up(rc.dcy)),
        y(bytes_of(rc.dy)), hy(bytes_of(rc.hx)), cy(bytes_of(rc.cx)), dx(bytes_of(rc.x)), dhx(bytes_of(rc.hx)),
        dcx(bytes_of(rc.cx)), dw(bytes_of(rc.w)) {}

  static std::unique_ptr<cuda::DeviceArray> up(const std::vector<float>& v) {
    auto a = std::make_unique<cuda::DeviceArray>(bytes_of(v));
    a->upload(v.data(), bytes_of(v));
    return a;
  }
  static std::vector<float> down(const cuda::DeviceArray& a) {
    std::vector<float> v(a.bytes() / sizeof(float));
    a.download(v.data(), a.bytes());
    return v;
  }
  template <typename T>
  static std::span<T> s(const std::unique_ptr<cuda::DeviceArray>& a) { return a->span<T>(); }
  template <typename T>
  static std::span<T> s(const cuda::DeviceArray& a) { return a.span<T>(); }

  Tensors run(Execution& ex, const RnnCase& rc, std::span<std::byte> reserve = {}, std::span<std::byte> workspace = {}) {
    ex.forward(s<const float>(w), {.x = s<const float>(x), .hx = s<const float>(hx), .cx = s<const float>(cx),
                                   .y = s<float>(y), .hy = s<float>(hy), .cy = s<float>(cy),
                                   .seq_lengths = rc.lengths, .dropout_seed = rc.dropout_seed},
               reserve, workspace);
    Tensors t{down(y), down(hy), down(cy), {}, {}, {}, {}};
    if (ex.mode() != Mode::training) return t;
    ex.backward_data(s<const float>(w), {.dy = s<const float>(dy), .dhy = s<const float>(dhy), .dcy = s<const float>(dcy),
                                         .dx = s<float>(dx), .dhx = s<float>(dhx), .dcx = s<float>(dcx)},
                     reserve, workspace);
    ex.backward_weights({.x = s<const float>(x), .dweights = s<float>(dw)}, reserve, workspace);
    t.dx = down(dx);
    t.dhx = down(dhx);
    t.dcx = down(dcx);
    t.dw = down(dw);
    return t;
  }

  // cuDNN on the same tensors.
  Tensors run_cudnn(const RnnCase& rc, Mode mode, cuda::CudnnAlgo algo = cuda::CudnnAlgo::standard) {
    cuda::CudnnRnn peer(rc.config, rc.shape, mode, algo);
    peer.set_weights(s<const float>(w).data());
    auto p = [](const cuda::DeviceArray& a) { return a.span<float>().data(); };
    auto c = [](const std::unique_ptr<cuda::DeviceArray>& a) { return a->span<const float>().data(); };
    peer.forward({.x = c(x), .hx = c(hx), .cx = c(cx), .y = p(y), .hy = p(hy), .cy = p(cy)});
    Tensors t{down(y), down(hy), down(cy), {}, {}, {}, {}};
    if (mode != Mode::training) return t;
    peer.backward({.x = c(x), .hx = c(hx), .cx = c(cx), .y = p(y), .dy = c(dy), .dhy = c(dhy), .dcy = c(dcy),
                   .dx = p(dx), .dhx = p(dhx), .dcx = p(dcx), .dweights = p(dw)});
    t.dx = down(dx);
    t.dhx = down(dhx);
    t.dcx = down(dcx);
    t.dw = down(dw);
    return t;
  }

  std::unique_ptr<cuda::DeviceArray> w, x, hx, cx, dy, dhy, dcy;
  cuda::DeviceArray y, hy, cy, dx, dhx, dcx, dw;
};

struct DeviceCase {
  std::string feature;
  CellKind cell;
  bool bidirectional;
  std::int64_t layers;
  Mode mode;
};

std::string case_name(const DeviceCase& c) {
  return fmt::format("{}_{}_{}_l{}_{}", c.feature, to_string(c.cell), c.bidirectional ? "bidir" : "unidir", c.layers,
                     c.mode == Mode::training ? "train" : "infer");
}
void PrintTo(const DeviceCase& c, std::ostream* os) { *os << case_name(c); }

class CudaCases : public CudaDevice, public ::testing::WithParamInterface<DeviceCase> {};

TEST_P(CudaCases, MatchTheReferenceAndCudnn) {
  const DeviceCase& c = GetParam();
  const bool lstm = c.cell == CellKind::lstm;
  // "lengths": variable sequence lengths; "lengths_all": with every feature ("all") too.
  const bool lengths = c.feature == "lengths" || c.feature == "lengths_all";
  const bool all = c.feature == "all" || c.feature == "lengths_all";
  // "large": sizes past one block of threads in every dimension, a batch of 20 as DS2's.
  const bool large = c.feature == "large";
  RnnConfig config{.cell = c.cell, .input_size = large ? 160 : 23,
                   .hidden_size = c.feature == "tails" ? 130 : large ? 300 : 19, .num_layers = c.layers,
                   .bidirectional = c.bidirectional};
  config.reverse = (c.feature == "reverse" || all) && !c.bidirectional;
  config.clip = lstm && (c.feature == "clip" || all) ? 0.6f : 0.0f;
  config.dropout = c.feature == "dropout" || all ? 0.3f : 0.0f;
  config.batch_first = c.feature == "batch_first" || all;
  config.proj_size = lstm && (c.feature == "projection" || all) ? 7 : 0;
  // ONNX's options ("lstm_onnx": all of them and the cell clip); 0.7 clamps a good share of the
  // pre-activations.
  config.gate_clip = c.feature == "gate_clip" || c.feature == "lstm_onnx" ? 0.7f : 0.0f;
  config.peephole = lstm && (c.feature == "peephole" || c.feature == "lstm_onnx");
  config.input_forget = lstm && (c.feature == "input_forget" || c.feature == "lstm_onnx");
  if (c.feature == "lstm_onnx") config.clip = 0.6f;
  config.bias = c.feature != "no_bias";
  config.sum_directions = c.feature == "sum_directions";
  config.independent_stacks = c.feature == "independent_stacks";
  config.relu_alpha = c.feature == "leaky" ? 0.1f : 0.0f;
  RnnCase rc(config, c.feature == "tails" ? Shape{4, 1} : large ? Shape{6, 20} : Shape{7, 5}, 3);
  rc.dropout_seed = 0x5eed;
  // cuDNN clips the LSTM cell state where a step reads it (c0 too) and returns cy unclipped;
  // rnnjit clips c_t where a step makes it (TensorFlow's cell_clip) and takes c0 as given. From
  // a c0 inside the clip range the two are one network, whose cy is cuDNN's clipped (below).
  auto clip_cell_states = [&](std::vector<float>& c) {
    if (config.clip > 0.0f)
      for (float& v : c) v = std::clamp(v, -config.clip, config.clip);
  };
  clip_cell_states(rc.cx);
  if (lengths) rc.vary_lengths();
  const bool train = c.mode == Mode::training;
  Execution ex = Rnn(config, {.device = Device::cuda}).prepare(rc.shape, c.mode);
  EXPECT_EQ(ex.packed_weights_size(), 0u);
  OnDevice dev(rc);
  const Tensors got = dev.run(ex, rc), want = rc.reference(train);
  test::expect_matches(got, want, rc, train, "rnnjit");
  if (lengths) return;  // the cuDNN peer runs every element for all T steps
  // cuDNN: what the peer refuses (no reset-before GRU, no reverse-only direction, its own dropout
  // masks, none of ONNX's options) is not compared; its clip's gradient is not compared.
  if (const std::string why = cuda::cudnn_peer_refusal(config, c.mode); !why.empty()) {
    std::printf("cuDNN comparison skipped: %s\n", why.c_str());
    return;
  }
  bool cudnn_ok = false;
  const std::string cudnn = cuda::cudnn_status(&cudnn_ok);
  if (!cudnn_ok) {
    std::printf("cuDNN comparison skipped: %s\n", cudnn.c_str());
    return;
  }
  const bool peer_train = train && config.clip == 0.0f;
  Tensors peer = OnDevice(rc).run_cudnn(rc, peer_train ? Mode::training : Mode::inference);
  clip_cell_states(peer.cy);
  test::expect_matches(peer, want, rc, peer_train, "cudnn");
  test::expect_matches(got, peer, rc, peer_train, "rnnjit vs cudnn");
}

std::vector<DeviceCase> device_cases() {
  std::vector<DeviceCase> cases;
  for (const char* feature : {"plain", "tails", "reverse", "clip", "dropout", "batch_first", "projection", "gate_clip",
                              "peephole", "input_forget", "lstm_onnx", "all", "lengths", "lengths_all", "large", "no_bias",
                              "sum_directions", "independent_stacks", "leaky"})
    for (CellKind cell : kCellKinds)
      for (bool bidir : {false, true})
        for (std::int64_t layers : {1, 2})
          for (Mode mode : {Mode::inference, Mode::training}) {
            const std::string f = feature;
            const bool lstm_only = f == "clip" || f == "projection" || f == "peephole" || f == "input_forget" ||
                                   f == "lstm_onnx";
            if (lstm_only && cell != CellKind::lstm) continue;
            if (f == "reverse" && bidir) continue;
            if (f == "dropout" && (layers == 1 || mode == Mode::inference)) continue;
            if ((f == "tails" || f == "all" || f == "lengths_all") && layers == 1) continue;
            if (f == "large" && (layers == 1 || !bidir)) continue;
            if ((f == "sum_directions" || f == "independent_stacks") && !bidir) continue;
            if (f == "independent_stacks" && layers == 1) continue;  // one layer: the same network
            if (f == "leaky" && cell != CellKind::rnn_relu) continue;
            cases.push_back({f, cell, bidir, f == "dropout" ? 3 : layers, mode});
          }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaCases, ::testing::ValuesIn(device_cases()),
                         [](const auto& info) { return case_name(info.param); });

const RnnConfig kGru{.cell = CellKind::gru, .input_size = 23, .hidden_size = 40, .num_layers = 2, .bidirectional = true};

TEST_F(CudaDevice, CallerBuffersDeterminismAndSteadyState) {
  RnnCase rc(kGru, {9, 6}, 5);
  Execution ex = Rnn(kGru, {.device = Device::cuda}).prepare(rc.shape, Mode::training);
  OnDevice dev(rc);
  const Tensors first = dev.run(ex, rc);
  const std::uint64_t allocations = ex.allocations();
  EXPECT_EQ(allocations, 2u);  // workspace and reserve, once
  const Tensors again = dev.run(ex, rc);
  EXPECT_EQ(ex.allocations(), allocations);
  EXPECT_EQ(first.y, again.y);
  EXPECT_EQ(first.dw, again.dw);
  cuda::DeviceArray workspace(ex.workspace_size()), reserve(ex.reserve_size());
  const Tensors theirs = dev.run(ex, rc, reserve.span<std::byte>(), workspace.span<std::byte>());
  EXPECT_EQ(ex.allocations(), allocations);
  EXPECT_EQ(theirs.y, first.y);
  EXPECT_EQ(theirs.dx, first.dx);
  EXPECT_EQ(theirs.dw, first.dw);
  // accumulate adds into dweights.
  ex.forward(OnDevice::s<const float>(dev.w), {.x = OnDevice::s<const float>(dev.x), .y = dev.y.span<float>()});
  ex.backward_data(OnDevice::s<const float>(dev.w), {.dy = OnDevice::s<const float>(dev.dy), .dx = dev.dx.span<float>()});
  ex.backward_weights({.x = OnDevice::s<const float>(dev.x), .dweights = dev.dw.span<float>()});
  const std::vector<float> once = OnDevice::down(dev.dw);
  ex.backward_weights({.x = OnDevice::s<const float>(dev.x), .dweights = dev.dw.span<float>(), .accumulate = true});
  const std::vector<float> twice = OnDevice::down(dev.dw);
  std::vector<float> doubled(once.size());
  for (std::size_t i = 0; i < once.size(); ++i) doubled[i] = 2.0f * once[i];
  test::expect_close(twice, doubled, rc.tolerance(true), "accumulated dweights");
}

// Variable lengths from call to call on one Execution: host seq_lengths, uploaded per forward
// call (training: kept in the reserve for backward), with and without lengths in turn, own and
// caller-provided scratch, no allocation after the first call; lengths out of [1, T] are refused.
TEST_F(CudaDevice, VariableLengthsFromCallToCall) {
  for (Mode mode : {Mode::inference, Mode::training}) {
    SCOPED_TRACE(mode == Mode::training ? "training" : "inference");
    const bool train = mode == Mode::training;
    RnnCase varied(kGru, {9, 6}, 5);
    varied.vary_lengths();
    RnnCase full = varied;
    full.lengths.clear();
    Execution ex = Rnn(kGru, {.device = Device::cuda}).prepare(varied.shape, mode);
    OnDevice dev(varied);
    const Tensors want_varied = varied.reference(train), want_full = full.reference(train);
    test::expect_matches(dev.run(ex, varied), want_varied, varied, train, "lengths");
    const std::uint64_t allocations = ex.allocations();
    test::expect_matches(dev.run(ex, full), want_full, full, train, "no lengths after lengths");
    test::expect_matches(dev.run(ex, varied), want_varied, varied, train, "lengths again");
    cuda::DeviceArray workspace(ex.workspace_size()), reserve(std::max<std::size_t>(ex.reserve_size(), 1));
    std::span<std::byte> theirs = train ? reserve.span<std::byte>() : std::span<std::byte>{};
    test::expect_matches(dev.run(ex, varied, theirs, workspace.span<std::byte>()), want_varied, varied, train,
                 "caller scratch");
    EXPECT_EQ(ex.allocations(), allocations);
    std::vector<std::int32_t> bad = varied.lengths;
    bad[2] = static_cast<std::int32_t>(varied.shape.seq_len) + 1;
    EXPECT_THROW(ex.forward(OnDevice::s<const float>(dev.w), {.x = OnDevice::s<const float>(dev.x),
                                                              .y = dev.y.span<float>(), .seq_lengths = bad}),
                 Error);
  }
}

TEST_F(CudaDevice, RefusesWhatItDoesNotSupport) {
  RnnCase rc(kGru, {4, 3}, 5);
  Execution ex = Rnn(kGru, {.device = Device::cuda}).prepare(rc.shape, Mode::training);
  OnDevice dev(rc);
  std::vector<std::byte> packed(64);
  EXPECT_THROW(ex.forward(OnDevice::s<const float>(dev.w), {.x = OnDevice::s<const float>(dev.x), .y = dev.y.span<float>(),
                                                            .packed_weights = packed}),
               Error);  // nothing is packed on the GPU
  EXPECT_THROW(ex.backward_data(OnDevice::s<const float>(dev.w), {.dy = OnDevice::s<const float>(dev.dy),
                                                                  .dx = dev.dx.span<float>()}),
               Error);  // no forward yet
  EXPECT_THROW(ex.forward(OnDevice::s<const float>(dev.w).subspan(1), {.x = OnDevice::s<const float>(dev.x),
                                                                        .y = dev.y.span<float>()}),
               Error);  // sizes are checked
}

TEST_F(CudaDevice, CudnnPeerRefusesWhatCouldNotAgree) {
  bool ok = false;
  const std::string why = cuda::cudnn_status(&ok);
  if (!ok) GTEST_SKIP() << why;
  RnnConfig reverse = kGru;
  reverse.bidirectional = false;
  reverse.reverse = true;
  EXPECT_THROW(cuda::CudnnRnn(reverse, {3, 2}, Mode::inference), Error);
  RnnConfig dropout = kGru;
  dropout.dropout = 0.5f;
  EXPECT_THROW(cuda::CudnnRnn(dropout, {3, 2}, Mode::training), Error);
  EXPECT_NO_THROW(cuda::CudnnRnn(dropout, {3, 2}, Mode::inference));  // inference drops nothing
  RnnConfig lstm{.cell = CellKind::lstm, .input_size = 5, .hidden_size = 8};
  lstm.peephole = true;
  EXPECT_THROW(cuda::CudnnRnn(lstm, {3, 2}, Mode::inference), Error);
  RnnConfig gate_clip = kGru;
  gate_clip.gate_clip = 1.5f;
  EXPECT_THROW(cuda::CudnnRnn(gate_clip, {3, 2}, Mode::inference), Error);
  RnnConfig reset_before = kGru;
  reset_before.cell = CellKind::gru_reset_before;
  try {
    cuda::CudnnRnn peer(reset_before, {3, 2}, Mode::inference);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), cuda::cudnn_peer_refusal(reset_before, Mode::inference));
  }
}

// cuDNN's persistent kernels (the peer's CudnnAlgo::persistent_static) on the same networks:
// they agree with the reference wherever cuDNN has such a kernel; where it has none, cuDNN's
// refusal (a CUDNN_STATUS_* error) is printed, not counted: it depends on the device and the
// cuDNN version.
TEST_F(CudaDevice, CudnnPersistentAgreesWhereCudnnHasIt) {
  bool ok = false;
  const std::string why = cuda::cudnn_status(&ok);
  if (!ok) GTEST_SKIP() << why;
  int ran = 0;
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::rnn_tanh})
    for (bool bidir : {false, true})
      for (Mode mode : {Mode::inference, Mode::training}) {
        const RnnConfig c{.cell = cell, .input_size = 48, .hidden_size = 96, .num_layers = 2, .bidirectional = bidir};
        RnnCase rc(c, {10, 8}, 17);
        SCOPED_TRACE(fmt::format("{} {} {}", to_string(cell), bidir ? "bidirectional" : "forward",
                                 mode == Mode::training ? "training" : "inference"));
        OnDevice dev(rc);
        const bool train = mode == Mode::training;
        try {
          test::expect_matches(dev.run_cudnn(rc, mode, cuda::CudnnAlgo::persistent_static), rc.reference(train), rc,
                               train, "cudnn persistent");
          ++ran;
        } catch (const Error& e) {  // cuDNN's refusal (a CUDNN_STATUS_*), not a disagreement
          std::printf("cuDNN persistent refused: %s\n", e.what());
          EXPECT_NE(std::string(e.what()).find("CUDNN_STATUS"), std::string::npos) << e.what();
        }
      }
  std::printf("cuDNN's persistent kernels ran %d of 12 networks\n", ran);
}

// What the cuDNN peer cannot run, in one line each (no GPU needed): cuDNN has no reset-before
// GRU (ONNX's default GRU), no reverse-only direction, no ONNX gate clip, no peepholes and no
// coupled input/forget gates, and draws its own dropout masks; the LSTM cell clip, projection
// and batch-first it has.
TEST(CudnnPeer, RefusesWhatCudnnLacks) {
  const RnnConfig plain{.cell = CellKind::lstm, .input_size = 5, .hidden_size = 8, .num_layers = 2};
  auto refusal = [&](auto change, Mode mode = Mode::training) {
    RnnConfig c = plain;
    change(c);
    return cuda::cudnn_peer_refusal(c, mode);
  };
  EXPECT_EQ(refusal([](RnnConfig&) {}), "");
  EXPECT_EQ(refusal([](RnnConfig& c) { c.clip = 0.5f; c.proj_size = 3; c.batch_first = true; c.bidirectional = true; }), "");
  EXPECT_EQ(refusal([](RnnConfig& c) { c.dropout = 0.3f; }, Mode::inference), "");
  const std::pair<std::string, std::function<void(RnnConfig&)>> refused[] = {
      {"no gru_reset_before", [](RnnConfig& c) { c.cell = CellKind::gru_reset_before; }},
      {"reverse-only direction", [](RnnConfig& c) { c.reverse = true; }},
      {"without dropout", [](RnnConfig& c) { c.dropout = 0.3f; }},
      {"no gate_clip", [](RnnConfig& c) { c.gate_clip = 0.7f; }},
      {"no peephole", [](RnnConfig& c) { c.peephole = true; }},
      {"no input_forget", [](RnnConfig& c) { c.input_forget = true; }},
      {"with biases only", [](RnnConfig& c) { c.bias = false; }},
      {"no sum_directions", [](RnnConfig& c) { c.bidirectional = c.sum_directions = true; }},
      {"no independent_stacks", [](RnnConfig& c) { c.bidirectional = c.independent_stacks = true; }},
  };
  for (const auto& [words, change] : refused) {
    const std::string why = refusal(change);
    EXPECT_EQ(why.rfind("the cuDNN peer ", 0), 0u) << why;
    EXPECT_NE(why.find(words), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
}

// A pass called again with the same buffers is captured as a CUDA graph and replayed from then
// on (runtime/cuda/pass_graph.hpp): new data in the same buffers gives the new results, and
// other buffers or lengths are issued directly again, with their own results.
TEST_F(CudaDevice, RepeatedCallsReplayTheirGraph) {
  const RnnConfig c{.cell = CellKind::lstm, .input_size = 11, .hidden_size = 45, .num_layers = 2, .bidirectional = true};
  RnnCase rc(c, {9, 4}, 21);
  Execution ex = Rnn(c, {.device = Device::cuda}).prepare(rc.shape, Mode::training);
  OnDevice dev(rc);
  const Tensors want = rc.reference(true);
  for (const char* call : {"direct", "captured", "replayed"}) test::expect_matches(dev.run(ex, rc), want, rc, true, call);
  RnnCase other(c, rc.shape, 22);  // new values in the same buffers
  for (auto [to, from] : {std::pair{&dev.w, &other.w}, {&dev.x, &other.x}, {&dev.hx, &other.hx}, {&dev.cx, &other.cx},
                          {&dev.dy, &other.dy}, {&dev.dhy, &other.dhy}, {&dev.dcy, &other.dcy}})
    (*to)->upload(from->data(), bytes_of(*from));
  const Tensors want_other = other.reference(true);
  test::expect_matches(dev.run(ex, other), want_other, other, true, "replayed on new data");
  cuda::DeviceArray workspace(ex.workspace_size()), reserve(ex.reserve_size());
  test::expect_matches(dev.run(ex, other, reserve.span<std::byte>(), workspace.span<std::byte>()), want_other, other,
                       true, "other scratch");
  RnnCase varied = other;
  varied.vary_lengths();
  for (const char* call : {"lengths", "lengths captured", "lengths replayed"})
    test::expect_matches(dev.run(ex, varied), varied.reference(true), varied, true, call);
  RnnCase shorter = varied;
  shorter.lengths[1] = varied.lengths[1] == 1 ? 2 : 1;
  test::expect_matches(dev.run(ex, shorter), shorter.reference(true), shorter, true, "other lengths");
}

// The persistent recurrent kernels (runtime/cuda/cuda_ops.hpp) and the step-by-step walk
// (RNNJIT_CUDA_PERSISTENT=0) both match the reference, each cell (a test per cell, for the
// shards), uni- and bidirectional (two kernels at once), inference and training: one row with
// H past a block of 128 threads, DS2's batch, the most rows the kernel takes, and H=900 (the
// bidirectional LSTM reads h_{t-1} in chunks of 8 rows). Each of these has a persistent kernel
// on the device (persistent_shape with its SMs and shared memory).
class CudaPersistent : public CudaDevice, public ::testing::WithParamInterface<CellKind> {};

TEST_P(CudaPersistent, PersistentAndStepByStepMatchTheReference) {
  const CellKind cell = GetParam();
  const cuda::Device& device = cuda::Device::instance();
  for (const auto& [H, N, layers] : {std::tuple{130, 1, 2}, {300, 20, 2}, {64, 64, 2}, {900, 20, 1}})
    for (bool bidir : {false, true})
      for (Mode mode : {Mode::inference, Mode::training}) {
        const bool train = mode == Mode::training;
        const RnnConfig config{.cell = cell, .input_size = 16, .hidden_size = H, .num_layers = layers,
                               .bidirectional = bidir};
        RnnCase rc(config, {3, N}, 17);
        SCOPED_TRACE(fmt::format("H={} N={} layers={} {} {}", H, N, layers, bidir ? "bidir" : "unidir",
                                 train ? "training" : "inference"));
        for (const KernelDesc& d : cuda::make_gpu_plan(config, rc.shape, mode).kernels) {
          if (d.pass_kind() != Pass::forward) continue;
          EXPECT_TRUE(cuda::persistent_shape(d, device.multiprocessors(), device.shared_per_block(),
                                             config.directions()))
              << kernel_name(d);
        }
        const Tensors want = rc.reference(train);
        for (const char* persistent : {"1", "0"}) {
          ScopedEnv env("RNNJIT_CUDA_PERSISTENT", persistent);
          Execution ex = Rnn(config, {.device = Device::cuda}).prepare(rc.shape, mode);
          OnDevice dev(rc);
          test::expect_matches(dev.run(ex, rc), want, rc, train, *persistent == '1' ? "persistent" : "step by step");
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaPersistent,
                         ::testing::Values(CellKind::lstm, CellKind::gru, CellKind::rnn_tanh, CellKind::rnn_relu),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The bench loop calls each pass again with the same buffers: every pass is captured (once)
// and replayed, or RNNJIT_VERBOSE says why it could not be; RNNJIT_CUDA_GRAPHS=0 captures none.
// The forward runs its recurrences as persistent kernels (each with its barrier's memset, in the
// graph too), or step by step with RNNJIT_CUDA_PERSISTENT=0.
class CudaGraphCli : public test::CliFixture {
 protected:
  void SetUp() override {
    const std::string reason = cuda::device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    CliFixture::SetUp();
  }
};

TEST_F(CudaGraphCli, TheBenchLoopReplaysEveryPass) {
  const std::vector<std::string> bench{"bench", "--device", "cuda", "--cell", "gru", "--input-size", "8", "--hidden-size",
                                       "16", "--bidirectional", "--seq", "5", "--batch", "3", "--mode", "train",
                                       "--reps", "3", "--warmup", "1"};
  const test::CliResult r = cli(bench, "RNNJIT_VERBOSE=1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("could not be captured"), std::string::npos) << r.err;
  for (const char* pass : {"forward", "backward data", "backward weights"}) {
    const std::string line = fmt::format("cuda: {} captured as a graph", pass);
    const std::size_t at = r.err.find(line);
    EXPECT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << "captured more than once: " << r.err;
  }
  EXPECT_NE(r.err.find("_persistent_b"), std::string::npos) << r.err;
  const test::CliResult off = cli(bench, "RNNJIT_VERBOSE=1 RNNJIT_CUDA_GRAPHS=0");
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(off.err.find("as a graph"), std::string::npos) << off.err;
  const test::CliResult stepwise = cli(bench, "RNNJIT_VERBOSE=1 RNNJIT_CUDA_PERSISTENT=0");
  ASSERT_EQ(stepwise.status, 0) << stepwise.err;
  EXPECT_EQ(stepwise.err.find("_persistent_b"), std::string::npos) << stepwise.err;
  EXPECT_NE(stepwise.err.find("cuda: forward captured as a graph"), std::string::npos) << stepwise.err;
}

TEST_F(CudaDevice, KernelsGoToTheDiskCache) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("rnnjit_cuda_exec_{}", ::getpid());
  std::filesystem::remove_all(dir);
  const ScopedEnv env("RNNJIT_CACHE_DIR", dir.string());
  const RnnConfig c{.cell = CellKind::lstm, .input_size = 3, .hidden_size = 37};  // a size no other test uses
  Execution ex = Rnn(c, {.device = Device::cuda}).prepare({2, 7}, Mode::training);
  const std::string target = cuda::device_info().target;
  std::size_t gates = 0, persistent = 0;
  for (const cuda::DiskEntry& e : cuda::disk_list(dir)) {
    EXPECT_EQ(e.target, target);
    gates += e.module.find("_h37_") != std::string::npos;
    persistent += e.module.find("_h37_") != std::string::npos && e.module.find("_persistent_") != std::string::npos;
  }
  EXPECT_EQ(gates, 3u);  // forward training, its persistent kernel, and backward
  EXPECT_EQ(persistent, 1u);
  // The reset-before GRU: two kernels (parts 0 and 1) per pass, four modules.
  const RnnConfig rb{.cell = CellKind::gru_reset_before, .input_size = 3, .hidden_size = 41};
  Execution ex_rb = Rnn(rb, {.device = Device::cuda}).prepare({2, 7}, Mode::training);
  std::size_t rb_gates = 0;
  for (const cuda::DiskEntry& e : cuda::disk_list(dir)) rb_gates += e.module.find("gru_reset_before_") == 0;
  EXPECT_EQ(rb_gates, 4u);  // forward training and backward, parts rz and n
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rnnjit
