// rnnjit: the executor's recurrences. Each thread runs the whole time loop of a RecurrenceStep:
// per step its share of the recurrent GEMM, then its gate kernel on its hidden units, meeting
// the other threads where a step's next part reads what they wrote. Forward and backward are
// each a struct (what every step reads, resolved once) with the step's parts as named functions.
#include <cstring>
#include <tuple>
#include <utility>

#include "codegen/kernel_args.hpp"
#include "runtime/executor.hpp"
#include "runtime/executor_util.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit {
namespace {

using executor_util::copy_floats;
using executor_util::past_end;

// Variable lengths: the rows [0, live) of a batch of n hold every row still in its sequence at
// time t (live is 1 + the last such row). A recurrence's per-step GEMMs compute those rows only:
// with lengths sorted longest first (PyTorch's packed sequences, cuDNN's packed layout) they
// shrink as sequences end. Whatever the kernels then make of a finished row's stale GEMM rows
// is replaced by its carried state (forward) or carried gradients and zero gate gradients
// (backward) before anything reads it.
std::int64_t live_rows(const std::int32_t* lengths, std::int64_t n, std::int64_t t) {
  while (lengths && n > 0 && t >= lengths[n - 1]) --n;
  return n;
}

void barrier(int threads) {
  if (threads > 1) ThreadTeam::instance().barrier();
}

}  // namespace

Executor::GateShare Executor::gate_share(const RecurrenceStep& r, int tid, int part) const {
  const bool generated = r.gemm.blocking.generated();
  const auto i = static_cast<std::size_t>(generated ? tid : 0);
  const GateSplit& split = part ? r.reset_before.value().part1 : r.gate;
  const int index = split.thread_kernels[i];
  const CompiledKernel* kernel = index >= 0 ? kernels_[static_cast<std::size_t>(index)].get() : nullptr;
  return {kernel, split.thread_units[i], kernel ? std::int64_t{kernel->desc().cols} : 0};
}

float* Executor::timed(const Timed& t, std::int64_t time, const Bindings& b, std::int64_t col) const {
  float* base = resolve(t.base, b);
  return base ? base + time * t.t_stride + col : nullptr;
}

// ---- forward ----

// Thread `tid`'s part of a forward recurrence. Variable lengths: a row past its length carries
// its state, so it copies h (and c) from the previous step over what the kernel computed; an
// LSTM state updated in place is saved first. GRU with the reset before: the r,z GEMM and
// kernels, a barrier, then n's GEMM on r * h_prev and the n kernels, which write h (so their
// units are the ones a thread carries).
struct Executor::ForwardRecurrence {
  // Step s of the loop: its time t, the time before it in the pass, and what it reads and writes.
  struct Time {
    std::int64_t s, t, prev, live;
    const float* h_prev;
    float* h_out;
    float* reset_h;
    bool h_prev_is_zero;  // no hx, first step: its recurrent products are zeros
  };

  ForwardRecurrence(const Executor& ex, const RecurrenceStep& r, const Bindings& b, int tid, int threads);
  void run() const {
    for (std::int64_t s = 0; s < T; ++s) step(at_step(s));
  }
  Time at_step(std::int64_t s) const;
  void step(const Time& m) const;
  float* at(const Timed& t, std::int64_t time, std::int64_t col) const { return ex.timed(t, time, b, col); }
  // What every gate kernel of this step reads or writes, from hidden unit c0 on.
  GateForwardArgs step_args(const Time& m, std::int64_t c0) const;
  // A recurrent product of the step (gemm or reset_before->gemm) on this thread's share, or its zeros.
  void product(const GemmStep& g, const Time& m, const float* a, const float* w, float* c) const;
  void reset_gate(const Time& m) const;  // reset before, part 0: r * h_prev and z
  void new_gate(const Time& m) const;    // reset before, part 1: n's GEMM and kernels, h
  void cell(const Time& m) const;        // every other cell's gate kernel
  void zero_finished(std::int64_t t, float* at_col0, std::int64_t ld, std::int64_t width) const;
  void project(const Time& m) const;
  void carry_h(const Time& m) const;

