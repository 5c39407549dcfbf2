// The forward pass: per layer, the input projection of all T steps, then each direction's time
// loop (a RecurrenceStep) with the copies of its initial state in and its final state out; then y.
#include <fmt/format.h>

#include "codegen/planner/planner_impl.hpp"

namespace rnnjit::planner {

void Planner::plan_forward() {
  const auto& s = s_;
  // Directions as lanes (a thread each), or a direction's batch rows as lanes (batch_slices):
  // their input projections (two thirds of the work of a layer above the first) run first, on
  // all threads, which share the tiles as they go, so a core slowed by its neighbours holds up
  // only the recurrences.
  const bool own_projection_stage = ((s.D == 2 && lane_threads() == 1) || schedule_.batch_slices > 1) &&
                                    plan_.threads > 1 && generate_gemms();
  if (!batch_major_gx(0)) plan_input(plan_.forward);
  if (!config_.bias) plan_zero_bias();
  for (std::int64_t l = 0; l < s.L; ++l) {
    Stage stage, projections{{{}}};
    for (int d = 0; d < s.D; ++d) {
      // No thread needs its hidden units of every gate here (the recurrence does), so where H
      // is not a whole number of vectors the G gates are one group of G*H columns: panels
      // grouped by gate would pad every gate's last vector (H=50: 150 columns computed as 192).
      const std::string w_ih = fmt::format("w_ih.l{}.d{}", l, d);
      const std::int64_t group = s.H % 16 != 0 ? s.GH : s.H, groups = s.GH / group;
      std::vector<Step> lane;
      if (own_projection_stage)
        projections.lanes[0].push_back(input_projection(forward_projection(l, d), w_ih, group, groups, plan_.threads));
      else
        lane.push_back(input_projection(forward_projection(l, d), w_ih, group, groups, lane_threads()));
      if (schedule_.batch_slices == 1) {
        forward_lane(lane, l, d, 0, s.N, lane_threads(), d);
        add_lane(stage, std::move(lane));
        continue;
      }
      for (int i = 0; i < schedule_.batch_slices; ++i) {
        std::vector<Step> slice;
        const auto [n0, n1] = batch_slice(i);
        forward_lane(slice, l, d, n0, n1, 1, d * schedule_.batch_slices + i);
        stage.lanes.push_back(std::move(slice));
      }
    }
    if (own_projection_stage) plan_.forward.push_back(std::move(projections));
    plan_.forward.push_back(std::move(stage));
    if (config_.sums_output(l) && l + 1 < s.L) {
      std::vector<Step> sums;
      sum_directions(sums, l, output_above(l), false);
      plan_.forward.push_back(Stage{{std::move(sums)}});
    }
    if (dropout_ && l + 1 < s.L)
      plan_.forward.push_back(Stage{{{DropoutStep{.what = fmt::format("dropout l{}", l),
                                                  .pass = Pass::forward,
                                                  .layer = l,
                                                  .p = config_.dropout,
                                                  .src = output_above(l),
                                                  .dst = layer_input(l + 1, 0),
                                                  .mask_region = regions_.dropout_mask[static_cast<std::size_t>(l)],
                                                  .elements = s.T * s.N * s.B}}}});
  }
}

// The gate kernels add a bias: without bias parameters, zeros, written to the caller's
// workspace every call.
void Planner::plan_zero_bias() {
  regions_.zero_bias = region("zero_bias", false, s_.GH);
  plan_.forward.push_back(Stage{{{CopyStep{.what = "zero biases (no bias parameters)",
                                           .dst = region_operand(plan_.workspace, regions_.zero_bias),
                                           .rows = 1,
                                           .cols = s_.GH,
                                           .ld_src = s_.GH,
                                           .ld_dst = s_.GH}}}});
}

// gx = x W_ih^T of layer l, direction d, over all T*N rows (before its tiling).
GemmStep Planner::forward_projection(std::int64_t l, int d) const {
  const auto& s = s_;
  const std::int64_t in = config_.layer_input_size(l);
  GemmStep g{.what = fmt::format("input projection l{} d{}", l, d), .trans_a = false, .trans_b = true,
             .m = s.T * s.N, .n = s.GH, .k = in,
             .a = batch_major_gx(l) ? buffer_operand(Buffer::x) : layer_input(l, d),
             .b = weight(l, d, ParamKind::weight_ih), .c = region_operand(plan_.workspace, regions_.gx[d]),
             .lda = ld_input(l), .ldb = in, .ldc = s.GX};
  g.c_whole_vectors = s.GX > s.GH;
  // (Batch-major rows are all computed: the row blocks to skip are those of time-major ones.)
  if (!batch_major_gx(l)) skip_finished_rows(g, false);
  return g;
}

// The time loop of layer l, direction d over batch rows [n0, n1), appended to `lane` with the
// copies of its initial state in and its final state out: every per-row operand starts n0 rows
// down (the time strides stay those of the whole batch), and the recurrent GEMMs are planned for
// `threads` threads, with lane `lane_index`'s scratch. Lanes of batch rows name their rows in
// their steps, and share the packed weights (with_packed_weights).
void Planner::forward_lane(std::vector<Step>& lane, std::int64_t l, int d, std::int64_t n0, std::int64_t n1,
                           int threads, int lane_index) {
  const auto& s = s_;
  const std::int64_t ldh = s.W, rows = n1 - n0;
  const std::size_t ld = ld_index(l, d);
  const std::string rows_note = rows < s.N ? fmt::format(" rows {}..{}", n0, n1) : "";
  const Operand h_init = shifted(h_init_operand(l, d), n0 * ldh);
  const Operand hx = buffer_operand(Buffer::hx, ld * s.N * s.S + n0 * s.S);
  lane.push_back(CopyStep{.what = fmt::format("h_init l{} d{}{} <- hx", l, d, rows_note), .src = hx, .dst = h_init,
                          .rows = rows, .cols = s.S, .ld_src = s.S, .ld_dst = ldh, .optional_src = true});
  Operand c_init;
  if (s.lstm) {
    c_init = region_operand(plan_.workspace, training() ? regions_.c_init[ld] : regions_.cstate[d], n0 * s.H);
    lane.push_back(CopyStep{.what = fmt::format("c_init l{} d{}{} <- cx", l, d, rows_note),
                            .src = buffer_operand(Buffer::cx, ld * s.N * s.H + n0 * s.H), .dst = c_init,
                            .rows = rows, .cols = s.H, .ld_src = s.H, .ld_dst = s.H, .optional_src = true});
  }
  RecurrenceStep r = recurrence(Pass::forward, l, d, n0, n1);
  r.gh = region_operand(plan_.workspace, regions_.gh[d], n0 * s.GH);
  plan_recurrent_gemms(r, threads, lane_index);
  r.h_init = h_init;
  r.hx = hx;
  r.c_init = c_init;
  plan_forward_operands(r, n0);
  const std::int64_t last = r.reverse ? 0 : s.T - 1;
  const Timed h = r.h, c = r.c;
  lane.push_back(std::move(r));
  lane.push_back(CopyStep{.what = fmt::format("hy l{} d{}{}", l, d, rows_note),
                          .src = shifted(h.base, last * h.t_stride),
                          .dst = buffer_operand(Buffer::hy, ld * s.N * s.S + n0 * s.S), .rows = rows, .cols = s.S,
                          .ld_src = ldh, .ld_dst = s.S, .optional_dst = true});
  if (s.lstm)
    lane.push_back(CopyStep{.what = fmt::format("cy l{} d{}{}", l, d, rows_note),
                            .src = shifted(c.base, last * c.t_stride),
                            .dst = buffer_operand(Buffer::cy, ld * s.N * s.H + n0 * s.H), .rows = rows, .cols = s.H,
                            .ld_src = s.H, .ld_dst = s.H, .optional_dst = true});
}

// The recurrent GEMMs of a forward time loop (gh = h_prev W_hh^T) and the gate kernels that
// split their columns; the reset-before GRU's in two parts, and an LSTM's output projection.
void Planner::plan_recurrent_gemms(RecurrenceStep& r, int threads, int lane_index) {
  const auto& s = s_;
  const std::int64_t l = r.layer, ldh = s.W, n0 = r.batch_begin, rows = r.batch;
  const int d = r.direction;
  const Operand w_hh = weight(l, d, ParamKind::weight_hh);
  if (s.reset_before) {
    // r,z on h_prev (gates 0 and 1 of W_hh), then n on r * h_prev (gate 2) after a barrier.
    r.gemm = with_packed_weights(GemmStep{.what = "recurrent projection r,z", .trans_b = true, .m = rows,
                                          .n = 2 * s.H, .k = s.S, .b = w_hh, .c = r.gh, .lda = ldh, .ldb = s.S,
                                          .ldc = s.GH},
                                 fmt::format("w_hh_rz.l{}.d{}", l, d), true, s.H, 2, threads, lane_index);
    ResetBefore& rb = r.reset_before.emplace();
    if (training())
      rb.reset_h = {.base = shifted(region_operand(plan_.workspace, regions_.reset_hs[static_cast<std::size_t>(l)]),
                                    d * s.S + n0 * ldh),
                    .t_stride = s.N * ldh};
    else
      rb.reset_h = {.base = region_operand(plan_.workspace, regions_.reset_h[d], n0 * ldh), .t_stride = 0};
    rb.z = region_operand(plan_.workspace, regions_.z[d], n0 * s.H);
    rb.part1.kernel = add_kernel_desc(gate_desc(Pass::forward, l, d, 1));
    rb.gemm = with_packed_weights(GemmStep{.what = "recurrent projection n (on r * h_prev)", .trans_b = true,
                                           .m = rows, .n = s.H, .k = s.S, .b = shifted(w_hh, 2 * s.H * s.S),
                                           .c = shifted(r.gh, 2 * s.H), .lda = ldh, .ldb = s.S, .ldc = s.GH},
                                  fmt::format("w_hh_n.l{}.d{}", l, d), true, s.H, 1, threads, lane_index);
    split_gate_kernel(r, Pass::forward, rb.gemm, 1);
  } else {
    r.gemm = with_packed_weights(GemmStep{.what = "recurrent projection", .trans_b = true, .m = rows, .n = s.GH,
                                          .k = s.S, .b = w_hh, .c = r.gh, .lda = ldh, .ldb = s.S, .ldc = s.GH},
                                 fmt::format("w_hh.l{}.d{}", l, d), true, 0, 0, threads, lane_index);
  }
  split_gate_kernel(r, Pass::forward, r.gemm);
  r.gx = batch_major_gx(l)
             ? Timed{.base = region_operand(plan_.workspace, regions_.gx[d], n0 * s.T * s.GX), .t_stride = s.GX}
             : Timed{.base = region_operand(plan_.workspace, regions_.gx[d], n0 * s.GX), .t_stride = s.N * s.GX};
  r.h = {.base = shifted(layer_output(l), d * s.S + n0 * ldh), .t_stride = s.N * ldh};
  if (s.P) {
    Projection& pr = r.projection.emplace();
    pr.cell_out =
        training()
            ? Timed{.base = region_operand(plan_.workspace, regions_.cell_out[ld_index(l, d)], n0 * s.H),
                    .t_stride = s.N * s.H}
            : Timed{.base = region_operand(plan_.workspace, regions_.cell_state_out[d], n0 * s.H), .t_stride = 0};
    pr.gemm = with_packed_weights(GemmStep{.what = "output projection", .trans_b = true, .m = rows, .n = s.P,
                                           .k = s.H, .b = weight(l, d, ParamKind::weight_hr), .lda = s.H,
                                           .ldb = s.H, .ldc = ldh},
                                  fmt::format("w_hr.l{}.d{}", l, d), true, s.P, 1, threads, lane_index);
  }
}

// The biases, peepholes, cell state and (training) the gates kept for backward.
void Planner::plan_forward_operands(RecurrenceStep& r, std::int64_t n0) {
  const auto& s = s_;
  const std::int64_t l = r.layer;
  const int d = r.direction;
  const std::size_t ld = ld_index(l, d);
  r.bias_ih = bias(l, d, ParamKind::bias_ih);
  r.bias_hh = bias(l, d, ParamKind::bias_hh);
  if (config_.peephole) r.peephole = weight(l, d, ParamKind::weight_peephole);
  if (s.lstm)
    r.c = training() ? Timed{.base = region_operand(plan_.workspace, regions_.c[ld], n0 * s.H), .t_stride = s.N * s.H}
                     : Timed{.base = r.c_init, .t_stride = 0};
  if (training())
    r.gates = {.base = region_operand(plan_.workspace, regions_.gates[ld], n0 * s.R), .t_stride = s.N * s.R};
}

// y from the top layer's sequence-major output when that is not y itself (training keeps it in
// the reserve; batch-first y has its rows in the other order), then zeros past the lengths.
void Planner::plan_outputs() {
  const auto& s = s_;
  const std::int64_t ldh = s.W;
  std::vector<Step> lane;
  const Operand top = layer_output(s.L - 1);
  if (config_.sum_directions)
    sum_directions(lane, s.L - 1, buffer_operand(Buffer::y), config_.batch_first);
  else if (config_.batch_first)
    lane.push_back(rows_copy("y [N, T] <- top layer output [T, N]", top, ldh, buffer_operand(Buffer::y), ldh, ldh,
                             BatchFirst::dst));
  else if (training())
    lane.push_back(
        rows_copy("y <- top layer output", top, ldh, buffer_operand(Buffer::y), ldh, ldh, BatchFirst::neither));
  lane.push_back(MaskStep{.what = "y past the sequence lengths", .dst = buffer_operand(Buffer::y), .steps = s.T,
                          .batch = s.N, .cols = s.Y, .t_stride = config_.batch_first ? s.Y : s.N * s.Y,
                          .n_stride = config_.batch_first ? s.T * s.Y : s.Y});
  plan_.forward.push_back(Stage{{std::move(lane)}});
}

}  // namespace rnnjit::planner
