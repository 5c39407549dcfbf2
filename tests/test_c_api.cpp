// The C API (rnnjit.h), called from C++: statuses and messages for every misuse (NULL handles and
// buffers, wrong sizes, wrong call order) without crashing; results equal to the C++ API's; the
// threading contract; and ONNX's RNN, GRU and LSTM operators against (a) ONNX's equations written
// out for scalar cases and (b) rnnjit::reference fed with weights and tensors converted from ONNX's
// layouts by a test-local implementation written from the ONNX operator spec; every unsupported
// attribute; ONNX's clip, P and input_forget=1 (mapped to gate_clip, peephole and input_forget);
// and, where Python's onnx and onnxruntime import, onnxruntime itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rnnjit.h"
#include "rnnjit/npy.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit::test {
namespace {

using RnnPtr = std::unique_ptr<rnnjit_rnn_t, decltype(&rnnjit_rnn_destroy)>;
using ExecPtr = std::unique_ptr<rnnjit_execution_t, decltype(&rnnjit_execution_destroy)>;

std::string status_name(int32_t s) { return rnnjit_status_string(s); }

#define ASSERT_OK(call) ASSERT_EQ(status_name(call), "OK") << rnnjit_last_error()
#define EXPECT_OK(call) EXPECT_EQ(status_name(call), "OK") << rnnjit_last_error()
// The call fails with `status` and a message that contains `part`.
#define EXPECT_ERROR(call, status, part)                                                            \
  do {                                                                                              \
    const rnnjit_status_t got_ = (call);                                                            \
    EXPECT_EQ(status_name(got_), status_name(status)) << #call << ": " << rnnjit_last_error();      \
    EXPECT_NE(std::string(rnnjit_last_error()).find(part), std::string::npos)                       \
        << #call << ": message \"" << rnnjit_last_error() << "\" does not mention \"" << (part) << "\""; \
  } while (0)

constexpr rnnjit_status_t kInvalid = RNNJIT_STATUS_INVALID_ARGUMENT;
constexpr rnnjit_status_t kUnsupported = RNNJIT_STATUS_UNSUPPORTED;

rnnjit_config_t c_config(const RnnConfig& c, int threads = 0) {
  rnnjit_config_t out{};
  out.cell = static_cast<int>(c.cell);  // same numbering, checked below
  out.input_size = c.input_size;
  out.hidden_size = c.hidden_size;
  out.num_layers = c.num_layers;
  out.direction = c.sum_directions ? RNNJIT_DIRECTION_BIDIRECTIONAL_SUM
                  : c.bidirectional ? RNNJIT_DIRECTION_BIDIRECTIONAL
                  : c.reverse       ? RNNJIT_DIRECTION_REVERSE
                                    : RNNJIT_DIRECTION_FORWARD;
  out.threads = threads;
  out.proj_size = c.proj_size;
  out.cell_clip = c.clip;
  out.dropout = c.dropout;
  out.batch_first = c.batch_first ? 1 : 0;
  out.gate_clip = c.gate_clip;
  out.peephole = c.peephole ? 1 : 0;
  out.input_forget = c.input_forget ? 1 : 0;
  out.no_bias = c.bias ? 0 : 1;
  out.independent_stacks = c.independent_stacks ? 1 : 0;
  return out;
}

RnnPtr make_rnn(const rnnjit_config_t& config) {
  rnnjit_rnn_t* rnn = nullptr;
  EXPECT_OK(rnnjit_rnn_create(&config, &rnn));
  return RnnPtr(rnn, &rnnjit_rnn_destroy);
}

ExecPtr make_execution(const rnnjit_rnn_t* rnn, std::int64_t T, std::int64_t N, rnnjit_mode_t mode) {
  rnnjit_execution_t* ex = nullptr;
  EXPECT_OK(rnnjit_execution_create(rnn, T, N, mode, &ex));
  return ExecPtr(ex, &rnnjit_execution_destroy);
}

// ---------------------------------------------------------------------------------------------
// The native C API

TEST(CApi, StatusNamesVersionAndEnumNumbering) {
  EXPECT_STREQ(rnnjit_status_string(RNNJIT_STATUS_OK), "OK");
  EXPECT_STREQ(rnnjit_status_string(RNNJIT_STATUS_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(rnnjit_status_string(RNNJIT_STATUS_UNSUPPORTED), "UNSUPPORTED");
  EXPECT_STREQ(rnnjit_status_string(RNNJIT_STATUS_OUT_OF_MEMORY), "OUT_OF_MEMORY");
  EXPECT_STREQ(rnnjit_status_string(RNNJIT_STATUS_INTERNAL), "INTERNAL");
  EXPECT_STREQ(rnnjit_status_string(42), "UNKNOWN");
  EXPECT_EQ(std::string(rnnjit_version()), fmt::format("{}.{}.{}", RNNJIT_VERSION_MAJOR, RNNJIT_VERSION_MINOR,
                                                       RNNJIT_VERSION_PATCH));
  EXPECT_EQ(RNNJIT_CELL_RNN_RELU, static_cast<int>(CellKind::rnn_relu));
  EXPECT_EQ(RNNJIT_CELL_RNN_TANH, static_cast<int>(CellKind::rnn_tanh));
  EXPECT_EQ(RNNJIT_CELL_LSTM, static_cast<int>(CellKind::lstm));
  EXPECT_EQ(RNNJIT_CELL_GRU, static_cast<int>(CellKind::gru));
  EXPECT_EQ(RNNJIT_CELL_GRU_RESET_BEFORE, static_cast<int>(CellKind::gru_reset_before));
  EXPECT_EQ(RNNJIT_CELL_RNN_SIGMOID, static_cast<int>(CellKind::rnn_sigmoid));
}

TEST(CApi, CreateValidatesTheConfig) {
  rnnjit_config_t config = c_config({CellKind::lstm, 5, 7, 2, true});
  rnnjit_rnn_t* rnn = reinterpret_cast<rnnjit_rnn_t*>(0x1);  // overwritten with NULL on failure
  EXPECT_ERROR(rnnjit_rnn_create(nullptr, &rnn), kInvalid, "config is NULL");
  EXPECT_EQ(rnn, nullptr);
  EXPECT_ERROR(rnnjit_rnn_create(&config, nullptr), kInvalid, "rnn (the output handle) is NULL");
  auto with = [&](auto change) {
    rnnjit_config_t c = config;
    change(c);
    return c;
  };
  auto create = [&](const rnnjit_config_t& c) { return rnnjit_rnn_create(&c, &rnn); };
  EXPECT_ERROR(create(with([](auto& c) { c.hidden_size = 0; })), kInvalid, "hidden_size must be positive, got 0");
  EXPECT_ERROR(create(with([](auto& c) { c.input_size = -3; })), kInvalid, "input_size must be positive, got -3");
  EXPECT_ERROR(create(with([](auto& c) { c.num_layers = 0; })), kInvalid, "num_layers");
  EXPECT_ERROR(create(with([](auto& c) { c.cell = 9; })), kInvalid, "config.cell is 9");
  EXPECT_ERROR(create(with([](auto& c) { c.direction = 5; })), kInvalid,
               "config.direction is 5");
  EXPECT_ERROR(create(with([](auto& c) { c.proj_size = c.hidden_size; })), kInvalid, "proj_size must be 0");
  EXPECT_ERROR(create(with([](auto& c) { c.cell_clip = -1.0f; })), kInvalid, "clip must be");
  EXPECT_ERROR(create(with([](auto& c) { c.dropout = 1.0f; })), kInvalid, "dropout must be in [0, 1)");
  EXPECT_ERROR(create(with([](auto& c) { c.gate_clip = -0.5f; })), kInvalid,
               "gate_clip must be a finite value >= 0 (0: none), got -0.5");
  EXPECT_ERROR(create(with([](auto& c) { c.gate_clip = INFINITY; })), kInvalid, "gate_clip must be a finite value");
  EXPECT_ERROR(create(with([](auto& c) { c.cell = RNNJIT_CELL_GRU, c.peephole = 1; })), kInvalid,
               "peephole applies to LSTM only, not to gru");
  EXPECT_ERROR(create(with([](auto& c) { c.cell = RNNJIT_CELL_RNN_TANH, c.input_forget = 1; })), kInvalid,
               "input_forget applies to LSTM only, not to rnn_tanh");
  EXPECT_ERROR(create(with([](auto& c) { c.fpmath = 7; })), kInvalid, "config.fpmath 7 is not an rnnjit_fpmath_t");
  EXPECT_ERROR(create(with([](auto& c) { c.threads = -1; })), kInvalid, "config.threads");
  EXPECT_ERROR(create(with([](auto& c) { c.threads = 1000; })), kInvalid, "threads must be in [1, 256]");
  EXPECT_EQ(rnn, nullptr);
  ASSERT_OK(create(config));
  EXPECT_STREQ(rnnjit_last_error(), "");
  rnnjit_rnn_destroy(rnn);

  RnnPtr ok = make_rnn(config);
  rnnjit_execution_t* ex = reinterpret_cast<rnnjit_execution_t*>(0x1);
  EXPECT_ERROR(rnnjit_execution_create(ok.get(), 0, 2, RNNJIT_MODE_INFERENCE, &ex), kInvalid, "seq_len must be positive");
  EXPECT_EQ(ex, nullptr);
  EXPECT_ERROR(rnnjit_execution_create(ok.get(), 3, -1, RNNJIT_MODE_INFERENCE, &ex), kInvalid, "batch must be positive");
  EXPECT_ERROR(rnnjit_execution_create(ok.get(), 3, 2, 3, &ex), kInvalid, "mode is 3");
  EXPECT_ERROR(rnnjit_execution_create(ok.get(), 3, 2, RNNJIT_MODE_INFERENCE, nullptr), kInvalid,
               "execution (the output handle) is NULL");
}

// config.fpmath = RNNJIT_FPMATH_BF16 is Options::fpmath bf16: the same results, bit for bit, as
// the C++ API's (AMX-BF16 where usable, else FP32 in both).
TEST(CApi, FpmathBf16IsTheCppApisOption) {
  EXPECT_EQ(RNNJIT_FPMATH_STRICT, static_cast<int>(rnnjit::FpMath::strict));
  EXPECT_EQ(RNNJIT_FPMATH_BF16, static_cast<int>(rnnjit::FpMath::bf16));
  const RnnConfig config{.cell = CellKind::gru, .input_size = 13, .hidden_size = 40, .num_layers = 2};
  RnnCase rc(config, {6, 5});
  rnnjit_config_t c = c_config(config);
  c.fpmath = RNNJIT_FPMATH_BF16;
  const RnnPtr rnn = make_rnn(c);
  const ExecPtr ex = make_execution(rnn.get(), 6, 5, RNNJIT_MODE_INFERENCE);
  std::vector<float> y(rc.dy.size());
  rnnjit_forward_io_t io{};
  io.x = rc.x.data(), io.x_size = rc.x.size();
  io.hx = rc.hx.data(), io.hx_size = rc.hx.size();
  io.y = y.data(), io.y_size = y.size();
  ASSERT_OK(rnnjit_forward(ex.get(), rc.w.data(), rc.w.size(), &io));

  Execution cpp = Rnn(config, {.fpmath = rnnjit::FpMath::bf16}).prepare(rc.shape, Mode::inference);
  EXPECT_EQ(y, rc.run(cpp).y);
}

TEST(CApi, NullHandlesAreErrorsNotCrashes) {
  std::size_t n = 0, off = 0;
  float f[4] = {};
  std::byte b[4] = {};
  rnnjit_tensor_sizes_t sizes;
  rnnjit_forward_io_t fio{};
  rnnjit_backward_data_io_t bdio{};
  rnnjit_backward_weights_io_t bwio{};
  rnnjit_onnx_io_t oio{};
  rnnjit_onnx_attributes_t attrs{};
  rnnjit_config_t config{};
  EXPECT_ERROR(rnnjit_rnn_weights_size(nullptr, &n), kInvalid, "rnn is NULL");
  EXPECT_ERROR(rnnjit_rnn_weight_block(nullptr, "weight_ih_l0", &off, &n), kInvalid, "rnn is NULL");
  EXPECT_ERROR(rnnjit_execution_create(nullptr, 2, 2, RNNJIT_MODE_INFERENCE, nullptr), kInvalid, "is NULL");
  EXPECT_ERROR(rnnjit_execution_tensor_sizes(nullptr, &sizes), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_execution_workspace_size(nullptr, &n), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_execution_reserve_size(nullptr, &n), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_execution_packed_weights_size(nullptr, &n), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_pack_weights(nullptr, f, 4, b, 4), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_forward(nullptr, f, 4, &fio), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_backward_data(nullptr, f, 4, &bdio), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_backward_weights(nullptr, &bwio), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_onnx_forward(nullptr, &attrs, f, 4, &oio), kInvalid, "execution is NULL");
  EXPECT_ERROR(rnnjit_onnx_config(nullptr, 3, &config), kInvalid, "attrs is NULL");
  EXPECT_ERROR(rnnjit_onnx_import_weights(nullptr, 3, f, 4, f, 4, nullptr, 0, nullptr, 0, f, 4), kInvalid,
               "attrs is NULL");
  rnnjit_rnn_destroy(nullptr);
  rnnjit_execution_destroy(nullptr);

  // NULL output pointers and io structs of valid handles.
  RnnPtr rnn = make_rnn(c_config({CellKind::gru, 3, 4, 1, false}));
  ExecPtr ex = make_execution(rnn.get(), 2, 2, RNNJIT_MODE_TRAINING);
  EXPECT_ERROR(rnnjit_rnn_weights_size(rnn.get(), nullptr), kInvalid, "elements is NULL");
  EXPECT_ERROR(rnnjit_rnn_weight_block(rnn.get(), nullptr, &off, &n), kInvalid, "name is NULL");
  EXPECT_ERROR(rnnjit_rnn_weight_block(rnn.get(), "weight_ih_l0", nullptr, &n), kInvalid, "offset is NULL");
  EXPECT_ERROR(rnnjit_rnn_weight_block(rnn.get(), "weight_ih_l7", &off, &n), kInvalid, "no parameter named");
  EXPECT_ERROR(rnnjit_execution_tensor_sizes(ex.get(), nullptr), kInvalid, "sizes is NULL");
  EXPECT_ERROR(rnnjit_execution_workspace_size(ex.get(), nullptr), kInvalid, "bytes is NULL");
  EXPECT_ERROR(rnnjit_forward(ex.get(), f, 4, nullptr), kInvalid, "io is NULL");
  EXPECT_ERROR(rnnjit_backward_data(ex.get(), f, 4, nullptr), kInvalid, "io is NULL");
  EXPECT_ERROR(rnnjit_backward_weights(ex.get(), nullptr), kInvalid, "io is NULL");
  EXPECT_ERROR(rnnjit_onnx_forward(ex.get(), &attrs, f, 4, nullptr), kInvalid, "io is NULL");
  EXPECT_ERROR(rnnjit_onnx_config(&attrs, 3, nullptr), kInvalid, "config is NULL");
}

class CApiBuffers : public testing::Test {
 protected:
  RnnCase rc{{CellKind::lstm, 5, 7, 2, true}, {4, 3}};
  RnnPtr rnn = make_rnn(c_config(rc.config));
  ExecPtr train = make_execution(rnn.get(), rc.shape.seq_len, rc.shape.batch, RNNJIT_MODE_TRAINING);
  ExecPtr infer = make_execution(rnn.get(), rc.shape.seq_len, rc.shape.batch, RNNJIT_MODE_INFERENCE);
  std::vector<float> y = std::vector<float>(static_cast<std::size_t>(y_elements(rc.config, rc.shape)));
  std::vector<float> dx = std::vector<float>(rc.x.size()), dw = std::vector<float>(rc.w.size());

  rnnjit_forward_io_t fio() {
    rnnjit_forward_io_t io{};
    io.x = rc.x.data(), io.x_size = rc.x.size();
    io.y = y.data(), io.y_size = y.size();
    return io;
  }
  rnnjit_status_t forward(rnnjit_execution_t* ex, const rnnjit_forward_io_t& io) {
    return rnnjit_forward(ex, rc.w.data(), rc.w.size(), &io);
  }
};

TEST_F(CApiBuffers, NullBuffersWithSizesAndWrongSizesAreNamed) {
  auto io = fio();
  io.x = nullptr;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, fmt::format("x is NULL but its size is {}", rc.x.size()));
  io = fio();
  io.y_size = 3;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "y has 3 elements, expected");
  io = fio();
  io.x_size = 0;  // a required buffer not given
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "x has 0 elements, expected");
  io = fio();
  io.hx = nullptr, io.hx_size = 5;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "hx is NULL but its size is 5");
  io = fio();
  io.hx = rc.hx.data(), io.hx_size = rc.hx.size() - 1;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "hx has");
  io = fio();
  io.cy = y.data(), io.cy_size = 2;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "cy has 2 elements");
  io = fio();
  EXPECT_ERROR(rnnjit_forward(infer.get(), nullptr, 12, &io), kInvalid, "weights is NULL but its size is 12");
  EXPECT_ERROR(rnnjit_forward(infer.get(), rc.w.data(), 12, &io), kInvalid, "weights has 12 elements");
  io.x = reinterpret_cast<const float*>(reinterpret_cast<const char*>(rc.x.data()) + 1);
  io.x_size = rc.x.size() - 1;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "x is not aligned to 4 bytes");
  // Scratch and packed weights.
  std::vector<std::byte> tiny(8);
  io = fio();
  io.workspace = nullptr, io.workspace_bytes = 64;
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "workspace is NULL but its size is 64");
  io = fio();
  io.workspace = tiny.data(), io.workspace_bytes = tiny.size();
  EXPECT_ERROR(forward(train.get(), io), kInvalid, "workspace has 8 bytes");
  io = fio();
  io.reserve = tiny.data(), io.reserve_bytes = tiny.size();
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "a reserve was given to an Execution prepared for inference");
  EXPECT_ERROR(forward(train.get(), io), kInvalid, "reserve has 8 bytes");
  io = fio();
  io.packed_weights = tiny.data(), io.packed_weights_bytes = tiny.size();
  EXPECT_ERROR(forward(infer.get(), io), kInvalid, "packed_weights has 8 bytes");
  EXPECT_ERROR(rnnjit_pack_weights(infer.get(), rc.w.data(), rc.w.size(), tiny.data(), tiny.size()), kInvalid,
               "packed weights buffer has 8 bytes");
  EXPECT_ERROR(rnnjit_pack_weights(infer.get(), rc.w.data(), rc.w.size(), nullptr, 100), kInvalid,
               "packed is NULL but its size is 100");
  // Nothing went wrong for good: the executions still run.
  EXPECT_OK(forward(infer.get(), fio()));
  EXPECT_STREQ(rnnjit_last_error(), "");
}

