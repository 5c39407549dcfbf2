// The input of fuzz_config and its checks, shared by fuzz/fuzz_config.cpp (libFuzzer) and
// tests/test_fuzz_regressions.cpp (which replays fuzz/corpus/fuzz_config/ in the normal build).
//
// Bytes -> RnnConfig + Shape + Mode + ISA + threads, read with LLVM's FuzzedDataProvider (or any
// type with its ConsumeIntegralInRange/ConsumeIntegral/ConsumeBool). Every input reaches
// validate(): sizes come small (1..48), from a table of edge values (0, negatives, 2^31-1, 2^34,
// INT64_MIN/MAX, ...) or as raw 64-bit integers, and the cell byte may name no cell at all.
// validate() must accept or throw rnnjit::Error with a one-line message, consistently between its
// two overloads; what it accepts must have element counts that neither overflow nor exceed its
// limit. Accepted inputs of a cheap size are planned for the fuzzed ISA and thread count:
// make_plan() must succeed (or reject exactly an ISA of `detect` and threads outside [1, 256]),
// and check_extents() must find every operand inside its buffer or region.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "codegen/plan.hpp"
#include "codegen/plan_extents.hpp"
#include "codegen/planner.hpp"
#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit::fuzz {

struct ConfigInput {
  int regime = 0;  // 0/1: small sizes, 2: edge values, 3: raw 64-bit integers
  RnnConfig config;
  Shape shape;
  Mode mode = Mode::inference;
  Isa isa = Isa::reference;
  int threads = 1;
};

inline constexpr std::int64_t kEdgeValues[] = {
    0, 1, 2, -1, -2, 15, 16, 17, 63, 64, 65, 1023, 1024, 1025, 2047, 2048,
    std::numeric_limits<std::int32_t>::max(), std::int64_t{1} << 31, std::int64_t{1} << 32,
    (std::int64_t{1} << 34) - 1, std::int64_t{1} << 34, (std::int64_t{1} << 34) + 1, std::int64_t{1} << 40,
    std::int64_t{1} << 62, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(),
    -(std::int64_t{1} << 31), 3037000499, 3037000500, 131072, 46341, 65536};

template <typename Provider>
std::int64_t size_value(Provider& in, int regime, std::int64_t small_max) {
  switch (regime) {
    case 2: {
      const std::size_t n = sizeof(kEdgeValues) / sizeof(kEdgeValues[0]);
      const std::size_t pick = in.template ConsumeIntegralInRange<std::size_t>(0, n);
      return pick == n ? in.template ConsumeIntegralInRange<std::int64_t>(1, small_max) : kEdgeValues[pick];
    }
    case 3: return in.template ConsumeIntegral<std::int64_t>();
    default: return in.template ConsumeIntegralInRange<std::int64_t>(1, small_max);
  }
}

template <typename Provider>
ConfigInput decode_config_input(Provider& in) {
  ConfigInput c;
  c.regime = in.template ConsumeIntegralInRange<int>(0, 3);
  c.config.cell = static_cast<CellKind>(c.regime <= 1 ? in.template ConsumeIntegralInRange<int>(0, 5)
                                                      : in.template ConsumeIntegral<std::uint8_t>());
  c.config.input_size = size_value(in, c.regime, 48);
  c.config.hidden_size = size_value(in, c.regime, 48);
  c.config.num_layers = size_value(in, c.regime, 4);
  c.config.bidirectional = in.ConsumeBool();
  c.shape.seq_len = size_value(in, c.regime, 12);
  c.shape.batch = size_value(in, c.regime, 12);
  c.mode = in.ConsumeBool() ? Mode::training : Mode::inference;
  // cuda: the device plan whose gate kernels `rnn-jit dump --target cuda` generates as CUDA source.
  static constexpr Isa kIsas[] = {Isa::reference, Isa::avx2, Isa::avx512, Isa::detect, Isa::cuda};
  c.isa = kIsas[in.template ConsumeIntegralInRange<int>(0, 4)];
  c.threads = in.template ConsumeIntegralInRange<int>(-2, 260);
  // The features, valid or not (validate() must name what is wrong): decoded last so that the
  // older corpus entries keep their meaning.
  static constexpr float kFloats[] = {0.0f, 0.0f, 0.3f, 1.0f, -0.5f, 2.5f, std::numeric_limits<float>::infinity(),
                                      std::numeric_limits<float>::quiet_NaN()};
  c.config.reverse = in.ConsumeBool();
  c.config.batch_first = in.ConsumeBool();
  c.config.clip = kFloats[in.template ConsumeIntegralInRange<int>(0, 7)];
  c.config.dropout = kFloats[in.template ConsumeIntegralInRange<int>(0, 7)];
  c.config.proj_size = in.ConsumeBool() ? size_value(in, c.regime, 48) : 0;
  c.config.gate_clip = kFloats[in.template ConsumeIntegralInRange<int>(0, 7)];
  c.config.peephole = in.ConsumeBool();
  c.config.input_forget = in.ConsumeBool();
  c.config.bias = !in.ConsumeBool();
  c.config.sum_directions = in.ConsumeBool();
  c.config.independent_stacks = in.ConsumeBool();
  c.config.relu_alpha = kFloats[in.template ConsumeIntegralInRange<int>(0, 7)];
  return c;
}

