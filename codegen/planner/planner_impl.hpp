// rnnjit: the planner's internals, shared by the files of codegen/planner/ (one pass or one
// concern each); codegen/planner.hpp is the interface. The Planner builds one Plan: its
// constructor takes the schedule (schedule.hpp), build() allocates the regions (regions.cpp) and
// appends the steps of forward (forward.cpp), backward data (backward_data.cpp) and backward
// weights (backward_weights.cpp); every GEMM goes through gemms.cpp, every operand that names a
// layer's tensors through operands.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/planner.hpp"
#include "codegen/planner/schedule.hpp"
#include "codegen/register_budgets.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit::planner {

// Everything the planner needs about one call, with the sizes named once.
struct Sizes {
  std::int64_t T, N, H, G, GH, D, L, R;  // R: reserve gate columns (reserve_gates * H)
  bool lstm, gru;
  bool reset_before = false;  // GRU with the reset before n's recurrent product (two kernels a step)
  std::int64_t S = 0, W = 0, P = 0;  // S: width of h (P or H); W = D*S: both directions' h side by side
  std::int64_t Y = 0;   // a row of y: W, or S with sum_directions
  std::int64_t B = 0;   // a row of a layer's output below the top (the input above): Y, or W for independent stacks
  std::int64_t GX = 0;  // a row of gx: G*H, or more (gx_row_floats)
};
Sizes sizes_of(const RnnConfig& config, const Shape& shape, Isa isa);

// The workspace and reserve regions the steps name: indices into WorkspacePlan::regions, -1
// where the plan has none. [2]: one per direction (lanes that run at once); vectors: one per
// layer, or per layer and direction at l * D + d.
struct Regions {
  // Every call.
  int gx[2] = {-1, -1}, gh[2] = {-1, -1};
  int carry_save[2] = {-1, -1};  // variable lengths: the rows being carried, [N, 2H]
  int input_seq = -1;            // batch-first x as sequence-major rows (backward: dx's)
  int zero_bias = -1;            // no bias parameters: G*H zeros
  int reset_h[2] = {-1, -1}, z[2] = {-1, -1};  // GRU with the reset before, inference
  std::vector<int> a_panels, b_panels;          // GEMM scratch per lane (as many as a stage can have)
  // Training: kept in the reserve for backward.
  std::vector<int> out;  // per layer: [h_init before; T steps' h; h_init after], N rows of W each
  std::vector<int> gates, c, c_init, cell_out, dh_proj;  // per layer and direction
  std::vector<int> reset_hs;                            // per layer: r * h_prev of every step
  std::vector<int> dropped, dropout_mask, summed;       // per layer below the top
  // Inference.
  std::vector<int> h_init;  // per layer (all the same region)
  int pingpong[2] = {-1, -1}, cstate[2] = {-1, -1}, cell_state_out[2] = {-1, -1};
  int directions_out = -1, y_seq = -1;
  // Backward data.
  int dh[2] = {-1, -1}, dc[2] = {-1, -1}, d_reset_h[2] = {-1, -1};
  int dcell[2] = {-1, -1}, zeros[2] = {-1, -1};  // projection
  int dlayer[2] = {-1, -1}, dy_seq = -1;
};

// The weights packed so far (Planner::with_packed_weights): their source, shape and panel layout.
struct PackedWeights {
  Operand src;
  std::int64_t k, groups, group, n_r;
  bool bf16;
  std::vector<std::int64_t> cuts;  // GemmBlocking::cuts(): where panels hold parts
  int region;
  bool same_panels(const PackedWeights& o) const {
    return src == o.src && k == o.k && groups == o.groups && group == o.group && n_r == o.n_r && bf16 == o.bf16 &&
           cuts == o.cuts;
  }
};

Operand region_operand(const WorkspacePlan& ws, int region, std::int64_t offset = 0);
inline Operand buffer_operand(Buffer b, std::int64_t offset = 0) { return {.buffer = b, .offset = offset}; }
inline Operand shifted(Operand o, std::int64_t by) {
  o.offset += by;
  return o;
}
// Index of `d` in `kernels`, appended if new.
int append_kernel(std::vector<KernelDesc>& kernels, const KernelDesc& d);

class Planner {
 public:
  Planner(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, const Schedule& schedule,
          const GemmChooser& projection_gemm, const CacheSizes& caches, FpMath fpmath,
          Bf16Unit bf16_unit, Quantize quantize = Quantize::none, std::optional<Int8Unit> int8_unit = std::nullopt);
  Plan build();

 private:
  void plan_quantize(std::optional<Int8Unit> int8_unit, FpMath fallback);
  // --- regions (regions.cpp) ---
  int region(const std::string& name, bool reserve, std::int64_t elements);
  void allocate_forward();
  void allocate_training_forward();
  void allocate_inference();
  void allocate_backward();
  // A scratch region per lane, shared by the lane's GEMMs (they run in turn), grown as needed.
  int lane_region(int& region, const char* what, int lane, std::int64_t elements);

