#include "runtime/cuda/plan_runner.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/dropout.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::cuda {

PlanRunner::PlanRunner(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}

int PlanRunner::max_lanes() const { return most_lanes(*plan_); }

float* PlanRunner::resolve(const Operand& o, const DeviceBindings& b) const {
  if (o.buffer == Buffer::none) return nullptr;
  if (o.region >= 0) return reinterpret_cast<float*>(region_bytes(o.region, b)) + o.offset;
  const float* p = b.buffers[static_cast<std::size_t>(o.buffer)];
  return p ? const_cast<float*>(p) + o.offset : nullptr;
}

std::byte* PlanRunner::region_bytes(int region, const DeviceBindings& b) const {
  const Region& r = plan_->workspace.regions[static_cast<std::size_t>(region)];
  std::byte* base = r.space == Space::reserve ? b.reserve : r.space == Space::workspace ? b.workspace : nullptr;
  if (!base) throw Error(fmt::format("region {} of the {} is not bound", r.name, to_string(r.space)));
  return base + r.offset;
}

std::int32_t* PlanRunner::lengths_address(const DeviceBindings& b) const {
  if (plan_->lengths_region < 0) throw Error("GPU plan: no region for the sequence lengths");
  return reinterpret_cast<std::int32_t*>(region_bytes(plan_->lengths_region, b));
}

std::vector<std::uint64_t> PlanRunner::walk_key(const DeviceBindings& b, bool accumulate) const {
  auto address = [](const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); };
  std::vector<std::uint64_t> key;
  for (const float* p : b.buffers) key.push_back(address(p));
  key.insert(key.end(), {address(b.workspace), address(b.reserve), b.dropout_seed, address(b.device_lengths),
                         accumulate ? 1u : 0u, b.lengths ? 1u : 0u});
  if (b.lengths)
    for (std::int64_t n = 0; n < plan_->shape.batch; ++n) key.push_back(static_cast<std::uint32_t>(b.lengths[n]));
  return key;
}

std::int64_t PlanRunner::shortest(const DeviceBindings& b, std::int64_t steps) const {
  std::int64_t first = steps;
  if (b.lengths)
    for (std::int64_t n = 0; n < plan_->shape.batch; ++n) first = std::min<std::int64_t>(first, b.lengths[n]);
  return first;
}

void PlanRunner::past_end(const DeviceBindings& b, DeviceOps& ops, int lane, std::int64_t t, const float* src,
                          std::int64_t ld_src, float* dst, std::int64_t ld_dst, std::int64_t cols) const {
  if (!dst) return;
  if (!b.device_lengths) throw Error("variable lengths without their device copy");
  ops.rows_past_end(lane, PastEndCall{b.device_lengths, t, src, dst, plan_->shape.batch, cols, ld_src, ld_dst});
}

float* PlanRunner::timed(const Timed& t, std::int64_t time, const DeviceBindings& b) const {
  float* base = resolve(t.base, b);
  return base ? base + time * t.t_stride : nullptr;
}

void PlanRunner::run(const std::vector<Stage>& stages, const DeviceBindings& b, DeviceOps& ops, bool accumulate) const {
  for (const Stage& stage : stages) {
    const int lanes = static_cast<int>(stage.lanes.size());
    ops.begin_stage(lanes);
    for (int lane = 0; lane < lanes; ++lane)
      for (const Step& s : stage.lanes[static_cast<std::size_t>(lane)]) step(s, b, ops, lane, accumulate);
    ops.end_stage(lanes);
  }
}