TEST_F(CApiBuffers, CallOrderAndModeAreChecked) {
  rnnjit_backward_data_io_t bd{};
  bd.dy = rc.dy.data(), bd.dy_size = rc.dy.size();
  bd.dx = dx.data(), bd.dx_size = dx.size();
  rnnjit_backward_weights_io_t bw{};
  bw.x = rc.x.data(), bw.x_size = rc.x.size();
  bw.dweights = dw.data(), bw.dweights_size = dw.size();
  EXPECT_ERROR(rnnjit_backward_data(infer.get(), rc.w.data(), rc.w.size(), &bd), kInvalid, "prepared for training");
  EXPECT_ERROR(rnnjit_backward_weights(infer.get(), &bw), kInvalid, "prepared for training");
  EXPECT_ERROR(rnnjit_backward_data(train.get(), rc.w.data(), rc.w.size(), &bd), kInvalid, "forward training call");
  EXPECT_ERROR(rnnjit_backward_weights(train.get(), &bw), kInvalid, "backward_data");
  bd.dx = nullptr;
  EXPECT_ERROR(rnnjit_backward_data(train.get(), rc.w.data(), rc.w.size(), &bd), kInvalid, "dx is NULL");
  bw.dweights_size = 1;
  EXPECT_ERROR(rnnjit_backward_weights(train.get(), &bw), kInvalid, "dweights has 1 elements");

  RnnPtr gru = make_rnn(c_config({CellKind::gru, 5, 7, 1, false}));
  ExecPtr ex = make_execution(gru.get(), 2, 2, RNNJIT_MODE_INFERENCE);
  std::vector<float> gw(static_cast<std::size_t>(WeightLayout({CellKind::gru, 5, 7, 1, false}).total_elements()));
  std::vector<float> gx(2 * 2 * 5), gy(2 * 2 * 7), c(2 * 7);
  rnnjit_forward_io_t io{};
  io.x = gx.data(), io.x_size = gx.size(), io.y = gy.data(), io.y_size = gy.size();
  io.cx = c.data(), io.cx_size = c.size();
  EXPECT_ERROR(rnnjit_forward(ex.get(), gw.data(), gw.size(), &io), kInvalid, "cx is only used by LSTM");
}

// Everything the C++ API computes, the C API computes bit for bit (same executor), and both agree
// with the double-precision reference.
TEST_F(CApiBuffers, MatchesTheCppApiAndTheReference) {
  Execution cpp = Rnn(rc.config).prepare(rc.shape, Mode::training);
  const Tensors expected = rc.run(cpp);

  rnnjit_tensor_sizes_t sizes{};
  ASSERT_OK(rnnjit_execution_tensor_sizes(train.get(), &sizes));
  EXPECT_EQ(sizes.x, rc.x.size());
  EXPECT_EQ(sizes.y, y.size());
  EXPECT_EQ(sizes.state, rc.hx.size());
  EXPECT_EQ(sizes.weights, rc.w.size());
  std::size_t weights_size = 0, offset = 0, block = 0;
  ASSERT_OK(rnnjit_rnn_weights_size(rnn.get(), &weights_size));
  EXPECT_EQ(weights_size, rc.w.size());
  ASSERT_OK(rnnjit_rnn_weight_block(rnn.get(), "bias_hh_l1_reverse", &offset, &block));
  const WeightLayout layout(rc.config);
  const ParamBlock& pb = layout.find("bias_hh_l1_reverse");
  EXPECT_EQ(offset, static_cast<std::size_t>(pb.offset));
  EXPECT_EQ(block, static_cast<std::size_t>(pb.size));

  // Caller-owned workspace, reserve and packed weights.
  std::size_t ws = 0, rs = 0, ps = 0;
  ASSERT_OK(rnnjit_execution_workspace_size(train.get(), &ws));
  ASSERT_OK(rnnjit_execution_reserve_size(train.get(), &rs));
  ASSERT_OK(rnnjit_execution_packed_weights_size(train.get(), &ps));
  EXPECT_EQ(ws, cpp.workspace_size());
  EXPECT_EQ(rs, cpp.reserve_size());
  EXPECT_EQ(ps, cpp.packed_weights_size());
  std::vector<std::byte> workspace(ws), reserve(rs), packed(ps);
  ASSERT_OK(rnnjit_pack_weights(train.get(), rc.w.data(), rc.w.size(), packed.data(), packed.size()));

  Tensors got;
  got.y.resize(y.size());
  got.hy.resize(rc.hx.size());
  got.cy.resize(rc.cx.size());
  rnnjit_forward_io_t io{};
  io.x = rc.x.data(), io.x_size = rc.x.size();
  io.hx = rc.hx.data(), io.hx_size = rc.hx.size();
  io.cx = rc.cx.data(), io.cx_size = rc.cx.size();
  io.y = got.y.data(), io.y_size = got.y.size();
  io.hy = got.hy.data(), io.hy_size = got.hy.size();
  io.cy = got.cy.data(), io.cy_size = got.cy.size();
  io.packed_weights = packed.data(), io.packed_weights_bytes = packed.size();
  io.reserve = reserve.data(), io.reserve_bytes = reserve.size();
  io.workspace = workspace.data(), io.workspace_bytes = workspace.size();
  if (ps > 0) {  // a buffer of the right size that pack_weights did not write is refused
    std::vector<std::byte> unpacked(ps);
    io.packed_weights = unpacked.data();
    EXPECT_ERROR(rnnjit_forward(train.get(), rc.w.data(), rc.w.size(), &io), RNNJIT_STATUS_INVALID_ARGUMENT,
                 "packed_weights were not written by pack_weights");
    io.packed_weights = packed.data();
  }
  ASSERT_OK(rnnjit_forward(train.get(), rc.w.data(), rc.w.size(), &io));

  got.dx.resize(rc.x.size());
  got.dhx.resize(rc.hx.size());
  got.dcx.resize(rc.cx.size());
  rnnjit_backward_data_io_t bd{};
  bd.dy = rc.dy.data(), bd.dy_size = rc.dy.size();
  bd.dhy = rc.dhy.data(), bd.dhy_size = rc.dhy.size();
  bd.dcy = rc.dcy.data(), bd.dcy_size = rc.dcy.size();
  bd.dx = got.dx.data(), bd.dx_size = got.dx.size();
  bd.dhx = got.dhx.data(), bd.dhx_size = got.dhx.size();
  bd.dcx = got.dcx.data(), bd.dcx_size = got.dcx.size();
  bd.reserve = reserve.data(), bd.reserve_bytes = reserve.size();
  bd.workspace = workspace.data(), bd.workspace_bytes = workspace.size();
  ASSERT_OK(rnnjit_backward_data(train.get(), rc.w.data(), rc.w.size(), &bd));

  got.dw.assign(rc.w.size(), 0.0f);
  rnnjit_backward_weights_io_t bw{};
  bw.x = rc.x.data(), bw.x_size = rc.x.size();
  bw.dweights = got.dw.data(), bw.dweights_size = got.dw.size();
  bw.reserve = reserve.data(), bw.reserve_bytes = reserve.size();
  bw.workspace = workspace.data(), bw.workspace_bytes = workspace.size();
  ASSERT_OK(rnnjit_backward_weights(train.get(), &bw));
  EXPECT_EQ(got.y, expected.y);
  EXPECT_EQ(got.hy, expected.hy);
  EXPECT_EQ(got.cy, expected.cy);
  EXPECT_EQ(got.dx, expected.dx);
  EXPECT_EQ(got.dhx, expected.dhx);
  EXPECT_EQ(got.dcx, expected.dcx);
  EXPECT_EQ(got.dw, expected.dw);

  // accumulate: a second backward_weights adds the same gradient again.
  bw.accumulate = 1;
  ASSERT_OK(rnnjit_backward_weights(train.get(), &bw));
  std::vector<float> twice(expected.dw);
  for (float& v : twice) v *= 2.0f;
  expect_close(got.dw, twice, 1e-6, "dw accumulated twice");

  const Tensors ref = rc.reference(true);
  expect_close(expected.y, ref.y, rc.tolerance(false), "y");
  expect_close(expected.dx, ref.dx, rc.tolerance(true), "dx");
  expect_close(expected.dw, ref.dw, rc.tolerance(true), "dw");

  // Inference with the execution's own buffers gives the same y.
  std::vector<float> y2(y.size());
  io = fio();
  io.y = y2.data();
  io.hx = rc.hx.data(), io.hx_size = rc.hx.size();
  io.cx = rc.cx.data(), io.cx_size = rc.cx.size();
  ASSERT_OK(forward(infer.get(), io));
  EXPECT_EQ(y2, expected.y);
}