  // --- operands of a layer's tensors (operands.cpp) ---
  bool training() const { return plan_.mode == Mode::training; }
  Operand weight(std::int64_t l, int d, ParamKind k) const;
  Operand bias(std::int64_t l, int d, ParamKind k) const;
  Operand dweight(std::int64_t l, int d, ParamKind k, std::int64_t row = 0, std::int64_t ld = 0) const;
  Operand layer_output(std::int64_t l) const;
  Operand output_above(std::int64_t l) const;
  Operand layer_input(std::int64_t l, int d) const;
  Operand h_init_operand(std::int64_t l, int d) const;
  std::int64_t h_init_before() const;
  std::int64_t h_init_after() const;
  std::int64_t ld_input(std::int64_t l) const { return config_.layer_input_stride(l); }
  std::size_t ld_index(std::int64_t l, int d) const { return static_cast<std::size_t>(l * s_.D + d); }
  Operand dy_of_layer(std::int64_t l) const;
  std::int64_t ld_dy(std::int64_t l) const;
  Operand dy_of_direction(std::int64_t l, int d) const;
  Operand dx_of_layer(std::int64_t l) const;
  bool batch_major_gx(std::int64_t l) const;
  // Which side of a copy of T*N rows is the caller's batch-first tensor ([N, T] rows).
  enum class BatchFirst { neither, src, dst };
  CopyStep rows_copy(std::string what, Operand src, std::int64_t ld_src, Operand dst, std::int64_t ld_dst,
                     std::int64_t cols, BatchFirst batch_first) const;
  void sum_directions(std::vector<Step>& lane, std::int64_t l, Operand dst, bool batch_first_dst) const;
  void plan_input(std::vector<Stage>& call) const;

  // --- lanes, kernels, recurrences (planner.cpp) ---
  int lane_threads() const { return s_.D == 1 || schedule_.split_directions ? plan_.threads : 1; }
  void add_lane(Stage& stage, std::vector<Step>&& lane, bool in_turn = false) const;
  std::pair<std::int64_t, std::int64_t> batch_slice(int i) const;
  int add_kernel_desc(const KernelDesc& d) { return append_kernel(plan_.kernels, d); }
  KernelDesc gate_desc(Pass pass, std::int64_t l, int direction, int part = 0) const;
  void split_gate_kernel(RecurrenceStep& r, Pass pass, const GemmStep& units, int part = 0);
  RecurrenceStep recurrence(Pass pass, std::int64_t l, int d, std::int64_t n0, std::int64_t n1);
  void skip_finished_rows(GemmStep& g, bool rows_of_a_are_zero) const;

  // --- GEMMs (gemms.cpp) ---
  bool generate_gemms() const { return generates_x64(plan_.isa); }
  GemmStep with_fpmath(GemmStep g) const;
  GemmStep generated(GemmStep g, std::int64_t group, int threads = 0, bool recurrent = false, int lane = 0,
                     std::vector<Step>* pack_into = nullptr, bool own_panels = false);
  GemmStep with_packed_weights(GemmStep g, const std::string& name, bool recurrent, std::int64_t group = 0,
                               std::int64_t groups = 0, int threads = 0, int lane = 0);
  GemmStep input_projection(GemmStep g, const std::string& name, std::int64_t group, std::int64_t groups,
                            int threads);
  void share_a_panels(GemmStep& first, GemmStep& second, int lane);

  // --- forward (forward.cpp) ---
  void plan_forward();
  void plan_zero_bias();
  GemmStep forward_projection(std::int64_t l, int d) const;
  void forward_lane(std::vector<Step>& lane, std::int64_t l, int d, std::int64_t n0, std::int64_t n1, int threads,
                    int lane_index);
  void plan_recurrent_gemms(RecurrenceStep& r, int threads, int lane_index);
  void plan_forward_operands(RecurrenceStep& r, std::int64_t n0);
  void plan_outputs();

  // --- backward data (backward_data.cpp) ---
  // The input-side gate gradients as (first gate column, gate count, first W_ih row) pieces:
  // contiguous for LSTM and RNN; for GRU r,z at columns [0, 2H) and n at [3H, 4H).
  struct InputSide {
    std::int64_t col, width, row;
  };
  std::vector<InputSide> input_side() const;
  void plan_dy();
  void plan_backward_data();
  std::vector<Step> input_gradient_lane(std::int64_t l);
  void backward_lane(std::vector<Step>& lane, std::int64_t l, int d, std::int64_t n0, std::int64_t n1, int threads,
                     int lane_index);
  void plan_recurrent_gradients(RecurrenceStep& r, std::vector<Step>& lane, int threads, int lane_index,
                                const std::string& rows_note);
  void plan_backward_operands(RecurrenceStep& r, std::int64_t n0);

  // --- backward weights (backward_weights.cpp) ---
  void plan_backward_weights();
  std::vector<Step> weight_gradient_lane(std::int64_t l, int d, bool one_lane);
  GemmStep weight_gradient_gemm(GemmStep g, std::int64_t group, int d, bool one_lane, std::vector<Step>* pack_into);
  std::size_t plan_input_weight_gradients(std::vector<Step>& lane, std::int64_t l, int d, bool one_lane);
  void plan_recurrent_weight_gradients(std::vector<Step>& lane, std::int64_t l, int d, bool one_lane,
                                       std::size_t dw_ih_index);
  void plan_peephole_gradient(std::vector<Step>& lane, std::int64_t l, int d);

  RnnConfig config_;
  GemmChooser projection_gemm_;
  WeightLayout layout_;
  Plan plan_;
  Sizes s_{};
  Schedule schedule_;
  bool dropout_ = false;  // training with dropout between layers
  Regions regions_;
  std::vector<PackedWeights> packed_weights_;
};

}  // namespace rnnjit::planner
