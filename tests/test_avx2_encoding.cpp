// This machine runs AVX-512 code in an AVX2 kernel without complaint, but an AVX2-only CPU
// faults on it: every kind of generated AVX2 kernel is disassembled (Zydis,
// x64::foreign_instructions) and must hold no EVEX-encoded instruction, no opmask register, no
// zmm register, no xmm/ymm register 16-31 and nothing beyond AVX2 and FMA. Covered: every gate
// kernel (each cell, both GRU forms and their parts, forward inference and training, backward,
// LSTM peepholes, coupled gates and cell clip, the gate clip, the leaky ReLU, ONNX's activations)
// at every unroll the budgets allow, with and without tails and a partial launch; every GEMM tile
// with every tail kind, beta, streaming stores and prefetch; and every kernel of AVX2 plans,
// inference and training. Generating needs no AVX2: this test runs on any x86-64.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/kernel_desc.hpp"
#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/disassembler.hpp"
#include "runtime/kernel.hpp"

namespace rnnjit::test {
namespace {

constexpr CellKind kCells[] = {CellKind::lstm, CellKind::gru, CellKind::gru_reset_before, CellKind::rnn_tanh,
                               CellKind::rnn_relu, CellKind::rnn_sigmoid};

// Fails with every instruction of `d`'s code that an AVX2 CPU lacks.
void expect_avx2_only(const KernelDesc& d) {
  ASSERT_EQ(d.isa_kind(), Isa::avx2) << kernel_name(d);
  const CompiledKernel k(d);
  ASSERT_FALSE(k.code().empty()) << kernel_name(d) << ": no generated code";
  const std::vector<std::string> bad = x64::foreign_instructions(k.code(), k.text_size(), Isa::avx2);
  EXPECT_TRUE(bad.empty()) << kernel_name(d) << ": " << bad.size() << " instructions an AVX2 CPU lacks, first "
                           << bad.front();
}

// An AVX2 gate kernel of H = 40 (3 rows, h's rows 80 apart) over `cols` units.
KernelDesc avx2_gate_desc(CellKind cell, Pass pass, bool training, int part, int unroll, std::uint32_t cols) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(Isa::avx2);
  d.cell = static_cast<std::uint8_t>(cell);
  d.pass = static_cast<std::uint8_t>(pass);
  d.training = training;
  d.part = static_cast<std::uint8_t>(part);
  d.hidden = 40;
  d.cols = cols;
  d.rows = 3;
  d.ld_h = 80;
  d.unroll = static_cast<std::uint32_t>(unroll);
  return d;
}

std::vector<KernelDesc> gate_kernels() {
  std::vector<KernelDesc> out;
  for (CellKind cell : kCells)
    for (Pass pass : {Pass::forward, Pass::backward})
      for (bool training : {false, true}) {
        if (pass == Pass::backward && training) continue;
        for (int part = 0; part < (cell == CellKind::gru_reset_before ? 2 : 1); ++part)
          for (int unroll = 1; unroll <= max_gate_unroll(cell, pass, Isa::avx2); ++unroll)
            for (std::uint32_t cols : {40u, 37u, 5u})  // whole vectors, a tail, a tail alone
              for (int features = 0; features < 3; ++features) {
                KernelDesc d = avx2_gate_desc(cell, pass, training, part, unroll, cols);
                if (features > 0) d.gate_clip_bits = std::bit_cast<std::uint32_t>(0.7f);
                if (features > 0 && cell == CellKind::lstm) {
                  d.clip_bits = std::bit_cast<std::uint32_t>(3.0f);
                  d.peephole = 1;
                  d.input_forget = features == 2;
                }
                if (features > 0 && cell == CellKind::rnn_relu) d.relu_alpha_bits = std::bit_cast<std::uint32_t>(0.3f);
                if (features == 2 && cell != CellKind::lstm) continue;
                out.push_back(d);
              }
      }
  return out;
}

TEST(Avx2Encoding, GateKernels) {
  const std::vector<KernelDesc> descs = gate_kernels();
  EXPECT_GT(descs.size(), 100u);
  for (const KernelDesc& d : descs) expect_avx2_only(d);
}

// ONNX's activations (forward inference): every function in every role of every cell and part.
TEST(Avx2Encoding, OnnxActivationGateKernels) {
  int count = 0;
  for (CellKind cell : kCells)
    for (int part = 0; part < (cell == CellKind::gru_reset_before ? 2 : 1); ++part)
      for (int unroll = 1; unroll <= max_gate_unroll(cell, Pass::forward, Isa::avx2); ++unroll)
        for (std::uint32_t cols : {40u, 37u})
          for (int kind = 1; kind < kActivationKinds; ++kind) {
            KernelDesc d = avx2_gate_desc(cell, Pass::forward, false, part, unroll, cols);
            d.peephole = cell == CellKind::lstm;
            for (int r = 0; r < activation_role_count(cell); ++r) {
              const auto a = static_cast<Activation>(kind);
              d.activation[r] = static_cast<std::uint8_t>(a);
              if (activation_alphas(a)) d.activation_alpha_bits[r] = std::bit_cast<std::uint32_t>(0.3f + 0.1f * r);
              if (activation_betas(a)) d.activation_beta_bits[r] = std::bit_cast<std::uint32_t>(0.4f);
            }
            if (!d.custom_activations()) continue;
            expect_avx2_only(d);
            ++count;
          }
  EXPECT_GT(count, 200);
}

TEST(Avx2Encoding, GemmTiles) {
  int tiles = 0;
  for (int vectors = 1; gemm_max_rows(vectors, Isa::avx2) >= 1; ++vectors)
    for (int rows = 1; rows <= gemm_max_rows(vectors, Isa::avx2); ++rows)
      for (int tail : {0, 3, 8, 11})
        for (int beta : {0, 1})
          for (bool stream : {false, true}) {
            if (stream && (beta || tail)) continue;
            KernelDesc d;
            d.kind = static_cast<std::uint8_t>(KernelKind::gemm);
            d.isa = static_cast<std::uint8_t>(Isa::avx2);
            d.rows = static_cast<std::uint32_t>(rows);
            d.vectors = static_cast<std::uint8_t>(vectors);
            d.n_tail = static_cast<std::uint8_t>(tail);
            d.beta = static_cast<std::uint8_t>(beta);
            d.stream_c = stream;
            d.unroll = 4;
            d.b_lookahead = beta ? 16 : 0;
            d.next_b_lines = static_cast<std::uint8_t>(beta ? 0 : 2);
            d.a_row_stride = 800;
            d.a_k_stride = 1;
            d.b_k_stride = static_cast<std::uint32_t>(16 * vectors);
            d.c_row_stride = 3200;
            expect_avx2_only(d);
            ++tiles;
          }
  EXPECT_GE(tiles, 6 * 4 * 2);
}

// The kernels AVX2 plans ask for: the planner's blockings and unrolls, whatever they are.
TEST(Avx2Encoding, EveryKernelOfAvx2Plans) {
  int kernels = 0;
  for (CellKind cell : kCells)
    for (Mode mode : {Mode::inference, Mode::training})
      for (const auto& [H, N, bidirectional] : {std::tuple{800, 20, false}, {37, 3, true}, {256, 1, false}}) {
        RnnConfig config{cell, 64, H, 2, bidirectional};
        if (cell == CellKind::lstm) config.proj_size = H / 2;
        const Plan plan = make_plan(config, {5, N}, mode, Isa::avx2, 2);
        for (const KernelDesc& d : plan.kernels) {
          if (d.kind_of() != KernelKind::gate && d.kind_of() != KernelKind::gemm) {
            ADD_FAILURE() << kernel_name(d) << ": an AVX2 plan asked for another kind of kernel";
            continue;
          }
          expect_avx2_only(d);
          ++kernels;
        }
      }
  EXPECT_GT(kernels, 0);
}

// The check itself finds what it must: AVX-512 kernels are full of EVEX and zmm.
TEST(Avx2Encoding, FindsAvx512Code) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(Isa::avx512);
  d.cell = static_cast<std::uint8_t>(CellKind::lstm);
  d.hidden = d.cols = d.ld_h = 40;
  d.rows = 2;
  d.unroll = 2;
  const CompiledKernel k(d);
  const std::vector<std::string> bad = x64::foreign_instructions(k.code(), k.text_size(), Isa::avx2);
  ASSERT_FALSE(bad.empty());
  EXPECT_NE(bad.front().find("EVEX"), std::string::npos) << bad.front();
  EXPECT_TRUE(x64::foreign_instructions(k.code(), k.text_size(), Isa::avx512).empty());
}

}  // namespace
}  // namespace rnnjit::test
