// The workspace and reserve regions of a plan (Regions), allocated before any step is planned.
#include <algorithm>

#include <fmt/format.h>

#include "codegen/planner/planner_impl.hpp"

namespace rnnjit::planner {

Operand region_operand(const WorkspacePlan& ws, int region, std::int64_t offset) {
  static constexpr Buffer kBuffers[] = {Buffer::workspace, Buffer::reserve, Buffer::packed};
  return {.buffer = kBuffers[static_cast<int>(ws.regions[static_cast<std::size_t>(region)].space)],
          .region = region,
          .offset = offset};
}

int Planner::region(const std::string& name, bool reserve, std::int64_t elements) {
  return plan_.workspace.add(name, reserve ? Space::reserve : Space::workspace,
                             static_cast<std::size_t>(elements) * sizeof(float));
}

int Planner::lane_region(int& region, const char* what, int lane, std::int64_t elements) {
  if (region < 0 || plan_.workspace.regions[static_cast<std::size_t>(region)].size <
                        static_cast<std::size_t>(elements) * sizeof(float))
    region = this->region(fmt::format("{}.lane{}.{}", what, lane, plan_.workspace.regions.size()), false, elements);
  return region;
}

void Planner::allocate_forward() {
  const auto& s = s_;
  // Batch-first x ([N, T, I]) copied into sequence-major rows for what reads it so (plan_input()),
  // a region that backward data reuses for dx's sequence-major rows, copied out to [N, T, I].
  if (config_.batch_first && (training() || !batch_major_gx(0)))
    regions_.input_seq = region("input_seq", false, s.T * s.N * config_.input_size);
  for (int d = 0; d < s.D; ++d) {
    regions_.gx[d] = region(fmt::format("gx.d{}", d), false, s.T * s.N * s.GX);
    regions_.gh[d] = region(fmt::format("gh.d{}", d), false, s.N * s.GH);
    regions_.carry_save[d] = region(fmt::format("carry_save.d{}", d), false, s.N * 2 * s.H);
    if (s.reset_before) {
      if (!training()) regions_.reset_h[d] = region(fmt::format("reset_h.d{}", d), false, s.N * s.W);
      regions_.z[d] = region(fmt::format("z.d{}", d), false, s.N * s.H);
    }
  }
  if (training())
    allocate_training_forward();
  else
    allocate_inference();
}

void Planner::allocate_training_forward() {
  const auto& s = s_;
  Regions& r = regions_;
  plan_.lengths_region = plan_.workspace.add("seq_lengths", Space::reserve, static_cast<std::size_t>(s.N) * 4);
  if (dropout_)
    for (std::int64_t l = 0; l + 1 < s.L; ++l) {
      r.dropped.push_back(region(fmt::format("dropped.l{}", l), true, s.T * s.N * s.B));
      r.dropout_mask.push_back(plan_.workspace.add(fmt::format("dropout_mask.l{}", l), Space::reserve,
                                                   static_cast<std::size_t>(s.T * s.N * s.B)));
    }
  // The sums the layer above reads (below the top layer); kept for its dW_ih unless that reads
  // their dropped copy.
  for (std::int64_t l = 0; l + 1 < s.L; ++l)
    r.summed.push_back(config_.sums_output(l) ? region(fmt::format("summed.l{}", l), !dropout_, s.T * s.N * s.B) : -1);
  for (std::int64_t l = 0; l < s.L; ++l) {
    // [h_init of a forward direction; the T steps' h; h_init of a reverse direction], N rows of
    // W each: the h every step of a direction reads is then one run of T*N rows, and dW_hh one
    // GEMM over them (see h_init_operand()).
    r.out.push_back(region(fmt::format("out.l{}", l), true, (s.T + h_init_before() + h_init_after()) * s.N * s.W));
    // r * h_prev of every step, laid out like the layer's output (direction d at column d*H).
    if (s.reset_before) r.reset_hs.push_back(region(fmt::format("reset_h.l{}", l), true, s.T * s.N * s.W));
    for (int d = 0; d < s.D; ++d) {
      r.gates.push_back(region(fmt::format("gates.l{}.d{}", l, d), true, s.T * s.N * s.R));
      if (s.lstm) {
        r.c.push_back(region(fmt::format("c.l{}.d{}", l, d), true, s.T * s.N * s.H));
        r.c_init.push_back(region(fmt::format("c_init.l{}.d{}", l, d), true, s.N * s.H));
      }
      if (s.P) {
        r.cell_out.push_back(region(fmt::format("cell_out.l{}.d{}", l, d), true, s.T * s.N * s.H));
        r.dh_proj.push_back(region(fmt::format("dh_proj.l{}.d{}", l, d), true, s.T * s.N * s.P));
      }
    }
  }
}

// Layers below the top alternate between two output buffers; the top layer writes y. The LSTM
// cell state is updated in place in one [N, H] buffer per direction. A layer whose directions
// are summed writes both directions' h into one buffer (shared by all such layers), whose sums
// go to the two output buffers or y.
void Planner::allocate_inference() {
  const auto& s = s_;
  Regions& r = regions_;
  if (s.L > 1)
    for (int i = 0; i < std::min<std::int64_t>(2, s.L - 1); ++i)
      r.pingpong[i] = region(fmt::format("layer_out.{}", i), false, s.T * s.N * s.B);
  if (config_.sum_directions)
    r.directions_out = region("directions_out", false, s.T * s.N * s.W);
  else if (config_.batch_first)
    r.y_seq = region("y_seq", false, s.T * s.N * s.W);
  r.h_init.assign(static_cast<std::size_t>(s.L), region("h_init", false, s.N * s.W));
  if (s.lstm)
    for (int d = 0; d < s.D; ++d) r.cstate[d] = region(fmt::format("c_state.d{}", d), false, s.N * s.H);
  if (s.P)
    for (int d = 0; d < s.D; ++d) r.cell_state_out[d] = region(fmt::format("cell_out.d{}", d), false, s.N * s.H);
}

void Planner::allocate_backward() {
  const auto& s = s_;
  Regions& r = regions_;
  for (int d = 0; d < s.D; ++d) {
    r.dh[d] = region(fmt::format("dh_carry.d{}", d), false, s.N * s.S);
    if (s.reset_before) r.d_reset_h[d] = region(fmt::format("d_reset_h.d{}", d), false, s.N * s.H);
    if (s.lstm) r.dc[d] = region(fmt::format("dc_carry.d{}", d), false, s.N * s.H);
    if (s.P) {
      r.dcell[d] = region(fmt::format("dcell.d{}", d), false, s.N * s.H);
      r.zeros[d] = region(fmt::format("zeros.d{}", d), false, s.N * s.H);
    }
  }
  if (s.L > 1)
    for (int i = 0; i < std::min<std::int64_t>(2, s.L - 1); ++i)
      r.dlayer[i] = region(fmt::format("dlayer.{}", i), false, s.T * s.N * s.B);
  if (config_.batch_first) r.dy_seq = region("dy_seq", false, s.T * s.N * s.Y);
}

}  // namespace rnnjit::planner
