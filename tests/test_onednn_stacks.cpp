// oneDNN as the oracle of independent_stacks: one oneDNN RNN primitive of L bidirectional layers
// (its only form of several layers: each direction a stack of its own, merged at the top by
// bidirectional_concat or bidirectional_sum) against the double-precision reference with
// RnnConfig::independent_stacks, forward, for the cells whose oneDNN weights need no more than a
// gate permutation and a summed bias: vanilla RNN, LSTM and the reset-before GRU (oneDNN's
// vanilla GRU). oneDNN's layers share one weights_layer shape, so its input size is H. The
// reference's gradients of this topology are checked by finite differences in
// test_reference_features, and the JIT against the reference in test_features.
// Without oneDNN at build time the test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/rnn_case.hpp"

#if RNNJIT_TEST_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace rnnjit {
namespace {

using i64 = std::int64_t;

struct StackCase {
  CellKind cell;
  bool sum;
  i64 layers, hidden, seq_len, batch;
};

std::string case_name(const testing::TestParamInfo<StackCase>& info) {
  const StackCase& c = info.param;
  return std::string(to_string(c.cell)) + (c.sum ? "_sum" : "_concat") + "_L" + std::to_string(c.layers) + "_H" +
         std::to_string(c.hidden) + "_T" + std::to_string(c.seq_len) + "_N" + std::to_string(c.batch);
}

void PrintTo(const StackCase& c, std::ostream* os) {
  *os << to_string(c.cell) << (c.sum ? " sum" : " concat") << " L=" << c.layers << " H=" << c.hidden
      << " T=" << c.seq_len << " N=" << c.batch;
}

class OnednnStacks : public testing::TestWithParam<StackCase> {};

#if RNNJIT_TEST_ONEDNN
using dnnl::memory;
using tag = memory::format_tag;

memory::desc md(const memory::dims& dims, tag t) { return memory::desc(dims, memory::data_type::f32, t); }

// oneDNN's gate g is PyTorch's gate torch_gate(g): LSTM i,f,c~,o = i,f,g,o; vanilla GRU
// u,r,o = z,r,n.
int torch_gate(CellKind cell, int g) { return is_gru(cell) && g < 2 ? 1 - g : g; }

// Prim's forward primitive descriptor: oneDNN 2.x builds it from an operation descriptor, 3.x
// (which has none) from the engine and the same arguments.
template <class Prim, class... A>
typename Prim::primitive_desc forward_pd(const dnnl::engine& eng, const A&... args) {
#if DNNL_VERSION_MAJOR >= 3
  return typename Prim::primitive_desc(eng, args...);
#else
  return typename Prim::primitive_desc(typename Prim::desc(args...), eng);
#endif
}

TEST_P(OnednnStacks, ForwardMatchesReference) {
  const StackCase& c = GetParam();
  const i64 L = c.layers, D = 2, H = c.hidden, T = c.seq_len, N = c.batch, G = gate_count(c.cell);
  RnnConfig config{.cell = c.cell, .input_size = H, .hidden_size = H, .num_layers = L, .bidirectional = true};
  config.independent_stacks = true;
  config.sum_directions = c.sum;
  test::RnnCase rc(config, {T, N}, 7);
  const test::Tensors want = rc.reference(false);

  // Canonical weights -> ldigo / ldgo (bias = b_ih + b_hh per gate).
  const WeightLayout layout(config);
  std::vector<float> wl(static_cast<std::size_t>(L * D * H * G * H)), wi(wl.size());
  std::vector<float> b(static_cast<std::size_t>(L * D * G * H));
  for (i64 l = 0; l < L; ++l)
    for (int d = 0; d < D; ++d) {
      const float* w_ih = rc.w.data() + layout.block(l, d, ParamKind::weight_ih).offset;
      const float* w_hh = rc.w.data() + layout.block(l, d, ParamKind::weight_hh).offset;
      const float* b_ih = rc.w.data() + layout.block(l, d, ParamKind::bias_ih).offset;
      const float* b_hh = rc.w.data() + layout.block(l, d, ParamKind::bias_hh).offset;
      const i64 ld = l * D + d;
      for (int g = 0; g < G; ++g)
        for (i64 o = 0; o < H; ++o) {
          const i64 row = torch_gate(c.cell, g) * H + o;
          for (i64 i = 0; i < H; ++i) {
            wl[static_cast<std::size_t>(((ld * H + i) * G + g) * H + o)] = w_ih[row * H + i];
            wi[static_cast<std::size_t>(((ld * H + i) * G + g) * H + o)] = w_hh[row * H + i];
          }
          b[static_cast<std::size_t>((ld * G + g) * H + o)] = b_ih[row] + b_hh[row];
        }
    }

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const auto dir = c.sum ? dnnl::rnn_direction::bidirectional_sum : dnnl::rnn_direction::bidirectional_concat;
  const auto kind = dnnl::prop_kind::forward_inference;
  const memory::desc src = md({T, N, H}, tag::tnc), dst = md({T, N, config.output_size()}, tag::tnc);
  const memory::desc iter = md({L, D, N, H}, tag::ldnc), wl_md = md({L, D, H, G, H}, tag::ldigo);
  const memory::desc wi_md = md({L, D, H, G, H}, tag::ldigo), b_md = md({L, D, G, H}, tag::ldgo);
  std::vector<float> y(want.y.size(), -7.0f), hy(want.hy.size(), -7.0f), cy(rc.cx.size(), -7.0f);
  std::vector<float> x = rc.x, hx = rc.hx, cx = rc.cx;
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC_LAYER, memory(src, eng, x.data())},         {DNNL_ARG_SRC_ITER, memory(iter, eng, hx.data())},
      {DNNL_ARG_WEIGHTS_LAYER, memory(wl_md, eng, wl.data())},  {DNNL_ARG_WEIGHTS_ITER, memory(wi_md, eng, wi.data())},
      {DNNL_ARG_BIAS, memory(b_md, eng, b.data())},             {DNNL_ARG_DST_LAYER, memory(dst, eng, y.data())},
      {DNNL_ARG_DST_ITER, memory(iter, eng, hy.data())}};
  switch (c.cell) {
    case CellKind::rnn_relu:
    case CellKind::rnn_tanh: {
      const auto act = c.cell == CellKind::rnn_relu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_tanh;
      const auto pd =
          forward_pd<dnnl::vanilla_rnn_forward>(eng, kind, act, dir, src, iter, wl_md, wi_md, b_md, dst, iter);
      dnnl::vanilla_rnn_forward(pd).execute(strm, args);
      break;
    }
    case CellKind::lstm: {
      args[DNNL_ARG_SRC_ITER_C] = memory(iter, eng, cx.data());
      args[DNNL_ARG_DST_ITER_C] = memory(iter, eng, cy.data());
      const auto pd =
          forward_pd<dnnl::lstm_forward>(eng, kind, dir, src, iter, iter, wl_md, wi_md, b_md, dst, iter, iter);
      dnnl::lstm_forward(pd).execute(strm, args);
      break;
    }
    case CellKind::gru_reset_before: {
      const auto pd = forward_pd<dnnl::gru_forward>(eng, kind, dir, src, iter, wl_md, wi_md, b_md, dst, iter);
      dnnl::gru_forward(pd).execute(strm, args);
      break;
    }
    default: FAIL() << "no case for " << to_string(c.cell);
  }
  strm.wait();
  // oneDNN's vectorized activations are approximations (a few ulp), on top of float rounding.
  const double tol = std::max(rc.tolerance(false), 1e-5);
  test::expect_close(y, want.y, tol, "y");
  test::expect_close(hy, want.hy, tol, "hy");
  if (c.cell == CellKind::lstm) test::expect_close(cy, want.cy, tol, "cy");
}
#else
TEST_P(OnednnStacks, ForwardMatchesReference) { GTEST_SKIP() << "oneDNN was not found at build time"; }
#endif

INSTANTIATE_TEST_SUITE_P(
    Cells, OnednnStacks,
    testing::Values(StackCase{CellKind::rnn_tanh, false, 3, 17, 4, 3}, StackCase{CellKind::rnn_relu, true, 2, 9, 5, 2},
                    StackCase{CellKind::lstm, false, 3, 17, 4, 3}, StackCase{CellKind::lstm, true, 2, 16, 6, 5},
                    StackCase{CellKind::gru_reset_before, false, 2, 9, 5, 4},
                    StackCase{CellKind::gru_reset_before, true, 3, 17, 3, 2},
                    // One layer: the stacks have nothing to keep apart.
                    StackCase{CellKind::lstm, true, 1, 7, 3, 2}),
    case_name);

}  // namespace
}  // namespace rnnjit
