// rnnjit: the executor's walk of a plan: stages in order, the lanes of a stage at once, and each
// step through one dispatch over the Step variant (Executor::StepRunner). The steps themselves:
// runtime/executor_gemm.cpp (GEMMs), executor_recurrence.cpp (recurrences), executor_pack.cpp
// (packing), executor_steps.cpp (copies, column sums, masks, dropout), executor_bf16.cpp (AMX).
#include "runtime/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <variant>

#include "runtime/blas_threads.hpp"
#include "runtime/log.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

std::string step_what(const Step& step) {
  return std::visit([](const auto& s) { return s.what; }, step);
}

// RNNJIT_PROFILE: one line per step (or stage of lanes at once) with its wall time.
void log_profile(const char* call, std::size_t stage, std::chrono::steady_clock::time_point start,
                 const std::string& what) {
  const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  log_line(fmt::format("profile {} stage {}: {:.3f} ms {}", call, stage, ms.count(), what));
}

// Whether a stage has a GEMM on OpenBLAS (every GEMM of non-AVX-512 plans; input projections
// with Options::projection_gemm).
bool runs_openblas(const Stage& stage) {
  for (const std::vector<Step>& lane : stage.lanes)
    for (const Step& step : lane)
      if (const auto* g = std::get_if<GemmStep>(&step); g && !g->blocking.generated()) return true;
  return false;
}

}  // namespace

Executor::Executor(std::shared_ptr<const Plan> plan, std::vector<std::shared_ptr<const CompiledKernel>> kernels)
    : plan_(std::move(plan)), kernels_(std::move(kernels)) {
  for (const KernelDesc& d : plan_->kernels) uses_amx_ = uses_amx_ || d.kind_of() == KernelKind::amx_gemm || d.kind_of() == KernelKind::amx_int8_gemm;
}

float* Executor::resolve(const Operand& o, const Bindings& b) const {
  if (o.buffer == Buffer::none) return nullptr;
  if (o.region >= 0) {
    const Region& r = plan_->workspace.regions[static_cast<std::size_t>(o.region)];
    std::byte* base = r.space == Space::reserve ? b.reserve : r.space == Space::packed ? b.packed : b.workspace;
    return reinterpret_cast<float*>(base + r.offset) + o.offset;
  }
  const float* p = b.buffers[static_cast<std::size_t>(o.buffer)];
  return p ? const_cast<float*>(p) + o.offset : nullptr;
}

std::byte* Executor::region_bytes(int region, const Bindings& b) const {
  const Region& r = plan_->workspace.regions[static_cast<std::size_t>(region)];
  return (r.space == Space::reserve ? b.reserve : r.space == Space::packed ? b.packed : b.workspace) + r.offset;
}

const char* Executor::call_name(const std::vector<Stage>& stages) const {
  if (&stages == &plan_->forward) return "forward";
  if (&stages == &plan_->backward_data) return "backward_data";
  if (&stages == &plan_->backward_weights) return "backward_weights";
  if (&stages == &plan_->pack_weights) return "pack_weights";
  return "stages";
}

void Executor::run(const std::vector<Stage>& stages, const Bindings& b, bool accumulate) const {
  ThreadTeam& team = ThreadTeam::instance();
  // AMX kernels leave their tiles in use; each thread hands the 8 KiB tile state back when its
  // part of a stage is done, so that it is not saved at every context switch in between (and
  // forgets which kernel configured them: the next stage may run after a kernel is freed).
  const bool amx = uses_amx_;
  const char* profile = profile_enabled() ? call_name(stages) : nullptr;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const int lanes = static_cast<int>(stage.lanes.size());
    // OpenBLAS on one thread while the lanes of a stage run at once (a core each), and in plans
    // split across threads, whose threads share each OpenBLAS GEMM by rows (Executor::blas_rows).
    // OpenBLAS's own workers would also poll for about 0.1 s after every call, on the cores the
    // next steps need.
    const BlasThreads blas(lanes > 1 || (plan_->threads > 1 && runs_openblas(stage)) ? 1 : 0);
    if (lanes == 1) {
      const StepProfile steps{profile, s};
      team.run(plan_->threads, [&](int tid) {
        run_lane(stage.lanes[0], b, accumulate, tid, plan_->threads, tid == 0 && profile ? &steps : nullptr);
        if (amx) release_amx_tiles();
      });
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    const int threads = std::min(lanes, plan_->threads);
    team.run(threads, [&](int tid) {
      for (int lane = tid; lane < lanes; lane += threads) run_lane(stage.lanes[static_cast<std::size_t>(lane)], b, accumulate, 0, 1);
      if (amx) release_amx_tiles();
    });
    if (profile) {
      std::string what;
      for (const std::vector<Step>& lane : stage.lanes)
        for (const Step& step : lane) what += (what.empty() ? "" : " | ") + step_what(step);
      log_profile(profile, s, start, fmt::format("{} lanes at once: {}", lanes, what));
    }
  }
}

// One step of a lane on thread `tid` of `threads` (std::visit over Step): accumulate turns the
// beta of a GEMM or column sum that would overwrite its output into 1.
struct Executor::StepRunner {
  const Executor& ex;
  const Bindings& b;
  bool accumulate;
  int tid, threads;

  float beta(float planned) const { return accumulate && planned == 0.0f ? 1.0f : planned; }
  void operator()(const GemmStep& g) const { ex.gemm_step(g, b, beta(g.beta), tid, threads); }
  void operator()(const CopyStep& c) const { ex.copy(c, b, tid, threads); }
  void operator()(const MaskStep& m) const { ex.mask(m, b, tid, threads); }
  void operator()(const DropoutStep& d) const { ex.dropout(d, b, tid, threads); }
  void operator()(const ColumnSumStep& s) const { ex.column_sum(s, b, beta(s.beta), tid, threads); }
  void operator()(const PackStep& p) const { ex.pack(p, b, tid, threads); }
  void operator()(const RecurrenceStep& r) const {
    if (r.pass == Pass::forward) ex.forward_recurrence(r, b, tid, threads);
    else ex.backward_recurrence(r, b, tid, threads);
  }
};

void Executor::run_lane(const std::vector<Step>& lane, const Bindings& b, bool accumulate, int tid, int threads,
                        const StepProfile* profile) const {
  ThreadTeam& team = ThreadTeam::instance();
  const StepRunner runner{*this, b, accumulate, tid, threads};
  for (const Step& step : lane) {
    const auto start = std::chrono::steady_clock::now();
    std::visit(runner, step);
    if (threads > 1) team.barrier();
    if (profile) log_profile(profile->call, profile->stage, start, step_what(step));
  }
}

}  // namespace rnnjit