void PlanRunner::step(const Step& s, const DeviceBindings& b, DeviceOps& ops, int lane, bool accumulate) const {
  if (const auto* g = std::get_if<GemmStep>(&s)) {
    ops.gemm(lane, GemmCall{g->trans_a, g->trans_b, g->m, g->n, g->k, resolve(g->a, b), g->lda,
                            masked_b(*g, b, ops, lane), g->ldb, resolve(g->c, b), g->ldc,
                            accumulate && g->beta == 0.0f ? 1.0f : g->beta});
  } else if (const auto* c = std::get_if<CopyStep>(&s)) {
    float* dst = resolve(c->dst, b);
    if (!dst) return;  // an optional output the caller did not ask for
    ops.copy(lane, CopyCall{resolve(c->src, b), dst, c->blocks, c->rows, c->cols, c->ld_src, c->ld_dst,
                            c->block_src, c->block_dst, resolve(c->plus, b)});
  } else if (const auto* m = std::get_if<MaskStep>(&s)) {
    // Zeroes rows past the sequence lengths: one launch over all T steps, only when some row is.
    if (shortest(b, m->steps) >= m->steps) return;
    float* dst = resolve(m->dst, b);
    if (!dst) return;
    if (!b.device_lengths) throw Error("variable lengths without their device copy");
    ops.rows_past_end(lane, PastEndCall{b.device_lengths, 0, nullptr, dst, m->batch, m->cols, 0, m->n_stride, m->steps,
                                        0, m->t_stride});
  } else if (const auto* d = std::get_if<DropoutStep>(&s)) {
    auto* keep = reinterpret_cast<std::uint8_t*>(region_bytes(d->mask_region, b));
    if (d->pass == Pass::forward)
      ops.dropout_forward(lane, resolve(d->src, b), resolve(d->dst, b), keep, d->elements, d->layer, d->p,
                          dropout_scale(d->p), b.dropout_seed);
    else
      ops.dropout_backward(lane, resolve(d->dst, b), keep, d->elements, dropout_scale(d->p));
  } else if (const auto* cs = std::get_if<ColumnSumStep>(&s)) {
    for (const Operand& dst : {cs->dst, cs->also_dst})  // the device sums once per output
      if (dst.buffer != Buffer::none)
        ops.column_sum(lane, ColumnSumCall{resolve(cs->src, b), resolve(cs->factor, b), resolve(dst, b), cs->rows,
                                           cs->cols, cs->ld_src, cs->ld_factor,
                                           accumulate && cs->beta == 0.0f ? 1.0f : cs->beta});
  } else if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
    if (r->pass == Pass::forward) forward_recurrence(*r, b, ops, lane);
    else backward_recurrence(*r, b, ops, lane);
  } else if (const auto* p = std::get_if<PackStep>(&s)) {
    throw Error(fmt::format("GPU plan: unexpected pack step '{}'", p->what));
  }
}

const float* PlanRunner::masked_b(const GemmStep& g, const DeviceBindings& b, DeviceOps& ops, int lane) const {
  const float* src = resolve(g.b, b);
  const VariableLengths& f = g.finished;
  if (!f.k_rows_skipped || f.b_masked.buffer == Buffer::none) return src;
  const std::int64_t steps = g.k / f.sequences;
  if (shortest(b, steps) >= steps) return src;
  if (!b.device_lengths) throw Error("variable lengths without their device copy");
  float* masked = resolve(f.b_masked, b);
  // Row (t, n) of B: t * N + n.
  ops.copy(lane, CopyCall{src, masked, 1, g.k, g.n, g.ldb, g.ldb, 0, 0});
  ops.rows_past_end(lane, PastEndCall{b.device_lengths, 0, nullptr, masked, f.sequences, g.n, 0, g.ldb, steps, 0,
                                      f.sequences * g.ldb});
  return masked;
}

void PlanRunner::step_gemm(const GemmStep& g, const float* a, const DeviceBindings& b, float* c, DeviceOps& ops,
                           int lane) const {
  ops.gemm(lane, GemmCall{g.trans_a, g.trans_b, g.m, g.n, g.k, a, g.lda, resolve(g.b, b), g.ldb, c, g.ldc, g.beta});
}

