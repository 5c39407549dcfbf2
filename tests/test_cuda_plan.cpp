// The GPU plan without a GPU: its invariants (cuBLAS GEMMs, one whole-H gate kernel per
// recurrence, nothing packed), the gate kernels' launch shape derived from it, what it refuses,
// the choice between cubin and PTX, the reset-before GRU's split step, and NVRTC compiling every
// kernel the GPU plans of all cells need (uni/bidirectional, 1-2 layers, inference and training, sizes with tails) plus the
// data-movement module, as SASS for sm_90 - what Device::cuda loads on an H100/H200.
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/cuda/util_source.hpp"
#include "codegen/plan_extents.hpp"
#include "codegen/planner.hpp"
#include "tests/plan_steps.hpp"

namespace rnnjit {
namespace {

using cuda::Launch;

std::vector<RnnConfig> configs(std::int64_t H) {
  std::vector<RnnConfig> out;
  for (CellKind cell : kCellKinds)
    for (bool bidir : {false, true})
      for (std::int64_t layers : {1, 2})
        out.push_back({.cell = cell, .input_size = 7, .hidden_size = H, .num_layers = layers, .bidirectional = bidir});
  return out;
}

// Gate kernels a recurrence launches per step: the reset-before GRU's two parts, else one.
int parts(CellKind cell) { return cell == CellKind::gru_reset_before ? 2 : 1; }

using test::for_each_step;

TEST(GpuPlan, CublasGemmsAndOneWholeGateKernelPerRecurrence) {
  for (std::int64_t H : {1, 17, 128, 129, 800})
    for (const RnnConfig& c : configs(H))
      for (Mode mode : {Mode::inference, Mode::training}) {
        SCOPED_TRACE(fmt::format("{} {}", describe(c), to_string(mode)));
        const Plan plan = cuda::make_gpu_plan(c, {5, 3}, mode);
        EXPECT_NO_THROW(check_extents(plan));
        EXPECT_EQ(plan.isa, Isa::cuda);
        EXPECT_EQ(plan.threads, 1);
        EXPECT_EQ(plan.workspace.packed_bytes, 0u);
        EXPECT_TRUE(plan.pack_weights.empty());
        // Forward (and backward) gate kernels, in two parts for the reset-before GRU.
        EXPECT_EQ(plan.kernels.size(), (mode == Mode::training ? 2u : 1u) * parts(c.cell));
        int recurrences = 0;
        for_each_step(plan, [&](const Step& s) {
          EXPECT_FALSE(std::holds_alternative<PackStep>(s));
          if (const auto* g = std::get_if<GemmStep>(&s)) {
            EXPECT_FALSE(g->blocking.generated()) << g->what;
          }
          if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
            ++recurrences;
            EXPECT_FALSE(r->gemm.blocking.generated()) << r->what;
            EXPECT_EQ(r->reset_before.has_value(), parts(c.cell) == 2) << r->what;
            if (r->reset_before) {
              EXPECT_FALSE(r->reset_before->gemm.blocking.generated()) << r->what;
            }
            for (int kernel : {r->gate.kernel, r->reset_before ? r->reset_before->part1.kernel : -1}) {
              if (kernel < 0) continue;
              const KernelDesc& d = plan.kernels[static_cast<std::size_t>(kernel)];
              EXPECT_EQ(d.isa_kind(), Isa::cuda);
              EXPECT_EQ(d.cols, static_cast<std::uint32_t>(H));
              EXPECT_EQ(d.rows, 3u);
            }
            EXPECT_GE(r->gate.kernel, 0) << r->what;
            if (r->reset_before) {
              EXPECT_GE(r->reset_before->part1.kernel, 0) << r->what;
            }
          }
        });
        EXPECT_EQ(recurrences, c.num_layers * c.directions() * (mode == Mode::training ? 2 : 1));
        for (const Stage& s : plan.forward) EXPECT_LE(s.lanes.size(), static_cast<std::size_t>(c.directions()));
        ASSERT_FALSE(plan.notes.empty());
        EXPECT_NE(plan.notes[0].find("cuBLAS"), std::string::npos) << plan.notes[0];
      }
}

// Every (row, unit) gets exactly one thread: the grid covers cols with less than one block to
// spare, and the kernel's `if (j >= cols) return` masks the rest.
TEST(GpuPlan, GateLaunchCoversEveryRowAndUnitOnce) {
  for (std::uint32_t cols : {1u, 17u, 127u, 128u, 129u, 800u, 4096u})
    for (std::uint32_t rows : {1u, 5u, 65535u}) {
      const KernelDesc d = gate_kernel_desc({CellKind::lstm, 4, cols, 1, false}, {2, rows}, Mode::inference, Isa::cuda,
                                      Pass::forward);
      const Launch l = cuda::gate_launch(d);
      EXPECT_EQ(l.block_x, static_cast<unsigned>(cuda::kBlockThreads));
      EXPECT_EQ(l.grid_y, rows);
      EXPECT_GE(l.grid_x * l.block_x, cols);
      EXPECT_LT((l.grid_x - 1) * l.block_x, cols);
      // The generated source states the same launch in its header comment.
      EXPECT_NE(cuda::gate_kernel_source(d).find(fmt::format("grid: ({}, {}), block: {}", l.grid_x, l.grid_y, l.block_x)),
                std::string::npos);
    }
}

TEST(GpuPlan, RefusesBatchesBeyondTheGrid) {
  const RnnConfig c{.cell = CellKind::gru, .input_size = 2, .hidden_size = 2};
  EXPECT_NO_THROW(cuda::make_gpu_plan(c, {1, cuda::kMaxGridY}, Mode::inference));
  try {
    cuda::make_gpu_plan(c, {1, cuda::kMaxGridY + 1}, Mode::inference);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not supported on the CUDA executor yet"), std::string::npos) << e.what();
  }
}

// The reset-before GRU (ONNX's default GRU): its step splits at the reset gate, into two cuBLAS
// GEMMs and two whole-H gate kernels (parts 0 and 1). Forward: gh's r,z columns on h_prev,
// r * h_prev (reset_h, kept per step in training for dW_hn) and z, gh's n columns on reset_h.
// Backward: d(r * h_prev) = dn W_hn between the kernels, then [dr, dz] W_hh[r,z] into dh_carry.
TEST(GpuPlan, ResetBeforeGruSplitsTheStepAtTheResetGate) {
  for (bool bidir : {false, true})
    for (Mode mode : {Mode::inference, Mode::training}) {
      SCOPED_TRACE(fmt::format("bidirectional {} {}", bidir, to_string(mode)));
      const std::int64_t H = 6, N = 3, T = 4, D = bidir ? 2 : 1;
      const RnnConfig c{.cell = CellKind::gru_reset_before, .input_size = 5, .hidden_size = H, .num_layers = 2,
                        .bidirectional = bidir};
      const Plan plan = cuda::make_gpu_plan(c, {T, N}, mode);
      EXPECT_NO_THROW(check_extents(plan));
      std::set<std::string> names;
      for (const KernelDesc& d : plan.kernels) names.insert(kernel_name(d));
      EXPECT_EQ(names.size(), plan.kernels.size()) << "the two parts must have distinct names";
      int forward = 0, backward = 0, dw_hn = 0;
      for_each_step(plan, [&](const Step& s) {
        if (const auto* g = std::get_if<GemmStep>(&s)) dw_hn += g->what.find("dW_hn") == 0;
        const auto* r = std::get_if<RecurrenceStep>(&s);
        if (!r) return;
        ASSERT_TRUE(r->reset_before.has_value()) << r->what;
        const ResetBefore& rb = *r->reset_before;
        const KernelDesc& k0 = plan.kernels[static_cast<std::size_t>(r->gate.kernel)];
        const KernelDesc& k1 = plan.kernels[static_cast<std::size_t>(rb.part1.kernel)];
        EXPECT_EQ(k0.part, 0);
        EXPECT_EQ(k1.part, 1);
        EXPECT_EQ(k0.pass_kind(), r->pass);
        EXPECT_EQ(k1.pass_kind(), r->pass);
        EXPECT_EQ(rb.part1.thread_kernels, std::vector<int>{rb.part1.kernel});
        EXPECT_EQ(rb.gemm.n, H);
        EXPECT_EQ(rb.gemm.k, H);
        if (r->pass == Pass::forward) {
          ++forward;
          EXPECT_EQ(r->gemm.n, 2 * H);  // r,z
          EXPECT_TRUE(rb.gemm.trans_b);
          EXPECT_EQ(rb.reset_h.t_stride, mode == Mode::training ? N * D * H : 0);
          EXPECT_NE(rb.z.buffer, Buffer::none);
          EXPECT_EQ(k0.training, mode == Mode::training);
        } else {
          ++backward;
          EXPECT_EQ(r->gemm.k, 2 * H);  // [dr, dz] W_hh[r,z rows]
          EXPECT_EQ(r->gemm.beta, 1.0f);
          EXPECT_EQ(rb.gemm.lda, 3 * H);  // dn, one column block of the gates
          EXPECT_NE(rb.d_reset_h.buffer, Buffer::none);
        }
      });
      EXPECT_EQ(forward, 2 * D);
      EXPECT_EQ(backward, mode == Mode::training ? 2 * D : 0);
      EXPECT_EQ(dw_hn, mode == Mode::training ? 2 * D : 0);
    }
}

// A descriptor the CUDA source generator has no kernel for is refused, and the planner's CUDA
// descriptors all have one.
TEST(GpuPlan, GeneratorRefusesWhatItHasNoKernelFor) {
  KernelDesc d = gate_kernel_desc({.cell = CellKind::gru, .input_size = 3, .hidden_size = 4}, {2, 2}, Mode::inference,
                                  Isa::cuda, Pass::forward);
  EXPECT_NO_THROW(cuda::gate_kernel_source(d));
  d.part = 1;  // only the reset-before GRU has a second part
  EXPECT_THROW(cuda::gate_kernel_source(d), Error);
}

TEST(GpuPlan, FeaturesPlanLikeOnTheCpu) {
  RnnConfig c{.cell = CellKind::lstm, .input_size = 9, .hidden_size = 12, .num_layers = 3};
  c.reverse = true;
  c.batch_first = true;
  c.proj_size = 5;
  c.clip = 0.5f;
  c.dropout = 0.25f;
  const Plan plan = cuda::make_gpu_plan(c, {4, 3}, Mode::training);
  EXPECT_NO_THROW(check_extents(plan));
  int dropouts = 0, projections = 0;
  for_each_step(plan, [&](const Step& s) {
    dropouts += std::holds_alternative<DropoutStep>(s);
    if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
      EXPECT_TRUE(r->reverse);
      projections += r->projection.has_value();
      if (r->projection) {
        EXPECT_FALSE(r->projection->gemm.blocking.generated());
      }
    }
  });
  EXPECT_EQ(dropouts, 4);     // two layers below the top, forward and backward
  EXPECT_EQ(projections, 6);  // every recurrence, forward and backward
}

