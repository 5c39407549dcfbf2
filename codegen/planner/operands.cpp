// The operands that name a layer's tensors: its weights, input, output, initial state and their
// gradients, wherever the plan keeps them (the caller's buffers, workspace or reserve regions).
#include <limits>

#include <fmt/format.h>

#include "codegen/planner/planner_impl.hpp"

namespace rnnjit::planner {

Operand Planner::weight(std::int64_t l, int d, ParamKind k) const {
  return buffer_operand(Buffer::weights, layout_.block(l, d, k).offset);
}

// b_ih or b_hh of layer l, direction d: zeros where the network has no biases.
Operand Planner::bias(std::int64_t l, int d, ParamKind k) const {
  return config_.bias ? weight(l, d, k) : region_operand(plan_.workspace, regions_.zero_bias);
}

Operand Planner::dweight(std::int64_t l, int d, ParamKind k, std::int64_t row, std::int64_t ld) const {
  return buffer_operand(Buffer::dweights, layout_.block(l, d, k).offset + row * ld);
}

// The h of layer l's directions, [T, N, W] with direction d at column d*S (where forward writes
// it and backward reads it), sequence-major; batch-first y is written from it by plan_outputs().
// Unless the directions are summed it is the layer's output.
Operand Planner::layer_output(std::int64_t l) const {
  const Regions& r = regions_;
  if (training()) return region_operand(plan_.workspace, r.out[static_cast<std::size_t>(l)], h_init_before() * s_.N * s_.W);
  if (config_.sums_output(l)) return region_operand(plan_.workspace, r.directions_out);
  if (l == s_.L - 1) return config_.batch_first ? region_operand(plan_.workspace, r.y_seq) : buffer_operand(Buffer::y);
  return region_operand(plan_.workspace, r.pingpong[l % 2]);
}

// What the layer above l reads of it, [T, N, B]: its output, or the sums of its directions.
Operand Planner::output_above(std::int64_t l) const {
  if (!config_.sums_output(l)) return layer_output(l);
  return region_operand(plan_.workspace,
                        training() ? regions_.summed[static_cast<std::size_t>(l)] : regions_.pingpong[l % 2]);
}

// What direction d of layer l reads: x (batch-first: its sequence-major copy, plan_input()), the
// layer below's output, or (training with dropout) its dropped copy; in an independent stack,
// only direction d's columns of it.
Operand Planner::layer_input(std::int64_t l, int d) const {
  if (l == 0)
    return config_.batch_first ? region_operand(plan_.workspace, regions_.input_seq) : buffer_operand(Buffer::x);
  const std::int64_t column = config_.layer_input_column(l, d);
  if (dropout_) return region_operand(plan_.workspace, regions_.dropped[static_cast<std::size_t>(l - 1)], column);
  return shifted(output_above(l - 1), column);
}

// h_init of layer l, direction d ([N, S] at column d*S, rows W apart). Training keeps it in the
// layer's output region, right before step 0 (forward) or after step T-1 (reverse): the rows of
// h_prev for steps 0..T-1 then start one step before the output (forward) or one after it
// (reverse).
Operand Planner::h_init_operand(std::int64_t l, int d) const {
  const auto layer = static_cast<std::size_t>(l);
  if (!training()) return shifted(region_operand(plan_.workspace, regions_.h_init[layer]), d * s_.S);
  const std::int64_t block = config_.reversed(d) ? h_init_before() + s_.T : 0;
  return region_operand(plan_.workspace, regions_.out[layer], block * s_.N * s_.W + d * s_.S);
}

// Blocks of N rows the training output region holds before the T steps' h (a direction runs
// forward: only direction 0 can) and after them (a direction runs in reverse).
std::int64_t Planner::h_init_before() const { return config_.reversed(0) ? 0 : 1; }
std::int64_t Planner::h_init_after() const { return config_.reversed(0) || s_.D == 2 ? 1 : 0; }

// The gradient of layer l's output, [T, N, layer_output_size(l)]: the layer above's input
// gradient, or dy.
Operand Planner::dy_of_layer(std::int64_t l) const {
  if (l < s_.L - 1) return region_operand(plan_.workspace, regions_.dlayer[l % 2]);
  return config_.batch_first ? region_operand(plan_.workspace, regions_.dy_seq) : buffer_operand(Buffer::dy);
}

// The row stride of the gradient layer l's backward recurrences read for their h: the layer's
// output gradient, direction d's at column d*S of rows W wide; or, where the directions were
// summed, the gradient of their sum, rows S wide, which both directions read whole, in place.
std::int64_t Planner::ld_dy(std::int64_t l) const { return config_.sums_output(l) ? s_.S : s_.W; }

Operand Planner::dy_of_direction(std::int64_t l, int d) const {
  return shifted(dy_of_layer(l), config_.sums_output(l) ? 0 : d * s_.S);
}

Operand Planner::dx_of_layer(std::int64_t l) const {
  if (l == 0)
    return config_.batch_first ? region_operand(plan_.workspace, regions_.input_seq) : buffer_operand(Buffer::dx);
  return region_operand(plan_.workspace, regions_.dlayer[(l - 1) % 2]);
}

// Layer 0 of a batch-first call projects x where it lies, its [N, T] rows in order, so that its
// gx is batch-major: step t's row n at (n * T + t) * GX, which the layer's gate kernels read
// T*GX apart (a stride they add as a 32-bit immediate: beyond it, x is copied instead). Only
// what reads x as sequence-major rows then copies it (backward weights; plan_input()).
bool Planner::batch_major_gx(std::int64_t l) const {
  return l == 0 && config_.batch_first && s_.T * s_.GX * 4 <= std::numeric_limits<std::int32_t>::max();
}

// A copy of the T*N (t, n) rows, `cols` wide, of sequence-major operands (rows ld_* apart), one
// side of which may be batch-first: then T blocks of N rows, row (t, n) there at n*T + t.
CopyStep Planner::rows_copy(std::string what, Operand src, std::int64_t ld_src, Operand dst, std::int64_t ld_dst,
                            std::int64_t cols, BatchFirst batch_first) const {
  CopyStep c{.what = std::move(what), .src = src, .dst = dst, .rows = s_.T * s_.N, .cols = cols,
             .ld_src = ld_src, .ld_dst = ld_dst};
  if (batch_first == BatchFirst::neither) return c;
  c.rows = s_.N;  // block t: rows (t, 0..N-1)
  c.blocks = s_.T;
  if (batch_first == BatchFirst::src) {
    c.ld_src = s_.T * ld_src, c.block_src = ld_src, c.block_dst = s_.N * ld_dst;
  } else {
    c.ld_dst = s_.T * ld_dst, c.block_dst = ld_dst, c.block_src = s_.N * ld_src;
  }
  return c;
}

// sum_directions: dst = h of direction 0 + h of direction 1 of layer l, for every (t, n) row, in
// one pass; dst's rows are [T, N, S], or batch-first [N, T, S] (y).
void Planner::sum_directions(std::vector<Step>& lane, std::int64_t l, Operand dst, bool batch_first_dst) const {
  CopyStep c = rows_copy(fmt::format("sum of directions l{}: h d0 + h d1", l), layer_output(l), s_.W, dst, s_.S,
                         s_.S, batch_first_dst ? BatchFirst::dst : BatchFirst::neither);
  c.plus = shifted(layer_output(l), s_.S);
  lane.push_back(std::move(c));
}

// Batch-first x is copied into sequence-major rows (layer_input()) by each call that reads it
// (the workspace is free between calls). Its GEMMs are then those of sequence-major x: one input
// projection over all T*N rows, one dW_ih summing them (a product of T rows for each batch
// element, x read in place, was 2-3x slower at small T).
void Planner::plan_input(std::vector<Stage>& call) const {
  if (!config_.batch_first) return;
  const std::int64_t in = config_.input_size;
  call.push_back(Stage{{{rows_copy("x [T, N] <- x [N, T]", buffer_operand(Buffer::x), in, layer_input(0, 0), in, in,
                                   BatchFirst::src)}}});
}

}  // namespace rnnjit::planner