// Different executions on different threads at once (one of them sharing the network handle);
// last_error is per thread.
TEST(CApi, ExecutionsRunConcurrentlyAndErrorsArePerThread) {
  RnnCase rc({CellKind::gru, 16, 32, 1, true}, {6, 4});
  RnnPtr rnn = make_rnn(c_config(rc.config));
  std::vector<float> expected(static_cast<std::size_t>(y_elements(rc.config, rc.shape)));
  {
    ExecPtr ex = make_execution(rnn.get(), rc.shape.seq_len, rc.shape.batch, RNNJIT_MODE_INFERENCE);
    rnnjit_forward_io_t io{};
    io.x = rc.x.data(), io.x_size = rc.x.size(), io.y = expected.data(), io.y_size = expected.size();
    ASSERT_OK(rnnjit_forward(ex.get(), rc.w.data(), rc.w.size(), &io));
  }
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> ys(kThreads, std::vector<float>(expected.size()));
  std::vector<std::string> errors(kThreads);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      rnnjit_execution_t* ex = nullptr;
      if (rnnjit_execution_create(rnn.get(), rc.shape.seq_len, rc.shape.batch, RNNJIT_MODE_INFERENCE, &ex) !=
          RNNJIT_STATUS_OK) {
        ++failures[static_cast<std::size_t>(t)];
        return;
      }
      rnnjit_forward_io_t io{};
      io.x = rc.x.data(), io.x_size = rc.x.size();
      io.y = ys[static_cast<std::size_t>(t)].data(), io.y_size = expected.size();
      for (int rep = 0; rep < 10; ++rep) {
        if (t % 2 == 1) {  // odd threads fail first: their message must not leak to the others
          rnnjit_forward_io_t bad = io;
          bad.y_size = 1;
          if (rnnjit_forward(ex, rc.w.data(), rc.w.size(), &bad) != RNNJIT_STATUS_INVALID_ARGUMENT)
            ++failures[static_cast<std::size_t>(t)];
          errors[static_cast<std::size_t>(t)] = rnnjit_last_error();
        }
        if (rnnjit_forward(ex, rc.w.data(), rc.w.size(), &io) != RNNJIT_STATUS_OK) ++failures[static_cast<std::size_t>(t)];
        if (std::string(rnnjit_last_error()) != "") ++failures[static_cast<std::size_t>(t)];
      }
      rnnjit_execution_destroy(ex);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[static_cast<std::size_t>(t)], 0) << "thread " << t;
    EXPECT_EQ(ys[static_cast<std::size_t>(t)], expected) << "thread " << t;
    if (t % 2 == 1) {
      EXPECT_NE(errors[static_cast<std::size_t>(t)].find("y has 1 elements"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ONNX operators. What follows is written from the ONNX operator spec (RNN, GRU, LSTM; opset 14),
// not from rnnjit's sources: gate orders LSTM i,o,f,c and GRU z,r,h; W [D, G*H, I],
// R [D, G*H, H], B [D, 2*G*H] = [Wb, Rb]; Y [T, D, N, H] (layout 1: [N, T, D, H]),
// Y_h/Y_c/initial_h/initial_c [D, N, H] (layout 1: [N, D, H]); the second direction is reverse.

// gru: linear_before_reset=1 (PyTorch's exporter); gru_reset_before: 0 (ONNX's default).
// rnn_sigmoid, rnn_leaky: an RNN with activations [Sigmoid] and [LeakyRelu] (alpha kLeakyAlpha).
enum class Op { rnn_tanh, rnn_relu, gru, lstm, gru_reset_before, rnn_sigmoid, rnn_leaky };
constexpr float kLeakyAlpha = 0.3f;
bool is_gru(Op op) { return op == Op::gru || op == Op::gru_reset_before; }

std::string op_name(Op op) {
  switch (op) {
    case Op::rnn_tanh: return "RnnTanh";
    case Op::rnn_relu: return "RnnRelu";
    case Op::gru: return "Gru";
    case Op::gru_reset_before: return "GruResetBefore";
    case Op::lstm: return "Lstm";
    case Op::rnn_sigmoid: return "RnnSigmoid";
    case Op::rnn_leaky: return "RnnLeakyRelu";
  }
  return "?";
}
int gates_of(Op op) { return op == Op::lstm ? 4 : is_gru(op) ? 3 : 1; }

struct OnnxCase {
  Op op = Op::lstm;
  bool bidirectional = false;
  bool reverse = false;                // direction "reverse" (one direction)
  std::vector<std::int32_t> lengths;  // sequence_lens, or empty (not given)
  int layout = 0;
  bool bias = true;
  bool initial = true;  // initial_h (and initial_c) given
  std::int64_t T = 4, N = 3, I = 5, H = 7;
  float clip = 0.0f;          // attribute clip (0: not given)
  bool peepholes = false;     // LSTM input P (attrs.has_peepholes)
  bool input_forget = false;  // LSTM attribute input_forget=1
  std::int64_t D() const { return bidirectional ? 2 : 1; }
};

void PrintTo(const OnnxCase& c, std::ostream* os) {
  *os << fmt::format("{} D={}{} layout={} bias={} initial={} T={} N={} I={} H={}{}{}{}{}", op_name(c.op), c.D(),
                     c.reverse ? " reverse" : "", c.layout, c.bias, c.initial, c.T, c.N, c.I, c.H,
                     c.lengths.empty() ? "" : " with sequence_lens",
                     c.clip > 0.0f ? fmt::format(" clip={}", c.clip) : "", c.peepholes ? " P" : "",
                     c.input_forget ? " input_forget=1" : "");
}

// Attributes of a supported node; `names` and `alphas` keep the activations alive.
struct Attrs {
  rnnjit_onnx_attributes_t a{};
  std::vector<const char*> names;
  std::vector<float> alphas;
};

Attrs attrs_for(const OnnxCase& c) {
  Attrs at;
  at.a.op = c.op == Op::lstm ? RNNJIT_ONNX_LSTM : is_gru(c.op) ? RNNJIT_ONNX_GRU : RNNJIT_ONNX_RNN;
  at.a.hidden_size = c.H;
  at.a.direction = c.bidirectional ? "bidirectional" : c.reverse ? "reverse" : "forward";
  at.a.layout = c.layout;
  at.a.linear_before_reset = c.op == Op::gru ? 1 : 0;
  at.a.has_clip = c.clip > 0.0f ? 1 : 0;
  at.a.clip = c.clip;
  at.a.has_peepholes = c.peepholes ? 1 : 0;
  at.a.input_forget = c.input_forget ? 1 : 0;
  const char* activation = c.op == Op::rnn_relu      ? "Relu"
                           : c.op == Op::rnn_sigmoid ? "Sigmoid"
                           : c.op == Op::rnn_leaky   ? "LeakyRelu"
                                                     : nullptr;
  if (activation) {
    at.names.assign(static_cast<std::size_t>(c.D()), activation);
    at.a.activations = at.names.data();
    at.a.activations_count = at.names.size();
  }
  if (c.op == Op::rnn_leaky) {
    at.alphas.assign(static_cast<std::size_t>(c.D()), kLeakyAlpha);
    at.a.activation_alpha = at.alphas.data();
    at.a.activation_alpha_count = at.alphas.size();
  }
  return at;
}

struct OnnxTensors {
  std::vector<float> W, R, B, X, initial_h, initial_c, P;  // B/initial_*/P empty when not given
};

OnnxTensors random_tensors(const OnnxCase& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.7f, 0.7f);
  auto fill = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& e : v) e = u(rng);
    return v;
  };
  const std::int64_t G = gates_of(c.op), D = c.D();
  OnnxTensors t;
  t.W = fill(D * G * c.H * c.I);
  t.R = fill(D * G * c.H * c.H);
  if (c.bias) t.B = fill(D * 2 * G * c.H);
  t.X = fill(c.T * c.N * c.I);
  if (c.initial) t.initial_h = fill(D * c.N * c.H);
  if (c.initial && c.op == Op::lstm) t.initial_c = fill(D * c.N * c.H);
  if (c.peepholes) t.P = fill(D * 3 * c.H);  // last: the other tensors do not depend on it
  return t;
}

struct OnnxOutputs {
  std::vector<float> Y, Y_h, Y_c;
};

// ONNX's gate names in ONNX's order, and rnnjit's canonical (PyTorch) order by the same names.
std::vector<std::string> onnx_gate_names(Op op) {
  if (op == Op::lstm) return {"i", "o", "f", "c"};
  if (is_gru(op)) return {"z", "r", "h"};
  return {"h"};
}
std::vector<std::string> canonical_gate_names(Op op) {
  if (op == Op::lstm) return {"i", "f", "c", "o"};  // PyTorch's i, f, g, o: g is ONNX's c
  if (is_gru(op)) return {"r", "z", "h"};          // PyTorch's r, z, n: n is ONNX's h
  return {"h"};
}

RnnConfig config_of(const OnnxCase& c) {
  const CellKind cell = c.op == Op::lstm ? CellKind::lstm : c.op == Op::gru ? CellKind::gru
                        : c.op == Op::gru_reset_before ? CellKind::gru_reset_before
                        : c.op == Op::rnn_relu || c.op == Op::rnn_leaky ? CellKind::rnn_relu
                        : c.op == Op::rnn_sigmoid ? CellKind::rnn_sigmoid : CellKind::rnn_tanh;
  return {.cell = cell, .input_size = c.I, .hidden_size = c.H, .num_layers = 1, .bidirectional = c.bidirectional,
          .reverse = c.reverse, .gate_clip = c.clip, .peephole = c.peepholes, .input_forget = c.input_forget,
          .relu_alpha = c.op == Op::rnn_leaky ? kLeakyAlpha : 0.0f};
}

// ONNX index helpers.
std::size_t at3(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t B, std::int64_t C) {
  return static_cast<std::size_t>((a * B + b) * C + c);
}

// Expected outputs: rnnjit::reference (double) on the tensors converted from ONNX's layouts.
OnnxOutputs reference_outputs(const OnnxCase& c, const OnnxTensors& in) {
  const RnnConfig config = config_of(c);
  const WeightLayout layout(config);
  const std::int64_t G = gates_of(c.op), D = c.D(), H = c.H, I = c.I, T = c.T, N = c.N;
  const auto onnx = onnx_gate_names(c.op), canonical = canonical_gate_names(c.op);
  std::vector<double> w(static_cast<std::size_t>(layout.total_elements()), 0.0);
  for (std::int64_t d = 0; d < D; ++d) {
    const std::string suffix = d == 0 ? "" : "_reverse";
    // Canonical gate g, row r of a block = ONNX gate (the same name), row r.
    auto copy_gates = [&](const std::string& name, const float* onnx_block, std::int64_t cols) {
      const ParamBlock& b = layout.find(name + suffix);
      for (std::int64_t g = 0; g < G; ++g) {
        const auto og = std::find(onnx.begin(), onnx.end(), canonical[static_cast<std::size_t>(g)]) - onnx.begin();
        for (std::int64_t r = 0; r < H; ++r)
          for (std::int64_t k = 0; k < cols; ++k)
            w[static_cast<std::size_t>(b.offset + (g * H + r) * cols + k)] = onnx_block[(og * H + r) * cols + k];
      }
    };
    copy_gates("weight_ih_l0", in.W.data() + d * G * H * I, I);
    copy_gates("weight_hh_l0", in.R.data() + d * G * H * H, H);
    if (!in.B.empty()) {
      copy_gates("bias_ih_l0", in.B.data() + d * 2 * G * H, 1);          // Wb
      copy_gates("bias_hh_l0", in.B.data() + d * 2 * G * H + G * H, 1);  // Rb
    }
    if (!in.P.empty()) {  // ONNX P[iof] -> weight_peephole rows i, f, o (by name, like the gates)
      const ParamBlock& b = layout.find("weight_peephole_l0" + suffix);
      const std::vector<std::string> onnx_rows = {"i", "o", "f"}, canonical_rows = {"i", "f", "o"};
      for (std::int64_t g = 0; g < 3; ++g) {
        const auto og = std::find(onnx_rows.begin(), onnx_rows.end(), canonical_rows[static_cast<std::size_t>(g)]) -
                        onnx_rows.begin();
        for (std::int64_t r = 0; r < H; ++r)
          w[static_cast<std::size_t>(b.offset + g * H + r)] = in.P[static_cast<std::size_t>((d * 3 + og) * H + r)];
      }
    }
  }
  std::vector<double> x(static_cast<std::size_t>(T * N * I));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < I; ++i)
        x[at3(t, n, i, N, I)] = c.layout == 0 ? in.X[at3(t, n, i, N, I)] : in.X[at3(n, t, i, T, I)];
  auto state_in = [&](const std::vector<float>& s) {  // ONNX [D, N, H] / [N, D, H] -> rnnjit [D, N, H]
    std::vector<double> out(static_cast<std::size_t>(D * N * H));
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t h = 0; h < H; ++h)
          out[at3(d, n, h, N, H)] = c.layout == 0 ? s[at3(d, n, h, N, H)] : s[at3(n, d, h, D, H)];
    return out;
  };
  const std::vector<double> h0 = in.initial_h.empty() ? std::vector<double>{} : state_in(in.initial_h);
  const std::vector<double> c0 = in.initial_c.empty() ? std::vector<double>{} : state_in(in.initial_c);
  std::vector<double> y(static_cast<std::size_t>(T * N * D * H)), hy(static_cast<std::size_t>(D * N * H)),
      cy(hy.size());
  const bool lstm = c.op == Op::lstm;
  reference::forward<double>(config, {T, N}, w.data(), x.data(), h0.empty() ? nullptr : h0.data(),
                             c0.empty() ? nullptr : c0.data(), y.data(), hy.data(), lstm ? cy.data() : nullptr, nullptr,
                             {.seq_lengths = c.lengths.empty() ? nullptr : c.lengths.data()});
  OnnxOutputs out;
  out.Y.resize(y.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t h = 0; h < H; ++h) {
          const double v = y[static_cast<std::size_t>((t * N + n) * D * H + d * H + h)];
          const std::size_t at = c.layout == 0 ? static_cast<std::size_t>(((t * D + d) * N + n) * H + h)
                                               : static_cast<std::size_t>(((n * T + t) * D + d) * H + h);
          out.Y[at] = static_cast<float>(v);
        }
  auto state_out = [&](const std::vector<double>& s) {
    std::vector<float> o(s.size());
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t h = 0; h < H; ++h)
          o[c.layout == 0 ? at3(d, n, h, N, H) : at3(n, d, h, D, H)] = static_cast<float>(s[at3(d, n, h, N, H)]);
    return o;
  };
  out.Y_h = state_out(hy);
  if (lstm) out.Y_c = state_out(cy);
  return out;
}

// The node through the C API: config, network, weight import, execution, forward.
OnnxOutputs run_c_api(const OnnxCase& c, const OnnxTensors& in, rnnjit_mode_t mode = RNNJIT_MODE_INFERENCE,
                      bool pack = false) {
  const Attrs at = attrs_for(c);
  rnnjit_config_t config{};
  EXPECT_OK(rnnjit_onnx_config(&at.a, c.I, &config));
  RnnPtr rnn = make_rnn(config);
  std::size_t size = 0;
  EXPECT_OK(rnnjit_rnn_weights_size(rnn.get(), &size));
  std::vector<float> w(size, -1.0f);
  EXPECT_OK(rnnjit_onnx_import_weights(&at.a, c.I, in.W.data(), in.W.size(), in.R.data(), in.R.size(),
                                       in.B.empty() ? nullptr : in.B.data(), in.B.size(),
                                       in.P.empty() ? nullptr : in.P.data(), in.P.size(), w.data(), w.size()));
  ExecPtr ex = make_execution(rnn.get(), c.T, c.N, mode);
  std::vector<std::byte> packed;
  const std::int64_t D = c.D();
  OnnxOutputs out;
  out.Y.assign(static_cast<std::size_t>(c.T * D * c.N * c.H), NAN);
  out.Y_h.assign(static_cast<std::size_t>(D * c.N * c.H), NAN);
  if (c.op == Op::lstm) out.Y_c.assign(out.Y_h.size(), NAN);
  rnnjit_onnx_io_t io{};
  io.X = in.X.data(), io.X_size = in.X.size();
  io.initial_h = in.initial_h.data(), io.initial_h_size = in.initial_h.size();
  io.initial_c = in.initial_c.data(), io.initial_c_size = in.initial_c.size();
  io.Y = out.Y.data(), io.Y_size = out.Y.size();
  io.Y_h = out.Y_h.data(), io.Y_h_size = out.Y_h.size();
  io.Y_c = out.Y_c.data(), io.Y_c_size = out.Y_c.size();
  io.sequence_lens = c.lengths.data(), io.sequence_lens_size = c.lengths.size();
  if (pack) {
    std::size_t bytes = 0;
    EXPECT_OK(rnnjit_execution_packed_weights_size(ex.get(), &bytes));
    packed.resize(bytes);
    EXPECT_OK(rnnjit_pack_weights(ex.get(), w.data(), w.size(), packed.data(), packed.size()));
    io.packed_weights = packed.data(), io.packed_weights_bytes = packed.size();
  }
  EXPECT_OK(rnnjit_onnx_forward(ex.get(), &at.a, w.data(), w.size(), &io));
  return out;
}