// Without a projection and with no row past its end, the whole recurrence may go to the device's
// persistent kernel (persistent_forward). Else per step (t in processing order): gh = h_prev
// W_hh^T, then the gate kernel; with a projection the kernel writes o * tanh(c) to cell_out and
// h = cell_out W_hr^T. The reset-before GRU (reset_before) runs two GEMMs and two kernels a
// step: gh's r,z columns from h_prev, the part-0 kernel (r * h_prev into reset_h, z), gh's n
// columns from reset_h, the part-1 kernel (h). As the CPU executor, less the thread split.
// Variable lengths, only at steps where some row is past its end: such a row carries its state
// (h, and c, from the previous step; an in-place c, inference, is saved in carry_save before the
// kernel), by masked row copies after the step, and its kernel outputs that a weight gradient
// reads (o * tanh(c), r * h_prev) are zeroed.
void PlanRunner::forward_recurrence(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const {
  if (r.reset_before) return forward_reset_before(r, b, ops, lane);
  const Projection* const projection = r.projection ? &*r.projection : nullptr;
  float* const gh = resolve(r.gh, b);
  float* const h_init = resolve(r.h_init, b);
  float* const c_init = resolve(r.c_init, b);
  const float* const peephole = resolve(r.peephole, b);  // [3, H] from unit 0: the kernel covers every unit
  const std::int64_t T = r.steps, H = plan_->kernels[static_cast<std::size_t>(r.gate.kernel)].hidden, ldh = r.ld_state;
  const std::int64_t first_past = shortest(b, T);
  if (!projection && first_past >= T && persistent_forward(r, b, ops, lane)) return;
  const bool c_in_place = r.c.t_stride == 0;  // inference: one c buffer updated in place
  float* const save = resolve(r.carry_save, b);  // [N, 2H]: h at 0, c at H
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = r.reverse ? T - 1 - s : s, prev = r.reverse ? t + 1 : t - 1;
    const bool carry = t >= first_past;  // some row is past its end at t
    const float* h_prev = s == 0 ? h_init : timed(r.h, prev, b);
    float* const h_out = timed(r.h, t, b);
    step_gemm(r.gemm, h_prev, b, gh, ops, lane);
    GateForwardArgs args = step_args(r, t, h_prev, b);
    args.c_prev = c_init ? (s == 0 ? c_init : timed(r.c, prev, b)) : nullptr;
    args.h_out = projection ? timed(projection->cell_out, t, b) : h_out;
    args.c_out = timed(r.c, t, b);
    args.peephole = peephole;
    if (carry && args.c_out && c_in_place) past_end(b, ops, lane, t, args.c_out, H, save + H, 2 * H, H);
    ops.gate_forward(lane, r.gate.kernel, args);
    if (carry && args.c_out)
      past_end(b, ops, lane, t, c_in_place ? save + H : args.c_prev, c_in_place ? 2 * H : H, args.c_out, H, H);
    // dW_hr reads o * tanh(c): zero where the kernel made it of x's padding (NaN, maybe).
    if (carry && projection) past_end(b, ops, lane, t, nullptr, 0, args.h_out, H, H);
    if (projection) step_gemm(projection->gemm, timed(projection->cell_out, t, b), b, h_out, ops, lane);
    if (carry) past_end(b, ops, lane, t, h_prev, ldh, h_out, ldh, r.state);
  }
}

bool PlanRunner::persistent_forward(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops,
                                    int lane) const {
  const GemmStep& g = r.gemm;
  // The kernel keeps every step's h (it reads h_{t-1} while other blocks write h_t).
  if (g.trans_a || !g.trans_b || g.beta != 0.0f || g.m != r.batch || r.h.t_stride == 0) return false;
  PersistentForwardArgs a{};
  a.w_hh = resolve(g.b, b);
  a.ld_w = g.ldb;
  a.gx = resolve(r.gx.base, b);
  a.gx_t = r.gx.t_stride;
  a.bias_ih = resolve(r.bias_ih, b);
  a.bias_hh = resolve(r.bias_hh, b);
  a.peephole = resolve(r.peephole, b);
  a.h_init = resolve(r.h_init, b);
  a.c_init = resolve(r.c_init, b);
  a.h = resolve(r.h.base, b);
  a.h_t = r.h.t_stride;
  a.c = resolve(r.c.base, b);
  a.c_t = r.c.t_stride;
  a.gates = resolve(r.gates.base, b);
  a.gates_t = r.gates.t_stride;
  a.steps = r.steps;
  a.reverse = r.reverse ? 1 : 0;
  return ops.persistent_forward(lane, r.gate.kernel, a);
}