  const Executor& ex;
  const RecurrenceStep& r;
  const Bindings& b;
  const int tid, threads;
  const GateShare own;  // this thread's gate kernel and hidden units
  const bool projected, reset_before;
  const GateShare n_share;  // reset before: its n kernel and units
  std::int64_t h0 = 0, h1 = 0;  // the columns of h this thread writes, and so carries
  float* z = nullptr;
  float* gh_n = nullptr;
  const float* w_hn = nullptr;
  std::int64_t N = 0, H = 0, ldh = 0, T = 0;
  const std::int32_t* lengths = nullptr;
  bool c_in_place = false;  // inference: one c buffer updated in place
  float* save = nullptr;
  float* gh = nullptr;
  float* h_init = nullptr;
  float* c_init = nullptr;
  const float *w_hh = nullptr, *w_hr = nullptr, *bias_ih = nullptr, *bias_hh = nullptr, *peephole = nullptr;
  bool starts_at_zero = false;
};

Executor::ForwardRecurrence::ForwardRecurrence(const Executor& ex, const RecurrenceStep& r, const Bindings& b,
                                               int tid, int threads)
    : ex(ex), r(r), b(b), tid(tid), threads(threads), own(ex.gate_share(r, tid)),
      projected(r.projection.has_value()), reset_before(r.reset_before.has_value()),
      n_share(reset_before ? ex.gate_share(r, tid, 1) : GateShare{nullptr, 0, 0}) {
  std::tie(h0, h1) = projected      ? ex.gemm_columns(r.projection->gemm, tid)
                     : reset_before ? std::pair{n_share.col0, n_share.col0 + n_share.cols}
                                    : std::pair{own.col0, own.col0 + own.cols};
  if (reset_before) {
    z = ex.resolve(r.reset_before->z, b);
    gh_n = ex.resolve(r.reset_before->gemm.c, b);
    w_hn = ex.resolve(r.reset_before->gemm.b, b);
  }
  N = r.batch, H = own.kernel ? own.kernel->desc().hidden : 0, ldh = r.ld_state, T = r.steps;
  lengths = b.lengths ? b.lengths + r.batch_begin : nullptr;
  c_in_place = r.c.t_stride == 0;
  save = ex.resolve(r.carry_save, b);
  gh = ex.resolve(r.gh, b);
  h_init = ex.resolve(r.h_init, b);
  c_init = ex.resolve(r.c_init, b);
  w_hh = ex.resolve(r.gemm.b, b);
  if (projected) w_hr = ex.resolve(r.projection->gemm.b, b);
  bias_ih = ex.resolve(r.bias_ih, b);
  bias_hh = ex.resolve(r.bias_hh, b);
  peephole = ex.resolve(r.peephole, b);
  // No hx: h_init is zeros, and so are the first step's products h_prev W_hh^T (and, with the
  // reset before, (r * h_prev) W_hn^T): written as zeros, not multiplied (at T=1, half of an
  // I=H layer's FLOPs).
  starts_at_zero = r.hx.buffer == Buffer::hx && ex.resolve(r.hx, b) == nullptr;
}

Executor::ForwardRecurrence::Time Executor::ForwardRecurrence::at_step(std::int64_t s) const {
  Time m{};
  m.s = s;
  m.t = r.reverse ? T - 1 - s : s;
  m.prev = r.reverse ? m.t + 1 : m.t - 1;
  m.h_prev = s == 0 ? h_init : at(r.h, m.prev, 0);
  m.h_out = at(r.h, m.t, 0);
  m.reset_h = reset_before ? at(r.reset_before->reset_h, m.t, 0) : nullptr;
  m.live = live_rows(lengths, N, m.t);
  m.h_prev_is_zero = s == 0 && starts_at_zero;
  return m;
}

void Executor::ForwardRecurrence::step(const Time& m) const {
  product(r.gemm, m, m.h_prev, w_hh, gh);
  if (own.kernel && reset_before) reset_gate(m);
  if (reset_before) new_gate(m);
  else if (own.kernel) cell(m);
  if (projected) project(m);
  carry_h(m);
  barrier(threads);
}

GateForwardArgs Executor::ForwardRecurrence::step_args(const Time& m, std::int64_t c0) const {
  GateForwardArgs a{};
  a.gx = at(r.gx, m.t, c0);
  a.gh = gh + c0;
  a.bias_ih = bias_ih + c0;
  a.bias_hh = bias_hh + c0;
  a.h_prev = m.h_prev + c0;
  a.gates = at(r.gates, m.t, c0);
  return a;
}

void Executor::ForwardRecurrence::product(const GemmStep& g, const Time& m, const float* a, const float* w,
                                          float* c) const {
  if (m.h_prev_is_zero) ex.zero_product(g, m.live, c, tid);
  else ex.step_gemm(g, b, m.s, m.live, a, w, c, tid, threads);
}