constexpr double kOnnxTolerance = 2e-5;  // float kernels vs the double reference at these sizes

// (a) ONNX's equations written out for H = I = N = 1, T = 2 (every matrix is one number, so each
// gate has its own weight and any mix-up of gate order or bias halves changes the result).
struct Scalar {
  static double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
};

TEST(CApiOnnxEquations, HandCheckedScalarCases) {
  const std::vector<float> X = {0.9f, -1.3f};  // [T=2, N=1, I=1]
  for (Op op : {Op::rnn_tanh, Op::rnn_relu, Op::rnn_sigmoid, Op::rnn_leaky, Op::gru, Op::gru_reset_before, Op::lstm}) {
    for (bool bidirectional : {false, true}) {
      SCOPED_TRACE(op_name(op) + (bidirectional ? " bidirectional" : " forward"));
      OnnxCase c{.op = op, .bidirectional = bidirectional, .layout = 0, .bias = true, .initial = true,
                 .T = 2, .N = 1, .I = 1, .H = 1};
      const std::int64_t G = gates_of(op), D = c.D();
      OnnxTensors in;
      for (std::int64_t k = 0; k < D * G; ++k) {  // distinct per gate and direction
        in.W.push_back(0.3f + 0.2f * static_cast<float>(k));
        in.R.push_back(-0.5f + 0.3f * static_cast<float>(k));
      }
      for (std::int64_t k = 0; k < D * 2 * G; ++k) in.B.push_back(0.05f * static_cast<float>(k + 1) - 0.2f);
      in.X = X;
      in.initial_h = bidirectional ? std::vector<float>{0.4f, -0.25f} : std::vector<float>{0.4f};
      if (op == Op::lstm) in.initial_c = bidirectional ? std::vector<float>{-0.6f, 0.8f} : std::vector<float>{-0.6f};

      // ONNX equations, per direction d; gate k of direction d: W[d*G + k], Wb = B[d*2G + k], Rb = B[d*2G + G + k].
      std::vector<double> Y(static_cast<std::size_t>(2 * D)), Y_h(static_cast<std::size_t>(D)),
          Y_c(static_cast<std::size_t>(D));
      for (std::int64_t d = 0; d < D; ++d) {
        auto Wg = [&](int k) { return double(in.W[static_cast<std::size_t>(d * G + k)]); };
        auto Rg = [&](int k) { return double(in.R[static_cast<std::size_t>(d * G + k)]); };
        auto Wb = [&](int k) { return double(in.B[static_cast<std::size_t>(d * 2 * G + k)]); };
        auto Rb = [&](int k) { return double(in.B[static_cast<std::size_t>(d * 2 * G + G + k)]); };
        double H = in.initial_h[static_cast<std::size_t>(d)];
        double C = op == Op::lstm ? in.initial_c[static_cast<std::size_t>(d)] : 0.0;
        for (int step = 0; step < 2; ++step) {
          const int t = d == 0 ? step : 1 - step;
          const double x = X[static_cast<std::size_t>(t)];
          if (gates_of(op) == 1) {
            // Ht = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Wbi + Rbi); LeakyRelu(a) = a < 0 ? alpha a : a
            const double a = x * Wg(0) + H * Rg(0) + Wb(0) + Rb(0);
            H = op == Op::rnn_tanh      ? std::tanh(a)
                : op == Op::rnn_relu    ? std::max(0.0, a)
                : op == Op::rnn_sigmoid ? Scalar::sigmoid(a)
                                        : (a < 0 ? double(kLeakyAlpha) * a : a);
          } else if (op == Op::gru) {
            // z, r, h; linear_before_reset = 1:
            // ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh); Ht = (1 - zt) (.) ht + zt (.) Ht-1
            const double z = Scalar::sigmoid(x * Wg(0) + H * Rg(0) + Wb(0) + Rb(0));
            const double r = Scalar::sigmoid(x * Wg(1) + H * Rg(1) + Wb(1) + Rb(1));
            const double h = std::tanh(x * Wg(2) + r * (H * Rg(2) + Rb(2)) + Wb(2));
            H = (1 - z) * h + z * H;
          } else if (op == Op::gru_reset_before) {
            // linear_before_reset = 0: ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh)
            const double z = Scalar::sigmoid(x * Wg(0) + H * Rg(0) + Wb(0) + Rb(0));
            const double r = Scalar::sigmoid(x * Wg(1) + H * Rg(1) + Wb(1) + Rb(1));
            const double h = std::tanh(x * Wg(2) + (r * H) * Rg(2) + Rb(2) + Wb(2));
            H = (1 - z) * h + z * H;
          } else {
            // i, o, f, c; Ct = ft (.) Ct-1 + it (.) ct; Ht = ot (.) h(Ct)
            const double i = Scalar::sigmoid(x * Wg(0) + H * Rg(0) + Wb(0) + Rb(0));
            const double o = Scalar::sigmoid(x * Wg(1) + H * Rg(1) + Wb(1) + Rb(1));
            const double f = Scalar::sigmoid(x * Wg(2) + H * Rg(2) + Wb(2) + Rb(2));
            const double cc = std::tanh(x * Wg(3) + H * Rg(3) + Wb(3) + Rb(3));
            C = f * C + i * cc;
            H = o * std::tanh(C);
          }
          Y[static_cast<std::size_t>(t * D + d)] = H;  // Y [T, D, N=1, H=1]
        }
        Y_h[static_cast<std::size_t>(d)] = H;
        Y_c[static_cast<std::size_t>(d)] = C;
      }
      const OnnxOutputs got = run_c_api(c, in);
      auto f32 = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
      expect_close(got.Y, f32(Y), 1e-6, "Y");
      expect_close(got.Y_h, f32(Y_h), 1e-6, "Y_h");
      if (op == Op::lstm) expect_close(got.Y_c, f32(Y_c), 1e-6, "Y_c");
      // And the reference path below agrees with these equations.
      const OnnxOutputs ref = reference_outputs(c, in);
      expect_close(ref.Y, f32(Y), 1e-6, "reference Y");
    }
  }
}

// (b) Every supported combination against rnnjit::reference on converted tensors.
class CApiOnnxMatrix : public testing::TestWithParam<OnnxCase> {};

TEST_P(CApiOnnxMatrix, MatchesTheReference) {
  const OnnxCase c = GetParam();
  const OnnxTensors in = random_tensors(c, 7);
  const OnnxOutputs expected = reference_outputs(c, in);
  const OnnxOutputs got = run_c_api(c, in);
  expect_close(got.Y, expected.Y, kOnnxTolerance, "Y");
  expect_close(got.Y_h, expected.Y_h, kOnnxTolerance, "Y_h");
  if (c.op == Op::lstm) expect_close(got.Y_c, expected.Y_c, kOnnxTolerance, "Y_c");
  // Training mode and packed weights give the same outputs.
  const OnnxOutputs trained = run_c_api(c, in, RNNJIT_MODE_TRAINING, /*pack=*/false);
  EXPECT_EQ(trained.Y, got.Y);
  const OnnxOutputs packed = run_c_api(c, in, RNNJIT_MODE_INFERENCE, /*pack=*/true);
  EXPECT_EQ(packed.Y, got.Y);
  EXPECT_EQ(packed.Y_h, got.Y_h);
  // Each feature changes the outputs (clip: pre-activations were clamped), so the comparison
  // above could not pass with the feature ignored.
  if (c.clip > 0.0f || c.peepholes || c.input_forget) {
    OnnxCase plain = c;
    plain.clip = 0.0f, plain.peepholes = false, plain.input_forget = false;
    OnnxTensors plain_in = in;
    plain_in.P.clear();
    const OnnxOutputs without = reference_outputs(plain, plain_in);
    double most = 0.0;
    for (std::size_t k = 0; k < without.Y.size(); ++k)
      most = std::max(most, static_cast<double>(std::abs(without.Y[k] - expected.Y[k])));
    EXPECT_GT(most, 1e-2) << "the feature barely changes Y: the case does not test it";
  }
}

std::vector<OnnxCase> matrix() {
  std::vector<OnnxCase> cases;
  for (Op op : {Op::rnn_tanh, Op::rnn_relu, Op::rnn_sigmoid, Op::rnn_leaky, Op::gru, Op::gru_reset_before, Op::lstm})
    for (bool bidirectional : {false, true})
      for (int layout : {0, 1})
        for (bool with : {true, false})  // B and initial states given, or both absent
          cases.push_back({.op = op, .bidirectional = bidirectional, .layout = layout, .bias = with, .initial = with});
  // Direction "reverse", and sequence_lens (one element of length 1, one of T), in both layouts.
  for (Op op : {Op::rnn_tanh, Op::gru, Op::gru_reset_before, Op::lstm})
    for (int layout : {0, 1}) {
      cases.push_back({.op = op, .reverse = true, .layout = layout});
      for (bool bidirectional : {false, true})
        cases.push_back({.op = op, .bidirectional = bidirectional, .lengths = {2, 4, 1}, .layout = layout});
      cases.push_back({.op = op, .reverse = true, .lengths = {4, 1, 3}, .layout = layout});
    }
  // clip (every op), LSTM peepholes and input_forget=1; H = 19 and 5 leave vector tails.
  for (int layout : {0, 1}) {
    for (bool bidirectional : {false, true}) {
      cases.push_back({.op = Op::lstm, .bidirectional = bidirectional, .layout = layout, .H = 19, .peepholes = true});
      cases.push_back({.op = Op::lstm, .bidirectional = bidirectional, .layout = layout, .input_forget = true});
      for (Op op : {Op::lstm, Op::gru, Op::gru_reset_before, Op::rnn_tanh, Op::rnn_relu})
        cases.push_back({.op = op, .bidirectional = bidirectional, .layout = layout, .H = 19, .clip = 0.5f});
    }
    cases.push_back({.op = Op::lstm, .reverse = true, .layout = layout, .H = 19, .peepholes = true});
    cases.push_back({.op = Op::lstm, .bidirectional = true, .lengths = {2, 4, 1}, .layout = layout, .H = 19,
                     .peepholes = true});
    cases.push_back({.op = Op::lstm, .reverse = true, .lengths = {4, 1, 3}, .layout = layout, .H = 5,
                     .clip = 0.5f, .peepholes = true, .input_forget = true});
    cases.push_back({.op = Op::lstm, .bidirectional = true, .lengths = {2, 4, 1}, .layout = layout, .bias = false,
                     .initial = false, .H = 5, .clip = 1.0f, .peepholes = true, .input_forget = true});
    for (Op op : {Op::gru, Op::gru_reset_before})
      cases.push_back({.op = op, .reverse = true, .lengths = {4, 1, 3}, .layout = layout, .H = 5, .clip = 0.5f});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, CApiOnnxMatrix, testing::ValuesIn(matrix()), [](const auto& info) {
  const OnnxCase& c = info.param;
  return fmt::format("{}_{}_layout{}_{}{}{}{}{}{}", op_name(c.op),
                     c.bidirectional ? "Bidirectional" : c.reverse ? "Reverse" : "Forward", c.layout,
                     c.bias ? "WithBiasAndInitialState" : "Defaults", c.lengths.empty() ? "" : "_SequenceLens",
                     c.clip > 0.0f ? "_Clip" : "", c.peepholes ? "_Peepholes" : "",
                     c.input_forget ? "_InputForget" : "", c.H != 7 ? fmt::format("_H{}", c.H) : "");
});

// Fixture of one supported node per op, with helpers to run variations of it.
class CApiOnnx : public testing::Test {
 protected:
  struct Node {
    OnnxCase c;
    Attrs at;
    OnnxTensors in;
    RnnPtr rnn{nullptr, &rnnjit_rnn_destroy};
    ExecPtr ex{nullptr, &rnnjit_execution_destroy};
    std::vector<float> w, Y, Y_h, Y_c;
    rnnjit_onnx_io_t io{};
  };

  static std::unique_ptr<Node> node(Op op, bool bidirectional = true) {
    return node_for({.op = op, .bidirectional = bidirectional, .layout = 0, .bias = true, .initial = true,
                     .T = 3, .N = 2, .I = 4, .H = 5});
  }
  static std::unique_ptr<Node> node_for(const OnnxCase& c) {
    const Op op = c.op;
    auto n = std::make_unique<Node>();
    n->c = c;
    n->at = attrs_for(n->c);
    n->in = random_tensors(n->c, 11);
    rnnjit_config_t config{};
    EXPECT_OK(rnnjit_onnx_config(&n->at.a, n->c.I, &config));
    n->rnn = make_rnn(config);
    std::size_t size = 0;
    EXPECT_OK(rnnjit_rnn_weights_size(n->rnn.get(), &size));
    n->w.resize(size);
    EXPECT_OK(import(*n, n->at.a));
    n->ex = make_execution(n->rnn.get(), n->c.T, n->c.N, RNNJIT_MODE_INFERENCE);
    const std::int64_t D = n->c.D();
    n->Y.resize(static_cast<std::size_t>(n->c.T * D * n->c.N * n->c.H));
    n->Y_h.resize(static_cast<std::size_t>(D * n->c.N * n->c.H));
    if (op == Op::lstm) n->Y_c.resize(n->Y_h.size());
    n->io.X = n->in.X.data(), n->io.X_size = n->in.X.size();
    n->io.initial_h = n->in.initial_h.data(), n->io.initial_h_size = n->in.initial_h.size();
    n->io.initial_c = n->in.initial_c.data(), n->io.initial_c_size = n->in.initial_c.size();
    n->io.Y = n->Y.data(), n->io.Y_size = n->Y.size();
    n->io.Y_h = n->Y_h.data(), n->io.Y_h_size = n->Y_h.size();
    n->io.Y_c = n->Y_c.data(), n->io.Y_c_size = n->Y_c.size();
    return n;
  }
  static rnnjit_status_t import(Node& n, const rnnjit_onnx_attributes_t& a) {
    return rnnjit_onnx_import_weights(&a, n.c.I, n.in.W.data(), n.in.W.size(), n.in.R.data(), n.in.R.size(),
                                      n.in.B.data(), n.in.B.size(), n.in.P.data(), n.in.P.size(), n.w.data(),
                                      n.w.size());
  }
  static rnnjit_status_t run(Node& n, const rnnjit_onnx_attributes_t& a, const rnnjit_onnx_io_t& io) {
    return rnnjit_onnx_forward(n.ex.get(), &a, n.w.data(), n.w.size(), &io);
  }
  // An attribute change must give `status` with a message naming `part` from all three entry points.
  static void expect_attribute_error(Node& n, const rnnjit_onnx_attributes_t& a, rnnjit_status_t status,
                                     const std::string& part) {
    rnnjit_config_t config{};
    EXPECT_ERROR(rnnjit_onnx_config(&a, n.c.I, &config), status, part);
    EXPECT_ERROR(import(n, a), status, part);
    EXPECT_ERROR(run(n, a, n.io), status, part);
  }
};

TEST_F(CApiOnnx, EveryUnsupportedAttributeIsNamed) {
  auto gru = node(Op::gru), lstm = node(Op::lstm), rnn = node(Op::rnn_tanh);
  auto fwd_lstm = node(Op::lstm, /*bidirectional=*/false);
  for (Node* n : {gru.get(), lstm.get(), rnn.get(), fwd_lstm.get()}) {
    SCOPED_TRACE(op_name(n->c.op));
    rnnjit_onnx_attributes_t a = n->at.a;
    const float alpha[] = {0.5f};
    a.activation_alpha = alpha, a.activation_alpha_count = 1;
    expect_attribute_error(*n, a, kUnsupported, "activation_alpha");
    a = n->at.a;
    a.activation_beta = alpha, a.activation_beta_count = 1;
    expect_attribute_error(*n, a, kUnsupported, "activation_beta");
  }
  const char* lstm_acts[] = {"Sigmoid", "Tanh", "Relu"};
  const char* gru_acts[] = {"HardSigmoid", "Tanh", "HardSigmoid", "Tanh"};
  const char* rnn_hard_sigmoid[] = {"HardSigmoid"};
  const char* rnn_mixed[] = {"Tanh", "Relu"};
  struct {
    Node* n;
    const char* const* acts;
    std::size_t count;
  } activation_cases[] = {{fwd_lstm.get(), lstm_acts, 3}, {gru.get(), gru_acts, 4}, {rnn.get(), rnn_hard_sigmoid, 1},
                          {rnn.get(), rnn_mixed, 2}};
  // Every function ONNX names is supported (test_onnx_activations checks them): the network
  // takes them as config.activations.
  for (const auto& ac : activation_cases) {
    rnnjit_onnx_attributes_t a = ac.n->at.a;
    a.activations = ac.acts, a.activations_count = ac.count;
    rnnjit_config_t config{};
    EXPECT_OK(rnnjit_onnx_config(&a, ac.n->c.I, &config));
    int custom = 0;
    for (const auto& direction : config.activations)
      for (const rnnjit_activation_t& f : direction) custom += f.kind != RNNJIT_ACTIVATION_STANDARD;
    EXPECT_GT(custom, 0) << ac.acts[0];
  }
  const char* unknown[] = {"Swish"};
  rnnjit_onnx_attributes_t a = rnn->at.a;
  a.activations = unknown, a.activations_count = 1;
  expect_attribute_error(*rnn, a, kInvalid, "unknown activation 'Swish'");
}

// An element of length 0 has all-zero Y, Y_h and Y_c (onnxruntime's behaviour, compared in
// OnnxRuntime below); the other elements are what they are without it (rows are independent).
TEST_F(CApiOnnx, ZeroLengthSequenceGivesZeros) {
  for (Op op : {Op::gru, Op::lstm, Op::rnn_tanh})
    for (int layout : {0, 1}) {
      auto n = node_for({.op = op, .bidirectional = true, .layout = layout, .bias = true, .initial = true, .T = 3,
                         .N = 3, .I = 4, .H = 5});
      SCOPED_TRACE(fmt::format("{} layout {}", op_name(op), layout));
      std::vector<std::int32_t> seq = {3, 0, 2};
      rnnjit_onnx_io_t io = n->io;
      io.sequence_lens = seq.data(), io.sequence_lens_size = seq.size();
      EXPECT_OK(run(*n, n->at.a, io));
      const std::vector<float> Y = n->Y, Y_h = n->Y_h, Y_c = n->Y_c;
      seq[1] = 1;  // the same run with a length of 1 there: every other row is unchanged
      EXPECT_OK(run(*n, n->at.a, io));
      const std::int64_t T = n->c.T, N = n->c.N, D = n->c.D(), H = n->c.H;
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t d = 0; d < D; ++d)
          for (std::int64_t b = 0; b < N; ++b)
            for (std::int64_t h = 0; h < H; ++h) {
              const std::size_t i = static_cast<std::size_t>(
                  (layout == 1 ? ((b * T + t) * D + d) : ((t * D + d) * N + b)) * H + h);
              EXPECT_EQ(Y[i], b == 1 ? 0.0f : n->Y[i]) << "Y t " << t << " d " << d << " n " << b;
            }
      for (std::int64_t d = 0; d < D; ++d)
        for (std::int64_t b = 0; b < N; ++b)
          for (std::int64_t h = 0; h < H; ++h) {
            const std::size_t i = static_cast<std::size_t>((layout == 1 ? b * D + d : d * N + b) * H + h);
            EXPECT_EQ(Y_h[i], b == 1 ? 0.0f : n->Y_h[i]) << "Y_h d " << d << " n " << b;
            if (op == Op::lstm) {
              EXPECT_EQ(Y_c[i], b == 1 ? 0.0f : n->Y_c[i]) << "Y_c d " << d << " n " << b;
            }
          }
    }
}