GateForwardArgs PlanRunner::step_args(const RecurrenceStep& r, std::int64_t t, const float* h_prev,
                                      const DeviceBindings& b) const {
  GateForwardArgs args{};
  args.gx = timed(r.gx, t, b);
  args.gh = resolve(r.gh, b);
  args.bias_ih = resolve(r.bias_ih, b);
  args.bias_hh = resolve(r.bias_hh, b);
  args.h_prev = h_prev;
  args.gates = timed(r.gates, t, b);
  return args;
}

void PlanRunner::forward_reset_before(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops,
                                      int lane) const {
  const ResetBefore& rb = r.reset_before.value();
  float* const gh = resolve(r.gh, b);
  float* const gh_n = resolve(rb.gemm.c, b);  // gh's n columns
  float* const z = resolve(rb.z, b);
  float* const h_init = resolve(r.h_init, b);
  const std::int64_t T = r.steps, first_past = shortest(b, T);
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = r.reverse ? T - 1 - s : s, prev = r.reverse ? t + 1 : t - 1;
    const float* h_prev = s == 0 ? h_init : timed(r.h, prev, b);
    float* const reset_h = timed(rb.reset_h, t, b);  // training: this step's, kept for dW_hn
    step_gemm(r.gemm, h_prev, b, gh, ops, lane);
    GateForwardArgs args = step_args(r, t, h_prev, b);
    args.h_out = reset_h;  // r * h_prev
    args.c_out = z;
    ops.gate_forward(lane, r.gate.kernel, args);
    // dW_hn reads r * h_prev: zero where the kernel made it of x's padding (NaN, maybe).
    if (t >= first_past) past_end(b, ops, lane, t, nullptr, 0, reset_h, r.ld_state, r.state);
    step_gemm(rb.gemm, reset_h, b, gh_n, ops, lane);
    args.c_prev = z;
    args.h_out = timed(r.h, t, b);
    args.c_out = nullptr;
    ops.gate_forward(lane, rb.part1.kernel, args);
    if (t >= first_past) past_end(b, ops, lane, t, h_prev, r.ld_state, args.h_out, r.ld_state, r.state);
  }
}

