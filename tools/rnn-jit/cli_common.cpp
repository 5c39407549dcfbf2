#include "tools/rnn-jit/cli_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "rnnjit/weights.hpp"
#include "runtime/thread_team.hpp"

namespace rnnjit::cli {
namespace {

std::vector<CommandSpec>& registry() {
  static std::vector<CommandSpec> specs;
  return specs;
}

// Library messages name fields (hidden_size, seq_len, ...); on the command line, name flags.
std::string fields_to_flags(std::string msg) {
  static const std::pair<const char*, const char*> kFields[] = {
      {"input_size", "--input-size"}, {"hidden_size", "--hidden-size"}, {"num_layers", "--layers"},
      {"seq_len", "--seq"},           {"batch", "--batch"},               {"proj_size", "--proj-size"},
      {"clip", "--clip"},             {"dropout", "--dropout"},           {"reverse", "--direction reverse"},
      {"gate_clip", "--gate-clip"},   {"peephole", "--peephole"},         {"input_forget", "--input-forget"},
      {"independent_stacks", "--independent-stacks"}, {"relu_alpha", "--relu-alpha"},
  };
  auto is_word = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; };
  for (const auto& [field, flag] : kFields) {
    const std::size_t n = std::strlen(field);
    for (std::size_t pos = msg.find(field); pos != std::string::npos; pos = msg.find(field, pos)) {
      const bool starts = pos == 0 || !is_word(msg[pos - 1]);
      const bool ends = pos + n == msg.size() || !is_word(msg[pos + n]);
      if (starts && ends) {
        msg.replace(pos, n, flag);
        pos += std::strlen(flag);
      } else {
        pos += n;
      }
    }
  }
  return msg;
}

void check_positive(std::int64_t value, const char* flag) {
  if (value <= 0) throw UsageError(fmt::format("{} must be positive, got {}", flag, value));
}

}  // namespace

bool register_command(const CommandSpec& spec) {
  registry().push_back(spec);
  return true;
}

std::vector<CommandSpec> commands() {
  std::vector<CommandSpec> specs = registry();
  std::sort(specs.begin(), specs.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return std::strcmp(a.name, b.name) < 0; });
  return specs;
}

void add_config_flags(CLI::App& app, ConfigFlags& f, bool required) {
  CLI::Option* cell = app.add_option(
      "--cell", f.cell, "cell: rnn_relu, rnn_tanh, rnn_sigmoid, lstm, gru or gru_reset_before (ONNX's default GRU)");
  CLI::Option* in = app.add_option("--input-size", f.input_size, "input features I");
  CLI::Option* hid = app.add_option("--hidden-size", f.hidden_size, "hidden features H");
  app.add_option("--layers", f.layers, "stacked layers L")->capture_default_str();
  app.add_flag("--bidirectional", f.bidirectional, "run each layer in both directions (D=2): --direction bidirectional");
  app.add_option("--direction", f.direction,
                 "forward, reverse (read the sequence from its last step), bidirectional, or bidirectional_sum "
                 "(y = h_fwd + h_bwd, S wide: oneDNN's bidirectional_sum) (default forward)");
  app.add_option("--proj-size", f.proj_size, "LSTM projection size P, 0 < P < H (0: none)")->capture_default_str();
  app.add_option("--clip", f.clip, "LSTM cell clip: c is clamped to [-clip, clip] (0: none)")->capture_default_str();
  app.add_option("--dropout", f.dropout, "dropout probability between layers in training (0: none)")
      ->capture_default_str();
  app.add_flag("--batch-first", f.batch_first, "x, y and their gradients are [N, T, *]");
  app.add_option("--gate-clip", f.gate_clip,
                 "every gate's pre-activation is clamped to [-gate-clip, gate-clip] (ONNX's clip; 0: none)")
      ->capture_default_str();
  app.add_option("--relu-alpha", f.relu_alpha,
                 "rnn_relu: the slope below zero, h = pre > 0 ? pre : alpha * pre (leaky ReLU; 0: none)")
      ->capture_default_str();
  app.add_flag("--peephole", f.peephole,
               "LSTM peepholes (ONNX's P): parameters weight_peephole_l{k}[_reverse] [3, H], rows i, f, o");
  app.add_flag("--input-forget", f.input_forget, "LSTM: f = 1 - i (ONNX's input_forget)");
  app.add_flag("--no-bias", f.no_bias, "no bias parameters (PyTorch's bias=False): no bias_ih/bias_hh blocks");
  app.add_flag("--independent-stacks", f.independent_stacks,
               "bidirectional: each direction a stack of its own layers, merged only at the top (a oneDNN "
               "primitive of several layers); weight_ih above layer 0 is [G*H, S]");
  app.add_option("--activations", f.activations,
                 "ONNX's activations (inference): Name[:alpha[:beta]] per role f, g, h the cell has, comma-separated, "
                 "direction 0's then direction 1's, e.g. HardSigmoid:0.2:0.5,Softsign,Tanh for an LSTM (default: the "
                 "cell's own)");
  if (required) {
    cell->required();
    in->required();
    hid->required();
  } else {
    cell->capture_default_str();
    in->capture_default_str();
    hid->capture_default_str();
  }
}

