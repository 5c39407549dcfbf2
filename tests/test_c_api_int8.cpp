// rnnjit.h's rnnjit_config_t.quantize: RNNJIT_QUANTIZE_INT8_DYNAMIC runs the int8 plan (its
// results equal the C++ API's int8 execution's on the same weights, and differ from FP32's
// within the quantization's bound), a training execution is refused with INVALID_ARGUMENT and
// the message, and a value outside the enum is INVALID_ARGUMENT.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rnnjit.h"
#include "rnnjit/rnn.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

rnnjit_config_t small_lstm(std::int32_t quantize) {
  rnnjit_config_t c{};
  c.cell = RNNJIT_CELL_LSTM;
  c.input_size = 24;
  c.hidden_size = 40;
  c.num_layers = 2;
  c.direction = RNNJIT_DIRECTION_FORWARD;
  c.threads = 2;
  c.quantize = quantize;
  return c;
}

std::vector<float> forward(const rnnjit_config_t& config, const test::RnnCase& rc) {
  rnnjit_rnn_t* rnn = nullptr;
  EXPECT_EQ(rnnjit_rnn_create(&config, &rnn), RNNJIT_STATUS_OK) << rnnjit_last_error();
  rnnjit_execution_t* ex = nullptr;
  EXPECT_EQ(rnnjit_execution_create(rnn, rc.shape.seq_len, rc.shape.batch, RNNJIT_MODE_INFERENCE, &ex),
            RNNJIT_STATUS_OK)
      << rnnjit_last_error();
  std::vector<float> y(static_cast<std::size_t>(y_elements(rc.config, rc.shape)));
  rnnjit_forward_io_t io{};
  io.x = rc.x.data();
  io.x_size = rc.x.size();
  io.y = y.data();
  io.y_size = y.size();
  EXPECT_EQ(rnnjit_forward(ex, rc.w.data(), rc.w.size(), &io), RNNJIT_STATUS_OK) << rnnjit_last_error();
  rnnjit_execution_destroy(ex);
  rnnjit_rnn_destroy(rnn);
  return y;
}

TEST(CApiInt8, QuantizeRunsTheInt8Plan) {
  if (!int8_unit()) GTEST_SKIP() << "this CPU has no int8 unit (not even AVX2)";
  const RnnConfig config{.cell = CellKind::lstm, .input_size = 24, .hidden_size = 40, .num_layers = 2};
  const test::RnnCase rc(config, {6, 3});
  const std::vector<float> int8 = forward(small_lstm(RNNJIT_QUANTIZE_INT8_DYNAMIC), rc);
  Execution cpp = Rnn(config, {.threads = 2, .quantize = Quantize::int8_dynamic}).prepare({6, 3}, Mode::inference);
  std::vector<float> want(int8.size());
  cpp.forward(rc.w, {.x = rc.x, .y = want});
  EXPECT_EQ(int8, want);
  const std::vector<float> fp32 = forward(small_lstm(RNNJIT_QUANTIZE_NONE), rc);
  const double diff = test::worst_difference(int8, fp32);
  EXPECT_GT(diff, 1e-5) << "int8 equals FP32: was it quantized?";
  EXPECT_LT(diff, 0.05);
}

TEST(CApiInt8, TrainingAndBadValuesAreInvalidArguments) {
  rnnjit_config_t c = small_lstm(RNNJIT_QUANTIZE_INT8_DYNAMIC);
  rnnjit_rnn_t* rnn = nullptr;
  ASSERT_EQ(rnnjit_rnn_create(&c, &rnn), RNNJIT_STATUS_OK) << rnnjit_last_error();
  rnnjit_execution_t* ex = nullptr;
  EXPECT_EQ(rnnjit_execution_create(rnn, 4, 2, RNNJIT_MODE_TRAINING, &ex), RNNJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(ex, nullptr);
  EXPECT_NE(std::string(rnnjit_last_error()).find("inference only"), std::string::npos) << rnnjit_last_error();
  rnnjit_rnn_destroy(rnn);
  c.quantize = 7;
  rnn = nullptr;
  EXPECT_EQ(rnnjit_rnn_create(&c, &rnn), RNNJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rnnjit_last_error()).find("config.quantize 7 is not an rnnjit_quantize_t"), std::string::npos)
      << rnnjit_last_error();
}

}  // namespace
}  // namespace rnnjit
