// Tests of the network description (rnnjit/config.hpp) and the canonical weight layout
// (rnnjit/weights.hpp): validation messages, cell names, PyTorch names, shapes and offsets.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "rnnjit/config.hpp"
#include "rnnjit/error.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit {
namespace {

using i64 = std::int64_t;

// Expects fn to throw rnnjit::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "messages are one line: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than rnnjit::Error: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw; expected an error mentioning " << *parts.begin();
}

RnnConfig lstm(i64 input, i64 hidden, i64 layers = 1, bool bidir = false) {
  return {CellKind::lstm, input, hidden, layers, bidir};
}

// ---------------------------------------------------------------------------------------------
// Cells.

TEST(Config, CellNamesRoundTrip) {
  for (CellKind c : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru})
    EXPECT_EQ(parse_cell(to_string(c)), c);
  EXPECT_EQ(to_string(CellKind::rnn_relu), "rnn_relu");
  EXPECT_EQ(to_string(CellKind::rnn_tanh), "rnn_tanh");
  EXPECT_EQ(to_string(CellKind::lstm), "lstm");
  EXPECT_EQ(to_string(CellKind::gru), "gru");
}

TEST(Config, UnknownCellNamesThrow) {
  for (const char* name : {"foo", "", "LSTM", "rnn", "lstm ", "relu"})
    expect_error([&] { parse_cell(name); },
                 {std::string("unknown cell '") + name + "'", "rnn_relu", "rnn_tanh", "lstm", "gru"});
}

TEST(Config, GateCounts) {
  EXPECT_EQ(gate_count(CellKind::rnn_relu), 1);
  EXPECT_EQ(gate_count(CellKind::rnn_tanh), 1);
  EXPECT_EQ(gate_count(CellKind::lstm), 4);
  EXPECT_EQ(gate_count(CellKind::gru), 3);
  EXPECT_EQ(lstm(3, 5).gates(), 4);
}

// ---------------------------------------------------------------------------------------------
// Validation.

TEST(Config, ValidConfigsPass) {
  EXPECT_NO_THROW(validate(lstm(1, 1)));
  EXPECT_NO_THROW(validate(lstm(800, 800, 4, true)));
  EXPECT_NO_THROW(validate(RnnConfig{CellKind::gru, 7, 3, 2, true}, Shape{1, 1}));
  EXPECT_NO_THROW(validate(RnnConfig{CellKind::rnn_relu, 1, 1, 1, false}, Shape{1000, 64}));
}

TEST(Config, NonPositiveSizesNameFieldAndValue) {
  expect_error([] { validate(lstm(0, 5)); }, {"input_size", "0"});
  expect_error([] { validate(lstm(-3, 5)); }, {"input_size", "-3"});
  expect_error([] { validate(lstm(5, 0)); }, {"hidden_size", "0"});
  expect_error([] { validate(lstm(5, -7)); }, {"hidden_size", "-7"});
  expect_error([] { validate(lstm(5, 5, 0)); }, {"num_layers", "0"});
  expect_error([] { validate(lstm(5, 5, -2)); }, {"num_layers", "-2"});
  expect_error([] { validate(lstm(5, 5), Shape{0, 4}); }, {"seq_len", "0"});
  expect_error([] { validate(lstm(5, 5), Shape{-1, 4}); }, {"seq_len", "-1"});
  expect_error([] { validate(lstm(5, 5), Shape{3, 0}); }, {"batch", "0"});
  expect_error([] { validate(lstm(5, 5), Shape{3, -9}); }, {"batch", "-9"});
  // The shape overload validates the config too.
  expect_error([] { validate(lstm(5, 0), Shape{3, 4}); }, {"hidden_size", "0"});
}

TEST(Config, UnknownCellKindThrows) {
  RnnConfig c = lstm(4, 4);
  c.cell = static_cast<CellKind>(7);
  expect_error([&] { validate(c); }, {"cell", "7"});
}