// --activations: the list in ONNX's order, roles of direction 0 then of direction 1.
static void set_activations(RnnConfig& c, const std::string& list) {
  const int roles = activation_role_count(c.cell);
  std::vector<std::string> items;
  for (std::size_t at = 0;;) {
    const std::size_t comma = list.find(',', at);
    items.push_back(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (static_cast<int>(items.size()) != roles * c.directions())
    throw UsageError(fmt::format("--activations: {} has {} role{} per direction and {} direction{}: expected {} "
                                 "functions, got {}",
                                 to_string(c.cell), roles, roles == 1 ? "" : "s", c.directions(),
                                 c.directions() == 1 ? "" : "s", roles * c.directions(), items.size()));
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::vector<std::string> parts;
    for (std::size_t at = 0;;) {
      const std::size_t colon = items[i].find(':', at);
      parts.push_back(items[i].substr(at, colon == std::string::npos ? std::string::npos : colon - at));
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
    if (parts.size() > 3) throw UsageError(fmt::format("--activations: '{}' is not Name[:alpha[:beta]]", items[i]));
    ActivationFunction fn;
    try {
      fn.kind = parse_activation(parts[0]);
      if (parts.size() > 1) fn.alpha = std::stof(parts[1]);
      if (parts.size() > 2) fn.beta = std::stof(parts[2]);
    } catch (const Error& e) {
      throw UsageError(fmt::format("--activations: {}", e.what()));
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--activations: '{}' is not Name[:alpha[:beta]] with numbers", items[i]));
    }
    c.activations[i / static_cast<std::size_t>(roles)][i % static_cast<std::size_t>(roles)] = fn;
  }
}

RnnConfig build_config(const ConfigFlags& f) {
  RnnConfig c;
  try {
    c.cell = parse_cell(f.cell);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--cell: {}", e.what()));
  }
  check_positive(f.input_size, "--input-size");
  check_positive(f.hidden_size, "--hidden-size");
  check_positive(f.layers, "--layers");
  c.input_size = f.input_size;
  c.hidden_size = f.hidden_size;
  c.num_layers = f.layers;
  c.bidirectional = f.bidirectional;
  if (!f.direction.empty()) {
    const bool sum = f.direction == "bidirectional_sum";
    if (f.direction != "forward" && f.direction != "reverse" && f.direction != "bidirectional" && !sum)
      throw UsageError(fmt::format(
          "--direction: unknown direction '{}' (expected forward, reverse, bidirectional or bidirectional_sum)",
          f.direction));
    if (f.bidirectional && f.direction != "bidirectional" && !sum)
      throw UsageError(fmt::format("--bidirectional contradicts --direction {}", f.direction));
    c.bidirectional = f.direction == "bidirectional" || sum;
    c.reverse = f.direction == "reverse";
    c.sum_directions = sum;
  }
  c.proj_size = f.proj_size;
  c.clip = f.clip;
  c.dropout = f.dropout;
  c.batch_first = f.batch_first;
  c.gate_clip = f.gate_clip;
  c.relu_alpha = f.relu_alpha;
  c.peephole = f.peephole;
  c.input_forget = f.input_forget;
  c.bias = !f.no_bias;
  c.independent_stacks = f.independent_stacks;
  if (!f.activations.empty()) set_activations(c, f.activations);
  try {
    validate(c);
  } catch (const Error& e) {
    throw UsageError(fields_to_flags(e.what()));
  }
  return c;
}

void add_shape_flags(CLI::App& app, ShapeFlags& f, bool required) {
  CLI::Option* seq = app.add_option("--seq", f.seq, "sequence length T");
  CLI::Option* batch = app.add_option("--batch", f.batch, "batch size N");
  app.add_option("--mode", f.mode, "infer or train")->capture_default_str();
  if (required) {
    seq->required();
    batch->required();
  } else {
    seq->capture_default_str();
    batch->capture_default_str();
  }
}

Shape build_shape(const ShapeFlags& f) {
  check_positive(f.seq, "--seq");
  check_positive(f.batch, "--batch");
  return Shape{f.seq, f.batch};
}

Mode build_mode(const ShapeFlags& f) {
  if (f.mode == "infer" || f.mode == "inference") return Mode::inference;
  if (f.mode == "train" || f.mode == "training") return Mode::training;
  throw UsageError(fmt::format("--mode: unknown mode '{}' (expected infer or train)", f.mode));
}

void validate_flags(const RnnConfig& config, const Shape& shape) {
  try {
    validate(config, shape);
  } catch (const Error& e) {
    throw UsageError(fields_to_flags(e.what()));
  }
}

void add_gpu_shape_flags(CLI::App& app, GpuShapeFlags& flags) {
  app.add_option("--sms", flags.sms, "--target cuda / warm: the SMs of the GPU the persistent kernels are shaped for")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--shared-per-block", flags.shared_per_block,
                 "--target cuda / warm: the shared memory (bytes) a block may opt in to on that GPU")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
      ->capture_default_str();
}

void add_threads_flag(CLI::App& app, int& threads) {
  app.add_option("--threads", threads,
                 fmt::format("threads the plan is made for and runs on, 1 to {} (default 0: RNNJIT_NUM_THREADS, else "
                             "every hardware thread)",
                             kMaxThreads))
      ->capture_default_str();
}

int build_threads(int value) {
  if (value == 0) return ThreadTeam::default_threads();  // a bad RNNJIT_NUM_THREADS is a runtime error (exit 1)
  if (value < 1 || value > kMaxThreads)
    throw UsageError(fmt::format("--threads must be in [1, {}] (or 0: the default), got {}", kMaxThreads, value));
  return value;
}

void add_projection_gemm_flag(CLI::App& app, std::string& value) {
  app.add_option("--projection-gemm", value,
                 "who computes the input projections on AVX-512: generated, openblas, or measured (whichever of "
                 "the two runs the shape faster, timed when planned; the plan's notes give both times)")
      ->capture_default_str();
}

ProjectionGemm build_projection_gemm(const std::string& value) {
  try {
    return parse_projection_gemm(value);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--projection-gemm: {}", e.what()));
  }
}

void add_fpmath_flag(CLI::App& app, std::string& value) {
  app.add_option("--fpmath", value,
                 "strict (FP32 GEMMs) or bf16 (the GEMMs, inference and training, may round their inputs to bf16 and "
                 "run on AMX-BF16 tiles or AVX512_BF16 dot products, summing in FP32; FP32 where the CPU has neither)")
      ->capture_default_str();
}

FpMath build_fpmath(const std::string& value) {
  try {
    return parse_fpmath(value);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--fpmath: {}", e.what()));
  }
}

Bf16Unit build_bf16_unit(const std::string& value) {
  try {
    return parse_bf16_unit(value);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--bf16-unit: {}", e.what()));
  }
}

void add_quantize_flag(CLI::App& app, std::string& value) {
  app.add_option("--quantize", value,
                 "none, or int8 (inference: int8 weights with a scale per gate row, x and h quantized per row as each "
                 "GEMM reads them, gate math FP32; on AMX-INT8, AVX512-VNNI, AVX-VNNI or AVX2 (7-bit activations), else bf16 "
                 "or FP32 with a note in the plan)")
      ->capture_default_str();
}

Quantize build_quantize(const std::string& value) {
  try {
    return parse_quantize(value);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--quantize: {}", e.what()));
  }
}

Int8Unit build_int8_unit(const std::string& value) {
  try {
    return parse_int8_unit(value);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--int8-unit: {}", e.what()));
  }
}

void add_backend_flags(CLI::App& app, BackendFlags& f) {
  app.add_option("--backend", f.backend, "reference, jit or auto")->capture_default_str();
  add_threads_flag(app, f.threads);
  add_projection_gemm_flag(app, f.projection_gemm);
  add_fpmath_flag(app, f.fpmath);
  add_quantize_flag(app, f.quantize);
}

Options build_options(const BackendFlags& f) {
  Options o;
  o.threads = build_threads(f.threads);
  o.projection_gemm = build_projection_gemm(f.projection_gemm);
  o.fpmath = build_fpmath(f.fpmath);
  o.quantize = build_quantize(f.quantize);
  if (f.backend == "auto") {
    o.backend = Backend::automatic;
  } else if (f.backend == "reference") {
    o.backend = Backend::reference;
  } else if (f.backend == "jit") {
    o.backend = Backend::jit;
  } else {
    throw UsageError(fmt::format("--backend: unknown backend '{}' (expected reference, jit or auto)", f.backend));
  }
  return o;
}

void add_isa_flag(CLI::App& app, std::string& isa) {
  app.add_option("--isa", isa,
                 "instruction set of the generated code: avx512, avx2 or reference (default: the CPU's best, or "
                 "RNNJIT_ISA when set)");
}

Isa build_isa(const std::string& value, const char* flag) {
  if (value.empty()) return detect_isa();  // a bad RNNJIT_ISA is a runtime error (exit 1), not a flag's
  try {
    return parse_isa(value);
  } catch (const Error& e) {
    throw UsageError(fmt::format("{}: {}", flag, e.what()));
  }
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string describe(const Shape& shape) { return fmt::format("T={} N={}", shape.seq_len, shape.batch); }

double forward_flops(const RnnConfig& c, const Shape& s) {
  double total = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    total += 2.0 * static_cast<double>(s.seq_len) * static_cast<double>(s.batch) * c.gates() *
             static_cast<double>(c.hidden_size) * static_cast<double>(c.layer_input_size(l) + c.state_size()) *
             c.directions() +
         2.0 * static_cast<double>(s.seq_len * s.batch) * static_cast<double>(c.proj_size * c.hidden_size) *
             c.directions();  // the projection
  return total;
}

double zero_state_flops(const RnnConfig& c, const Shape& s, bool training) {
  const double products = (training ? 3.0 : 1.0) * c.directions() * static_cast<double>(c.num_layers);
  return 2.0 * static_cast<double>(s.batch) * (w_hh_bytes(c) / 4.0) * products;
}

double w_hh_bytes(const RnnConfig& c) {
  return 4.0 * static_cast<double>(WeightLayout(c).block(0, 0, ParamKind::weight_hh).size);
}

double recurrent_weight_bytes(const RnnConfig& c) {
  const double w_hr = c.proj_size > 0 ? static_cast<double>(WeightLayout(c).block(0, 0, ParamKind::weight_hr).size) : 0;
  return w_hh_bytes(c) + 4.0 * w_hr;
}

}  // namespace rnnjit::cli
