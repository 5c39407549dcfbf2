// The planner's entry point (make_plan), its order of passes (Planner::build) and what every
// pass shares: lanes, gate kernel descriptors, the skeleton of a recurrence.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "codegen/int8_unit.hpp"
#include "codegen/plan_extents.hpp"
#include "codegen/planner/planner_impl.hpp"
#include "codegen/register_budgets.hpp"

namespace rnnjit {
namespace planner {

int append_kernel(std::vector<KernelDesc>& kernels, const KernelDesc& d) {
  for (std::size_t i = 0; i < kernels.size(); ++i)
    if (kernels[i] == d) return static_cast<int>(i);
  kernels.push_back(d);
  return static_cast<int>(kernels.size()) - 1;
}

Sizes sizes_of(const RnnConfig& config, const Shape& shape, Isa isa) {
  const std::int64_t H = config.hidden_size;
  const int G = config.gates();
  Sizes s{.T = shape.seq_len, .N = shape.batch, .H = H, .G = G, .GH = G * H, .D = config.directions(),
          .L = config.num_layers, .R = (config.cell == CellKind::gru ? 4 : G) * H,
          .lstm = config.cell == CellKind::lstm, .gru = config.cell == CellKind::gru};
  s.reset_before = config.cell == CellKind::gru_reset_before;
  s.S = config.state_size();
  s.W = s.D * s.S;
  s.P = config.proj_size;
  s.Y = config.output_size();
  s.B = config.layer_output_size(0);
  s.GX = gx_row_floats(config, isa);
  return s;
}

Planner::Planner(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, const Schedule& schedule,
                 const GemmChooser& projection_gemm, const CacheSizes& caches, FpMath fpmath,
                 Bf16Unit bf16_unit, Quantize quantize, std::optional<Int8Unit> int8_unit)
    : config_(config),
      projection_gemm_(projection_gemm),
      layout_(config),
      plan_{.config = config, .shape = shape, .mode = mode, .isa = isa, .threads = schedule.threads,
            .caches = caches},
      s_(sizes_of(config, shape, isa)),
      schedule_(schedule),
      dropout_(mode == Mode::training && config.dropout > 0.0f && config.num_layers > 1) {
  regions_.a_panels.assign(static_cast<std::size_t>(s_.D * schedule_.batch_slices), -1);
  regions_.b_panels = regions_.a_panels;
  if (quantize == Quantize::int8_dynamic) plan_quantize(int8_unit, fpmath);
  if (fpmath == FpMath::bf16 && plan_.quantize == Quantize::none) {
    if (isa != Isa::avx512)
      plan_.notes.push_back(fmt::format("fpmath bf16: isa {} has no bf16 GEMM, every GEMM stays FP32", to_string(isa)));
    else {
      plan_.fpmath = FpMath::bf16;
      plan_.bf16_unit = bf16_unit;
      if (mode == Mode::training)
        plan_.notes.push_back("fpmath bf16 in training: the GEMMs on the weights (forward and backward data) and "
                              "the weight gradients read bf16 copies of their operands; the weights, their "
                              "gradients and every sum stay FP32");
    }
  }
}

// Quantize int8_dynamic (inference: make_plan refuses training): int8 GEMMs where the CPU has an
// int8 unit whose kernels this isa's plans may run (the AVX2 units' ymm kernels run on either
// isa, the AVX-512 units' only on avx512), else the plan's fpmath, and a note that says why.
void Planner::plan_quantize(std::optional<Int8Unit> int8_unit, FpMath fallback) {
  const std::string_view instead = fallback == FpMath::bf16 && plan_.isa == Isa::avx512 ? "bf16" : "FP32";
  std::int64_t widest = std::max<std::int64_t>(s_.H, s_.S);
  for (std::int64_t l = 0; l < s_.L; ++l) widest = std::max(widest, config_.layer_input_size(l));
  if (!generates_x64(plan_.isa))
    plan_.notes.push_back(fmt::format("quantize int8_dynamic: isa {} has no int8 GEMM, the GEMMs run {}",
                                      to_string(plan_.isa), instead));
  else if (!int8_unit)
    plan_.notes.push_back(fmt::format("quantize int8_dynamic: this CPU has no int8 unit (AMX-INT8, AVX512_VNNI, "
                                      "AVX-VNNI or AVX2), the GEMMs run {}",
                                      instead));
  else if (int8_kernel_isa(*int8_unit) == Isa::avx512 && plan_.isa != Isa::avx512)
    plan_.notes.push_back(fmt::format("quantize int8_dynamic: int8 unit {} needs AVX-512 kernels, the plan's isa is {}; "
                                      "the GEMMs run {}",
                                      to_string(*int8_unit), to_string(plan_.isa), instead));
  else if (widest > kMaxInt8K)
    plan_.notes.push_back(fmt::format("quantize int8_dynamic: a GEMM sums over {} k, past the {} whose int32 sums "
                                      "cannot overflow; the GEMMs run {}",
                                      widest, kMaxInt8K, instead));
  else {
    plan_.quantize = Quantize::int8_dynamic;
    plan_.int8_unit = *int8_unit;
    const ActivationQuantization aq = activation_quantization(*int8_unit);
    plan_.notes.push_back(fmt::format(
        "quantize int8_dynamic on {}: int8 weights (a scale per gate row), x and h quantized per row to uint8 ({} "
        "levels each side, zero point {}) as each GEMM reads them; gate math and states FP32",
        to_string(*int8_unit), aq.levels, aq.zero_point));
    if (*int8_unit == Int8Unit::avx2)
      plan_.notes.push_back(
          "int8 unit avx2: activations are quantized to 7 bits (q in [-63, 63], stored 1..127), because "
          "vpmaddubsw's int16 sums of two uint8 x int8 products saturate past 32767 (2 x 255 x 127 would); with 7 "
          "bits they reach at most 2 x 127 x 127, exact. Weights keep 8 bits");
  }
}

Plan Planner::build() {
  if (plan_.isa == Isa::avx2)
    plan_.notes.push_back(fmt::format(
        "isa avx2: ymm kernels in 16 registers (VEX only): gate kernels unroll at most {} vectors forward, {} "
        "backward (LSTM; {} slot registers), GEMM tiles at most {} rows of 16 columns (2 ymm each)",
        max_gate_unroll(CellKind::lstm, Pass::forward, Isa::avx2), max_gate_unroll(CellKind::lstm, Pass::backward, Isa::avx2),
        gate_slot_registers(Isa::avx2), gemm_max_rows(1, Isa::avx2)));
  if (plan_.isa == Isa::reference) plan_.notes.push_back("isa reference: scalar gate kernels");
  if (!generates_x64(plan_.isa)) plan_.notes.push_back("GEMMs run on OpenBLAS (no generated GEMM for this isa)");
  allocate_forward();
  plan_forward();
  plan_outputs();
  if (training()) {
    allocate_backward();
    plan_dy();
    plan_backward_data();
    plan_backward_weights();
  }
  overlay_workspace_of_calls(plan_);
  return std::move(plan_);
}

// A direction's steps as a lane of its own, or (split_directions, in_turn) after the other's.
void Planner::add_lane(Stage& stage, std::vector<Step>&& lane, bool in_turn) const {
  if ((schedule_.split_directions || in_turn) && !stage.lanes.empty()) {
    for (Step& step : lane) stage.lanes.front().push_back(std::move(step));
  } else {
    stage.lanes.push_back(std::move(lane));
  }
}

// Batch rows [first, second) of lane i of a direction split by rows (batch_slices lanes).
std::pair<std::int64_t, std::int64_t> Planner::batch_slice(int i) const {
  return {s_.N * i / schedule_.batch_slices, s_.N * (i + 1) / schedule_.batch_slices};
}

// The gate kernel of layer l's `pass` over all rows and units of direction `direction` (part 1:
// the reset-before GRU's n kernel); forward, it reads gx as layer l's projection lays it out.
// ONNX's activations other than the cell's own (inference only: make_plan refuses them in
// training) go into the descriptor of each direction that uses them; the emitters generate
// them in place of the cell's own on the same unroll (their fragments work through the same
// scratch registers in groups, whatever the number of slots).
KernelDesc Planner::gate_desc(Pass pass, std::int64_t l, int direction, int part) const {
  KernelDesc d = gate_kernel_desc(config_, plan_.shape, plan_.mode, plan_.isa, pass);
  d.part = static_cast<std::uint8_t>(part);
  d.set_activations(config_, direction);
  if (pass == Pass::forward && batch_major_gx(l)) d.gx_row_stride = static_cast<std::uint32_t>(s_.T * s_.GX);
  // Backward, the kernel reads dy (without a projection: with one it reads dcell, H wide).
  if (pass == Pass::backward && !s_.P && ld_dy(l) != s_.W) d.dy_row_stride = static_cast<std::uint32_t>(ld_dy(l));
  return d;
}

// The gate kernels of a recurrence: one per thread over the hidden units that thread's share of
// `units` (the GEMM whose output columns are the gate kernel's hidden units: the recurrent GEMM
// forward, and backward the recurrent gradient or, with a projection, dcell) covers. part 1: the
// n kernels of a GRU with the reset before, into reset_before->part1.
void Planner::split_gate_kernel(RecurrenceStep& r, Pass pass, const GemmStep& units, int part) {
  GateSplit& split = part ? r.reset_before.value().part1 : r.gate;
  if (!units.blocking.generated()) {
    split.thread_kernels = {split.kernel};
    split.thread_units = {0};
    return;
  }
  for (int t = 0; t < units.blocking.threads; ++t) {
    const auto [c0, c1] = units.blocking.thread_columns(t);
    KernelDesc d = gate_desc(pass, r.layer, r.direction, part);
    d.rows = static_cast<std::uint32_t>(r.batch);
    d.cols = static_cast<std::uint32_t>(c1 - c0);
    split.thread_kernels.push_back(c1 > c0 ? add_kernel_desc(d) : -1);
    split.thread_units.push_back(c0);
  }
}

// The time loop of layer l, direction d (the reverse direction walks t = T-1..0) over batch
// rows [n0, n1), with its gate kernel over all of them.
RecurrenceStep Planner::recurrence(Pass pass, std::int64_t l, int d, std::int64_t n0, std::int64_t n1) {
  RecurrenceStep r;
  r.what = fmt::format("{} recurrence l{} d{}", pass == Pass::forward ? "forward" : "backward", l, d);
  if (n1 - n0 < s_.N) r.what += fmt::format(" rows {}..{}", n0, n1);
  r.pass = pass;
  r.layer = l;
  r.direction = d;
  r.reverse = config_.reversed(d);
  r.steps = s_.T;
  r.batch = n1 - n0;
  r.batch_begin = n0;
  r.state = s_.S;
  r.ld_state = s_.W;
  r.carry_save = region_operand(plan_.workspace, regions_.carry_save[d], n0 * 2 * s_.H);
  r.gate.kernel = add_kernel_desc(gate_desc(pass, l, d));
  return r;
}

// A GEMM over a layer's T x N rows (of its input or input gradient) skips the rows of finished
// sequences (VariableLengths::rows_skipped).
void Planner::skip_finished_rows(GemmStep& g, bool rows_of_a_are_zero) const {
  g.finished = {.rows_skipped = true, .rows_zero = rows_of_a_are_zero, .sequences = s_.N};
}

}  // namespace planner

std::string_view to_string(Space s) {
  return s == Space::workspace ? "workspace" : s == Space::reserve ? "reserve" : "packed";
}

int WorkspacePlan::add(std::string name, Space space, std::size_t bytes) {
  std::size_t& end = this->bytes(space);
  regions.push_back({.name = std::move(name), .space = space, .offset = end, .size = bytes});
  end = align_to_region(end + bytes);
  return static_cast<int>(regions.size()) - 1;
}

std::int64_t gx_row_floats(const RnnConfig& config, Isa isa) {
  const std::int64_t gh = std::int64_t{config.gates()} * config.hidden_size;
  return generates_x64(isa) ? (gh + 15) / 16 * 16 : gh;
}

KernelDesc gate_kernel_desc(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, Pass pass) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(generates_x64(isa) || isa == Isa::cuda ? isa : Isa::reference);
  d.cell = static_cast<std::uint8_t>(config.cell);
  d.pass = static_cast<std::uint8_t>(pass);
  d.training = pass == Pass::forward && mode == Mode::training;
  d.hidden = static_cast<std::uint32_t>(config.hidden_size);
  d.rows = static_cast<std::uint32_t>(shape.batch);
  // With a projection the kernel's h is o*tanh(c), [N, H] per step, projected afterwards.
  d.ld_h = static_cast<std::uint32_t>(config.proj_size > 0 ? config.hidden_size
                                                          : config.directions() * config.hidden_size);
  d.cols = d.hidden;
  if (config.cell == CellKind::lstm && config.clip > 0.0f) d.clip_bits = std::bit_cast<std::uint32_t>(config.clip);
  if (config.gate_clip > 0.0f) d.gate_clip_bits = std::bit_cast<std::uint32_t>(config.gate_clip);
  if (config.relu_alpha > 0.0f) d.relu_alpha_bits = std::bit_cast<std::uint32_t>(config.relu_alpha);
  d.peephole = config.peephole;
  d.input_forget = config.input_forget;
  const std::int64_t gx_row = gx_row_floats(config, isa);
  if (pass == Pass::forward && gx_row != d.gates() * config.hidden_size)
    d.gx_row_stride = static_cast<std::uint32_t>(gx_row);
  const std::int64_t vectors = (config.hidden_size + vector_lanes(isa) - 1) / vector_lanes(isa);
  d.unroll = generates_x64(d.isa_kind())
                 ? static_cast<std::uint32_t>(std::min<std::int64_t>(max_gate_unroll(config.cell, pass, isa), vectors))
                 : 1;
  return d;
}

