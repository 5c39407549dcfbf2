#include "codegen/cuda/gpu_plan.hpp"

#include <fmt/format.h>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/planner.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::cuda {
namespace {

// An invariant of the CUDA plan that the executor relies on; a failure is a planner bug.
void expect(bool ok, const std::string& step, const char* what) {
  if (!ok)
    throw Error(fmt::format("GPU plan: step '{}': {} (a planner change the CUDA executor does not follow)", step, what));
}

void check_gemm(const GemmStep& g) {
  expect(!g.blocking.generated() && !g.blocking.packed_b && !g.blocking.pack_a, g.what, "a GEMM has generated blocking");
  expect(g.a_panels.buffer == Buffer::none, g.what, "a GEMM packs A");
}

// One gate kernel (of part `part`) over every unit and row, launched whole (no thread split),
// with the configuration's cell and features.
void check_gate_kernel(const Plan& plan, const RecurrenceStep& r, const GateSplit& split, int part) {
  const int kernel = split.kernel;
  expect(kernel >= 0 && kernel < static_cast<int>(plan.kernels.size()), r.what, "no gate kernel");
  const bool whole = split.thread_kernels == std::vector<int>{kernel} &&
                     split.thread_units == std::vector<std::int64_t>{0};
  expect(whole, r.what, "the gate kernel is split across threads");
  const KernelDesc& d = plan.kernels[static_cast<std::size_t>(kernel)];
  expect(d.isa_kind() == Isa::cuda && d.kind_of() == KernelKind::gate && d.cols == d.hidden &&
             static_cast<std::int64_t>(d.rows) == r.batch,
         r.what, "the gate kernel does not cover every unit and row");
  const RnnConfig& c = plan.config;
  expect(d.cell_kind() == c.cell && d.pass_kind() == r.pass && d.part == part, r.what,
         "the gate kernel's cell, pass or part differ from the recurrence's");
  expect(d.gate_clip() == c.gate_clip && d.peephole == c.peephole && d.input_forget == c.input_forget, r.what,
         "the gate kernel's gate_clip, peephole or input_forget differ from the configuration's");
}

void check_step(const Plan& plan, const Step& step) {
  if (std::holds_alternative<PackStep>(step)) expect(false, std::get<PackStep>(step).what, "a plan packs weights");
  if (const auto* g = std::get_if<GemmStep>(&step)) check_gemm(*g);
  if (const auto* c = std::get_if<ColumnSumStep>(&step))  // a factor (peephole gradients) is read like src
    expect(c->factor.buffer == Buffer::none || (c->ld_factor >= c->cols && plan.config.peephole), c->what,
           "a column sum has a factor it cannot read");
  if (const auto* r = std::get_if<RecurrenceStep>(&step)) {
    check_gemm(r->gemm);
    if (r->projection) check_gemm(r->projection->gemm);
    const RnnConfig& c = plan.config;
    check_gate_kernel(plan, *r, r->gate, 0);
    // The reset-before GRU's step splits at the reset gate: a second GEMM (gh's n columns on
    // r * h_prev forward, d(r * h_prev) = dn W_hn backward) and a second, part-1 kernel.
    expect(r->reset_before.has_value() == (c.cell == CellKind::gru_reset_before), r->what,
           "the second recurrent GEMM and part-1 gate kernel do not match the cell");
    if (const auto& rb = r->reset_before) {
      check_gemm(rb->gemm);
      check_gate_kernel(plan, *r, rb->part1, 1);
      const bool forward = r->pass == Pass::forward;
      if (forward)
        expect(rb->z.buffer != Buffer::none && rb->reset_h.base.buffer != Buffer::none, r->what,
               "no z or r * h_prev operand");
      else
        expect(rb->d_reset_h.buffer != Buffer::none, r->what, "no d(r * h_prev) operand");
      expect(r->gemm.n == (forward ? 2 * c.hidden_size : c.hidden_size) && rb->gemm.n == c.hidden_size &&
                 rb->gemm.k == c.hidden_size,
             r->what, "the recurrent GEMMs do not split W_hh into its r,z and n rows");
    }
    // A peephole kernel gets its [3, H] block.
    expect((r->peephole.buffer == Buffer::weights) == c.peephole, r->what,
           "the peephole weights do not match the gate kernel");
  }
}

}  // namespace

Launch gate_launch(const KernelDesc& d) {
  return {(d.cols + kBlockThreads - 1) / static_cast<unsigned>(kBlockThreads), d.rows, static_cast<unsigned>(kBlockThreads)};
}

Plan make_gpu_plan(const RnnConfig& config, const Shape& shape, Mode mode) {
  validate(config, shape);
  if (shape.batch > kMaxGridY)
    throw Error(fmt::format("batch {} is not supported on the CUDA executor yet (at most {}: the gate kernels' grid)",
                            shape.batch, kMaxGridY));
  Plan plan = make_plan(config, shape, mode, Isa::cuda, 1);
  for (const auto* stages : {&plan.pack_weights, &plan.forward, &plan.backward_data, &plan.backward_weights})
    for (const Stage& stage : *stages)
      for (const auto& lane : stage.lanes)
        for (const Step& step : lane) check_step(plan, step);
  expect(plan.workspace.packed_bytes == 0 && plan.pack_weights.empty(), "pack weights", "a plan packs weights");
  // A cell or feature the CUDA source generator has no kernel for is refused here, at planning.
  for (const KernelDesc& d : plan.kernels) {
    try {
      gate_kernel_source(d);
    } catch (const Error& e) {
      throw Error(fmt::format("cell {} is not supported on the CUDA executor yet ({})", to_string(config.cell), e.what()));
    }
  }
  // Variable lengths: the masked row kernels read the call's lengths from device memory; training
  // keeps them in the reserve's lengths_region (for backward), inference uploads them here.
  if (plan.lengths_region < 0)
    plan.lengths_region =
        plan.workspace.add("seq_lengths", Space::workspace, static_cast<std::size_t>(shape.batch) * sizeof(std::int32_t));
  plan.notes = {"device cuda: GEMMs are cuBLAS sgemm calls; gate kernels are CUDA source compiled by NVRTC, one "
                "thread per (row, unit), one launch per step; the lanes of a stage run on their own streams",
                "device cuda: a forward recurrence of few rows (N x H x ceil(H / SMs) <= 200000, N <= 64), "
                "without a projection or rows past their end, runs as one persistent kernel (W_hh in shared "
                "memory, all steps in one launch) where the device's shared memory holds W_hh "
                "(RNNJIT_CUDA_PERSISTENT=0: never)"};
  return plan;
}

}  // namespace rnnjit::cuda