TEST(Config, OverflowingSizesThrow) {
  const i64 big = i64{1} << 40;
  // Beyond what a BLAS int can index.
  expect_error([&] { validate(lstm(big, 4)); }, {"input_size", std::to_string(big)});
  expect_error([&] { validate(lstm(4, big)); }, {"hidden_size", std::to_string(big)});
  expect_error([&] { validate(lstm(4, INT64_MAX)); }, {"hidden_size"});
  expect_error([&] { validate(lstm(4, 4, big)); }, {"num_layers"});
  expect_error([&] { validate(lstm(4, 4), Shape{big, 1}); }, {"seq_len"});
  expect_error([&] { validate(lstm(4, 4), Shape{1, INT64_MAX}); }, {"batch"});
  // Each size fits, but G*H does not fit a BLAS dimension.
  expect_error([] { validate(lstm(4, i64{1} << 30)); }, {"gates*hidden_size"});
  // Each size fits, but the weight buffer would be too large.
  EXPECT_THROW(validate(lstm(i64{1} << 30, i64{1} << 20)), Error);
  EXPECT_THROW(validate(RnnConfig{CellKind::gru, 1 << 16, 1 << 16, 1000, true}), Error);
  // Each size fits, but T*N or the activations do not.
  expect_error([] { validate(lstm(4, 4), Shape{i64{1} << 20, i64{1} << 20}); }, {"seq_len*batch"});
  EXPECT_THROW(validate(lstm(1 << 20, 4), Shape{1 << 15, 1 << 10}), Error);
  ASSERT_NO_THROW(validate(lstm(4, 1024, 1024)));
  expect_error([] { validate(lstm(4, 1024, 1024), Shape{1 << 12, 1 << 8}); }, {"reserve"});
  expect_error([] { validate(lstm(4, 4, 2000)); }, {"num_layers", "2000"});
  // A weight layout validates its config.
  EXPECT_THROW(WeightLayout(lstm(4, i64{1} << 30)), Error);
  expect_error([] { WeightLayout layout(lstm(4, 0)); }, {"hidden_size", "0"});
}

TEST(Config, DescribeAndElementCounts) {
  const RnnConfig c = lstm(800, 700, 3, true);
  EXPECT_EQ(describe(c), "lstm I=800 H=700 L=3 D=2");
  EXPECT_EQ(describe(RnnConfig{CellKind::rnn_tanh, 1, 2, 1, false}), "rnn_tanh I=1 H=2 L=1 D=1");
  const Shape s{11, 5};
  EXPECT_EQ(x_elements(c, s), 11 * 5 * 800);
  EXPECT_EQ(y_elements(c, s), 11 * 5 * 2 * 700);
  EXPECT_EQ(state_elements(c, s), 3 * 2 * 5 * 700);
  EXPECT_EQ(c.directions(), 2);
  EXPECT_EQ(c.layer_input_size(0), 800);
  EXPECT_EQ(c.layer_input_size(1), 1400);
  EXPECT_EQ(c.layer_input_size(2), 1400);
}

// ---------------------------------------------------------------------------------------------
// Weight layout.

TEST(WeightLayout, ParamNames) {
  EXPECT_EQ(param_name(ParamKind::weight_ih, 0, 0), "weight_ih_l0");
  EXPECT_EQ(param_name(ParamKind::weight_hh, 3, 0), "weight_hh_l3");
  EXPECT_EQ(param_name(ParamKind::bias_ih, 1, 1), "bias_ih_l1_reverse");
  EXPECT_EQ(param_name(ParamKind::bias_hh, 12, 1), "bias_hh_l12_reverse");
}

