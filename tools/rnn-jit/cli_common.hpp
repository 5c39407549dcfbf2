// rnn-jit: what the subcommands share: the flags that describe a network, a call shape and a
// backend, their validation, the exit-code conventions, and the subcommand registry.
//
// Adding a subcommand is one file, tools/rnn-jit/cmd_<name>.cpp, ending in one line:
//
//   RNNJIT_CLI_COMMAND(name, "one-line summary", setup_name);
//
// where `CommandAction setup_name(CLI::App& sub)` adds the subcommand's flags to `sub` (binding
// them to state it owns, e.g. a shared_ptr captured by the action) and returns the action that
// main() runs after a successful parse. The action returns the exit status; it throws UsageError
// for bad flag values (exit 2) and anything else derived from std::exception for runtime
// failures (exit 1). Messages go to stderr as one line "rnn-jit: error: ...".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::cli {

// Exit statuses.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // runtime failure: unreadable or mismatched files, ...
inline constexpr int kExitUsage = 2;    // bad command line: unknown flag, missing or invalid value

// A command-line mistake found after parsing (a value that fails validation). Name the flag.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

// ---- the subcommand registry ----

using CommandAction = std::function<int()>;
using CommandSetup = CommandAction (*)(CLI::App& sub);

struct CommandSpec {
  const char* name;
  const char* summary;
  CommandSetup setup;
};

// Registers a subcommand (called from static initialisers via RNNJIT_CLI_COMMAND).
bool register_command(const CommandSpec& spec);
// All registered subcommands, sorted by name.
std::vector<CommandSpec> commands();

