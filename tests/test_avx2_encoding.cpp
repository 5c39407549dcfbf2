// This machine runs AVX-512 code in an AVX2 kernel without complaint, but an AVX2-only CPU
// faults on it: every kind of generated AVX2 kernel is disassembled (Zydis,
// x64::foreign_instructions) and must hold no EVEX-encoded instruction, no opmask register, no
// zmm register, no xmm/ymm register 16-31 and nothing beyond AVX2 and FMA. Covered: every gate
// kernel (each cell, both GRU forms and their parts, forward inference and training, backward,
// LSTM peepholes, coupled gates and cell clip, the gate clip, the leaky ReLU, ONNX's activations)
// at every unroll the budgets allow, with and without tails and a partial launch; every GEMM tile
// with every tail kind, beta, streaming stores and prefetch; every int8 GEMM tile of the avx2
// unit; and every kernel of AVX2 plans, inference, training and int8 inference. The avx_vnni
// unit's int8 tiles (which this machine cannot run) must be the avx2 unit's, instruction for
// instruction, with each dot step one VEX-encoded ymm vpdpbusd, the only instruction beyond AVX2.
// Generating needs no AVX2: this test runs on any x86-64.
#include <gtest/gtest.h>

#include <bit>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/int8_unit.hpp"
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

// An int8 GEMM tile of an AVX2 unit (vnni_gemm on isa avx2).
KernelDesc int8_tile(Int8Unit unit, int rows, int vectors, int tail, int beta) {
  KernelDesc d;
  d.kind = static_cast<std::uint8_t>(KernelKind::vnni_gemm);
  d.isa = static_cast<std::uint8_t>(Isa::avx2);
  d.int8_unit = static_cast<std::uint8_t>(unit);
  d.rows = static_cast<std::uint32_t>(rows);
  d.vectors = static_cast<std::uint8_t>(vectors);
  d.n_tail = static_cast<std::uint8_t>(tail);
  d.beta = static_cast<std::uint8_t>(beta);
  d.b_lookahead = beta ? 2 : 0;
  d.a_row_stride = 832;
  d.b_k_stride = static_cast<std::uint32_t>(vectors + beta);
  d.c_row_stride = 3200;
  return d;
}

template <typename Each>
int for_each_int8_tile(Int8Unit unit, Each each) {
  int tiles = 0;
  for (int vectors = 1; int8_max_rows(vectors, Isa::avx2) >= 1; ++vectors)
    for (int rows = 1; rows <= int8_max_rows(vectors, Isa::avx2); ++rows)
      for (int tail : {0, 3, 8, 11})
        for (int beta : {0, 1}) {
          each(int8_tile(unit, rows, vectors, tail, beta));
          ++tiles;
        }
  return tiles;
}

TEST(Avx2Encoding, Int8TilesOfTheAvx2Unit) {
  EXPECT_GE(for_each_int8_tile(Int8Unit::avx2, [](const KernelDesc& d) { expect_avx2_only(d); }), 8 * 8);
}

// The instructions of a kernel as text, without offsets, jump targets and rip-relative
// addresses (which move with the code before them), nor the avx2 unit's setup of its int16
// ones; each avx2 dot step (vpmaddubsw P, A, B; vpmaddwd P, P, ones; vpaddd S, S, P) written as
// the vpdpbusd S, A, B it stands for.
std::vector<std::string> instructions(const CompiledKernel& k) {
  std::istringstream lines(x64::disassemble(k.code(), k.text_size(), "k"));
  std::vector<std::string> out;
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    if (line.find(".data") != std::string::npos) break;
    const std::string text = line.substr(10);
    if (text.starts_with("j") || text.starts_with("vpcmpeqw") || text.starts_with("vpsrlw")) continue;
    // Zydis writes a rip-relative operand as the absolute address it reaches.
    out.push_back(std::regex_replace(text, std::regex(R"(\[0x[0-9A-Fa-f]+\])"), "[constant]"));
  }
  std::vector<std::string> folded;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].starts_with("vpmaddubsw ") && i + 2 < out.size()) {
      // "vpmaddubsw P, A, B" and "vpaddd S, S, P" -> "vpdpbusd S, A, B"
      const std::string operands = out[i].substr(out[i].find(',') + 2);         // "A, B"
      const std::string sum = out[i + 2].substr(7, out[i + 2].find(',') - 7);  // "S"
      folded.push_back("vpdpbusd " + sum + ", " + operands);
      i += 2;
      continue;
    }
    folded.push_back(out[i]);
  }
  return folded;
}