// linear_before_reset=0 (ONNX's default) is the reset-before GRU, which the JIT backend also
// trains (its gradients: CApiFeatures.MatchesTheReferenceBackend/GruResetBefore*).
TEST_F(CApiOnnx, ResetBeforeGruRunsInBothModes) {
  auto n = node(Op::gru_reset_before);
  rnnjit_config_t config{};
  EXPECT_OK(rnnjit_onnx_config(&n->at.a, n->c.I, &config));
  EXPECT_EQ(config.cell, RNNJIT_CELL_GRU_RESET_BEFORE);
  EXPECT_OK(run(*n, n->at.a, n->io));
  const std::vector<float> Y = n->Y;
  n->ex = make_execution(n->rnn.get(), n->c.T, n->c.N, RNNJIT_MODE_TRAINING);
  ASSERT_TRUE(n->ex);
  std::fill(n->Y.begin(), n->Y.end(), NAN);
  EXPECT_OK(run(*n, n->at.a, n->io));
  EXPECT_EQ(n->Y, Y);
}

TEST_F(CApiOnnx, InvalidAttributesAndInputsAreNamed) {
  auto lstm = node(Op::lstm), gru = node(Op::gru), rnn = node(Op::rnn_tanh);
  rnnjit_onnx_attributes_t a = lstm->at.a;
  a.op = 7;
  expect_attribute_error(*lstm, a, kInvalid, "attrs.op is 7");
  a = lstm->at.a;
  a.hidden_size = 0;
  expect_attribute_error(*lstm, a, kInvalid, "hidden_size must be positive");
  a = lstm->at.a;
  a.direction = "sideways";
  expect_attribute_error(*lstm, a, kInvalid, "direction must be");
  a = lstm->at.a;
  a.layout = 2;
  expect_attribute_error(*lstm, a, kInvalid, "layout must be 0 or 1, got 2");
  a = lstm->at.a;
  a.linear_before_reset = 1;
  expect_attribute_error(*lstm, a, kInvalid, "linear_before_reset is an attribute of GRU only");
  a = gru->at.a;
  a.input_forget = 1;
  expect_attribute_error(*gru, a, kInvalid, "input_forget is an attribute of LSTM only");
  a = lstm->at.a;
  const char* two[] = {"Sigmoid", "Tanh"};
  a.activations = two, a.activations_count = 2;
  expect_attribute_error(*lstm, a, kInvalid, "activations has 2 entries, expected 3 per direction");
  a.activations = nullptr;
  expect_attribute_error(*lstm, a, kInvalid, "activations is NULL but its size is 2");
  const char* with_null[] = {"Sigmoid", nullptr, "Tanh"};
  a.activations = with_null, a.activations_count = 3;
  expect_attribute_error(*lstm, a, kInvalid, "activations[1] is NULL");
  // The execution was made for other attributes.
  a = lstm->at.a;
  a.hidden_size = 6;
  EXPECT_ERROR(run(*lstm, a, lstm->io), kInvalid, "the execution is for lstm I=4 H=5");
  EXPECT_ERROR(run(*lstm, gru->at.a, lstm->io), kInvalid, "the execution is for lstm");
  // Weight import sizes.
  EXPECT_ERROR(rnnjit_onnx_import_weights(&lstm->at.a, 4, lstm->in.W.data(), 3, lstm->in.R.data(), lstm->in.R.size(),
                                          nullptr, 0, nullptr, 0, lstm->w.data(), lstm->w.size()),
               kInvalid, "W has 3 elements, expected 160");
  EXPECT_ERROR(rnnjit_onnx_import_weights(&lstm->at.a, 4, lstm->in.W.data(), lstm->in.W.size(), nullptr, 200,
                                          nullptr, 0, nullptr, 0, lstm->w.data(), lstm->w.size()),
               kInvalid, "R is NULL but its size is 200");
  EXPECT_ERROR(rnnjit_onnx_import_weights(&lstm->at.a, 4, lstm->in.W.data(), lstm->in.W.size(), lstm->in.R.data(),
                                          lstm->in.R.size(), lstm->in.B.data(), 5, nullptr, 0, lstm->w.data(),
                                          lstm->w.size()),
               kInvalid, "B has 5 elements");
  EXPECT_ERROR(rnnjit_onnx_import_weights(&lstm->at.a, 4, lstm->in.W.data(), lstm->in.W.size(), lstm->in.R.data(),
                                          lstm->in.R.size(), nullptr, 0, nullptr, 0, lstm->w.data(), 9),
               kInvalid, "weights has 9 elements");
  EXPECT_ERROR(rnnjit_onnx_import_weights(&lstm->at.a, 0, lstm->in.W.data(), lstm->in.W.size(), lstm->in.R.data(),
                                          lstm->in.R.size(), nullptr, 0, nullptr, 0, lstm->w.data(), lstm->w.size()),
               kInvalid, "input_size must be positive");
  // Inputs and outputs.
  auto with = [](const rnnjit_onnx_io_t& base, auto change) {
    rnnjit_onnx_io_t io = base;
    change(io);
    return io;
  };
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.X_size = 7; })), kInvalid,
               "X has 7 elements, expected 24 for ONNX LSTM T=3 N=2 I=4 H=5 D=2 layout=0");
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.X = nullptr; })), kInvalid,
               "X is NULL but its size is 24");
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.Y_size = 7; })), kInvalid, "Y has 7 elements");
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.Y_h_size = 7; })), kInvalid, "Y_h has 7");
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.Y_c = nullptr; })), kInvalid, "Y_c is NULL");
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.initial_h_size = 3; })), kInvalid,
               "initial_h has 3");
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [](auto& io) { io.initial_c_size = 3; })), kInvalid,
               "initial_c has 3");
  std::vector<float> P(7);
  EXPECT_ERROR(run(*lstm, lstm->at.a, with(lstm->io, [&](auto& io) { io.P = P.data(), io.P_size = P.size(); })),
               kInvalid, "P has 7 elements, expected 30");
  std::vector<std::int32_t> seq = {3};
  EXPECT_ERROR(
      run(*lstm, lstm->at.a, with(lstm->io, [&](auto& io) { io.sequence_lens = seq.data(), io.sequence_lens_size = 1; })),
      kInvalid, "sequence_lens has 1 elements, expected 2");
  seq = {3, 4};
  EXPECT_ERROR(
      run(*lstm, lstm->at.a, with(lstm->io, [&](auto& io) { io.sequence_lens = seq.data(), io.sequence_lens_size = 2; })),
      kInvalid, "sequence_lens[1] = 4 is outside [0, T = 3]");
  std::vector<float> c(gru->Y_h.size());
  EXPECT_ERROR(run(*gru, gru->at.a, with(gru->io, [&](auto& io) { io.initial_c = c.data(), io.initial_c_size = c.size(); })),
               kInvalid, "initial_c is an input of LSTM only");
  EXPECT_ERROR(run(*rnn, rnn->at.a, with(rnn->io, [&](auto& io) { io.Y_c = c.data(), io.Y_c_size = c.size(); })),
               kInvalid, "Y_c is an output of LSTM only");
  EXPECT_ERROR(run(*rnn, rnn->at.a, with(rnn->io, [&](auto& io) { io.P = c.data(), io.P_size = c.size(); })),
               kInvalid, "P is an input of LSTM only");
  std::vector<std::byte> tiny(4);
  EXPECT_ERROR(run(*rnn, rnn->at.a,
                   with(rnn->io, [&](auto& io) { io.packed_weights = tiny.data(), io.packed_weights_bytes = 4; })),
               kInvalid, "packed_weights has 4 bytes");
  EXPECT_ERROR(rnnjit_onnx_forward(lstm->ex.get(), &lstm->at.a, lstm->w.data(), 3, &lstm->io), kInvalid,
               "weights has 3 elements");
  // Still fine afterwards.
  EXPECT_OK(run(*lstm, lstm->at.a, lstm->io));
}

