// Backward data: the layers top-down, each direction's backward time loop (the gate gradients
// and the carried dh, dc), then the layer's input gradient dgates W_ih over all T*N rows.
#include <fmt/format.h>

#include "codegen/planner/planner_impl.hpp"

namespace rnnjit::planner {

std::vector<Planner::InputSide> Planner::input_side() const {
  if (s_.gru) return {{0, 2 * s_.H, 0}, {3 * s_.H, s_.H, 2 * s_.H}};
  return {{0, s_.GH, 0}};
}

// Batch-first dy is first copied into sequence-major rows, which the gate kernels read.
void Planner::plan_dy() {
  if (!config_.batch_first) return;
  const std::int64_t ldy = s_.Y;
  plan_.backward_data.push_back(Stage{{{rows_copy("dy [T, N] <- dy [N, T]", buffer_operand(Buffer::dy), ldy,
                                                  region_operand(plan_.workspace, regions_.dy_seq), ldy, ldy,
                                                  BatchFirst::src)}}});
}

void Planner::plan_backward_data() {
  const auto& s = s_;
  for (std::int64_t l = s.L - 1; l >= 0; --l) {
    Stage stage;
    for (int d = 0; d < s.D; ++d) {
      if (schedule_.batch_slices == 1) {
        std::vector<Step> lane;
        backward_lane(lane, l, d, 0, s.N, 0, d);
        add_lane(stage, std::move(lane));
        continue;
      }
      for (int i = 0; i < schedule_.batch_slices; ++i) {
        std::vector<Step> slice;
        const auto [n0, n1] = batch_slice(i);
        backward_lane(slice, l, d, n0, n1, 1, d * schedule_.batch_slices + i);
        stage.lanes.push_back(std::move(slice));
      }
    }
    plan_.backward_data.push_back(std::move(stage));
    plan_.backward_data.push_back(Stage{{input_gradient_lane(l)}});
    if (dropout_ && l > 0)
      plan_.backward_data.push_back(
          Stage{{{DropoutStep{.what = fmt::format("dropout l{} backward", l - 1),
                              .pass = Pass::backward,
                              .layer = l - 1,
                              .p = config_.dropout,
                              .dst = dx_of_layer(l),
                              .mask_region = regions_.dropout_mask[static_cast<std::size_t>(l - 1)],
                              .elements = s.T * s.N * s.B}}}});
  }
}

// dx of layer l (dy of the one below) sums both directions: dgx_d W_ih_d (independent stacks:
// each direction's goes to its own columns); batch-first dx is then copied out to [N, T].
std::vector<Step> Planner::input_gradient_lane(std::int64_t l) {
  const auto& s = s_;
  std::vector<Step> lane;
  const std::int64_t in = config_.layer_input_size(l);
  const bool own_columns = l > 0 && config_.independent_stacks;
  bool first = true;
  for (int d = 0; d < s.D; ++d) {
    if (own_columns) first = true;
    for (const InputSide& piece : input_side()) {
      GemmStep dx{.what = fmt::format("input gradient l{} d{}", l, d), .m = s.T * s.N, .n = in, .k = piece.width,
                  .a = region_operand(plan_.workspace, regions_.gates[ld_index(l, d)], piece.col),
                  .b = shifted(weight(l, d, ParamKind::weight_ih), piece.row * in),
                  .c = shifted(dx_of_layer(l), config_.layer_input_column(l, d)), .lda = s.R, .ldb = in,
                  .ldc = ld_input(l), .beta = first ? 0.0f : 1.0f};
      skip_finished_rows(dx, true);
      lane.push_back(generated(with_fpmath(dx), in, plan_.threads, false, 0, &lane));
      first = false;
    }
  }
  if (l == 0 && config_.batch_first)
    lane.push_back(
        rows_copy("dx [N, T] <- dx [T, N]", dx_of_layer(0), in, buffer_operand(Buffer::dx), in, in, BatchFirst::dst));
  return lane;
}

// The backward time loop of layer l, direction d over batch rows [n0, n1), appended to `lane`
// (whose scratch is lane `lane_index`'s) with the copies of the carried gradients in and out,
// shifted and planned as forward_lane() does (`threads` 0: the lane's).
void Planner::backward_lane(std::vector<Step>& lane, std::int64_t l, int d, std::int64_t n0, std::int64_t n1,
                            int threads, int lane_index) {
  const auto& s = s_;
  const std::int64_t rows = n1 - n0;
  const std::size_t ld = ld_index(l, d);
  const std::string rows_note = rows < s.N ? fmt::format(" rows {}..{}", n0, n1) : "";
  const Operand dh = region_operand(plan_.workspace, regions_.dh[d], n0 * s.S);
  lane.push_back(CopyStep{.what = fmt::format("dh_carry d{} <- dhy l{}{}", d, l, rows_note),
                          .src = buffer_operand(Buffer::dhy, ld * s.N * s.S + n0 * s.S), .dst = dh, .rows = rows,
                          .cols = s.S, .ld_src = s.S, .ld_dst = s.S, .optional_src = true});
  Operand dc;
  if (s.lstm) {
    dc = region_operand(plan_.workspace, regions_.dc[d], n0 * s.H);
    lane.push_back(CopyStep{.what = fmt::format("dc_carry d{} <- dcy l{}{}", d, l, rows_note),
                            .src = buffer_operand(Buffer::dcy, ld * s.N * s.H + n0 * s.H), .dst = dc, .rows = rows,
                            .cols = s.H, .ld_src = s.H, .ld_dst = s.H, .optional_src = true});
  }
  RecurrenceStep r = recurrence(Pass::backward, l, d, n0, n1);
  r.gates = {region_operand(plan_.workspace, regions_.gates[ld], n0 * s.R), s.N * s.R};
  r.dh_carry = dh;
  r.dc_carry = dc;
  plan_recurrent_gradients(r, lane, threads, lane_index, rows_note);
  plan_backward_operands(r, n0);
  const Operand dhx = r.dhx;
  lane.push_back(std::move(r));
  lane.push_back(CopyStep{.what = fmt::format("dhx l{} d{}{}", l, d, rows_note), .src = dh, .dst = dhx, .rows = rows,
                          .cols = s.S, .ld_src = s.S, .ld_dst = s.S, .optional_dst = true});
  if (s.lstm)
    lane.push_back(CopyStep{.what = fmt::format("dcx l{} d{}{}", l, d, rows_note), .src = dc,
                            .dst = buffer_operand(Buffer::dcx, ld * s.N * s.H + n0 * s.H), .rows = rows, .cols = s.H,
                            .ld_src = s.H, .ld_dst = s.H, .optional_dst = true});
}

// The GEMMs of a backward step: the recurrent gradient dh_carry (+)= dgates W_hh (the reset-
// before GRU's in two parts around d(r * h_prev)), and with a projection dcell = dh_proj W_hr;
// the gate kernels split the columns of the last one before them.
void Planner::plan_recurrent_gradients(RecurrenceStep& r, std::vector<Step>& lane, int threads, int lane_index,
                                       const std::string& rows_note) {
  const auto& s = s_;
  const std::int64_t l = r.layer, n0 = r.batch_begin, rows = r.batch;
  const int d = r.direction;
  const Operand w_hh = weight(l, d, ParamKind::weight_hh);
  if (s.reset_before) {
    // d(r * h_prev) = dn W_hn first (W_hh's n rows), then dh_carry += [dr, dz] W_hh[r,z rows].
    ResetBefore& rb = r.reset_before.emplace();
    rb.d_reset_h = region_operand(plan_.workspace, regions_.d_reset_h[d], n0 * s.H);
    rb.part1.kernel = add_kernel_desc(gate_desc(Pass::backward, l, d, 1));
    rb.gemm = generated(with_fpmath({.what = "reset gradient d(r * h_prev) = dn W_hn" + rows_note, .m = rows,
                                    .n = s.H, .k = s.H, .b = shifted(w_hh, 2 * s.H * s.S), .c = rb.d_reset_h,
                                    .lda = s.R, .ldb = s.S, .ldc = s.H}),
                        s.H, threads, true, lane_index, &lane, true);
    r.gemm = generated(with_fpmath({.what = "recurrent gradient r,z" + rows_note, .m = rows, .n = s.S, .k = 2 * s.H,
                                   .b = w_hh, .c = r.dh_carry, .lda = s.R, .ldb = s.S, .ldc = s.S, .beta = 1.0f}),
                       s.S, threads, true, lane_index, &lane);
    split_gate_kernel(r, Pass::backward, rb.gemm, 1);
  } else {
    r.gemm = generated(with_fpmath({.what = "recurrent gradient" + rows_note, .m = rows, .n = s.S, .k = s.GH,
                                   .b = w_hh, .c = r.dh_carry, .lda = s.R, .ldb = s.S, .ldc = s.S,
                                   .beta = s.gru ? 1.0f : 0.0f}),
                       s.S, threads, true, lane_index, &lane);
  }
  if (s.P) {
    const std::size_t ld = ld_index(l, d);
    Projection& pr = r.projection.emplace();
    pr.dh_proj = {region_operand(plan_.workspace, regions_.dh_proj[ld], n0 * s.P), s.N * s.P};
    pr.dcell = region_operand(plan_.workspace, regions_.dcell[d], n0 * s.H);
    pr.zeros = region_operand(plan_.workspace, regions_.zeros[d], n0 * s.H);
    lane.push_back(CopyStep{.what = fmt::format("zeros d{}{}", d, rows_note), .dst = pr.zeros, .rows = rows,
                            .cols = s.H, .ld_src = s.H, .ld_dst = s.H});
    pr.gemm = generated(with_fpmath({.what = "projection gradient" + rows_note, .m = rows, .n = s.H, .k = s.P,
                                    .b = weight(l, d, ParamKind::weight_hr), .c = pr.dcell, .lda = s.P,
                                    .ldb = s.H, .ldc = s.H}),
                        s.H, threads, true, lane_index, &lane, true);
  }
  split_gate_kernel(r, Pass::backward, s.P ? r.projection->gemm : s.reset_before ? r.reset_before->gemm : r.gemm);
}

// What a backward step reads of forward's reserve (h, c and their initial values), dy, and the
// caller's dhx that dh_carry ends in.
void Planner::plan_backward_operands(RecurrenceStep& r, std::int64_t n0) {
  const auto& s = s_;
  const std::int64_t l = r.layer, ldh = s.W;
  const int d = r.direction;
  const std::size_t ld = ld_index(l, d);
  r.ld_dy = ld_dy(l);
  r.dy = {shifted(dy_of_direction(l, d), n0 * r.ld_dy), s.N * r.ld_dy};
  r.h = {shifted(layer_output(l), d * s.S + n0 * ldh), s.N * ldh};
  r.h_init = shifted(h_init_operand(l, d), n0 * ldh);
  if (s.lstm) {
    r.c = {region_operand(plan_.workspace, regions_.c[ld], n0 * s.H), s.N * s.H};
    r.c_init = region_operand(plan_.workspace, regions_.c_init[ld], n0 * s.H);
  }
  if (config_.peephole) r.peephole = weight(l, d, ParamKind::weight_peephole);
  r.dhx = buffer_operand(Buffer::dhx, ld * s.N * s.S + n0 * s.S);
}

}  // namespace rnnjit::planner
