// Backward weights: per layer and direction a few large GEMMs over all T*N rows (dW_ih, dW_hh,
// the reset-before GRU's dW_hn, dW_hr) and the column sums of the bias and peephole gradients.
// Their beta is 0 here; the executor turns it into 1 to accumulate.
#include <optional>

#include <fmt/format.h>

#include "codegen/planner/planner_impl.hpp"

namespace rnnjit::planner {
namespace {

// Whether two packs of B leave the same panels in the same place.
bool same_panels(const PackStep& a, const PackStep& b) {
  return a.src == b.src && a.dst == b.dst && a.k == b.k && a.groups == b.groups && a.blocking.n_r == b.blocking.n_r &&
         a.blocking.group == b.blocking.group && a.transpose == b.transpose && a.ld == b.ld &&
         a.sequences == b.sequences && a.blocking.bf16 == b.blocking.bf16 && a.blocking.cuts() == b.blocking.cuts();
}

}  // namespace

void Planner::plan_backward_weights() {
  plan_input(plan_.backward_weights);
  // The two directions' weight gradients run one after the other in one lane, every GEMM on all
  // threads (which share its tiles as they go), rather than as a lane per direction on a thread
  // each: a core slowed by its neighbours would hold up the whole layer. Then the directions'
  // GEMMs also share one lane's scratch (lane 0).
  const bool one_lane = s_.D == 2 && plan_.threads > 1 && generate_gemms();
  for (std::int64_t l = 0; l < s_.L; ++l) {
    Stage stage;
    for (int d = 0; d < s_.D; ++d) add_lane(stage, weight_gradient_lane(l, d, one_lane), one_lane);
    plan_.backward_weights.push_back(std::move(stage));
  }
}

std::vector<Step> Planner::weight_gradient_lane(std::int64_t l, int d, bool one_lane) {
  std::vector<Step> lane;
  const std::size_t dw_ih_index = plan_input_weight_gradients(lane, l, d, one_lane);
  plan_recurrent_weight_gradients(lane, l, d, one_lane, dw_ih_index);
  if (s_.gru && config_.bias)  // its r and z rows were summed with db_ih's
    lane.push_back(ColumnSumStep{.what = fmt::format("db_hh (n) l{} d{}", l, d),
                                 .src = shifted(region_operand(plan_.workspace, regions_.gates[ld_index(l, d)]), 2 * s_.H),
                                 .dst = dweight(l, d, ParamKind::bias_hh, 2 * s_.H, 1), .rows = s_.T * s_.N,
                                 .cols = s_.H, .ld_src = s_.R});
  if (config_.peephole) plan_peephole_gradient(lane, l, d);
  return lane;
}

// A weight gradient's GEMM on the lane's threads and scratch, or (one_lane) on all threads with lane 0's.
GemmStep Planner::weight_gradient_gemm(GemmStep g, std::int64_t group, int d, bool one_lane,
                                       std::vector<Step>* pack_into) {
  g = with_fpmath(std::move(g));
  if (g.blocking.bf16) g.h0 = {};  // bf16 tiles sum over all of K: a zero h0's rows add zeros
  return one_lane ? generated(std::move(g), group, plan_.threads, false, 0, pack_into)
                  : generated(std::move(g), group, 0, false, d, pack_into);
}

// dW_ih = dgates^T x (GRU: in two pieces) and the bias gradients; returns where the last dW_ih
// GEMM stands in `lane`.
std::size_t Planner::plan_input_weight_gradients(std::vector<Step>& lane, std::int64_t l, int d, bool one_lane) {
  const auto& s = s_;
  const Operand gates = region_operand(plan_.workspace, regions_.gates[ld_index(l, d)]);
  const std::int64_t in = config_.layer_input_size(l);
  std::size_t dw_ih_index = 0;
  std::optional<PackStep> x_panels;  // the pieces' B (the layer input) as last packed
  for (const InputSide& piece : input_side()) {
    GemmStep dw{.what = fmt::format("dW_ih l{} d{}", l, d), .trans_a = true, .m = piece.width, .n = in,
                .k = s.T * s.N, .a = shifted(gates, piece.col), .b = layer_input(l, d),
                .c = dweight(l, d, ParamKind::weight_ih, piece.row, in), .lda = s.R, .ldb = ld_input(l), .ldc = in,
                .finished = {.k_rows_skipped = true, .sequences = s.N}};
    // Its A panels kept for dW_hh where the two share them (share_a_panels() decides, and gives
    // them their region).
    if (!s.gru) dw.a_panels_use = GemmStep::APanels::keep_for_next;
    std::vector<Step> packs;
    dw = weight_gradient_gemm(dw, in, d, one_lane, &packs);
    // The GRU's pieces multiply the same B: packed once where their panels are alike.
    const auto* pack = packs.empty() ? nullptr : std::get_if<PackStep>(&packs.front());
    if (!pack || !x_panels || !same_panels(*pack, *x_panels)) {
      if (pack) x_panels = *pack;
      for (Step& step : packs) lane.push_back(std::move(step));
    }
    // A B that is not packed is masked into a copy (variable lengths). Its home: the lane's B
    // scratch (no GEMM packs).
    if (!dw.blocking.packed_b) {
      const int scratch_lane = one_lane ? 0 : d;
      const std::int64_t elements = (dw.k - 1) * dw.ldb + dw.n;  // as B
      const int scratch = lane_region(regions_.b_panels.at(static_cast<std::size_t>(scratch_lane)), "b_panels",
                                      scratch_lane, elements);
      dw.finished.b_masked = region_operand(plan_.workspace, scratch);
    }
    dw_ih_index = lane.size();
    lane.push_back(std::move(dw));
    if (!config_.bias) continue;
    // b_ih and b_hh add to the same pre-activations, so one column sum writes both; but for the
    // GRU's n rows (the plain GRU puts r between b_hn and dn, the reset-before one keeps their
    // gradients in columns of their own), summed for db_hh below.
    const bool same_bias_rows = !s.gru || piece.col + piece.width <= 2 * s.H;
    ColumnSumStep db{.what = fmt::format("db_ih{} l{} d{}", same_bias_rows ? " and db_hh" : "", l, d),
                     .src = shifted(gates, piece.col), .dst = dweight(l, d, ParamKind::bias_ih, piece.row, 1),
                     .rows = s.T * s.N, .cols = piece.width, .ld_src = s.R};
    if (same_bias_rows) db.also_dst = dweight(l, d, ParamKind::bias_hh, piece.row, 1);
    lane.push_back(std::move(db));
  }
  return dw_ih_index;
}

// dW_hh pairs the gradient at time t with h at the previous time of this direction: h_init,
// then the output, lie in one run of rows (h_init_operand()), so the h_prev of steps 0..T-1 are
// the T*N rows from one step before the output (forward) or after it. Then the reset-before
// GRU's dW_hn on r * h_prev, and dW_hr.
void Planner::plan_recurrent_weight_gradients(std::vector<Step>& lane, std::int64_t l, int d, bool one_lane,
                                              std::size_t dw_ih_index) {
  const auto& s = s_;
  const std::int64_t ldh = s.W;
  const Operand gates = region_operand(plan_.workspace, regions_.gates[ld_index(l, d)]);
  const Operand h_prev = shifted(layer_output(l), (config_.reversed(d) ? 1 : -1) * s.N * ldh + d * s.S);
  // A zero h0 leaves its rows out of the sum (GemmStep::h0), of dW_hn's r * h_prev too.
  const H0Rows h0{.block = {.at = h_init_operand(l, d), .rows = s.N, .cols = s.S, .ld = ldh},
                  .last = config_.reversed(d) || s.T == 1};
  // The reset-before GRU's n rows multiply r * h_prev, kept per step: one GEMM of their own.
  const std::int64_t h_rows = s.reset_before ? 2 * s.H : s.GH;
  GemmStep dw{.what = fmt::format("dW_hh l{} d{}", l, d), .trans_a = true, .m = h_rows, .n = s.S, .k = s.T * s.N,
              .a = gates, .b = h_prev, .c = dweight(l, d, ParamKind::weight_hh), .lda = s.R, .ldb = ldh, .ldc = s.S,
              .h0 = h0};
  const bool may_share = std::get<GemmStep>(lane[dw_ih_index]).a_panels_use == GemmStep::APanels::keep_for_next;
  if (may_share) dw.a_panels_use = GemmStep::APanels::packed_before;
  dw = weight_gradient_gemm(std::move(dw), s.S, d, one_lane, &lane);
  if (may_share) share_a_panels(std::get<GemmStep>(lane[dw_ih_index]), dw, one_lane ? 0 : d);
  lane.push_back(std::move(dw));
  if (s.reset_before) {
    const Operand reset_h = region_operand(plan_.workspace, regions_.reset_hs[static_cast<std::size_t>(l)]);
    GemmStep dw_hn{.what = fmt::format("dW_hn l{} d{} (on r * h_prev)", l, d), .trans_a = true, .m = s.H, .n = s.S,
                   .k = s.T * s.N, .a = shifted(gates, 2 * s.H), .b = shifted(reset_h, d * s.S),
                   .c = dweight(l, d, ParamKind::weight_hh, 2 * s.H, s.S), .lda = s.R, .ldb = ldh, .ldc = s.S,
                   .h0 = h0};
    lane.push_back(weight_gradient_gemm(std::move(dw_hn), s.S, d, one_lane, &lane));
  }
  if (s.P) {  // dW_hr = sum over (t, n) of dh_proj^T (o * tanh(c))
    const std::size_t ld = ld_index(l, d);
    GemmStep dw_hr{.what = fmt::format("dW_hr l{} d{}", l, d), .trans_a = true, .m = s.P, .n = s.H, .k = s.T * s.N,
                   .a = region_operand(plan_.workspace, regions_.dh_proj[ld]),
                   .b = region_operand(plan_.workspace, regions_.cell_out[ld]),
                   .c = dweight(l, d, ParamKind::weight_hr), .lda = s.P, .ldb = s.H, .ldc = s.H};
    lane.push_back(weight_gradient_gemm(std::move(dw_hr), s.H, d, one_lane, &lane));
  }
}

// dP_i, dP_f: the i and f gradients times c_{t-1} (c_init at the direction's first step, else c
// at the previous time); dP_o: the o gradient times c_t. Rows past a length add nothing (their
// gate gradients are zero).
void Planner::plan_peephole_gradient(std::vector<Step>& lane, std::int64_t l, int d) {
  const auto& s = s_;
  const std::size_t ld = ld_index(l, d);
  const Operand gates = region_operand(plan_.workspace, regions_.gates[ld]);
  const Operand c = region_operand(plan_.workspace, regions_.c[ld]);
  const Operand c_init = region_operand(plan_.workspace, regions_.c_init[ld]);
  const bool reverse = config_.reversed(d);
  const std::int64_t first_t = reverse ? s.T - 1 : 0, step = s.N * s.R;
  for (int gate : {0, 1}) {
    const Operand dp = dweight(l, d, ParamKind::weight_peephole, gate, s.H);
    const std::string what = fmt::format("dP_{} l{} d{}", gate == 0 ? 'i' : 'f', l, d);
    lane.push_back(ColumnSumStep{.what = what + " (first step, c_init)",
                                 .src = shifted(gates, first_t * step + gate * s.H), .dst = dp, .rows = s.N,
                                 .cols = s.H, .ld_src = s.R, .factor = c_init, .ld_factor = s.H});
    if (s.T > 1)
      lane.push_back(ColumnSumStep{.what = what, .src = shifted(gates, (reverse ? 0 : s.N) * s.R + gate * s.H),
                                   .dst = dp, .rows = (s.T - 1) * s.N, .cols = s.H, .ld_src = s.R, .beta = 1.0f,
                                   .factor = shifted(c, reverse ? s.N * s.H : 0), .ld_factor = s.H});
  }
  lane.push_back(ColumnSumStep{.what = fmt::format("dP_o l{} d{}", l, d), .src = shifted(gates, 3 * s.H),
                               .dst = dweight(l, d, ParamKind::weight_peephole, 2, s.H), .rows = s.T * s.N,
                               .cols = s.H, .ld_src = s.R, .factor = c, .ld_factor = s.H});
}

}  // namespace rnnjit::planner
