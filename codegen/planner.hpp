// rnnjit: the planner, a pure function from (config, shape, mode, ISA, threads, caches) to a
// Plan. It owns every decision: the schedule, the GEMMs and their operands, kernel descriptors
// (unroll, tails), and the workspace/reserve regions. It emits no code.
//
// Schedule, per layer and direction (MXNet's CPU design): one GEMM projects the inputs of all
// T steps at once; then each step runs the recurrent GEMM and one fused gate kernel. The two
// directions of a bidirectional layer are concurrent lanes. Backward data walks the layers
// top-down with the same structure; backward weights is a few large GEMMs per layer.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "codegen/plan.hpp"

namespace rnnjit {

// Who computes an input projection of an AVX-512 plan, and why (a line for the plan's notes;
// empty: nothing worth telling).
struct GemmChoice {
  bool openblas = false;
  std::string why;
};
// Asked once per input projection (C = A W^T over all T steps, `group` columns per gate group,
// split over `threads`). Empty: the generated GEMM. The runtime supplies a fixed or a measured
// choice (runtime/gemm_tuner.hpp); the planner stays a pure function of its arguments.
using GemmChooser = std::function<GemmChoice(const GemmStep& g, std::int64_t group, int threads)>;

// Throws Error for invalid input. `isa` must not be Isa::detect. `threads` share the work of
// each step (generated GEMMs only; OpenBLAS plans run single-lane steps on one thread).
// `caches`: the per-core caches of the machine the plan runs on (runtime: detect_caches()).
// `fpmath` bf16: the inference GEMMs on packed weights run on bf16 operands with `bf16_unit`
// (AVX-512 plans; the caller has checked that the CPU runs it: bf16_unit()); other plans note
// that they stay FP32.
// `quantize` int8_dynamic (inference only: a training plan throws Error): the GEMMs on packed
// weights run on int8 with `int8_unit`, the unit this CPU runs (the caller's int8_unit()); with
// none, or an isa without an int8 GEMM, the plan keeps `fpmath`'s GEMMs and its notes say why.
Plan make_plan(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads = 1,
               const GemmChooser& projection_gemm = {}, const CacheSizes& caches = {},
               FpMath fpmath = FpMath::strict, Bf16Unit bf16_unit = Bf16Unit::amx,
               Quantize quantize = Quantize::none, std::optional<Int8Unit> int8_unit = std::nullopt);

// Tiles `g` for the generated GEMM (columns in groups of `group`, panels split over `threads`)
// and appends the microkernels it needs to `kernels`. g.blocking.packed_b says whether B is
// packed. Used by the planner, and by tests that run a single GEMM.
// recurrent: a GEMM repeated every step of a recurrence, each thread on its panels. Otherwise a
// one-shot GEMM whose threads share tiles. `isa`: the microkernels' (avx512 or avx2).
GemmStep plan_generated_gemm(GemmStep g, std::int64_t group, int threads, std::vector<KernelDesc>& kernels,
                             bool recurrent = false, const CacheSizes& caches = {}, Isa isa = Isa::avx512);

// The row stride of a layer's gx (its input projection, G*H columns) on `isa`: on AVX-512 and
// AVX2 whole 16-float vectors, so that the projection can write gx with non-temporal stores (GemmBlocking::stream_c
// needs 64-byte aligned rows) and the gate kernels read aligned rows; the GEMM writes the padding
// columns too, as zeros (GemmStep::c_whole_vectors).
std::int64_t gx_row_floats(const RnnConfig& config, Isa isa);

// The descriptor of the gate kernel for one recurrence (exposed for tests and the CLI).
KernelDesc gate_kernel_desc(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, Pass pass);

}  // namespace rnnjit