// Per step, walking the forward's steps backwards: (projection: dh_proj = dh_carry + dy,
// dcell = dh_proj W_hr), the gate kernel, then dh_carry (+)= dgates W_hh. The reset-before GRU:
// the part-0 kernel (dz, dn, dh_carry = dh z), d_reset_h = dn W_hn, the part-1 kernel (dr,
// dh_carry += d_reset_h r), then dh_carry += [dr, dz] W_hh[r,z rows] (the gemm's beta is 1).
// Variable lengths, only at steps where some row is past its end: such a row keeps its carried
// gradients (dh_carry, dc_carry saved in carry_save before, restored after the step's GEMM;
// dh_proj zero) and gets zero gate gradients (after the step's last gate kernel).
void PlanRunner::backward_recurrence(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops, int lane) const {
  if (r.reset_before) return backward_reset_before(r, b, ops, lane);
  const Projection* const projection = r.projection ? &*r.projection : nullptr;
  float* const h_init = resolve(r.h_init, b);
  float* const c_init = resolve(r.c_init, b);
  float* const dh_carry = resolve(r.dh_carry, b);
  float* const dc_carry = resolve(r.dc_carry, b);
  float* const dcell = projection ? resolve(projection->dcell, b) : nullptr;
  float* const zeros = projection ? resolve(projection->zeros, b) : nullptr;
  const float* const peephole = resolve(r.peephole, b);
  const KernelDesc& desc = plan_->kernels[static_cast<std::size_t>(r.gate.kernel)];
  const std::int64_t T = r.steps, N = r.batch, S = r.state, H = desc.hidden;
  const std::int64_t R = desc.reserve_gates() * H, first_past = shortest(b, T);
  float* const save = resolve(r.carry_save, b);  // [N, 2H]: dh_carry at 0, dc_carry at H
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = r.reverse ? s : T - 1 - s, prev = r.reverse ? t + 1 : t - 1;
    const bool first = r.reverse ? t == T - 1 : t == 0;  // the first step of the forward pass
    const bool carry = t >= first_past;  // some row is past its end at t
    float* const gates = timed(r.gates, t, b);
    if (carry) past_end(b, ops, lane, t, dh_carry, S, save, 2 * H, S);
    if (projection) {
      float* const dhp = timed(projection->dh_proj, t, b);
      ops.add(lane, dh_carry, S, timed(r.dy, t, b), r.ld_dy, dhp, S, N, S);
      if (carry) past_end(b, ops, lane, t, nullptr, 0, dhp, S, S);
      step_gemm(projection->gemm, dhp, b, dcell, ops, lane);
    }
    GateBackwardArgs args{};
    args.dy = projection ? dcell : timed(r.dy, t, b);
    args.h = timed(r.h, t, b);
    args.h_prev = first ? h_init : timed(r.h, prev, b);
    args.c = timed(r.c, t, b);
    args.c_prev = c_init ? (first ? c_init : timed(r.c, prev, b)) : nullptr;
    args.gates = gates;
    args.dh_carry = projection ? zeros : dh_carry;
    args.dc_carry = dc_carry;
    args.peephole = peephole;
    if (carry && dc_carry) past_end(b, ops, lane, t, dc_carry, H, save + H, 2 * H, H);
    ops.gate_backward(lane, r.gate.kernel, args);
    if (carry) {
      if (dc_carry) past_end(b, ops, lane, t, save + H, 2 * H, dc_carry, H, H);
      past_end(b, ops, lane, t, nullptr, 0, gates, R, R);
    }
    step_gemm(r.gemm, gates, b, dh_carry, ops, lane);
    if (carry) past_end(b, ops, lane, t, save, 2 * H, dh_carry, S, S);
  }
}

void PlanRunner::backward_reset_before(const RecurrenceStep& r, const DeviceBindings& b, DeviceOps& ops,
                                       int lane) const {
  float* const h_init = resolve(r.h_init, b);
  float* const dh_carry = resolve(r.dh_carry, b);
  const ResetBefore& rb = r.reset_before.value();
  float* const d_reset_h = resolve(rb.d_reset_h, b);
  const KernelDesc& desc = plan_->kernels[static_cast<std::size_t>(r.gate.kernel)];
  const std::int64_t H = desc.hidden, T = r.steps, R = desc.reserve_gates() * H, first_past = shortest(b, T);
  float* const save = resolve(r.carry_save, b);  // [N, 2H]: dh_carry at 0
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = r.reverse ? s : T - 1 - s, prev = r.reverse ? t + 1 : t - 1;
    const bool first = r.reverse ? t == T - 1 : t == 0;  // the first step of the forward pass
    const bool carry = t >= first_past;  // some row is past its end at t
    float* const gates = timed(r.gates, t, b);
    if (carry) past_end(b, ops, lane, t, dh_carry, H, save, 2 * H, H);
    GateBackwardArgs args{};
    args.dy = timed(r.dy, t, b);
    args.h_prev = first ? h_init : timed(r.h, prev, b);
    args.gates = gates;
    args.dh_carry = dh_carry;
    ops.gate_backward(lane, r.gate.kernel, args);
    step_gemm(rb.gemm, gates + 2 * H, b, d_reset_h, ops, lane);  // A: the dn columns
    args.dy = nullptr;  // part 1 reads d(r * h_prev) instead
    args.d_reset_h = d_reset_h;
    ops.gate_backward(lane, rb.part1.kernel, args);
    if (carry) past_end(b, ops, lane, t, nullptr, 0, gates, R, R);
    step_gemm(r.gemm, gates, b, dh_carry, ops, lane);
    if (carry) past_end(b, ops, lane, t, save, 2 * H, dh_carry, H, H);
  }
}

}  // namespace rnnjit::cuda