void Executor::ForwardRecurrence::reset_gate(const Time& m) const {
  GateForwardArgs args = step_args(m, own.col0);
  args.h_out = m.reset_h + own.col0;  // r * h_prev
  args.c_out = z + own.col0;
  (*own.kernel)(&args);
  zero_finished(m.t, args.h_out, ldh, own.cols);
}

void Executor::ForwardRecurrence::new_gate(const Time& m) const {
  barrier(threads);  // every unit's r * h_prev is in
  product(r.reset_before->gemm, m, m.reset_h, w_hn, gh_n);
  if (!n_share.kernel) return;
  GateForwardArgs args = step_args(m, n_share.col0);
  args.c_prev = z + n_share.col0;
  args.h_out = m.h_out + n_share.col0;
  (*n_share.kernel)(&args);
}

void Executor::ForwardRecurrence::cell(const Time& m) const {
  const std::int64_t col0 = own.col0, cols = own.cols;
  GateForwardArgs args = step_args(m, col0);
  args.c_prev = c_init ? (m.s == 0 ? c_init : at(r.c, m.prev, 0)) + col0 : nullptr;
  args.h_out = projected ? at(r.projection->cell_out, m.t, col0) : m.h_out + col0;
  args.c_out = at(r.c, m.t, col0);
  args.peephole = peephole ? peephole + col0 : nullptr;
  if (lengths && args.c_out && c_in_place)
    for (std::int64_t n = 0; n < N; ++n)
      if (past_end(lengths, n, m.t)) copy_floats(save + n * 2 * H + col0, args.c_out + n * H, cols);
  (*own.kernel)(&args);
  for (std::int64_t n = 0; n < N && lengths && args.c_out; ++n)
    if (past_end(lengths, n, m.t))
      copy_floats(args.c_out + n * H, c_in_place ? save + n * 2 * H + col0 : args.c_prev + n * H, cols);
  if (projected) zero_finished(m.t, args.h_out, H, cols);
}

// Variable lengths: a finished row's kernel outputs that a weight gradient reads (r * h_prev for
// dW_hn, o * tanh(c) for dW_hr) are zeroed: its GEMM rows were skipped, so they may be anything,
// NaN included, and its zero gate gradient times NaN would be NaN.
void Executor::ForwardRecurrence::zero_finished(std::int64_t t, float* at_col0, std::int64_t ld,
                                                std::int64_t width) const {
  for (std::int64_t n = 0; n < N && lengths; ++n)
    if (past_end(lengths, n, t)) std::memset(at_col0 + n * ld, 0, static_cast<std::size_t>(width) * sizeof(float));
}

// h = (o * tanh(c)) W_hr^T once every thread's units are in.
void Executor::ForwardRecurrence::project(const Time& m) const {
  barrier(threads);
  ex.step_gemm(r.projection->gemm, b, m.s, m.live, at(r.projection->cell_out, m.t, 0), w_hr, m.h_out, tid, threads);
}

void Executor::ForwardRecurrence::carry_h(const Time& m) const {
  for (std::int64_t n = 0; n < N && lengths; ++n)
    if (past_end(lengths, n, m.t)) copy_floats(m.h_out + n * ldh + h0, m.h_prev + n * ldh + h0, h1 - h0);
}

void Executor::forward_recurrence(const RecurrenceStep& r, const Bindings& b, int tid, int threads) const {
  if (!r.gemm.blocking.generated() && tid != 0) return;  // OpenBLAS plans run a recurrence on one thread
  ForwardRecurrence(*this, r, b, tid, threads).run();
}

// ---- backward ----

// Thread `tid`'s part of a backward recurrence. Variable lengths: a row past its length passes
// the carried gradients through unchanged and gets no gate gradient (its forward step only
// copied the state).
struct Executor::BackwardRecurrence {
  // Step s of the loop: its time t, the time before it in the forward pass, and its gates.
  struct Time {
    std::int64_t s, t, prev, live;
    bool first;  // the first step of the forward pass
    const float* h_prev;
    float* gates;
  };

  BackwardRecurrence(const Executor& ex, const RecurrenceStep& r, const Bindings& b, int tid, int threads);
  void run() {
    for (std::int64_t s = 0; s < T; ++s) step(at_step(s));
  }
  Time at_step(std::int64_t s) const;
  void step(const Time& m);
  float* at(const Timed& t, std::int64_t time, std::int64_t col) const { return ex.timed(t, time, b, col); }
  void project(const Time& m) const;  // dh_proj = dh_carry + dy, dcell = dh_proj W_hr
  void cell(const Time& m);           // the gate kernel (reset before: part 0)
  void new_gate(const Time& m);       // reset before, part 1: d(r * h_prev), dr, dh_{t-1}
  void zero_past_end(std::int64_t t, float* gates_at_col0, std::int64_t width) const;
  // Variable lengths: the finished rows' columns [c0, c0 + width) of `carried` (ld apart) kept in
  // carry_save from column `at` on (save) and put back after the step's kernel or GEMM (restore).
  void save_rows(std::int64_t t, const float* carried, std::int64_t ld, std::int64_t at, std::int64_t c0,
                 std::int64_t width) const;
  void restore_rows(std::int64_t t, float* carried, std::int64_t ld, std::int64_t at, std::int64_t c0,
                    std::int64_t width) const;

