#include "runtime/executor.hpp"

#include <cblas.h>

#include <cstring>
#include <exception>
#include <thread>

#include "codegen/kernel_args.hpp"

namespace rnnjit {
namespace {

void gemm(const GemmStep& g, const float* a, const float* b, float* c, float beta) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, a, static_cast<int>(g.lda), b,
              static_cast<int>(g.ldb), beta, c, static_cast<int>(g.ldc));
}

// While the lanes of a stage run concurrently each GEMM gets one core; restored afterwards.
class BlasThreadsForLanes {
 public:
  explicit BlasThreadsForLanes(std::size_t lanes) : saved_(openblas_get_num_threads()) {
    if (lanes > 1) openblas_set_num_threads(1);
  }
  ~BlasThreadsForLanes() { openblas_set_num_threads(saved_); }
 private:
  int saved_;
};

}  // namespace

Executor::Executor(std::shared_ptr<const Plan> plan, std::vector<std::shared_ptr<const CompiledKernel>> kernels)
    : plan_(std::move(plan)), kernels_(std::move(kernels)) {}

float* Executor::resolve(const Operand& o, const Bindings& b) const {
  if (o.buffer == Buffer::none) return nullptr;
  if (o.region >= 0) {
    const Region& r = plan_->workspace.regions[static_cast<std::size_t>(o.region)];
    std::byte* base = r.reserve ? b.reserve : b.workspace;
    return reinterpret_cast<float*>(base + r.offset) + o.offset;
  }
  const float* p = b.buffers[static_cast<std::size_t>(o.buffer)];
  return p ? const_cast<float*>(p) + o.offset : nullptr;
}

void Executor::run(const std::vector<Stage>& stages, const Bindings& b, bool accumulate) const {
  for (const Stage& stage : stages) {
    if (stage.lanes.size() == 1) {
      run_lane(stage.lanes[0], b, accumulate);
      continue;
    }
    BlasThreadsForLanes blas(stage.lanes.size());
    std::vector<std::exception_ptr> errors(stage.lanes.size());
    std::vector<std::thread> workers;
    for (std::size_t i = 1; i < stage.lanes.size(); ++i)
      workers.emplace_back([&, i] {
        try { run_lane(stage.lanes[i], b, accumulate); } catch (...) { errors[i] = std::current_exception(); }
      });
    try { run_lane(stage.lanes[0], b, accumulate); } catch (...) { errors[0] = std::current_exception(); }
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
}

void Executor::run_lane(const std::vector<Step>& lane, const Bindings& b, bool accumulate) const {
  for (const Step& step : lane) {
    if (const auto* g = std::get_if<GemmStep>(&step)) {
      gemm(*g, resolve(g->a, b), resolve(g->b, b), resolve(g->c, b), accumulate && g->beta == 0.0f ? 1.0f : g->beta);
    } else if (const auto* c = std::get_if<CopyStep>(&step)) {
      const float* src = resolve(c->src, b);
      float* dst = resolve(c->dst, b);
      if (!dst) continue;  // optional output not requested
      for (std::int64_t r = 0; r < c->rows; ++r) {
        float* row = dst + r * c->ld_dst;
        if (src) std::memcpy(row, src + r * c->ld_src, static_cast<std::size_t>(c->cols) * sizeof(float));
        else std::memset(row, 0, static_cast<std::size_t>(c->cols) * sizeof(float));
      }
    } else if (const auto* s = std::get_if<ColumnSumStep>(&step)) {
      const float* src = resolve(s->src, b);
      float* dst = resolve(s->dst, b);
      const float beta = accumulate && s->beta == 0.0f ? 1.0f : s->beta;
      for (std::int64_t j = 0; j < s->cols; ++j) dst[j] = beta == 0.0f ? 0.0f : beta * dst[j];
      for (std::int64_t r = 0; r < s->rows; ++r) {
        const float* row = src + r * s->ld_src;
        for (std::int64_t j = 0; j < s->cols; ++j) dst[j] += row[j];
      }
    } else if (const auto* rec = std::get_if<RecurrenceStep>(&step)) {
      run_recurrence(*rec, b);
    }
  }
}

void Executor::run_recurrence(const RecurrenceStep& r, const Bindings& b) const {
  const CompiledKernel& kernel = *kernels_[static_cast<std::size_t>(r.kernel)];
  auto at = [&](const Timed& t, std::int64_t time) -> float* {
    float* base = resolve(t.base, b);
    return base ? base + time * t.t_stride : nullptr;
  };
  float* const gh = resolve(r.gh, b);
  float* const h_init = resolve(r.h_init, b);
  float* const c_init = resolve(r.c_init, b);
  const float* const w_hh = resolve(r.gemm.b, b);
  const std::int64_t T = r.steps;
  if (r.pass == Pass::forward) {
    GateForwardArgs args{};
    args.gh = gh;
    args.bias_ih = resolve(r.bias_ih, b);
    args.bias_hh = resolve(r.bias_hh, b);
    for (std::int64_t s = 0; s < T; ++s) {
      const std::int64_t t = r.reverse ? T - 1 - s : s, prev = r.reverse ? t + 1 : t - 1;
      args.h_prev = s == 0 ? h_init : at(r.h, prev);
      args.c_prev = s == 0 ? c_init : at(r.c, prev);
      gemm(r.gemm, args.h_prev, w_hh, gh, r.gemm.beta);
      args.gx = at(r.gx, t);
      args.h_out = at(r.h, t);
      args.c_out = at(r.c, t);
      args.gates = at(r.gates, t);
      kernel(&args);
    }
  } else {
    GateBackwardArgs args{};
    args.dh_carry = resolve(r.dh_carry, b);
    args.dc_carry = resolve(r.dc_carry, b);
    for (std::int64_t s = 0; s < T; ++s) {
      const std::int64_t t = r.reverse ? s : T - 1 - s, prev = r.reverse ? t + 1 : t - 1;
      const bool first = r.reverse ? t == T - 1 : t == 0;  // the first step of the forward pass
      args.dy = at(r.dy, t);
      args.h = at(r.h, t);
      args.h_prev = first ? h_init : at(r.h, prev);
      args.c = at(r.c, t);
      args.c_prev = first ? c_init : at(r.c, prev);
      args.gates = at(r.gates, t);
      kernel(&args);
      gemm(r.gemm, args.gates, w_hh, args.dh_carry, r.gemm.beta);
    }
  }
}

}  // namespace rnnjit