// ONNX's options: the gate kernels carry them, every recurrence gets its peephole block, and the
// peephole gradients are column sums with a factor (i, f: times c_{t-1}; o: times c_t).
TEST(GpuPlan, GateClipPeepholesAndCoupledGates) {
  for (bool bidir : {false, true}) {
    RnnConfig c{.cell = CellKind::lstm, .input_size = 9, .hidden_size = 12, .num_layers = 2, .bidirectional = bidir};
    c.gate_clip = 0.7f;
    c.peephole = true;
    c.input_forget = true;
    const Plan plan = cuda::make_gpu_plan(c, {4, 3}, Mode::training);
    EXPECT_NO_THROW(check_extents(plan));
    for (const KernelDesc& d : plan.kernels) {
      EXPECT_EQ(d.gate_clip(), 0.7f);
      EXPECT_TRUE(d.peephole && d.input_forget) << kernel_name(d);
    }
    int recurrences = 0, factor_sums = 0;
    for_each_step(plan, [&](const Step& s) {
      if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
        ++recurrences;
        EXPECT_EQ(r->peephole.buffer, Buffer::weights) << r->what;
      }
      if (const auto* cs = std::get_if<ColumnSumStep>(&s))
        if (cs->factor.buffer != Buffer::none) {
          ++factor_sums;
          EXPECT_GE(cs->ld_factor, cs->cols) << cs->what;
          EXPECT_EQ(cs->dst.buffer, Buffer::dweights) << cs->what;
        }
    });
    EXPECT_EQ(recurrences, 2 * 2 * c.directions());
    EXPECT_GE(factor_sums, 3 * 2 * c.directions()) << "dP_i, dP_f and dP_o of every layer and direction";
  }
  for (CellKind cell : kCellKinds) {  // every cell but the LSTM (above)
    if (cell == CellKind::lstm) continue;
    RnnConfig c{.cell = cell, .input_size = 3, .hidden_size = 5};
    c.gate_clip = 2.5f;
    for (const KernelDesc& d : cuda::make_gpu_plan(c, {2, 2}, Mode::training).kernels) EXPECT_EQ(d.gate_clip(), 2.5f);
  }
}