// LSTM, I=5, H=3, L=2, bidirectional: PyTorch's state_dict order, shapes and contiguous offsets.
TEST(WeightLayout, LstmTwoLayersBidirectional) {
  const RnnConfig c = lstm(5, 3, 2, true);
  const WeightLayout layout(c);
  EXPECT_EQ(layout.config(), c);
  struct Expected {
    const char* name;
    ParamKind kind;
    i64 layer;
    int dir;
    std::vector<i64> shape;
  };
  const i64 gh = 4 * 3;
  const std::vector<Expected> expected = {
      {"weight_ih_l0", ParamKind::weight_ih, 0, 0, {gh, 5}},
      {"weight_hh_l0", ParamKind::weight_hh, 0, 0, {gh, 3}},
      {"bias_ih_l0", ParamKind::bias_ih, 0, 0, {gh}},
      {"bias_hh_l0", ParamKind::bias_hh, 0, 0, {gh}},
      {"weight_ih_l0_reverse", ParamKind::weight_ih, 0, 1, {gh, 5}},
      {"weight_hh_l0_reverse", ParamKind::weight_hh, 0, 1, {gh, 3}},
      {"bias_ih_l0_reverse", ParamKind::bias_ih, 0, 1, {gh}},
      {"bias_hh_l0_reverse", ParamKind::bias_hh, 0, 1, {gh}},
      {"weight_ih_l1", ParamKind::weight_ih, 1, 0, {gh, 6}},  // I_1 = D*H
      {"weight_hh_l1", ParamKind::weight_hh, 1, 0, {gh, 3}},
      {"bias_ih_l1", ParamKind::bias_ih, 1, 0, {gh}},
      {"bias_hh_l1", ParamKind::bias_hh, 1, 0, {gh}},
      {"weight_ih_l1_reverse", ParamKind::weight_ih, 1, 1, {gh, 6}},
      {"weight_hh_l1_reverse", ParamKind::weight_hh, 1, 1, {gh, 3}},
      {"bias_ih_l1_reverse", ParamKind::bias_ih, 1, 1, {gh}},
      {"bias_hh_l1_reverse", ParamKind::bias_hh, 1, 1, {gh}},
  };
  ASSERT_EQ(layout.blocks().size(), expected.size());
  i64 offset = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const ParamBlock& b = layout.blocks()[i];
    const Expected& e = expected[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(b.name, e.name);
    EXPECT_EQ(b.kind, e.kind);
    EXPECT_EQ(b.layer, e.layer);
    EXPECT_EQ(b.direction, e.dir);
    EXPECT_EQ(b.shape, e.shape);
    EXPECT_EQ(b.size, std::accumulate(e.shape.begin(), e.shape.end(), i64{1}, std::multiplies<>()));
    EXPECT_EQ(b.offset, offset) << "blocks are contiguous, in order";
    offset += b.size;
    EXPECT_EQ(&layout.block(e.layer, e.dir, e.kind), &b);
    EXPECT_EQ(&layout.find(e.name), &b);
  }
  EXPECT_EQ(layout.total_elements(), offset);
  // Per direction: layer 0 G*H*(I+H+2), layer 1 G*H*(2H+H+2).
  EXPECT_EQ(layout.total_elements(), 2 * gh * (5 + 3 + 2) + 2 * gh * (6 + 3 + 2));
}

TEST(WeightLayout, OtherCellsGateCounts) {
  for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::gru}) {
    const WeightLayout layout(RnnConfig{cell, 7, 4, 1, false});
    const i64 gh = gate_count(cell) * 4;
    ASSERT_EQ(layout.blocks().size(), 4u);
    EXPECT_EQ(layout.find("weight_ih_l0").shape, (std::vector<i64>{gh, 7}));
    EXPECT_EQ(layout.find("weight_hh_l0").shape, (std::vector<i64>{gh, 4}));
    EXPECT_EQ(layout.find("bias_hh_l0").shape, (std::vector<i64>{gh}));
    EXPECT_EQ(layout.total_elements(), gh * (7 + 4 + 2));
  }
}

// Summed directions: y and the input of every layer above the first are S wide, not 2S.
TEST(Config, SumDirectionsNarrowsTheOutput) {
  RnnConfig c = lstm(7, 5, 2, true);
  c.proj_size = 3;
  c.sum_directions = true;
  EXPECT_EQ(c.output_size(), 3);
  EXPECT_EQ(c.layer_input_size(0), 7);
  EXPECT_EQ(c.layer_input_size(1), 3);
  EXPECT_EQ(y_elements(c, Shape{4, 2}), 4 * 2 * 3);
  EXPECT_EQ(state_elements(c, Shape{4, 2}), 2 * 2 * 2 * 3);  // both directions keep their own h
  EXPECT_EQ(describe(c), "lstm I=7 H=5 L=2 D=2 P=3 sum_directions");
  const WeightLayout layout(c);
  EXPECT_EQ(layout.find("weight_ih_l1").shape, (std::vector<i64>{20, 3}));
  EXPECT_EQ(layout.find("weight_ih_l1_reverse").shape, (std::vector<i64>{20, 3}));
  c.sum_directions = false;
  EXPECT_EQ(c.output_size(), 6);
  EXPECT_EQ(WeightLayout(c).find("weight_ih_l1").shape, (std::vector<i64>{20, 6}));
  c.sum_directions = true;
  c.bidirectional = false;
  expect_error([&] { validate(c); }, {"sum_directions applies to bidirectional networks"});
}