TEST(Avx2Encoding, AvxVnniTilesAreTheAvx2OnesWithVexVpdpbusd) {
  const int tiles = for_each_int8_tile(Int8Unit::avx_vnni, [](const KernelDesc& d) {
    const CompiledKernel k(d);
    int dots = 0;
    for (const std::string& bad : x64::foreign_instructions(k.code(), k.text_size(), Isa::avx2)) {
      EXPECT_NE(bad.find("vpdpbusd ymm"), std::string::npos) << kernel_name(d) << ": " << bad;
      EXPECT_EQ(bad.find("EVEX"), std::string::npos) << kernel_name(d) << ": " << bad;
      ++dots;
    }
    // 16 k quads a trip of the k loop, each a dot step per row and register within n_tail.
    const int regs = 2 * d.vectors - (d.n_tail && d.n_tail <= 8 ? 1 : 0);
    EXPECT_EQ(dots, 16 * static_cast<int>(d.rows) * regs) << kernel_name(d);
    KernelDesc avx2 = d;
    avx2.int8_unit = static_cast<std::uint8_t>(Int8Unit::avx2);
    const std::vector<std::string> vnni = instructions(k), twin = instructions(CompiledKernel(avx2));
    std::size_t i = 0;
    while (i < vnni.size() && i < twin.size() && vnni[i] == twin[i]) ++i;
    EXPECT_TRUE(i == vnni.size() && i == twin.size())
        << kernel_name(d) << " differs from " << kernel_name(avx2) << " beyond its dot steps at instruction " << i
        << ": '" << (i < vnni.size() ? vnni[i] : "(end)") << "' against '" << (i < twin.size() ? twin[i] : "(end)")
        << "'";
  });
  EXPECT_GE(tiles, 8 * 8);
}

// The kernels AVX2 plans ask for: the planner's blockings and unrolls, whatever they are; int8
// plans with the avx2 unit's kernels.
TEST(Avx2Encoding, EveryKernelOfAvx2Plans) {
  int kernels = 0;
  for (CellKind cell : kCells)
    for (int variant = 0; variant < 3; ++variant)  // inference, training, int8 inference
      for (const auto& [H, N, bidirectional] : {std::tuple{800, 20, false}, {37, 3, true}, {256, 1, false}}) {
        RnnConfig config{cell, 64, H, 2, bidirectional};
        if (cell == CellKind::lstm) config.proj_size = H / 2;
        const Mode mode = variant == 1 ? Mode::training : Mode::inference;
        const bool int8 = variant == 2;
        const Plan plan = make_plan(config, {5, N}, mode, Isa::avx2, 2, {}, {}, FpMath::strict, Bf16Unit::amx,
                                    int8 ? Quantize::int8_dynamic : Quantize::none,
                                    int8 ? std::optional(Int8Unit::avx2) : std::nullopt);
        EXPECT_EQ(plan.quantize == Quantize::int8_dynamic, int8) << describe(config);
        for (const KernelDesc& d : plan.kernels) {
          const bool int8_gemm = int8 && d.kind_of() == KernelKind::vnni_gemm;
          if (d.kind_of() != KernelKind::gate && d.kind_of() != KernelKind::gemm && !int8_gemm) {
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
