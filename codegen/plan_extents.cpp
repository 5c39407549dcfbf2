#include "codegen/plan_extents.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "rnnjit/weights.hpp"

namespace rnnjit {
namespace {

void matrix(const std::function<void(const Extent&)>& fn, const Operand& o, std::int64_t rows, std::int64_t cols,
            std::int64_t ld, std::int64_t t_stride = 0, std::int64_t steps = 1) {
  if (o.buffer == Buffer::none || rows == 0 || cols == 0) return;
  const std::int64_t span = (steps - 1) * t_stride;
  fn({o, o.offset + std::min<std::int64_t>(0, span), o.offset + std::max<std::int64_t>(0, span) + (rows - 1) * ld + cols});
}

void gemm(const std::function<void(const Extent&)>& fn, const GemmStep& g) {
  matrix(fn, g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  if (g.blocking.packed_b) matrix(fn, g.b, 1, packed_elements(g.blocking, g.n / g.blocking.group, g.k), 0);
  else matrix(fn, g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  matrix(fn, g.finished.b_masked, g.k, g.n, g.ldb);  // B's copy, laid out as B
  matrix(fn, g.c, g.m, g.c_columns_written(), g.ldc);
  if (g.blocking.pack_a) matrix(fn, g.a_panels, 1, a_panel_elements(g), 0);
  matrix(fn, g.h0.block.at, g.h0.block.rows, g.h0.block.cols, g.h0.block.ld);
}

void recurrence(const Plan& p, const std::function<void(const Extent&)>& fn, const RecurrenceStep& r) {
  const KernelDesc& k = p.kernels[static_cast<std::size_t>(r.gate.kernel)];
  const std::int64_t H = k.hidden, GH = k.gates() * H, R = k.reserve_gates() * H, N = r.batch, T = r.steps;
  const std::int64_t S = r.state, ldh = r.ld_state;
  const bool lstm = k.cell_kind() == CellKind::lstm;
  // A per-step GEMM without its A, which the per-step operands below cover (or, with the
  // reset before, A is reset_h forward and dn backward; the forward projection's C is h).
  const auto step_gemm = [&](GemmStep g) {
    g.a = {};
    gemm(fn, g);
  };
  step_gemm(r.gemm);
  if (r.projection) step_gemm(r.projection->gemm);
  if (const auto& rb = r.reset_before) {
    step_gemm(rb->gemm);
    if (r.pass == Pass::forward) {
      matrix(fn, rb->reset_h.base, N, S, ldh, rb->reset_h.t_stride, T);
      matrix(fn, rb->z, N, H, H);
    } else {
      matrix(fn, rb->d_reset_h, N, H, H);
    }
  }
  matrix(fn, r.h.base, N, S, ldh, r.h.t_stride, T);
  matrix(fn, r.h_init, N, S, ldh);
  matrix(fn, r.carry_save, N, 2 * H, 2 * H);
  if (lstm) {
    matrix(fn, r.c.base, N, H, H, r.c.t_stride, T);
    matrix(fn, r.c_init, N, H, H);
  }
  if (k.peephole) matrix(fn, r.peephole, 1, 3 * H, 3 * H);
  if (r.pass == Pass::forward) {
    matrix(fn, r.gx.base, N, GH, k.gx_stride(), r.gx.t_stride, T);
    matrix(fn, r.bias_ih, 1, GH, GH);
    matrix(fn, r.bias_hh, 1, GH, GH);
    if (k.training) matrix(fn, r.gates.base, N, R, R, r.gates.t_stride, T);
    if (r.projection) matrix(fn, r.projection->cell_out.base, N, H, H, r.projection->cell_out.t_stride, T);
  } else {
    matrix(fn, r.gates.base, N, R, R, r.gates.t_stride, T);
    matrix(fn, r.dy.base, N, S, r.ld_dy, r.dy.t_stride, T);
    matrix(fn, r.dh_carry, N, S, S);
    if (lstm) matrix(fn, r.dc_carry, N, H, H);
    if (const auto& pr = r.projection) {
      matrix(fn, pr->dh_proj.base, N, S, S, pr->dh_proj.t_stride, T);
      matrix(fn, pr->dcell, N, H, H);
      matrix(fn, pr->zeros, N, H, H);
    }
  }
}

}  // namespace

void for_each_extent(const Plan& p, const std::vector<Stage>& stages, const std::function<void(const Extent&)>& fn) {
  for (const Stage& stage : stages)
    for (const auto& lane : stage.lanes)
      for (const Step& step : lane) {
        if (const auto* g = std::get_if<GemmStep>(&step)) gemm(fn, *g);
        if (const auto* c = std::get_if<CopyStep>(&step)) {
          matrix(fn, c->src, c->rows, c->cols, c->ld_src, c->block_src, c->blocks);
          matrix(fn, c->plus, c->rows, c->cols, c->ld_src, c->block_src, c->blocks);
          matrix(fn, c->dst, c->rows, c->cols, c->ld_dst, c->block_dst, c->blocks);
        }
        if (const auto* m = std::get_if<MaskStep>(&step)) matrix(fn, m->dst, m->batch, m->cols, m->n_stride, m->t_stride, m->steps);
        if (const auto* d = std::get_if<DropoutStep>(&step)) {
          matrix(fn, d->src, 1, d->elements, 0);
          matrix(fn, d->dst, 1, d->elements, 0);
          if (p.workspace.regions[static_cast<std::size_t>(d->mask_region)].size < static_cast<std::size_t>(d->elements))
            throw Error(fmt::format("plan error: dropout mask of {} is smaller than its {} elements", d->what, d->elements));
        }
        if (const auto* c = std::get_if<ColumnSumStep>(&step)) {
          matrix(fn, c->src, c->rows, c->cols, c->ld_src);
          matrix(fn, c->factor, c->rows, c->cols, c->ld_factor);
          matrix(fn, c->dst, 1, c->cols, c->cols);
          matrix(fn, c->also_dst, 1, c->cols, c->cols);
        }
        if (const auto* r = std::get_if<RecurrenceStep>(&step)) recurrence(p, fn, *r);
        if (const auto* k = std::get_if<PackStep>(&step)) {
          if (k->transpose) matrix(fn, k->src, k->groups * k->blocking.group, k->k, k->k);
          else matrix(fn, k->src, k->k, k->groups * k->blocking.group, k->ld);
          matrix(fn, k->dst, 1, packed_elements(k->blocking, k->groups, k->k), 0);
        }
      }
}

std::int64_t buffer_elements(const Plan& p, Buffer b) {
  switch (b) {
    case Buffer::x:
    case Buffer::dx: return x_elements(p.config, p.shape);
    case Buffer::y:
    case Buffer::dy: return y_elements(p.config, p.shape);
    case Buffer::hx: case Buffer::hy: case Buffer::dhy: case Buffer::dhx: return state_elements(p.config, p.shape);
    case Buffer::cx: case Buffer::cy: case Buffer::dcy: case Buffer::dcx: return cell_state_elements(p.config, p.shape);
    case Buffer::weights:
    case Buffer::dweights: return WeightLayout(p.config).total_elements();
    case Buffer::workspace: return static_cast<std::int64_t>(p.workspace.workspace_bytes / sizeof(float));
    case Buffer::reserve: return static_cast<std::int64_t>(p.workspace.reserve_bytes / sizeof(float));
    case Buffer::packed: return static_cast<std::int64_t>(p.workspace.packed_bytes / sizeof(float));
    case Buffer::none: return 0;
  }
  return 0;
}

void check_extents(const Plan& p) {
  // Each buffer's size once (WeightLayout is linear in layers: per operand it made this quadratic).
  std::int64_t limits[kBufferCount];
  for (int b = 0; b < kBufferCount; ++b) limits[b] = buffer_elements(p, static_cast<Buffer>(b));
  for (const auto* stages : {&p.pack_weights, &p.forward, &p.backward_data, &p.backward_weights})
    for_each_extent(p, *stages, [&](const Extent& e) {
      const std::int64_t limit =
          e.operand.region >= 0
              ? static_cast<std::int64_t>(p.workspace.regions[static_cast<std::size_t>(e.operand.region)].size / sizeof(float))
              : limits[static_cast<int>(e.operand.buffer)];
      if (e.begin < 0 || e.end > limit)
        throw Error(fmt::format("plan error: an operand in {} reaches [{}, {}) outside its {} elements",
                                e.operand.region >= 0 ? p.workspace.regions[static_cast<std::size_t>(e.operand.region)].name
                                                      : std::string(to_string(e.operand.buffer)),
                                e.begin, e.end, limit));
    });
}

std::vector<std::uint8_t> region_calls(const Plan& p) {
  std::vector<std::uint8_t> calls(p.workspace.regions.size(), 0);
  std::uint8_t bit = 1;
  for (const auto* stages : {&p.pack_weights, &p.forward, &p.backward_data, &p.backward_weights}) {
    for_each_extent(p, *stages, [&](const Extent& e) {
      if (e.operand.region >= 0) calls[static_cast<std::size_t>(e.operand.region)] |= bit;
    });
    for (const Stage& stage : *stages)  // a dropout step's mask region is no operand
      for (const auto& lane : stage.lanes)
        for (const Step& step : lane)
          if (const auto* d = std::get_if<DropoutStep>(&step)) calls[static_cast<std::size_t>(d->mask_region)] |= bit;
    bit = static_cast<std::uint8_t>(bit << 1);
  }
  for (std::uint8_t& c : calls)
    if (c == 0) c = kAllCalls;
  return calls;
}

void overlay_workspace_of_calls(Plan& p) {
  const std::vector<std::uint8_t> calls = region_calls(p);
  // Largest first (first fit decreasing): small regions then fill the gaps beside large ones.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p.workspace.regions.size(); ++i)
    if (p.workspace.regions[i].space == Space::workspace) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return p.workspace.regions[a].size > p.workspace.regions[b].size;
  });
  std::vector<std::size_t> placed;  // workspace regions laid out so far
  std::size_t end = 0;
  for (std::size_t i : order) {
    Region& r = p.workspace.regions[i];
    // The lowest candidate (0 or the end of a region that shares a call) clear of all of those.
    auto clashes = [&](std::size_t offset) {
      for (std::size_t j : placed) {
        const Region& q = p.workspace.regions[j];
        if ((calls[i] & calls[j]) && offset < q.offset + q.size && q.offset < offset + r.size) return true;
      }
      return false;
    };
    std::size_t best = std::numeric_limits<std::size_t>::max();
    if (!clashes(0)) best = 0;
    for (std::size_t j : placed) {
      const Region& q = p.workspace.regions[j];
      const std::size_t candidate = align_to_region(q.offset + q.size);
      if ((calls[i] & calls[j]) && candidate < best && !clashes(candidate)) best = candidate;
    }
    r.offset = best;
    placed.push_back(i);
    end = std::max<std::size_t>(end, align_to_region(r.offset + r.size));
  }
  p.workspace.workspace_bytes = end;
}

}  // namespace rnnjit