Plan make_plan(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads,
               const GemmChooser& projection_gemm, const CacheSizes& caches, FpMath fpmath,
               Bf16Unit bf16_unit, Quantize quantize, std::optional<Int8Unit> int8_unit) {
  validate(config, shape);
  if (isa == Isa::detect) throw Error("make_plan needs a concrete isa, not 'detect'");
  if (threads < 1 || threads > kMaxThreads)
    throw Error(fmt::format("threads must be in [1, {}], got {}", kMaxThreads, threads));
  // The gate kernels' backward (and the training forward that stores for it) knows the cells'
  // own activations only.
  if (config.custom_activations() && mode == Mode::training)
    throw Error(fmt::format("activations {} are for inference only (not in training)", describe_activations(config)));
  if (!caches.valid())
    throw Error(fmt::format("caches must have an L1d of at least 1 KiB and an L2 no smaller and at most 4 GiB, "
                            "got L1d {} L2 {} bytes",
                            caches.l1d, caches.l2));
  if (quantize == Quantize::int8_dynamic && mode == Mode::training)
    throw Error("quantize int8_dynamic is for inference only: prepare a training plan with quantize none");
  const planner::Schedule schedule = planner::choose_schedule(config, shape, mode, isa, threads, caches);
  return planner::Planner(config, shape, mode, isa, schedule, projection_gemm, caches, fpmath, bf16_unit, quantize,
                          int8_unit)
      .build();
}

}  // namespace rnnjit