inline std::string describe_input(const ConfigInput& c) {
  return fmt::format("regime {} cell {} I={} H={} L={} bidirectional={} T={} N={} {} isa {} threads {} reverse={} "
                     "batch_first={} clip={} dropout={} proj_size={} gate_clip={} peephole={} input_forget={} bias={} "
                     "sum_directions={} independent_stacks={} relu_alpha={}",
                     c.regime, static_cast<int>(c.config.cell), c.config.input_size, c.config.hidden_size,
                     c.config.num_layers, c.config.bidirectional, c.shape.seq_len, c.shape.batch, to_string(c.mode),
                     to_string(c.isa), c.threads, c.config.reverse, c.config.batch_first, c.config.clip,
                     c.config.dropout, c.config.proj_size, c.config.gate_clip, c.config.peephole,
                     c.config.input_forget, c.config.bias, c.config.sum_directions,
                     c.config.independent_stacks, c.config.relu_alpha);
}

// Planning is metadata only, but its cost still grows with sizes, layers and threads: plan what
// is cheap, which is every input of the small regimes and the small accepted inputs of the others.
inline bool cheap_to_plan(const RnnConfig& c, const Shape& s) {
  return c.input_size <= 4096 && c.hidden_size <= 4096 && c.num_layers <= 8 && s.seq_len <= 4096 && s.batch <= 4096;
}

// Runs every check on one input. Returns an empty string if all hold, else what failed.
inline std::string check_config_input(const ConfigInput& in) {
  const RnnConfig& c = in.config;
  const Shape& s = in.shape;
  std::string why;
  auto accepts = [&why](const std::function<void()>& f) {
    try {
      f();
      return true;
    } catch (const Error& e) {
      why = e.what();
      return false;
    }
  };
  auto one_line = [&why] { return !why.empty() && why.find('\n') == std::string::npos; };

  const bool config_ok = accepts([&] { validate(c); });
  if (!config_ok && !one_line()) return "validate(config) threw an empty or multi-line message: " + why;
  const bool shape_ok = accepts([&] { validate(c, s); });
  if (!shape_ok && !one_line()) return "validate(config, shape) threw an empty or multi-line message: " + why;
  if (shape_ok && !config_ok) return "validate(config, shape) accepted what validate(config) rejects";
  if (!config_ok) return {};

  // An accepted configuration: its weight layout is consistent and within the limit.
  constexpr std::int64_t kLimit = std::int64_t{1} << 34;
  const WeightLayout layout(c);
  if (layout.total_elements() <= 0 || layout.total_elements() > kLimit) return "weight count out of range";
  const int blocks_per_direction = 2 + (c.bias ? 2 : 0) + (c.proj_size > 0) + c.peephole;
  if (layout.blocks().size() != static_cast<std::size_t>(blocks_per_direction * c.num_layers * c.directions()))
    return "wrong number of parameter blocks";
  if (!shape_ok) return {};
  for (const std::int64_t n : {x_elements(c, s), y_elements(c, s), state_elements(c, s), cell_state_elements(c, s)})
    if (n <= 0 || n > kLimit) return "tensor element count out of range";
  if (!cheap_to_plan(c, s)) return {};

  Plan plan;
  const bool plan_ok = accepts([&] { plan = make_plan(c, s, in.mode, in.isa, in.threads); });
  // Every cell plans for every concrete ISA, cuda included.
  const bool should_plan = in.isa != Isa::detect && in.threads >= 1 && in.threads <= 256;
  if (plan_ok && !should_plan) return "make_plan accepted isa detect or a thread count outside [1, 256]";
  if (!plan_ok && should_plan) return "make_plan rejected a valid input: " + why;
  if (!plan_ok) return one_line() ? std::string() : "make_plan threw an empty or multi-line message: " + why;
  if (!accepts([&] { check_extents(plan); })) return "check_extents: " + why;
  if (plan.threads < 1 || plan.threads > in.threads) return "the plan uses more threads than it was given";
  (void)to_text(plan);
  return {};
}

}  // namespace rnnjit::fuzz