TEST(NvrtcTarget, CubinWhereNvrtcEmitsTheArchElsePtxForTheNewestBelow) {
  const std::vector<int> supported{75, 80, 86, 89, 90, 100, 120};
  EXPECT_EQ(cuda::choose_target(90, supported), (cuda::Target{90, true}));
  EXPECT_EQ(cuda::choose_target(87, supported), (cuda::Target{86, false}));  // e.g. Orin: PTX for compute_86
  EXPECT_EQ(cuda::choose_target(130, supported), (cuda::Target{120, false}));  // a GPU newer than NVRTC
  EXPECT_THROW(cuda::choose_target(70, supported), Error);                     // older than anything supported
  EXPECT_EQ(cuda::Target({90, true}).name(), "sm_90");
  EXPECT_EQ(cuda::Target({90, false}).name(), "compute_90");
  EXPECT_EQ(cuda::parse_target("compute_80"), (cuda::Target{80, false}));
  EXPECT_THROW(cuda::parse_target("sm90"), Error);
  EXPECT_THROW(cuda::parse_target("compute_"), Error);
}

class NvrtcCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)";
  }
};

TEST_F(NvrtcCompile, NvrtcEmitsSassForHopper) {
  const std::vector<int> archs = cuda::supported_archs();
  ASSERT_FALSE(archs.empty());
  EXPECT_TRUE(std::find(archs.begin(), archs.end(), 90) != archs.end()) << "NVRTC " << cuda::nvrtc_version();
  EXPECT_EQ(cuda::parse_target("sm_90"), (cuda::Target{90, true}));
}