// Independent stacks: every layer above the first reads S columns (its own direction's h); the
// layers below the top keep both directions' h side by side, and only the top merges them.
TEST(Config, IndependentStacksReadTheirOwnDirection) {
  RnnConfig c = lstm(7, 5, 3, true);
  c.independent_stacks = true;
  EXPECT_EQ(c.layer_input_size(0), 7);
  EXPECT_EQ(c.layer_input_size(1), 5);
  EXPECT_EQ(c.layer_input_size(2), 5);
  EXPECT_EQ(c.layer_output_size(0), 10);
  EXPECT_EQ(c.layer_output_size(2), 10);
  EXPECT_EQ(c.layer_input_stride(0), 7);
  EXPECT_EQ(c.layer_input_stride(1), 10);
  EXPECT_EQ(c.layer_input_column(0, 1), 0);
  EXPECT_EQ(c.layer_input_column(1, 0), 0);
  EXPECT_EQ(c.layer_input_column(1, 1), 5);
  EXPECT_FALSE(c.sums_output(2));
  c.sum_directions = true;
  EXPECT_EQ(c.layer_output_size(1), 10);  // not summed below the top
  EXPECT_FALSE(c.sums_output(1));
  EXPECT_EQ(c.layer_output_size(2), 5);
  EXPECT_TRUE(c.sums_output(2));
  EXPECT_EQ(c.output_size(), 5);
  EXPECT_EQ(describe(c), "lstm I=7 H=5 L=3 D=2 sum_directions independent_stacks");
  EXPECT_EQ(WeightLayout(c).find("weight_ih_l2_reverse").shape, (std::vector<i64>{20, 5}));
  c.bidirectional = false;
  c.sum_directions = false;
  expect_error([&] { validate(c); }, {"independent_stacks applies to bidirectional networks"});
}

// PyTorch's bias=False: the same blocks less the biases, so its state_dict names match.
TEST(WeightLayout, NoBiasHasNoBiasBlocks) {
  RnnConfig c = lstm(5, 3, 2, true);
  const WeightLayout with(c);
  c.bias = false;
  const WeightLayout without(c);
  std::vector<std::string> expected;
  for (const ParamBlock& b : with.blocks())
    if (b.kind != ParamKind::bias_ih && b.kind != ParamKind::bias_hh) expected.push_back(b.name);
  std::vector<std::string> names;
  for (const ParamBlock& b : without.blocks()) names.push_back(b.name);
  EXPECT_EQ(names, expected);
  const i64 gh = 4 * 3;
  EXPECT_EQ(without.total_elements(), with.total_elements() - 2 * 2 * 2 * gh);
  EXPECT_TRUE(with.has(ParamKind::bias_ih));
  EXPECT_FALSE(without.has(ParamKind::bias_ih));
  EXPECT_FALSE(without.has(ParamKind::bias_hh));
  EXPECT_THROW(without.block(0, 0, ParamKind::bias_hh), Error);
  expect_error([&] { without.find("bias_ih_l0"); }, {"no parameter named 'bias_ih_l0'", "no_bias"});
}

TEST(WeightLayout, UnknownNamesThrow) {
  const RnnConfig c = lstm(5, 3, 2, false);
  const WeightLayout layout(c);
  for (const char* name : {"weight_ih_l2", "weight_ih_l0_reverse", "bias", "", "weight_ih_l0 ", "Weight_ih_l0",
                           "weight_hr_l0"})
    expect_error([&] { layout.find(name); }, {std::string("no parameter named '") + name + "'", describe(c)});
  EXPECT_THROW(layout.block(2, 0, ParamKind::weight_ih), Error);
  EXPECT_THROW(layout.block(-1, 0, ParamKind::weight_ih), Error);
  EXPECT_THROW(layout.block(0, 1, ParamKind::weight_ih), Error);  // unidirectional
}

TEST(WeightLayout, ViewChecksBufferSize) {
  const WeightLayout layout(lstm(5, 3, 2, true));
  std::vector<float> w(static_cast<std::size_t>(layout.total_elements()));
  std::iota(w.begin(), w.end(), 0.0f);
  const ParamBlock& b = layout.find("weight_hh_l1_reverse");
  std::span<float> v = layout.view(std::span<float>(w), "weight_hh_l1_reverse");
  EXPECT_EQ(static_cast<i64>(v.size()), b.size);
  EXPECT_EQ(v.data(), w.data() + b.offset);
  EXPECT_EQ(v[0], static_cast<float>(b.offset));
  // Views of const buffers work too.
  const std::vector<float>& cw = w;
  std::span<const float> cv = layout.view(std::span<const float>(cw), "bias_ih_l0");
  EXPECT_EQ(cv.data(), cw.data() + layout.find("bias_ih_l0").offset);

  std::vector<float> small(w.size() - 1), large(w.size() + 1);
  expect_error([&] { layout.view(std::span<float>(small), "bias_ih_l0"); },
               {std::to_string(small.size()), std::to_string(w.size())});
  expect_error([&] { layout.view(std::span<float>(large), "bias_ih_l0"); },
               {std::to_string(large.size()), std::to_string(w.size())});
  EXPECT_THROW(layout.view(std::span<float>(w), "bias_ih_l2"), Error);
}

}  // namespace
}  // namespace rnnjit