TEST_F(CApiOnnx, AcceptedSpellingsOfTheDefaults) {
  auto lstm = node(Op::lstm);
  ASSERT_OK(run(*lstm, lstm->at.a, lstm->io));
  const std::vector<float> Y = lstm->Y, Y_h = lstm->Y_h, Y_c = lstm->Y_c;
  auto same_outputs = [&](const rnnjit_onnx_attributes_t& a, const rnnjit_onnx_io_t& io) {
    std::fill(lstm->Y.begin(), lstm->Y.end(), NAN);
    ASSERT_OK(run(*lstm, a, io));
    EXPECT_EQ(lstm->Y, Y);
    EXPECT_EQ(lstm->Y_h, Y_h);
    EXPECT_EQ(lstm->Y_c, Y_c);
  };
  // Explicit default activations, any case, once or per direction.
  const char* once[] = {"sigmoid", "TANH", "Tanh"};
  const char* twice[] = {"Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh"};
  rnnjit_onnx_attributes_t a = lstm->at.a;
  a.activations = once, a.activations_count = 3;
  same_outputs(a, lstm->io);
  a.activations = twice, a.activations_count = 6;
  same_outputs(a, lstm->io);
  a = lstm->at.a;
  a.direction = nullptr;  // "forward" is ONNX's default, but this network is bidirectional
  EXPECT_ERROR(run(*lstm, a, lstm->io), kInvalid, "the execution is for lstm I=4 H=5 L=1 D=2");
  // sequence_lens all equal to T, an all-zero P.
  std::vector<std::int32_t> seq(static_cast<std::size_t>(lstm->c.N), static_cast<std::int32_t>(lstm->c.T));
  std::vector<float> P(static_cast<std::size_t>(2 * 3 * lstm->c.H), 0.0f);
  rnnjit_onnx_io_t io = lstm->io;
  io.sequence_lens = seq.data(), io.sequence_lens_size = seq.size();
  io.P = P.data(), io.P_size = P.size();
  same_outputs(lstm->at.a, io);
  // Outputs are optional: Y_h alone, or nothing at all.
  io = lstm->io;
  io.Y = nullptr, io.Y_size = 0, io.Y_c = nullptr, io.Y_c_size = 0;
  std::fill(lstm->Y_h.begin(), lstm->Y_h.end(), NAN);
  ASSERT_OK(run(*lstm, lstm->at.a, io));
  EXPECT_EQ(lstm->Y_h, Y_h);
  io.Y_h = nullptr, io.Y_h_size = 0;
  EXPECT_OK(run(*lstm, lstm->at.a, io));
  // RNN with Relu maps to rnnjit's rnn_relu; default activations (or Tanh) to rnn_tanh.
  rnnjit_config_t config{};
  const char* relu[] = {"Relu"};
  rnnjit_onnx_attributes_t r{};
  r.op = RNNJIT_ONNX_RNN, r.hidden_size = 3;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  EXPECT_EQ(config.cell, static_cast<int>(RNNJIT_CELL_RNN_TANH));
  EXPECT_EQ(config.direction, static_cast<int>(RNNJIT_DIRECTION_FORWARD));
  EXPECT_EQ(config.num_layers, 1);
  r.activations = relu, r.activations_count = 1;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  EXPECT_EQ(config.cell, static_cast<int>(RNNJIT_CELL_RNN_RELU));
  EXPECT_EQ(config.relu_alpha, 0.0f);
  // Sigmoid maps to rnn_sigmoid; LeakyRelu to rnn_relu with its alpha (ONNX's default 0.01).
  const char* sigmoid[] = {"sigmoid"};
  r.activations = sigmoid;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  EXPECT_EQ(config.cell, static_cast<int>(RNNJIT_CELL_RNN_SIGMOID));
  const char* leaky[] = {"LeakyRelu", "LeakyRelu"};
  r.activations = leaky;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  EXPECT_EQ(config.cell, static_cast<int>(RNNJIT_CELL_RNN_RELU));
  EXPECT_EQ(config.relu_alpha, 0.01f);
  const float alphas[] = {0.25f, 0.25f};
  r.activation_alpha = alphas, r.activation_alpha_count = 1;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  EXPECT_EQ(config.relu_alpha, 0.25f);
  // Bidirectional: an activation and an alpha per direction, the same for both.
  r.direction = "bidirectional";
  r.activations_count = 2, r.activation_alpha_count = 2;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  EXPECT_EQ(config.relu_alpha, 0.25f);
  // As ONNX Runtime reads them: alphas are consumed in the list's order, the default (0.01)
  // where they run out; functions that differ between the directions, or a LeakyRelu below 0,
  // are config.activations of rnn_tanh (the scalar reference's gate kernels).
  const auto expect_leaky = [&](int d, float alpha) {
    EXPECT_EQ(config.cell, static_cast<int>(RNNJIT_CELL_RNN_TANH));
    EXPECT_EQ(config.activations[d][0].kind, static_cast<int>(RNNJIT_ACTIVATION_LEAKY_RELU)) << d;
    EXPECT_EQ(config.activations[d][0].alpha, alpha) << d;
  };
  r.activation_alpha_count = 1;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  expect_leaky(0, 0.25f);
  expect_leaky(1, 0.01f);
  const float differing[] = {0.25f, 0.5f}, negative[] = {-0.5f, -0.5f};
  r.activation_alpha = differing, r.activation_alpha_count = 2;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  expect_leaky(0, 0.25f);
  expect_leaky(1, 0.5f);
  r.activation_alpha = negative;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  expect_leaky(0, -0.5f);
  expect_leaky(1, -0.5f);
  const char* mixed[] = {"LeakyRelu", "Sigmoid"};
  r.activations = mixed, r.activation_alpha_count = 0;
  ASSERT_OK(rnnjit_onnx_config(&r, 2, &config));
  expect_leaky(0, 0.01f);
  EXPECT_EQ(config.activations[1][0].kind, static_cast<int>(RNNJIT_ACTIVATION_SIGMOID));
  const float three[] = {0.1f, 0.2f, 0.3f};
  r.activations = leaky, r.activation_alpha = three, r.activation_alpha_count = 3;
  EXPECT_ERROR(rnnjit_onnx_config(&r, 2, &config), kUnsupported, "activations read only 2 and 0 of them");
}

// ---------------------------------------------------------------------------------------------
// ONNX's clip, P and input_forget: how they map (no Python needed).

// clip, input_forget=1 and the presence of P become gate_clip, input_forget and peephole; every
// value ONNX does not allow is INVALID_ARGUMENT from all three entry points; the configuration
// round-trips (an execution of the network made from rnnjit_onnx_config accepts the attributes).
TEST_F(CApiOnnx, ClipPeepholesAndInputForgetMapToTheConfig) {
  auto lstm = node(Op::lstm), gru = node(Op::gru), rnn = node(Op::rnn_tanh);
  for (Node* n : {lstm.get(), gru.get(), rnn.get()}) {
    SCOPED_TRACE(op_name(n->c.op));
    rnnjit_onnx_attributes_t a = n->at.a;
    for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
      a.has_clip = 1, a.clip = bad;
      expect_attribute_error(*n, a, kInvalid, "clip must be a finite value > 0, got");
    }
    a.has_clip = 0, a.clip = -1.0f;  // ignored unless has_clip
    rnnjit_config_t config{};
    ASSERT_OK(rnnjit_onnx_config(&a, n->c.I, &config));
    EXPECT_EQ(config.gate_clip, 0.0f);
    a.has_clip = 1, a.clip = 1.5f;
    ASSERT_OK(rnnjit_onnx_config(&a, n->c.I, &config));
    EXPECT_EQ(config.gate_clip, 1.5f);
    EXPECT_EQ(config.cell_clip, 0.0f);  // cuDNN's clip of c is another feature
    EXPECT_EQ(config.peephole, 0);
    EXPECT_EQ(config.input_forget, 0);
    if (n->c.op != Op::lstm) {
      a = n->at.a;
      a.has_peepholes = 1;
      expect_attribute_error(*n, a, kInvalid, "has_peepholes: P is an input of LSTM only");
      a = n->at.a;
      a.input_forget = 1;
      expect_attribute_error(*n, a, kInvalid, "input_forget is an attribute of LSTM only");
    }
  }
  rnnjit_onnx_attributes_t a = lstm->at.a;
  a.input_forget = 2;
  expect_attribute_error(*lstm, a, kInvalid, "input_forget must be 0 or 1, got 2");
  a.input_forget = 1, a.has_peepholes = 7, a.has_clip = 1, a.clip = 0.25f;  // any nonzero has_peepholes
  rnnjit_config_t config{};
  ASSERT_OK(rnnjit_onnx_config(&a, lstm->c.I, &config));
  EXPECT_EQ(config.cell, RNNJIT_CELL_LSTM);
  EXPECT_EQ(config.direction, RNNJIT_DIRECTION_BIDIRECTIONAL);
  EXPECT_EQ(config.gate_clip, 0.25f);
  EXPECT_EQ(config.peephole, 1);
  EXPECT_EQ(config.input_forget, 1);
  // The peepholes add a [3, H] block per direction; the C++ layout agrees.
  RnnPtr net = make_rnn(config);
  std::size_t size = 0, offset = 0, block = 0;
  ASSERT_OK(rnnjit_rnn_weights_size(net.get(), &size));
  EXPECT_EQ(size, lstm->w.size() + 2 * 3 * 5);
  const RnnConfig cpp{.cell = CellKind::lstm, .input_size = 4, .hidden_size = 5, .bidirectional = true,
                      .gate_clip = 0.25f, .peephole = true, .input_forget = true};
  const WeightLayout layout(cpp);
  EXPECT_EQ(size, static_cast<std::size_t>(layout.total_elements()));
  ASSERT_OK(rnnjit_rnn_weight_block(net.get(), "weight_peephole_l0_reverse", &offset, &block));
  EXPECT_EQ(offset, static_cast<std::size_t>(layout.find("weight_peephole_l0_reverse").offset));
  EXPECT_EQ(block, 15u);
  // A network made from the C struct by hand (c_config) is the same network.
  RnnPtr by_hand = make_rnn(c_config(cpp));
  std::size_t by_hand_size = 0;
  ASSERT_OK(rnnjit_rnn_weights_size(by_hand.get(), &by_hand_size));
  EXPECT_EQ(by_hand_size, size);
  // Round trip: the execution's C++ configuration equals the one the attributes describe.
  ExecPtr ex = make_execution(net.get(), 3, 2, RNNJIT_MODE_INFERENCE);
  ExecPtr ex_by_hand = make_execution(by_hand.get(), 3, 2, RNNJIT_MODE_INFERENCE);
  std::vector<float> w(size, 0.1f), P(2 * 3 * 5, 0.1f);  // io.P equal to the peepholes in w
  rnnjit_onnx_io_t io = lstm->io;
  io.P = P.data(), io.P_size = P.size();
  EXPECT_OK(rnnjit_onnx_forward(ex.get(), &a, w.data(), w.size(), &io));
  EXPECT_OK(rnnjit_onnx_forward(ex_by_hand.get(), &a, w.data(), w.size(), &io));
  // ... and differs from each attribute set that differs in one of the three.
  for (int which = 0; which < 3; ++which) {
    rnnjit_onnx_attributes_t other = a;
    if (which == 0) other.clip = 0.5f;
    if (which == 1) other.has_peepholes = 0;
    if (which == 2) other.input_forget = 0;
    EXPECT_ERROR(rnnjit_onnx_forward(ex.get(), &other, w.data(), w.size(), &lstm->io), kInvalid,
                 "the execution is for lstm I=4 H=5 L=1 D=2 gate_clip=0.25 peephole input_forget");
  }
}

// P [D, 3*H] in ONNX's row order i, o, f lands in weight_peephole_l0[_reverse] [3, H] as rows
// i, f, o; nothing else of the canonical buffer depends on P.
TEST_F(CApiOnnx, PeepholesAreImportedInCanonicalOrder) {
  const std::int64_t H = 5;
  auto n = node_for({.op = Op::lstm, .bidirectional = true, .layout = 0, .bias = true, .initial = true, .T = 3,
                     .N = 2, .I = 4, .H = H, .peepholes = true});
  std::vector<float> P(static_cast<std::size_t>(2 * 3 * H));
  for (std::size_t k = 0; k < P.size(); ++k)  // P[d][k] = 100 d + k
    P[k] = static_cast<float>(100 * (static_cast<std::int64_t>(k) / (3 * H)) + static_cast<std::int64_t>(k) % (3 * H));
  n->in.P = P;
  std::fill(n->w.begin(), n->w.end(), NAN);
  ASSERT_OK(import(*n, n->at.a));
  for (int d = 0; d < 2; ++d) {
    std::size_t offset = 0, size = 0;
    ASSERT_OK(rnnjit_rnn_weight_block(n->rnn.get(), d ? "weight_peephole_l0_reverse" : "weight_peephole_l0", &offset,
                                      &size));
    ASSERT_EQ(size, static_cast<std::size_t>(3 * H));
    for (std::int64_t h = 0; h < H; ++h) {
      SCOPED_TRACE(fmt::format("direction {} h {}", d, h));
      const float onnx_i = 100.0f * d + h, onnx_o = 100.0f * d + H + h, onnx_f = 100.0f * d + 2 * H + h;
      EXPECT_EQ(n->w[offset + static_cast<std::size_t>(h)], onnx_i);          // row 0: P_i
      EXPECT_EQ(n->w[offset + static_cast<std::size_t>(H + h)], onnx_f);      // row 1: P_f
      EXPECT_EQ(n->w[offset + static_cast<std::size_t>(2 * H + h)], onnx_o);  // row 2: P_o
    }
  }
  EXPECT_EQ(std::count_if(n->w.begin(), n->w.end(), [](float v) { return std::isnan(v); }), 0)
      << "a block was not written";
  // Every other block equals the import of the same node without peepholes.
  auto plain = node(Op::lstm);
  for (const char* name : {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                           "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"}) {
    std::size_t o1 = 0, s1 = 0, o2 = 0, s2 = 0;
    ASSERT_OK(rnnjit_rnn_weight_block(n->rnn.get(), name, &o1, &s1));
    ASSERT_OK(rnnjit_rnn_weight_block(plain->rnn.get(), name, &o2, &s2));
    ASSERT_EQ(s1, s2) << name;
    const auto first = n->w.begin() + static_cast<std::ptrdiff_t>(o1);
    EXPECT_TRUE(std::equal(first, first + static_cast<std::ptrdiff_t>(s1),
                           plain->w.begin() + static_cast<std::ptrdiff_t>(o2)))
        << name;
  }
}

