// rnn-jit plan: what the planner decides for a network, a shape and a mode, without compiling
// or running anything: every step (GEMMs, copies, recurrences with their gate kernels), every
// kernel with its descriptor and name, the workspace and reserve regions with offsets and sizes,
// and the totals. --json prints the same as exactly one JSON document.
//
//   rnn-jit plan                                  # the DeepSpeech2 LSTM, detected ISA
//   rnn-jit plan --cell gru --input-size 64 --hidden-size 128 --layers 2 --bidirectional
//                --seq 50 --batch 8 --mode train --isa avx2 --json
#include <fmt/format.h>

#include <memory>
#include <string>

#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "runtime/cpu_caches.hpp"
#include "runtime/gemm_tuner.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

struct PlanFlags {
  ConfigFlags config = ds2_config_flags();
  ShapeFlags shape = ds2_shape_flags();
  std::string isa;  // empty: detected
  int threads = 0;  // 0: the runtime's default
  std::string projection_gemm = "generated";
  std::string fpmath = "strict";
  std::string quantize = "none";
  bool json = false;
};

int plan(const PlanFlags& f) {
  const RnnConfig config = build_config(f.config);
  const Shape shape = build_shape(f.shape);
  const Mode mode = build_mode(f.shape);
  validate_flags(config, shape);
  const Isa isa = build_isa(f.isa);
  const ProjectionGemm projection_gemm = build_projection_gemm(f.projection_gemm);
  const Quantize quantize = build_quantize(f.quantize);
  const std::optional<Int8Unit> int8 = quantize == Quantize::int8_dynamic ? int8_unit(isa) : std::nullopt;
  // As Rnn::prepare: where int8 cannot run, bf16 where this CPU runs it (the plan's note says so).
  FpMath fpmath = quantize == Quantize::int8_dynamic && !int8 && bf16_unit() ? FpMath::bf16 : build_fpmath(f.fpmath);
  const std::optional<Bf16Unit> unit = fpmath == FpMath::bf16 ? bf16_unit() : std::nullopt;
  if (fpmath == FpMath::bf16 && !unit) {
    if (!f.json) fmt::print("fpmath bf16: this CPU (or OS) runs neither AMX-BF16 nor AVX512_BF16, so the plan is FP32\n");
    fpmath = FpMath::strict;
  }

  const CacheSizes caches = detect_caches();
  const Plan p = make_plan(config, shape, mode, isa, build_threads(f.threads),
                           projection_chooser(projection_gemm, caches, isa), caches, fpmath,
                           unit.value_or(Bf16Unit::amx), quantize, int8);
  if (f.json) {
    fmt::print("{}\n", to_json(p));
  } else {
    fmt::print("{}", to_text(p));
  }
  return kExitOk;
}

CommandAction setup_plan(CLI::App& sub) {
  auto f = std::make_shared<PlanFlags>();
  add_config_flags(sub, f->config, /*required=*/false);
  add_shape_flags(sub, f->shape, /*required=*/false);
  add_isa_flag(sub, f->isa);
  add_threads_flag(sub, f->threads);
  add_projection_gemm_flag(sub, f->projection_gemm);
  add_fpmath_flag(sub, f->fpmath);
  add_quantize_flag(sub, f->quantize);
  sub.add_flag("--json", f->json, "print the plan as one JSON document");
  sub.footer(
      "Defaults: the DeepSpeech2 LSTM (lstm, I=H=800, 1 layer, T=300, N=20, infer). Nothing is compiled, except "
      "with --projection-gemm measured, which times the two GEMMs.");
  return [f] { return plan(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(plan, "print the plan (steps, kernels, workspace and reserve regions) for a shape", setup_plan);

}  // namespace rnnjit::cli