  const Executor& ex;
  const RecurrenceStep& r;
  const Bindings& b;
  const int tid, threads;
  const GateShare own;  // this thread's gate kernel and hidden units
  const bool projected, reset_before;
  const GateShare n_share;  // reset before: its part-1 kernel and units
  const KernelDesc& desc;
  std::int64_t h0 = 0, h1 = 0;  // the columns of dh_carry this thread writes, and so carries or combines
  std::int64_t N = 0, H = 0, S = 0, R = 0, T = 0;
  const std::int32_t* lengths = nullptr;
  float* save = nullptr;
  float* h_init = nullptr;
  float* c_init = nullptr;
  float* dh_carry = nullptr;
  float* dc_carry = nullptr;
  float* dcell = nullptr;
  float* zeros = nullptr;
  float* d_reset_h = nullptr;
  const float *w_hh = nullptr, *w_hr = nullptr, *peephole = nullptr, *w_hn = nullptr;
  bool wants_dhx = false;
  // The gate kernels' arguments, kept from step to step: each kernel call sets the fields it
  // passes, and the part-1 kernels of the reset before clear the rest first.
  GateBackwardArgs args{};
};

Executor::BackwardRecurrence::BackwardRecurrence(const Executor& ex, const RecurrenceStep& r, const Bindings& b,
                                                 int tid, int threads)
    : ex(ex), r(r), b(b), tid(tid), threads(threads), own(ex.gate_share(r, tid)),
      projected(r.projection.has_value()), reset_before(r.reset_before.has_value()),
      n_share(reset_before ? ex.gate_share(r, tid, 1) : GateShare{nullptr, 0, 0}),
      desc(ex.plan_->kernels[static_cast<std::size_t>(r.gate.kernel)]) {
  std::tie(h0, h1) = projected || reset_before ? ex.gemm_columns(r.gemm, tid) : std::pair{own.col0, own.col0 + own.cols};
  N = r.batch, H = desc.hidden, S = r.state, R = desc.reserve_gates() * H, T = r.steps;
  lengths = b.lengths ? b.lengths + r.batch_begin : nullptr;
  save = ex.resolve(r.carry_save, b);
  h_init = ex.resolve(r.h_init, b);
  c_init = ex.resolve(r.c_init, b);
  dh_carry = ex.resolve(r.dh_carry, b);
  dc_carry = ex.resolve(r.dc_carry, b);
  w_hh = ex.resolve(r.gemm.b, b);
  peephole = ex.resolve(r.peephole, b);
  if (projected) {
    dcell = ex.resolve(r.projection->dcell, b);
    zeros = ex.resolve(r.projection->zeros, b);
    w_hr = ex.resolve(r.projection->gemm.b, b);
  }
  if (reset_before) {
    d_reset_h = ex.resolve(r.reset_before->d_reset_h, b);
    w_hn = ex.resolve(r.reset_before->gemm.b, b);
  }
  // The last step's product dh_carry += dgates W_hh is dh_prev of the first forward step: dhx,
  // nothing else. Without dhx in the call it is not computed.
  wants_dhx = r.dhx.buffer != Buffer::dhx || ex.resolve(r.dhx, b) != nullptr;
}

Executor::BackwardRecurrence::Time Executor::BackwardRecurrence::at_step(std::int64_t s) const {
  Time m{};
  m.s = s;
  m.t = r.reverse ? s : T - 1 - s;
  m.prev = r.reverse ? m.t + 1 : m.t - 1;
  m.first = r.reverse ? m.t == T - 1 : m.t == 0;
  m.h_prev = m.first ? h_init : at(r.h, m.prev, 0);
  m.gates = at(r.gates, m.t, 0);
  m.live = live_rows(lengths, N, m.t);
  return m;
}