// The io.P rule of rnnjit_onnx_forward, and the import's P checks.
TEST_F(CApiOnnx, PeepholesGoWithTheWeightsNotWithTheRun) {
  const std::int64_t H = 5;
  const OnnxCase c{.op = Op::lstm, .bidirectional = true, .layout = 0, .bias = true, .initial = true, .T = 3,
                   .N = 2, .I = 4, .H = H, .peepholes = true};
  auto peep = node_for(c);
  auto plain = node(Op::lstm);
  ASSERT_EQ(peep->in.P.size(), static_cast<std::size_t>(2 * 3 * H));
  ASSERT_OK(run(*peep, peep->at.a, peep->io));
  expect_close(peep->Y, reference_outputs(c, peep->in).Y, kOnnxTolerance, "Y with peepholes");
  const std::vector<float> Y = peep->Y, Y_h = peep->Y_h, Y_c = peep->Y_c;

  // io.P equal to the imported P: accepted, same outputs.
  rnnjit_onnx_io_t io = peep->io;
  io.P = peep->in.P.data(), io.P_size = peep->in.P.size();
  std::fill(peep->Y.begin(), peep->Y.end(), NAN);
  ASSERT_OK(run(*peep, peep->at.a, io));
  EXPECT_EQ(peep->Y, Y);
  EXPECT_EQ(peep->Y_c, Y_c);
  // Any other P: INVALID_ARGUMENT, nothing written.
  std::vector<float> other = peep->in.P;
  other[12] += 0.5f;  // ONNX row o (k in [H, 2H)) of the first direction
  io.P = other.data();
  std::fill(peep->Y.begin(), peep->Y.end(), -7.0f);
  EXPECT_ERROR(run(*peep, peep->at.a, io), kInvalid,
               fmt::format("ONNX LSTM: P[0][12] = {} differs from the peepholes in the weights ({}): P goes to "
                           "rnnjit_onnx_import_weights (rnnjit_onnx_forward does not read P)",
                           other[12], peep->in.P[12]));
  EXPECT_TRUE(std::all_of(peep->Y.begin(), peep->Y.end(), [](float v) { return v == -7.0f; }));
  std::vector<float> zeros(peep->in.P.size(), 0.0f);
  io.P = zeros.data();
  EXPECT_ERROR(run(*peep, peep->at.a, io), kInvalid, "differs from the peepholes in the weights");
  io.P_size = 7;
  EXPECT_ERROR(run(*peep, peep->at.a, io), kInvalid, "P has 7 elements, expected 30");
  // A network without peepholes: an all-zero P is accepted (it is the same network), another is not.
  io = plain->io;
  io.P = zeros.data(), io.P_size = zeros.size();
  EXPECT_OK(run(*plain, plain->at.a, io));
  zeros[4] = 0.1f;
  EXPECT_ERROR(run(*plain, plain->at.a, io), kInvalid,
               "ONNX LSTM: P is nonzero (P[0][4] = 0.1) but the network has no peepholes: set attrs.has_peepholes "
               "and pass P to rnnjit_onnx_import_weights (rnnjit_onnx_forward does not read P)");
  zeros[4] = 0.0f;
  // Attributes with has_peepholes on the execution of a network without them, and vice versa.
  EXPECT_ERROR(run(*plain, peep->at.a, plain->io), kInvalid,
               "the execution is for lstm I=4 H=5 L=1 D=2, the attributes describe lstm I=4 H=5 L=1 D=2 peephole");
  EXPECT_ERROR(run(*peep, plain->at.a, peep->io), kInvalid, "the execution is for lstm I=4 H=5 L=1 D=2 peephole");

  // The import: has_peepholes needs P; P without has_peepholes must be all zeros; sizes; LSTM only.
  std::vector<float> w(peep->w.size(), -3.0f);
  auto import_with = [&](const rnnjit_onnx_attributes_t& a, const std::vector<float>& P, std::size_t P_size,
                         std::vector<float>& weights) {
    return rnnjit_onnx_import_weights(&a, 4, peep->in.W.data(), peep->in.W.size(), peep->in.R.data(),
                                      peep->in.R.size(), peep->in.B.data(), peep->in.B.size(),
                                      P.empty() ? nullptr : P.data(), P_size, weights.data(), weights.size());
  };
  EXPECT_ERROR(import_with(peep->at.a, {}, 0, w), kInvalid,
               "ONNX LSTM: attrs.has_peepholes is set but P is not given (NULL, 0)");
  EXPECT_ERROR(import_with(peep->at.a, peep->in.P, 29, w), kInvalid, "P has 29 elements, expected 30 for ONNX LSTM");
  EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](float v) { return v == -3.0f; })) << "a rejected import wrote";
  std::vector<float> plain_w(plain->w.size());
  EXPECT_ERROR(import_with(plain->at.a, peep->in.P, peep->in.P.size(), plain_w), kInvalid,
               "but attrs.has_peepholes is not set");
  ASSERT_OK(import_with(plain->at.a, zeros, zeros.size(), plain_w));
  EXPECT_EQ(plain_w, plain->w);
  auto gru = node(Op::gru);
  std::vector<float> gw(gru->w.size());
  EXPECT_ERROR(rnnjit_onnx_import_weights(&gru->at.a, 4, gru->in.W.data(), gru->in.W.size(), gru->in.R.data(),
                                          gru->in.R.size(), nullptr, 0, zeros.data(), zeros.size(), gw.data(),
                                          gw.size()),
               kInvalid, "ONNX GRU: P is an input of LSTM only");
}