// ELF magic for cubins; a PTX image is text with the entry.
void expect_image(const cuda::Image& image, const std::string& symbol) {
  if (image.target.cubin) EXPECT_EQ(image.bytes.substr(0, 4), "\x7f" "ELF") << symbol;
  else EXPECT_NE(image.bytes.find(".entry " + symbol), std::string::npos) << symbol;
  EXPECT_NE(image.bytes.find(symbol), std::string::npos) << symbol;
}

TEST_F(NvrtcCompile, EveryKernelOfEveryGpuPlanCompilesToACubin) {
  std::set<std::string> done;  // the same descriptor appears in several plans
  for (std::int64_t H : {1, 17, 129})
    for (const RnnConfig& c : configs(H))
      for (Mode mode : {Mode::inference, Mode::training})
        for (const KernelDesc& d : cuda::make_gpu_plan(c, {3, 5}, mode).kernels) {
          const std::string name = kernel_name(d);
          if (!done.insert(name).second) continue;
          expect_image(cuda::compile_image(cuda::gate_kernel_source(d), name, {90, true}), name);
        }
  // H x (bidirectional changes ld_h) x kernels: forward inference, forward training and backward
  // per cell, in two parts for the reset-before GRU (one cell's worth more).
  EXPECT_EQ(done.size(), 3u * 2 * ((kCellKinds.size() + 1) * 3)) << "H x ld_h x kernels of every cell and mode";
}