#define RNNJIT_CLI_COMMAND(name, summary, setup)                                           \
  [[maybe_unused]] static const bool rnnjit_cli_registered_##name =                        \
      ::rnnjit::cli::register_command(::rnnjit::cli::CommandSpec{#name, summary, setup})

// ---- shared flags ----

// --cell --input-size --hidden-size --layers --direction (--bidirectional) and the features:
// --proj-size --clip --dropout --batch-first --gate-clip --peephole --input-forget
struct ConfigFlags {
  std::string cell = "lstm";
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t layers = 1;
  bool bidirectional = false;  // the same as --direction bidirectional
  std::string direction;       // forward | reverse | bidirectional (empty: forward)
  std::int64_t proj_size = 0;
  float clip = 0.0f;
  float dropout = 0.0f;
  bool batch_first = false;
  float gate_clip = 0.0f;
  float relu_alpha = 0.0f;
  bool peephole = false;
  bool input_forget = false;
  bool no_bias = false;
  bool independent_stacks = false;
  // ONNX's activations: Name[:alpha[:beta]] per role (f, g, h of the cell), comma-separated,
  // direction 0's roles then (bidirectional) direction 1's. Empty: the cell's own.
  std::string activations;
};
// With required = true, --cell, --input-size and --hidden-size must be given; otherwise the
// values already in `flags` are the defaults.
void add_config_flags(CLI::App& app, ConfigFlags& flags, bool required = true);
// Validates (throws UsageError naming the flag) and builds the configuration.
RnnConfig build_config(const ConfigFlags& flags);

// --seq --batch --mode infer|train
struct ShapeFlags {
  std::int64_t seq = 0;
  std::int64_t batch = 0;
  std::string mode = "infer";
};
void add_shape_flags(CLI::App& app, ShapeFlags& flags, bool required = true);
Shape build_shape(const ShapeFlags& flags);  // throws UsageError naming --seq or --batch
Mode build_mode(const ShapeFlags& flags);    // throws UsageError naming --mode
// Checks the configuration and shape together (sizes that overflow); throws UsageError.
void validate_flags(const RnnConfig& config, const Shape& shape);

// --threads N: the threads a CPU plan is made for and runs on; 0 means the runtime's default
// (RNNJIT_NUM_THREADS, else every hardware thread), as for Options::threads.
void add_threads_flag(CLI::App& app, int& threads);
int build_threads(int value);  // the thread count, or UsageError naming --threads

// --projection-gemm generated|openblas|measured (Options::projection_gemm)
void add_projection_gemm_flag(CLI::App& app, std::string& value);
ProjectionGemm build_projection_gemm(const std::string& value);  // or UsageError naming the flag

// --fpmath strict|bf16 (Options::fpmath)
void add_fpmath_flag(CLI::App& app, std::string& value);
FpMath build_fpmath(const std::string& value);  // or UsageError naming the flag
Bf16Unit build_bf16_unit(const std::string& value);  // or UsageError naming the flag

// --quantize none|int8 (Options::quantize)
void add_quantize_flag(CLI::App& app, std::string& value);
Quantize build_quantize(const std::string& value);  // or UsageError naming the flag
Int8Unit build_int8_unit(const std::string& value);  // or UsageError naming --int8-unit

// --sms and --shared-per-block: the GPU that `dump --target cuda` and `cache warm` shape the
// persistent recurrent kernels for (codegen/cuda/persistent_source.hpp); default: an H100/H200
// SXM's 132 SMs and 232448 bytes of shared memory a block may opt in to.
struct GpuShapeFlags {
  int sms = 132;
  std::int64_t shared_per_block = 232448;
};
void add_gpu_shape_flags(CLI::App& app, GpuShapeFlags& flags);

// --backend reference|jit|auto, --threads, --projection-gemm, --fpmath and --quantize
struct BackendFlags {
  std::string backend = "auto";
  int threads = 0;
  std::string projection_gemm = "generated";
  std::string fpmath = "strict";
  std::string quantize = "none";
};
void add_backend_flags(CLI::App& app, BackendFlags& flags);
Options build_options(const BackendFlags& flags);  // throws UsageError naming the bad flag

// ---- defaults and flags of the subcommands that need a shape (demo, plan, dump) ----

// The LSTM of DeepSpeech2: cell lstm, I=H=800, one unidirectional layer; T=300, N=20, infer.
inline ConfigFlags ds2_config_flags() {
  return ConfigFlags{.cell = "lstm", .input_size = 800, .hidden_size = 800, .layers = 1, .bidirectional = false};
}
inline ShapeFlags ds2_shape_flags() { return ShapeFlags{.seq = 300, .batch = 20, .mode = "infer"}; }

// --isa avx512|avx2|reference; empty means detected (RNNJIT_ISA honoured).
void add_isa_flag(CLI::App& app, std::string& isa);
// The ISA named by `value` (throws UsageError naming `flag`), or detect_isa() when empty.
Isa build_isa(const std::string& value, const char* flag = "--isa");

// Whether stdout is a terminal (refuse to write raw bytes there).
bool stdout_is_terminal();

// ---- small helpers for subcommands ----

// "T=300 N=20"
std::string describe(const Shape& shape);
// Floating-point operations of one forward pass over all layers and directions:
// 2*T*N*G*H*(I_l+H) per layer-direction.
double forward_flops(const RnnConfig& config, const Shape& shape);
// The GEMM FLOPs (2*N*G*H*S each, a layer-direction) of the products with a zero h0 or an
// unread dh0, which bench, whose calls pass neither hx nor dhx, does not credit: forward's
// first-step products h0 W_hh^T (written as zeros), and in training backward data's last
// (dh0 = dgates_0 W_hh, read only by dhx) and dW_hh's terms in h0 (left out of its sum, but
// where a forward direction's dW_hh reads dW_ih's panels).
double zero_state_flops(const RnnConfig& config, const Shape& shape, bool training);
// Bytes of W_hh [G*H, S] of one layer and direction.
double w_hh_bytes(const RnnConfig& c);
// Bytes of the recurrent weights (W_hh, and W_hr with a projection) of one layer and direction:
// what a recurrent step reads, and backward data's step reads again.
double recurrent_weight_bytes(const RnnConfig& c);

}  // namespace rnnjit::cli