// (a') ONNX's equations with clip, P and input_forget=1, for H = I = N = 1, T = 3: clip bounds the
// input of every activation but h(C) (onnxruntime: f, g and the output gate's f; not h), P[iof]
// adds P_i*C_{t-1} and P_f*C_{t-1} to i and f and P_o*C_t to o, input_forget couples f = 1 - i.
TEST(CApiOnnxEquations, HandCheckedScalarCasesWithClipPeepholesAndInputForget) {
  struct Variant {
    Op op;
    float clip;
    bool peepholes, input_forget;
  };
  const Variant variants[] = {{Op::lstm, 0.0f, true, false},  {Op::lstm, 0.0f, false, true},
                              {Op::lstm, 0.6f, false, false}, {Op::lstm, 0.6f, true, true},
                              {Op::gru, 0.6f, false, false},  {Op::gru_reset_before, 0.6f, false, false},
                              {Op::rnn_tanh, 0.6f, false, false}, {Op::rnn_relu, 0.6f, false, false}};
  const std::vector<float> X = {0.9f, -1.3f, 1.7f};  // [T=3, N=1, I=1]
  for (const Variant& v : variants) {
    for (bool bidirectional : {false, true}) {
      const OnnxCase c{.op = v.op, .bidirectional = bidirectional, .layout = 0, .bias = true, .initial = true,
                       .T = 3, .N = 1, .I = 1, .H = 1, .clip = v.clip, .peepholes = v.peepholes,
                       .input_forget = v.input_forget};
      SCOPED_TRACE(testing::PrintToString(c));
      const std::int64_t G = gates_of(v.op), D = c.D();
      OnnxTensors in;
      for (std::int64_t k = 0; k < D * G; ++k) {
        in.W.push_back(0.8f + 0.35f * static_cast<float>(k));
        in.R.push_back(-0.5f + 0.3f * static_cast<float>(k));
      }
      for (std::int64_t k = 0; k < D * 2 * G; ++k) in.B.push_back(0.1f * static_cast<float>(k + 1) - 0.3f);
      in.X = X;
      in.initial_h = bidirectional ? std::vector<float>{0.4f, -0.25f} : std::vector<float>{0.4f};
      if (v.op == Op::lstm) in.initial_c = bidirectional ? std::vector<float>{-0.6f, 0.8f} : std::vector<float>{-0.6f};
      if (v.peepholes) {
        const std::vector<float> p = {0.7f, -0.9f, 0.4f, -0.3f, 0.8f, 0.5f};  // [D, 3]: i, o, f per direction
        in.P.assign(p.begin(), p.begin() + 3 * D);
      }
      int clamped = 0;
      auto cl = [&](double a) {  // ONNX clip: the input of an activation, into [-clip, clip]
        if (v.clip <= 0.0f) return a;
        if (std::abs(a) > v.clip) ++clamped;
        return std::clamp(a, -double(v.clip), double(v.clip));
      };
      std::vector<double> Y(static_cast<std::size_t>(3 * D)), Y_h(static_cast<std::size_t>(D)),
          Y_c(static_cast<std::size_t>(D));
      for (std::int64_t d = 0; d < D; ++d) {
        auto Wg = [&](int k) { return double(in.W[static_cast<std::size_t>(d * G + k)]); };
        auto Rg = [&](int k) { return double(in.R[static_cast<std::size_t>(d * G + k)]); };
        auto Wb = [&](int k) { return double(in.B[static_cast<std::size_t>(d * 2 * G + k)]); };
        auto Rb = [&](int k) { return double(in.B[static_cast<std::size_t>(d * 2 * G + G + k)]); };
        auto Pg = [&](int k) {  // ONNX's i, o, f
          return v.peepholes ? double(in.P[static_cast<std::size_t>(d * 3 + k)]) : 0.0;
        };
        double H = in.initial_h[static_cast<std::size_t>(d)];
        double C = v.op == Op::lstm ? in.initial_c[static_cast<std::size_t>(d)] : 0.0;
        for (int step = 0; step < 3; ++step) {
          const int t = d == 0 ? step : 2 - step;
          const double x = X[static_cast<std::size_t>(t)];
          if (v.op == Op::rnn_tanh || v.op == Op::rnn_relu) {
            const double a = cl(x * Wg(0) + H * Rg(0) + Wb(0) + Rb(0));
            H = v.op == Op::rnn_tanh ? std::tanh(a) : std::max(0.0, a);
          } else if (is_gru(v.op)) {
            const double z = Scalar::sigmoid(cl(x * Wg(0) + H * Rg(0) + Wb(0) + Rb(0)));
            const double r = Scalar::sigmoid(cl(x * Wg(1) + H * Rg(1) + Wb(1) + Rb(1)));
            const double h = v.op == Op::gru ? std::tanh(cl(x * Wg(2) + r * (H * Rg(2) + Rb(2)) + Wb(2)))
                                             : std::tanh(cl(x * Wg(2) + (r * H) * Rg(2) + Rb(2) + Wb(2)));
            H = (1 - z) * h + z * H;
          } else {
            // it = f(Xt*Wi + Ht-1*Ri + Pi (.) Ct-1 + Wbi + Rbi); ft likewise with Pf (or 1 - it);
            // ct = g(...); Ct = ft (.) Ct-1 + it (.) ct; ot = f(... + Po (.) Ct + ...); Ht = ot (.) h(Ct)
            const double i = Scalar::sigmoid(cl(x * Wg(0) + H * Rg(0) + Pg(0) * C + Wb(0) + Rb(0)));
            const double f =
                v.input_forget ? 1.0 - i : Scalar::sigmoid(cl(x * Wg(2) + H * Rg(2) + Pg(2) * C + Wb(2) + Rb(2)));
            const double cc = std::tanh(cl(x * Wg(3) + H * Rg(3) + Wb(3) + Rb(3)));
            C = f * C + i * cc;
            const double o = Scalar::sigmoid(cl(x * Wg(1) + H * Rg(1) + Pg(1) * C + Wb(1) + Rb(1)));
            H = o * std::tanh(C);
          }
          Y[static_cast<std::size_t>(t * D + d)] = H;
        }
        Y_h[static_cast<std::size_t>(d)] = H;
        Y_c[static_cast<std::size_t>(d)] = C;
      }
      if (v.clip > 0.0f) {
        EXPECT_GT(clamped, 0) << "no pre-activation reached the clip: the case does not test it";
      }
      const OnnxOutputs got = run_c_api(c, in);
      auto f32 = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
      expect_close(got.Y, f32(Y), 1e-6, "Y");
      expect_close(got.Y_h, f32(Y_h), 1e-6, "Y_h");
      if (v.op == Op::lstm) expect_close(got.Y_c, f32(Y_c), 1e-6, "Y_c");
      const OnnxOutputs ref = reference_outputs(c, in);
      expect_close(ref.Y, f32(Y), 1e-6, "reference Y");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// gate_clip, peephole, input_forget, no_bias, summed directions and independent stacks through the
// native C API (the JIT backend)
// against the C++ API's reference backend on the same canonical weights, forward and backward.

struct FeatureCase {
  const char* name;
  RnnConfig config;
  Shape shape;
  bool lengths = false;
};

class CApiFeatures : public testing::TestWithParam<FeatureCase> {};

TEST_P(CApiFeatures, MatchesTheReferenceBackend) {
  const FeatureCase& fc = GetParam();
  RnnCase rc(fc.config, fc.shape, 5);
  if (fc.lengths) rc.vary_lengths();
  RnnPtr rnn = make_rnn(c_config(fc.config));
  ASSERT_TRUE(rnn);
  std::size_t size = 0;
  ASSERT_OK(rnnjit_rnn_weights_size(rnn.get(), &size));
  ASSERT_EQ(size, rc.w.size());

  auto c_api_run = [&](rnnjit_mode_t mode) {
    ExecPtr ex = make_execution(rnn.get(), rc.shape.seq_len, rc.shape.batch, mode);
    Tensors t;
    t.y.assign(static_cast<std::size_t>(y_elements(rc.config, rc.shape)), NAN);
    t.hy.assign(rc.hx.size(), NAN);
    t.cy.assign(rc.cx.size(), NAN);
    rnnjit_forward_io_t io{};
    io.x = rc.x.data(), io.x_size = rc.x.size();
    io.hx = rc.hx.data(), io.hx_size = rc.hx.size();
    io.cx = rc.cx.data(), io.cx_size = rc.cx.size();
    io.y = t.y.data(), io.y_size = t.y.size();
    io.hy = t.hy.data(), io.hy_size = t.hy.size();
    io.cy = t.cy.data(), io.cy_size = t.cy.size();
    io.seq_lengths = rc.lengths.data(), io.seq_lengths_size = rc.lengths.size();
    EXPECT_OK(rnnjit_forward(ex.get(), rc.w.data(), rc.w.size(), &io));
    if (mode == RNNJIT_MODE_INFERENCE) return t;
    t.dx.assign(rc.x.size(), NAN);
    t.dhx.assign(rc.hx.size(), NAN);
    t.dcx.assign(rc.cx.size(), NAN);
    t.dw.assign(rc.w.size(), NAN);
    rnnjit_backward_data_io_t bd{};
    bd.dy = rc.dy.data(), bd.dy_size = rc.dy.size();
    bd.dhy = rc.dhy.data(), bd.dhy_size = rc.dhy.size();
    bd.dcy = rc.dcy.data(), bd.dcy_size = rc.dcy.size();
    bd.dx = t.dx.data(), bd.dx_size = t.dx.size();
    bd.dhx = t.dhx.data(), bd.dhx_size = t.dhx.size();
    bd.dcx = t.dcx.data(), bd.dcx_size = t.dcx.size();
    EXPECT_OK(rnnjit_backward_data(ex.get(), rc.w.data(), rc.w.size(), &bd));
    rnnjit_backward_weights_io_t bw{};
    bw.x = rc.x.data(), bw.x_size = rc.x.size();
    bw.dweights = t.dw.data(), bw.dweights_size = t.dw.size();
    EXPECT_OK(rnnjit_backward_weights(ex.get(), &bw));
    return t;
  };

  // The C API runs the JIT backend, bit for bit as the C++ API does.
  Execution jit = Rnn(fc.config).prepare(fc.shape, Mode::inference);
  EXPECT_EQ(jit.backend(), Backend::jit);
  const Tensors c_infer = c_api_run(RNNJIT_MODE_INFERENCE);
  EXPECT_EQ(c_infer.y, rc.run(jit).y);

  Execution ref = Rnn(fc.config, {.backend = Backend::reference}).prepare(fc.shape, Mode::training);
  const Tensors want = rc.run(ref);
  const double tol = rc.tolerance(false), gtol = rc.tolerance(true);
  expect_close(c_infer.y, want.y, tol, "y");
  expect_close(c_infer.hy, want.hy, tol, "hy");
  if (rc.lstm()) expect_close(c_infer.cy, want.cy, tol, "cy");
  // And the reference backend agrees with the double-precision oracle.
  const Tensors oracle = rc.reference(true);
  expect_close(want.y, oracle.y, tol, "reference backend y vs oracle");

  // The features matter: without them (peepholes: with zero peephole weights) y differs.
  RnnCase without = rc;
  without.config.gate_clip = 0.0f, without.config.input_forget = false;
  const WeightLayout layout(fc.config);
  for (const ParamBlock& b : layout.blocks())
    if (b.kind == ParamKind::weight_peephole) std::fill_n(without.w.begin() + b.offset, b.size, 0.0f);
  const Tensors plain = without.reference(false);
  double most = 0.0;
  for (std::size_t k = 0; k < plain.y.size(); ++k)
    most = std::max(most, static_cast<double>(std::abs(plain.y[k] - oracle.y[k])));
  EXPECT_GT(most, 1e-3) << "the features barely change y: the case does not test them";

  const Tensors c_train = c_api_run(RNNJIT_MODE_TRAINING);
  expect_close(c_train.y, want.y, tol, "training y");
  expect_close(c_train.dx, want.dx, gtol, "dx");
  expect_close(c_train.dhx, want.dhx, gtol, "dhx");
  if (rc.lstm()) expect_close(c_train.dcx, want.dcx, gtol, "dcx");
  expect_close(c_train.dw, want.dw, gtol, "dw");
  if (fc.config.peephole) {  // the peephole gradients, block by block
    for (const ParamBlock& b : layout.blocks()) {
      if (b.kind != ParamKind::weight_peephole) continue;
      const auto at = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + b.offset, v.begin() + b.offset + b.size);
      };
      expect_close(at(c_train.dw), at(want.dw), gtol, "grad " + b.name);
      EXPECT_GT(std::abs(at(want.dw)[0]) + std::abs(at(want.dw)[static_cast<std::size_t>(b.size - 1)]), 0.0) << b.name;
    }
  }
}

std::vector<FeatureCase> feature_cases() {
  using C = CellKind;
  return {
      {"LstmPeepholesBidirectionalTwoLayersH19", {.cell = C::lstm, .input_size = 5, .hidden_size = 19, .num_layers = 2,
                                                  .bidirectional = true, .peephole = true}, {5, 3}},
      {"LstmPeepholesGateClipReverseLengths", {.cell = C::lstm, .input_size = 4, .hidden_size = 5, .reverse = true,
                                               .gate_clip = 0.4f, .peephole = true}, {6, 4}, true},
      {"LstmInputForgetBidirectional", {.cell = C::lstm, .input_size = 6, .hidden_size = 17, .bidirectional = true,
                                        .input_forget = true}, {4, 2}},
      {"LstmAllThreeWithProjectionAndCellClipBatchFirst",
       {.cell = C::lstm, .input_size = 3, .hidden_size = 19, .num_layers = 2, .proj_size = 7, .clip = 0.8f,
        .batch_first = true, .gate_clip = 0.5f, .peephole = true, .input_forget = true}, {4, 3}, true},
      {"GruGateClipBidirectionalH19", {.cell = C::gru, .input_size = 5, .hidden_size = 19, .num_layers = 2,
                                       .bidirectional = true, .gate_clip = 0.3f}, {5, 3}},
      {"GruResetBeforeGateClipLengths", {.cell = C::gru_reset_before, .input_size = 5, .hidden_size = 19,
                                         .bidirectional = true, .gate_clip = 0.3f}, {5, 3}, true},
      {"RnnTanhGateClip", {.cell = C::rnn_tanh, .input_size = 7, .hidden_size = 5, .num_layers = 2, .gate_clip = 0.3f},
       {5, 3}},
      {"RnnReluGateClipBidirectional", {.cell = C::rnn_relu, .input_size = 7, .hidden_size = 19, .bidirectional = true,
                                        .gate_clip = 0.2f}, {5, 3}},
      {"LstmNoBiasGateClipBidirectionalLengths", {.cell = C::lstm, .input_size = 5, .hidden_size = 19, .num_layers = 2,
                                                  .bidirectional = true, .gate_clip = 0.4f, .bias = false}, {5, 3}, true},
      {"GruNoBiasGateClip", {.cell = C::gru, .input_size = 5, .hidden_size = 17, .gate_clip = 0.3f, .bias = false},
       {4, 2}},
      {"LstmSumDirectionsGateClipLengths", {.cell = C::lstm, .input_size = 5, .hidden_size = 19, .num_layers = 2,
                                            .bidirectional = true, .gate_clip = 0.4f, .sum_directions = true},
       {5, 3}, true},
      {"GruResetBeforeIndependentStacksGateClipLengths",
       {.cell = C::gru_reset_before, .input_size = 5, .hidden_size = 9, .num_layers = 3, .bidirectional = true,
        .gate_clip = 0.3f, .independent_stacks = true}, {5, 3}, true},
      {"RnnTanhSumDirectionsGateClipBatchFirst", {.cell = C::rnn_tanh, .input_size = 7, .hidden_size = 5,
                                                  .num_layers = 3, .bidirectional = true, .batch_first = true,
                                                  .gate_clip = 0.3f, .sum_directions = true}, {5, 3}},
  };
}

INSTANTIATE_TEST_SUITE_P(GateClipPeepholeInputForget, CApiFeatures, testing::ValuesIn(feature_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// onnxruntime (layout 0) and onnx's own reference evaluator (layout 1, which onnxruntime's CPU
// kernels reject), when Python's onnx and onnxruntime import (not installed by the project:
// skipped otherwise). RNNJIT_TEST_PYTHON selects the interpreter (default python3).

std::string python() {
  const char* p = std::getenv("RNNJIT_TEST_PYTHON");
  return p && *p ? p : "python3";
}

constexpr const char* kOrtScript = R"PY(
import sys, json
import numpy as np
import onnx
from onnx import helper, TensorProto
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

d = sys.argv[1]
spec = json.load(open(d + "/spec.json"))
op, D, H, lstm = spec["op"], spec["D"], spec["H"], spec["op"] == "LSTM"
names = ["X", "W", "R", "B", "sequence_lens" if spec["lengths"] else "", "initial_h"] + (["initial_c"] if lstm else [])
if spec.get("P"):
    names.append("P")
arrays = {n: np.load(d + "/" + n + ".npy") for n in names if n}
attrs = dict(hidden_size=H, direction=spec["direction"], layout=spec["layout"])
if op == "GRU":
    attrs["linear_before_reset"] = spec["linear_before_reset"]
if spec.get("clip") is not None:
    attrs["clip"] = float(spec["clip"])
if spec.get("input_forget"):
    attrs["input_forget"] = 1
if spec.get("activations"):
    attrs["activations"] = spec["activations"]
if spec.get("activation_alpha"):
    attrs["activation_alpha"] = spec["activation_alpha"]
outputs = ["Y", "Y_h"] + (["Y_c"] if lstm else [])
node = helper.make_node(op, names, outputs, **attrs)
graph = helper.make_graph(
    [node], "g",
    [helper.make_tensor_value_info(n, TensorProto.INT32 if a.dtype == np.int32 else TensorProto.FLOAT, list(a.shape))
     for n, a in arrays.items()],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
model.ir_version = min(model.ir_version, 8)
if spec["layout"] == 0:
    results = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(outputs, arrays)
else:
    results = ReferenceEvaluator(model).run(None, arrays)
for n, v in zip(outputs, results):
    np.save(d + "/ort_" + n + ".npy", v.astype(np.float32))
)PY";

// One node through onnx (layout 0: onnxruntime; layout 1: onnx.reference) and through the C API.
void compare_with_onnx(const std::string& py, const std::filesystem::path& dir, const OnnxCase& c) {
  const OnnxTensors in = random_tensors(c, 3);
  const std::int64_t G = gates_of(c.op), D = c.D();
  using Shape = std::vector<std::int64_t>;
  const bool bf = c.layout == 1;
  const Shape x_shape = bf ? Shape{c.N, c.T, c.I} : Shape{c.T, c.N, c.I};
  const Shape state_shape = bf ? Shape{c.N, D, c.H} : Shape{D, c.N, c.H};
  const Shape y_shape = bf ? Shape{c.N, c.T, D, c.H} : Shape{c.T, D, c.N, c.H};
  npy::write_f32((dir / "X.npy").string(), x_shape, in.X);
  npy::write_f32((dir / "W.npy").string(), {D, G * c.H, c.I}, in.W);
  npy::write_f32((dir / "R.npy").string(), {D, G * c.H, c.H}, in.R);
  npy::write_f32((dir / "B.npy").string(), {D, 2 * G * c.H}, in.B);
  npy::write_f32((dir / "initial_h.npy").string(), state_shape, in.initial_h);
  if (c.op == Op::lstm) npy::write_f32((dir / "initial_c.npy").string(), state_shape, in.initial_c);
  if (!c.lengths.empty()) npy::write_i32((dir / "sequence_lens.npy").string(), {c.N}, c.lengths);
  if (c.peepholes) npy::write_f32((dir / "P.npy").string(), {D, 3 * c.H}, in.P);
  const char* op_text = c.op == Op::lstm ? "LSTM" : is_gru(c.op) ? "GRU" : "RNN";
  // The activations and alphas attrs_for gives the C API, as JSON lists (null: none).
  const Attrs at = attrs_for(c);
  std::string activations = "null", alphas = "null";
  if (at.a.activations_count > 0) {
    std::vector<std::string> quoted;
    for (std::size_t i = 0; i < at.a.activations_count; ++i)
      quoted.push_back(fmt::format("\"{}\"", at.a.activations[i]));
    activations = fmt::format("[{}]", fmt::join(quoted, ", "));
  }
  if (at.a.activation_alpha_count > 0)
    alphas = fmt::format("[{:.9g}]", fmt::join(std::span(at.a.activation_alpha, at.a.activation_alpha_count), ", "));
  std::ofstream(dir / "spec.json") << fmt::format(
      R"({{"op": "{}", "D": {}, "H": {}, "direction": "{}", "activations": {}, "activation_alpha": {}, "layout": {}, )"
      R"("lengths": {}, "linear_before_reset": {}, "clip": {}, "P": {}, "input_forget": {}}})",
      op_text, D, c.H, D == 2 ? "bidirectional" : c.reverse ? "reverse" : "forward", activations, alphas, c.layout,
      c.lengths.empty() ? "false" : "true", c.op == Op::gru_reset_before ? 0 : 1,
      c.clip > 0.0f ? fmt::format("{:.9g}", c.clip) : "null", c.peepholes ? "true" : "false", c.input_forget ? 1 : 0);
  const std::string command = fmt::format("{} {} {}", py, (dir / "ort.py").string(), dir.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const OnnxOutputs got = run_c_api(c, in);
  expect_close(got.Y, npy::read_f32((dir / "ort_Y.npy").string(), y_shape), 1e-5, "Y vs onnx");
  expect_close(got.Y_h, npy::read_f32((dir / "ort_Y_h.npy").string(), state_shape), 1e-5, "Y_h vs onnx");
  if (c.op == Op::lstm)
    expect_close(got.Y_c, npy::read_f32((dir / "ort_Y_c.npy").string(), state_shape), 1e-5, "Y_c vs onnx");
}

TEST(CApiOnnxRuntime, MatchesOnnxRuntimeAndOnnxReferenceWhereAvailable) {
  const std::string py = python();
  if (std::system((py + " -c 'import onnx, onnxruntime, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << py << " cannot import onnx and onnxruntime: not compared against them";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    fmt::format("rnnjit_test_c_api_onnx_{}", static_cast<long>(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ort.py") << kOrtScript;
  for (Op op : {Op::rnn_tanh, Op::rnn_relu, Op::rnn_sigmoid, Op::rnn_leaky, Op::gru, Op::gru_reset_before, Op::lstm})
    for (bool bidirectional : {false, true})
      for (int layout : {0, 1}) {
        // onnxruntime has no layout 1, and onnx.reference's RNN knows no activation but Tanh.
        if (gates_of(op) == 1 && op != Op::rnn_tanh && layout == 1) continue;
        SCOPED_TRACE(fmt::format("{} {} layout {}", op_name(op), bidirectional ? "bidirectional" : "forward", layout));
        compare_with_onnx(py, dir, {.op = op, .bidirectional = bidirectional, .layout = layout});
      }
  // Direction "reverse" and sequence_lens (onnxruntime, layout 0).
  for (Op op : {Op::rnn_tanh, Op::gru, Op::gru_reset_before, Op::lstm}) {
    SCOPED_TRACE(op_name(op) + " reverse / sequence_lens");
    compare_with_onnx(py, dir, {.op = op, .reverse = true});
    compare_with_onnx(py, dir, {.op = op, .bidirectional = true, .lengths = {2, 4, 1}});
    compare_with_onnx(py, dir, {.op = op, .reverse = true, .lengths = {4, 1, 3}});
    compare_with_onnx(py, dir, {.op = op, .bidirectional = true, .lengths = {2, 0, 4}});  // length 0: zeros
  }
  std::filesystem::remove_all(dir);
}

// clip (all ops), LSTM P and input_forget=1 against onnxruntime (layout 0), with H = 19 and 5 so
// that the generated kernels' vector tails are exercised.
TEST(CApiOnnxRuntime, ClipPeepholesAndInputForgetMatchOnnxRuntimeWhereAvailable) {
  const std::string py = python();
  if (std::system((py + " -c 'import onnx, onnxruntime, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << py << " cannot import onnx and onnxruntime: not compared against them";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    fmt::format("rnnjit_test_c_api_onnx_features_{}", static_cast<long>(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ort.py") << kOrtScript;
  std::vector<OnnxCase> cases;
  for (bool bidirectional : {false, true}) {
    cases.push_back({.op = Op::lstm, .bidirectional = bidirectional, .H = 19, .peepholes = true});
    cases.push_back({.op = Op::lstm, .bidirectional = bidirectional, .H = 19, .input_forget = true});
    for (Op op : {Op::lstm, Op::gru, Op::gru_reset_before, Op::rnn_tanh, Op::rnn_relu})
      cases.push_back({.op = op, .bidirectional = bidirectional, .H = 19, .clip = 0.5f});
  }
  cases.push_back({.op = Op::lstm, .reverse = true, .H = 19, .peepholes = true});
  cases.push_back({.op = Op::lstm, .bidirectional = true, .lengths = {2, 4, 1}, .H = 19, .peepholes = true});
  cases.push_back({.op = Op::lstm, .reverse = true, .lengths = {4, 1, 3}, .H = 19, .peepholes = true});
  cases.push_back({.op = Op::lstm, .bidirectional = true, .lengths = {2, 4, 1}, .H = 5, .clip = 1.0f,
                   .peepholes = true, .input_forget = true});
  cases.push_back({.op = Op::lstm, .reverse = true, .lengths = {4, 1, 3}, .H = 5, .clip = 0.5f, .peepholes = true,
                   .input_forget = true});
  for (Op op : {Op::gru, Op::gru_reset_before, Op::rnn_tanh, Op::rnn_relu})
    cases.push_back({.op = op, .reverse = true, .lengths = {4, 1, 3}, .H = 5, .clip = 0.5f});
  for (const OnnxCase& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c));
    compare_with_onnx(py, dir, c);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rnnjit::test