TEST_F(NvrtcCompile, FeatureKernelsAndTheDataMovementModuleCompile) {
  RnnConfig c{.cell = CellKind::lstm, .input_size = 9, .hidden_size = 12, .num_layers = 2, .bidirectional = true};
  c.proj_size = 5;
  c.clip = 0.5f;
  for (const KernelDesc& d : cuda::make_gpu_plan(c, {4, 3}, Mode::training).kernels)
    expect_image(cuda::compile_image(cuda::gate_kernel_source(d), kernel_name(d), {90, true}), kernel_name(d));
  // ONNX's options: the gate clip on every cell; LSTM peepholes and coupled gates, alone and together.
  std::vector<RnnConfig> onnx;
  for (CellKind cell : kCellKinds)
    onnx.push_back({.cell = cell, .input_size = 9, .hidden_size = 131, .gate_clip = 0.7f});
  for (int features = 1; features < 4; ++features) {
    RnnConfig lstm{.cell = CellKind::lstm, .input_size = 9, .hidden_size = 131};
    lstm.peephole = features & 1;
    lstm.input_forget = features & 2;
    onnx.push_back(lstm);
  }
  for (const RnnConfig& o : onnx)
    for (Mode mode : {Mode::inference, Mode::training})
      for (const KernelDesc& d : cuda::make_gpu_plan(o, {4, 3}, mode).kernels)
        expect_image(cuda::compile_image(cuda::gate_kernel_source(d), kernel_name(d), {90, true}), kernel_name(d));
  for (const cuda::Target target : {cuda::Target{90, true}, cuda::Target{80, false}}) {
    const cuda::Image util = cuda::compile_image(cuda::util_kernels_source(), cuda::kUtilModule, target);
    for (const char* symbol : {cuda::kCopyKernel, cuda::kColumnSumKernel, cuda::kDropoutForwardKernel,
                               cuda::kDropoutBackwardKernel, cuda::kAddKernel, cuda::kRowsPastEndKernel})
      expect_image(util, symbol);
  }
}

// Variable lengths: the masked row kernels read the call's lengths from device memory, in the
// reserve's lengths_region in training (kept for backward) and in a workspace region of N int32
// in inference.
TEST(CudaPlan, HasARegionForTheSequenceLengths) {
  const RnnConfig c{.cell = CellKind::gru, .input_size = 5, .hidden_size = 8};
  for (Mode mode : {Mode::inference, Mode::training}) {
    const Plan plan = cuda::make_gpu_plan(c, {4, 3}, mode);
    ASSERT_GE(plan.lengths_region, 0);
    const Region& r = plan.workspace.regions[static_cast<std::size_t>(plan.lengths_region)];
    EXPECT_EQ(r.space, mode == Mode::training ? Space::reserve : Space::workspace);
    EXPECT_EQ(r.size, 3 * sizeof(std::int32_t));
    EXPECT_LE(r.offset + r.size, mode == Mode::training ? plan.workspace.reserve_bytes : plan.workspace.workspace_bytes);
  }
}

}  // namespace
}  // namespace rnnjit