void Executor::BackwardRecurrence::step(const Time& m) {
  save_rows(m.t, dh_carry, S, 0, h0, h1 - h0);
  if (projected) project(m);
  if (own.kernel) cell(m);
  if (reset_before) new_gate(m);
  barrier(threads);  // every thread's gate gradients are in
  if (m.s + 1 < T || wants_dhx) ex.step_gemm(r.gemm, b, m.s, m.live, m.gates, w_hh, dh_carry, tid, threads);
  restore_rows(m.t, dh_carry, S, 0, h0, h1 - h0);
}

void Executor::BackwardRecurrence::project(const Time& m) const {
  // dh_proj = dh_carry + dy (zero past a row's length), then dcell = dh_proj W_hr.
  float* const dhp = at(r.projection->dh_proj, m.t, 0);
  const float* const dy = at(r.dy, m.t, 0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = h0; j < h1; ++j)
      dhp[n * S + j] = past_end(lengths, n, m.t) ? 0.0f : dh_carry[n * S + j] + dy[n * r.ld_dy + j];
  barrier(threads);
  ex.step_gemm(r.projection->gemm, b, m.s, m.live, dhp, w_hr, dcell, tid, threads);
}

void Executor::BackwardRecurrence::cell(const Time& m) {
  const std::int64_t col0 = own.col0, cols = own.cols;
  args.dy = projected ? dcell + col0 : at(r.dy, m.t, col0);
  args.h = at(r.h, m.t, col0);
  args.h_prev = m.h_prev + col0;
  args.c = at(r.c, m.t, col0);
  args.c_prev = c_init ? (m.first ? c_init : at(r.c, m.prev, 0)) + col0 : nullptr;
  args.gates = m.gates + col0;
  args.dh_carry = (projected ? zeros : dh_carry) + col0;
  args.dc_carry = dc_carry ? dc_carry + col0 : nullptr;
  args.peephole = peephole ? peephole + col0 : nullptr;
  if (args.dc_carry) save_rows(m.t, dc_carry, H, H, col0, cols);
  (*own.kernel)(&args);
  if (args.dc_carry) restore_rows(m.t, dc_carry, H, H, col0, cols);
  if (!reset_before) zero_past_end(m.t, args.gates, cols);
}

// d(r * h_prev) = dn W_hn once every dn is in, then dr and its share of dh_{t-1} (both parts
// split like reset_before->gemm, so each thread reads the d(r * h_prev) columns it computed).
void Executor::BackwardRecurrence::new_gate(const Time& m) {
  barrier(threads);
  ex.step_gemm(r.reset_before->gemm, b, m.s, m.live, m.gates + 2 * H, w_hn, d_reset_h, tid, threads);
  if (!n_share.kernel) return;
  const std::int64_t c0 = n_share.col0;
  args = {};
  args.d_reset_h = d_reset_h + c0;
  args.h_prev = m.h_prev + c0;
  args.gates = m.gates + c0;
  args.dh_carry = dh_carry + c0;
  (*n_share.kernel)(&args);
  zero_past_end(m.t, m.gates + c0, n_share.cols);
}

// Variable lengths: no gate gradient for a row past its length (after the step's last kernel).
void Executor::BackwardRecurrence::zero_past_end(std::int64_t t, float* gates_at_col0, std::int64_t width) const {
  for (std::int64_t n = 0; n < N && lengths; ++n)
    if (past_end(lengths, n, t))
      for (std::int64_t g = 0; g < desc.reserve_gates(); ++g)
        std::memset(gates_at_col0 + n * R + g * H, 0, static_cast<std::size_t>(width) * sizeof(float));
}

void Executor::BackwardRecurrence::save_rows(std::int64_t t, const float* carried, std::int64_t ld, std::int64_t at,
                                             std::int64_t c0, std::int64_t width) const {
  for (std::int64_t n = 0; n < N && lengths; ++n)
    if (past_end(lengths, n, t)) copy_floats(save + n * 2 * H + at + c0, carried + n * ld + c0, width);
}

void Executor::BackwardRecurrence::restore_rows(std::int64_t t, float* carried, std::int64_t ld, std::int64_t at,
                                                std::int64_t c0, std::int64_t width) const {
  for (std::int64_t n = 0; n < N && lengths; ++n)
    if (past_end(lengths, n, t)) copy_floats(carried + n * ld + c0, save + n * 2 * H + at + c0, width);
}

void Executor::backward_recurrence(const RecurrenceStep& r, const Bindings& b, int tid, int threads) const {
  if (!r.gemm.blocking.generated() && tid != 0) return;  // OpenBLAS plans run a recurrence on one thread
  BackwardRecurrence(*this, r, b, tid, threads).run();
}

}  // namespace rnnjit
